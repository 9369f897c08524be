//! grep: search file contents with a regular expression, in process, on ripgrep's own crates
//! (`grep-regex` for the matcher, `grep-searcher` for streaming search with binary detection,
//! `ignore` for the walk shared with glob). Never shells out.
//!
//! The syntax is the regex crate's (RE2-style: no look-around, no backreferences, so no
//! pattern can backtrack for ever). Constructs from other dialects are caught before the
//! matcher is built and answered with what to search instead.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, MmapChoice, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};
use ignore::overrides::OverrideBuilder;
use ignore::{DirEntry, WalkState};
use regex_syntax::ast;
use serde::Deserialize;
use serde_json::{Value, json};

use super::walk::{self, FileVisitor, Filters, WalkErrors};
use super::{ErrorCode, Tool, ToolContext, ToolError, ToolOutput, ToolResult, parse_args};

/// files_with_matches and count: the most files listed.
pub const MAX_FILES: usize = 1000;
/// content: the most matching lines shown in all.
pub const MAX_MATCHES: usize = 100;
/// content: the most lines (matches and context) shown for one file.
pub const MAX_FILE_LINES: usize = 50;
/// Output lines are cut at this many characters.
pub const MAX_LINE_CHARS: usize = 500;
/// More context than this could not be shown within the per-file cap anyway.
const MAX_CONTEXT: u64 = 25;
/// The compiled regex may take this much memory; a pattern needing more is refused.
const REGEX_SIZE_LIMIT: usize = 10 * (1 << 20);
/// The searcher's buffer: the longest line, or in multiline mode the largest file, searched.
const HEAP_LIMIT: usize = 64 * (1 << 20);
const NEST_LIMIT: u32 = 250;

pub struct Grep;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Mode {
    Content,
    #[default]
    FilesWithMatches,
    Count,
}

#[derive(Debug, Deserialize)]
struct Args {
    pattern: String,
    path: Option<String>,
    glob: Option<String>,
    output_mode: Option<Mode>,
    context: Option<u64>,
    case_insensitive: Option<bool>,
    multiline: Option<bool>,
}

impl Tool for Grep {
    fn name(&self) -> &'static str {
        "grep"
    }

    fn description(&self) -> &'static str {
        "Search file contents with a regular expression. This is the primary code-navigation tool — prefer it over \
         reading files speculatively. The syntax is RE2-style (Rust regex): no look-around ((?=, (?!, (?<=, (?<!) \
         and no backreferences (\\1); escape metacharacters such as ( [ { . * + ? | with a backslash to match them \
         literally. output_mode: files_with_matches (the default) lists matching files, newest first, at most \
         1000; count lists path:N (matching lines per file), at most 1000 files; content shows path:line:text \
         (context lines as path-line-text), at most 100 matches in all and 50 lines per file. Long lines are cut \
         at 500 characters. Respects .gitignore and the operator's ignore list; skips hidden files, binary files \
         and the node_modules, .git, target, dist and __pycache__ directories (a path you give is searched even \
         so)."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "Regular expression (RE2 syntax)."},
                "path": {"type": "string", "description": "File or directory to search (absolute path). Defaults to workspace root."},
                "glob": {"type": "string", "description": "Filter files by glob, e.g. *.go"},
                "output_mode": {
                    "type": "string",
                    "enum": ["content", "files_with_matches", "count"],
                    "description": "Default files_with_matches."
                },
                "context": {"type": "integer", "minimum": 0, "description": "Lines of context around each match (content mode only)."},
                "case_insensitive": {"type": "boolean"},
                "multiline": {"type": "boolean", "description": "Allow . to match newlines."}
            },
            "required": ["pattern"]
        })
    }

    fn mutates(&self) -> bool {
        false
    }

    fn run(&self, ctx: &ToolContext<'_>, args: Value) -> ToolResult {
        let args: Args = parse_args("grep", args)?;
        Ok(grep(ctx, &args)?)
    }
}

fn grep(ctx: &ToolContext<'_>, args: &Args) -> Result<ToolOutput, ToolError> {
    let pattern = args.pattern.as_str();
    if pattern.is_empty() {
        return Err(ToolError::new(
            ErrorCode::EmptyPattern,
            "`pattern` is empty; an empty regex would match every line. Give the text or regex to find, e.g. \
             {\"pattern\": \"fn main\"}. To list files by name, use glob.",
        ));
    }
    let multiline = args.multiline.unwrap_or(false);
    let case_insensitive = args.case_insensitive.unwrap_or(false);
    check_syntax(pattern, case_insensitive, multiline)?;
    let matcher = build_matcher(pattern, case_insensitive, multiline)?;

    let (target, md) = walk::resolve_existing(ctx, args.path.as_deref())?;
    let mode = args.output_mode.unwrap_or_default();
    let mut notes = Vec::new();
    let mut context = 0;
    match (mode, args.context) {
        (Mode::Content, Some(n)) if n > MAX_CONTEXT => {
            notes.push(format!(
                "[context reduced from {n} to {MAX_CONTEXT} lines: at most {MAX_FILE_LINES} lines are shown per file]"
            ));
            context = MAX_CONTEXT as usize;
        }
        (Mode::Content, Some(n)) => context = n as usize,
        (_, Some(n)) if n > 0 => {
            notes.push("[context ignored: it applies only to output_mode \"content\"]".to_string());
        }
        _ => {}
    }

    let searcher = searcher_builder(mode, context, multiline);
    let operator = walk::operator_ignore(ctx)?;
    let mut filters = Filters { include_hidden: false, operator, overrides: None };
    let mut acc = Accum::new(mode);
    let glob = args.glob.as_deref().filter(|g| !g.is_empty());
    if md.is_file() {
        if glob.is_some() {
            notes.push("[glob ignored: path is a single file, which is always searched]".to_string());
        }
        let mut v = GrepVisitor::new(&searcher, &matcher, mode);
        v.search(target.real.clone());
        acc.merge(v);
    } else if md.is_dir() {
        if let Some(g) = glob {
            filters.overrides = Some(glob_filter(g, &target.shown, &target.real)?);
        }
        let builder = walk::builder(&target.real, &filters);
        for v in walk::run(&builder, || GrepVisitor::new(&searcher, &matcher, mode)) {
            acc.merge(v);
        }
    } else {
        return Err(ToolError::new(
            ErrorCode::Io,
            format!(
                "{} is neither a regular file nor a directory (a FIFO, socket or device); grep searches files. \
                 Give a file or a directory as path.",
                target.shown.display()
            ),
        ));
    }

    let mut out = ToolOutput::new(String::new());
    let mut text = String::new();
    let found = acc.render(&target.shown, &target.real, context > 0, &mut text, &mut out.truncated);
    if !found {
        text.push_str(&format!("[no matches for {pattern}]\n"));
        text.push_str(&no_match_hint(ctx, args, &target.shown, &filters, md.is_file(), &acc));
        text.push('\n');
    } else if acc.binary > 0 {
        let files = if acc.binary == 1 { "file" } else { "files" };
        notes.push(format!("[{} binary {files} skipped]", acc.binary));
    }
    if let Some(note) = acc.errors.note(&target.shown, &target.real) {
        notes.push(note);
    }
    for n in notes {
        text.push_str(&n);
        text.push('\n');
    }
    out.text = text.trim_end_matches('\n').to_string();
    Ok(out)
}

fn searcher_builder(mode: Mode, context: usize, multiline: bool) -> SearcherBuilder {
    let mut b = SearcherBuilder::new();
    b.binary_detection(BinaryDetection::quit(b'\x00'))
        .line_number(mode == Mode::Content)
        .multi_line(multiline)
        .heap_limit(Some(HEAP_LIMIT))
        .memory_map(MmapChoice::never())
        .before_context(context)
        .after_context(context);
    b
}

/// grep's `glob` filter as ripgrep's `-g`: a glob without `/` matches the file name at any
/// depth, `!` in front excludes.
fn glob_filter(glob: &str, shown: &Path, real: &Path) -> Result<ignore::overrides::Override, ToolError> {
    // An absolute glob under the searched directory is taken relative to it.
    let (neg, body) = match glob.strip_prefix('!') {
        Some(rest) => ("!", rest),
        None => ("", glob),
    };
    let body = [shown, real]
        .iter()
        .find_map(|base| Path::new(body).strip_prefix(base).ok().map(|p| p.to_string_lossy().to_string()))
        .filter(|_| body.starts_with('/'))
        .unwrap_or_else(|| body.to_string());
    let mut b = OverrideBuilder::new(real);
    let invalid = |e: ignore::Error| {
        // "error parsing glob 'x': reason": the glob is quoted below already.
        let e = e.to_string();
        let reason = e.split_once("': ").map_or(e.as_str(), |(_, r)| r);
        ToolError::new(
            ErrorCode::InvalidGlob,
            format!(
                "invalid glob `{glob}` in `glob`: {reason}. A glob without / matches file names at any depth (*.rs, \
                 *_test.go); with / it is relative to the searched directory (src/**/*.ts); ! in front excludes \
                 (!*.min.js). Example: {{\"pattern\": \"TODO\", \"glob\": \"*.rs\"}}."
            ),
        )
    };
    b.add(&format!("{neg}{body}")).map_err(invalid)?;
    b.build().map_err(invalid)
}

// ---------------------------------------------------------------------------------------------
// The regex: refusals with what to do instead.

/// Parse and translate the pattern on its own first (as grep-regex will), to name constructs
/// from other regex dialects and to quote errors against the model's own pattern.
fn check_syntax(pattern: &str, case_insensitive: bool, multiline: bool) -> Result<(), ToolError> {
    let mut parser = regex_syntax::ParserBuilder::new()
        .nest_limit(NEST_LIMIT)
        .utf8(false)
        .case_insensitive(case_insensitive)
        .multi_line(true)
        .dot_matches_new_line(multiline)
        .build();
    let err = match parser.parse(pattern) {
        Ok(_) => return Ok(()),
        Err(regex_syntax::Error::Parse(e)) => e,
        Err(e) => return Err(invalid_regex(pattern, &e.to_string())),
    };
    let span = err.span();
    let (start, end) = (span.start.offset.min(pattern.len()), span.end.offset.min(pattern.len()));
    match err.kind() {
        ast::ErrorKind::UnsupportedLookAround => Err(look_around(pattern, start, end)),
        ast::ErrorKind::UnsupportedBackreference => Err(backreference(pattern, &pattern[start..end])),
        ast::ErrorKind::NestLimitExceeded(_) => {
            Err(too_large(pattern, &format!("its groups nest deeper than {NEST_LIMIT} levels")))
        }
        _ => Err(invalid_regex(pattern, &err.to_string())),
    }
}

fn build_matcher(pattern: &str, case_insensitive: bool, multiline: bool) -> Result<RegexMatcher, ToolError> {
    let mut b = RegexMatcherBuilder::new();
    b.case_insensitive(case_insensitive).multi_line(true).size_limit(REGEX_SIZE_LIMIT);
    if multiline {
        b.dot_matches_new_line(true);
    } else {
        // As ripgrep: a matcher that never matches across a line lets the searcher find
        // candidate lines fast instead of trying each line in turn.
        b.line_terminator(Some(b'\n'));
    }
    b.build(pattern).map_err(|e| match e.kind() {
        grep_regex::ErrorKind::NotAllowed(lit) => ToolError::new(
            ErrorCode::InvalidRegex,
            format!(
                "invalid regex `{pattern}`: it contains {lit:?}, a line break, which a line-by-line search can never \
                 match. Set \"multiline\": true to match across lines, or search one line's text."
            ),
        ),
        grep_regex::ErrorKind::Regex(msg) if msg.contains("exceeds size limit") => {
            too_large(pattern, &format!("compiled, it exceeds the size limit of {} MiB", REGEX_SIZE_LIMIT >> 20))
        }
        _ => invalid_regex(pattern, &e.to_string()),
    })
}

fn invalid_regex(pattern: &str, reason: &str) -> ToolError {
    let glob_like = if pattern.starts_with('*') || pattern.contains("**") {
        " This looks like a glob: to find files by name use the glob tool, or keep the regex and put the file \
         pattern in the `glob` field; in a regex, any text is `.*`."
    } else {
        ""
    };
    ToolError::new(
        ErrorCode::InvalidRegex,
        format!(
            "invalid regex `{pattern}`:\n{}\nTo match a character that is special in regex syntax literally, escape \
             it with a backslash: \\( \\) \\[ \\] \\{{ \\}} \\. \\* \\+ \\? \\| \\^ \\$ \\\\ (in JSON the backslash \
             itself is doubled, e.g. \"pattern\": \"foo\\\\(\").{glob_like}",
            reason.trim_end()
        ),
    )
}

fn too_large(pattern: &str, why: &str) -> ToolError {
    ToolError::new(
        ErrorCode::RegexTooLarge,
        format!(
            "the regex `{pattern}` is too large: {why}. Counted repetitions multiply ((a{{1000}}){{1000}} is a \
             million copies of a). Use smaller counts or open-ended ones (a{{3,}} or a+ instead of a{{1000}}), or \
             search a shorter distinctive part and check the lines with output_mode content."
        ),
    )
}

const NO_LOOKAROUND: &str = "grep's regex syntax is RE2-style, which has no look-around or backreferences \
                             (it never backtracks, so no pattern can hang a search)";

fn look_around(pattern: &str, start: usize, open_end: usize) -> ToolError {
    let open = &pattern[start..open_end];
    let (name, body, after) = match group_end(pattern, open_end) {
        Some(close) => (open, &pattern[open_end..close], &pattern[close + 1..]),
        None => (open, &pattern[open_end..], ""),
    };
    let before = &pattern[..start];
    let or = |s: &str| if s.is_empty() { "the text around it".to_string() } else { format!("`{s}`") };
    let (what, instead) = match name {
        "(?=" => (
            "look-ahead",
            format!(
                "search the whole text, `{before}{body}{after}` (the match then includes what the look-ahead \
                 checked), or search {} with output_mode content and check what follows it",
                or(before)
            ),
        ),
        "(?!" => (
            "negative look-ahead",
            format!(
                "search the positive pattern {} and filter the results with a second grep for `{before}{body}` \
                 (the lines it also finds are the ones to drop)",
                or(before)
            ),
        ),
        "(?<=" => (
            "look-behind",
            format!(
                "search the whole text, `{before}{body}{after}` (the match then includes what the look-behind \
                 checked), or search {} with output_mode content and check what precedes it",
                or(after)
            ),
        ),
        _ => (
            "negative look-behind",
            format!(
                "search the positive pattern {} and filter the results with a second grep for `{body}{after}` \
                 (the lines it also finds are the ones to drop)",
                or(after)
            ),
        ),
    };
    ToolError::new(
        ErrorCode::UnsupportedRegex,
        format!(
            "the regex `{pattern}` uses {what} `{open}…)`, which is not supported: {NO_LOOKAROUND}. Instead, {instead}."
        ),
    )
}

fn backreference(pattern: &str, found: &str) -> ToolError {
    ToolError::new(
        ErrorCode::UnsupportedRegex,
        format!(
            "the regex `{pattern}` uses the backreference `{found}`, which is not supported: {NO_LOOKAROUND}. \
             Instead, spell out the repeated text (for a doubled word, search the word twice, e.g. `the the`; for \
             matching quotes, search each kind: `\"[^\"]*\"|'[^']*'`), or search the first part and check the lines \
             with output_mode content."
        ),
    )
}

/// The index of the `)` closing the group whose body starts at `from`, skipping escapes and
/// character classes.
fn group_end(pattern: &str, from: usize) -> Option<usize> {
    let bytes = pattern.as_bytes();
    let (mut depth, mut i, mut class) = (0usize, from, false);
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 1,
            b'[' if !class => class = true,
            b']' if class => class = false,
            b'(' if !class => depth += 1,
            b')' if !class => {
                if depth == 0 {
                    return Some(i);
                }
                depth -= 1;
            }
            _ => {}
        }
        i += 1;
    }
    None
}

// ---------------------------------------------------------------------------------------------
// Searching.

/// One thread's searcher and findings.
struct GrepVisitor<'a> {
    searcher: Searcher,
    matcher: &'a RegexMatcher,
    mode: Mode,
    searched: usize,
    binary: usize,
    errors: WalkErrors,
    listed: Vec<(SystemTime, PathBuf)>,
    counts: Vec<(PathBuf, u64)>,
    content: ContentTop,
}

impl<'a> GrepVisitor<'a> {
    fn new(builder: &SearcherBuilder, matcher: &'a RegexMatcher, mode: Mode) -> Self {
        GrepVisitor {
            searcher: builder.build(),
            matcher,
            mode,
            searched: 0,
            binary: 0,
            errors: WalkErrors::default(),
            listed: Vec::new(),
            counts: Vec::new(),
            content: ContentTop::default(),
        }
    }

    fn search(&mut self, path: PathBuf) {
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) => {
                self.errors.push(format!("{}: {e}", path.display()));
                return;
            }
        };
        self.searched += 1;
        match self.mode {
            Mode::FilesWithMatches => {
                let mut sink = FirstMatch::default();
                let res = self.searcher.search_file(self.matcher, &file, &mut sink);
                self.failed(&path, res);
                if sink.matched {
                    let time = file.metadata().and_then(|m| m.modified()).unwrap_or(SystemTime::UNIX_EPOCH);
                    self.listed.push((time, path));
                } else if sink.binary {
                    self.binary += 1;
                }
            }
            Mode::Count => {
                let mut sink = Counter::default();
                let res = self.searcher.search_file(self.matcher, &file, &mut sink);
                self.failed(&path, res);
                if sink.lines > 0 {
                    self.counts.push((path, sink.lines));
                } else if sink.binary {
                    self.binary += 1;
                }
            }
            Mode::Content => {
                let mut sink = Collect::default();
                let res = self.searcher.search_file(self.matcher, &file, &mut sink);
                self.failed(&path, res);
                if sink.hits.matched_lines > 0 {
                    self.content.insert(path, sink.hits);
                } else if sink.binary {
                    self.binary += 1;
                }
            }
        }
    }

    fn failed(&mut self, path: &Path, res: std::io::Result<()>) {
        if let Err(e) = res {
            let why = if e.to_string().contains("allocation limit") {
                if self.searcher.multi_line() {
                    format!(
                        "larger than {} MiB, too large for a multiline search; search it without multiline",
                        HEAP_LIMIT >> 20
                    )
                } else {
                    format!("it has a line longer than {} MiB", HEAP_LIMIT >> 20)
                }
            } else {
                e.to_string()
            };
            self.errors.push(format!("{}: {why}", path.display()));
        }
    }
}

impl FileVisitor for GrepVisitor<'_> {
    fn file(&mut self, entry: DirEntry) -> WalkState {
        self.search(entry.into_path());
        WalkState::Continue
    }

    fn error(&mut self, err: ignore::Error) {
        self.errors.push(err.to_string());
    }
}

/// files_with_matches: stop at the first match.
#[derive(Default)]
struct FirstMatch {
    matched: bool,
    binary: bool,
}

impl Sink for FirstMatch {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, _: &SinkMatch<'_>) -> Result<bool, Self::Error> {
        self.matched = true;
        Ok(false)
    }

    fn binary_data(&mut self, _: &Searcher, _: u64) -> Result<bool, Self::Error> {
        self.binary = true;
        Ok(false)
    }
}

/// count: matching lines.
#[derive(Default)]
struct Counter {
    lines: u64,
    binary: bool,
}

impl Sink for Counter {
    type Error = std::io::Error;

    fn matched(&mut self, searcher: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, Self::Error> {
        self.lines += if searcher.multi_line() { mat.lines().count() as u64 } else { 1 };
        Ok(true)
    }

    fn binary_data(&mut self, _: &Searcher, _: u64) -> Result<bool, Self::Error> {
        self.binary = true;
        Ok(false)
    }
}

/// One output line of content mode, before the path is put in front.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Line {
    Match(u64, String),
    Context(u64, String),
    Break,
}

/// content: what one file shows (at most [`MAX_FILE_LINES`] lines) and how many lines matched.
#[derive(Debug, Default)]
struct FileHits {
    lines: Vec<Line>,
    /// Match and context lines kept (breaks do not count).
    kept_lines: usize,
    kept_matches: usize,
    matched_lines: u64,
    /// The per-file cap cut something.
    full: bool,
}

impl FileHits {
    fn push(&mut self, line: Line) {
        if self.kept_lines >= MAX_FILE_LINES {
            self.full = true;
            return;
        }
        match line {
            Line::Break => {
                if !self.lines.is_empty() {
                    self.lines.push(line);
                }
                return;
            }
            Line::Match(..) => self.kept_matches += 1,
            Line::Context(..) => {}
        }
        self.kept_lines += 1;
        self.lines.push(line);
    }
}

#[derive(Default)]
struct Collect {
    hits: FileHits,
    binary: bool,
}

impl Sink for Collect {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, Self::Error> {
        let first = mat.line_number().unwrap_or(0);
        for (i, line) in mat.lines().enumerate() {
            self.hits.matched_lines += 1;
            if self.hits.kept_lines < MAX_FILE_LINES {
                self.hits.push(Line::Match(first + i as u64, display_line(line)));
            } else {
                self.hits.full = true;
            }
        }
        Ok(true)
    }

    fn context(&mut self, _: &Searcher, ctx: &SinkContext<'_>) -> Result<bool, Self::Error> {
        if self.hits.kept_lines < MAX_FILE_LINES {
            self.hits.push(Line::Context(ctx.line_number().unwrap_or(0), display_line(ctx.bytes())));
        }
        Ok(true)
    }

    fn context_break(&mut self, _: &Searcher) -> Result<bool, Self::Error> {
        if self.hits.kept_lines < MAX_FILE_LINES {
            self.hits.push(Line::Break);
        }
        Ok(true)
    }

    fn binary_data(&mut self, _: &Searcher, _: u64) -> Result<bool, Self::Error> {
        self.binary = true;
        Ok(false)
    }
}

/// One line as text: without its terminator, cut at [`MAX_LINE_CHARS`] characters.
fn display_line(bytes: &[u8]) -> String {
    let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
    // A character is at most 4 bytes: this many bytes always hold more than the cap.
    let head = &bytes[..bytes.len().min(MAX_LINE_CHARS * 4 + 4)];
    let text = String::from_utf8_lossy(head);
    match text.char_indices().nth(MAX_LINE_CHARS) {
        Some((cut, _)) => format!("{}[...line truncated]", &text[..cut]),
        None => text.into_owned(),
    }
}

/// content: the files that can still be shown, by path. Shown output takes files in path
/// order until [`MAX_MATCHES`] matches, so a file after a prefix already holding that many is
/// dropped (only counted). Each thread prunes its own share: a file the whole output needs is
/// never dropped by the thread that found it.
#[derive(Default)]
struct ContentTop {
    files: BTreeMap<PathBuf, FileHits>,
    kept_matches: usize,
    total_files: usize,
    total_matches: u64,
}

impl ContentTop {
    fn insert(&mut self, path: PathBuf, hits: FileHits) {
        self.total_files += 1;
        self.total_matches += hits.matched_lines;
        self.keep(path, hits);
    }

    fn keep(&mut self, path: PathBuf, hits: FileHits) {
        self.kept_matches += hits.kept_matches;
        self.files.insert(path, hits);
        while self.files.len() > 1 {
            let Some((_, last)) = self.files.last_key_value() else { break };
            if self.kept_matches - last.kept_matches < MAX_MATCHES {
                break;
            }
            self.kept_matches -= last.kept_matches;
            self.files.pop_last();
        }
    }

    fn merge(&mut self, other: ContentTop) {
        self.total_files += other.total_files;
        self.total_matches += other.total_matches;
        for (p, h) in other.files {
            self.keep(p, h);
        }
    }
}

/// Everything found, from all threads.
struct Accum {
    mode: Mode,
    searched: usize,
    binary: usize,
    errors: WalkErrors,
    listed: Vec<(SystemTime, PathBuf)>,
    counts: Vec<(PathBuf, u64)>,
    content: ContentTop,
}

impl Accum {
    fn new(mode: Mode) -> Self {
        Accum {
            mode,
            searched: 0,
            binary: 0,
            errors: WalkErrors::default(),
            listed: Vec::new(),
            counts: Vec::new(),
            content: ContentTop::default(),
        }
    }

    fn merge(&mut self, v: GrepVisitor<'_>) {
        self.searched += v.searched;
        self.binary += v.binary;
        self.errors.merge(v.errors);
        self.listed.extend(v.listed);
        self.counts.extend(v.counts);
        self.content.merge(v.content);
    }

    /// Write the results into `text`; false when nothing matched.
    fn render(&mut self, shown: &Path, real: &Path, context: bool, text: &mut String, truncated: &mut bool) -> bool {
        let show = |p: &Path| walk::shown_path(shown, real, p).to_string_lossy().into_owned();
        const NARROW: &str =
            "Narrow with glob (e.g. \"glob\": \"*.rs\"), a path to a subdirectory or file, or a more specific pattern.";
        match self.mode {
            Mode::FilesWithMatches => {
                self.listed.sort_unstable_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
                for (_, p) in self.listed.iter().take(MAX_FILES) {
                    text.push_str(&show(p));
                    text.push('\n');
                }
                let total = self.listed.len();
                if total > MAX_FILES {
                    *truncated = true;
                    text.push_str(&format!(
                        "[truncated: showing {MAX_FILES} of {total} files with matches, newest first. {NARROW}]\n"
                    ));
                }
                total > 0
            }
            Mode::Count => {
                self.counts.sort_unstable();
                for (p, n) in self.counts.iter().take(MAX_FILES) {
                    text.push_str(&format!("{}:{n}\n", show(p)));
                }
                let total = self.counts.len();
                if total > MAX_FILES {
                    *truncated = true;
                    text.push_str(&format!(
                        "[truncated: showing {MAX_FILES} of {total} files with matches, sorted by path. {NARROW}]\n"
                    ));
                }
                total > 0
            }
            Mode::Content => {
                let top = std::mem::take(&mut self.content);
                let mut shown_matches = 0usize;
                let mut stop = false;
                for (i, (p, hits)) in top.files.iter().enumerate() {
                    if shown_matches >= MAX_MATCHES {
                        break;
                    }
                    if context && i > 0 {
                        text.push_str("--\n");
                    }
                    let sp = show(p);
                    let mut lines = hits.lines.as_slice();
                    while let Some(Line::Break) = lines.last() {
                        lines = &lines[..lines.len() - 1];
                    }
                    for line in lines {
                        match line {
                            Line::Match(n, t) => {
                                if shown_matches >= MAX_MATCHES {
                                    stop = true;
                                    break;
                                }
                                shown_matches += 1;
                                text.push_str(&format!("{sp}:{n}:{t}\n"));
                            }
                            Line::Context(n, t) => text.push_str(&format!("{sp}-{n}-{t}\n")),
                            Line::Break if shown_matches >= MAX_MATCHES => {
                                stop = true;
                                break;
                            }
                            Line::Break => text.push_str("--\n"),
                        }
                    }
                    if hits.full && !stop {
                        *truncated = true;
                        text.push_str(&format!(
                            "[{sp}: showing the first {} lines of this file ({} of its {} matching lines). Use a more specific pattern, or read the file around these lines.]\n",
                            hits.kept_lines, hits.kept_matches, hits.matched_lines
                        ));
                    }
                }
                if (shown_matches as u64) < top.total_matches {
                    *truncated = true;
                    let files = if top.total_files == 1 { "file" } else { "files" };
                    text.push_str(&format!(
                        "[truncated: showing {shown_matches} of {} matching lines in {} {files} (at most {MAX_MATCHES} matches in all, {MAX_FILE_LINES} lines per file; files in path order). {NARROW}]\n",
                        top.total_matches, top.total_files
                    ));
                }
                top.total_matches > 0
            }
        }
    }
}

/// The second line of an empty result: what was searched and skipped, and what might help.
fn no_match_hint(
    ctx: &ToolContext<'_>,
    args: &Args,
    shown: &Path,
    filters: &Filters,
    single: bool,
    acc: &Accum,
) -> String {
    if single && acc.binary > 0 {
        return format!(
            "{} is a binary file (it contains a NUL byte), so it was not searched. grep searches text files.",
            shown.display()
        );
    }
    let mut hint = if single {
        format!("Searched the file {}", shown.display())
    } else {
        let files = if acc.searched == 1 { "file" } else { "files" };
        let mut h = format!(
            "Searched {} {files} under {} (skipping {}",
            acc.searched,
            shown.display(),
            walk::skipped_summary(filters, &ctx.config.workspace.ignore)
        );
        if let Some(g) = args.glob.as_deref().filter(|g| !g.is_empty()) {
            h.push_str(&format!("; only files matching the glob `{g}`"));
        }
        h.push(')');
        h
    };
    if acc.binary > 0 {
        let files = if acc.binary == 1 { "file" } else { "files" };
        hint.push_str(&format!("; {} binary {files} skipped", acc.binary));
    }
    hint.push('.');
    if acc.searched > 0 && !args.case_insensitive.unwrap_or(false) && args.pattern.chars().any(char::is_alphabetic) {
        hint.push_str(" The search is case-sensitive: set \"case_insensitive\": true to ignore case.");
    }
    if !args.multiline.unwrap_or(false) && (args.pattern.contains("\\n") || args.pattern.contains("\\s")) {
        hint.push_str(" Each line is searched on its own: set \"multiline\": true to match across lines.");
    }
    hint
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(pattern: &str) -> ErrorCode {
        check_syntax(pattern, false, false)
            .and_then(|_| build_matcher(pattern, false, false).map(|_| ()))
            .unwrap_err()
            .code
    }

    #[test]
    fn look_around_is_named_with_an_alternative() {
        let e = check_syntax("foo(?=bar)", false, false).unwrap_err();
        assert_eq!(e.code, ErrorCode::UnsupportedRegex);
        assert!(e.message.contains("look-ahead `(?=…)`"), "{}", e.message);
        assert!(e.message.contains("`foobar`"), "{}", e.message);
        let e = check_syntax("foo(?!bar)", false, false).unwrap_err();
        assert!(e.message.contains("negative look-ahead"), "{}", e.message);
        assert!(e.message.contains("second grep for `foobar`"), "{}", e.message);
        let e = check_syntax("(?<=a)b", false, false).unwrap_err();
        assert!(e.message.contains("uses look-behind `(?<=…)`"), "{}", e.message);
        assert!(e.message.contains("`ab`"), "{}", e.message);
        let e = check_syntax("(?<!a)b", false, false).unwrap_err();
        assert!(e.message.contains("negative look-behind"), "{}", e.message);
    }

    #[test]
    fn backreference_is_named() {
        let e = check_syntax(r"(\w+) \1", false, false).unwrap_err();
        assert_eq!(e.code, ErrorCode::UnsupportedRegex);
        assert!(e.message.contains(r"backreference `\1`"), "{}", e.message);
    }

    #[test]
    fn other_errors_classify() {
        assert_eq!(code("foo("), ErrorCode::InvalidRegex);
        assert_eq!(code(r"\p{Nope}"), ErrorCode::InvalidRegex);
        assert_eq!(code(r"a\nb"), ErrorCode::InvalidRegex);
        assert_eq!(code("(a{1000}){1000}"), ErrorCode::RegexTooLarge);
        let deep = format!("{}a{}", "(".repeat(300), ")".repeat(300));
        assert_eq!(code(&deep), ErrorCode::RegexTooLarge);
        assert!(build_matcher(r"a\nb", false, true).is_ok());
        assert!(build_matcher(r"(?<name>x)", false, false).is_ok());
    }

    #[test]
    fn invalid_regex_shows_position() {
        let e = check_syntax("foo(", false, false).unwrap_err();
        assert!(e.message.contains("unclosed group"), "{}", e.message);
        assert!(e.message.contains("^"), "{}", e.message);
    }

    #[test]
    fn group_end_skips_escapes_and_classes() {
        assert_eq!(group_end("(?=a\\)b)c", 3), Some(7));
        assert_eq!(group_end("(?=[)](x))", 3), Some(9));
        assert_eq!(group_end("(?=a", 3), None);
    }

    #[test]
    fn long_lines_are_cut() {
        let long = "é".repeat(600) + "\n";
        let s = display_line(long.as_bytes());
        assert!(s.ends_with("[...line truncated]"));
        assert_eq!(s.chars().count(), MAX_LINE_CHARS + "[...line truncated]".len());
        assert_eq!(display_line(b"abc\r\n"), "abc");
    }

    fn hits(n: usize) -> FileHits {
        let mut h = FileHits::default();
        for i in 0..n {
            h.push(Line::Match(i as u64 + 1, "x".into()));
        }
        h.matched_lines = n as u64;
        h
    }

    #[test]
    fn per_file_cap_counts_lines_not_breaks() {
        let mut h = FileHits::default();
        h.push(Line::Break);
        assert!(h.lines.is_empty(), "a leading break is dropped");
        for i in 0..60 {
            h.push(Line::Context(i, String::new()));
            h.push(Line::Break);
        }
        assert_eq!(h.kept_lines, MAX_FILE_LINES);
        assert!(h.full);
    }

    #[test]
    fn content_top_keeps_every_file_the_output_needs() {
        // Two "threads" see interleaved files; the merged prefix must be what one thread would keep.
        let mut a = ContentTop::default();
        let mut b = ContentTop::default();
        for i in 0..40 {
            let t = if i % 2 == 0 { &mut a } else { &mut b };
            t.insert(PathBuf::from(format!("/f{i:02}")), hits(10));
        }
        a.merge(b);
        assert_eq!(a.total_files, 40);
        assert_eq!(a.total_matches, 400);
        let kept: Vec<_> = a.files.keys().cloned().collect();
        assert_eq!(kept.first().unwrap(), &PathBuf::from("/f00"));
        // Ten files of ten matches hold the first 100; nothing after them is needed.
        assert_eq!(kept.len(), 10, "{kept:?}");
    }
}
