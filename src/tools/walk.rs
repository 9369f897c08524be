//! The directory walk shared by glob and grep: ripgrep's `ignore` walker, in parallel, with the
//! same filtering in both tools (.gitignore and .ignore even outside a git repository, hidden
//! files, the operator's ignore list, the built-in directories).
//!
//! A directory named explicitly as the root of a walk is always walked, as ripgrep searches
//! an explicit path even when an ignore rule covers it; the rules apply to what lies below.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::overrides::Override;
use ignore::{DirEntry, ParallelVisitor, ParallelVisitorBuilder, WalkBuilder, WalkState};

use super::glob::{BUILTIN_IGNORED, is_builtin_ignored};
use super::suggest::not_found;
use super::{ErrorCode, ToolContext, ToolError, io_error};
use crate::sandbox::Resolved;

/// Text the model sent (a pattern, a glob, a path) is quoted back in messages up to this many
/// characters: output stays bounded however long the argument.
pub(crate) const ECHO_CHARS: usize = 200;

/// `text` as quoted in a message: whole when short, else its first [`ECHO_CHARS`] characters
/// and how many more there were.
pub(crate) fn clip(text: &str) -> Cow<'_, str> {
    match text.char_indices().nth(ECHO_CHARS) {
        None => Cow::Borrowed(text),
        Some((cut, _)) => {
            let more = text[cut..].chars().count();
            Cow::Owned(format!("{}…({more} more characters)", &text[..cut]))
        }
    }
}

/// A path as quoted in a message, cut as [`clip`] cuts text. Below `base` (the directory
/// searched), only the part below it is cut: the message reads the same whatever the length
/// of the directory's own path.
pub(crate) fn clip_path(base: &Path, path: &Path) -> String {
    match path.strip_prefix(base) {
        Ok(rest) if !rest.as_os_str().is_empty() => {
            format!("{}/{}", base.display().to_string().trim_end_matches('/'), clip(&rest.display().to_string()))
        }
        _ => clip(&path.display().to_string()).into_owned(),
    }
}

/// An error from code shared with the other tools (path resolution, "did you mean"), whose
/// message quotes the argument whole: any over-long word in it (a path, a pattern) is cut as
/// [`clip`] cuts text, so that the message stays bounded.
pub(crate) fn bounded(mut err: ToolError) -> ToolError {
    if err.message.split_whitespace().all(|w| w.chars().count() <= ECHO_CHARS) {
        return err;
    }
    let mut out = String::with_capacity(err.message.len().min(4096));
    let mut rest = err.message.as_str();
    while !rest.is_empty() {
        let space = rest.find(|c: char| !c.is_whitespace()).unwrap_or(rest.len());
        out.push_str(&rest[..space]);
        rest = &rest[space..];
        let word = rest.find(char::is_whitespace).unwrap_or(rest.len());
        out.push_str(&clip(&rest[..word]));
        rest = &rest[word..];
    }
    err.message = out;
    err
}

/// How many walker threads: what ripgrep uses (the available cores, at most 12).
pub(crate) fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get()).min(12)
}

/// The filters of one walk.
pub(crate) struct Filters {
    /// Also walk hidden files and directories (names starting with `.`).
    pub include_hidden: bool,
    /// The operator's ignore list (`workspace.ignore`), rooted at the workspace root.
    pub operator: Option<Arc<Gitignore>>,
    /// grep's `glob` filter, as ripgrep's `-g`.
    pub overrides: Option<Override>,
}

/// The operator's ignore list as a gitignore matcher rooted at the workspace root, or `None`
/// when the list is empty.
pub(crate) fn operator_ignore(ctx: &ToolContext<'_>) -> Result<Option<Arc<Gitignore>>, ToolError> {
    let patterns = &ctx.config.workspace.ignore;
    if patterns.is_empty() {
        return Ok(None);
    }
    let mut b = GitignoreBuilder::new(ctx.workspace.root());
    for p in patterns {
        if let Err(e) = b.add_line(None, p) {
            return Err(bad_operator_pattern(p, &e));
        }
    }
    match b.build() {
        Ok(gi) => Ok(Some(Arc::new(gi))),
        Err(e) => Err(bad_operator_pattern(&patterns.join(", "), &e)),
    }
}

fn bad_operator_pattern(p: &str, e: &ignore::Error) -> ToolError {
    ToolError::new(
        ErrorCode::InvalidGlob,
        format!(
            "the operator's ignore pattern `{p}` (workspace.ignore in abhed.toml or the user config) is invalid: {e}. \
             This is a configuration problem, not a problem with your arguments; ask the operator to fix it."
        ),
    )
}

/// A walker over `root` (a real, symlink-resolved directory) with the shared filtering.
pub(crate) fn builder(root: &Path, filters: &Filters) -> WalkBuilder {
    let mut b = WalkBuilder::new(root);
    b.hidden(!filters.include_hidden).require_git(false).follow_links(false).threads(threads());
    if let Some(ov) = &filters.overrides {
        b.overrides(ov.clone());
    }
    let operator = filters.operator.clone();
    b.filter_entry(move |e| keep(e, operator.as_deref()));
    b
}

/// Whether the walk keeps an entry below its root (and, for a directory, descends into it).
fn keep(entry: &DirEntry, operator: Option<&Gitignore>) -> bool {
    let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
    if is_dir && is_builtin_ignored(entry.file_name()) {
        return false;
    }
    match operator {
        Some(gi) if entry.path().starts_with(gi.path()) => !gi.matched(entry.path(), is_dir).is_ignore(),
        _ => true,
    }
}

/// One thread's share of a walk: it sees each regular file (never directories or symlinks:
/// a symlink is not followed, so a link out of the workspace is never read).
pub(crate) trait FileVisitor: Send {
    fn file(&mut self, entry: DirEntry) -> WalkState;
    /// An entry the walker could not read (a directory without permission, say).
    fn error(&mut self, err: ignore::Error);
}

/// Run the walk in parallel; returns each thread's visitor once the walk is over.
pub(crate) fn run<V, F>(builder: &WalkBuilder, make: F) -> Vec<V>
where
    V: FileVisitor,
    F: Fn() -> V + Sync,
{
    let done = Mutex::new(Vec::new());
    let mut b = Builder { make: &make, done: &done };
    builder.build_parallel().visit(&mut b);
    done.into_inner().unwrap_or_else(PoisonError::into_inner)
}

struct Builder<'a, V, F> {
    make: &'a F,
    done: &'a Mutex<Vec<V>>,
}

impl<'a, V: FileVisitor + 'a, F: Fn() -> V + Sync> ParallelVisitorBuilder<'a> for Builder<'a, V, F> {
    fn build(&mut self) -> Box<dyn ParallelVisitor + 'a> {
        Box::new(Holder { visitor: Some((self.make)()), done: self.done })
    }
}

/// Hands its visitor back when the walk drops it at the end of its thread.
struct Holder<'a, V> {
    visitor: Option<V>,
    done: &'a Mutex<Vec<V>>,
}

impl<V: FileVisitor> ParallelVisitor for Holder<'_, V> {
    fn visit(&mut self, entry: Result<DirEntry, ignore::Error>) -> WalkState {
        let Some(v) = self.visitor.as_mut() else { return WalkState::Quit };
        match entry {
            Ok(e) if e.file_type().is_some_and(|t| t.is_file()) => v.file(e),
            Ok(_) => WalkState::Continue,
            Err(err) => {
                v.error(err);
                WalkState::Continue
            }
        }
    }
}

impl<V> Drop for Holder<'_, V> {
    fn drop(&mut self) {
        if let Some(v) = self.visitor.take() {
            self.done.lock().unwrap_or_else(PoisonError::into_inner).push(v);
        }
    }
}

/// Entries the walker could not read, reported once at the end of the output.
#[derive(Debug, Default)]
pub(crate) struct WalkErrors {
    pub count: usize,
    /// The first few, as "path: reason".
    pub examples: Vec<String>,
}

impl WalkErrors {
    const EXAMPLES: usize = 3;

    pub fn push(&mut self, what: String) {
        self.count += 1;
        if self.examples.len() < Self::EXAMPLES {
            self.examples.push(what);
        }
    }

    pub fn merge(&mut self, other: WalkErrors) {
        self.count += other.count;
        for e in other.examples {
            if self.examples.len() < Self::EXAMPLES {
                self.examples.push(e);
            }
        }
    }

    /// The note line, or `None` when nothing failed. The walker names real paths; the note
    /// names them in the shown form.
    pub fn note(&self, shown_base: &Path, real_base: &Path) -> Option<String> {
        if self.count == 0 {
            return None;
        }
        let (real, shown) = (real_base.display().to_string(), shown_base.display().to_string());
        let mut examples: Vec<String> =
            self.examples.iter().map(|e| if real != shown { e.replace(&real, &shown) } else { e.clone() }).collect();
        // Sorted so that the same tree gives the same note whichever thread saw what first.
        examples.sort();
        let (noun, verb) = if self.count == 1 { ("entry", "was") } else { ("entries", "were") };
        let more = if self.count > examples.len() { "; ..." } else { "" };
        Some(format!(
            "[{} {noun} could not be read or searched and {verb} skipped: {}{more}]",
            self.count,
            examples.join("; ")
        ))
    }
}

/// What a walk skips, for the hints of an empty result.
pub(crate) fn skipped_summary(filters: &Filters, operator_patterns: &[String]) -> String {
    let mut parts = Vec::new();
    if !filters.include_hidden {
        parts.push("hidden files".to_string());
    }
    parts.push("paths matched by .gitignore/.ignore".to_string());
    let (last, rest) = BUILTIN_IGNORED.split_last().unwrap_or((&"", &[]));
    parts.push(format!("the {} and {last} directories", rest.join(", ")));
    if filters.operator.is_some() {
        parts.push(format!("the operator ignore list ({})", operator_patterns.join(", ")));
    }
    parts.join(", ")
}

/// Resolve the optional `path` argument (default: the workspace root) to a path that exists.
/// A missing path is the "did you mean" error.
pub(crate) fn resolve_existing(
    ctx: &ToolContext<'_>,
    raw: Option<&str>,
) -> Result<(Resolved, std::fs::Metadata), ToolError> {
    let resolved = match raw {
        Some(raw) => ctx.workspace.resolve("path", raw).map_err(|e| bounded(e.into()))?,
        None => Resolved { shown: ctx.workspace.root().to_path_buf(), real: ctx.workspace.root().to_path_buf() },
    };
    match std::fs::metadata(&resolved.real) {
        Ok(md) => Ok((resolved, md)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(bounded(not_found(ctx.workspace, &resolved.shown))),
        Err(e) => Err(io_error("search", &resolved.shown, &e)),
    }
}

/// The shown form of a path found under `real_base`.
pub(crate) fn shown_path(shown_base: &Path, real_base: &Path, found: &Path) -> PathBuf {
    match found.strip_prefix(real_base) {
        Ok(rest) if rest.as_os_str().is_empty() => shown_base.to_path_buf(),
        Ok(rest) => shown_base.join(rest),
        Err(_) => found.to_path_buf(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shown_path_rebases() {
        let p = shown_path(Path::new("/link/ws"), Path::new("/real/ws"), Path::new("/real/ws/a/b.rs"));
        assert_eq!(p, PathBuf::from("/link/ws/a/b.rs"));
        let same = shown_path(Path::new("/ws"), Path::new("/ws"), Path::new("/ws"));
        assert_eq!(same, PathBuf::from("/ws"));
    }

    #[test]
    fn clip_bounds_echoed_text() {
        assert_eq!(clip("short"), "short");
        let exact = "é".repeat(ECHO_CHARS);
        assert_eq!(clip(&exact), exact.as_str());
        let long = "é".repeat(ECHO_CHARS + 5000);
        let c = clip(&long);
        assert!(c.starts_with(&exact), "{c}");
        assert!(c.ends_with("…(5000 more characters)"), "{c}");
        assert_eq!(c.chars().count(), ECHO_CHARS + "…(5000 more characters)".len() - 2);
    }

    #[test]
    fn clip_path_cuts_below_the_base() {
        let long = "d/".repeat(150);
        let p = Path::new("/ws").join(&long);
        assert_eq!(clip_path(Path::new("/ws"), &p), format!("/ws/{}", clip(long.trim_end_matches('/'))));
        assert_eq!(clip_path(Path::new("/"), Path::new("/a")), "/a");
        assert_eq!(clip_path(Path::new("/ws"), Path::new("/ws")), "/ws");
        assert_eq!(clip_path(Path::new("/other"), Path::new("/ws/a")), "/ws/a");
    }

    #[test]
    fn bounded_cuts_only_long_words() {
        let short = ToolError::new(ErrorCode::NotFound, "a b  c");
        assert_eq!(bounded(short).message, "a b  c");
        let long = format!("{} is outside\nthe workspace.", "/x".repeat(1000));
        let m = bounded(ToolError::new(ErrorCode::OutsideWorkspace, long)).message;
        assert!(m.ends_with("…(1800 more characters) is outside\nthe workspace."), "{m}");
    }

    #[test]
    fn walk_errors_cap_examples() {
        let mut w = WalkErrors::default();
        for i in 0..5 {
            w.push(format!("p{i}: denied"));
        }
        assert_eq!(w.count, 5);
        let note = w.note(Path::new("/ws"), Path::new("/ws")).unwrap();
        assert!(note.starts_with("[5 entries could not be read or searched and were skipped: "), "{note}");
        assert!(note.ends_with("p0: denied; p1: denied; p2: denied; ...]"), "{note}");
    }
}
