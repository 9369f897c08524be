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

    // The same walk finds what the pattern at any depth adds (`**/Makefile` for `Makefile`),
    // for the note after a one-level result or the hint after none.
    let recursive = recursive_variant(&split);
    let deeper_matcher = recursive.as_deref().and_then(|r| compile(&split_pattern(r).rest).ok());
    let found = search(ctx.workspace, &root_real, &matcher, deeper_matcher.as_ref(), &filters)
        .map_err(|e| walk::bounded(fsutil::fs_error("search", &root_shown, &root_real, e)))?;
    let mut errors = WalkErrors::default();
    let mut files: Vec<(i64, PathBuf)> = Vec::new();
    let mut deeper: Vec<(i64, PathBuf)> = Vec::new();
    for v in found {
        files.extend(v.found);
        deeper.extend(v.deeper);
        errors.merge(v.errors);
    }
    files.sort_unstable_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    deeper.sort_unstable_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let deeper = recursive.as_deref().filter(|_| !deeper.is_empty()).map(|r| Deeper {
        pattern: r,
        listing: listing(&deeper, r, &root_shown, &root_real),
        count: deeper.len(),
    });

    let total = files.len();
    let mut out = ToolOutput::new(String::new());
    if total == 0 {
        out.fell_short = true;
        text.push_str(&format!("[no files matched: {shown_pattern}]\n"));
        text.push_str(&no_match_hint(ctx, pattern, &split, &root_shown, &root_real, &filters, deeper.as_ref()));
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
        } else if let Some(d) = &deeper {
            let (files, match_) = if d.count == 1 { ("file", "matches") } else { ("files", "match") };
            text.push_str(&format!(
                "[{} more {files} in subdirectories {match_} {} (`*` and a bare name match one directory level only):]\n{}",
                d.count,
                walk::clip(d.pattern),
                d.listing
            ));
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
    /// The pattern at any depth, when it differs from `matcher`.
    deeper_matcher: Option<&'a GlobSet>,
    /// (mtime in ns, path)
    found: Vec<(i64, PathBuf)>,
    /// Files `deeper_matcher` matches and `matcher` does not.
    deeper: Vec<(i64, PathBuf)>,
    errors: WalkErrors,
}

impl FileVisitor for GlobVisitor<'_> {
    fn file(&mut self, entry: Entry) -> Flow {
        let Ok(rel) = entry.path.strip_prefix(self.root) else { return Flow::Continue };
        let into = if self.matcher.is_match(rel) {
            &mut self.found
        } else if self.deeper_matcher.is_some_and(|m| m.is_match(rel)) {
            &mut self.deeper
        } else {
            return Flow::Continue;
        };
        let time = entry.meta().map_or(0, |m| m.mtime_ns);
        into.push((time, entry.into_path()));
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
    deeper_matcher: Option<&'a GlobSet>,
    filters: &Filters,
) -> Result<Vec<GlobVisitor<'a>>, FsError> {
    walk::run(ws, root, filters, || GlobVisitor {
        root,
        matcher,
        deeper_matcher,
        found: Vec::new(),
        deeper: Vec::new(),
        errors: WalkErrors::default(),
    })
}

/// The most files a note lists that `*` kept out of a one-level result; the rest are counted.
const MAX_DEEPER: usize = 20;

/// What the pattern at any depth below the same base matches beyond the pattern itself: shown
/// in the note after a one-level result, and in the hint after none. Qwen2.5-Coder-1.5B globbed
/// `Makefile` for "every file named Makefile anywhere", saw the top-level one and answered with
/// it alone; told only how many more there were, it gave up rather than glob again. So the
/// files are listed; the result itself stays what the pattern matched.
struct Deeper<'a> {
    /// The `**` pattern, as the model would write it.
    pattern: &'a str,
    count: usize,
    /// One path per line, at most [`MAX_DEEPER`], then how many more; ends with a newline.
    listing: String,
}

/// The pattern at any depth below the same base (`**/NAME` for `NAME` or `*.rs`, keeping a
/// literal leading directory), when the pattern does not cross directories already.
fn recursive_variant(split: &Split) -> Option<String> {
    (!split.rest.contains("**"))
        .then(|| format!("{}**/{}", split.prefix.as_deref().unwrap_or(""), last_component(&split.rest)))
}

/// `files` (sorted) as lines of a note: at most [`MAX_DEEPER`], then how many more.
fn listing(files: &[(i64, PathBuf)], pattern: &str, root_shown: &Path, root_real: &Path) -> String {
    let mut out = String::new();
    for (_, p) in files.iter().take(MAX_DEEPER) {
        out.push_str(&super::path_line(&walk::shown_path(root_shown, root_real, p)));
        out.push('\n');
    }
    if files.len() > MAX_DEEPER {
        out.push_str(&format!(
            "[and {} more: glob {} lists them all]\n",
            files.len() - MAX_DEEPER,
            walk::clip(pattern)
        ));
    }
    out
}

/// The second line of an empty result: where we looked, what was skipped, and a likely fix.
fn no_match_hint(
    ctx: &ToolContext<'_>,
    pattern: &str,
    split: &Split,
    root_shown: &Path,
    root_real: &Path,
    filters: &Filters,
    deeper: Option<&Deeper<'_>>,
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
    let files = |n: usize| if n == 1 { "file" } else { "files" };
    // The usual fix for a `*` that was meant to cross directories: the search's own walk found
    // what the same name at any depth matches.
    if let Some(d) = deeper {
        hint.push_str(&format!(
            " `*` does not cross directories; {} matches {} {}:\n{}",
            walk::clip(d.pattern),
            d.count,
            files(d.count),
            d.listing.trim_end()
        ));
        return hint;
    }
    let recursive_text = recursive_variant(split).map(|r| walk::clip(&r).into_owned());
    // Glob being case-sensitive, the pattern and its any-depth variant ignoring case, counted in
    // one more walk.
    let below = (!split.rest.contains("**")).then(|| format!("**/{}", last_component(&split.rest)));
    let has_case = split.rest.chars().any(|c| c.to_lowercase().ne(c.to_uppercase()));
    let mut globs = Vec::new();
    let mut slot = |glob: &str, ignore_case: bool| {
        globs.push(build_glob(glob, ignore_case).ok()?);
        Some(globs.len() - 1)
    };
    let same_caseless = if has_case { slot(&split.rest, true) } else { None };
    let recursive_caseless = if has_case { below.as_deref().and_then(|b| slot(b, true)) } else { None };
    let set = (!globs.is_empty()).then(|| {
        let mut set = GlobSetBuilder::new();
        for g in globs.iter().cloned() {
            set.add(g);
        }
        set.build().ok()
    });
    let set = set.flatten();
    let tally = set.as_ref().and_then(|set| count_matches(ctx.workspace, root_real, set, globs.len(), filters).ok());
    let hits = |slot: Option<usize>| slot.zip(tally.as_ref()).map_or(0, |(i, t)| t.counts[i]);
    let example = |slot: Option<usize>| {
        let first = slot.zip(tally.as_ref()).and_then(|(i, t)| t.first[i].as_deref());
        first.map_or(String::new(), |p| walk::clip_path(root_shown, &walk::shown_path(root_shown, root_real, p)))
    };

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
