//! Why an `old_string` is not in the file, and the nearest text that is.
//!
//! First the exact near-misses a model makes most (LF where the file has CRLF, line-number
//! prefixes copied from read, a JSON string escaped twice), each checked by one exact search.
//! Then the nearest window, in bounded work whatever the file's size: one pass gives every line
//! a whitespace-free hash and a 256-bit bigram signature; each old_string line votes for window
//! starts through its exact hash hits and its few best signature matches; only the best-voted
//! few dozen windows are compared for real (edit distance per line), and only the best is shown,
//! with what differs (whitespace and indentation named explicitly) and a line diff.

use std::collections::HashMap;
use std::fmt::Write as _;

use similar::{Algorithm, ChangeTag, TextDiff};

/// old_string lines that vote for candidate windows (sampled evenly when there are more).
const MAX_VOTE_LINES: usize = 64;
/// A line found more often than this in the file says nothing about where the window is.
const MAX_ANCHOR_HITS: usize = 32;
/// Best signature matches per old_string line that vote.
const FUZZY_PER_LINE: usize = 4;
/// Least signature similarity (Jaccard of bigram sets) for a fuzzy vote.
const MIN_FUZZY: f64 = 0.4;
/// Windows compared for real.
const MAX_CANDIDATES: usize = 32;
/// old_string lines compared per window (sampled evenly when there are more).
const MAX_SCORED_LINES: usize = 48;
/// old_string lines compared for the similarity reported of the best window.
const MAX_FULL_SCORE_LINES: usize = 2000;
/// Characters of a line that take part in an edit-distance comparison.
const MAX_CMP_CHARS: usize = 160;
/// Bytes of a long line compared with a one-line old_string ([`focus`]).
const FOCUS_BYTES: usize = MAX_CMP_CHARS * 3;
/// Pieces of old_string searched for in a long line, and the granularity of their votes.
const FOCUS_PIECES: usize = 16;
const FOCUS_BUCKET: usize = 16;
/// Bytes shown on each side of the nearest part of a long line.
const LONG_LINE_CONTEXT: usize = 60;
/// Below this the nearest window is not worth showing.
const MIN_SIMILARITY: f64 = 0.4;
/// Lines of the nearest window shown.
const MAX_WINDOW_LINES: usize = 30;
/// Lines of diff shown.
const MAX_DIFF_LINES: usize = 40;
/// Characters of one shown line (window or diff).
const MAX_SHOWN_CHARS: usize = 300;
const CUT: &str = "[...line truncated]";
/// Lines named per kind of whitespace difference.
const MAX_EXAMPLES: usize = 3;
/// new_string is worth pointing out in the file when it has at least this many characters
/// (without the whitespace around it)...
const MIN_ALREADY_CHARS: usize = 3;
/// ...and is found at most this many times.
const MAX_ALREADY: usize = 3;

/// The explanation that follows "old_string was not found in PATH." (several lines, no
/// trailing newline). `new_string` is used to notice an edit that was already applied.
pub(super) fn explain(text: &str, needle: &str, new_string: &str, shown: &str) -> String {
    if text.is_empty() {
        return format!(
            "The file is empty, so no old_string can match. To give it content, use write, e.g. {{\"path\": \"{shown}\", \"content\": \"...\"}}."
        );
    }
    if let Some(msg) = exact_near_miss(text, needle) {
        return msg;
    }
    let mut out = String::new();
    if let Some(at) = already_there(text, needle, new_string) {
        let _ = writeln!(
            out,
            "Note: new_string already appears in the file ({at}): this edit may already have been applied, by an earlier call or by someone else.",
        );
    }
    let (needle, prefix_note) = match strip_line_numbers(needle) {
        Some(stripped) => (stripped, true),
        None => (needle.to_string(), false),
    };
    if prefix_note {
        out.push_str(
            "old_string seems to start its lines with line numbers copied from read's output (`12\\t`); they are not part of the file. Even without them it does not match.\n",
        );
    }
    let file = split_lines(text);
    let ends_nl = needle.ends_with('\n');
    let want = split_lines(&needle);
    let best = best_window(&file, &want, ends_nl);
    match best {
        Some(w) if w.score >= MIN_SIMILARITY => {
            let window = &file[w.start..w.start + w.len];
            match long_line_part(&want, window) {
                // One line of a long line (a minified file): show the part of it that is
                // nearest, not its start.
                Some((part, at)) => describe_window(&mut out, &want, ends_nl, &[part], w, Some(at)),
                None => describe_window(&mut out, &want, ends_nl, window, w, None),
            }
            out.push_str(
                "Copy old_string from the numbered lines above exactly (without the line number and the tab after it), or read the file again if this is not the text you meant.",
            );
        }
        other => {
            match other {
                Some(w) => {
                    let _ = write!(
                        out,
                        "Nothing in the file is close to old_string: the most similar text, {}, is only {}% similar. ",
                        span(w.start + 1, w.start + w.len),
                        percent(w.score)
                    );
                }
                None => out.push_str("No line of the file resembles any line of old_string. "),
            }
            out.push_str(
                "The text may be in another file, or the file may not contain what you expect. Read the file again, or search for a distinctive part of old_string with grep",
            );
            match distinctive_word(&needle) {
                Some(word) => {
                    let _ = write!(out, ", e.g. {{\"pattern\": \"{word}\", \"path\": \"{shown}\"}}.");
                }
                None => out.push('.'),
            }
        }
    }
    out.trim_end().to_string()
}

/// Where new_string already is in the file, when that says something: it is distinctive (a few
/// characters without the whitespace around them, not part of old_string, found at most
/// [`MAX_ALREADY`] times). A `}` or a line found everywhere says nothing about whether the
/// edit was applied.
fn already_there(text: &str, old: &str, new: &str) -> Option<String> {
    if new.trim().chars().count() < MIN_ALREADY_CHARS || old.contains(new) {
        return None;
    }
    let at: Vec<usize> = text.match_indices(new).map(|(p, _)| p).take(MAX_ALREADY + 1).collect();
    if at.is_empty() || at.len() > MAX_ALREADY {
        return None;
    }
    let lines: Vec<String> = at.iter().map(|&p| line_of(text, p).to_string()).collect();
    Some(if lines.len() == 1 { format!("at line {}", lines[0]) } else { format!("at lines {}", lines.join(", ")) })
}

/// Exact matches after undoing one common mistake.
fn exact_near_miss(text: &str, needle: &str) -> Option<String> {
    let has_crlf = text.contains("\r\n");
    if has_crlf && needle.contains('\n') && !needle.contains('\r') {
        let converted = needle.replace('\n', "\r\n");
        if let Some(at) = where_found(text, &converted) {
            return Some(format!(
                "The file uses CRLF line endings (\\r\\n), but old_string has LF (\\n) line breaks. With each \\n written as \\r\\n, old_string matches {at}. In the JSON arguments write every line break as \\r\\n, in old_string and in new_string (so that the file keeps one kind of line ending)."
            ));
        }
    }
    if !has_crlf && needle.contains("\r\n") {
        let converted = needle.replace("\r\n", "\n");
        if let Some(at) = where_found(text, &converted) {
            return Some(format!(
                "The file uses LF (\\n) line endings, but old_string has CRLF (\\r\\n) line breaks. With each \\r\\n written as \\n, old_string matches {at}. Write line breaks as \\n in old_string and in new_string."
            ));
        }
    }
    if let Some(stripped) = strip_line_numbers(needle)
        && let Some(at) = where_found(text, &stripped)
    {
        return Some(format!(
            "old_string starts its lines with line numbers copied from read's output (`12\\t`); they are not part of the file. Without them, old_string matches {at}. Leave out the number and the tab after it on every line."
        ));
    }
    if !needle.is_ascii() {
        use unicode_normalization::UnicodeNormalization as _;
        let forms = [
            ("decomposed (NFD: a letter followed by a combining mark)", needle.nfd().collect::<String>()),
            ("precomposed (NFC: one code point per accented letter)", needle.nfc().collect::<String>()),
        ];
        for (file_form, converted) in forms {
            if converted != needle
                && let Some(at) = where_found(text, &converted)
            {
                return Some(format!(
                    "old_string and the file spell some characters in different Unicode forms: the file has them {file_form}, old_string the other way. They look the same but are different bytes. Written in the file's form, old_string matches {at}. Copy the text from read's output exactly (in JSON a combining mark can be written as an escape, e.g. \\u0301)."
                ));
            }
        }
    }
    if needle.chars().any(|c| control_of(c).is_some()) {
        let real: String = needle.chars().map(|c| control_of(c).unwrap_or(c)).collect();
        if let Some(at) = where_found(text, &real) {
            let named: Vec<String> = needle
                .chars()
                .filter_map(|c| control_of(c).map(|r| (c, r)))
                .map(|(c, r)| format!("{} for {c}", json_escape(r)))
                .fold(Vec::new(), |mut v, e| {
                    if !v.contains(&e) {
                        v.push(e);
                    }
                    v
                });
            return Some(format!(
                "old_string has the symbols read shows for control characters (such as ␛ for ESC) where the file has the characters themselves. With each symbol written as its character, old_string matches {at}. In the JSON arguments write them as escapes: {} (in new_string too, or the symbols themselves are written to the file).",
                named.join(", ")
            ));
        }
    }
    if !needle.contains('\n') && needle.contains("\\n") {
        let unescaped = needle.replace("\\r", "\r").replace("\\n", "\n").replace("\\t", "\t").replace("\\\"", "\"");
        if let Some(at) = where_found(text, &unescaped) {
            return Some(format!(
                "old_string contains the two characters \\ and n where the file has line breaks: the JSON string was escaped twice. Unescaped once, old_string matches {at}. In the JSON arguments write a line break as \\n (one backslash), a tab as \\t."
            ));
        }
    }
    None
}

/// The control character that read shows as `symbol` ([`crate::tools::read::mark_controls`]).
fn control_of(symbol: char) -> Option<char> {
    match symbol {
        '\u{2400}'..='\u{241f}' => char::from_u32(symbol as u32 - 0x2400),
        '\u{2421}' => Some('\u{7f}'),
        _ => None,
    }
    .filter(|&c| c != '\t' && c != '\n')
}

/// A control character as a JSON string escape.
fn json_escape(c: char) -> String {
    if c == '\r' { "\\r".to_string() } else { format!("\\u{:04x}", u32::from(c)) }
}

/// "at line 12" / "at lines 12-14" / "3 times (first at line 12; ...)" for an exact search.
fn where_found(text: &str, s: &str) -> Option<String> {
    let first = text.find(s)?;
    let line = line_of(text, first);
    let end_line = line + s.trim_end_matches('\n').matches('\n').count();
    let count = text.matches(s).count();
    Some(if count == 1 {
        format!("exactly once, at {}", span(line, end_line))
    } else {
        format!(
            "{count} times (the first at line {line}), so it must also be made unique: add surrounding lines, or set replace_all"
        )
    })
}

/// Undo `<n>\t` prefixes on every line, when every non-empty line has one.
pub(crate) fn strip_line_numbers(needle: &str) -> Option<String> {
    let mut any = false;
    let mut out = String::with_capacity(needle.len());
    for piece in needle.split_inclusive('\n') {
        let body = piece.trim_end_matches(['\n', '\r']);
        if body.is_empty() {
            out.push_str(piece);
            continue;
        }
        let digits = body.trim_start_matches(' ');
        let n = digits.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 || digits.as_bytes().get(n) != Some(&b'\t') {
            return None;
        }
        any = true;
        out.push_str(&digits[n + 1..]);
        out.push_str(&piece[body.len()..]);
    }
    any.then_some(out)
}

/// Lines of `text` split on `\n`, each keeping a `\r` it ends with; a final newline does not
/// start another line.
fn split_lines(text: &str) -> Vec<&str> {
    let mut lines: Vec<&str> = text.split('\n').collect();
    if text.ends_with('\n') {
        lines.pop();
    }
    lines
}

fn line_of(text: &str, byte: usize) -> usize {
    crate::tools::fsutil::count_newlines(&text.as_bytes()[..byte]) + 1
}

fn span(first: usize, last: usize) -> String {
    if last <= first { format!("line {first}") } else { format!("lines {first}-{last}") }
}

fn percent(score: f64) -> u32 {
    (score.clamp(0.0, 1.0) * 100.0).floor() as u32
}

// ---------------------------------------------------------------------------------------------
// Candidate search

/// The cheap per-line facts the search compares.
struct Sig {
    /// FNV-1a of the line with all whitespace removed.
    key: u64,
    /// Bigrams of the lowercased, whitespace-free line, hashed into 256 bits.
    bits: [u64; 4],
    ones: u32,
    /// Non-whitespace bytes.
    len: usize,
}

fn sig(line: &str) -> Sig {
    let mut key: u64 = 0xcbf2_9ce4_8422_2325;
    let mut bits = [0u64; 4];
    let mut prev: Option<u8> = None;
    let mut len = 0;
    for b in line.bytes().filter(|b| !b.is_ascii_whitespace()) {
        key = (key ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        len += 1;
        let lower = b.to_ascii_lowercase();
        if let Some(p) = prev {
            let h = (u32::from(p) << 8 | u32::from(lower)).wrapping_mul(2_654_435_761) >> 24;
            bits[(h >> 6) as usize] |= 1 << (h & 63);
        }
        prev = Some(lower);
    }
    let ones = bits.iter().map(|w| w.count_ones()).sum();
    Sig { key, bits, ones, len }
}

fn jaccard(a: &Sig, b: &Sig) -> f64 {
    let (mut both, mut either) = (0u32, 0u32);
    for i in 0..4 {
        both += (a.bits[i] & b.bits[i]).count_ones();
        either += (a.bits[i] | b.bits[i]).count_ones();
    }
    if either == 0 { 0.0 } else { f64::from(both) / f64::from(either) }
}

/// How much of `a`'s bigrams `b` holds (for a one-line old_string that may be part of a line).
fn containment(a: &Sig, b: &Sig) -> f64 {
    if a.ones == 0 {
        return 0.0;
    }
    let both: u32 = (0..4).map(|i| (a.bits[i] & b.bits[i]).count_ones()).sum();
    f64::from(both) / f64::from(a.ones)
}

#[derive(Debug, Clone, Copy)]
struct Window {
    /// 0-based first line.
    start: usize,
    len: usize,
    /// Whitespace-insensitive similarity, 0..=1.
    score: f64,
}

/// Indices `0..n`, or `max` of them spread evenly (first and last included).
fn sample(n: usize, max: usize) -> Vec<usize> {
    if n <= max {
        return (0..n).collect();
    }
    let mut v: Vec<usize> = (0..max).map(|k| k * (n - 1) / (max - 1)).collect();
    v.dedup();
    v
}

fn best_window(file: &[&str], want: &[&str], ends_nl: bool) -> Option<Window> {
    if file.is_empty() || want.is_empty() {
        return None;
    }
    let sigs: Vec<Sig> = file.iter().map(|l| sig(l)).collect();
    let voters = sample(want.len(), MAX_VOTE_LINES);
    let want_sigs: Vec<(usize, Sig)> = voters.iter().map(|&i| (i, sig(want[i]))).collect();
    let single = want.len() == 1;

    // Exact anchors: old_string lines whose whitespace-free form occurs in the file.
    let mut by_key: HashMap<u64, Vec<usize>> = HashMap::new();
    for (k, (_, s)) in want_sigs.iter().enumerate() {
        if s.len >= 3 {
            by_key.entry(s.key).or_default().push(k);
        }
    }
    let mut hits: Vec<Vec<usize>> = vec![Vec::new(); want_sigs.len()];
    for (j, s) in sigs.iter().enumerate() {
        if let Some(ks) = by_key.get(&s.key) {
            for &k in ks {
                if hits[k].len() <= MAX_ANCHOR_HITS {
                    hits[k].push(j);
                }
            }
        }
    }

    let mut votes: HashMap<usize, f64> = HashMap::new();
    let mut vote = |line_in_file: usize, line_in_want: usize, w: f64| {
        let start = line_in_file.saturating_sub(line_in_want).min(file.len() - 1);
        *votes.entry(start).or_insert(0.0) += w;
    };
    for (k, (i, s)) in want_sigs.iter().enumerate() {
        let weight = (s.len.min(40) as f64 / 40.0).max(0.05);
        let exact = &hits[k];
        if !exact.is_empty() && exact.len() <= MAX_ANCHOR_HITS {
            for &j in exact {
                vote(j, *i, weight);
            }
        }
        if s.len < 3 || s.ones == 0 {
            continue;
        }
        // The few most similar lines by signature: a line with a typo still votes.
        let mut top: Vec<(f64, usize)> = Vec::with_capacity(FUZZY_PER_LINE + 1);
        for (j, f) in sigs.iter().enumerate() {
            if f.key == s.key || f.ones == 0 {
                continue;
            }
            let sim = if single {
                containment(s, f)
            } else {
                // Jaccard is at most min/max of the set sizes: skip hopeless lines cheaply.
                let (lo, hi) = if f.ones < s.ones { (f.ones, s.ones) } else { (s.ones, f.ones) };
                if f64::from(lo) < MIN_FUZZY * f64::from(hi) {
                    continue;
                }
                jaccard(s, f)
            };
            if sim < MIN_FUZZY || (top.len() == FUZZY_PER_LINE && sim <= top[FUZZY_PER_LINE - 1].0) {
                continue;
            }
            let at = top.partition_point(|t| t.0 >= sim);
            top.insert(at, (sim, j));
            top.truncate(FUZZY_PER_LINE);
        }
        for (sim, j) in top {
            vote(j, *i, weight * sim * 0.9);
        }
    }
    if votes.is_empty() {
        return None;
    }

    let mut ranked: Vec<(usize, f64)> = votes.into_iter().collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    ranked.truncate(MAX_CANDIDATES);

    let scored = sample(want.len(), MAX_SCORED_LINES);
    let mut best: Option<Window> = None;
    for (start, _) in ranked {
        let score = window_score(file, want, ends_nl, start, &scored);
        if best.is_none_or(|b| score > b.score || (score == b.score && start < b.start)) {
            best = Some(Window { start, len: want.len(), score });
        }
    }
    // The similarity reported is over every line (up to a bound), not the sample.
    let every: Vec<usize> = (0..want.len().min(MAX_FULL_SCORE_LINES)).collect();
    best.map(|w| Window {
        len: refine_len(file, want, w.start),
        score: window_score(file, want, ends_nl, w.start, &every),
        ..w
    })
}

/// Weighted mean of per-line similarity, old_string line `i` against file line `start + i`.
fn window_score(file: &[&str], want: &[&str], ends_nl: bool, start: usize, lines: &[usize]) -> f64 {
    let last = want.len() - 1;
    let (mut sum, mut weights) = (0.0, 0.0);
    for &i in lines {
        let a = squeeze(want[i]);
        let weight = a.chars().count().clamp(2, MAX_CMP_CHARS) as f64;
        let sim = match file.get(start + i) {
            Some(b) => line_sim(&a, &squeeze(b), i == 0, i == last && !ends_nl),
            None => 0.0,
        };
        sum += sim * weight;
        weights += weight;
    }
    if weights == 0.0 { 0.0 } else { sum / weights }
}

/// A line without any whitespace.
fn squeeze(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

/// Similarity of an old_string line to a file line. A first line may be the end of the file's
/// line (`free_start`), a last line its beginning (`free_end`), a lone line any part of it.
fn line_sim(a: &str, b: &str, free_start: bool, free_end: bool) -> f64 {
    if !free_start && !free_end {
        let a: String = a.chars().take(MAX_CMP_CHARS).collect();
        let b: String = b.chars().take(MAX_CMP_CHARS).collect();
        return if a.is_empty() && b.is_empty() { 1.0 } else { strsim::normalized_levenshtein(&a, &b) };
    }
    // A part of a long line: compare it where it most likely is, not with the line's start.
    let b = if free_start && free_end && b.len() > FOCUS_BYTES { focus(a, b, FOCUS_BYTES).0 } else { b };
    let a: Vec<char> = a.chars().collect();
    if a.is_empty() {
        return 1.0;
    }
    let b: Vec<char> = b.chars().collect();
    let room = MAX_CMP_CHARS * 3;
    let (a, b) = match (free_start, free_end) {
        // The end of the file's line matters: compare the tails.
        (true, false) => (&a[a.len().saturating_sub(MAX_CMP_CHARS)..], &b[b.len().saturating_sub(room)..]),
        _ => (&a[..a.len().min(MAX_CMP_CHARS)], &b[..b.len().min(room)]),
    };
    let d = semi_global(a, b, free_start, free_end);
    (1.0 - d as f64 / a.len() as f64).max(0.0)
}

/// Edit distance of `a` to `b`, where the characters of `b` before the match (`free_start`)
/// or after it (`free_end`) cost nothing.
fn semi_global(a: &[char], b: &[char], free_start: bool, free_end: bool) -> usize {
    let mut prev: Vec<usize> = (0..=b.len()).map(|j| if free_start { 0 } else { j }).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    if free_end { prev.iter().copied().min().unwrap_or(0) } else { prev[b.len()] }
}

/// The part of a long line `b` (about `width` bytes) most likely to hold `a`: around the
/// offset at which most of a's pieces are found; the line's start when none is. Bounded work:
/// a few exact searches, each stopping after a few hits. Returns the part and its byte offset.
fn focus<'b>(a: &str, b: &'b str, width: usize) -> (&'b str, usize) {
    let starts: Vec<usize> = a.char_indices().map(|(i, _)| i).collect();
    let n = starts.len();
    let mut votes: HashMap<usize, usize> = HashMap::new();
    if n > 0 {
        let k = (n / 4).clamp(3, 12).min(n);
        for s in sample(n - k + 1, FOCUS_PIECES) {
            let (from, to) = (starts[s], starts.get(s + k).copied().unwrap_or(a.len()));
            let hits: Vec<usize> = b.match_indices(&a[from..to]).map(|(i, _)| i).take(MAX_ANCHOR_HITS + 1).collect();
            if hits.len() > MAX_ANCHOR_HITS {
                continue;
            }
            for h in hits {
                *votes.entry(h.saturating_sub(from) / FOCUS_BUCKET).or_default() += 1;
            }
        }
    }
    let center =
        votes.iter().max_by(|x, y| x.1.cmp(y.1).then(y.0.cmp(x.0))).map_or(0, |(&bucket, _)| bucket * FOCUS_BUCKET);
    let mut lo = center.saturating_sub(width.saturating_sub(a.len()) / 2).min(b.len());
    while lo > 0 && !b.is_char_boundary(lo) {
        lo -= 1;
    }
    let mut hi = (lo + width).min(b.len());
    while hi < b.len() && !b.is_char_boundary(hi) {
        hi += 1;
    }
    (&b[lo..hi], lo)
}

/// Where a one-line old_string's nearest text is shown from, in a file line too long to show
/// whole: the part of the line, and its place in it.
struct LinePart {
    /// Characters of the line before the part.
    from: usize,
    len: usize,
    total: usize,
}

fn long_line_part<'f>(want: &[&str], window: &[&'f str]) -> Option<(&'f str, LinePart)> {
    let ([needle], [line]) = (want, window) else { return None };
    if line.len() <= MAX_SHOWN_CHARS || line.chars().count() <= MAX_SHOWN_CHARS {
        return None;
    }
    let (part, at) = focus(needle, line, needle.len() + 2 * LONG_LINE_CONTEXT);
    let part = part.strip_suffix('\r').unwrap_or(part);
    let at = LinePart { from: line[..at].chars().count(), len: part.chars().count(), total: line.chars().count() };
    Some((part, at))
}

/// The window length (old_string's, give or take a few lines) that lines up best.
fn refine_len(file: &[&str], want: &[&str], start: usize) -> usize {
    let n = want.len();
    let avail = file.len() - start;
    let a: Vec<String> = want.iter().map(|l| squeeze(l)).collect();
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let mut best = (f32::MIN, 0usize, n.min(avail));
    for len in n.saturating_sub(3).max(1)..=(n + 3).min(avail) {
        let b: Vec<String> = file[start..start + len].iter().map(|l| squeeze(l)).collect();
        let b: Vec<&str> = b.iter().map(String::as_str).collect();
        let ratio = TextDiff::configure().algorithm(Algorithm::Myers).diff_slices(&a, &b).ratio();
        let off = len.abs_diff(n);
        if ratio > best.0 || (ratio == best.0 && off < best.1) {
            best = (ratio, off, len);
        }
    }
    best.2
}

// ---------------------------------------------------------------------------------------------
// Describing the window

fn describe_window(out: &mut String, want: &[&str], ends_nl: bool, window: &[&str], w: Window, part: Option<LinePart>) {
    let lines = match &part {
        Some(p) => format!("line {}, characters {}-{} of its {}", w.start + 1, p.from + 1, p.from + p.len, p.total),
        None => span(w.start + 1, w.start + w.len),
    };
    let crlf_note =
        window.iter().any(|l| l.ends_with('\r')) && want.len() > 1 && !want.iter().any(|l| l.ends_with('\r'));
    match whitespace_only(want, ends_nl, window, w.start + 1) {
        Some(bullets) => {
            let _ = writeln!(out, "The text at {lines} matches old_string except for whitespace:");
            for b in &bullets {
                let _ = writeln!(out, "- {b}");
            }
            if bullets.is_empty() && !crlf_note {
                let _ = writeln!(out, "- the whitespace differs as the diff below shows.");
            }
        }
        None => {
            // Not identical, so never "100%".
            let pct = percent(w.score).min(99);
            let _ = writeln!(out, "The nearest text is at {lines} ({pct}% similar, ignoring whitespace).");
        }
    }
    if crlf_note {
        let _ = writeln!(
            out,
            "The file uses CRLF line endings (\\r\\n) and old_string has LF (\\n) line breaks: in the JSON arguments write each line break as \\r\\n, in old_string and in new_string."
        );
    }
    if window.iter().any(|l| l.ends_with('\r')) {
        out.push_str("The file's lines (carriage returns not shown, as in read):\n");
    } else {
        out.push_str("The file's lines:\n");
    }
    let d = TextDiff::configure().algorithm(Algorithm::Myers).diff_slices(want, window);
    // A long window is shown from just before its first difference.
    let first_change =
        d.ops().iter().find(|op| op.tag() != similar::DiffTag::Equal).map_or(0, |op| op.new_range().start);
    let from = if window.len() > MAX_WINDOW_LINES {
        first_change.saturating_sub(3).min(window.len() - MAX_WINDOW_LINES)
    } else {
        0
    };
    let to = (from + MAX_WINDOW_LINES).min(window.len());
    if from > 0 {
        let _ = writeln!(out, "[{} not shown: they match old_string exactly]", span(w.start + 1, w.start + from));
    }
    for (k, line) in window[from..to].iter().enumerate() {
        let line = clip(line.strip_suffix('\r').unwrap_or(line));
        // As read shows it: control characters as symbols.
        let line = crate::tools::read::mark_controls(&line).0.into_owned();
        let line = match &part {
            Some(p) => {
                let after = p.total - p.from - p.len;
                let before = if p.from > 0 { format!("[...{} characters...]", p.from) } else { String::new() };
                let after = if after > 0 { format!("[...{after} more characters]") } else { String::new() };
                format!("{before}{line}{after}")
            }
            None => line,
        };
        let _ = writeln!(out, "{}\t{line}", w.start + from + 1 + k);
    }
    if to < window.len() {
        let _ = writeln!(
            out,
            "[{} more lines of this text not shown: read offset {} to see them]",
            window.len() - to,
            w.start + to + 1
        );
    }
    diff(out, &d, want, window, w.start + 1);
}

/// The unified diff from old_string (-) to the window (+), bounded.
fn diff(out: &mut String, d: &TextDiff<'_, '_, '_, str>, want: &[&str], window: &[&str], first_line: usize) {
    let tabs = want.iter().chain(window).any(|l| l.contains('\t'));
    let crs = want.iter().chain(window).any(|l| l.contains('\r'));
    let note = match (tabs, crs) {
        (true, true) => ", tabs shown as \\t and carriage returns as \\r",
        (true, false) => ", tabs shown as \\t",
        (false, true) => ", carriage returns shown as \\r",
        (false, false) => "",
    };
    let _ = writeln!(out, "Diff from old_string (-) to the file (+){note}:");
    let mut shown = 0usize;
    let mut total = 0usize;
    for group in d.grouped_ops(2) {
        let (Some(first), Some(last)) = (group.first(), group.last()) else { continue };
        let (o0, o1) = (first.old_range().start, last.old_range().end);
        let (n0, n1) = (first.new_range().start, last.new_range().end);
        let header =
            format!("@@ old_string {} | file {} @@", span(o0 + 1, o1), span(first_line + n0, first_line + n1 - 1));
        let mut body = Vec::new();
        for op in &group {
            // Replaced lines go pairwise (-old, +new), so each line is seen next to its
            // counterpart even when the diff is cut.
            let changes: Vec<_> = d.iter_changes(op).collect();
            let (dels, rest): (Vec<_>, Vec<_>) = changes.iter().partition(|c| c.tag() == ChangeTag::Delete);
            let ins: Vec<_> = rest.iter().filter(|c: &&similar::Change<&str>| c.tag() == ChangeTag::Insert).collect();
            if !dels.is_empty() && !ins.is_empty() {
                for k in 0..dels.len().max(ins.len()) {
                    if let Some(c) = dels.get(k) {
                        body.push(format!("-{}", clip(&escape(c.value()))));
                    }
                    if let Some(c) = ins.get(k) {
                        body.push(format!("+{}", clip(&escape(c.value()))));
                    }
                }
                continue;
            }
            for change in changes {
                let sign = match change.tag() {
                    ChangeTag::Equal => ' ',
                    ChangeTag::Delete => '-',
                    ChangeTag::Insert => '+',
                };
                body.push(format!("{sign}{}", clip(&escape(change.value()))));
            }
        }
        total += body.len() + 1;
        for line in std::iter::once(header).chain(body) {
            if shown < MAX_DIFF_LINES {
                out.push_str(&line);
                out.push('\n');
                shown += 1;
            }
        }
    }
    if total > shown {
        let _ = writeln!(out, "[diff cut: {} more lines not shown]", total - shown);
    }
}

fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out
}

fn clip(line: &str) -> String {
    match line.char_indices().nth(MAX_SHOWN_CHARS) {
        Some((at, _)) => format!("{}{CUT}", &line[..at]),
        None => line.to_string(),
    }
}

/// When old_string and the window (whose first line is file line `first_line`) differ only in
/// whitespace, what differs (possibly nothing to name beyond line endings); `None` when the
/// text itself differs.
fn whitespace_only(want: &[&str], ends_nl: bool, window: &[&str], first_line: usize) -> Option<Vec<String>> {
    let last_w = want.len() - 1;
    let last_f = window.len() - 1;
    let first_ok = |a: &str, b: &str| {
        let (a, b) = (squeeze(a), squeeze(b));
        if want.len() == 1 && !ends_nl { b.contains(&a) } else { b.ends_with(&a) }
    };
    if want.len() == 1 || window.len() == 1 {
        if want.len() != 1 || window.len() != 1 || !first_ok(want[0], window[0]) {
            return None;
        }
    } else {
        let mid_a: String = want[1..last_w].iter().map(|l| squeeze(l)).collect();
        let mid_b: String = window[1..last_f].iter().map(|l| squeeze(l)).collect();
        let (la, lb) = (squeeze(want[last_w]), squeeze(window[last_f]));
        let last_ok = if ends_nl { la == lb } else { lb.starts_with(&la) };
        if !first_ok(want[0], window[0]) || mid_a != mid_b || !last_ok {
            return None;
        }
    }

    let mut bullets = Vec::new();
    let blank = |l: &&&str| !l.trim().is_empty();
    let a: Vec<(usize, &str)> = want.iter().enumerate().filter(|(_, l)| blank(l)).map(|(i, l)| (i, *l)).collect();
    let b: Vec<(usize, &str)> = window.iter().enumerate().filter(|(_, l)| blank(l)).map(|(i, l)| (i, *l)).collect();
    if a.len() != b.len() {
        bullets.push(format!(
            "line breaks differ: the file has {} non-blank lines here where old_string has {}.",
            b.len(),
            a.len()
        ));
        return Some(bullets);
    }
    if want.len() != window.len() {
        bullets.push(format!(
            "blank lines differ: the file's text spans {} lines, old_string {} (see the diff).",
            window.len(),
            want.len()
        ));
    }
    let mut tabs = Vec::new();
    let mut depth = Vec::new();
    let mut trailing = Vec::new();
    let mut inner = Vec::new();
    for (&(ia, la), &(ib, lb)) in a.iter().zip(&b) {
        let la = la.strip_suffix('\r').unwrap_or(la);
        let lb = lb.strip_suffix('\r').unwrap_or(lb);
        let starts_mid = ia == 0; // old_string may begin inside the file's line
        let ends_mid = ia == last_w && !ends_nl;
        let (lead_a, core_a, trail_a) = parts(la);
        let (lead_b, core_b, trail_b) = parts(lb);
        let line = first_line + ib;
        if lead_a != lead_b && !(starts_mid && (lead_a.is_empty() || core_b != core_a)) {
            let mixed =
                (lead_a.contains('\t') && !lead_b.contains('\t')) || (lead_b.contains('\t') && !lead_a.contains('\t'));
            let entry = (line, describe_ws(lead_b), describe_ws(lead_a));
            if mixed { tabs.push(entry) } else { depth.push(entry) }
        }
        if trail_a != trail_b && !(ends_mid && trail_a.is_empty()) {
            trailing.push((line, describe_ws(trail_b), describe_ws(trail_a)));
        }
        let same_core = if starts_mid || ends_mid { core_b.contains(core_a) } else { core_a == core_b };
        if !same_core {
            inner.push(line);
        }
    }
    let ex = |v: &[(usize, String, String)], what: &str| {
        v.iter()
            .take(MAX_EXAMPLES)
            .map(|(l, f, o)| format!("line {l}: the file has {f}, old_string has {o}{what}"))
            .collect::<Vec<_>>()
            .join("; ")
    };
    if !tabs.is_empty() {
        let how = if tabs.iter().any(|t| t.1.contains("tab")) {
            "the file indents with tabs where old_string uses spaces"
        } else {
            "the file indents with spaces where old_string uses tabs"
        };
        bullets.push(format!("indentation: {how}, on {} ({}).", lines_word(tabs.len()), ex(&tabs, "")));
    }
    if !depth.is_empty() {
        bullets.push(format!("indentation depth differs on {} ({}).", lines_word(depth.len()), ex(&depth, "")));
    }
    if !trailing.is_empty() {
        bullets.push(format!(
            "trailing whitespace differs on {} ({}).",
            lines_word(trailing.len()),
            ex(&trailing, " at the end")
        ));
    }
    if !inner.is_empty() {
        let list = inner.iter().take(MAX_EXAMPLES).map(|l| format!("line {l}")).collect::<Vec<_>>().join(", ");
        bullets.push(format!("spacing inside the line differs on {} ({list}).", lines_word(inner.len())));
    }
    Some(bullets)
}

fn lines_word(n: usize) -> String {
    if n == 1 { "1 line".to_string() } else { format!("{n} lines") }
}

/// Leading whitespace, the rest without it, trailing whitespace.
fn parts(line: &str) -> (&str, &str, &str) {
    let core_start = line.len() - line.trim_start().len();
    let core_end = line.trim_end().len().max(core_start);
    (&line[..core_start], &line[core_start..core_end], &line[core_end..])
}

/// "4 spaces", "1 tab", "2 tabs and 3 spaces", "no whitespace".
fn describe_ws(ws: &str) -> String {
    let tabs = ws.matches('\t').count();
    let spaces = ws.matches(' ').count();
    let other = ws.chars().count() - tabs - spaces;
    let mut parts = Vec::new();
    let n = |k: usize, one: &str, many: &str| if k == 1 { format!("1 {one}") } else { format!("{k} {many}") };
    if tabs > 0 {
        parts.push(n(tabs, "tab", "tabs"));
    }
    if spaces > 0 {
        parts.push(n(spaces, "space", "spaces"));
    }
    if other > 0 {
        parts.push(n(other, "other whitespace character", "other whitespace characters"));
    }
    if parts.is_empty() { "no whitespace".to_string() } else { parts.join(" and ") }
}

/// The longest identifier-like word of old_string, as a grep pattern.
fn distinctive_word(needle: &str) -> Option<String> {
    needle
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| w.chars().count() >= 4)
        .max_by(|a, b| a.len().cmp(&b.len()).then(b.cmp(a)))
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numbered(n: usize) -> String {
        (1..=n).map(|i| format!("fn item_{i}(x: u32) -> u32 {{\n    x + {i}\n}}\n")).collect()
    }

    fn words(n: usize) -> String {
        const W: [&str; 8] = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"];
        (0..n).map(|i| format!("let {}_{} = {}({});\n", W[i % 8], i / 8, W[(i / 8) % 8], i)).collect()
    }

    #[test]
    fn crlf_is_named_and_located() {
        let text = "a\r\nfn main() {\r\n    go();\r\n}\r\n";
        let msg = explain(text, "fn main() {\n    go();\n}", "x", "/w/f");
        assert!(msg.contains("CRLF"), "{msg}");
        assert!(msg.contains("exactly once, at lines 2-4"), "{msg}");
        assert!(msg.contains("\\r\\n"), "{msg}");
    }

    #[test]
    fn tabs_vs_spaces_is_named() {
        let text = "fn main() {\n\tlet x = 1;\n\tgo(x);\n}\n";
        let msg = explain(text, "fn main() {\n    let x = 1;\n    go(x);\n}", "y", "/w/f");
        assert!(msg.contains("matches old_string except for whitespace"), "{msg}");
        assert!(msg.contains("the file indents with tabs where old_string uses spaces, on 2 lines"), "{msg}");
        assert!(msg.contains("1\tfn main() {"), "{msg}");
        assert!(msg.contains("-    let x = 1;\n+\\tlet x = 1;\n-    go(x);\n+\\tgo(x);\n"), "{msg}");
    }

    #[test]
    fn indentation_depth_is_named() {
        let text = "impl A {\n    fn f() {\n        body();\n    }\n}\n";
        let msg = explain(text, "fn f() {\n    body();\n}", "z", "/w/f");
        assert!(msg.contains("indentation depth differs on 2 lines"), "{msg}");
        assert!(msg.contains("the file has 8 spaces, old_string has 4 spaces"), "{msg}");
    }

    #[test]
    fn trailing_whitespace_is_named() {
        let text = "one\ntwo  \nthree\n";
        let msg = explain(text, "one\ntwo\nthree\n", "z", "/w/f");
        assert!(msg.contains("trailing whitespace differs on 1 line"), "{msg}");
        assert!(msg.contains("the file has 2 spaces, old_string has no whitespace at the end"), "{msg}");
    }

    #[test]
    fn typo_finds_the_right_window() {
        let text = words(400);
        // Line 123 is `let charlie_15 = hotel(122);`; the model misspelt a name.
        let msg = explain(
            &text,
            "let bravo_15 = hotel(121);\nlet charly_15 = hotel(122);\nlet delta_15 = hotel(123);\n",
            "q",
            "/w/f",
        );
        assert!(msg.contains("The nearest text is at lines 122-124"), "{msg}");
        assert!(msg.contains("-let charly_15 = hotel(122);\n+let charlie_15 = hotel(122);"), "{msg}");
    }

    #[test]
    fn fragment_inside_a_line_is_found() {
        let text = "let a = compute(alpha, beta) + 1;\nlet b = 2;\n";
        let msg = explain(text, "compute(alpha, betta)", "q", "/w/f");
        assert!(msg.contains("The nearest text is at line 1"), "{msg}");
    }

    #[test]
    fn line_number_prefixes_are_named() {
        let text = "alpha\nbeta\ngamma\n";
        let msg = explain(text, "2\tbeta\n3\tgamma", "q", "/w/f");
        assert!(msg.contains("line numbers copied from read"), "{msg}");
        assert!(msg.contains("exactly once, at lines 2-3"), "{msg}");
    }

    #[test]
    fn double_escaping_is_named() {
        let msg = explain("alpha\nbeta\n", "alpha\\nbeta", "q", "/w/f");
        assert!(msg.contains("escaped twice"), "{msg}");
    }

    #[test]
    fn nothing_similar_says_so() {
        let msg = explain(&numbered(50), "SELECT name FROM customers WHERE id = 7", "q", "/w/f");
        assert!(msg.contains("Nothing in the file is close") || msg.contains("No line of the file"), "{msg}");
        assert!(msg.contains("\"pattern\": \"customers\""), "{msg}");
    }

    #[test]
    fn unicode_normalization_is_named() {
        let msg = explain("let s = \"cafe\u{301}\";\n", "\"caf\u{e9}\"", "x", "/w/f");
        assert!(msg.contains("decomposed (NFD"), "{msg}");
        assert!(msg.contains("matches exactly once, at line 1"), "{msg}");
        let msg = explain("let s = \"caf\u{e9}\";\n", "\"cafe\u{301}\"", "x", "/w/f");
        assert!(msg.contains("precomposed (NFC"), "{msg}");
    }

    #[test]
    fn already_applied_is_noticed() {
        let msg = explain("let x = 2;\n", "let x = 1;", "let x = 2;", "/w/f");
        assert!(msg.contains("new_string already appears in the file (at line 1)"), "{msg}");
        let msg = explain("a = 1\nb = 1\n", "c = 2", "= 1", "/w/f");
        assert!(msg.contains("(at lines 1, 2)"), "{msg}");
    }

    #[test]
    fn already_applied_is_not_said_when_it_says_nothing() {
        let text = "fn f() {\n    g();\n}\nfn h() {\n    i();\n}\n";
        for (old, new) in [("    j();", "}"), ("    j();", "  ()  "), ("fn k() {", "fn "), ("    g() ;", "g()")] {
            let msg = explain(text, old, new, "/w/f");
            assert!(!msg.contains("already appears"), "{old:?} -> {new:?}: {msg}");
        }
        // Found more than a few times: not telling either.
        let text = "x = 1;\n".repeat(5);
        assert!(!explain(&text, "x = 2;", "x = 1;", "/w/f").contains("already appears"));
    }

    #[test]
    fn control_symbols_copied_from_read_are_named() {
        let msg = explain("\u{1b}[31mFAIL\u{1b}[0m lint\r\n", "\u{241b}[31mFAIL\u{241b}[0m", "x", "/w/f");
        assert!(msg.contains("matches exactly once, at line 1"), "{msg}");
        assert!(msg.contains("\\u001b for ␛"), "{msg}");
        assert_eq!(control_of('\u{240d}'), Some('\r'));
        assert_eq!(control_of('\u{2409}'), None, "tab is never marked");
        assert_eq!(control_of('a'), None);
    }

    #[test]
    fn miss_in_a_long_line_shows_the_nearest_part() {
        // The issue's case: a 4.5 MB file of one line. The miss used to show the line's start.
        let mut x: u32 = 99;
        let mut line: String = (0..4_500_000)
            .map(|_| {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                b"abcdefghij;(){}=+ "[(x >> 16) as usize % 18] as char
            })
            .collect();
        line.insert_str(3_000_000, "function computeTotal(items){return items.length}");
        line.push('\n');
        let started = std::time::Instant::now();
        let msg = explain(&line, "function computeTotals(items){return items.length}", "q", "/w/f");
        let took = started.elapsed();
        assert!(msg.contains("The nearest text is at line 1, characters 2999"), "{}", &msg[..msg.len().min(600)]);
        assert!(msg.contains("[...2999"), "{}", &msg[..msg.len().min(600)]);
        assert!(msg.contains("function computeTotal(items){return items.length}"), "{msg}");
        assert!(msg.len() < 3000, "{}", msg.len());
        assert!(took < std::time::Duration::from_secs(10), "{took:?}");
        // Nothing like it: the line's start is no "nearest text".
        let msg = explain(&line, "SELECT name FROM customers WHERE id = 7", "q", "/w/f");
        assert!(!msg.contains("The nearest text"), "{}", &msg[..msg.len().min(600)]);
    }

    #[test]
    fn semi_global_distances() {
        let c = |s: &str| s.chars().collect::<Vec<_>>();
        assert_eq!(semi_global(&c("abc"), &c("xxabcxx"), true, true), 0);
        assert_eq!(semi_global(&c("abc"), &c("xxabc"), true, false), 0);
        assert_eq!(semi_global(&c("abc"), &c("abcxx"), true, false), 2);
        assert_eq!(semi_global(&c("abc"), &c("abd"), false, false), 1);
    }

    #[test]
    fn miss_on_a_big_file_finds_the_window() {
        let text = numbered(34_000); // about 100k lines
        let needle = "fn item_33000(x: u32) -> u32 {\n    x + 3300\n}\n";
        let msg = explain(&text, needle, "q", "/w/f");
        assert!(msg.contains("lines 98998-99000"), "{msg}");
    }
}
