//! "Did you mean": for a path that does not exist, the nearest existing names, so a missing
//! file is a recoverable turn instead of a dead end.
//!
//! Everything here looks through the workspace's directory handles (as the tools act), so a
//! directory the guest swaps for a symlink cannot make a suggestion name a file outside.

use std::ffi::OsStr;
use std::os::unix::ffi::{OsStrExt as _, OsStringExt as _};
use std::path::{Path, PathBuf};

use unicode_normalization::UnicodeNormalization;

use super::walk::{self, Entry, FileVisitor, Filters, Flow};
use super::{ErrorCode, ToolContext, ToolError, fsutil};
use crate::sandbox::Workspace;
use crate::sandbox::confined::{DirHandle, Kind};

/// Entries of one directory we compare against (bounded: a huge directory must not stall).
const MAX_DIR_ENTRIES: usize = 5000;
/// Files of the workspace walk looking for the same file name elsewhere.
const MAX_WALK_ENTRIES: usize = 50_000;
const MAX_SUGGESTIONS: usize = 3;

/// A suggestion: the path as the model would name it, and why it is near.
struct Near {
    shown: PathBuf,
    why: Option<&'static str>,
}

/// The error for a path that does not exist, naming the nearest existing paths and the tool
/// that lists them.
pub fn not_found(ctx: &ToolContext<'_>, shown: &Path) -> ToolError {
    let ws = ctx.workspace;
    let real = ws.resolve("path", &shown.to_string_lossy()).map(|r| r.real).unwrap_or_else(|_| shown.to_path_buf());
    let mut msg = match dangling(ws, shown) {
        Some(target) => format!(
            "{} is a symlink to {}, which does not exist (a dangling link): there is no file to act on. Use the path of the file the link should point at, or fix the link with bash (`ln -sfn TARGET {}`).",
            shown.display(),
            target.display(),
            shown.display()
        ),
        None => format!("{} does not exist.", shown.display()),
    };
    let suggestions: Vec<Near> = near_paths(ws, &real)
        .into_iter()
        .map(|(p, why)| Near { shown: fsutil::as_shown(shown, &real, &p), why })
        .filter(|n| n.shown != shown)
        .collect();
    if let Some((first, rest)) = suggestions.split_first() {
        msg.push_str(&format!(" Did you mean {}?", first.shown.display()));
        if let Some(why) = first.why {
            msg.push_str(&format!(" ({why})"));
        }
        if !rest.is_empty() {
            let others = rest.iter().map(|n| n.shown.display().to_string()).collect::<Vec<_>>().join(", ");
            msg.push_str(&format!(" Other near names: {others}."));
        }
    }
    let name = shown.file_name().map(|n| n.to_string_lossy().to_string());
    if let Some(name) = &name {
        let elsewhere: Vec<PathBuf> = same_name_elsewhere(ctx, name, &real)
            .into_iter()
            .map(|p| fsutil::as_shown(shown, &real, &p))
            .filter(|p| p != shown && !suggestions.iter().any(|n| &n.shown == p))
            .collect();
        if !elsewhere.is_empty() {
            let list = elsewhere.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ");
            msg.push_str(&format!(" A file named `{name}` exists at: {list}."));
        }
    }
    let base = existing_ancestor(ws, &real)
        .map_or_else(|| ws.root().to_path_buf(), |(p, _)| fsutil::as_shown(shown, &real, &p));
    // A name that is a pattern (`src/**/*.ts` given as a path) is searched for as one; a hidden
    // name (`.env`) lists its directory, as glob skips hidden files; neither may become `**/**`,
    // which lists the whole tree (a thousand paths in a big one).
    let pattern = match name.as_deref() {
        Some(n) if n.contains(['*', '?', '[']) => format!("**/{n}"),
        Some(n) if n.starts_with('.') => "*".to_string(),
        Some(n) => format!("**/{}*", n.split('.').next().filter(|s| !s.is_empty()).unwrap_or(n)),
        None => "*".to_string(),
    };
    msg.push_str(&format!(
        " Use glob to list what exists, e.g. {{\"pattern\": \"{pattern}\", \"path\": \"{}\"}}.",
        base.display()
    ));
    walk::bounded(ToolError::new(ErrorCode::NotFound, msg))
}

/// Where `shown` points, when it is itself a symlink whose target does not exist.
fn dangling(ws: &Workspace, shown: &Path) -> Option<PathBuf> {
    let (parent, name) = (shown.parent()?, shown.file_name()?);
    let parent = ws.resolve("path", &parent.to_string_lossy()).ok()?;
    let dir = ws.open_dir(&parent.real).ok()?;
    if dir.lstat(name).ok()??.kind != Kind::Symlink {
        return None;
    }
    let target = rustix::fs::readlinkat(&dir, name, Vec::new()).ok()?;
    Some(PathBuf::from(std::ffi::OsString::from_vec(target.into_bytes())))
}

/// The deepest existing directory on the way to `real`, opened.
fn existing_ancestor(ws: &Workspace, real: &Path) -> Option<(PathBuf, DirHandle)> {
    real.ancestors().skip(1).take_while(|a| ws.contains(a)).find_map(|a| Some((a.to_path_buf(), ws.open_dir(a).ok()?)))
}

/// Whether `real` exists (as anything), looked at from the workspace's handles.
fn exists(ws: &Workspace, real: &Path) -> Option<Kind> {
    match ws.open_parent(real) {
        Ok((dir, name)) => dir.lstat(&name).ok().flatten().map(|m| m.kind),
        Err(crate::sandbox::confined::FsError::NotRegular { kind, .. }) => Some(kind),
        Err(_) => None,
    }
}

/// The most entries a directory's short listing names.
const LISTED: usize = 20;

/// What a directory holds (read given a directory, the system prompt's workspace part): its
/// entries' names (directories with a trailing `/`, hidden ones left out, control characters
/// escaped so that a name cannot add a line), sorted, at most [`LISTED`], and how many more.
/// `None` when it cannot be listed.
pub fn dir_listing(ws: &Workspace, real: &Path) -> Option<String> {
    let dir = ws.open_dir(real).ok()?;
    let mut names: Vec<String> = dir
        .entries()
        .ok()?
        .take(MAX_DIR_ENTRIES)
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = OsStr::from_bytes(e.file_name().to_bytes()).to_string_lossy().to_string();
            let slash = if Kind::from(e.file_type()) == Kind::Dir { "/" } else { "" };
            (!name.starts_with('.')).then(|| format!("{}{slash}", super::path_line(Path::new(&name))))
        })
        .collect();
    names.sort();
    let more = names.len().saturating_sub(LISTED);
    names.truncate(LISTED);
    Some(match (names.is_empty(), more) {
        (true, _) => "It is empty (or holds hidden files only).".to_string(),
        (false, 0) => format!("It holds: {}.", names.join(", ")),
        (false, n) => format!("It holds: {}, and {n} more.", names.join(", ")),
    })
}

/// Existing paths whose first missing component is a near spelling of the one given, each
/// with why it is near when that is not plain spelling.
fn near_paths(ws: &Workspace, real: &Path) -> Vec<(PathBuf, Option<&'static str>)> {
    let Some((base, dir)) = existing_ancestor(ws, real) else { return Vec::new() };
    let Ok(rest) = real.strip_prefix(&base) else { return Vec::new() };
    let mut comps = rest.components();
    let Some(first) = comps.next() else { return Vec::new() };
    let first = first.as_os_str().to_string_lossy().to_string();
    let remainder: PathBuf = comps.collect();
    let Ok(entries) = dir.entries() else { return Vec::new() };
    // A file name with an extension is not near a directory of its stem (`auth.ts`, `auth/`).
    let wants_file = remainder.as_os_str().is_empty() && first.contains('.');

    let mut scored: Vec<(f64, PathBuf, Option<&'static str>, Kind)> = entries
        .take(MAX_DIR_ENTRIES)
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = OsStr::from_bytes(e.file_name().to_bytes()).to_string_lossy().to_string();
            if name == "." || name == ".." {
                return None;
            }
            let (score, why) = similarity(&first, &name);
            let mut candidate = base.join(&name);
            if !remainder.as_os_str().is_empty() {
                candidate.push(&remainder);
            }
            (score >= 0.5).then_some((score, candidate, why, Kind::from(e.file_type())))
        })
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    // Prefer candidates that exist all the way down; keep near directory names otherwise.
    let mut exist = Vec::new();
    let mut missing = Vec::new();
    for (score, p, why, kind) in scored {
        match exists(ws, &p) {
            Some(Kind::Dir) if wants_file => {}
            Some(_) => exist.push((p, why)),
            None if remainder.as_os_str().is_empty() && kind != Kind::Symlink => missing.push((score, p, why)),
            None => {}
        }
    }
    exist.extend(missing.into_iter().map(|(_, p, why)| (p, why)));
    exist.into_iter().take(MAX_SUGGESTIONS).collect()
}

/// How near name `b` is to the name `a` that was asked for (0 to 1), and why when the reason
/// is not plain spelling.
fn similarity(a: &str, b: &str) -> (f64, Option<&'static str>) {
    if a.nfc().eq(b.nfc()) {
        return (
            1.0,
            Some(
                "the same name written with other Unicode code points (NFC and NFD forms of an accented letter): copy the path exactly as glob prints it",
            ),
        );
    }
    if a.eq_ignore_ascii_case(b) {
        return (0.99, Some("the same name in other letter case: paths are case-sensitive"));
    }
    let (a, b) = (a.to_lowercase(), b.to_lowercase());
    let score = match (a.rsplit_once('.'), b.rsplit_once('.')) {
        // Weigh the stem over the extension: "auth.rs" is near "auth.ts", "b.txt" is not
        // near "a.txt".
        (Some((sa, ea)), Some((sb, eb))) if !sa.is_empty() && !sb.is_empty() => {
            0.7 * strsim::normalized_damerau_levenshtein(sa, sb) + 0.3 * f64::from(u8::from(ea == eb))
        }
        _ => strsim::normalized_damerau_levenshtein(&a, &b),
    };
    (score, None)
}

/// Files with exactly this name elsewhere in the workspace (the walk glob and grep use, so the
/// same ignore rules, the operator's list included; bounded).
fn same_name_elsewhere(ctx: &ToolContext<'_>, name: &str, real: &Path) -> Vec<PathBuf> {
    struct Find<'a> {
        name: &'a str,
        real: &'a Path,
        seen: usize,
        found: Vec<PathBuf>,
    }
    impl FileVisitor for Find<'_> {
        fn file(&mut self, entry: Entry) -> Flow {
            self.seen += 1;
            if entry.path.file_name().is_some_and(|n| n.to_string_lossy() == self.name) && entry.path != self.real {
                self.found.push(entry.path);
            }
            if self.found.len() >= MAX_SUGGESTIONS || self.seen >= MAX_WALK_ENTRIES / walk::threads() {
                Flow::Quit
            } else {
                Flow::Continue
            }
        }
        fn error(&mut self, _: String) {}
    }
    let operator = walk::operator_ignore(ctx).ok().flatten();
    let filters = Filters { include_hidden: false, operator, overrides: None, everything: false };
    let new = || Find { name, real, seen: 0, found: Vec::new() };
    let mut found: Vec<PathBuf> = walk::run(ctx.workspace, ctx.workspace.root(), &filters, new)
        .map(|vs| vs.into_iter().flat_map(|v| v.found).collect())
        .unwrap_or_default();
    found.sort();
    found.truncate(MAX_SUGGESTIONS);
    found
}
