//! Host file operations that stay inside the workspace whatever the guest does meanwhile.
//!
//! The guest shares the workspace read-write and may rename, swap and symlink anything in it at
//! any moment. A path that is checked and then opened by name can lead somewhere else by the
//! time it is opened. So every operation here starts from a directory handle opened on a
//! workspace root and goes down one component at a time, with `openat(O_NOFOLLOW)`:
//! - no symlink is ever followed;
//! - `..` never appears, because paths arrive canonical ([`super::Workspace::resolve`]).
//!
//! A symlink met on the way means the tree changed after the path was resolved. The operation
//! then stops with [`FsError::Changed`] and does nothing. Files are opened through an `O_PATH`
//! handle first, so a FIFO or a device is never opened; it is refused by its type.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Write as _};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{AtFlags, FileType, FlockOperation, Mode, OFlags, Stat};

/// An open directory, and the path it had when it was opened (for messages: the guest may have
/// moved it since; [`DirHandle::current_path`] tells where it is now).
#[derive(Debug)]
pub struct DirHandle {
    fd: OwnedFd,
    path: PathBuf,
}

/// Why a confined operation did not happen. None of them changed anything.
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    /// `at` (a component of the path) does not exist.
    #[error("{} does not exist", .at.display())]
    Missing { at: PathBuf },
    /// `at` should be a directory and is something else.
    #[error("{} is not a directory", .at.display())]
    NotADirectory { at: PathBuf },
    /// `at` is a symlink now, or was swapped for another file while the call ran.
    #[error("{} changed while the call ran", .at.display())]
    Changed { at: PathBuf },
    /// The last component is not a regular file.
    #[error("{} is {}", .at.display(), .kind.describe())]
    NotRegular { at: PathBuf, kind: Kind },
    #[error("{}: {err}", .at.display())]
    Io { at: PathBuf, err: io::Error },
}

/// The type of a directory entry, as `lstat` tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Symlink,
    Fifo,
    Socket,
    CharDevice,
    BlockDevice,
    Unknown,
}

impl Kind {
    pub fn of(stat: &Stat) -> Kind {
        Kind::from(FileType::from_raw_mode(stat.st_mode))
    }

    /// "a directory", "a FIFO (named pipe)", ... for messages.
    pub fn describe(self) -> &'static str {
        match self {
            Kind::File => "a regular file",
            Kind::Dir => "a directory",
            Kind::Symlink => "a symlink",
            Kind::Fifo => "a FIFO (named pipe)",
            Kind::Socket => "a socket",
            Kind::CharDevice => "a character device",
            Kind::BlockDevice => "a block device",
            Kind::Unknown => "not a regular file",
        }
    }
}

impl From<FileType> for Kind {
    fn from(t: FileType) -> Kind {
        match t {
            FileType::RegularFile => Kind::File,
            FileType::Directory => Kind::Dir,
            FileType::Symlink => Kind::Symlink,
            FileType::Fifo => Kind::Fifo,
            FileType::Socket => Kind::Socket,
            FileType::CharacterDevice => Kind::CharDevice,
            FileType::BlockDevice => Kind::BlockDevice,
            FileType::Unknown => Kind::Unknown,
        }
    }
}

/// The facts about a file the tools use, from one `fstat`/`lstat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta {
    pub kind: Kind,
    pub len: u64,
    pub mode: u32,
    pub nlink: u64,
    pub mtime_ns: i64,
    pub dev: u64,
    pub ino: u64,
}

impl Meta {
    pub fn from_stat(s: &Stat) -> Meta {
        Meta {
            kind: Kind::of(s),
            len: s.st_size as u64,
            mode: s.st_mode & 0o7777,
            nlink: s.st_nlink,
            mtime_ns: s.st_mtime.saturating_mul(1_000_000_000).saturating_add(s.st_mtime_nsec as i64),
            dev: s.st_dev,
            ino: s.st_ino,
        }
    }

    fn same_file(&self, other: &Meta) -> bool {
        self.dev == other.dev && self.ino == other.ino
    }
}

const DIR_FLAGS: OFlags = OFlags::RDONLY.union(OFlags::DIRECTORY).union(OFlags::NOFOLLOW).union(OFlags::CLOEXEC);

impl DirHandle {
    /// Open a workspace root. The root is the operator's choice and canonical, so its own path
    /// may be followed; everything below it is not.
    pub fn open_root(path: &Path) -> io::Result<DirHandle> {
        let fd = rustix::fs::open(path, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
        Ok(DirHandle { fd, path: path.to_path_buf() })
    }

    /// The path this directory had when it was opened.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where this directory is now (the guest may have renamed it since it was opened), as the
    /// kernel names it; `None` when that cannot be told.
    pub fn current_path(&self) -> Option<PathBuf> {
        let link = std::fs::read_link(format!("/proc/self/fd/{}", self.fd.as_raw_fd())).ok()?;
        // A directory removed meanwhile reads as "/path (deleted)".
        (!link.as_os_str().as_bytes().ends_with(b" (deleted)")).then_some(link)
    }

    /// The directory `rel` below this one: every component of `rel` must be a plain name, and
    /// none may be a symlink.
    pub fn open_dir(&self, rel: &Path) -> Result<DirHandle, FsError> {
        let mut cur: Option<DirHandle> = None;
        for c in rel.components() {
            let Component::Normal(name) = c else {
                return Err(FsError::Changed { at: self.path.join(rel) });
            };
            let next = cur.as_ref().unwrap_or(self).child_dir(name)?;
            cur = Some(next);
        }
        match cur {
            Some(d) => Ok(d),
            None => self.try_clone().map_err(|err| FsError::Io { at: self.path.clone(), err }),
        }
    }

    /// The directory `name` directly below this one, not following a symlink.
    pub fn child_dir(&self, name: &OsStr) -> Result<DirHandle, FsError> {
        let at = self.path.join(name);
        match rustix::fs::openat(&self.fd, name, DIR_FLAGS, Mode::empty()) {
            Ok(fd) => Ok(DirHandle { fd, path: at }),
            Err(e) => Err(self.explain(name, at, e.into())),
        }
    }

    /// Turn a failed open of `name` into what happened: missing, a symlink (the tree changed),
    /// not a directory, or an I/O error.
    fn explain(&self, name: &OsStr, at: PathBuf, err: io::Error) -> FsError {
        if err.kind() == io::ErrorKind::NotFound {
            return FsError::Missing { at };
        }
        match self.lstat(name) {
            Ok(Some(m)) if m.kind == Kind::Symlink => FsError::Changed { at },
            Ok(Some(m)) if m.kind != Kind::Dir => FsError::NotADirectory { at },
            Ok(None) => FsError::Missing { at },
            // A directory now, though the open found something else (ENOTDIR, or ELOOP for a
            // symlink): it was swapped meanwhile.
            Ok(Some(_)) if matches!(err.raw_os_error(), Some(20 | 40)) => FsError::Changed { at },
            _ => FsError::Io { at, err },
        }
    }

    pub fn try_clone(&self) -> io::Result<DirHandle> {
        Ok(DirHandle { fd: self.fd.try_clone()?, path: self.path.clone() })
    }

    /// `lstat` of `name` in this directory; `None` when there is no such entry.
    pub fn lstat(&self, name: &OsStr) -> io::Result<Option<Meta>> {
        match rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(s) => Ok(Some(Meta::from_stat(&s))),
            Err(rustix::io::Errno::NOENT) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Open the regular file `name` for reading. It is looked at through an `O_PATH` handle
    /// first and reopened from that handle, so a FIFO, a device or a symlink is never opened,
    /// whatever is swapped in meanwhile.
    pub fn open_file(&self, name: &OsStr) -> Result<(File, Meta), FsError> {
        let at = self.path.join(name);
        let io = |err: io::Error| FsError::Io { at: self.path.join(name), err };
        let handle = match rustix::fs::openat(
            &self.fd,
            name,
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(h) => h,
            Err(rustix::io::Errno::NOENT) => return Err(FsError::Missing { at }),
            Err(rustix::io::Errno::NOTDIR) => return Err(FsError::NotADirectory { at: self.path.clone() }),
            Err(e) => return Err(io(e.into())),
        };
        let meta = Meta::from_stat(&rustix::fs::fstat(&handle).map_err(|e| io(e.into()))?);
        match meta.kind {
            Kind::File => {}
            Kind::Symlink => return Err(FsError::Changed { at }),
            kind => return Err(FsError::NotRegular { at, kind }),
        }
        let file = reopen(&handle).or_else(|_| {
            // No /proc: open by name and make sure it is still the same file.
            rustix::fs::openat(&self.fd, name, read_flags(), Mode::empty()).map_err(io::Error::from)
        });
        let file = File::from(file.map_err(io)?);
        let now = Meta::from_stat(&rustix::fs::fstat(&file).map_err(|e| io(e.into()))?);
        if !now.same_file(&meta) || now.kind != Kind::File {
            return Err(FsError::Changed { at });
        }
        Ok((file, now))
    }

    /// Open `name`, which a listing of this directory just named a regular file, for reading:
    /// one `openat(O_NOFOLLOW | O_NONBLOCK)` and an `fstat`, for walks over many files. A
    /// symlink swapped in since the listing is refused by the kernel (`O_NOFOLLOW`), a FIFO
    /// does not block the open (`O_NONBLOCK`) and is refused by the `fstat`. (A device node
    /// swapped in would be opened before it is refused: the guest cannot make one on the host
    /// through the mapped share, so the two-step open of [`DirHandle::open_file`] is kept for
    /// the single files the tools are asked about.)
    pub fn open_listed_file(&self, name: &OsStr) -> Result<(File, Meta), FsError> {
        let at = || self.path.join(name);
        let file = match rustix::fs::openat(&self.fd, name, read_flags(), Mode::empty()) {
            Ok(fd) => File::from(fd),
            Err(rustix::io::Errno::NOENT) => return Err(FsError::Missing { at: at() }),
            Err(rustix::io::Errno::LOOP) => return Err(FsError::Changed { at: at() }),
            Err(e) => return Err(FsError::Io { at: at(), err: e.into() }),
        };
        let meta = Meta::from_stat(&rustix::fs::fstat(&file).map_err(|e| FsError::Io { at: at(), err: e.into() })?);
        match meta.kind {
            Kind::File => Ok((file, meta)),
            kind => Err(FsError::NotRegular { at: at(), kind }),
        }
    }

    /// Create the directory `name` (not its parents).
    pub fn create_dir(&self, name: &OsStr, mode: u32) -> io::Result<()> {
        rustix::fs::mkdirat(&self.fd, name, Mode::from_raw_mode(mode)).map_err(io::Error::from)
    }

    /// Remove the entry `name` (a directory, which must be empty, when `dir`), not following
    /// a symlink: a symlink is removed, never what it points at.
    pub fn remove(&self, name: &OsStr, dir: bool) -> io::Result<()> {
        let flags = if dir { AtFlags::REMOVEDIR } else { AtFlags::empty() };
        rustix::fs::unlinkat(&self.fd, name, flags).map_err(io::Error::from)
    }

    /// Set this directory's own permission bits (on the handle: no path is looked up).
    pub fn set_mode(&self, mode: u32) -> io::Result<()> {
        rustix::fs::fchmod(&self.fd, Mode::from_raw_mode(mode)).map_err(io::Error::from)
    }

    /// The target of the symlink `name`, as stored (never followed).
    pub fn read_link(&self, name: &OsStr) -> io::Result<OsString> {
        let target = rustix::fs::readlinkat(&self.fd, name, Vec::new())?;
        Ok(OsStr::from_bytes(target.as_bytes()).to_os_string())
    }

    /// Make the symlink `name` pointing at `target` (which is not looked at).
    pub fn symlink(&self, target: &OsStr, name: &OsStr) -> io::Result<()> {
        rustix::fs::symlinkat(target, &self.fd, name).map_err(io::Error::from)
    }

    /// Take this directory's write lock: writers of files in it, in this process and in
    /// others, take turns, so a read-check-replace is never interleaved with another.
    pub fn lock(&self) -> io::Result<DirLock> {
        // A lock of its own: flock belongs to an open file description, and this handle may be
        // shared by threads that must exclude each other.
        let fd = rustix::fs::openat(&self.fd, ".", DIR_FLAGS, Mode::empty())?;
        rustix::fs::flock(&fd, FlockOperation::LockExclusive)?;
        Ok(DirLock { _fd: fd })
    }

    /// The entries of this directory.
    pub fn entries(&self) -> io::Result<rustix::fs::Dir> {
        // A duplicate of the handle, not a reopen of ".": no path look-up. The two share a
        // read offset, so the listing starts from the top whatever read it before.
        let mut dir = rustix::fs::Dir::new(self.fd.try_clone()?)?;
        dir.rewind();
        Ok(dir)
    }

    /// Replace (or create) `name` atomically with `bytes`: a temp file in this directory,
    /// written, given `mode`, synced, then renamed over `name`, and the directory synced.
    /// `last_look` runs right before the rename (with the write lock held, the caller's last
    /// chance to compare what is there); its error leaves everything as it was. The temp file
    /// is recorded in the temp journal while it exists, so a crash leaves nothing behind for
    /// long ([`TempJournal`]).
    pub fn replace<E>(
        &self,
        name: &OsStr,
        bytes: &[u8],
        mode: u32,
        last_look: impl FnOnce() -> Result<(), E>,
    ) -> Result<Meta, ReplaceError<E>> {
        let tmp = temp_name();
        let tmp_path = self.path.join(&tmp);
        let fd = rustix::fs::openat(
            &self.fd,
            tmp.as_os_str(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )
        .map_err(|e| ReplaceError::Io(e.into()))?;
        journal_add(&tmp_path);
        let result = (|| -> Result<Meta, ReplaceError<E>> {
            let mut file = File::from(fd);
            file.write_all(bytes).map_err(ReplaceError::Io)?;
            // fchmod, not the create mode: the umask must not change what the operator set.
            rustix::fs::fchmod(&file, Mode::from_raw_mode(mode)).map_err(|e| ReplaceError::Io(e.into()))?;
            file.sync_all().map_err(ReplaceError::Io)?;
            let meta = Meta::from_stat(&rustix::fs::fstat(&file).map_err(|e| ReplaceError::Io(e.into()))?);
            last_look().map_err(ReplaceError::Refused)?;
            rustix::fs::renameat(&self.fd, tmp.as_os_str(), &self.fd, name).map_err(|e| ReplaceError::Io(e.into()))?;
            Ok(meta)
        })();
        if result.is_err() {
            let _ = rustix::fs::unlinkat(&self.fd, tmp.as_os_str(), AtFlags::empty());
        }
        journal_remove(&tmp_path);
        let meta = result?;
        // The rename is done: a failed directory sync does not undo it, so it is not an error.
        let _ = rustix::fs::fsync(&self.fd);
        Ok(meta)
    }
}

impl AsFd for DirHandle {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Why [`DirHandle::replace`] did not replace the file. Nothing was changed either way.
#[derive(Debug)]
pub enum ReplaceError<E> {
    /// The caller's last look refused it.
    Refused(E),
    Io(io::Error),
}

impl<E> From<io::Error> for ReplaceError<E> {
    fn from(e: io::Error) -> Self {
        ReplaceError::Io(e)
    }
}

/// Held while a directory's files are being replaced; released when dropped.
#[derive(Debug)]
pub struct DirLock {
    _fd: OwnedFd,
}

fn read_flags() -> OFlags {
    // Never block on a FIFO, never become a terminal's controlling process.
    OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC
}

/// Open for reading the very file an `O_PATH` handle refers to.
fn reopen(handle: &OwnedFd) -> io::Result<OwnedFd> {
    let flags = read_flags().difference(OFlags::NOFOLLOW);
    rustix::fs::open(format!("/proc/self/fd/{}", handle.as_raw_fd()), flags, Mode::empty()).map_err(io::Error::from)
}

/// `.abhed-PID-N.tmp`: the pid tells the sweep whose it is, N makes it unique in the process.
fn temp_name() -> OsString {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    OsString::from(format!("{TEMP_PREFIX}{}-{n}-{nanos:x}{TEMP_SUFFIX}", std::process::id()))
}

pub const TEMP_PREFIX: &str = ".abhed-";
pub const TEMP_SUFFIX: &str = ".tmp";

mod journal;
pub use journal::{TempJournal, journal_add, journal_remove};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_temp_file_is_in_the_journal_while_it_exists_and_gone_after() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let journal = root.join("journal");
        TempJournal::start(&journal).unwrap();
        let list = journal.join(format!("{}.list", std::process::id()));
        std::fs::create_dir(root.join("ws")).unwrap();
        let dir = DirHandle::open_root(&root.join("ws")).unwrap();
        let mut seen = Vec::new();
        dir.replace(OsStr::new("f.txt"), b"data", 0o644, || -> Result<(), ()> {
            seen = std::fs::read(&list).unwrap();
            Ok(())
        })
        .unwrap();
        let listed = String::from_utf8(seen).unwrap();
        assert!(listed.contains(&format!("{}/ws/.abhed-{}-", root.display(), std::process::id())), "{listed:?}");
        assert!(!std::fs::read_to_string(&list).unwrap().contains("/ws/.abhed-"), "removed once renamed");
        assert_eq!(std::fs::read(root.join("ws/f.txt")).unwrap(), b"data");
        // A refused last look leaves no temp file and nothing written.
        let r = dir.replace(OsStr::new("g.txt"), b"x", 0o644, || Err("no"));
        assert!(matches!(r, Err(ReplaceError::Refused("no"))));
        let names: Vec<_> = std::fs::read_dir(root.join("ws")).unwrap().flatten().map(|e| e.file_name()).collect();
        assert_eq!(names, vec![OsString::from("f.txt")]);
    }

    #[test]
    fn no_symlink_is_followed_on_the_way_down() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("ws/real")).unwrap();
        std::fs::create_dir(root.join("out")).unwrap();
        std::fs::write(root.join("out/secret"), "s").unwrap();
        std::os::unix::fs::symlink(root.join("out"), root.join("ws/link")).unwrap();
        std::os::unix::fs::symlink("real", root.join("ws/inside")).unwrap();
        let ws = DirHandle::open_root(&root.join("ws")).unwrap();
        assert!(matches!(ws.open_dir(Path::new("link")), Err(FsError::Changed { .. })));
        assert!(matches!(ws.open_dir(Path::new("inside")), Err(FsError::Changed { .. })), "not even inside");
        assert!(matches!(ws.open_file(OsStr::new("link")), Err(FsError::Changed { .. })));
        assert!(matches!(ws.open_dir(Path::new("../out")), Err(FsError::Changed { .. })));
        assert!(ws.open_dir(Path::new("real")).is_ok());
        std::fs::write(root.join("ws/real/f"), "x").unwrap();
        let fifo = root.join("ws/real/pipe");
        rustix::fs::mknodat(rustix::fs::CWD, &fifo, FileType::Fifo, Mode::from_raw_mode(0o600), 0).unwrap();
        let real = ws.open_dir(Path::new("real")).unwrap();
        assert!(matches!(real.open_file(OsStr::new("pipe")), Err(FsError::NotRegular { kind: Kind::Fifo, .. })));
        assert!(real.open_file(OsStr::new("f")).is_ok());
    }
}
