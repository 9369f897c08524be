//! grep's pattern: checked on its own before the matcher is built, so that constructs from
//! other regex dialects (look-around, backreferences) are named with what to search instead,
//! and every error quotes the model's own pattern.

use std::borrow::Cow;

use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use regex_syntax::{ast, hir};

use super::super::walk;
use super::super::{ErrorCode, ToolError};
use super::{NEST_LIMIT, REGEX_SIZE_LIMIT};

/// Parse and translate the pattern on its own first (as grep-regex will, with the same flags),
/// to name constructs from other regex dialects and to quote errors against the model's own
/// pattern. Returns the text to build the matcher from.
///
/// grep-regex parses every pattern inside `(?:…)`. For a pattern that parses on its own, the
/// one way that wrapper changes the parse is a verbose-mode `#` comment running to the end of
/// the pattern, which would swallow the closing `)`: such a pattern is given a newline, which
/// ends the comment and, in verbose mode, is ignored.
pub(super) fn check_syntax(pattern: &str, case_insensitive: bool, multiline: bool) -> Result<Cow<'_, str>, ToolError> {
    let parsed = ast::parse::ParserBuilder::new().nest_limit(NEST_LIMIT).build().parse_with_comments(pattern);
    let parsed = match parsed {
        Ok(p) => p,
        Err(err) => {
            let span = err.span();
            let (start, end) = (span.start.offset.min(pattern.len()), span.end.offset.min(pattern.len()));
            let unknown = matches!(err.kind(), ast::ErrorKind::FlagUnrecognized | ast::ErrorKind::EscapeUnrecognized);
            if unknown && let Some(e) = other_dialect(pattern, start) {
                return Err(e);
            }
            return Err(match err.kind() {
                ast::ErrorKind::UnsupportedLookAround => look_around(pattern, start, end),
                ast::ErrorKind::UnsupportedBackreference => backreference(pattern, &pattern[start..end]),
                ast::ErrorKind::NestLimitExceeded(_) => {
                    too_large(pattern, &format!("its groups nest deeper than {NEST_LIMIT} levels"))
                }
                kind => invalid_regex(pattern, &syntax_error(pattern, &err.to_string(), span, kind)),
            });
        }
    };
    let translated = hir::translate::TranslatorBuilder::new()
        .utf8(false)
        .case_insensitive(case_insensitive)
        .multi_line(true)
        .dot_matches_new_line(multiline)
        .crlf(true)
        .build()
        .translate(pattern, &parsed.ast);
    if let Err(err) = translated {
        return Err(invalid_regex(pattern, &syntax_error(pattern, &err.to_string(), err.span(), err.kind())));
    }
    let open_comment =
        parsed.comments.last().is_some_and(|c| c.span.end.offset == pattern.len()) && !pattern.ends_with('\n');
    Ok(if open_comment { Cow::Owned(format!("{pattern}\n")) } else { Cow::Borrowed(pattern) })
}

/// The reason part of an invalid-regex error. regex-syntax's own rendering (the pattern, carets
/// under the error, the error) quotes the whole pattern: it is kept for a short pattern, and a
/// long one shows the characters around the error only.
fn syntax_error(pattern: &str, rendered: &str, span: &ast::Span, kind: &dyn std::fmt::Display) -> String {
    let total = pattern.chars().count();
    if total <= walk::ECHO_CHARS {
        return rendered.to_string();
    }
    const BEFORE: usize = 60;
    const WIDTH: usize = 60;
    const AFTER: usize = 20;
    // Spans fall on character boundaries; `get` makes sure of it.
    let at = |offset: usize| pattern.get(..offset).map_or(total, |s| s.chars().count());
    let start = at(span.start.offset);
    let end = at(span.end.offset).clamp(start + 1, start + WIDTH);
    let (from, to) = (start.saturating_sub(BEFORE), (end + AFTER).min(total));
    // One character per column, so that the carets line up: line breaks and other control
    // characters are shown as visible stand-ins.
    let window: String = pattern
        .chars()
        .skip(from)
        .take(to - from)
        .map(|c| match c {
            '\n' => '↵',
            '\t' => '→',
            c if c.is_control() => '\u{fffd}',
            c => c,
        })
        .collect();
    let (lead, tail) = (if from > 0 { "…" } else { "" }, if to < total { "…" } else { "" });
    let pad = " ".repeat(start - from + usize::from(from > 0));
    format!(
        "regex parse error at character {} of {total}:\n    {lead}{window}{tail}\n    {pad}{}\nerror: {kind}",
        start + 1,
        "^".repeat(end - start)
    )
}

pub(super) fn build_matcher(
    pattern: &str,
    checked: &str,
    case_insensitive: bool,
    multiline: bool,
) -> Result<RegexMatcher, ToolError> {
    let mut b = RegexMatcherBuilder::new();
    b.case_insensitive(case_insensitive)
        .multi_line(true)
        .size_limit(REGEX_SIZE_LIMIT)
        // grep-regex's `(?:…)` around the pattern is one more level of nesting.
        .nest_limit(NEST_LIMIT + 1)
        // As `rg --crlf`: `^` and `$` also match next to a `\r\n` line end (read shows lines
        // without their CR, so `$` must match before it), and `.` matches neither `\r` nor `\n`.
        // crlf sets the line terminator as well: it is set again just below.
        .crlf(true);
    if multiline {
        b.line_terminator(None).dot_matches_new_line(true);
    } else {
        // As ripgrep: a matcher that never matches across a line lets the searcher find
        // candidate lines fast instead of trying each line in turn.
        b.line_terminator(Some(b'\n'));
    }
    b.build(checked).map_err(|e| match e.kind() {
        grep_regex::ErrorKind::NotAllowed(lit) => ToolError::new(
            ErrorCode::InvalidRegex,
            format!(
                "invalid regex `{}`: it contains {lit:?}, a line break, which a line-by-line search can never \
                 match. Set \"multiline\": true to match across lines, or search one line's text.",
                walk::clip(pattern)
            ),
        ),
        grep_regex::ErrorKind::Regex(msg) if msg.contains("exceeds size limit") => {
            too_large(pattern, &format!("compiled, it exceeds the size limit of {} MiB", REGEX_SIZE_LIMIT >> 20))
        }
        grep_regex::ErrorKind::Regex(msg) => invalid_regex(pattern, &matcher_error(msg)),
        _ => invalid_regex(pattern, &walk::clip(&e.to_string())),
    })
}

/// A grep-regex error as a reason. A syntax error there would quote the pattern as grep-regex
/// wrapped it, which the model never wrote: only its last line (`error: …`) is kept. Any other
/// text is cut, as it may echo the pattern.
pub(super) fn matcher_error(msg: &str) -> String {
    match msg.lines().rev().find_map(|l| l.strip_prefix("error: ")) {
        Some(reason) if msg.starts_with("regex parse error") => format!("error: {}", walk::clip(reason)),
        _ => walk::clip(msg).into_owned(),
    }
}

fn invalid_regex(pattern: &str, reason: &str) -> ToolError {
    let glob_like = if pattern.starts_with('*') || pattern.contains("**") {
        " This looks like a glob: to find files by name use the glob tool, or keep the regex and put the file \
         pattern in the `glob` field; in a regex, any text is `.*`."
    } else {
        ""
    };
    ToolError::new(
        ErrorCode::InvalidRegex,
        format!(
            "invalid regex `{}`:\n{}\nTo match a character that is special in regex syntax literally, escape \
             it with a backslash: \\( \\) \\[ \\] \\{{ \\}} \\. \\* \\+ \\? \\| \\^ \\$ \\\\ (in JSON the backslash \
             itself is doubled, e.g. \"pattern\": \"foo\\\\(\").{glob_like}",
            walk::clip(pattern),
            reason.trim_end()
        ),
    )
}

fn too_large(pattern: &str, why: &str) -> ToolError {
    ToolError::new(
        ErrorCode::RegexTooLarge,
        format!(
            "the regex `{}` is too large: {why}. Counted repetitions multiply ((a{{1000}}){{1000}} is a \
             million copies of a). Use smaller counts or open-ended ones (a{{3,}} or a+ instead of a{{1000}}), or \
             search a shorter distinctive part and check the lines with output_mode content.",
            walk::clip(pattern)
        ),
    )
}

const NO_LOOKAROUND: &str = "grep's regex syntax is RE2-style, which has no look-around or backreferences \
                             (it never backtracks, so no pattern can hang a search)";
const NO_BACKTRACKING: &str = "grep's regex syntax is RE2-style, which never backtracks (so no pattern can hang \
                               a search) and has no atomic groups or possessive quantifiers to control backtracking";

fn look_around(pattern: &str, start: usize, open_end: usize) -> ToolError {
    let open = &pattern[start..open_end];
    let (name, body, after) = match group_end(pattern, open_end) {
        Some(close) => (open, &pattern[open_end..close], &pattern[close + 1..]),
        None => (open, &pattern[open_end..], ""),
    };
    let before = &pattern[..start];
    // Each suggestion is cut on its own, so that a long pattern gives a bounded message.
    let q = |parts: &[&str]| format!("`{}`", walk::clip(&parts.concat()));
    let or = |s: &str| if s.is_empty() { "the text around it".to_string() } else { q(&[s]) };
    let (what, instead) = match name {
        "(?=" => (
            "look-ahead",
            format!(
                "search the whole text, {} (the match then includes what the look-ahead checked), or search {} \
                 with output_mode content and check what follows it",
                q(&[before, body, after]),
                or(before)
            ),
        ),
        "(?!" => (
            "negative look-ahead",
            format!(
                "search the positive pattern {} and filter the results with a second grep for {} (the lines it \
                 also finds are the ones to drop)",
                or(before),
                q(&[before, body])
            ),
        ),
        "(?<=" => (
            "look-behind",
            format!(
                "search the whole text, {} (the match then includes what the look-behind checked), or search {} \
                 with output_mode content and check what precedes it",
                q(&[before, body, after]),
                or(after)
            ),
        ),
        _ => (
            "negative look-behind",
            format!(
                "search the positive pattern {} and filter the results with a second grep for {} (the lines it \
                 also finds are the ones to drop)",
                or(after),
                q(&[body, after])
            ),
        ),
    };
    ToolError::new(
        ErrorCode::UnsupportedRegex,
        format!(
            "the regex `{}` uses {what} `{open}…)`, which is not supported: {NO_LOOKAROUND}. Instead, {instead}.",
            walk::clip(pattern)
        ),
    )
}

fn backreference(pattern: &str, found: &str) -> ToolError {
    ToolError::new(
        ErrorCode::UnsupportedRegex,
        format!(
            "the regex `{}` uses the backreference `{}`, which is not supported: {NO_LOOKAROUND}. \
             Instead, spell out the repeated text (for a doubled word, search the word twice, e.g. `the the`; for \
             matching quotes, search each kind: `\"[^\"]*\"|'[^']*'`), or search the first part and check the lines \
             with output_mode content.",
            walk::clip(pattern),
            walk::clip(found)
        ),
    )
}

/// Constructs of other regex dialects that regex-syntax reports as an unknown flag or escape:
/// named backreferences (`(?P=name)`, `\k<name>`, `\g{1}`) and atomic groups (`(?>…)`).
/// `at` is where the error points: the flag character, or the backslash of the escape.
fn other_dialect(pattern: &str, at: usize) -> Option<ToolError> {
    let rest = &pattern[at..];
    let before = &pattern[..at];
    if before.ends_with("(?") && rest.starts_with("P=") {
        let open = at - 2;
        let end = group_end(pattern, at).map_or(pattern.len(), |c| c + 1);
        return Some(backreference(pattern, &pattern[open..end]));
    }
    if before.ends_with("(?") && rest.starts_with('>') {
        let open = at - 2;
        let close = group_end(pattern, at + 1);
        let plain = match close {
            Some(c) => format!("{}(?:{}){}", &pattern[..open], &pattern[at + 1..c], &pattern[c + 1..]),
            None => format!("{}(?:{}", &pattern[..open], &pattern[at + 1..]),
        };
        return Some(ToolError::new(
            ErrorCode::UnsupportedRegex,
            format!(
                "the regex `{}` uses the atomic group `(?>…)`, which is not supported: {NO_BACKTRACKING}. An atomic group only stops backtracking into it, so use a plain group instead: `{}` (it can match where the atomic group would have given up, which a search rarely minds).",
                walk::clip(pattern),
                walk::clip(&plain)
            ),
        ));
    }
    // \k<name>, \k'name', \k{name} (Perl, .NET, PCRE) and \g1, \g{1}, \g{-1}, \g<name> (PCRE).
    let named = rest.strip_prefix("\\k").or_else(|| rest.strip_prefix("\\g"))?;
    let len = match named.chars().next()? {
        '<' => named.find('>')? + 1,
        '\'' => named[1..].find('\'')? + 2,
        '{' => named.find('}')? + 1,
        c if c.is_ascii_digit() || c == '-' => 1 + named[1..].bytes().take_while(u8::is_ascii_digit).count(),
        _ => return None,
    };
    Some(backreference(pattern, &rest[..2 + len]))
}

/// The index of the `)` closing the group whose body starts at `from`, skipping escapes and
/// character classes.
pub(super) fn group_end(pattern: &str, from: usize) -> Option<usize> {
    let bytes = pattern.as_bytes();
    let (mut depth, mut i, mut class) = (0usize, from, false);
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 1,
            b'[' if !class => class = true,
            b']' if class => class = false,
            b'(' if !class => depth += 1,
            b')' if !class => {
                if depth == 0 {
                    return Some(i);
                }
                depth -= 1;
            }
            _ => {}
        }
        i += 1;
    }
    None
}
