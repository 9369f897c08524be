//! What a workspace holds, path by path, as a checkpoint sees it: regular files (their content
//! kept in [`Objects`]), symlinks (their target, never followed) and directories. Read through
//! the workspace's own handles, one directory at a time, following no symlink, so whatever the
//! guest renames or swaps while it is read, nothing outside the workspace is read.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::objects::Objects;
use crate::sandbox::Workspace;
use crate::sandbox::confined::{DirHandle, Kind, Meta, TEMP_PREFIX, TEMP_SUFFIX};

/// Folders a checkpoint does not keep: what a build or an install makes again (the walk's own
/// built-in ignores, less `.git`, which holds history no build makes again).
const REBUILT: [&str; 4] = ["node_modules", "target", "dist", "__pycache__"];

/// The limits of what one checkpoint keeps.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// A file larger than this is listed, not kept.
    pub max_file_bytes: u64,
    /// Once this many bytes of new content were kept in one scan, the rest is listed, not kept.
    pub max_new_bytes: u64,
}

/// One path as a checkpoint saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Entry {
    File {
        /// The content's sha256; `None` when it was not kept (too big, unreadable).
        sha: Option<String>,
        size: u64,
        mode: u32,
        /// For telling, without reading it again, that a file is as it was.
        mtime_ns: i64,
        ino: u64,
    },
    Symlink {
        target: String,
    },
    Dir {
        mode: u32,
    },
}

impl Entry {
    /// Whether two entries hold the same thing (the stat fields aside).
    pub fn same(&self, other: &Entry) -> bool {
        match (self, other) {
            (Entry::File { sha: a, size: sa, mode: ma, .. }, Entry::File { sha: b, size: sb, mode: mb, .. }) => {
                a.is_some() && a == b && sa == sb && ma == mb
            }
            (Entry::Symlink { target: a }, Entry::Symlink { target: b }) => a == b,
            (Entry::Dir { mode: a }, Entry::Dir { mode: b }) => a == b,
            _ => false,
        }
    }

    /// Whether a file's stat says it is unchanged since this entry, so its content need not be
    /// read again.
    fn fresh(&self, meta: &Meta) -> Option<&String> {
        match self {
            Entry::File { sha: Some(sha), size, mode, mtime_ns, ino } => {
                (*size == meta.len && *mode == meta.mode && *mtime_ns == meta.mtime_ns && *ino == meta.ino)
                    .then_some(sha)
            }
            _ => None,
        }
    }
}

/// Every path of the workspace's roots (absolute, as text) and what it held.
pub type Tree = BTreeMap<String, Entry>;

/// What a scan left out: paths and why.
pub type Skipped = Vec<(String, String)>;

/// Read the workspace into a tree, keeping the content of each file that `prev` does not
/// already have unchanged.
pub fn scan(ws: &Workspace, prev: &Tree, objects: &Objects, limits: Limits) -> (Tree, Skipped) {
    let mut scan = Scan { prev, objects, limits, new_bytes: 0, tree: Tree::new(), skipped: Vec::new() };
    for (root, handle) in ws.root_handles() {
        let Some(root) = root.to_str() else {
            scan.skipped.push((root.to_string_lossy().into_owned(), "its name is not UTF-8".into()));
            continue;
        };
        scan.dir(handle, root);
    }
    (scan.tree, scan.skipped)
}

struct Scan<'a> {
    prev: &'a Tree,
    objects: &'a Objects,
    limits: Limits,
    new_bytes: u64,
    tree: Tree,
    skipped: Skipped,
}

impl Scan<'_> {
    fn dir(&mut self, dir: &DirHandle, path: &str) {
        let entries = match dir.entries() {
            Ok(e) => e,
            Err(e) => return self.skipped.push((path.to_string(), format!("cannot be listed: {e}"))),
        };
        let mut names: Vec<Vec<u8>> = entries
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_bytes().to_vec())
            .filter(|n| n != b"." && n != b"..")
            .collect();
        names.sort();
        for raw in names {
            let name = OsStr::from_bytes(&raw);
            let Ok(text) = std::str::from_utf8(&raw) else {
                self.skipped.push((format!("{path}/{}", name.to_string_lossy()), "its name is not UTF-8".into()));
                continue;
            };
            if text.starts_with(TEMP_PREFIX) && text.ends_with(TEMP_SUFFIX) {
                continue;
            }
            let at = format!("{path}/{text}");
            let Ok(Some(meta)) = dir.lstat(name) else { continue };
            match meta.kind {
                Kind::Dir if REBUILT.contains(&text) => {
                    self.skipped.push((at, "a folder a build or an install makes again".into()));
                }
                Kind::Dir => {
                    self.tree.insert(at.clone(), Entry::Dir { mode: meta.mode });
                    match dir.child_dir(name) {
                        Ok(child) => self.dir(&child, &at),
                        Err(e) => self.skipped.push((at, format!("cannot be opened: {e}"))),
                    }
                }
                Kind::Symlink => match dir.read_link(name) {
                    Ok(target) => match target.into_string() {
                        Ok(target) => {
                            self.tree.insert(at, Entry::Symlink { target });
                        }
                        Err(_) => self.skipped.push((at, "its target is not UTF-8".into())),
                    },
                    Err(e) => self.skipped.push((at, format!("cannot be read: {e}"))),
                },
                Kind::File => {
                    let entry = self.file(dir, name, &at, &meta);
                    self.tree.insert(at, entry);
                }
                // FIFOs, sockets, devices: nothing a checkpoint can hold.
                _ => {}
            }
        }
    }

    fn file(&mut self, dir: &DirHandle, name: &OsStr, at: &str, meta: &Meta) -> Entry {
        let stat = |sha| Entry::File { sha, size: meta.len, mode: meta.mode, mtime_ns: meta.mtime_ns, ino: meta.ino };
        if let Some(sha) = self.prev.get(at).and_then(|e| e.fresh(meta))
            && self.objects.has(sha)
        {
            return stat(Some(sha.clone()));
        }
        if meta.len > self.limits.max_file_bytes {
            self.skipped.push((at.to_string(), format!("larger than {} bytes", self.limits.max_file_bytes)));
            return stat(None);
        }
        if self.new_bytes + meta.len > self.limits.max_new_bytes {
            self.skipped
                .push((at.to_string(), format!("past the {} bytes one checkpoint keeps", self.limits.max_new_bytes)));
            return stat(None);
        }
        let kept = dir.open_listed_file(name).map_err(anyhow::Error::from).and_then(|(mut file, now)| {
            let sha = self.objects.put(&mut file, self.limits.max_file_bytes)?;
            Ok((sha, now))
        });
        match kept {
            Ok((sha, now)) => {
                self.new_bytes += now.len;
                Entry::File { sha: Some(sha), size: now.len, mode: now.mode, mtime_ns: now.mtime_ns, ino: now.ino }
            }
            Err(e) => {
                self.skipped.push((at.to_string(), format!("cannot be kept: {e:#}")));
                stat(None)
            }
        }
    }
}

/// One path a call changed: what it held before and after (`None`: nothing there).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    pub path: String,
    pub before: Option<Entry>,
    pub after: Option<Entry>,
}

/// The paths whose entries differ between two trees, in path order.
pub fn diff(before: &Tree, after: &Tree) -> Vec<Change> {
    let mut out = Vec::new();
    let paths: std::collections::BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    for path in paths {
        let (b, a) = (before.get(path), after.get(path));
        let same = match (b, a) {
            (Some(b), Some(a)) => b.same(a) || b == a,
            (None, None) => true,
            _ => false,
        };
        if !same {
            out.push(Change { path: path.clone(), before: b.cloned(), after: a.cloned() });
        }
    }
    out
}

/// Whether `path` (absolute) is below one of the workspace's roots.
pub fn in_workspace(ws: &Workspace, path: &str) -> bool {
    let p = Path::new(path);
    ws.roots().any(|r| p.starts_with(r) && p != r)
}
