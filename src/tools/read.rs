//! `read`: numbered lines of a text file, with the file's identity and what was covered.
//!
//! The observation opens with one header line — path, content sha256 (prefix), line count and
//! delivery mode (full | range | truncated, and how many lines were cut short; "full" only when
//! every character is shown) — then notes (line endings, a byte-order mark, control characters,
//! invalid UTF-8), then `<n>\t<line>` lines, then any truncation note. What is shown is text:
//! delivery stops at the first binary line (fsutil's rule, which grep applies to the lines it
//! prints). The read is recorded in the session so that `edit` and `write` can check it.

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
                // What it holds, so that the next call can name a file (small models read the
                // workspace itself first).
                let listing =
                    suggest::dir_listing(ctx.workspace, &path.real).map(|l| format!(" {l}")).unwrap_or_default();
                return Err(ToolError::new(
                    ErrorCode::IsDirectory,
                    format!(
                        "{} is a directory, not a file.{listing} Read a file in it by its path; to list the files under it use glob, e.g. {{\"pattern\": \"**/*\", \"path\": \"{}\"}}.",
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
        if let Some(kind) = fsutil::file_type(&head) {
            return Err(binary_error(shown, kind, &head, meta.len).into());
        }
        if let Some(wide) = fsutil::wide_text(&head) {
            return Err(wide_text_error(shown, wide, meta.len).into());
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

        if let Some(stop) = scan.binary.as_ref().filter(|_| scan.shown == 0) {
            return Err(binary_line_error(shown, stop, meta.len)
                .with_file(FileIdentity::new(shown, scan.sha256))
                .into());
        }
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
        Ok(ToolOutput { truncated, file: Some(FileIdentity::new(shown, scan.sha256)), ..ToolOutput::new(text) })
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
    /// Delivery stopped at this line: it is binary ([`fsutil::binary_line`]).
    binary: Option<BinaryStop>,
    /// The file starts with a UTF-8 byte-order mark (not shown).
    bom: bool,
    /// Control characters shown as symbols ([`mark_controls`]), and the first line with one.
    controls: Controls,
    first_control_line: Option<u64>,
}

/// The first binary line among those read would have shown.
struct BinaryStop {
    line: u64,
    /// File offset of the line's first byte.
    start: u64,
    what: fsutil::BinaryLine,
    /// CRLF and LF line ends before this line.
    crlf: u64,
    lf: u64,
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
/// Memory stays bounded by the output budget whatever the file's size. Delivery stops at the
/// first line that is binary: what read shows is text, line by line, by the same rule grep
/// applies to the lines it prints.
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
        binary: None,
        bom: false,
        controls: Controls::default(),
        first_control_line: None,
    };
    let last_wanted = offset.saturating_add(limit - 1);
    let mut line = Vec::new();
    // Phase 1: line by line, until the requested range is delivered. A line keeps at most
    // enough bytes to show its first MAX_LINE_CHARS characters: a 200 MB line costs no memory.
    // (The first line keeps at least enough to see a byte-order mark.)
    let mut last_byte = None;
    loop {
        let keep = if s.total_lines + 1 >= offset {
            LINE_KEEP_BYTES
        } else if s.total_lines == 0 {
            fsutil::UTF8_BOM.len()
        } else {
            0
        };
        let Some(end) = next_line(reader, &mut hasher, keep, &mut line)? else { break };
        last_byte = Some(end.last);
        let line_start = s.size;
        s.size += end.len;
        s.total_lines += 1;
        let no = s.total_lines;
        let ends_before = (s.crlf_lines, s.lf_lines);
        match (end.newline, end.cr) {
            (true, true) => s.crlf_lines += 1,
            (true, false) => s.lf_lines += 1,
            _ => {}
        }
        let mut content = &line[..];
        if no == 1 && content.starts_with(fsutil::UTF8_BOM) {
            s.bom = true;
            content = &content[fsutil::UTF8_BOM.len()..];
        }
        if no >= offset && !s.hit_char_cap {
            let content = if end.clipped {
                // The prefix may end inside a multi-byte character: drop that partial tail.
                match std::str::from_utf8(content) {
                    Err(e) if e.error_len().is_none() => &content[..e.valid_up_to()],
                    _ => content,
                }
            } else {
                let c = content.strip_suffix(b"\n").unwrap_or(content);
                if end.cr { c.strip_suffix(b"\r").unwrap_or(c) } else { c }
            };
            if let Some(what) = fsutil::binary_line(content, end.nul) {
                // Line endings are told for the text read showed, not for line breaks that
                // happen to be in binary data.
                let (crlf, lf) = ends_before;
                s.binary = Some(BinaryStop { line: no, start: line_start, what, crlf, lf });
                break;
            }
            let text = String::from_utf8_lossy(content);
            let invalid = matches!(text, std::borrow::Cow::Owned(_));
            let (text, cut) = cut_line(&text);
            let (text, controls) = mark_controls(&text);
            let entry = format!("{no}\t{text}\n");
            if s.shown > 0 && s.body.len() + entry.len() > max_chars {
                s.hit_char_cap = true;
            } else {
                if cut {
                    s.cut.push(no);
                }
                if invalid && s.first_invalid_utf8.is_none() {
                    s.first_invalid_utf8 = Some(no);
                }
                if !controls.is_empty() && s.first_control_line.is_none() {
                    s.first_control_line = Some(no);
                }
                s.controls.0 |= controls.0;
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
    /// The offset in the line of its first NUL byte, kept or not.
    nul: Option<usize>,
}

/// Read one line: hash all of it, keep at most `keep` bytes of it in `out`. `None` at the end.
fn next_line(
    reader: &mut impl std::io::BufRead,
    hasher: &mut Sha256,
    keep: usize,
    out: &mut Vec<u8>,
) -> std::io::Result<Option<LineEnd>> {
    out.clear();
    let (mut len, mut tail, mut nul) = (0u64, [0u8; 2], None);
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
        if nul.is_none() {
            nul = memchr::memchr(0, chunk).map(|i| len as usize + i);
        }
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
        nul,
    }))
}

/// A line as read shows it: cut at [`MAX_LINE_CHARS`] with [`LINE_CUT_MARKER`]; whether it was cut.
pub(crate) fn cut_line(text: &str) -> (std::borrow::Cow<'_, str>, bool) {
    match text.char_indices().nth(MAX_LINE_CHARS) {
        Some((at, _)) => (format!("{}{LINE_CUT_MARKER}", &text[..at]).into(), true),
        None => (text.into(), false),
    }
}

/// Control characters seen: bit n for the character with code n (n < 32), bit 32 for DEL.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Controls(pub u64);

impl Controls {
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    fn bit(c: char) -> Option<u32> {
        match c {
            '\t' | '\n' => None,
            c if (c as u32) < 0x20 => Some(c as u32),
            '\u{7f}' => Some(32),
            _ => None,
        }
    }

    /// "␛ is ESC (\u001b), ␍ is CR (\r)" for the characters seen, at most five named.
    pub fn legend(self) -> String {
        let mut parts = Vec::new();
        for bit in 0..=32u32 {
            if self.0 & (1 << bit) == 0 {
                continue;
            }
            let code = if bit == 32 { 0x7f } else { bit };
            let symbol = if bit == 32 { '\u{2421}' } else { char::from_u32(0x2400 + bit).unwrap_or('?') };
            let name = match code {
                0x07 => "BEL",
                0x08 => "backspace",
                0x0b => "vertical tab",
                0x0c => "form feed",
                0x0d => "CR",
                0x1b => "ESC",
                0x7f => "DEL",
                _ => "the control character",
            };
            let escape = if code == 0x0d { "\\r".to_string() } else { format!("\\u{code:04x}") };
            let extra = if code == 0x1b { ", as in terminal colour codes" } else { "" };
            parts.push(format!("{symbol} is {name} ({escape}{extra})"));
        }
        let more = parts.len().saturating_sub(5);
        parts.truncate(5);
        let mut s = parts.join(", ");
        if more > 0 {
            s.push_str(&format!(" and {more} more"));
        }
        s
    }
}

/// Control characters as the visible symbols of Unicode's Control Pictures block (ESC as ␛,
/// a CR inside a line as ␍): raw, they would act on a terminal and be invisible to the model.
/// One character for one, so the cut and the character counts stay the same. Tab is kept.
pub(crate) fn mark_controls(text: &str) -> (std::borrow::Cow<'_, str>, Controls) {
    let mut seen = Controls::default();
    for c in text.chars() {
        if let Some(bit) = Controls::bit(c) {
            seen.0 |= 1 << bit;
        }
    }
    if seen.is_empty() {
        return (text.into(), seen);
    }
    let marked = text
        .chars()
        .map(|c| match Controls::bit(c) {
            Some(32) => '\u{2421}',
            Some(bit) => char::from_u32(0x2400 + bit).unwrap_or(c),
            None => c,
        })
        .collect::<String>();
    (marked.into(), seen)
}

/// The header read puts above a file's lines (`[read PATH · sha256 … ]`), when `line` starts
/// with one. Small models copy it, with the numbered lines under it, into write's content,
/// sometimes with the first line number glued after it (`…· full]1`).
pub(crate) fn header_prefix(line: &str) -> Option<&str> {
    if !(line.starts_with("[read ") && line.contains(" · sha256 ")) {
        return None;
    }
    line.find(']').map(|end| &line[..=end])
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
    // Cut short of what was asked: by the output budget, by binary lines, or by the default
    // limit (a limit the model chose itself is a range, not a truncation).
    let truncated = s.hit_char_cap || s.binary.is_some() || (!reached_end && !limit_given);
    let mut mode = if first == 1 && reached_end {
        if s.cut.is_empty() { "full".to_string() } else { "all lines".to_string() }
    } else if truncated {
        format!("truncated: lines {first}-{last}")
    } else {
        format!("range {first}-{last}")
    };
    // "full" promises every character: a line cut at MAX_LINE_CHARS breaks that promise.
    if !s.cut.is_empty() {
        mode.push_str(&format!(", {} cut short", super::plural(s.cut.len() as u64, "line", "lines")));
    }
    let mut out = format!("[read {} · sha256 {hash} · {lines} · {mode}]\n", super::path_line(shown));
    if s.bom {
        out.push_str(
            "[note: the file starts with a UTF-8 byte-order mark (BOM, U+FEFF), which is not shown. edit keeps it: old_string never needs it. write replaces it unless content starts with \\ufeff]\n",
        );
    }
    let (crlf_lines, lf_lines) = s.binary.as_ref().map_or((s.crlf_lines, s.lf_lines), |b| (b.crlf, b.lf));
    if crlf_lines > 0 {
        let note = if lf_lines > 0 {
            format!("mixed line endings ({crlf_lines} CRLF, {lf_lines} LF); CR is not shown")
        } else {
            "CRLF line endings; CR is not shown. edit matches bytes exactly: write \\r\\n in old_string (in new_string, plain \\n line breaks are written as \\r\\n)"
                .to_string()
        };
        out.push_str(&format!("[note: {note}]\n"));
    }
    let mut controls = s.controls;
    let cr_bit = 1 << 0x0d;
    if crlf_lines == 0 && lf_lines == 0 && controls.0 & cr_bit != 0 {
        controls.0 &= !cr_bit;
        out.push_str(&format!(
            "[note: this file's line breaks are CR (\\r) alone, with no LF, so read, grep and edit see it as one line, each CR shown as ␍. In edit's old_string and new_string write a break as \\r. To split it into lines, convert it with bash (this changes its line endings): `tr '\\r' '\\n' < {p} > {p}.tmp && mv {p}.tmp {p}`]\n",
            p = shown.display()
        ));
    }
    if !controls.is_empty() {
        out.push_str(&format!(
            "[note: control characters are shown as symbols: {}; the first is on line {}. They are single characters in the file: in edit's old_string and new_string write them as the JSON escapes given]\n",
            controls.legend(),
            s.first_control_line.unwrap_or(first)
        ));
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
    if let Some(b) = &s.binary {
        out.push_str(&format!(
            "[binary from line {}: {}. read shows text only, so it stops there; {} above {} text. To inspect the rest use bash, e.g. `tail -c +{} {} | xxd | head`.{}]\n",
            b.line,
            b.what.describe(b.start),
            if first == last { format!("line {first}") } else { format!("lines {first}-{last}") },
            if first == last { "is" } else { "are" },
            b.start + 1,
            shown.display(),
            b.what.legacy_hint(shown)
        ));
    } else if truncated {
        let why = if s.hit_char_cap { " (the output size limit was reached)" } else { "" };
        out.push_str(&format!(
            "[truncated: showing lines {first}-{last} of {total}{why}. Use offset/limit to read more: the next offset is {}.]\n",
            last + 1
        ));
    }
    (out, truncated || !s.cut.is_empty())
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

/// The first line read would show is binary: the whole file (line 1), or from the start of
/// the range asked for.
fn binary_line_error(shown: &Path, stop: &BinaryStop, size: u64) -> ToolError {
    let what = stop.what.describe(stop.start);
    let hint = stop.what.legacy_hint(shown);
    let message = if stop.line == 1 && stop.what.maybe_legacy_text() {
        format!(
            "{} is {what}, {}. read shows UTF-8 text only and does not dump other bytes.{hint} To inspect the bytes, use bash (e.g. `file`, `xxd | head`).",
            shown.display(),
            human_bytes(size)
        )
    } else if stop.line == 1 {
        format!(
            "{} is a binary file: {what}, {}. read returns text only and does not dump binary bytes. To inspect it, use bash (e.g. `file`, `xxd | head`), or read the text file it was built from.",
            shown.display(),
            human_bytes(size)
        )
    } else {
        format!(
            "line {} of {}, where this range starts, is binary: {what}. read returns text only and does not dump binary bytes. Read a range before it, or inspect the bytes with bash, e.g. `tail -c +{} {} | xxd | head`.{hint}",
            stop.line,
            shown.display(),
            stop.start + 1,
            shown.display()
        )
    };
    ToolError::new(ErrorCode::BinaryFile, message)
}

/// UTF-16 or UTF-32 text: named, with the conversion that makes it readable.
fn wide_text_error(shown: &Path, wide: fsutil::WideText, size: u64) -> ToolError {
    ToolError::new(
        ErrorCode::BinaryFile,
        format!(
            "{p} is {name} text (it starts with a byte-order mark), {size}. read and edit work on UTF-8 text only. To see it, convert it on the fly with bash: `iconv -f {iconv} -t UTF-8 {p} | head -n 200`. To read and edit it here, convert the file to UTF-8 first, if the project allows (this rewrites it): `iconv -f {iconv} -t UTF-8 {p} > {p}.tmp && mv {p}.tmp {p}`.{grep}",
            p = shown.display(),
            name = wide.name,
            size = human_bytes(size),
            iconv = wide.iconv,
            grep = if wide.iconv == "UTF-16" { " grep searches UTF-16 files as they are." } else { "" }
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

    fn random_bytes(n: usize, seed: u32) -> Vec<u8> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                (x >> 16) as u8
            })
            .collect()
    }

    #[test]
    fn a_nul_past_the_first_8_kib_stops_delivery_at_its_line() {
        // The NUL sits at byte 8192, just past what the old 8 KiB sniff looked at.
        let mut data = "x".repeat(127) + "\n";
        data = data.repeat(64);
        let mut bytes = data.into_bytes();
        assert_eq!(bytes.len(), 8192);
        bytes.extend_from_slice(b"\x00tail\nafter\n");
        let s = scan(&mut std::io::Cursor::new(bytes), 1, 2000, 1_000_000).unwrap();
        assert_eq!(s.shown, 64);
        let b = s.binary.as_ref().unwrap();
        assert_eq!((b.line, b.start, b.what.nul), (65, 8192, Some(0)));
        assert_eq!(s.total_lines, 66);
        let (text, truncated) = render(Path::new("/w/f"), &s, 1, false);
        assert!(truncated);
        assert!(text.contains("· truncated: lines 1-64]"), "{}", &text[..200]);
        assert!(text.ends_with("[binary from line 65: binary data with a NUL byte at byte 8192. read shows text only, so it stops there; lines 1-64 above are text. To inspect the rest use bash, e.g. `tail -c +8193 /w/f | xxd | head`.]\n"), "{}", &text[text.len() - 300..]);
    }

    #[test]
    fn a_shell_header_then_200_kb_of_random_bytes_shows_the_header_only() {
        // The issue's case: 99,705 U+FFFD characters came back.
        let mut bytes = b"#!/bin/sh\ntail -n +3 \"$0\" | tar xz\n".to_vec();
        bytes.extend(random_bytes(200_000, 7));
        let s = scan(&mut std::io::Cursor::new(bytes), 1, 2000, 100_000).unwrap();
        assert_eq!(s.shown, 2);
        assert_eq!(s.binary.as_ref().map(|b| b.line), Some(3));
        assert!(!s.body.contains('\u{fffd}'), "{}", s.body);
        let (text, _) = render(Path::new("/w/f"), &s, 1, false);
        assert!(text.len() < 1000, "{text}");
        // A range inside the random part: nothing to deliver, so run() refuses it.
        let mut bytes = b"#!/bin/sh\n".to_vec();
        bytes.extend(random_bytes(200_000, 7));
        let s = scan(&mut std::io::Cursor::new(bytes), 40, 10, 100_000).unwrap();
        assert_eq!((s.shown, s.binary.as_ref().map(|b| b.line)), (0, Some(40)));
    }

    #[test]
    fn bom_is_not_shown_and_noted() {
        let s = scan_str("\u{feff}import os\nx\n", 1, 10);
        assert!(s.bom);
        assert_eq!(s.body, "1\timport os\n2\tx\n");
        let (text, _) = render(Path::new("/w/f"), &s, 1, false);
        assert!(text.contains("UTF-8 byte-order mark"), "{text}");
        // Seen even when line 1 is not delivered.
        assert!(scan_str("\u{feff}a\nb\n", 2, 1).bom);
        assert!(!scan_str("a\u{feff}\nb\n", 1, 5).bom);
    }

    #[test]
    fn control_characters_are_marked_and_noted() {
        let s = scan_str("plain\n\u{1b}[1mbold\u{1b}[0m\ta\u{7f}\n", 1, 10);
        assert_eq!(s.body, "1\tplain\n2\t\u{241b}[1mbold\u{241b}[0m\ta\u{2421}\n");
        assert_eq!(s.first_control_line, Some(2));
        let (text, _) = render(Path::new("/w/f"), &s, 1, false);
        assert!(text.contains("␛ is ESC (\\u001b, as in terminal colour codes), ␡ is DEL (\\u007f)"), "{text}");
        assert_eq!(mark_controls("tab\tstays").0, "tab\tstays");
    }

    #[test]
    fn cr_only_files_get_their_own_note() {
        let s = scan_str("one\rtwo\rthree\r", 1, 10);
        assert_eq!(s.total_lines, 1);
        let (text, _) = render(Path::new("/w/f"), &s, 1, false);
        assert!(text.contains("line breaks are CR (\\r) alone"), "{text}");
        assert!(!text.contains("control characters are shown"), "CR is told once: {text}");
        assert!(text.contains("1\tone␍two␍three␍\n"), "{text}");
        // A CR inside an LF file is only marked.
        let (text, _) = render(Path::new("/w/f"), &scan_str("10%\r100%\nok\n", 1, 10), 1, false);
        assert!(!text.contains("alone") && text.contains("␍ is CR"), "{text}");
    }

    #[test]
    fn cut_lines_make_the_header_say_so() {
        let long = "x".repeat(MAX_LINE_CHARS + 1);
        let s = scan_str(&format!("a\n{long}\n"), 1, 10);
        let (text, truncated) = render(Path::new("/w/f"), &s, 1, false);
        assert!(text.starts_with("[read /w/f · sha256 "), "{text}");
        assert!(text.contains(" · 2 lines · all lines, 1 line cut short]\n"), "{}", &text[..120]);
        assert!(truncated, "a cut line is a truncated output");
        let s = scan_str(&format!("a\n{long}\nb\n"), 2, 1);
        let (text, _) = render(Path::new("/w/f"), &s, 2, true);
        assert!(text.contains(" · range 2-2, 1 line cut short]"), "{}", &text[..120]);
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
