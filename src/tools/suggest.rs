//! "Did you mean": for a path that does not exist, the nearest existing names, so a missing
//! file is a recoverable turn instead of a dead end.

use std::path::{Path, PathBuf};

use crate::sandbox::Workspace;

use super::{ErrorCode, ToolError};

/// Entries of one directory we compare against (bounded: a huge directory must not stall).
const MAX_DIR_ENTRIES: usize = 5000;
/// Entries of the workspace walk looking for the same file name elsewhere.
const MAX_WALK_ENTRIES: usize = 50_000;
const MAX_SUGGESTIONS: usize = 3;

/// The error for a path that does not exist, naming the nearest existing paths and the tool
/// that lists them.
pub fn not_found(ws: &Workspace, shown: &Path) -> ToolError {
    let mut msg = format!("{} does not exist.", shown.display());
    let suggestions = near_paths(shown);
    if let Some((first, rest)) = suggestions.split_first() {
        msg.push_str(&format!(" Did you mean {}?", first.display()));
        if !rest.is_empty() {
            let others = rest.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ");
            msg.push_str(&format!(" Other near names: {others}."));
        }
    }
    let name = shown.file_name().map(|n| n.to_string_lossy().to_string());
    if let Some(name) = &name {
        let elsewhere: Vec<PathBuf> =
            same_name_elsewhere(ws, name, shown).into_iter().filter(|p| !suggestions.contains(p)).collect();
        if !elsewhere.is_empty() {
            let list = elsewhere.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ");
            msg.push_str(&format!(" A file named `{name}` exists at: {list}."));
        }
    }
    let base = existing_ancestor(shown).unwrap_or_else(|| ws.root().to_path_buf());
    let stem = name.as_deref().and_then(|n| n.split('.').next()).filter(|s| !s.is_empty()).unwrap_or("*");
    msg.push_str(&format!(
        " Use glob to list what exists, e.g. {{\"pattern\": \"**/{stem}*\", \"path\": \"{}\"}}.",
        base.display()
    ));
    ToolError::new(ErrorCode::NotFound, msg)
}

/// The deepest existing directory on the way to `path`.
fn existing_ancestor(path: &Path) -> Option<PathBuf> {
    path.ancestors().skip(1).find(|a| a.is_dir()).map(Path::to_path_buf)
}

/// Existing paths whose first missing component is a near spelling of the one given.
fn near_paths(shown: &Path) -> Vec<PathBuf> {
    let Some(base) = existing_ancestor(shown) else { return Vec::new() };
    let Ok(rest) = shown.strip_prefix(&base) else { return Vec::new() };
    let mut comps = rest.components();
    let Some(first) = comps.next() else { return Vec::new() };
    let first = first.as_os_str().to_string_lossy().to_string();
    let remainder: PathBuf = comps.collect();
    let Ok(rd) = std::fs::read_dir(&base) else { return Vec::new() };

    let mut scored: Vec<(f64, PathBuf)> = rd
        .take(MAX_DIR_ENTRIES)
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            let score = similarity(&first, &name);
            let mut candidate = base.join(&name);
            if !remainder.as_os_str().is_empty() {
                candidate.push(&remainder);
            }
            (score >= 0.5).then_some((score, candidate))
        })
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    // Prefer candidates that exist all the way down; keep near directory names otherwise.
    let (mut exist, missing): (Vec<_>, Vec<_>) = scored.into_iter().partition(|(_, p)| p.exists());
    exist.extend(
        missing.into_iter().filter(|(_, p)| p.parent().is_some_and(Path::is_dir) && remainder.as_os_str().is_empty()),
    );
    exist.into_iter().map(|(_, p)| p).take(MAX_SUGGESTIONS).collect()
}

fn similarity(a: &str, b: &str) -> f64 {
    if a.eq_ignore_ascii_case(b) {
        return 0.99;
    }
    let (a, b) = (a.to_lowercase(), b.to_lowercase());
    match (a.rsplit_once('.'), b.rsplit_once('.')) {
        // Weigh the stem over the extension: "auth.rs" is near "auth.ts", "b.txt" is not
        // near "a.txt".
        (Some((sa, ea)), Some((sb, eb))) if !sa.is_empty() && !sb.is_empty() => {
            0.7 * strsim::normalized_damerau_levenshtein(sa, sb) + 0.3 * f64::from(u8::from(ea == eb))
        }
        _ => strsim::normalized_damerau_levenshtein(&a, &b),
    }
}

/// Files with exactly this name elsewhere in the workspace (gitignore-aware, bounded).
fn same_name_elsewhere(ws: &Workspace, name: &str, shown: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let walker =
        ignore::WalkBuilder::new(ws.root()).filter_entry(|e| !super::glob::is_builtin_ignored(e.file_name())).build();
    for entry in walker.take(MAX_WALK_ENTRIES).filter_map(Result::ok) {
        if entry.file_name().to_string_lossy() == name && entry.path() != shown {
            found.push(entry.path().to_path_buf());
            if found.len() >= MAX_SUGGESTIONS {
                break;
            }
        }
    }
    found.sort();
    found
}
