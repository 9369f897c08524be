//! An old_string that is not in the file named but is, verbatim, in another file of the
//! workspace. Renaming a function across files, the 1.5B model ran the program, was shown
//! `orders.py, line 1: from pricing import apply_discount, calc_total`, and made its edit of
//! that line with the path of pricing.py, the file it had edited before; told only that
//! nothing in pricing.py was close, it read pricing.py again and answered that it was done
//! (the suite, 2026-12-07). The file that does hold the text is the next call's path.

use std::path::Path;

use crate::tools::{ToolContext, grep, path_line};

/// An old_string shorter than this (without the whitespace around it), or without a letter or
/// digit, is in many files by chance (`}`, `return x`): naming them says nothing.
const MIN_CHARS: usize = 8;
/// Files named; the rest are counted.
const SHOWN: usize = 3;

/// The note, when `old` occurs in other files of the workspace than `real`.
pub(super) fn note(ctx: &ToolContext<'_>, old: &str, real: &Path) -> Option<String> {
    let trimmed = old.trim();
    if trimmed.chars().count() < MIN_CHARS || !trimmed.chars().any(char::is_alphanumeric) {
        return None;
    }
    let (files, total) = grep::elsewhere::literal(ctx, old, real)?;
    let read = |p: &Path| ctx.session.last_read(p).ok().flatten().is_some();
    let listed: Vec<String> =
        files.iter().take(SHOWN).map(|(p, line)| format!("{} (line {line})", path_line(p))).collect();
    let more = match total.saturating_sub(SHOWN) {
        0 => String::new(),
        1 => ", and 1 more file".to_string(),
        n => format!(", and {n} more files"),
    };
    Some(match files.as_slice() {
        [(p, _)] if total == 1 => format!(
            "old_string is in another file: {}. If that is the file you meant, make this edit with \"path\": \"{}\"{}.",
            listed[0],
            path_line(p),
            if read(p) { "" } else { ", after reading it" }
        ),
        _ => format!(
            "old_string is in {} other files: {}{more}. If one of them is the file you meant, make this edit with its path.",
            total,
            listed.join(", ")
        ),
    })
}
