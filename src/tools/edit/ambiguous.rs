//! The ambiguous-match message: how many times, at which lines, and what old_string picks
//! each one out.

use std::fmt::Write as _;
use std::path::Path;

use super::{MAX_LISTED, fsutil, line_at};

/// How many of an ambiguous old_string's places are shown.
const SHOWN: usize = 5;

/// The most lines a suggested old_string may grow to.
const MAX_CONTEXT_LINES: usize = 4;

/// The message for `old`, found more than once in `text`.
pub(super) fn explain(text: &str, old: &str, shown: &Path) -> String {
    let step = old.chars().next().map_or(1, char::len_utf8);
    let mut places: Vec<usize> = Vec::new(); // the byte where each occurrence starts
    let mut lines: Vec<(usize, usize)> = Vec::new(); // (line, occurrences starting on it)
    let (mut count, mut pos, mut line, mut counted) = (0usize, 0usize, 1usize, 0usize);
    while let Some(off) = text[pos..].find(old) {
        let p = pos + off;
        count += 1;
        if lines.len() <= MAX_LISTED {
            let l = line_at(text, &mut counted, &mut line, p);
            match lines.last_mut() {
                Some(last) if last.0 == l => last.1 += 1,
                _ => {
                    lines.push((l, 1));
                    places.push(p);
                }
            }
        }
        pos = p + step;
    }
    lines.truncate(MAX_LISTED);
    let listed_occ: usize = lines.iter().map(|l| l.1).sum();
    let mut where_ = lines
        .iter()
        .map(|&(l, n)| if n == 1 { l.to_string() } else { format!("{l} ({n} times)") })
        .collect::<Vec<_>>()
        .join(", ");
    if count > listed_occ {
        let _ = write!(where_, " and {} more", count - listed_occ);
    }
    let at = if lines.len() == 1 && count == listed_occ { format!("line {where_}") } else { format!("lines {where_}") };
    // "aa" in "aaa" starts twice but replace_all can replace it once: say so up front.
    let disjoint = text.matches(old).count();
    let overlap = if disjoint < count {
        format!(" Some occurrences overlap: replace_all would replace {disjoint} (non-overlapping, leftmost first).")
    } else {
        String::new()
    };
    let mut msg = format!(
        "old_string occurs {count} times in {}, at {at}; edit replaces exactly one occurrence unless replace_all is true. Add surrounding lines (before or after) to old_string until it matches only the place you mean, or set replace_all: true to replace every occurrence.{overlap}",
        shown.display()
    );
    // The old_string that picks out each place, when every place is on its own line: small
    // models resend the same call, or take replace_all where the task meant one place
    // (Qwen2.5-Coder-1.5B, "make find_user raise KeyError; find_group stays as it is").
    let picks: Option<Vec<String>> = (count == lines.len() && lines.len() <= SHOWN)
        .then(|| places.iter().map(|&p| unique_around(text, p, old.len())).collect())
        .flatten();
    if let Some(picks) = picks {
        msg.push_str(
            "\nEach of these old_strings matches one place only; use the one for the place you mean, with new_string the same lines after your change:",
        );
        for (&(l, _), pick) in lines.iter().zip(&picks) {
            let _ = write!(msg, "\n- line {l}: {}", serde_json::to_string(pick).unwrap_or_default());
        }
    } else if !old.contains('\n') {
        // Show the lines it is on, so the text that tells them apart is in front of the model.
        let all: Vec<&str> = text.lines().collect();
        msg.push_str("\nThe lines it is on:");
        for &(l, _) in lines.iter().take(SHOWN) {
            let line = all.get(l - 1).copied().unwrap_or("");
            let _ = write!(msg, "\n{l}\t{}", super::super::walk::clip(line));
        }
        if lines.len() > SHOWN {
            let _ = write!(msg, "\n(and {} more lines)", lines.len() - SHOWN);
        }
    }
    msg
}

/// The whole lines around the occurrence at `p..p + len`, grown a line at a time (upwards
/// first, then downwards) until they occur once in `text`; `None` past a few lines, or when a
/// line is too long to quote.
fn unique_around(text: &str, p: usize, len: usize) -> Option<String> {
    let line_start = |i: usize| text[..i].rfind('\n').map_or(0, |n| n + 1);
    let line_end = |i: usize| text[i..].find('\n').map_or(text.len(), |n| i + n);
    let mut a = line_start(p);
    let mut z = line_end((p + len).saturating_sub(1).max(p));
    loop {
        let pick = &text[a..z];
        if pick.len() > 400 || fsutil::count_newlines(pick.as_bytes()) >= MAX_CONTEXT_LINES {
            return None;
        }
        if text.matches(pick).nth(1).is_none() {
            return Some(pick.to_string());
        }
        if a > 0 {
            a = line_start(a - 1);
        } else if z < text.len() {
            z = line_end(z + 1);
        } else {
            return None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_place_gets_the_old_string_that_picks_it_out() {
        let py = "def find_user(users, name):\n    for u in users:\n        if u.name == name:\n            return u\n    return None\n\n\ndef find_group(groups, name):\n    for g in groups:\n        if g.name == name:\n            return g\n    return None\n";
        let msg = explain(py, "    return None", Path::new("/ws/lookup.py"));
        assert!(msg.contains("at lines 5, 12;"), "{msg}");
        assert!(msg.contains("\n- line 5: \"            return u\\n    return None\""), "{msg}");
        assert!(msg.contains("\n- line 12: \"            return g\\n    return None\""), "{msg}");
        // Part of a line grows to the whole line, which may be unique already.
        let ini = "[server]\nport = 8080\n\n[metrics]\nport = 9100\n";
        let msg = explain(ini, "port = ", Path::new("/ws/app.ini"));
        assert!(msg.contains("\n- line 2: \"port = 8080\"\n- line 5: \"port = 9100\""), "{msg}");
    }

    #[test]
    fn places_no_few_lines_tell_apart_are_listed_as_lines() {
        // The same four lines twice: no pick of up to four lines is unique.
        let block = "a\nb\nc\nd\ne\n";
        let text = format!("{block}{block}");
        let msg = explain(&text, "c", Path::new("/ws/f"));
        assert!(!msg.contains("matches one place only"), "{msg}");
        assert!(msg.contains("\nThe lines it is on:\n3\tc\n8\tc"), "{msg}");
        // Two places on one line: no whole-line pick can tell them apart.
        let msg = explain("x = x + 1\n", "x", Path::new("/ws/f"));
        assert!(!msg.contains("matches one place only"), "{msg}");
    }
}
