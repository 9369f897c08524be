//! File helpers shared by the file tools: content identity, binary sniffing, atomic writes.

use std::fs::{self, File};
use std::io::{self, Read as _, Write as _};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::{ErrorCode, ToolError};

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

/// Bytes to look at when deciding whether a file is binary.
pub const SNIFF_BYTES: usize = 8192;

/// Name the type of a binary file from its first bytes, or `None` for text.
pub fn sniff_binary(head: &[u8]) -> Option<&'static str> {
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
    if head.contains(&0) {
        return Some("binary data (contains NUL bytes)");
    }
    None
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

/// Make sure the parent directory of a file about to be created exists, creating it when the
/// operator allows (`write.create_parent_dirs`). Returns the directories created, outermost
/// first. `tool` names the tool in the message.
pub fn ensure_parent(tool: &str, create_allowed: bool, shown: &Path, real: &Path) -> Result<Vec<PathBuf>, ToolError> {
    let Some(parent) = real.parent() else { return Ok(Vec::new()) };
    let shown_parent = shown.parent().unwrap_or(shown);
    let not_a_dir =
        |what: String| ToolError::new(ErrorCode::NotADirectory, format!("cannot create {}: {what}.", shown.display()));
    match fs::metadata(parent) {
        Ok(m) if m.is_dir() => return Ok(Vec::new()),
        Ok(_) => return Err(not_a_dir(format!("{} is a file, not a directory", shown_parent.display()))),
        Err(e) if e.kind() == io::ErrorKind::NotADirectory => {
            return Err(not_a_dir(format!("a component of {} is a file, not a directory", shown_parent.display())));
        }
        Err(_) => {}
    }
    if !create_allowed {
        let missing = parent.ancestors().take_while(|a| !a.exists()).last().unwrap_or(parent);
        return Err(ToolError::new(
            ErrorCode::ParentMissing,
            format!(
                "cannot create {}: its directory {} does not exist ({} is the first missing one). {tool} does not create directories unless the operator enables `write.create_parent_dirs`. Create it first (bash: `mkdir -p {}`), or use an existing directory.",
                shown.display(),
                shown_parent.display(),
                missing.display(),
                shown_parent.display()
            ),
        ));
    }
    let created: Vec<PathBuf> = parent.ancestors().take_while(|a| !a.exists()).map(Path::to_path_buf).collect();
    fs::create_dir_all(parent).map_err(|e| super::io_error("create the directory for", shown, &e))?;
    Ok(created.into_iter().rev().collect())
}

/// "a, b, c" for paths in messages.
pub fn list_paths(paths: &[PathBuf]) -> String {
    paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
}

/// Write `bytes` to `path` atomically: a temp file in the same directory, fsync, rename over
/// the target, fsync the directory. `mode` is applied to the new file before the rename, so
/// the target never exists with the wrong permissions.
pub fn atomic_write(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let dir = path.parent().ok_or_else(|| io::Error::other("path has no parent directory"))?;
    let mut tmp = tempfile::Builder::new().prefix(".abhed-").suffix(".tmp").tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().set_permissions(fs::Permissions::from_mode(mode))?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    File::open(dir)?.sync_all()
}

/// The permission bits to give a rewritten file: its own if it exists, else `default`.
pub fn mode_for(path: &Path, default: u32) -> u32 {
    fs::metadata(path).map(|m| m.permissions().mode() & 0o7777).unwrap_or(default)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniff_names_types() {
        assert_eq!(sniff_binary(b"\x89PNG\r\n\x1a\n...."), Some("PNG image"));
        assert_eq!(sniff_binary(b"hello\x00world"), Some("binary data (contains NUL bytes)"));
        assert_eq!(sniff_binary("héllo wörld\n".as_bytes()), None);
        assert_eq!(sniff_binary(b"BMW is a car\n"), None);
    }

    #[test]
    fn line_counts() {
        assert_eq!(line_count(b""), 0);
        assert_eq!(line_count(b"a"), 1);
        assert_eq!(line_count(b"a\n"), 1);
        assert_eq!(line_count(b"a\nb"), 2);
        assert_eq!(line_count(b"\n\n"), 2);
    }

    #[test]
    fn atomic_write_keeps_mode() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        atomic_write(&p, b"one", 0o600).unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"one");
        assert_eq!(mode_for(&p, 0o644), 0o600);
        atomic_write(&p, b"two", mode_for(&p, 0o644)).unwrap();
        assert_eq!(fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1, "no temp file left behind");
    }
}
