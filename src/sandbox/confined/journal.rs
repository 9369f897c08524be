//! The temp journal: every temp file [`super::DirHandle::replace`] creates is listed, while it
//! exists, in a file of this process's own in the user's data dir. A process killed with
//! `kill -9` cannot remove its temp files; the next start finds its list (its lock is no longer
//! held) and removes them.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read as _};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use rustix::fs::{AtFlags, FlockOperation};

use super::{DirHandle, Kind, TEMP_PREFIX, TEMP_SUFFIX};

struct Journal {
    list: PathBuf,
    /// Held (flock) while this process lives: how a later start tells a dead owner.
    _lock: File,
    live: Vec<PathBuf>,
}

static JOURNAL: Mutex<Option<Journal>> = Mutex::new(None);

/// The journal's entry point.
pub struct TempJournal;

impl TempJournal {
    /// Keep this process's journal in `dir` (made 0700 if missing), after removing the temp
    /// files of processes that died. Returns how many were removed. Calling it again moves
    /// nothing: the first directory stays.
    pub fn start(dir: &Path) -> io::Result<usize> {
        let mut guard = JOURNAL.lock().unwrap_or_else(PoisonError::into_inner);
        if guard.is_some() {
            return Ok(0);
        }
        fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
        let removed = sweep(dir);
        let pid = std::process::id();
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(dir.join(format!("{pid}.lock")))?;
        rustix::fs::flock(&lock, FlockOperation::LockExclusive)?;
        *guard = Some(Journal { list: dir.join(format!("{pid}.list")), _lock: lock, live: Vec::new() });
        Ok(removed)
    }
}

/// Note a temp file that now exists.
pub fn journal_add(path: &Path) {
    update(|live| live.push(path.to_path_buf()));
}

/// Note a temp file that no longer exists.
pub fn journal_remove(path: &Path) {
    update(|live| live.retain(|p| p != path));
}

fn update(change: impl FnOnce(&mut Vec<PathBuf>)) {
    let mut guard = JOURNAL.lock().unwrap_or_else(PoisonError::into_inner);
    let Some(j) = guard.as_mut() else { return };
    change(&mut j.live);
    // NUL-separated: a file name may hold a newline, never a NUL. Written whole and renamed
    // into place, so a crash mid-write leaves the previous list.
    let mut bytes = Vec::new();
    for p in &j.live {
        bytes.extend_from_slice(p.as_os_str().as_bytes());
        bytes.push(0);
    }
    let tmp = j.list.with_extension("list.new");
    if fs::write(&tmp, &bytes).and_then(|()| fs::rename(&tmp, &j.list)).is_err() {
        tracing::warn!("cannot update the temp journal {}", j.list.display());
    }
}

/// Remove what dead processes left: for each `PID.lock` nobody holds, the temp files in
/// `PID.list`, then both files.
fn sweep(dir: &Path) -> usize {
    let Ok(entries) = fs::read_dir(dir) else { return 0 };
    let mut removed = 0;
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.strip_suffix(".lock")) else { continue };
        let Ok(lock) = File::open(e.path()) else { continue };
        if rustix::fs::flock(&lock, FlockOperation::NonBlockingLockExclusive).is_err() {
            continue; // its owner is alive
        }
        let list = dir.join(format!("{pid}.list"));
        let mut bytes = Vec::new();
        if File::open(&list).and_then(|mut f| f.read_to_end(&mut bytes)).is_ok() {
            for p in bytes.split(|&b| b == 0).filter(|p| !p.is_empty()) {
                let path = PathBuf::from(std::ffi::OsString::from_vec(p.to_vec()));
                if remove_temp(&path, pid) {
                    removed += 1;
                }
            }
        }
        let _ = fs::remove_file(&list);
        let _ = fs::remove_file(e.path());
    }
    removed
}

/// Remove one left-over temp file of process `pid`, reaching it from `/` without following a
/// symlink and only if it is a regular file named as that process names its temp files: a
/// journal entry cannot be turned into a way to remove something else.
fn remove_temp(path: &Path, pid: &str) -> bool {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else { return false };
    let n = name.as_bytes();
    let prefix = format!("{TEMP_PREFIX}{pid}-");
    if !n.starts_with(prefix.as_bytes()) || !n.ends_with(TEMP_SUFFIX.as_bytes()) {
        return false;
    }
    let Ok(root) = DirHandle::open_root(Path::new("/")) else { return false };
    let Ok(rel) = parent.strip_prefix("/") else { return false };
    let Ok(dir) = root.open_dir(rel) else { return false };
    match dir.lstat(name) {
        Ok(Some(m)) if m.kind == Kind::File => rustix::fs::unlinkat(&dir, name, AtFlags::empty()).is_ok(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dead_owners_temp_files_are_removed_and_nothing_else() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().canonicalize().unwrap();
        let journal = dir.join("journal");
        fs::create_dir(&journal).unwrap();
        let left = dir.join(".abhed-999999-0-1.tmp");
        let other_pid = dir.join(".abhed-12-0-1.tmp");
        fs::write(&other_pid, "someone else's").unwrap();
        fs::write(&left, "partial").unwrap();
        let other = dir.join("precious.txt");
        fs::write(&other, "keep").unwrap();
        let mut list = Vec::new();
        for p in [&left, &other, &other_pid] {
            list.extend_from_slice(p.as_os_str().as_bytes());
            list.push(0);
        }
        fs::write(journal.join("999999.list"), list).unwrap();
        fs::write(journal.join("999999.lock"), "").unwrap();
        assert_eq!(sweep(&journal), 1);
        assert!(!left.exists());
        assert!(other.exists(), "only files named as temp files are removed");
        assert!(other_pid.exists(), "only the dead process's own temp files");
        assert!(!journal.join("999999.lock").exists());
    }

    #[test]
    fn a_live_owner_is_left_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let journal = tmp.path().join("journal");
        fs::create_dir(&journal).unwrap();
        let lock = File::create(journal.join("1.lock")).unwrap();
        rustix::fs::flock(&lock, FlockOperation::LockExclusive).unwrap();
        fs::write(journal.join("1.list"), "").unwrap();
        assert_eq!(sweep(&journal), 0);
        assert!(journal.join("1.list").exists());
    }
}
