//! Path confinement. Every path a tool receives is resolved here: it must be absolute, and
//! after `..` and symlinks are resolved it must lie under the workspace root or an extra root
//! the operator allowed.
//!
//! Resolving is the first look, by name: it decides what the path means and whether it is
//! allowed, and gives the messages their paths. Acting on the path is done through the roots'
//! directory handles ([`Workspace::open_dir`], [`Workspace::open_parent`]), never by name, so
//! that a symlink swapped in after the look cannot lead the action outside (`confined.rs`).

use std::ffi::OsString;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use super::confined::{DirHandle, FsError, Kind};

/// The directories tools may touch, and a handle on each.
#[derive(Debug, Clone)]
pub struct Workspace {
    root: PathBuf,
    extra_roots: Vec<PathBuf>,
    /// One per root, in the order of [`Workspace::roots`].
    handles: Vec<Arc<DirHandle>>,
}

/// A path that passed confinement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The path as the model gave it, made lexically clean (`.`, `..`, `//` removed). This is
    /// the form we print back.
    pub shown: PathBuf,
    /// The same path with every symlink resolved; where the path does not exist yet, its
    /// nearest existing ancestor resolved with the rest appended. This is the form we act on
    /// and the key of read-tracking.
    pub real: PathBuf,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("`{field}` is empty. Give an absolute path, e.g. {example}.")]
    Empty { field: String, example: String },
    #[error(
        "`{field}` must be an absolute path, but `{given}` is relative. Relative to the workspace root it would be {suggestion}{note}; call again with that absolute path."
    )]
    Relative { field: String, given: String, suggestion: String, note: String },
    #[error(
        "{given} is outside the workspace{via}. Tools may only touch files under {roots}. Choose a path under the workspace; an operator can allow more directories with `extra_roots` in the user config."
    )]
    Outside { given: String, via: String, roots: String },
    /// A path no file can have (a NUL byte, over the system's length limits), or one that says
    /// directory (a trailing `/`) of something that is not one.
    #[error("`{field}` {why}")]
    Invalid { field: String, why: String },
}

/// The longest path the kernel takes (PATH_MAX) and the longest name of one component
/// (NAME_MAX), in bytes.
pub const MAX_PATH_BYTES: usize = 4096;
pub const MAX_NAME_BYTES: usize = 255;

/// Text quoted back in a path error, at most this many characters.
const QUOTE_CHARS: usize = 120;

fn quote(raw: &str) -> String {
    match raw.char_indices().nth(QUOTE_CHARS) {
        None => raw.to_string(),
        Some((cut, _)) => format!("{}…({} more characters)", &raw[..cut], raw[cut..].chars().count()),
    }
}

/// Refuse what can never name a file, before anything is done with it, with the limit named.
fn check_form(field: &str, raw: &str) -> Result<(), PathError> {
    let invalid = |why: String| Err(PathError::Invalid { field: field.to_string(), why });
    if raw.contains('\0') {
        return invalid(format!(
            "contains a NUL byte, which no file name can hold: `{}` (shown as \\0). Give the path without it.",
            quote(&raw.replace('\0', "\\0"))
        ));
    }
    if raw.len() > MAX_PATH_BYTES {
        return invalid(format!(
            "is {} bytes long, over the system's limit of {MAX_PATH_BYTES} bytes for a path, so no file has it: `{}`. Check the path (glob lists what exists).",
            raw.len(),
            quote(raw)
        ));
    }
    if let Some(c) = raw.split('/').find(|c| c.len() > MAX_NAME_BYTES) {
        return invalid(format!(
            "has a component of {} bytes, over the system's limit of {MAX_NAME_BYTES} bytes for one file or directory name, so no file has it: `{}`. Check the path (glob lists what exists).",
            c.len(),
            quote(c)
        ));
    }
    Ok(())
}

impl Workspace {
    /// A workspace rooted at `root` (which must exist), with extra roots the operator allowed.
    /// Roots are canonicalized so that confinement compares real paths.
    pub fn new(root: &Path, extra_roots: &[PathBuf]) -> io::Result<Self> {
        let root = root.canonicalize()?;
        let mut handles = vec![Arc::new(DirHandle::open_root(&root)?)];
        let mut extras = Vec::new();
        for r in extra_roots {
            // An extra root that does not exist grants nothing; skip it rather than fail.
            if let Ok(c) = r.canonicalize()
                && let Ok(h) = DirHandle::open_root(&c)
            {
                extras.push(c);
                handles.push(Arc::new(h));
            }
        }
        Ok(Workspace { root, extra_roots: extras, handles })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn roots(&self) -> impl Iterator<Item = &Path> {
        std::iter::once(self.root.as_path()).chain(self.extra_roots.iter().map(PathBuf::as_path))
    }

    /// Each root with its handle, in the order of [`Workspace::roots`].
    pub fn root_handles(&self) -> impl Iterator<Item = (&Path, &DirHandle)> {
        self.roots().zip(self.handles.iter().map(Arc::as_ref))
    }

    /// Resolve a path argument named `field`. `raw` must be absolute.
    pub fn resolve(&self, field: &str, raw: &str) -> Result<Resolved, PathError> {
        if raw.trim().is_empty() {
            return Err(PathError::Empty {
                field: field.to_string(),
                example: self.root.join("src/main.rs").display().to_string(),
            });
        }
        check_form(field, raw)?;
        let given = Path::new(raw);
        if !given.is_absolute() {
            let trimmed = raw.trim();
            // " /ws/a.rs": a stray space, not a relative path.
            let (suggestion, note) = if Path::new(trimmed).is_absolute() {
                (normalize(Path::new(trimmed)), " (the path begins with whitespace; remove it)")
            } else {
                let s = normalize(&self.root.join(given));
                let note = if s.exists() { " (which exists)" } else { " (which does not exist either)" };
                (s, note)
            };
            return Err(PathError::Relative {
                field: field.to_string(),
                given: raw.to_string(),
                suggestion: suggestion.display().to_string(),
                note: note.to_string(),
            });
        }
        let mut shown = normalize(given);
        let mut real = real_path(&shown, 0);
        // `lnk/../x` means what the kernel says: `..` of the symlink's target. Lexical clean-up
        // would name another file; act on (and show) the one bash would open.
        if given.components().any(|c| c == Component::ParentDir)
            && let Ok(kernel) = given.canonicalize()
            && kernel != real
        {
            shown = kernel.clone();
            real = kernel;
        }
        if !self.contains(&real) {
            let via = if real != shown { format!(" (it resolves to {})", real.display()) } else { String::new() };
            return Err(PathError::Outside {
                given: shown.display().to_string(),
                via,
                roots: self.roots().map(|r| r.display().to_string()).collect::<Vec<_>>().join(", "),
            });
        }
        // `file.txt/` says "directory": only a directory may be named so. (The kernel agrees:
        // opening `file.txt/` fails with ENOTDIR.)
        if raw.len() > 1 && raw.ends_with('/') && !real.is_dir() {
            let what = if real.exists() { "is not a directory" } else { "does not exist" };
            return Err(PathError::Invalid {
                field: field.to_string(),
                why: format!(
                    "ends with `/`, which names a directory, but {} {what}. To name the file, give the path without the trailing `/`: {}.",
                    shown.display(),
                    shown.display()
                ),
            });
        }
        Ok(Resolved { shown, real })
    }

    /// Whether a real (symlink-resolved) path lies under one of the roots.
    pub fn contains(&self, real: &Path) -> bool {
        self.roots().any(|r| real.starts_with(r))
    }

    /// The handle of the innermost root holding `real`, and the path below it.
    fn root_of<'p>(&self, real: &'p Path) -> Option<(&DirHandle, &'p Path)> {
        self.roots()
            .zip(&self.handles)
            .filter_map(|(r, h)| real.strip_prefix(r).ok().map(|rest| (h.as_ref(), rest)))
            .min_by_key(|(_, rest)| rest.components().count())
    }

    /// Open the directory `real` (a [`Resolved::real`]) from its root's handle, one component
    /// at a time, following no symlink.
    pub fn open_dir(&self, real: &Path) -> Result<DirHandle, FsError> {
        match self.root_of(real) {
            Some((root, rest)) => root.open_dir(rest),
            None => Err(FsError::Changed { at: real.to_path_buf() }),
        }
    }

    /// Open the directory holding `real`, and give the entry's name in it. A root itself has
    /// no parent to act in: it is reported as the directory it is.
    pub fn open_parent(&self, real: &Path) -> Result<(DirHandle, OsString), FsError> {
        let Some((root, rest)) = self.root_of(real) else {
            return Err(FsError::Changed { at: real.to_path_buf() });
        };
        match (rest.parent(), rest.file_name()) {
            (Some(parent), Some(name)) => Ok((root.open_dir(parent)?, name.to_os_string())),
            _ => Err(FsError::NotRegular { at: real.to_path_buf(), kind: Kind::Dir }),
        }
    }
}

/// Lexical normalization of an absolute path: drop `.`, apply `..`, collapse separators.
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Symlinks followed by hand before giving up, as the kernel's limit (ELOOP).
const MAX_LINK_DEPTH: usize = 40;

/// Resolve symlinks: the canonical path if it exists, else the canonical nearest existing
/// ancestor with the remaining components appended. A dangling symlink resolves to its target.
/// A symlink loop resolves to the loop's own path, so that confinement judges where it sits and
/// the tool then reports the loop.
fn real_path(path: &Path, depth: usize) -> PathBuf {
    if let Ok(c) = path.canonicalize() {
        return c;
    }
    // A dangling symlink: follow it by hand so that writing through it is confined too.
    if let Ok(target) = std::fs::read_link(path) {
        let parent = path.parent().unwrap_or(Path::new("/"));
        let joined = normalize(&parent.join(target));
        if joined != path && depth < MAX_LINK_DEPTH {
            return real_path(&joined, depth + 1);
        }
    }
    let mut rest = Vec::new();
    let mut cur = path.to_path_buf();
    loop {
        match cur.file_name() {
            Some(name) => rest.push(name.to_os_string()),
            None => return path.to_path_buf(),
        }
        if !cur.pop() {
            return path.to_path_buf();
        }
        if let Ok(mut c) = cur.canonicalize() {
            for name in rest.iter().rev() {
                c.push(name);
            }
            return c;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_removes_dots() {
        assert_eq!(normalize(Path::new("/a/./b/../c//d")), PathBuf::from("/a/c/d"));
        assert_eq!(normalize(Path::new("/../x")), PathBuf::from("/x"));
    }

    #[test]
    fn dotdot_escape_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::new(dir.path(), &[]).unwrap();
        let raw = format!("{}/../etc/passwd", ws.root().display());
        assert!(matches!(ws.resolve("path", &raw), Err(PathError::Outside { .. })));
    }

    #[test]
    fn symlink_escape_is_refused_and_inside_link_allowed() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::new(dir.path(), &[]).unwrap();
        std::os::unix::fs::symlink("/etc", ws.root().join("etc")).unwrap();
        std::fs::write(ws.root().join("a.txt"), "x").unwrap();
        std::os::unix::fs::symlink("a.txt", ws.root().join("b.txt")).unwrap();
        let out = ws.resolve("path", &format!("{}/etc/passwd", ws.root().display()));
        assert!(matches!(out, Err(PathError::Outside { .. })), "{out:?}");
        let ok = ws.resolve("path", &format!("{}/b.txt", ws.root().display())).unwrap();
        assert_eq!(ok.real, ws.root().join("a.txt"));
        // A new file under a symlinked dir that escapes is refused too.
        let new = ws.resolve("path", &format!("{}/etc/new-file", ws.root().display()));
        assert!(matches!(new, Err(PathError::Outside { .. })));
    }

    #[test]
    fn symlink_loop_resolves_without_recursing_forever() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::new(dir.path(), &[]).unwrap();
        std::os::unix::fs::symlink("loop2", ws.root().join("loop1")).unwrap();
        std::os::unix::fs::symlink("loop1", ws.root().join("loop2")).unwrap();
        let r = ws.resolve("path", &format!("{}/loop1", ws.root().display())).unwrap();
        assert!(r.real.starts_with(ws.root()));
    }

    #[test]
    fn dotdot_after_a_symlink_follows_the_kernel() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::new(dir.path(), &[]).unwrap();
        std::fs::create_dir_all(ws.root().join("src/auth")).unwrap();
        std::fs::write(ws.root().join("src/index.ts"), "src").unwrap();
        std::fs::write(ws.root().join("index.ts"), "root").unwrap();
        std::os::unix::fs::symlink("src/auth", ws.root().join("lnk")).unwrap();
        let r = ws.resolve("path", &format!("{}/lnk/../index.ts", ws.root().display())).unwrap();
        assert_eq!(r.real, ws.root().join("src/index.ts"));
        assert_eq!(r.shown, r.real);
    }

    #[test]
    fn dangling_symlink_out_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::new(dir.path(), &[]).unwrap();
        std::os::unix::fs::symlink("/nonexistent-abhed/x", ws.root().join("d")).unwrap();
        let out = ws.resolve("path", &format!("{}/d", ws.root().display()));
        assert!(matches!(out, Err(PathError::Outside { .. })), "{out:?}");
    }
}
