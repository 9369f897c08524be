//! `read`: numbered lines of a text file, with the file's identity and what was covered.
//!
//! The observation opens with one header line — path, content sha256 (prefix), line count and
//! delivery mode (full | range | truncated) — then `<n>\t<line>` lines, then any truncation
//! note. The read is recorded in the session so that `edit` and `write` can check it.

use std::io::{BufReader, Read as _};
use std::path::Path;

use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::fsutil::{self, FileIdentity};
use super::{
    ErrorCode, Tool, ToolContext, ToolError, ToolFailure, ToolOutput, ToolResult, human_bytes, io_error, suggest,
};
use crate::sandbox::confined::{FsError, Kind};
use crate::store::ReadRecord;

/// Lines returned when the call gives no limit.
pub const DEFAULT_LIMIT: u64 = 2000;
/// Characters of one line shown before it is cut.
pub const MAX_LINE_CHARS: usize = 2000;
pub const LINE_CUT_MARKER: &str = "[...line truncated]";
pub const EMPTY_MARKER: &str = "[file exists but is empty]";

pub struct Read;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    path: String,
    offset: Option<u64>,
    limit: Option<u64>,
}

impl Tool for Read {
    fn name(&self) -> &'static str {
        "read"
    }

    fn description(&self) -> &'static str {
        "Read a file from the filesystem. Returns numbered lines (`<n>\\t<line>`) after a header giving the file's sha256 and whether you see all of it. Prefer this over `cat` via bash — output is bounded, numbered, and the read is tracked for edit safety: edit and write need a prior read of the file."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Absolute path to the file."},
                "offset": {"type": "integer", "minimum": 1, "description": "1-indexed line to start from. Use with limit for large files."},
                "limit": {"type": "integer", "minimum": 1, "description": "Max lines to return. Default 2000."}
            },
            "required": ["path"]
        })
    }

    fn mutates(&self) -> bool {
        false
    }

    fn run(&self, ctx: &ToolContext<'_>, args: Value) -> ToolResult {
        let args: Args = super::parse_args(self.name(), args)?;
        let path = ctx.workspace.resolve("path", &args.path)?;
        let shown = path.shown.as_path();

        let opened = ctx.workspace.open_parent(&path.real).and_then(|(dir, name)| dir.open_file(&name));
        let (mut file, meta) = match opened {
            Ok(f) => f,
            Err(FsError::Missing { .. }) => return Err(suggest::not_found(ctx, shown).into()),
            Err(FsError::NotRegular { kind: Kind::Dir, .. }) => {
                return Err(ToolError::new(
                    ErrorCode::IsDirectory,
                    format!(
                        "{} is a directory, not a file. To list it use glob, e.g. {{\"pattern\": \"*\", \"path\": \"{}\"}}.",
                        shown.display(),
                        shown.display()
                    ),
                )
                .into());
            }
            Err(FsError::NotRegular { kind, .. }) => {
                // Reading a FIFO would block forever, a device would never end.
                return Err(ToolError::new(
                    ErrorCode::Io,
                    format!(
                        "{} is {}, not a regular file; read only reads regular files.",
                        shown.display(),
                        kind.describe()
                    ),
                )
                .into());
            }
            Err(e) => return Err(fsutil::fs_error("read", shown, &path.real, e).into()),
        };

        let head = fsutil::read_head(&mut file).map_err(|e| io_error("read", shown, &e))?;
        if let Some(kind) = fsutil::sniff_binary(&head) {
            return Err(binary_error(shown, kind, &head, meta.len).into());
        }

        let explicit_range = args.offset.is_some() || args.limit.is_some();
        let max = ctx.config.read.max_file_bytes;
        if meta.len > max && !explicit_range {
            return Err(ToolError::new(
                ErrorCode::TooLarge,
                format!(
                    "{} is {}, over the {} limit for reading a whole file. Read a range instead, e.g. {{\"path\": \"{}\", \"offset\": 1, \"limit\": 200}}, or use grep to find the lines you need first.",
                    shown.display(),
                    human_bytes(meta.len),
                    human_bytes(max),
                    shown.display()
                ),
            )
            .into());
        }

        let offset = args.offset.unwrap_or(1);
        let limit = args.limit.unwrap_or(DEFAULT_LIMIT);
        let mut reader = BufReader::with_capacity(64 * 1024, std::io::Cursor::new(head).chain(file));
        let max_chars = ctx.output_cap(ctx.config.read.max_output_chars);
        let scan = scan(&mut reader, offset, limit, max_chars).map_err(|e| io_error("read", shown, &e))?;

        if scan.total_lines > 0 && offset > scan.total_lines {
            return Err(ToolError::new(
                ErrorCode::OffsetOutOfRange,
                format!(
                    "offset {offset} is past the end of {}, which has {}. Use an offset from 1 to {}.",
                    shown.display(),
                    super::plural(scan.total_lines, "line", "lines"),
                    scan.total_lines
                ),
            )
            .with_file(FileIdentity::new(shown, scan.sha256.clone()))
            .into());
        }

        let rec = ReadRecord {
            sha256: scan.sha256.clone(),
            size: scan.size,
            mtime_ns: meta.mtime_ns,
            total_lines: scan.total_lines,
            lines_seen: scan.seen_in_full(),
        };
        ctx.session.record_read(&path.real, &rec).map_err(ToolFailure::Internal)?;

        let (text, truncated) = render(shown, &scan, offset, args.limit.is_some());
        Ok(ToolOutput {
            text,
            mutated: false,
            truncated,
            file: Some(FileIdentity::new(shown, scan.sha256)),
            meta: None,
        })
    }
}

/// What one pass over the file found.
struct Scan {
    sha256: String,
    size: u64,
    total_lines: u64,
    /// The lines delivered, already numbered and cut.
    body: String,
    first_shown: u64,
    /// Lines delivered (0 when none).
    shown: u64,
    /// Stopped before `limit` because the output reached the character budget.
    hit_char_cap: bool,
    crlf_lines: u64,
    lf_lines: u64,
    /// First delivered line that is not valid UTF-8.
    first_invalid_utf8: Option<u64>,
    /// Delivered lines cut at [`MAX_LINE_CHARS`]: shown, but not seen in full.
    cut: Vec<u64>,
}

impl Scan {
    fn shown_range(&self) -> Option<(u64, u64)> {
        (self.shown > 0).then(|| (self.first_shown, self.first_shown + self.shown - 1))
    }

    /// The lines the model saw in full: the delivered range less the lines cut short.
    fn seen_in_full(&self) -> Vec<(u64, u64)> {
        let Some((first, last)) = self.shown_range() else { return Vec::new() };
        let mut out = Vec::new();
        let mut start = first;
        for &c in &self.cut {
            if c > start {
                out.push((start, c - 1));
            }
            start = c + 1;
        }
        if start <= last {
            out.push((start, last));
        }
        out
    }
}

/// Stream the file once: hash every byte, count every line, keep only the requested lines.
/// Memory stays bounded by the output budget whatever the file's size.
fn scan(reader: &mut impl std::io::BufRead, offset: u64, limit: u64, max_chars: usize) -> std::io::Result<Scan> {
    let mut hasher = Sha256::new();
    let mut s = Scan {
        sha256: String::new(),
        size: 0,
        total_lines: 0,
        body: String::new(),
        first_shown: offset,
        shown: 0,
        hit_char_cap: false,
        crlf_lines: 0,
        lf_lines: 0,
        first_invalid_utf8: None,
        cut: Vec::new(),
    };
    let last_wanted = offset.saturating_add(limit - 1);
    let mut line = Vec::new();
    // Phase 1: line by line, until the requested range is delivered. A line keeps at most
    // enough bytes to show its first MAX_LINE_CHARS characters: a 200 MB line costs no memory.
    let mut last_byte = None;
    loop {
        let keep = if s.total_lines + 1 >= offset { LINE_KEEP_BYTES } else { 0 };
        let Some(end) = next_line(reader, &mut hasher, keep, &mut line)? else { break };
        last_byte = Some(end.last);
        s.size += end.len;
        s.total_lines += 1;
        let no = s.total_lines;
        match (end.newline, end.cr) {
            (true, true) => s.crlf_lines += 1,
            (true, false) => s.lf_lines += 1,
            _ => {}
        }
        if no >= offset && !s.hit_char_cap {
            let content = if end.clipped {
                // The prefix may end inside a multi-byte character: drop that partial tail.
                match std::str::from_utf8(&line) {
                    Err(e) if e.error_len().is_none() => &line[..e.valid_up_to()],
                    _ => &line[..],
                }
            } else {
                let c = line.strip_suffix(b"\n").unwrap_or(&line);
                if end.cr { c.strip_suffix(b"\r").unwrap_or(c) } else { c }
            };
            let text = String::from_utf8_lossy(content);
            if matches!(text, std::borrow::Cow::Owned(_)) && s.first_invalid_utf8.is_none() {
                s.first_invalid_utf8 = Some(no);
            }
            let (text, cut) = cut_line(&text);
            let entry = format!("{no}\t{text}\n");
            if s.shown > 0 && s.body.len() + entry.len() > max_chars {
                s.hit_char_cap = true;
            } else {
                if cut {
                    s.cut.push(no);
                }
                s.body.push_str(&entry);
                s.shown += 1;
            }
        }
        if no >= last_wanted || s.hit_char_cap {
            break;
        }
    }
    // Phase 2: the rest only needs hashing and counting; do it in big chunks.
    let mut buf = vec![0u8; 256 * 1024];
    let mut rest_bytes = 0u64;
    loop {
        let n = reader.read(&mut buf)?;
        if n == 0 {
            break;
        }
        let chunk = &buf[..n];
        hasher.update(chunk);
        rest_bytes += n as u64;
        for i in memchr::memchr_iter(b'\n', chunk) {
            s.total_lines += 1;
            let before = if i > 0 { Some(chunk[i - 1]) } else { last_byte };
            if before == Some(b'\r') {
                s.crlf_lines += 1;
            } else {
                s.lf_lines += 1;
            }
        }
        last_byte = chunk.last().copied();
    }
    if rest_bytes > 0 && last_byte != Some(b'\n') {
        s.total_lines += 1;
    }
    s.size += rest_bytes;
    s.sha256 = fsutil::hex(&hasher.finalize());
    Ok(s)
}

/// Bytes of one line kept for display: enough for MAX_LINE_CHARS characters of UTF-8, and one
/// more character so that a cut is detected.
const LINE_KEEP_BYTES: usize = (MAX_LINE_CHARS + 1) * 4;

/// How one line ended.
struct LineEnd {
    /// Bytes of the line, newline included.
    len: u64,
    newline: bool,
    /// The newline was `\r\n`.
    cr: bool,
    /// Longer than the bytes kept.
    clipped: bool,
    last: u8,
}

/// Read one line: hash all of it, keep at most `keep` bytes of it in `out`. `None` at the end.
fn next_line(
    reader: &mut impl std::io::BufRead,
    hasher: &mut Sha256,
    keep: usize,
    out: &mut Vec<u8>,
) -> std::io::Result<Option<LineEnd>> {
    out.clear();
    let (mut len, mut tail) = (0u64, [0u8; 2]);
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            break;
        }
        let (chunk, done) = match memchr::memchr(b'\n', buf) {
            Some(i) => (&buf[..=i], true),
            None => (buf, false),
        };
        hasher.update(chunk);
        let room = keep.saturating_sub(out.len());
        out.extend_from_slice(&chunk[..chunk.len().min(room)]);
        tail = match chunk {
            [.., a, b] => [*a, *b],
            [b] => [tail[1], *b],
            [] => tail,
        };
        let n = chunk.len();
        len += n as u64;
        reader.consume(n);
        if done {
            break;
        }
    }
    if len == 0 {
        return Ok(None);
    }
    let newline = tail[1] == b'\n';
    Ok(Some(LineEnd {
        len,
        newline,
        cr: newline && len >= 2 && tail[0] == b'\r',
        clipped: len > out.len() as u64,
        last: tail[1],
    }))
}

/// A line as read shows it: cut at [`MAX_LINE_CHARS`] with [`LINE_CUT_MARKER`]; whether it was cut.
pub(crate) fn cut_line(text: &str) -> (std::borrow::Cow<'_, str>, bool) {
    match text.char_indices().nth(MAX_LINE_CHARS) {
        Some((at, _)) => (format!("{}{LINE_CUT_MARKER}", &text[..at]).into(), true),
        None => (text.into(), false),
    }
}

fn render(shown: &Path, s: &Scan, offset: u64, limit_given: bool) -> (String, bool) {
    let total = s.total_lines;
    let hash = fsutil::short(&s.sha256);
    let lines = super::plural(total, "line", "lines");
    if total == 0 {
        return (
            format!("[read {} · sha256 {hash} · 0 lines · full]\n{EMPTY_MARKER}\n", super::path_line(shown)),
            false,
        );
    }
    let (first, last) = s.shown_range().unwrap_or((offset, offset));
    let reached_end = last >= total;
    // Cut short of what was asked: by the output budget, or by the default limit (a limit
    // the model chose itself is a range, not a truncation).
    let truncated = s.hit_char_cap || (!reached_end && !limit_given);
    let mode = if first == 1 && reached_end {
        "full".to_string()
    } else if truncated {
        format!("truncated: lines {first}-{last}")
    } else {
        format!("range {first}-{last}")
    };
    let mut out = format!("[read {} · sha256 {hash} · {lines} · {mode}]\n", super::path_line(shown));
    if s.crlf_lines > 0 {
        let note = if s.lf_lines > 0 {
            format!("mixed line endings ({} CRLF, {} LF); CR is not shown", s.crlf_lines, s.lf_lines)
        } else {
            "CRLF line endings; CR is not shown. edit matches bytes exactly: write \\r\\n in old_string and new_string"
                .to_string()
        };
        out.push_str(&format!("[note: {note}]\n"));
    }
    if let Some(at) = s.first_invalid_utf8 {
        out.push_str(&format!(
            "[note: not valid UTF-8 from line {at}: invalid bytes are shown as U+FFFD; edit refuses this file, use write or bash to change it]\n"
        ));
    }
    if !s.cut.is_empty() {
        out.push_str(&format!(
            "[note: {} longer than {MAX_LINE_CHARS} characters cut, marked {LINE_CUT_MARKER}]\n",
            super::plural(s.cut.len() as u64, "line", "lines")
        ));
    }
    out.push_str(&s.body);
    if truncated {
        let why = if s.hit_char_cap { " (the output size limit was reached)" } else { "" };
        out.push_str(&format!(
            "[truncated: showing lines {first}-{last} of {total}{why}. Use offset/limit to read more: the next offset is {}.]\n",
            last + 1
        ));
    }
    (out, truncated)
}

fn binary_error(shown: &Path, kind: &str, head: &[u8], size: u64) -> ToolError {
    let dims = image_dimensions(head).map(|(w, h)| format!(", {w}x{h} pixels")).unwrap_or_default();
    let what = if kind.ends_with("image") || kind.starts_with("PDF") {
        "read returns text only and cannot show images or documents to this model"
    } else {
        "read returns text only and does not dump binary bytes"
    };
    ToolError::new(
        ErrorCode::BinaryFile,
        format!(
            "{} is a binary file: {kind}{dims}, {}. {what}. To inspect it, use bash (e.g. `file`, `xxd | head`), or read the text file it was built from.",
            shown.display(),
            human_bytes(size)
        ),
    )
}

fn image_dimensions(head: &[u8]) -> Option<(u32, u32)> {
    if head.starts_with(b"\x89PNG\r\n\x1a\n") && head.len() >= 24 {
        let be = |i: usize| u32::from_be_bytes([head[i], head[i + 1], head[i + 2], head[i + 3]]);
        return Some((be(16), be(20)));
    }
    if head.starts_with(b"GIF8") && head.len() >= 10 {
        let le = |i: usize| u32::from(u16::from_le_bytes([head[i], head[i + 1]]));
        return Some((le(6), le(8)));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan_str(s: &str, offset: u64, limit: u64) -> Scan {
        scan(&mut std::io::Cursor::new(s.as_bytes().to_vec()), offset, limit, 100_000).unwrap()
    }

    #[test]
    fn counts_and_hashes_whole_file_even_for_a_range() {
        let s = scan_str("a\nb\nc\nd", 2, 1);
        assert_eq!(s.total_lines, 4);
        assert_eq!(s.body, "2\tb\n");
        assert_eq!(s.sha256, fsutil::sha256_hex(b"a\nb\nc\nd"));
        assert_eq!(s.size, 7);
    }

    #[test]
    fn crlf_across_chunks_is_counted() {
        let s = scan_str("a\r\nb\r\nc\r\n", 1, 1);
        assert_eq!((s.crlf_lines, s.lf_lines, s.total_lines), (3, 0, 3));
    }

    #[test]
    fn long_lines_are_cut_on_char_boundaries() {
        let line = "é".repeat(MAX_LINE_CHARS + 5);
        let (cut, was) = cut_line(&line);
        assert!(was);
        assert!(cut.ends_with(LINE_CUT_MARKER));
        assert_eq!(cut.chars().count(), MAX_LINE_CHARS + LINE_CUT_MARKER.len());
    }

    #[test]
    fn cut_lines_are_not_seen_in_full() {
        let long = "x".repeat(MAX_LINE_CHARS + 1);
        let s = scan_str(&format!("a\n{long}\nb\nc\n{long}\n"), 1, 2000);
        assert_eq!(s.seen_in_full(), vec![(1, 1), (3, 4)]);
    }

    #[test]
    fn a_huge_line_is_not_kept_whole() {
        let huge = format!("{}é\n", "y".repeat(1_000_000));
        let s = scan_str(&format!("a\r\n{huge}b\r\n"), 2, 1);
        assert_eq!(s.total_lines, 3);
        assert_eq!((s.crlf_lines, s.lf_lines), (2, 1));
        assert_eq!(s.cut, vec![2]);
        assert!(s.body.len() < LINE_KEEP_BYTES, "{}", s.body.len());
        assert_eq!(s.first_invalid_utf8, None);
        let mut buf = Vec::new();
        let end =
            next_line(&mut std::io::Cursor::new(huge.as_bytes()), &mut Sha256::new(), 10, &mut buf).unwrap().unwrap();
        assert!(end.clipped && end.newline && !end.cr);
        assert_eq!(buf.len(), 10);
    }

    #[test]
    fn clipped_prefix_ending_mid_character_is_not_invalid_utf8() {
        // 'é' is two bytes: put one of them right at the keep boundary.
        let line = format!("{}é{}\n", "x".repeat(LINE_KEEP_BYTES - 1), "z".repeat(10));
        let s = scan_str(&line, 1, 1);
        assert_eq!(s.first_invalid_utf8, None);
        assert_eq!(s.cut, vec![1]);
    }

    #[test]
    fn char_budget_stops_early() {
        let text: String = (0..100).map(|i| format!("line {i}\n")).collect();
        let s = scan(&mut std::io::Cursor::new(text.into_bytes()), 1, 2000, 50).unwrap();
        assert!(s.hit_char_cap);
        assert!(s.shown < 10);
        assert_eq!(s.total_lines, 100);
    }
}
