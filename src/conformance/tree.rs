//! Directory trees as data: snapshot, compare, write back. Files and symlinks only:
//! git cannot hold empty directories, so a case cannot expect one.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

use anyhow::{Context as _, Result};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    File(Vec<u8>),
    Symlink(String),
}

pub type Tree = BTreeMap<String, Entry>;

/// Every file and symlink under `root`, by relative path.
pub fn snapshot(root: &Path) -> Result<Tree> {
    let mut tree = Tree::new();
    for entry in walkdir(root)? {
        let rel = entry.strip_prefix(root)?.display().to_string();
        let meta = std::fs::symlink_metadata(&entry)?;
        if meta.file_type().is_symlink() {
            tree.insert(rel, Entry::Symlink(std::fs::read_link(&entry)?.display().to_string()));
        } else if meta.is_file() {
            tree.insert(rel, Entry::File(std::fs::read(&entry)?));
        }
    }
    Ok(tree)
}

/// Write `tree` as the folder `dir`, replacing what was there.
pub fn write(dir: &Path, tree: &Tree) -> Result<()> {
    if dir.exists() {
        std::fs::remove_dir_all(dir)?;
    }
    std::fs::create_dir_all(dir)?;
    for (rel, entry) in tree {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        match entry {
            Entry::File(bytes) => std::fs::write(&path, bytes)?,
            Entry::Symlink(target) => std::os::unix::fs::symlink(target, &path)?,
        }
    }
    Ok(())
}

/// Differences between the expected and the actual tree, one message each.
pub fn compare(expected: &Tree, actual: &Tree) -> Vec<String> {
    let mut out = Vec::new();
    for (path, want) in expected {
        match actual.get(path) {
            None => out.push(format!("tree: {path} is missing after the calls")),
            Some(got) if got != want => {
                let detail = match (want, got) {
                    (Entry::File(a), Entry::File(b)) => match (std::str::from_utf8(a), std::str::from_utf8(b)) {
                        (Ok(a), Ok(b)) => {
                            format!(":\n{}", similar::TextDiff::from_lines(a, b).unified_diff().context_radius(2))
                        }
                        _ => format!(" ({} bytes expected, {} found)", a.len(), b.len()),
                    },
                    _ => format!(": expected {want:?}, found {got:?}"),
                };
                out.push(format!("tree: {path} differs{detail}"));
            }
            Some(_) => {}
        }
    }
    for path in actual.keys().filter(|p| !expected.contains_key(*p)) {
        out.push(format!("tree: {path} exists after the calls but was not expected"));
    }
    out
}

pub fn set_mtime(path: &Path, secs: u64) -> Result<()> {
    let f =
        std::fs::File::options().write(true).open(path).with_context(|| format!("cannot open {}", path.display()))?;
    f.set_modified(UNIX_EPOCH + Duration::from_secs(secs))?;
    Ok(())
}

/// Give every regular file under `root` the same mtime.
pub fn set_all_mtimes(root: &Path, secs: u64) -> Result<()> {
    for entry in walkdir(root)? {
        let meta = std::fs::symlink_metadata(&entry)?;
        if meta.is_file() {
            // A read-only fixture cannot be opened for writing; leave its mtime alone.
            let _ = set_mtime(&entry, secs);
        }
    }
    Ok(())
}

/// Every path under `root` (not following symlinks), parents before children, sorted.
fn walkdir(root: &Path) -> Result<Vec<std::path::PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(&dir)
            .with_context(|| format!("cannot list {}", dir.display()))?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .collect();
        entries.sort();
        for p in entries.into_iter().rev() {
            let meta = std::fs::symlink_metadata(&p)?;
            if meta.is_dir() {
                stack.push(p.clone());
            }
            out.push(p);
        }
    }
    out.sort();
    Ok(out)
}
