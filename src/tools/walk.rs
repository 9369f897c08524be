//! The directory walk shared by glob and grep, in parallel, with the same filtering in both
//! tools (.gitignore and .ignore even outside a git repository, hidden files, the operator's
//! ignore list, the built-in directories), with ripgrep's `ignore` crate for the rules.
//!
//! The walk goes from directory handle to directory handle and never follows a symlink: the
//! guest can swap a directory for a symlink to a host directory at any moment, and a walk by
//! path would list and search what it points at.
//!
//! A directory named explicitly as the root of a walk is always walked, as ripgrep searches
//! an explicit path even when an ignore rule covers it; the rules apply to what lies below.

use std::borrow::Cow;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::Read as _;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder, Glob};
use ignore::overrides::Override;

use super::glob::{BUILTIN_IGNORED, is_builtin_ignored};
use super::suggest::not_found;
use super::{ErrorCode, ToolContext, ToolError, io_error};
use crate::sandbox::confined::{DirHandle, FsError, Kind, Meta};
use crate::sandbox::{Resolved, Workspace};

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
    /// The ignore list (`workspace.ignore`), rooted at the workspace root.
    pub operator: Option<Arc<IgnoreList>>,
    /// grep's `glob` filter, as ripgrep's `-g`.
    pub overrides: Option<Override>,
    /// Skip nothing at all (no ignore files, hidden names, built-in directories or operator
    /// list): to tell, when nothing matched, what the filters hid.
    pub everything: bool,
}

impl Filters {
    /// The filters of a walk that skips nothing.
    pub fn everything() -> Filters {
        Filters { include_hidden: true, operator: None, overrides: None, everything: true }
    }
}

/// `workspace.ignore`: the operator's patterns (user config) and the repository's (its
/// `abhed.toml` may add patterns: they only narrow), told apart in messages.
pub(crate) struct IgnoreList {
    matcher: Gitignore,
    /// The patterns the repository's `abhed.toml` added.
    repository: Vec<String>,
    all: Vec<String>,
}

impl IgnoreList {
    fn whose(&self, p: &str) -> &'static str {
        whose(&self.repository, p)
    }

    /// "the ignore list (user config: a, b; the repository's abhed.toml: c)".
    fn describe(&self) -> String {
        let (repo, user): (Vec<&String>, Vec<&String>) = self.all.iter().partition(|p| self.repository.contains(p));
        let join = |v: &[&String]| v.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ");
        let mut parts = Vec::new();
        if !user.is_empty() {
            parts.push(format!("the user config's: {}", join(&user)));
        }
        if !repo.is_empty() {
            parts.push(format!("the repository abhed.toml's: {}", join(&repo)));
        }
        format!("the workspace.ignore patterns ({})", parts.join("; "))
    }
}

/// The `workspace.ignore` list as a gitignore matcher rooted at the workspace root, or `None`
/// when the list is empty.
pub(crate) fn operator_ignore(ctx: &ToolContext<'_>) -> Result<Option<Arc<IgnoreList>>, ToolError> {
    let ws = &ctx.config.workspace;
    if ws.ignore.is_empty() {
        return Ok(None);
    }
    let mut b = GitignoreBuilder::new(ctx.workspace.root());
    for p in &ws.ignore {
        if let Err(e) = b.add_line(None, p) {
            return Err(bad_ignore_pattern(p, whose(&ws.repository_ignore, p), &e));
        }
    }
    match b.build() {
        Ok(matcher) => {
            Ok(Some(Arc::new(IgnoreList { matcher, repository: ws.repository_ignore.clone(), all: ws.ignore.clone() })))
        }
        Err(e) => Err(bad_ignore_pattern(&ws.ignore.join(", "), "abhed.toml or the user config", &e)),
    }
}

/// Whose `workspace.ignore` pattern `p` is, for a message.
fn whose(repository: &[String], p: &str) -> &'static str {
    if repository.iter().any(|r| r == p) { "the repository's abhed.toml" } else { "the user config" }
}

fn bad_ignore_pattern(p: &str, whose: &str, e: &ignore::Error) -> ToolError {
    ToolError::new(
        ErrorCode::InvalidGlob,
        format!(
            "the ignore pattern `{p}` (workspace.ignore in {whose}) is invalid: {e}. \
             This is a configuration problem, not a problem with your arguments; ask the operator to fix it."
        ),
    )
}

/// One regular file a walk found: its path, and its directory's handle to open it by.
pub(crate) struct Entry {
    /// The real path (below the walk's real root).
    pub path: PathBuf,
    dir: Arc<DirHandle>,
    name: OsString,
}

impl Entry {
    /// Open the file from its directory's handle: never through a symlink, regular files only.
    pub fn open(&self) -> Result<(File, Meta), FsError> {
        self.dir.open_listed_file(&self.name)
    }

    /// The file's metadata, from its directory's handle (`None` when it vanished meanwhile).
    pub fn meta(&self) -> Option<Meta> {
        self.dir.lstat(&self.name).ok().flatten()
    }

    pub fn into_path(self) -> PathBuf {
        self.path
    }
}

/// Whether a walk goes on after a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flow {
    Continue,
    Quit,
}

/// One thread's share of a walk: it sees each regular file (never directories or symlinks: a
/// symlink is not followed, so a link out of the workspace is never read).
pub(crate) trait FileVisitor: Send {
    fn file(&mut self, entry: Entry) -> Flow;
    /// An entry the walk could not read (a directory without permission, say), as
    /// "path: reason".
    fn error(&mut self, what: String);
}

/// The ignore files of one directory of a walk, and those of the directories above it.
struct Level {
    parent: Option<Arc<Level>>,
    /// `.ignore`: above `.gitignore`, as in ripgrep.
    dot_ignore: Option<Gitignore>,
    gitignore: Option<Gitignore>,
    /// `.git/info/exclude`, in a repository's top directory.
    exclude: Option<Gitignore>,
    /// The directory is a repository's top (holds `.git`): the gitignore rules of directories
    /// above it do not apply below it.
    has_git: bool,
}

/// The most bytes of one ignore file read: it is the repository's, and must not stall a walk.
const MAX_IGNORE_FILE: u64 = 1 << 20;

impl Level {
    /// Read the ignore files of `dir` (through its handle: a symlinked `.gitignore` is not
    /// followed, a FIFO is not opened).
    fn read(dir: &DirHandle, parent: Option<Arc<Level>>) -> Level {
        let has = |name: &str| dir.lstat(OsStr::new(name)).ok().flatten().is_some();
        Level::read_present(
            dir,
            parent,
            Present { dot_ignore: has(".ignore"), gitignore: has(".gitignore"), git: has(".git") },
        )
    }

    /// The same, when a listing of `dir` already told which of the files are there (a walk
    /// lists every directory anyway: no look-ups for files that are not there).
    fn read_present(dir: &DirHandle, parent: Option<Arc<Level>>, present: Present) -> Level {
        let matcher = |yes: bool, name: &str| yes.then(|| rules_file(dir, dir, OsStr::new(name))).flatten();
        let exclude = present
            .git
            .then(|| {
                let info = dir.child_dir(OsStr::new(".git")).ok()?.child_dir(OsStr::new("info")).ok()?;
                rules_file(dir, &info, OsStr::new("exclude"))
            })
            .flatten();
        Level {
            parent,
            dot_ignore: matcher(present.dot_ignore, ".ignore"),
            gitignore: matcher(present.gitignore, ".gitignore"),
            exclude,
            has_git: present.git,
        }
    }
}

/// Which of a directory's ignore files (and `.git`) are there.
#[derive(Default, Clone, Copy)]
struct Present {
    dot_ignore: bool,
    gitignore: bool,
    git: bool,
}

/// A gitignore matcher rooted at `root` from the file `name` in `dir`, if it exists and holds
/// rules.
fn rules_file(root: &DirHandle, dir: &DirHandle, name: &OsStr) -> Option<Gitignore> {
    let (file, meta) = dir.open_file(name).ok()?;
    let mut text = String::new();
    let _ = std::io::Read::take(file, MAX_IGNORE_FILE.min(meta.len)).read_to_string(&mut text);
    let mut b = GitignoreBuilder::new(root.path());
    let from = dir.path().join(name);
    for line in text.lines() {
        let _ = b.add_line(Some(from.clone()), line);
    }
    b.build().ok().filter(|g| !g.is_empty())
}

/// The rules every directory of one walk shares.
struct Rules<'a> {
    filters: &'a Filters,
    global: Option<Gitignore>,
}

impl Rules<'_> {
    /// Whether the walk keeps an entry below its root (and, for a directory, descends into it).
    /// The order is ripgrep's: the `glob` filter first (it overrides the ignore files and the
    /// hidden rule), then the ignore files, then hidden names; the built-in directories and the
    /// operator's list apply whatever the filter says.
    fn keep(&self, level: &Level, path: &Path, name: &OsStr, is_dir: bool) -> bool {
        self.filters.everything || self.skipped(level, path, name, is_dir).is_none()
    }

    /// Why the walk skips an entry below its root, or `None` when it keeps it.
    fn skipped(&self, level: &Level, path: &Path, name: &OsStr, is_dir: bool) -> Option<String> {
        if is_dir && is_builtin_ignored(name) {
            return Some(format!("it is under {}/, a directory glob and grep always skip", name.to_string_lossy()));
        }
        if let Some(list) = &self.filters.operator
            && path.starts_with(list.matcher.path())
            && let Match::Ignore(g) = list.matcher.matched(path, is_dir)
        {
            return Some(format!("workspace.ignore in {} has `{}`", list.whose(g.original()), g.original()));
        }
        if let Some(ov) = &self.filters.overrides {
            match ov.matched(path, is_dir) {
                Match::Ignore(_) => return Some("grep's `glob` filter excludes it".to_string()),
                Match::Whitelist(_) => return None,
                Match::None => {}
            }
        }
        match ignored(level, self.global.as_ref(), path, is_dir) {
            Match::Ignore(g) => {
                let file = g.from().map_or_else(|| "the global gitignore".to_string(), |f| f.display().to_string());
                Some(format!("{file} has `{}`", g.original()))
            }
            Match::Whitelist(_) => None,
            Match::None if !self.filters.include_hidden && name.as_bytes().starts_with(b".") => {
                Some("its name starts with `.` (hidden), and the pattern does not name hidden files".to_string())
            }
            Match::None => None,
        }
    }
}

/// What the ignore files say of `path`: the nearest `.ignore` rule first, then the nearest
/// `.gitignore`, then `.git/info/exclude`, then the user's global gitignore. Gitignore rules
/// stop at a repository's top directory.
fn ignored<'a>(level: &'a Level, global: Option<&'a Gitignore>, path: &Path, is_dir: bool) -> Match<&'a Glob> {
    let (mut dot, mut git, mut exclude) = (Match::None, Match::None, Match::None);
    let mut saw_git = false;
    let mut cur = Some(level);
    while let Some(l) = cur {
        let m = |g: &'a Option<Gitignore>| g.as_ref().map_or(Match::None, |g| g.matched(path, is_dir));
        if dot.is_none() {
            dot = m(&l.dot_ignore);
        }
        if !saw_git && git.is_none() {
            git = m(&l.gitignore);
        }
        if !saw_git && exclude.is_none() {
            exclude = m(&l.exclude);
        }
        saw_git |= l.has_git;
        cur = l.parent.as_deref();
    }
    for m in [dot, git, exclude] {
        if !m.is_none() {
            return m;
        }
    }
    global.map_or(Match::None, |g| g.matched(path, is_dir))
}

/// A directory waiting to be read.
struct Job {
    dir: Arc<DirHandle>,
    /// The ignore rules of the directories above; the directory's own are read when it is.
    parent: Arc<Level>,
}

struct Queue {
    state: Mutex<QueueState>,
    ready: Condvar,
}

struct QueueState {
    jobs: Vec<Job>,
    /// Directories being read right now: the walk is over when none are and none wait.
    active: usize,
    quit: bool,
}

/// Walk the directory `root` (a resolved, real directory) in parallel, from the workspace's
/// handles: every directory is opened from its parent's handle without following a symlink, so
/// whatever the guest renames or swaps meanwhile, the walk never leaves the workspace. Returns
/// each thread's visitor once the walk is over.
pub(crate) fn run<V, F>(ws: &Workspace, root: &Path, filters: &Filters, make: F) -> Result<Vec<V>, FsError>
where
    V: FileVisitor,
    F: Fn() -> V + Sync,
{
    let top = Arc::new(ws.open_dir(root)?);
    let parent = Arc::new(ancestors_level(ws, root));
    let (global, _) = Gitignore::global();
    let rules = Rules { filters, global: (!global.is_empty()).then_some(global) };
    let queue = Queue {
        state: Mutex::new(QueueState { jobs: vec![Job { dir: top, parent }], active: 0, quit: false }),
        ready: Condvar::new(),
    };
    let visitors = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads())
            .map(|_| {
                s.spawn(|| {
                    let mut v = make();
                    work(&queue, &rules, &mut v);
                    v
                })
            })
            .collect();
        workers.into_iter().filter_map(|w| w.join().ok()).collect()
    });
    Ok(visitors)
}

/// The ignore files of the directories between the workspace root and `root` (exclusive), as
/// one chain of levels: the walk's rules include those of the directories above it, but never
/// of directories outside the workspace.
fn ancestors_level(ws: &Workspace, root: &Path) -> Level {
    let mut chain: Option<Arc<Level>> = None;
    let top = ws.roots().filter(|r| root.starts_with(r)).max_by_key(|r| r.components().count());
    if let Some(top) = top {
        let mut at = top.to_path_buf();
        let below: Vec<_> = root.strip_prefix(top).map(|r| r.components().collect()).unwrap_or_default();
        for c in below {
            if let Ok(dir) = ws.open_dir(&at) {
                chain = Some(Arc::new(Level::read(&dir, chain)));
            }
            at.push(c);
        }
    }
    Level { parent: chain, dot_ignore: None, gitignore: None, exclude: None, has_git: false }
}

/// Why a walk of `root` with `filters` does not reach `path` (a file below `root`), found by
/// applying the rules to each directory on the way and to the file: `None` when it would.
pub(crate) fn why_skipped(ws: &Workspace, root: &Path, filters: &Filters, path: &Path) -> Option<String> {
    let (global, _) = Gitignore::global();
    let rules = Rules { filters, global: (!global.is_empty()).then_some(global) };
    let top = ws.open_dir(root).ok()?;
    let mut level = Arc::new(Level::read(&top, Some(Arc::new(ancestors_level(ws, root)))));
    let mut dir = top;
    let mut at = root.to_path_buf();
    let below: Vec<_> = path.strip_prefix(root).ok()?.components().collect();
    for (i, c) in below.iter().enumerate() {
        let name = c.as_os_str();
        at.push(name);
        let is_dir = i + 1 < below.len();
        if let Some(why) = rules.skipped(&level, &at, name, is_dir) {
            return Some(why);
        }
        if is_dir {
            dir = dir.child_dir(name).ok()?;
            level = Arc::new(Level::read(&dir, Some(level)));
        }
    }
    None
}

fn work<V: FileVisitor>(queue: &Queue, rules: &Rules<'_>, v: &mut V) {
    loop {
        let job = {
            let mut st = queue.state.lock().unwrap_or_else(PoisonError::into_inner);
            loop {
                if st.quit {
                    return;
                }
                if let Some(j) = st.jobs.pop() {
                    st.active += 1;
                    break j;
                }
                if st.active == 0 {
                    queue.ready.notify_all();
                    return;
                }
                st = queue.ready.wait(st).unwrap_or_else(PoisonError::into_inner);
            }
        };
        let (children, flow) = read_dir(&job, rules, v);
        let mut st = queue.state.lock().unwrap_or_else(PoisonError::into_inner);
        st.active -= 1;
        if flow == Flow::Quit {
            st.quit = true;
        }
        let pushed = !children.is_empty();
        st.jobs.extend(children);
        if pushed || st.quit || st.active == 0 {
            queue.ready.notify_all();
        }
    }
}

/// Read one directory: hand its files to the visitor, return its subdirectories to walk.
fn read_dir<V: FileVisitor>(job: &Job, rules: &Rules<'_>, v: &mut V) -> (Vec<Job>, Flow) {
    let base = job.dir.path();
    let entries = match job.dir.entries() {
        Ok(e) => e,
        Err(e) => {
            v.error(format!("{}: {e}", base.display()));
            return (Vec::new(), Flow::Continue);
        }
    };
    // The whole listing first: it tells which ignore files this directory has.
    let mut listed = Vec::new();
    let mut present = Present::default();
    for entry in entries {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                v.error(format!("{}: {}", base.display(), std::io::Error::from(e)));
                break;
            }
        };
        let name = OsStr::from_bytes(entry.file_name().to_bytes());
        match name.as_bytes() {
            b"." | b".." => continue,
            b".ignore" => present.dot_ignore = true,
            b".gitignore" => present.gitignore = true,
            b".git" => present.git = true,
            _ => {}
        }
        let mut kind = Kind::from(entry.file_type());
        if kind == Kind::Unknown {
            // Some filesystems do not fill in the type: ask.
            kind = job.dir.lstat(name).ok().flatten().map_or(Kind::Unknown, |m| m.kind);
        }
        if matches!(kind, Kind::File | Kind::Dir) {
            listed.push((name.to_os_string(), kind == Kind::Dir));
        }
    }
    let level = Arc::new(Level::read_present(&job.dir, Some(Arc::clone(&job.parent)), present));
    let mut children = Vec::new();
    for (name, is_dir) in listed {
        let path = base.join(&name);
        if !rules.keep(&level, &path, &name, is_dir) {
            continue;
        }
        if is_dir {
            match job.dir.child_dir(&name) {
                Ok(d) => children.push(Job { dir: Arc::new(d), parent: Arc::clone(&level) }),
                // Swapped for a symlink or removed since it was listed: not followed.
                Err(FsError::Changed { .. } | FsError::Missing { .. } | FsError::NotADirectory { .. }) => {}
                Err(e) => v.error(e.to_string()),
            }
        } else if v.file(Entry { path, dir: Arc::clone(&job.dir), name }) == Flow::Quit {
            return (children, Flow::Quit);
        }
    }
    (children, Flow::Continue)
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
pub(crate) fn skipped_summary(filters: &Filters) -> String {
    let mut parts = Vec::new();
    if !filters.include_hidden {
        parts.push("hidden files".to_string());
    }
    parts.push("paths matched by .gitignore/.ignore".to_string());
    let (last, rest) = BUILTIN_IGNORED.split_last().unwrap_or((&"", &[]));
    parts.push(format!("the {} and {last} directories", rest.join(", ")));
    if let Some(list) = &filters.operator {
        parts.push(list.describe());
    }
    parts.join(", ")
}

/// Resolve the optional `path` argument (default: the workspace root) to a path that exists,
/// and say what it is (from its directory's handle: a symlink is not followed). A missing path
/// is the "did you mean" error.
pub(crate) fn resolve_existing(ctx: &ToolContext<'_>, raw: Option<&str>) -> Result<(Resolved, Kind), ToolError> {
    let resolved = match raw {
        Some(raw) => ctx.workspace.resolve("path", raw).map_err(|e| bounded(e.into()))?,
        None => Resolved { shown: ctx.workspace.root().to_path_buf(), real: ctx.workspace.root().to_path_buf() },
    };
    let kind = match ctx.workspace.open_parent(&resolved.real) {
        Ok((dir, name)) => dir.lstat(&name).map_err(|e| io_error("search", &resolved.shown, &e))?.map(|m| m.kind),
        Err(FsError::NotRegular { kind: Kind::Dir, .. }) => Some(Kind::Dir),
        Err(FsError::Missing { .. }) => None,
        Err(e) => return Err(bounded(super::fsutil::fs_error("search", &resolved.shown, &resolved.real, e))),
    };
    match kind {
        Some(Kind::Symlink) => {
            let at = resolved.real.clone();
            Err(bounded(super::fsutil::fs_error("search", &resolved.shown, &resolved.real, FsError::Changed { at })))
        }
        Some(k) => Ok((resolved, k)),
        None => Err(bounded(not_found(ctx, &resolved.shown))),
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
    fn ignore_patterns_say_whose_they_are() {
        let list = IgnoreList {
            matcher: Gitignore::empty(),
            repository: vec!["*.tmp".into()],
            all: vec!["*.log".into(), "*.tmp".into()],
        };
        assert_eq!(list.whose("*.tmp"), "the repository's abhed.toml");
        assert_eq!(list.whose("*.log"), "the user config");
        assert_eq!(
            list.describe(),
            "the workspace.ignore patterns (the user config's: *.log; the repository abhed.toml's: *.tmp)"
        );
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
