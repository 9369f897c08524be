//! A reply that is going nowhere: one that has fallen into a loop, or pastes read's output. Small models decoding greedily repeat a line (or a few)
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

/// Whether `text` holds read's header line (`[read PATH · sha256 HEX · …`): a reply that pastes
/// read's output into a call. write refuses such content and edit's old_string cannot match it,
/// so the rest of the reply is wasted: in the task suite the 1.5B model spent 1,024 tokens
/// (about 100 s) on each of three such writes, numbered lines and all, before the cut-off.
pub fn pasted_read_header(text: &str) -> Option<&str> {
    let at = text.find("[read /")?;
    let line = &text[at..];
    let end = [line.find('\n'), line.find("\\n")].into_iter().flatten().min().unwrap_or(line.len());
    let line = &line[..end];
    // Complete: the hash and the rest up to the closing bracket (the note quotes it whole).
    let close = line.find(" · sha256 ").and_then(|at| line[at..].find(']').map(|c| at + c))?;
    Some(&line[..=close])
}

/// Whether a reply that pastes read's header is to be stopped now: not where the header opens
/// write's `content`, which write takes with the header and line numbers left out (the model
/// means the whole file); anywhere else the rest of the reply is wasted.
pub fn stop_at_pasted_header(text: &str) -> bool {
    if pasted_read_header(text).is_none() {
        return false;
    }
    let before = text[..text.find("[read /").unwrap_or(0)].trim_end_matches('"').trim_end();
    !before.ends_with("\"content\":")
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
    fn read_output_pasted_into_a_reply_is_found_once_its_header_is_complete() {
        // What the 1.5B model wrote (native protocol), stopped here rather than at 1,024 tokens.
        let text = "<tool_call>\n{\"name\": \"write\", \"arguments\": {\"path\": \"/ws/stats.c\", \"content\": \"[read /ws/stats.c · sha256 9d8ad0e66d9c · 49 lines · full]\\n1\\t/* stats */";
        assert_eq!(pasted_read_header(text), Some("[read /ws/stats.c · sha256 9d8ad0e66d9c · 49 lines · full]"));
        // Not yet: the header is still being written.
        assert_eq!(pasted_read_header("{\"content\": \"[read /ws/stats.c · sha"), None);
        assert_eq!(pasted_read_header("{\"content\": \"[read /ws/stats.c · sha256 9d8ad0e · 49 li"), None);
        // A path in brackets, or a word "read", is not read's header.
        assert_eq!(pasted_read_header("[read /ws/notes.txt first]\nthen sha256 · it"), None);
        assert_eq!(pasted_read_header("I read /ws/stats.c · sha256 is shown"), None);
        // As write's content it runs on (write takes it), anywhere else it stops.
        assert!(!stop_at_pasted_header(text));
        assert!(!stop_at_pasted_header(&text.replace("\"content\": ", "\"content\":")));
        assert!(stop_at_pasted_header(&text.replace("\"content\"", "\"new_string\"")));
        assert!(stop_at_pasted_header(
            "Here is the file:\n[read /ws/a.c · sha256 9d8ad0e66d9c · 2 lines · full]\n1\tx"
        ));
    }

    #[test]
    fn code_that_repeats_punctuation_or_varies_is_not_a_loop() {
        assert_eq!(looping_block(&"    }\n".repeat(10)), None);
        assert_eq!(looping_block(&"\n".repeat(10)), None);
        let varied: String = (0..20).map(|i| format!("assert f({i}) == {}\n", i * 2)).collect();
        assert_eq!(looping_block(&varied), None);
    }
}
