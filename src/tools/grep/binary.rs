//! What grep searches of a file, by the rule read applies to the lines it shows
//! ([`fsutil::binary_line`]): a file whose first bytes name a binary format is skipped whole;
//! any other file is searched up to the start of its first line holding a NUL byte
//! ([`TextPart`]); and each line grep would print is checked against the rest of the rule (the
//! share of control characters and invalid UTF-8) as it is printed ([`BinaryCut`]). So a file
//! read shows lines 1-40 of, then stops as binary, is a file grep searches lines 1-40 of.

use std::io::{self, Read};

use crate::tools::fsutil;

/// Bytes looked at to name a file's type (a tar header's magic is at 257).
const HEAD: usize = 512;
/// Bytes read from the file at a time.
const CHUNK: usize = 64 * 1024;
/// A line longer than this is given to the searcher before its end is seen (the searcher
/// holds long lines itself, up to its own limit); a NUL further on cuts the search there.
const HOLD_MAX: usize = 1 << 20;

/// Where a file's binary part starts, and what it is.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct BinaryFrom {
    /// File offset where the text part ends: the start of the line that is binary (or, for
    /// a NUL the searcher met in decoded text, the NUL), 0 for a binary format.
    pub start: u64,
    /// What it is, or what makes it binary: "PNG image", "a NUL byte at byte 120", ...
    pub what: String,
}

/// A reader over a file that ends where its binary part starts: at the start of the first line
/// holding a NUL byte, or at once for a binary format. UTF-16 text (a byte-order mark) passes
/// through whole, for the searcher to decode.
pub(super) struct TextPart<R> {
    inner: R,
    /// Bytes read are `buf[..end]` (the buffer is reused, not refilled with zeros each time).
    buf: Vec<u8>,
    end: usize,
    /// `buf[pos..ready]` may be given out: whole lines, or the start of a very long one.
    pos: usize,
    ready: usize,
    /// File offset of `buf[0]`.
    base: u64,
    eof: bool,
    started: bool,
    wide: bool,
    binary: Option<BinaryFrom>,
}

impl<R: Read> TextPart<R> {
    pub fn new(inner: R) -> Self {
        TextPart {
            inner,
            buf: Vec::new(),
            end: 0,
            pos: 0,
            ready: 0,
            base: 0,
            eof: false,
            started: false,
            wide: false,
            binary: None,
        }
    }

    /// Where the binary part starts, once the search has reached it.
    pub fn binary(&self) -> Option<&BinaryFrom> {
        self.binary.as_ref()
    }

    /// Append up to `n` bytes from the file; false at its end.
    fn read_more(&mut self, n: usize) -> io::Result<bool> {
        if self.buf.len() < self.end + n {
            self.buf.resize(self.end + n, 0);
        }
        let got = loop {
            match self.inner.read(&mut self.buf[self.end..self.end + n]) {
                Ok(got) => break got,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        };
        self.end += got;
        Ok(got > 0)
    }

    fn start(&mut self) -> io::Result<()> {
        self.started = true;
        while self.end < HEAD {
            if !self.read_more(HEAD - self.end)? {
                self.eof = true;
                break;
            }
        }
        let head = &self.buf[..self.end];
        if let Some(kind) = fsutil::file_type(head) {
            self.stop(0, kind.to_string());
            return Ok(());
        }
        match fsutil::wide_text(head) {
            Some(w) if w.iconv == "UTF-16" => {
                self.wide = true;
                self.ready = self.end;
            }
            Some(w) => self.stop(0, format!("{} text", w.name)),
            None => self.scan(0),
        }
        Ok(())
    }

    /// End the text at `buf[cut]` (never before what was given out); the binary part is
    /// `what`.
    fn stop(&mut self, cut: usize, what: String) {
        self.ready = cut.max(self.pos);
        self.end = self.ready;
        self.eof = true;
        self.binary = Some(BinaryFrom { start: self.base + self.ready as u64, what });
    }

    /// Look at `buf[from..]`, just read: stop at a NUL's line, else make whole lines ready.
    fn scan(&mut self, from: usize) {
        if let Some(i) = memchr::memchr(0, &self.buf[from..self.end]) {
            let nul = from + i;
            let line_start = memchr::memrchr(b'\n', &self.buf[..nul]).map_or(0, |p| p + 1);
            // The start of a very long line may have been given out already: cut at the NUL's
            // line or, when that is gone, where what was given ends.
            let cut = line_start.max(self.ready);
            let at = self.base + nul as u64;
            self.stop(cut, format!("a NUL byte at byte {at}"));
            return;
        }
        if self.eof {
            self.ready = self.end;
        } else if let Some(p) = memchr::memrchr(b'\n', &self.buf[self.ready..self.end]) {
            self.ready += p + 1;
        }
        if self.end - self.ready > HOLD_MAX {
            self.ready = self.end;
        }
    }

    fn fill(&mut self) -> io::Result<()> {
        // Drop what was given out.
        self.buf.copy_within(self.pos..self.end, 0);
        self.base += self.pos as u64;
        self.end -= self.pos;
        self.ready -= self.pos;
        self.pos = 0;
        let from = self.end;
        if !self.read_more(CHUNK)? {
            self.eof = true;
        }
        if self.wide {
            self.ready = self.end;
        } else {
            self.scan(from);
        }
        Ok(())
    }
}

impl<R: Read> Read for TextPart<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if !self.started {
            self.start()?;
        }
        loop {
            if self.pos < self.ready {
                let n = (self.ready - self.pos).min(out.len());
                out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
                self.pos += n;
                return Ok(n);
            }
            if self.eof {
                return Ok(0);
            }
            self.fill()?;
        }
    }
}

/// What binary data did to one file's search, in count and content mode and for the lines
/// grep checks as it finds them.
///
/// A file whose binary part starts before any match is binary and skipped. Met after
/// matches were found, the file keeps its results up to that point, and a note says they
/// stop there.
#[derive(Debug, Default)]
pub(super) struct BinaryCut {
    /// Binary before the first match: skipped, and why.
    pub skipped: Option<BinaryFrom>,
    /// Where the binary part starts in a file with results before it.
    pub at: Option<BinaryFrom>,
}

impl BinaryCut {
    /// The searcher met a NUL byte (in UTF-16 text, after decoding): whether to go on searching.
    pub fn binary_data(&mut self, found: bool, offset: u64) -> bool {
        self.binary(found, BinaryFrom { start: offset, what: format!("a NUL byte at byte {offset}") })
    }

    /// A line about to be counted or printed, starting at file offset `offset`: true when it
    /// is binary (then the search stops before it).
    pub fn line_is_binary(&mut self, found: bool, line: &[u8], offset: u64) -> bool {
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        // The bytes a printed line can show (grep cuts lines at MAX_LINE_CHARS characters).
        let shown = &line[..line.len().min(super::MAX_LINE_CHARS * 4 + 4)];
        let Some(b) = fsutil::binary_line(shown, None) else { return false };
        self.binary(found, BinaryFrom { start: offset, what: b.cause(offset) });
        true
    }

    /// The file's text part ended at its binary part ([`TextPart`]).
    pub fn text_ended(&mut self, found: bool, from: Option<&BinaryFrom>) {
        if let Some(from) = from
            && self.skipped.is_none()
            && self.at.is_none()
        {
            self.binary(found, from.clone());
        }
    }

    fn binary(&mut self, found: bool, from: BinaryFrom) -> bool {
        if !found {
            self.skipped.get_or_insert(from);
            return false;
        }
        self.at.get_or_insert(from);
        true
    }

    /// The bytes of a match or context block starting at byte `start` of the file, up to a
    /// NUL the searcher met, and whether it was reached (nothing after it is reported: the
    /// search stops).
    pub fn before_nul<'b>(&self, bytes: &'b [u8], start: u64) -> (&'b [u8], bool) {
        match &self.at {
            Some(at) => {
                let keep = usize::try_from(at.start.saturating_sub(start)).unwrap_or(usize::MAX);
                if keep < bytes.len() { (&bytes[..keep], true) } else { (bytes, false) }
            }
            None => (bytes, false),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text_part(data: &[u8], read_size: usize) -> (Vec<u8>, Option<BinaryFrom>) {
        let mut t = TextPart::new(data);
        let mut out = Vec::new();
        let mut buf = vec![0u8; read_size];
        loop {
            let n = t.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        (out, t.binary().cloned())
    }

    #[test]
    fn ends_at_the_start_of_the_nul_line() {
        for size in [1, 7, 4096] {
            let (out, bin) = text_part(b"one\ntwo\nthr\x00ee\nfour\n", size);
            assert_eq!(out, b"one\ntwo\n");
            assert_eq!(bin, Some(BinaryFrom { start: 8, what: "a NUL byte at byte 11".into() }));
        }
        let (out, bin) = text_part(b"\x00abc", 16);
        assert!(out.is_empty());
        assert_eq!(bin.unwrap().start, 0);
    }

    #[test]
    fn a_nul_far_into_a_big_file_is_found() {
        let mut data = b"hit\n".repeat(50_000);
        let nul_line = data.len();
        data.extend_from_slice(b"tail hit \x00 more\nhit\n");
        let (out, bin) = text_part(&data, 8192);
        assert_eq!(out.len(), nul_line);
        let bin = bin.unwrap();
        assert_eq!((bin.start, bin.what), (nul_line as u64, format!("a NUL byte at byte {}", nul_line + 9)));
    }

    #[test]
    fn text_without_nul_passes_whole() {
        let data = b"a\nb\nno newline at the end";
        assert_eq!(text_part(data, 3), (data.to_vec(), None));
    }

    #[test]
    fn binary_formats_and_utf32_end_at_once_utf16_passes() {
        let (out, bin) = text_part(b"\x89PNG\r\n\x1a\nhit\n", 64);
        assert!(out.is_empty());
        assert_eq!(bin.unwrap().what, "PNG image");
        let (out, bin) = text_part(b"\xff\xfe\x00\x00h\x00\x00\x00", 64);
        assert!(out.is_empty());
        assert_eq!(bin.unwrap().what, "UTF-32 little-endian text");
        let utf16 = b"\xff\xfeh\x00i\x00t\x00\n\x00";
        assert_eq!(text_part(utf16, 3), (utf16.to_vec(), None));
    }

    #[test]
    fn a_very_long_line_is_not_held_whole() {
        let mut data = vec![b'x'; HOLD_MAX + 3 * CHUNK];
        data.extend_from_slice(b"\x00\n");
        let (out, bin) = text_part(&data, 65536);
        // Its start was given out before the NUL was seen; the search stops where that ended.
        assert!(out.len() > HOLD_MAX && out.len() <= data.len() - 2, "{}", out.len());
        let bin = bin.unwrap();
        assert_eq!(bin.start, out.len() as u64);
        assert_eq!(bin.what, format!("a NUL byte at byte {}", HOLD_MAX + 3 * CHUNK));
    }

    #[test]
    fn binary_cut_stops_at_the_nul() {
        let mut cut = BinaryCut::default();
        assert_eq!(cut.before_nul(b"abc\n", 100), (&b"abc\n"[..], false));
        assert!(cut.binary_data(true, 102));
        assert_eq!(cut.before_nul(b"abc\n", 100), (&b"ab"[..], true));
        assert_eq!(cut.before_nul(b"abc\n", 102), (&b""[..], true));
        assert_eq!(cut.before_nul(b"abc\n", 90), (&b"abc\n"[..], false));
        assert!(cut.binary_data(true, 500), "only the first NUL counts");
        assert_eq!(cut.at.as_ref().unwrap().start, 102);
        let mut none = BinaryCut::default();
        assert!(!none.binary_data(false, 7), "binary before any match: skip the file");
        assert!(none.skipped.is_some() && none.at.is_none());
    }

    #[test]
    fn printed_lines_follow_the_share_rule() {
        let mut cut = BinaryCut::default();
        assert!(!cut.line_is_binary(true, b"\x1b[31mred\x1b[0m text\n", 0));
        let noise: Vec<u8> = (1u8..=60).map(|i| i.wrapping_mul(37) | 0x80).collect();
        assert!(cut.line_is_binary(true, &noise, 40));
        assert_eq!(cut.at.as_ref().unwrap().start, 40);
        assert!(cut.at.as_ref().unwrap().what.starts_with("a line at byte 40 of which"), "{:?}", cut.at);
    }
}
