//! glob: find files by name pattern, newest first.
//!
//! The pattern is matched with globset (`*` never crosses `/`) against each file's path
//! relative to the directory searched, so `*.rs` is the top level and `**/*.rs` the whole tree.
//! A literal leading directory part of the pattern (`src/` in `src/**/*.rs`, or the whole
//! directory part of an absolute pattern) becomes the directory walked. The walk is
//! shared with grep ([`super::walk`]).

use std::path::{Path, PathBuf};

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use serde::Deserialize;
use serde_json::{Value, json};

use super::walk::{self, Entry, FileVisitor, Filters, Flow, WalkErrors};
use super::{ErrorCode, Tool, ToolContext, ToolError, ToolOutput, ToolResult, fsutil, parse_args};
use crate::sandbox::confined::{FsError, Kind};
use crate::sandbox::{PathError, Workspace};

/// The most paths one call returns.
pub const MAX_RESULTS: usize = 1000;

pub struct Glob;

#[derive(Debug, Deserialize)]
struct Args {
    pattern: String,
    path: Option<String>,
}

impl Tool for Glob {
    fn name(&self) -> &'static str {
        "glob"
    }

    fn description(&self) -> &'static str {
        "Find files matching a glob pattern. Returns absolute paths, one per line, sorted by modification time, \
         newest first (at most 1000). `*` matches within one directory and `**` across directories: *.rs is the \
         top level only, **/*.rs the whole tree, src/**/*.test.js everything under src. Respects .gitignore and \
         the operator's ignore list; skips hidden files (unless the pattern names one, e.g. .github/**) and the \
         node_modules, .git, target, dist and __pycache__ directories (unless the path or the pattern's leading \
         directories name them). Returns files only, never directories."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "Glob, e.g. **/*.ts or src/**/*.test.js"},
                "path": {"type": "string", "description": "Directory to search from (absolute path). Defaults to workspace root."}
            },
            "required": ["pattern"]
        })
    }

    fn mutates(&self) -> bool {
        false
    }

    fn run(&self, ctx: &ToolContext<'_>, args: Value) -> ToolResult {
        let args: Args = parse_args("glob", args)?;
        Ok(glob(ctx, &args)?)
    }
}

fn glob(ctx: &ToolContext<'_>, args: &Args) -> Result<ToolOutput, ToolError> {
    let pattern = args.pattern.as_str();
    if pattern.trim().is_empty() {
        return Err(ToolError::new(
            ErrorCode::EmptyPattern,
            "`pattern` is empty. Give a glob, e.g. {\"pattern\": \"**/*.rs\"} for every Rust file or \
             {\"pattern\": \"src/**/*.ts\"} for the TypeScript files under src; \"**/*\" lists every file.",
        ));
    }
    // Check the whole pattern first, so that an error quotes what the model wrote.
    compile(pattern)?;

    let (base, kind) = walk::resolve_existing(ctx, args.path.as_deref())?;
    if kind != Kind::Dir {
        let parent = base.shown.parent().unwrap_or(Path::new("/"));
        return Err(ToolError::new(
            ErrorCode::NotADirectory,
            format!(
                "{} is a file, not a directory: glob searches the files under a directory. Give a directory as \
                 `path` (this file's directory is {}); to check that a file exists, use read.",
                base.shown.display(),
                parent.display()
            ),
        ));
    }

    let split = split_pattern(pattern);
    let (root_shown, root_real) = match &split.prefix {
        None => (base.shown.clone(), base.real.clone()),
        Some(prefix) => {
            let joined = if prefix.starts_with('/') { PathBuf::from(prefix) } else { base.shown.join(prefix) };
            // The prefix keeps its `/`; the directory is named without it.
            let joined = joined.display().to_string();
            match ctx.workspace.resolve("pattern", joined.trim_end_matches('/')) {
                Ok(r) => (r.shown, r.real),
                // A path no file can have (too long, say): nothing matches it.
                Err(PathError::Invalid { .. }) => {
                    let p = crate::sandbox::normalize(Path::new(joined.trim_end_matches('/')));
                    (p.clone(), p)
                }
                Err(e) => return Err(walk::bounded(e.into())),
            }
        }
    };
    let matcher = compile(&split.rest)?;
    let filters = Filters {
        include_hidden: names_hidden(pattern),
        operator: walk::operator_ignore(ctx)?,
        overrides: None,
        everything: false,
    };

    let mut text = String::new();
    let shown_pattern = walk::clip(pattern);
    let missing = match ctx.workspace.open_dir(&root_real) {
        Ok(_) => None,
        Err(FsError::Missing { .. }) => Some("does not exist"),
        Err(FsError::NotADirectory { .. }) => Some("is not a directory"),
        // ENAMETOOLONG: a name no file can have.
        Err(FsError::Io { err, .. }) if err.raw_os_error() == Some(36) => Some("does not exist"),
        Err(e) => return Err(walk::bounded(fsutil::fs_error("search", &root_shown, &root_real, e))),
    };
    if let Some(what) = missing {
        text.push_str(&format!("[no files matched: {shown_pattern}]\n"));
        text.push_str(&format!(
            "The pattern's leading directories name {}, which {what}. Use glob with a broader pattern, e.g. \
             {{\"pattern\": \"{}\"}}, to find where such files are.",
            walk::clip_path(&base.shown, &root_shown),
            walk::clip(&format!("**/{}", last_component(pattern)))
        ));
        return Ok(ToolOutput { fell_short: true, ..ToolOutput::new(text) });
    }

    let found = search(ctx.workspace, &root_real, &matcher, &filters)
        .map_err(|e| walk::bounded(fsutil::fs_error("search", &root_shown, &root_real, e)))?;
    let mut errors = WalkErrors::default();
    let mut files: Vec<(i64, PathBuf)> = Vec::new();
    for v in found {
        files.extend(v.found);
        errors.merge(v.errors);
    }
    files.sort_unstable_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));

    let total = files.len();
    let mut out = ToolOutput::new(String::new());
    if total == 0 {
        out.fell_short = true;
        text.push_str(&format!("[no files matched: {shown_pattern}]\n"));
        text.push_str(&no_match_hint(ctx, pattern, &split, &root_shown, &root_real, &filters));
    } else {
        for (_, p) in files.iter().take(MAX_RESULTS) {
            let shown = walk::shown_path(&root_shown, &root_real, p);
            text.push_str(&super::path_line(&shown));
            text.push('\n');
        }
        if total > MAX_RESULTS {
            out.truncated = true;
            text.push_str(&format!(
                "[truncated: showing {MAX_RESULTS} of {total} matches, newest first. Narrow the pattern or search a subdirectory with path.]\n"
            ));
        } else if let Some(note) = deeper_note(ctx, &split, &files, &root_shown, &root_real, &filters) {
            text.push_str(&note);
        }
    }
    if let Some(note) = errors.note(&root_shown, &root_real) {
        if !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&note);
    }
    ctx.fit_window(&mut text, &mut out.truncated, "Narrow the pattern or search a subdirectory with path.");
    out.text = text.trim_end_matches('\n').to_string();
    Ok(out)
}

/// Compile a glob the way matching uses it, or the `invalid_glob` error quoting `pattern`.
fn compile(pattern: &str) -> Result<GlobSet, ToolError> {
    let invalid = |reason: String| {
        ToolError::new(
            ErrorCode::InvalidGlob,
            format!(
                "invalid glob `{}`: {}. Glob syntax: `*` matches within one directory, `**` any number \
                 of directories, `?` one character, `[abc]` one character of a set, `{{a,b}}` either alternative; \
                 put a literal metacharacter in brackets, e.g. `[[]` or `[*]`. Example: {{\"pattern\": \"src/**/*.rs\"}}.",
                walk::clip(pattern),
                walk::clip(&reason)
            ),
        )
    };
    let glob = build_glob(pattern, false).map_err(|e| invalid(e.kind().to_string()))?;
    let mut set = GlobSetBuilder::new();
    set.add(glob);
    set.build().map_err(|e| invalid(e.kind().to_string()))
}

/// One glob as matching uses it (`*` never crosses `/`), optionally ignoring case.
fn build_glob(pattern: &str, ignore_case: bool) -> Result<globset::Glob, globset::Error> {
    GlobBuilder::new(pattern).literal_separator(true).case_insensitive(ignore_case).build()
}

/// A pattern cut at its literal leading directories.
#[derive(Debug, PartialEq, Eq)]
struct Split {
    /// The literal directory part, with its trailing `/` (`src/`, `/ws/src/`), if any.
    prefix: Option<String>,
    /// What is matched below it.
    rest: String,
}

const META: &[char] = &['*', '?', '[', ']', '{', '}', '\\'];

fn split_pattern(pattern: &str) -> Split {
    let first_meta = pattern.find(META).unwrap_or(pattern.len());
    match pattern[..first_meta].rfind('/') {
        Some(i) => Split { prefix: Some(pattern[..=i].to_string()), rest: pattern[i + 1..].to_string() },
        None => Split { prefix: None, rest: pattern.to_string() },
    }
}

/// Whether the pattern names a hidden file or directory (a component starting with `.`), in
/// which case hidden entries are walked.
fn names_hidden(pattern: &str) -> bool {
    pattern.split('/').any(|c| c.starts_with('.') && c != "." && c != "..")
}

fn last_component(pattern: &str) -> &str {
    pattern.rsplit('/').find(|c| !c.is_empty()).unwrap_or("*")
}

struct GlobVisitor<'a> {
    root: &'a Path,
    matcher: &'a GlobSet,
    /// (mtime in ns, path)
    found: Vec<(i64, PathBuf)>,
    errors: WalkErrors,
}

impl FileVisitor for GlobVisitor<'_> {
    fn file(&mut self, entry: Entry) -> Flow {
        let Ok(rel) = entry.path.strip_prefix(self.root) else { return Flow::Continue };
        if self.matcher.is_match(rel) {
            let time = entry.meta().map_or(0, |m| m.mtime_ns);
            self.found.push((time, entry.into_path()));
        }
        Flow::Continue
    }

    fn error(&mut self, what: String) {
        self.errors.push(what);
    }
}

fn search<'a>(
    ws: &Workspace,
    root: &'a Path,
    matcher: &'a GlobSet,
    filters: &Filters,
) -> Result<Vec<GlobVisitor<'a>>, FsError> {
    walk::run(ws, root, filters, || GlobVisitor { root, matcher, found: Vec::new(), errors: WalkErrors::default() })
}

/// The most files a note lists that `*` kept out of a one-level result; the rest are counted.
const MAX_DEEPER: usize = 20;

/// A note after a result that `*` kept to one directory level, when the same name matches more
/// files deeper down, and those files: Qwen2.5-Coder-1.5B globbed `Makefile` for "every file
/// named Makefile anywhere", saw the top-level one and answered with it alone; told only how
/// many more there were, it gave up rather than glob again. The result itself stays what the
/// pattern matches; the note is labelled as the other pattern's.
fn deeper_note(
    ctx: &ToolContext<'_>,
    split: &Split,
    found: &[(i64, PathBuf)],
    root_shown: &Path,
    root_real: &Path,
    filters: &Filters,
) -> Option<String> {
    let below = recursive_variant(split)?;
    let have: std::collections::HashSet<&Path> = found.iter().map(|(_, p)| p.as_path()).collect();
    let deeper = list_matches(ctx, &below, root_shown, root_real, filters, &have)?;
    let (files, match_) = if deeper.count == 1 { ("file", "matches") } else { ("files", "match") };
    Some(format!(
        "[{} more {files} in subdirectories {match_} {} (`*` and a bare name match one directory level only):]\n{}",
        deeper.count,
        walk::clip(&below),
        deeper.listing
    ))
}

/// The pattern at any depth below the same base (`**/NAME` for `NAME` or `*.rs`, keeping a
/// literal leading directory), when the pattern does not cross directories already.
fn recursive_variant(split: &Split) -> Option<String> {
    (!split.rest.contains("**"))
        .then(|| format!("{}**/{}", split.prefix.as_deref().unwrap_or(""), last_component(&split.rest)))
}

/// Files another glob matches, newest first, as lines of a note.
struct Listed {
    count: usize,
    /// One path per line, at most [`MAX_DEEPER`], then how many more; ends with a newline.
    listing: String,
}

/// The files `pattern` (a variant of what the model asked for) matches under the searched
/// directory, less those in `exclude`; None when there are none, or the search fails (a note
/// is not worth an error).
fn list_matches(
    ctx: &ToolContext<'_>,
    pattern: &str,
    root_shown: &Path,
    root_real: &Path,
    filters: &Filters,
    exclude: &std::collections::HashSet<&Path>,
) -> Option<Listed> {
    let rest = split_pattern(pattern).rest;
    let matcher = compile(&rest).ok()?;
    let mut files: Vec<(i64, PathBuf)> = search(ctx.workspace, root_real, &matcher, filters)
        .ok()?
        .into_iter()
        .flat_map(|v| v.found)
        .filter(|(_, p)| !exclude.contains(p.as_path()))
        .collect();
    if files.is_empty() {
        return None;
    }
    files.sort_unstable_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let mut listing = String::new();
    for (_, p) in files.iter().take(MAX_DEEPER) {
        listing.push_str(&super::path_line(&walk::shown_path(root_shown, root_real, p)));
        listing.push('\n');
    }
    if files.len() > MAX_DEEPER {
        listing.push_str(&format!(
            "[and {} more: glob {} lists them all]\n",
            files.len() - MAX_DEEPER,
            walk::clip(pattern)
        ));
    }
    Some(Listed { count: files.len(), listing })
}

/// The second line of an empty result: where we looked, what was skipped, and a likely fix.
fn no_match_hint(
    ctx: &ToolContext<'_>,
    pattern: &str,
    split: &Split,
    root_shown: &Path,
    root_real: &Path,
    filters: &Filters,
) -> String {
    let mut hint = format!(
        "Searched {} (skipping {}).",
        walk::clip_path(ctx.workspace.root(), root_shown),
        walk::skipped_summary(filters)
    );
    if pattern.ends_with('/') {
        hint.push_str(&format!(
            " glob returns files, never directories: use {} for the files under it.",
            walk::clip(&format!("{pattern}**"))
        ));
        return hint;
    }
    // Files the pattern does match, hidden by the filters: say so, and which rule hid one.
    if let Ok(set) = compile(&split.rest)
        && let Ok(all) = count_matches(ctx.workspace, root_real, &set, 1, &Filters::everything())
        && let Some(first) = &all.first[0]
    {
        let n = all.counts[0];
        let why = walk::why_skipped(ctx.workspace, root_real, filters, first).unwrap_or_else(|| "it is skipped".into());
        let (files, they) = if n == 1 { ("file matches", "It is") } else { ("files match", "They are") };
        hint.push_str(&format!(
            " {n} {files} but {} skipped, e.g. {}: {why}. {they} there: read one by its path, or list them with bash (`ls -la`).",
            if n == 1 { "is" } else { "are" },
            walk::clip_path(root_shown, &walk::shown_path(root_shown, root_real, first)),
        ));
        return hint;
    }
    // The likely fixes, counted in one more walk: the same name at any depth below the same
    // base (the usual fix for a `*` that was meant to cross directories) and, glob being
    // case-sensitive, the pattern and that variant ignoring case.
    let below = (!split.rest.contains("**")).then(|| format!("**/{}", last_component(&split.rest)));
    let has_case = split.rest.chars().any(|c| c.to_lowercase().ne(c.to_uppercase()));
    let mut globs = Vec::new();
    let mut slot = |glob: &str, ignore_case: bool| {
        globs.push(build_glob(glob, ignore_case).ok()?);
        Some(globs.len() - 1)
    };
    let recursive = below.as_deref().and_then(|b| slot(b, false));
    let same_caseless = if has_case { slot(&split.rest, true) } else { None };
    let recursive_caseless = if has_case { below.as_deref().and_then(|b| slot(b, true)) } else { None };
    if globs.is_empty() {
        return hint;
    }
    let mut set = GlobSetBuilder::new();
    for g in globs.iter().cloned() {
        set.add(g);
    }
    let Ok(set) = set.build() else { return hint };
    let Ok(tally) = count_matches(ctx.workspace, root_real, &set, globs.len(), filters) else { return hint };
    let hits = |slot: Option<usize>| slot.map_or(0, |i| tally.counts[i]);
    let example = |slot: Option<usize>| {
        let first = slot.and_then(|i| tally.first[i].as_deref());
        first.map_or(String::new(), |p| walk::clip_path(root_shown, &walk::shown_path(root_shown, root_real, p)))
    };
    let files = |n: usize| if n == 1 { "file" } else { "files" };
    let recursive_text = recursive_variant(split).map(|r| walk::clip(&r).into_owned());

    if let Some(rec) = &recursive_text {
        let n = hits(recursive);
        if n > 0 {
            // The files themselves, not only how many: a small model told the count gave up.
            hint.push_str(&format!(" `*` does not cross directories; {rec} matches {n} {}", files(n)));
            let none = std::collections::HashSet::new();
            match recursive_variant(split).and_then(|p| list_matches(ctx, &p, root_shown, root_real, filters, &none)) {
                Some(listed) => {
                    hint.push_str(":\n");
                    hint.push_str(listed.listing.trim_end());
                }
                None => hint.push('.'),
            }
            return hint;
        }
    }
    let n = hits(same_caseless);
    if n > 0 {
        hint.push_str(&format!(
            " Glob matching is case-sensitive: ignoring case, {} would match {n} {}, e.g. {}.",
            walk::clip(pattern),
            files(n),
            example(same_caseless)
        ));
        return hint;
    }
    if let Some(rec) = &recursive_text {
        let n = hits(recursive_caseless);
        if n > 0 {
            hint.push_str(&format!(
                " {rec} matches nothing either; glob matching is case-sensitive, and ignoring case {rec} would \
                 match {n} {}, e.g. {}.",
                files(n),
                example(recursive_caseless)
            ));
        } else {
            hint.push_str(&format!(" {rec} matches nothing either."));
        }
    }
    hint
}

/// Per glob of a set: how many files it matches, and the first of them by path.
struct Tally<'a> {
    root: &'a Path,
    set: &'a GlobSet,
    counts: Vec<usize>,
    first: Vec<Option<PathBuf>>,
    hits: Vec<usize>,
    seen: usize,
}

/// Files one tally looks at, at most: the walk that skips nothing also goes through
/// `target/` and `node_modules/`, and a hint must not cost more than the search.
const MAX_TALLY_FILES: usize = 200_000;

impl FileVisitor for Tally<'_> {
    fn file(&mut self, entry: Entry) -> Flow {
        self.seen += 1;
        if self.seen > MAX_TALLY_FILES / walk::threads() {
            return Flow::Quit;
        }
        let Ok(rel) = entry.path.strip_prefix(self.root) else { return Flow::Continue };
        self.set.matches_into(rel, &mut self.hits);
        for &i in &self.hits {
            self.counts[i] += 1;
            if self.first[i].as_deref().is_none_or(|p| entry.path.as_path() < p) {
                self.first[i] = Some(entry.path.clone());
            }
        }
        Flow::Continue
    }

    fn error(&mut self, _: String) {}
}

fn count_matches<'a>(
    ws: &Workspace,
    root: &'a Path,
    set: &'a GlobSet,
    globs: usize,
    filters: &Filters,
) -> Result<Tally<'a>, FsError> {
    let new = || Tally { root, set, counts: vec![0; globs], first: vec![None; globs], hits: Vec::new(), seen: 0 };
    let mut total = new();
    for t in walk::run(ws, root, filters, new)? {
        for i in 0..globs {
            total.counts[i] += t.counts[i];
            if let Some(p) = &t.first[i]
                && total.first[i].as_ref().is_none_or(|q| p < q)
            {
                total.first[i] = Some(p.clone());
            }
        }
    }
    Ok(total)
}

/// Directories skipped everywhere, whatever .gitignore says.
pub const BUILTIN_IGNORED: [&str; 5] = ["node_modules", ".git", "target", "dist", "__pycache__"];

pub fn is_builtin_ignored(name: &std::ffi::OsStr) -> bool {
    BUILTIN_IGNORED.iter().any(|d| name == *d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_keeps_literal_leading_directories() {
        assert_eq!(split_pattern("*.rs"), Split { prefix: None, rest: "*.rs".into() });
        assert_eq!(split_pattern("**/*.rs"), Split { prefix: None, rest: "**/*.rs".into() });
        assert_eq!(split_pattern("src/**/*.rs"), Split { prefix: Some("src/".into()), rest: "**/*.rs".into() });
        assert_eq!(split_pattern("src/a/*.rs"), Split { prefix: Some("src/a/".into()), rest: "*.rs".into() });
        assert_eq!(split_pattern("/ws/src/*.rs"), Split { prefix: Some("/ws/src/".into()), rest: "*.rs".into() });
        assert_eq!(split_pattern("/ws/main.rs"), Split { prefix: Some("/ws/".into()), rest: "main.rs".into() });
        assert_eq!(split_pattern("s*c/a/*.rs"), Split { prefix: None, rest: "s*c/a/*.rs".into() });
        assert_eq!(split_pattern("{a,b}/x.rs"), Split { prefix: None, rest: "{a,b}/x.rs".into() });
    }

    #[test]
    fn star_does_not_cross_directories() {
        let m = compile("*.rs").unwrap();
        assert!(m.is_match("main.rs"));
        assert!(!m.is_match("src/main.rs"));
        let r = compile("**/*.rs").unwrap();
        assert!(r.is_match("main.rs"));
        assert!(r.is_match("src/a/main.rs"));
    }

    #[test]
    fn hidden_components_are_detected() {
        assert!(names_hidden(".github/**/*.yml"));
        assert!(names_hidden("**/.env"));
        assert!(!names_hidden("./src/*.rs"));
        assert!(!names_hidden("../x/*.rs"));
        assert!(!names_hidden("**/*.rs"));
    }

    #[test]
    fn invalid_glob_names_the_reason() {
        let e = compile("src/[a.rs").unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidGlob);
        assert!(e.message.contains("unclosed character class"), "{}", e.message);
    }
}
