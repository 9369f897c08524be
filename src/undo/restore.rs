//! Putting back what calls changed: each changed path as it was before, from the kept
//! contents, through the workspace's handles (no symlink followed on the way, so a guest that
//! swapped a folder for a link cannot steer a restore outside the workspace). A path that
//! changed again since the call is a conflict: left as it is, and reported, unless forced.

use std::io::Read as _;
use std::path::Path;

use sha2::{Digest as _, Sha256};

use super::objects::Objects;
use super::tree::{Change, Entry, in_workspace};
use crate::sandbox::Workspace;
use crate::sandbox::confined::{DirHandle, FsError, Kind};
use crate::tools::fsutil::hex;

/// What an undo did, path by path.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    /// Paths given back their content, link or folder.
    pub restored: Vec<String>,
    /// Paths the calls had made, removed.
    pub removed: Vec<String>,
    /// Paths changed again since the call, left as they are (and why).
    pub conflicts: Vec<(String, String)>,
    /// Paths that could not be put back (and why).
    pub failed: Vec<(String, String)>,
}

/// Undo one call's changes. `force`: put back paths changed again since, too.
pub fn undo_changes(ws: &Workspace, objects: &Objects, changes: &[Change], force: bool, report: &mut Report) {
    let mut todo = Vec::new();
    for c in changes {
        if !in_workspace(ws, &c.path) {
            report.failed.push((c.path.clone(), "not in this workspace".into()));
            continue;
        }
        match current(ws, &c.path) {
            // Already as it was before the call (an earlier undo put it back).
            Ok(now) if holds(now.as_ref(), c.before.as_ref()) => {}
            Ok(now) if force || holds(now.as_ref(), c.after.as_ref()) => todo.push(c),
            Ok(_) => report.conflicts.push((c.path.clone(), "changed again since".into())),
            Err(e) => report.failed.push((c.path.clone(), e)),
        }
    }
    // What is there now and was not before (or was something else) goes first, deepest first,
    // so a folder the call made is empty when its turn comes.
    for c in todo.iter().rev() {
        let replaced = match (&c.before, &c.after) {
            (None, Some(_)) => true,
            (Some(Entry::Dir { .. }), Some(Entry::Dir { .. })) => false,
            (Some(_), Some(Entry::Dir { .. })) => true,
            (Some(Entry::Dir { .. }), Some(_)) => true,
            _ => false,
        };
        if replaced && let Err(e) = remove(ws, &c.path) {
            report.failed.push((c.path.clone(), e));
        } else if replaced && c.before.is_none() {
            report.removed.push(c.path.clone());
        }
    }
    // Then what was there before, shallowest first, so a folder exists before its files.
    for c in &todo {
        let Some(before) = &c.before else { continue };
        match put(ws, objects, &c.path, before) {
            Ok(()) => report.restored.push(c.path.clone()),
            Err(e) => report.failed.push((c.path.clone(), e)),
        }
    }
}

/// What `path` holds now, as far as an undo compares it: the file's content hashed.
fn current(ws: &Workspace, path: &str) -> Result<Option<Entry>, String> {
    let (dir, name) = match ws.open_parent(Path::new(path)) {
        Ok(found) => found,
        // Its folder is gone too: nothing is there.
        Err(FsError::Missing { .. }) => return Ok(None),
        Err(e) => return Err(format!("cannot be reached: {e}")),
    };
    let Some(meta) = dir.lstat(&name).map_err(|e| e.to_string())? else { return Ok(None) };
    Ok(Some(match meta.kind {
        Kind::Dir => Entry::Dir { mode: meta.mode },
        Kind::Symlink => {
            let target = dir.read_link(&name).map_err(|e| e.to_string())?;
            Entry::Symlink { target: target.to_string_lossy().into_owned() }
        }
        Kind::File => {
            let (mut file, now) = dir.open_listed_file(&name).map_err(|e| e.to_string())?;
            let mut hasher = Sha256::new();
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                let n = file.read(&mut buf).map_err(|e| e.to_string())?;
                if n == 0 {
                    break;
                }
                hasher.update(&buf[..n]);
            }
            let sha = Some(hex(&hasher.finalize()));
            Entry::File { sha, size: now.len, mode: now.mode, mtime_ns: now.mtime_ns, ino: now.ino }
        }
        kind => return Err(format!("is {} now", kind.describe())),
    }))
}

/// Whether what is there now is `entry` (what the call left, or what was there before it).
fn holds(now: Option<&Entry>, entry: Option<&Entry>) -> bool {
    match (now, entry) {
        (None, None) => true,
        // A file the call left and that was not kept is compared by size and mode only.
        (Some(Entry::File { size: a, mode: ma, .. }), Some(Entry::File { sha: None, size: b, mode: mb, .. })) => {
            a == b && ma == mb
        }
        (Some(n), Some(a)) => n.same(a),
        _ => false,
    }
}

/// Remove whatever is at `path` (a folder only when empty).
fn remove(ws: &Workspace, path: &str) -> Result<(), String> {
    let (dir, name) = ws.open_parent(Path::new(path)).map_err(|e| format!("cannot be reached: {e}"))?;
    let Some(meta) = dir.lstat(&name).map_err(|e| e.to_string())? else { return Ok(()) };
    dir.remove(&name, meta.kind == Kind::Dir).map_err(|e| match e.raw_os_error() {
        Some(39) => "a folder that holds files made after the call; left in place".to_string(),
        _ => e.to_string(),
    })
}

/// Put `entry` back at `path`.
fn put(ws: &Workspace, objects: &Objects, path: &str, entry: &Entry) -> Result<(), String> {
    let (dir, name) = ws.open_parent(Path::new(path)).map_err(|e| format!("cannot be reached: {e}"))?;
    match entry {
        Entry::Dir { mode } => match dir.lstat(&name).map_err(|e| e.to_string())? {
            // Still a folder: only its mode changed.
            Some(m) if m.kind == Kind::Dir => {
                dir.child_dir(&name).map_err(|e| e.to_string())?.set_mode(*mode).map_err(|e| e.to_string())
            }
            Some(_) => Err("something else is there now".into()),
            // The mode set on the handle afterwards: mkdir's is cut by the umask.
            None => dir
                .create_dir(&name, *mode)
                .and_then(|()| dir.child_dir(&name).map_err(std::io::Error::other)?.set_mode(*mode))
                .map_err(|e| e.to_string()),
        },
        Entry::Symlink { target } => {
            clear(&dir, &name)?;
            dir.symlink(std::ffi::OsStr::new(target), &name).map_err(|e| e.to_string())
        }
        Entry::File { sha: None, .. } => Err("its content was not kept (see the checkpoint's notes)".into()),
        Entry::File { sha: Some(sha), mode, .. } => {
            let bytes = objects.get(sha).map_err(|e| format!("{e:#}"))?;
            if dir.lstat(&name).map_err(|e| e.to_string())?.is_some_and(|m| m.kind != Kind::File) {
                clear(&dir, &name)?;
            }
            let _lock = dir.lock().map_err(|e| e.to_string())?;
            dir.replace(&name, &bytes, *mode, || Ok::<(), ()>(())).map(|_| ()).map_err(|e| match e {
                crate::sandbox::confined::ReplaceError::Io(e) => e.to_string(),
                crate::sandbox::confined::ReplaceError::Refused(()) => "refused".to_string(),
            })
        }
    }
}

/// Remove a non-folder entry `name`, if any, to make room.
fn clear(dir: &DirHandle, name: &std::ffi::OsStr) -> Result<(), String> {
    match dir.lstat(name).map_err(|e| e.to_string())? {
        None => Ok(()),
        Some(m) if m.kind == Kind::Dir => Err("a folder is there now".into()),
        Some(_) => dir.remove(name, false).map_err(|e| e.to_string()),
    }
}
