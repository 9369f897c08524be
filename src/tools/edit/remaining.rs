//! After one replacement that changed a single name (or term), whether it is still in the file.
//!
//! Qwen2.5-Coder-1.5B, asked to replace every lowercase "colour" with "color" (replace_all),
//! edited the first line alone (`The colour of the sky.` → `The color of the sky.`) and
//! answered that it was done, in 2 of 3 conformance probes; renaming a function at its
//! definition left its calls in the same file as they were. The edit's result shows only the
//! lines around the change, so nothing in front of the model said that more were left. This
//! note says so, and leaves the choice to the model: the other places may be meant to stay.

/// The most line numbers the note lists.
const MAX_LINES: usize = 10;

/// Words whose other occurrences say nothing about this edit: literals that many unrelated
/// lines hold (`DEBUG = True` → `DEBUG = False` says nothing about the other `True`s).
const LITERALS: &[&str] = &["True", "False", "None", "true", "false", "null", "nil", "undefined", "NULL"];

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The word a replacement changed, when `old` and `new` differ in exactly one name-like word
/// (an identifier of at least 3 characters): `("The colour of", "The color of")` →
/// `("colour", "color")`. None when more than one word changed, the change is not a name, or
/// the name is removed rather than replaced.
pub(super) fn changed_word<'a>(old: &'a str, new: &'a str) -> Option<(&'a str, &'a str)> {
    let (old_word, new_word) = widened(old, new, is_word);
    let identifier = |w: &str| {
        w.chars().count() >= 3
            && w.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_')
            && w.chars().all(is_word)
    };
    let names = identifier(old_word) && identifier(new_word) && old_word != new_word;
    (names && !LITERALS.contains(&old_word)).then_some((old_word, new_word))
}

/// A character of a term: what is not space, a quote, a bracket or a separator.
fn is_term(c: char) -> bool {
    !c.is_whitespace() && !"\"'`,;=()[]{}<>".contains(c)
}

/// The term a replacement changed, when `old` and `new` differ inside one term, a run of
/// characters between spaces, quotes or separators, that holds a letter and punctuation
/// (`python:3.9-slim`, `db-staging-1.internal`, `v1.4-rc2`): an image, a host, a version
/// with a name in it, which a task changes everywhere it is. Updating the Dockerfile from
/// `python:3.9-slim` to 3.12, the 1.5B model edited the first of its two `FROM` lines and
/// answered "done" (the suite, 2026-12-07). A bare number (`replicas: 2`, `"1.2.3"`) is a
/// value many unrelated lines hold, and is not a term.
pub(super) fn changed_term<'a>(old: &'a str, new: &'a str) -> Option<(&'a str, &'a str)> {
    let (old_term, new_term) = widened(old, new, is_term);
    let term = |t: &str| {
        t.chars().count() >= 5
            && t.chars().all(is_term)
            && t.chars().any(char::is_alphabetic)
            && t.chars().any(|c| ".:/-@".contains(c))
    };
    (term(old_term) && term(new_term) && old_term != new_term).then_some((old_term, new_term))
}

/// The part of `old` that differs from `new`, and what `new` has there, each widened to whole
/// runs of characters for which `inner` holds: `colo|u|r` is the word `colour`.
fn widened<'a>(old: &'a str, new: &'a str, inner: fn(char) -> bool) -> (&'a str, &'a str) {
    let (prefix, suffix) = common_ends(old, new);
    let start = old[..prefix].char_indices().rev().take_while(|&(_, c)| inner(c)).last().map_or(prefix, |(i, _)| i);
    let old_end = old.len() - suffix;
    let grow: usize = old[old_end..].chars().take_while(|&c| inner(c)).map(char::len_utf8).sum();
    (&old[start..old_end + grow], &new[start..new.len() - suffix + grow])
}

/// The bytes `old` and `new` have in common at their start, and then at their end (not
/// overlapping the start).
fn common_ends(old: &str, new: &str) -> (usize, usize) {
    let prefix: usize = old.chars().zip(new.chars()).take_while(|(a, b)| a == b).map(|(a, _)| a.len_utf8()).sum();
    let room = old.len().min(new.len()) - prefix;
    let suffix: usize = old[prefix..]
        .chars()
        .rev()
        .zip(new[prefix..].chars().rev())
        .take_while(|(a, b)| a == b)
        .map(|(a, _)| a.len_utf8())
        .sum::<usize>()
        .min(room);
    (prefix, suffix)
}

/// The 1-based lines of `text` where `word` occurs whole (not inside a longer run of
/// characters for which `inner` holds), same case.
fn lines_with(text: &str, word: &str, inner: fn(char) -> bool) -> Vec<usize> {
    let mut lines = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let whole = line.match_indices(word).any(|(i, _)| {
            let before = line[..i].chars().next_back();
            let after = line[i + word.len()..].chars().next();
            !before.is_some_and(inner) && !after.is_some_and(inner)
        });
        if whole {
            lines.push(n + 1);
        }
    }
    lines
}

/// The note for a single replacement (not replace_all) of `old` by `new` that left `text`,
/// when the one name (or term) it changed still occurs in `text`.
pub(super) fn note(text: &str, old: &str, new: &str) -> Option<String> {
    let (word, replacement, lines, whole) = match changed_word(old, new) {
        Some((w, r)) => (w, r, lines_with(text, w, is_word), "whole word"),
        None => {
            let (t, r) = changed_term(old, new)?;
            (t, r, lines_with(text, t, is_term), "whole")
        }
    };
    if lines.is_empty() {
        return None;
    }
    let mut shown: Vec<String> = lines.iter().take(MAX_LINES).map(usize::to_string).collect();
    if lines.len() > MAX_LINES {
        shown.push(format!("and {} more", lines.len() - MAX_LINES));
    }
    let (is, those, them, stay) = if lines.len() == 1 {
        ("line", "it", "it", "it stays as it is")
    } else {
        ("lines", "those", "them", "they stay as they are")
    };
    Some(format!(
        "\"{word}\" ({whole}, same case) is still in the file at {is} {}: this edit changed one place. If {those} should change too, edit {them}, or edit again with old_string \"{word}\", new_string \"{replacement}\" and replace_all: true; if {stay}, nothing more is needed.",
        shown.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_one_changed_word_is_found_whole() {
        assert_eq!(changed_word("The colour of the sky.", "The color of the sky."), Some(("colour", "color")));
        assert_eq!(
            changed_word("def calc_total(items):", "def compute_order_total(items):"),
            Some(("calc_total", "compute_order_total"))
        );
        assert_eq!(changed_word("function hello(name) {", "function greet(name) {"), Some(("hello", "greet")));
        assert_eq!(changed_word("colour", "color"), Some(("colour", "color")));
    }

    #[test]
    fn values_literals_and_several_words_are_not_names() {
        assert_eq!(changed_word("DEBUG = True", "DEBUG = False"), None);
        assert_eq!(changed_word("replicas: 2", "replicas: 4"), None);
        assert_eq!(changed_word("FROM python:3.9-slim", "FROM python:3.12-slim"), None);
        assert_eq!(changed_term("replicas: 2", "replicas: 4"), None);
        assert_eq!(changed_term("version = \"1.2.3\"", "version = \"1.2.4\""), None);
        assert_eq!(changed_term("a = b + c", "a = b - c"), None);
        assert_eq!(changed_term("DEBUG=on", "DEBUG=off"), None);
        assert_eq!(changed_term("FROM python:3.9-slim AS a", "FROM python:3.9-slim AS b"), None);
        assert_eq!(changed_word("a = b + c", "a = b - c"), None);
        assert_eq!(changed_word("return x if ok else y", "return y if ok else x"), None);
        assert_eq!(changed_word("import os, sys", "import os"), None);
        assert_eq!(changed_word("same", "same"), None);
        assert_eq!(changed_word("x = 1", "x = 1\ny = 2"), None);
    }

    #[test]
    fn a_term_with_a_name_and_punctuation_is_found_whole() {
        assert_eq!(
            changed_term("FROM python:3.9-slim AS build", "FROM python:3.12-slim AS build"),
            Some(("python:3.9-slim", "python:3.12-slim"))
        );
        assert_eq!(
            changed_term("DB_HOST=db-staging-1.internal", "DB_HOST=db-staging-2.internal"),
            Some(("db-staging-1.internal", "db-staging-2.internal"))
        );
        assert_eq!(changed_term("image: \"redis:6\"", "image: \"redis:7.2\""), Some(("redis:6", "redis:7.2")));
        let text = "FROM python:3.12-slim AS build\nRUN x\nFROM python:3.9-slim\n# not python:3.9-slimmer\n";
        let n = note(text, "FROM python:3.9-slim AS build", "FROM python:3.12-slim AS build").unwrap();
        assert!(n.starts_with("\"python:3.9-slim\" (whole, same case) is still in the file at line 3:"), "{n}");
        assert!(n.contains("old_string \"python:3.9-slim\", new_string \"python:3.12-slim\" and replace_all"), "{n}");
    }

    #[test]
    fn the_note_lists_whole_word_lines_of_the_same_case() {
        let text = "The color of the sky.\nA colour chart.\nColour stays.\ncolourful\nThe colour of the sea.\n";
        let n = note(text, "The colour of the sky.", "The color of the sky.").unwrap();
        assert!(n.starts_with("\"colour\" (whole word, same case) is still in the file at lines 2, 5:"), "{n}");
        assert!(n.contains("old_string \"colour\", new_string \"color\" and replace_all: true"), "{n}");
        assert_eq!(note("The color.\n", "The colour.", "The color."), None);
    }
}
