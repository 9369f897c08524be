//! A reply that has fallen into a loop. Small models decoding greedily repeat a line (or a few)
//! until the reply budget is spent: in the task suite a 1.5B model wrote one `assertEqual` line
//! forty times, 1,024 tokens and 80 s a turn, and then the same reply again after the
//! cut-off note. The adapter stops such a reply early, and the loop tells the model which
//! line it repeated.

/// How many times a one-line block must end the reply for it to be a loop.
const SINGLE_REPEATS: usize = 6;
/// The same for a block of two or three lines.
const BLOCK_REPEATS: usize = 4;
/// The longest block looked for.
const MAX_BLOCK: usize = 3;
/// A block needs this many letters or digits: code repeats `}`, `*/` and blank lines.
const MIN_ALNUM: usize = 4;

/// The block of lines that the end of `text` repeats over and over, when it does. Lines are
/// split at newlines and at JSON's `\n` escape (a JSON-turn reply holds its text in a string);
/// the line after the last break, still being written, is not counted.
pub fn looping_block(text: &str) -> Option<String> {
    let lines = complete_lines(text);
    for size in 1..=MAX_BLOCK {
        let repeats = if size == 1 { SINGLE_REPEATS } else { BLOCK_REPEATS };
        let span = size * repeats;
        if lines.len() < span {
            continue;
        }
        let tail = &lines[lines.len() - span..];
        let block = &tail[..size];
        let alnum: usize = block.iter().map(|l| l.chars().filter(|c| c.is_alphanumeric()).count()).sum();
        // A block of one line repeated twice is that line's loop, found at size 1.
        let trivial = size > 1 && block.iter().all(|l| l == &block[0]);
        if alnum >= MIN_ALNUM && !trivial && tail.chunks(size).all(|c| c == block) {
            return Some(block.join("\n"));
        }
    }
    None
}

/// The lines of `text` that a break ends, trimmed.
fn complete_lines(text: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut start = 0;
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let width = match bytes[i] {
            b'\n' => 1,
            b'\\' if bytes.get(i + 1) == Some(&b'n') => 2,
            // An escaped backslash is not the start of an escape.
            b'\\' => {
                i += 2;
                continue;
            }
            _ => {
                i += 1;
                continue;
            }
        };
        lines.push(text[start..i].trim());
        i += width;
        start = i;
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_repeated_at_the_end_is_a_loop() {
        let line = "        self.assertEqual(slugify(\"Hello, World!\"), \"hello-world\")";
        let text =
            format!("Here is the file:\n\nimport unittest\n{}self.assertEqual(sl", format!("{line}\n").repeat(6));
        assert_eq!(looping_block(&text).as_deref(), Some(line.trim()));
        // Five is not yet a loop.
        let text = format!("import unittest\n{}", format!("{line}\n").repeat(5));
        assert_eq!(looping_block(&text), None);
    }

    #[test]
    fn json_escapes_break_lines_too() {
        let text = format!("{{\"answer\":\"tests:\\n{}", "    check(a, b)\\n".repeat(6));
        assert_eq!(looping_block(&text).as_deref(), Some("check(a, b)"));
        // `\\n` is a backslash and an `n`, not a break.
        let text = format!("{{\"answer\":\"{}", "check(a, b)\\\\n".repeat(8));
        assert_eq!(looping_block(&text), None);
    }

    #[test]
    fn a_block_of_lines_repeated_is_a_loop() {
        let text = format!("start\n{}", "x = f(1)\ny = g(2)\n".repeat(4));
        assert_eq!(looping_block(&text).as_deref(), Some("x = f(1)\ny = g(2)"));
    }

    #[test]
    fn code_that_repeats_punctuation_or_varies_is_not_a_loop() {
        assert_eq!(looping_block(&"    }\n".repeat(10)), None);
        assert_eq!(looping_block(&"\n".repeat(10)), None);
        let varied: String = (0..20).map(|i| format!("assert f({i}) == {}\n", i * 2)).collect();
        assert_eq!(looping_block(&varied), None);
    }
}
