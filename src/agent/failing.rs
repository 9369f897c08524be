//! The command a task names as its check, when the last run of it failed. In the 2026-12-07
//! suite run the 1.5B model ran `python3 main.py` after renaming a function in one file of
//! four, read the ImportError that named the next file, and answered "done" with the list of
//! files still to change; a `sed` that deleted half a class exited 2 and the run ended "done"
//! too. Output that the model has just seen says the task is not finished; the loop says so,
//! with the lines that name the fault.

/// The most lines of the output a note quotes.
const MAX_LINES: usize = 4;
/// The most characters of one quoted line.
const MAX_LINE_CHARS: usize = 240;

/// The last run of a command the task names, which failed, with nothing changed after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failing {
    /// The command as the task names it.
    pub command: String,
    /// "exit code 1", or how it ended without one.
    pub status: String,
    /// The lines of its output that say what failed.
    pub lines: Vec<String>,
}

impl Failing {
    /// From bash's result text (the output, then `Exit code: N`). `None` when the command
    /// could not be found or run (126, 127): the fault is not in the workspace's files, and
    /// no edit fixes it.
    pub fn from_output(command: &str, output: &str) -> Option<Failing> {
        let status = output
            .lines()
            .rev()
            .find_map(|l| l.strip_prefix("Exit code: "))
            .map_or_else(|| "it did not exit 0".to_string(), |s| format!("exit code {s}"));
        if status == "exit code 126" || status == "exit code 127" {
            return None;
        }
        Some(Failing { command: command.to_string(), status, lines: error_lines(output) })
    }

    /// The note for an answer given while the check still fails. `gave_up`: the model gave up,
    /// and the note says when giving up is right after all.
    pub fn note(&self, gave_up: bool) -> String {
        let said =
            if self.lines.is_empty() { String::new() } else { format!(" It said:\n{}\n", self.lines.join("\n")) };
        let next = if gave_up {
            "Read the file and line that names and fix it there, then run it again. Give up only if what fails is outside the workspace (a program or a service that is not here)."
        } else {
            "Fix what that names (read the file and line it points at), then run it again."
        };
        format!(
            "[note] `{cmd}`, which the task names, failed the last time you ran it ({status}), and no call has changed anything since, so the task is not done.{said}{next}",
            cmd = self.command,
            status = self.status,
        )
    }
}

/// The lines of a failed command's output that say what failed: error messages (`NameError:`,
/// `error:`, `FAIL`), compiler locations (`main.go:5:2: undefined: x`), and the last place a
/// Python traceback names; the first two and the last of them. Without any, its last lines.
fn error_lines(output: &str) -> Vec<String> {
    let lines: Vec<&str> = output
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty() && !l.starts_with("Exit code: ") && !l.starts_with("Note: "))
        .collect();
    let mut picked: Vec<&str> = lines.iter().copied().filter(|l| says_what_failed(l.trim_start())).collect();
    picked.dedup();
    if picked.len() > 3 {
        picked = [&picked[..2], &picked[picked.len() - 1..]].concat();
    }
    if let Some(at) = lines.iter().rev().find(|l| l.trim_start().starts_with("File \"")) {
        let at = at.trim();
        if !picked.iter().any(|p| p.trim() == at) {
            picked.insert(picked.len().saturating_sub(1), at);
        }
    }
    if picked.is_empty() {
        picked = lines[lines.len().saturating_sub(3)..].to_vec();
    }
    picked.into_iter().take(MAX_LINES).map(|l| l.trim().chars().take(MAX_LINE_CHARS).collect()).collect()
}

/// An error message (`NameError: x`, `error: …`, `FAIL`, `not ok`, `panicked`) or a compiler's
/// location (`main.go:5:2: undefined: x`).
fn says_what_failed(line: &str) -> bool {
    let words = || line.split(|c: char| !c.is_alphanumeric() && c != '_').filter(|w| !w.is_empty());
    let named = words()
        .any(|w| w.starts_with(|c: char| c.is_ascii_uppercase()) && (w.ends_with("Error") || w.ends_with("Exception")));
    let error = words().any(|w| w.eq_ignore_ascii_case("error") || w.eq_ignore_ascii_case("errors"));
    let marker = ["FAIL", "not ok", "panicked"].iter().any(|m| line.contains(m));
    let location = line.split_whitespace().next().and_then(|t| t.strip_suffix(':')).is_some_and(|t| {
        let mut parts = t.split(':');
        let file = parts.next().unwrap_or_default();
        let numbers: Vec<&str> = parts.collect();
        !file.is_empty()
            && (1..=2).contains(&numbers.len())
            && numbers.iter().all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    });
    named || error || marker || location
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_python_traceback_gives_its_error_and_the_last_place_it_names() {
        let out = "Traceback (most recent call last):\n  File \"/ws/main.py\", line 1, in <module>\n    from invoice import render\n  File \"/ws/orders.py\", line 1, in <module>\n    from pricing import apply_discount, calc_total\nImportError: cannot import name 'calc_total' from 'pricing' (/ws/pricing.py)\nExit code: 1";
        let f = Failing::from_output("python3 main.py", out).unwrap();
        assert_eq!(f.status, "exit code 1");
        assert_eq!(
            f.lines,
            [
                "File \"/ws/orders.py\", line 1, in <module>",
                "ImportError: cannot import name 'calc_total' from 'pricing' (/ws/pricing.py)"
            ]
        );
        let note = f.note(false);
        assert!(
            note.starts_with(
                "[note] `python3 main.py`, which the task names, failed the last time you ran it (exit code 1)"
            ),
            "{note}"
        );
        assert!(note.contains("ImportError: cannot import name"), "{note}");
    }

    #[test]
    fn compiler_errors_keep_the_first_two_and_the_last() {
        let out = "./a.go:3:2: undefined: x\n./a.go:4:2: undefined: y\n./b.go:9:1: missing return\n./c.go:1:1: z\ntoo many errors\nExit code: 1";
        let f = Failing::from_output("go build", out).unwrap();
        assert_eq!(f.lines, ["./a.go:3:2: undefined: x", "./a.go:4:2: undefined: y", "too many errors"]);
    }

    #[test]
    fn output_without_an_error_line_gives_its_last_lines() {
        let out = "one\ntwo\nthree\nfour\nExit code: 2";
        assert_eq!(Failing::from_output("bash test.sh", out).unwrap().lines, ["two", "three", "four"]);
    }

    #[test]
    fn a_command_that_is_not_there_is_not_a_fault_in_the_files() {
        assert_eq!(Failing::from_output("go build", "bash: go: command not found\nExit code: 127"), None);
    }
}
