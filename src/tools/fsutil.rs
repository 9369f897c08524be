//! File helpers shared by the file tools: content identity, binary sniffing, atomic writes.

use std::ffi::{OsStr, OsString};
use std::fs::{self, File};
use std::io::{self, Read as _};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::{ErrorCode, ToolError};
use crate::sandbox::Workspace;
use crate::sandbox::confined::{DirHandle, FsError, Kind, Meta, ReplaceError};

/// The identity of a file's content as the model last saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileIdentity {
    pub path: String,
    pub sha256: String,
}

impl FileIdentity {
    pub fn new(path: &Path, sha256: String) -> Self {
        FileIdentity { path: path.display().to_string(), sha256 }
    }
}

/// How many hex digits of a sha256 we show the model: enough to tell versions apart.
pub const SHORT_HASH: usize = 12;

pub fn short(hash: &str) -> &str {
    &hash[..hash.len().min(SHORT_HASH)]
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// The sha256 of a file's contents, streamed (model files and VM kernels are large).
pub fn sha256_file(path: &Path) -> io::Result<String> {
    let mut h = Sha256::new();
    io::copy(&mut File::open(path)?, &mut h)?;
    Ok(hex(&h.finalize()))
}

pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// Modification time in nanoseconds since the epoch (0 when the platform cannot say).
pub fn mtime_ns(meta: &fs::Metadata) -> i64 {
    meta.modified().ok().and_then(|t| t.duration_since(UNIX_EPOCH).ok()).map(|d| d.as_nanos() as i64).unwrap_or(0)
}

/// Bytes to look at when naming a file's type from its first bytes.
pub const SNIFF_BYTES: usize = 8192;

/// Name a binary file format from its first bytes (magic numbers), or `None`. Such a file is
/// binary as a whole: read refuses it, grep skips it, edit refuses it, whatever its lines hold.
pub fn file_type(head: &[u8]) -> Option<&'static str> {
    const MAGIC: &[(&[u8], &str)] = &[
        (b"\x89PNG\r\n\x1a\n", "PNG image"),
        (b"\xff\xd8\xff", "JPEG image"),
        (b"GIF87a", "GIF image"),
        (b"GIF89a", "GIF image"),
        (b"%PDF-", "PDF document"),
        (b"PK\x03\x04", "ZIP archive (also jar, docx, xlsx, wheel)"),
        (b"\x1f\x8b", "gzip-compressed data"),
        (b"\x7fELF", "ELF executable or object"),
        (b"BZh", "bzip2-compressed data"),
        (b"\xfd7zXZ\x00", "xz-compressed data"),
        (b"\x28\xb5\x2f\xfd", "zstd-compressed data"),
        (b"7z\xbc\xaf\x27\x1c", "7-zip archive"),
        (b"SQLite format 3\x00", "SQLite database"),
        (b"\x00asm", "WebAssembly module"),
        (b"GGUF", "GGUF model weights"),
        (b"RIFF", "RIFF media (WAV, AVI or WebP)"),
        (b"OggS", "Ogg media"),
        (b"ID3", "MP3 audio"),
        (b"\xca\xfe\xba\xbe", "Java class file or Mach-O binary"),
        (b"BM", "BMP image"),
    ];
    for (magic, name) in MAGIC {
        // "BM" is too short to trust on its own: also require a NUL in the header.
        if head.starts_with(magic) && (*name != "BMP image" || head.contains(&0)) {
            return Some(name);
        }
    }
    if head.len() >= 262 && &head[257..262] == b"ustar" {
        return Some("tar archive");
    }
    None
}

/// The UTF-8 byte-order mark. read does not show it; edit leaves it in place.
pub const UTF8_BOM: &[u8] = b"\xef\xbb\xbf";

/// Unicode text in an encoding other than UTF-8, known by its byte-order mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WideText {
    /// "UTF-16 little-endian".
    pub name: &'static str,
    /// The encoding's name for `iconv -f` (which reads the byte order from the mark).
    pub iconv: &'static str,
}

/// A UTF-16 or UTF-32 byte-order mark at the start of a file.
pub fn wide_text(head: &[u8]) -> Option<WideText> {
    // UTF-32LE's mark starts with UTF-16LE's: test it first.
    const MARKS: &[(&[u8], &str, &str)] = &[
        (b"\xff\xfe\x00\x00", "UTF-32 little-endian", "UTF-32"),
        (b"\x00\x00\xfe\xff", "UTF-32 big-endian", "UTF-32"),
        (b"\xff\xfe", "UTF-16 little-endian", "UTF-16"),
        (b"\xfe\xff", "UTF-16 big-endian", "UTF-16"),
    ];
    MARKS.iter().find(|(mark, ..)| head.starts_with(mark)).map(|&(_, name, iconv)| WideText { name, iconv })
}

/// A line that is shown as binary, not text: read and grep stop at the first such line they
/// would show (see [`binary_line`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BinaryLine {
    /// The offset of the line's first NUL byte in the line.
    pub nul: Option<usize>,
    /// Bytes looked at.
    pub len: usize,
    /// Control characters among them (besides tab, the line ends, form feed, backspace, ESC).
    pub controls: usize,
    /// Bytes that are not valid UTF-8.
    pub invalid: usize,
}

/// Of the bytes looked at, at least this many...
pub const BINARY_MIN_SUSPECT: usize = 8;
/// ...and more than this percentage must be control characters or invalid UTF-8 for a line
/// without a NUL byte to be binary. Text in a legacy 8-bit encoding with a few accented
/// letters stays text (shown with U+FFFD); random bytes (about 60%) and text in a non-Latin
/// legacy encoding (mostly invalid UTF-8) are over it.
pub const BINARY_PERCENT: usize = 30;

impl BinaryLine {
    pub fn percent(&self) -> usize {
        (self.controls + self.invalid) * 100 / self.len.max(1)
    }

    /// Mostly invalid UTF-8 with few control characters: more likely text in another
    /// encoding than binary data.
    pub fn maybe_legacy_text(&self) -> bool {
        self.nul.is_none() && self.controls * 10 < self.invalid
    }

    /// What the line is, for a message ("binary data with a NUL byte at byte 120"); `at` is
    /// the file offset of the line's first byte.
    pub fn describe(&self, at: u64) -> String {
        match self.nul {
            Some(_) => format!("binary data with {}", self.cause(at)),
            None if self.maybe_legacy_text() => format!(
                "text that is not UTF-8, or binary data ({}% of the line's bytes are not valid UTF-8)",
                self.percent()
            ),
            None => format!(
                "binary data ({}% of the line's bytes are control characters or not valid UTF-8)",
                self.percent()
            ),
        }
    }

    /// What makes the line binary ("a NUL byte at byte 120"), where `at` is the file offset of
    /// the line's first byte.
    pub fn cause(&self, at: u64) -> String {
        match self.nul {
            Some(i) => format!("a NUL byte at byte {}", at + i as u64),
            None if self.maybe_legacy_text() => {
                format!("a line at byte {at} of which {}% of the bytes are not valid UTF-8", self.percent())
            }
            None => format!(
                "a line at byte {at} of which {}% of the bytes are control characters or not valid UTF-8",
                self.percent()
            ),
        }
    }

    /// Advice for a line found by [`BinaryLine::maybe_legacy_text`], else empty.
    pub fn legacy_hint(&self, shown: &Path) -> String {
        if !self.maybe_legacy_text() {
            return String::new();
        }
        format!(
            " If it is text in an 8-bit encoding, convert it with bash to see it, e.g. `iconv -f WINDOWS-1252 -t UTF-8 {} | head -n 200` (with the file's real encoding; `file` may name it).",
            shown.display()
        )
    }
}

/// The one rule read and grep apply to each line they would show: a line is binary when it
/// holds a NUL byte, or when at least [`BINARY_MIN_SUSPECT`] and more than [`BINARY_PERCENT`]%
/// of its bytes are control characters or invalid UTF-8. `line` is what would be shown of the
/// line (a long line's first few thousand bytes); `nul` is a NUL found anywhere in the line.
pub fn binary_line(line: &[u8], nul: Option<usize>) -> Option<BinaryLine> {
    let nul = nul.or_else(|| memchr::memchr(0, line));
    let mut b = BinaryLine { nul, len: line.len(), controls: 0, invalid: 0 };
    for chunk in line.utf8_chunks() {
        b.controls += chunk.valid().bytes().filter(|&c| is_binary_control(c)).count();
        b.invalid += chunk.invalid().len();
    }
    let suspect = b.controls + b.invalid;
    let binary = nul.is_some() || (suspect >= BINARY_MIN_SUSPECT && suspect * 100 > BINARY_PERCENT * b.len);
    binary.then_some(b)
}

/// Control bytes that text does not hold. Tab, the line ends, form feed, vertical tab,
/// backspace (overstrike in manual pages) and ESC (terminal colour codes) are common in text.
fn is_binary_control(b: u8) -> bool {
    (b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r' | 0x0b | 0x0c | 0x08 | 0x1b)) || b == 0x7f
}

/// What read refuses a file as from its first bytes: a binary format, UTF-16/32 text, or a
/// first line that is binary (see [`binary_line`]). `None` for a file read shows.
pub fn sniff_binary(head: &[u8]) -> Option<String> {
    if let Some(kind) = file_type(head) {
        return Some(kind.to_string());
    }
    if let Some(w) = wide_text(head) {
        return Some(format!("{} text", w.name));
    }
    let first = head.split(|&b| b == b'\n').next().unwrap_or(head);
    binary_line(first, None).map(|b| b.describe(0))
}

/// Read up to [`SNIFF_BYTES`] from the start of a file.
pub fn read_head(file: &mut File) -> io::Result<Vec<u8>> {
    let mut head = Vec::with_capacity(SNIFF_BYTES);
    std::io::Read::by_ref(file).take(SNIFF_BYTES as u64).read_to_end(&mut head)?;
    Ok(head)
}

/// Newlines in a byte buffer (SIMD: a byte-by-byte count runs at a fraction of memory speed).
pub fn count_newlines(bytes: &[u8]) -> usize {
    memchr::memchr_iter(b'\n', bytes).count()
}

/// Lines in a byte buffer, counting a final line without a newline.
pub fn line_count(bytes: &[u8]) -> usize {
    lines_from(count_newlines(bytes), bytes)
}

/// Lines of a buffer already known to hold `newlines` newlines.
pub fn lines_from(newlines: usize, bytes: &[u8]) -> usize {
    newlines + usize::from(bytes.last().is_some_and(|&b| b != b'\n'))
}

/// The model-facing error for a confined operation that did not happen. `real` and `shown`
/// are the path as resolved and as the model gave it: paths in the error are shown the
/// model's way.
pub fn fs_error(action: &str, shown: &Path, real: &Path, e: FsError) -> ToolError {
    let as_shown = |at: &Path| as_shown(shown, real, at);
    match e {
        FsError::Missing { at } => ToolError::new(
            ErrorCode::NotFound,
            format!(
                "cannot {action} {}: {} does not exist (it may have been removed while the call ran). Use glob to see what is there now.",
                shown.display(),
                as_shown(&at).display()
            ),
        ),
        FsError::NotADirectory { at } => ToolError::new(
            ErrorCode::NotADirectory,
            format!(
                "cannot {action} {}: {} is a file, not a directory. Check the path with glob.",
                shown.display(),
                as_shown(&at).display()
            ),
        ),
        // A symlink loop resolves to itself, so the tools meet it as a symlink: tell it from one
        // swapped in by asking the kernel (this only picks the message).
        FsError::Changed { at } if std::fs::metadata(&at).is_err_and(|e| e.raw_os_error() == Some(40)) => {
            super::io_error(action, shown, &io::Error::from_raw_os_error(40))
        }
        FsError::Changed { at } => changed_error(action, shown, &as_shown(&at)),
        FsError::NotRegular { at, kind } => ToolError::new(
            ErrorCode::Io,
            format!(
                "cannot {action} {}: {} is {}, not a regular file; file tools act on regular files only.",
                shown.display(),
                as_shown(&at).display(),
                kind.describe()
            ),
        ),
        FsError::Io { err, .. } => super::io_error(action, shown, &err),
    }
}

/// The path changed under the call: a symlink or another file was swapped in after the path was
/// resolved. Nothing outside the workspace was touched: the tools never follow such a link.
pub fn changed_error(action: &str, shown: &Path, at: &Path) -> ToolError {
    ToolError::new(
        ErrorCode::PathChanged,
        format!(
            "cannot {action} {}: {} was replaced (by a symlink or another file) while the call ran, so the path no longer means what it did when the call began. Something in the workspace is changing it, such as a bash command still running. Nothing outside the workspace was read or touched. Look at what is there now (glob, or bash `ls -l`), then call again.",
            shown.display(),
            at.display()
        ),
    )
}

/// Where a file's directory is, opened from its root: `None` when the directory (or one above
/// it) does not exist.
pub fn open_parent(
    ws: &Workspace,
    action: &str,
    shown: &Path,
    real: &Path,
) -> Result<Option<(DirHandle, OsString)>, ToolError> {
    match ws.open_parent(real) {
        Ok(p) => Ok(Some(p)),
        Err(FsError::Missing { .. }) => Ok(None),
        Err(e) => Err(fs_error(action, shown, real, e)),
    }
}

/// The directory of a file about to be created, created when the operator allows it
/// (`write.create_parent_dirs`), one directory at a time from the root's handle. Returns it,
/// the file's name, and the directories created, outermost first. `tool` names the tool in
/// the message.
pub fn create_parent(
    ws: &Workspace,
    tool: &str,
    create_allowed: bool,
    shown: &Path,
    real: &Path,
) -> Result<(DirHandle, OsString, Vec<PathBuf>), ToolError> {
    let (Some(parent), Some(name)) = (real.parent(), real.file_name()) else {
        return Err(fs_error("create", shown, real, FsError::NotRegular { at: real.to_path_buf(), kind: Kind::Dir }));
    };
    let shown_parent = shown.parent().unwrap_or(shown);
    let not_a_dir = |at: &Path| {
        let what = if at == parent {
            format!("{} is a file, not a directory", shown_parent.display())
        } else {
            format!("a component of {} is a file, not a directory", shown_parent.display())
        };
        ToolError::new(ErrorCode::NotADirectory, format!("cannot create {}: {what}.", shown.display()))
    };
    // The existing part first, then what is missing, created one directory at a time.
    let mut existing = parent;
    let dir = loop {
        match ws.open_dir(existing) {
            Ok(d) => break d,
            Err(FsError::Missing { .. }) => match existing.parent() {
                Some(up) if ws.contains(up) => existing = up,
                _ => return Err(fs_error("create", shown, real, FsError::Missing { at: existing.to_path_buf() })),
            },
            Err(FsError::NotADirectory { at }) => return Err(not_a_dir(&at)),
            Err(e) => return Err(fs_error("create", shown, real, e)),
        }
    };
    let missing: Vec<&std::ffi::OsStr> = parent.strip_prefix(existing).map(|r| r.iter().collect()).unwrap_or_default();
    if missing.is_empty() {
        return Ok((dir, name.to_os_string(), Vec::new()));
    }
    let first_missing = existing.join(missing[0]);
    if !create_allowed {
        let first_shown = as_shown(shown, real, &first_missing);
        return Err(ToolError::new(
            ErrorCode::ParentMissing,
            format!(
                "cannot create {}: its directory {} does not exist ({} is the first missing one). {tool} does not create directories unless the operator enables `write.create_parent_dirs`. Create it first (bash: `mkdir -p {}`), or use an existing directory.",
                shown.display(),
                shown_parent.display(),
                first_shown.display(),
                shown_parent.display()
            ),
        ));
    }
    let mut created = Vec::new();
    let mut dir = dir;
    let mut at = existing.to_path_buf();
    for name_part in missing {
        at.push(name_part);
        match dir.create_dir(name_part, 0o755) {
            Ok(()) => created.push(as_shown(shown, real, &at)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                let mut err = super::io_error("create the directory for", shown, &e);
                if !created.is_empty() {
                    err.mutated = true;
                    err.message.push_str(&format!(" These directories were created: {}.", list_paths(&created)));
                }
                return Err(err);
            }
        }
        dir = match dir.child_dir(name_part) {
            Ok(d) => d,
            Err(e) => {
                let mut err = fs_error("create", shown, real, e);
                if !created.is_empty() {
                    err.mutated = true;
                    err.message.push_str(&format!(" These directories were created: {}.", list_paths(&created)));
                }
                return Err(err);
            }
        };
    }
    Ok((dir, name.to_os_string(), created))
}

/// `at`, a real path near `real`, the way the model names it. `shown` and `real` differ where
/// the model's path goes through a symlink: below the point where they part, `at` is rebased
/// onto the shown side; elsewhere it is shown as it is.
pub fn as_shown(shown: &Path, real: &Path, at: &Path) -> PathBuf {
    let (mut r, mut s) = (real, shown);
    while let (Some(rn), Some(sn)) = (r.file_name(), s.file_name()) {
        if rn != sn {
            break;
        }
        match (r.parent(), s.parent()) {
            (Some(rp), Some(sp)) => (r, s) = (rp, sp),
            _ => break,
        }
    }
    match at.strip_prefix(r) {
        Ok(rest) if rest.as_os_str().is_empty() => s.to_path_buf(),
        Ok(rest) => s.join(rest),
        Err(_) => at.to_path_buf(),
    }
}

/// What is at a path in a directory, for write and edit.
pub enum Existing {
    Absent,
    File { bytes: Vec<u8>, meta: Meta },
    Dir,
    Other(Kind),
}

/// Look at `name` in `dir` and read it whole if it is a regular file.
pub fn existing(dir: &DirHandle, name: &OsStr, action: &str, shown: &Path, real: &Path) -> Result<Existing, ToolError> {
    match dir.open_file(name) {
        Ok((mut file, meta)) => {
            let mut bytes = Vec::with_capacity(meta.len as usize);
            file.read_to_end(&mut bytes).map_err(|e| super::io_error(action, shown, &e))?;
            Ok(Existing::File { bytes, meta })
        }
        Err(FsError::Missing { .. }) => Ok(Existing::Absent),
        Err(FsError::NotRegular { kind: Kind::Dir, .. }) => Ok(Existing::Dir),
        Err(FsError::NotRegular { kind, .. }) => Ok(Existing::Other(kind)),
        Err(e) => Err(fs_error(action, shown, real, e)),
    }
}

/// Replace `name` in `dir` with `bytes`, atomically. `expected` is the sha256 of what was
/// there when the caller decided (`None`: nothing was there): it is compared once more right
/// before the rename, so a change made meanwhile (by the guest, or another call) is never
/// overwritten unseen. Returns the new file's metadata.
pub fn replace(
    dir: &DirHandle,
    name: &OsStr,
    bytes: &[u8],
    mode: u32,
    expected: Option<&str>,
    shown: &Path,
    real: &Path,
) -> Result<Meta, ToolError> {
    let last_look = || -> Result<(), ToolError> {
        let now = match existing(dir, name, "write", shown, real)? {
            Existing::Absent => None,
            Existing::File { bytes, .. } => Some(sha256_hex(&bytes)),
            Existing::Dir => Some("a directory".to_string()),
            Existing::Other(kind) => Some(kind.describe().to_string()),
        };
        if now.as_deref() == expected {
            return Ok(());
        }
        let what = match (&now, expected) {
            (None, _) => "it was removed".to_string(),
            (Some(_), None) => "it was created".to_string(),
            (Some(n), Some(e)) => format!(
                "it was sha256 {} and is now {}",
                short(e),
                if n.len() == 64 { format!("sha256 {}", short(n)) } else { n.clone() }
            ),
        };
        Err(ToolError::new(
            ErrorCode::StaleRead,
            format!(
                "{} changed while this call ran ({what}), so it was not overwritten: something else is writing it (a bash command still running, or another call). Read it again and base your change on what is there now.",
                shown.display()
            ),
        ))
    };
    dir.replace(name, bytes, mode, last_look).map_err(|e| match e {
        ReplaceError::Refused(e) => e,
        ReplaceError::Io(e) => super::io_error("write", shown, &e),
    })
}

/// A sentence for a success message when the file's directory was moved while the call ran (the
/// file is where the directory went, not where the model said), or `None`.
pub fn moved_note(dir: &DirHandle, ws: &Workspace, name: &OsStr) -> Option<String> {
    let now = dir.current_path()?;
    if now == dir.path() {
        return None;
    }
    let at = now.join(name);
    let inside = if ws.contains(&now) { "" } else { " (outside the workspace: the operator should look at it)" };
    Some(format!(" Note: its directory was moved while the call ran, so the file is now at {}{inside}.", at.display()))
}

/// For a file that had `count` hard links before `tool` replaced it (atomically: a new file
/// renamed over this name), what became of the other names; `None` for one link.
pub fn hard_link_note(tool: &str, shown: &Path, count: u64) -> Option<String> {
    if count <= 1 {
        return None;
    }
    let others = count - 1;
    let (them, have, it) = if others == 1 {
        ("the other link still has".to_string(), "is now a separate file", "it")
    } else {
        (format!("the other {others} links still have"), "are now separate from this one", "each")
    };
    Some(format!(
        "Note: {p} had {count} hard links (names of one file). {tool} replaces a file atomically: it writes a new file and renames it over this name. So {them} the old content and {have}; if {it} should change too, {tool} {it} as well, or link {it} to this file again with bash: `ln -f {p} OTHER_NAME`.",
        p = shown.display(),
    ))
}

/// "a, b, c" for paths in messages.
pub fn list_paths(paths: &[PathBuf]) -> String {
    paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniff_names_types() {
        assert_eq!(sniff_binary(b"\x89PNG\r\n\x1a\n....").as_deref(), Some("PNG image"));
        assert_eq!(sniff_binary(b"hello\x00world").as_deref(), Some("binary data with a NUL byte at byte 5"));
        assert_eq!(sniff_binary("héllo wörld\n".as_bytes()), None);
        assert_eq!(sniff_binary(b"BMW is a car\n"), None);
        assert_eq!(sniff_binary(b"\xff\xfeh\x00i\x00").as_deref(), Some("UTF-16 little-endian text"));
        assert_eq!(sniff_binary(b"\xff\xfe\x00\x00h\x00\x00\x00").as_deref(), Some("UTF-32 little-endian text"));
        assert_eq!(sniff_binary(b"text\nmore\x00").as_deref(), None, "only the first line counts");
    }

    #[test]
    fn the_line_rule() {
        // Latin-1 with a few accented letters stays text; so do colour codes and overstrike.
        assert_eq!(binary_line(b"Pr\xe9sident \xe0 l'\xe9t\xe9 de la r\xe9publique", None), None);
        assert_eq!(binary_line(b"\x1b[31merror\x1b[0m: failed", None), None);
        assert_eq!(binary_line(b"N\x08NA\x08AM\x08ME\x08E", None), None);
        assert_eq!(binary_line(b"\x01\x02", None), None, "too few to judge");
        // A NUL anywhere, even one past the bytes shown.
        assert_eq!(binary_line(b"text\x00", None).unwrap().nul, Some(4));
        assert_eq!(binary_line(b"text", Some(9000)).unwrap().nul, Some(9000));
        // Random bytes: well over the share.
        let mut x: u32 = 12345;
        let random: Vec<u8> = (0..400)
            .map(|_| {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                (x >> 16) as u8
            })
            .filter(|&b| b != 0 && b != b'\n')
            .collect();
        let b = binary_line(&random, None).unwrap();
        assert!(b.percent() > 40 && !b.maybe_legacy_text(), "{b:?}");
        assert!(b.describe(0).starts_with("binary data ("), "{}", b.describe(0));
        // Greek in ISO-8859-7: every letter is an invalid byte, no control characters.
        let greek = b"\xca\xe1\xeb\xe7\xec\xdd\xf1\xe1 \xea\xfc\xf3\xec\xe5";
        let b = binary_line(greek, None).unwrap();
        assert!(b.maybe_legacy_text(), "{b:?}");
        assert!(b.describe(0).starts_with("text that is not UTF-8"), "{}", b.describe(0));
    }

    #[test]
    fn paths_are_shown_the_models_way() {
        let (shown, real) = (Path::new("/ws/lnk/a.txt"), Path::new("/ws/src/auth/a.txt"));
        assert_eq!(as_shown(shown, real, Path::new("/ws/src/auth/a.txt")), Path::new("/ws/lnk/a.txt"));
        assert_eq!(as_shown(shown, real, Path::new("/ws/src/auth/b/c")), Path::new("/ws/lnk/b/c"));
        assert_eq!(as_shown(shown, real, Path::new("/ws/src/x")), Path::new("/ws/src/x"));
        let same = Path::new("/ws/a/b.txt");
        assert_eq!(as_shown(same, same, Path::new("/ws/a")), Path::new("/ws/a"));
    }

    #[test]
    fn line_counts() {
        assert_eq!(line_count(b""), 0);
        assert_eq!(line_count(b"a"), 1);
        assert_eq!(line_count(b"a\n"), 1);
        assert_eq!(line_count(b"a\nb"), 2);
        assert_eq!(line_count(b"\n\n"), 2);
    }
}
