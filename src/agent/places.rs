//! Where the run's searches found what a question names. Asked "Where is MAX_UPLOAD_RETRIES
//! defined?", the 1.5B model grepped it, was shown `src/net/backoff.rs:6:pub const
//! MAX_UPLOAD_RETRIES: u32 = 12;`, and answered "The value is 12." twice, after a note asking
//! for the file; asked which file defines `normalize_sku`, it was shown
//! `invoicer/catalog/sku.py:8:def normalize_sku(raw):` under a not-found error and gave up
//! (the suite, 2026-12-07). A note that quotes the lines is one the model can answer from.

/// The most result lines kept, the latest ones.
const MAX_KEPT: usize = 40;
/// The most lines a note quotes.
const MAX_QUOTED: usize = 3;

/// Result lines of the run's greps that name a file: `PATH:LINE:TEXT`, or a bare `PATH`
/// (`files_with_matches`), each with the pattern that found it.
#[derive(Debug, Default)]
pub struct Places {
    found: Vec<(String, String)>,
}

impl Places {
    /// Keep the lines of a grep's output (or of its error's "elsewhere in the workspace" list)
    /// that start with an absolute path.
    pub fn note_grep(&mut self, pattern: &str, output: &str) {
        for line in output.lines().filter(|l| l.starts_with('/') && !l.contains(' ') || is_match_line(l)) {
            let entry = (line.to_string(), pattern.to_string());
            if !self.found.contains(&entry) {
                self.found.push(entry);
            }
        }
        let over = self.found.len().saturating_sub(MAX_KEPT);
        self.found.drain(..over);
    }

    /// The lines that show where a term of `task` is, definitions first, as a note quotes them.
    pub fn of(&self, task: &str) -> Vec<&str> {
        let terms = terms(task);
        let mut lines: Vec<&str> = self
            .found
            .iter()
            .filter(|(line, pattern)| terms.iter().any(|t| line.contains(t.as_str()) || pattern.contains(t.as_str())))
            .map(|(line, _)| line.as_str())
            .collect();
        lines.sort_by_key(|l| !defines(l));
        lines.truncate(MAX_QUOTED);
        lines
    }
}

/// `PATH:LINE:TEXT`, as grep's content mode prints a match.
fn is_match_line(line: &str) -> bool {
    line.starts_with('/')
        && line.split(':').nth(1).is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether a match line looks like where something is defined, not where it is used.
fn defines(line: &str) -> bool {
    let text = line.splitn(3, ':').nth(2).unwrap_or_default();
    let first = text.split_whitespace().next().unwrap_or_default();
    const KEYWORDS: &[&str] = &[
        "def",
        "class",
        "fn",
        "pub",
        "const",
        "static",
        "let",
        "var",
        "function",
        "func",
        "type",
        "struct",
        "enum",
        "interface",
        "export",
        "module",
        "package",
        "impl",
        "trait",
        "macro_rules!",
    ];
    KEYWORDS.contains(&first) || text.trim_start().split_once('=').is_some_and(|(l, _)| !l.trim().contains(' '))
}

/// The names a question asks about: words of four characters or more that are identifiers
/// or paths (`MAX_UPLOAD_RETRIES`, `normalize_sku`, `parseConfig`, `/api/projects/:id`), not
/// words of prose.
fn terms(task: &str) -> Vec<String> {
    task.split(|c: char| c.is_whitespace() || "`'\"(),;?".contains(c))
        .map(|w| w.trim_end_matches(['.', ':', '!']))
        .filter(|w| w.chars().count() >= 4)
        .filter(|w| {
            let camel = w.chars().zip(w.chars().skip(1)).any(|(a, b)| a.is_lowercase() && b.is_uppercase());
            let caps = w.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
                && w.chars().filter(char::is_ascii_uppercase).count() >= 4;
            w.contains('_') || w.contains('/') || camel || caps
        })
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lines_that_name_the_asked_for_identifier_are_quoted_definitions_first() {
        let mut places = Places::default();
        // A not-found error's list, as grep gives it.
        places.note_grep(
            "normalize_sku",
            "Error [not_found]: /ws/invoicer/invoicer.ts does not exist.\nElsewhere in the workspace the pattern matches 3 lines in 3 files; the first in each file:\n/ws/docs/CHANGELOG.md:4:- `normalize_sku` accepts SKUs without the dash.\n/ws/invoicer/catalog/sku.py:8:def normalize_sku(raw):\n/ws/invoicer/catalog/store.py:3:from .sku import normalize_sku",
        );
        places.note_grep("TIMEOUT", "/ws/a.py:1:TIMEOUT = 3");
        assert_eq!(
            places.of("Which file defines the function normalize_sku? Give me its path."),
            [
                "/ws/invoicer/catalog/sku.py:8:def normalize_sku(raw):",
                "/ws/docs/CHANGELOG.md:4:- `normalize_sku` accepts SKUs without the dash.",
                "/ws/invoicer/catalog/store.py:3:from .sku import normalize_sku",
            ]
        );
        // A bare path from files_with_matches counts by the pattern that found it.
        places.note_grep("MAX_UPLOAD_RETRIES", "/ws/src/net/backoff.rs\n[2 files]");
        assert_eq!(
            places.of("Where is MAX_UPLOAD_RETRIES defined, and what is its value?"),
            ["/ws/src/net/backoff.rs"]
        );
        // A question with no identifier in it quotes nothing.
        assert!(places.of("Where is the retry limit set?").is_empty());
    }

    #[test]
    fn terms_are_identifiers_and_paths_not_prose() {
        assert_eq!(terms("Where is MAX_UPLOAD_RETRIES defined?"), ["MAX_UPLOAD_RETRIES"]);
        assert_eq!(terms("Which file handles DELETE /api/projects/:id in this app?"), ["DELETE", "/api/projects/:id"]);
        assert_eq!(terms("Where is `parseConfig` called from?"), ["parseConfig"]);
        assert!(terms("Where is the function that formats dates?").is_empty());
    }
}
