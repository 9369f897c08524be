//! grep: search file contents with a regular expression, in process, on ripgrep's own crates
//! (`grep-regex` for the matcher, `grep-searcher` for streaming search with binary detection,
//! `ignore` for the walk shared with glob). Never shells out.
//!
//! The syntax is the regex crate's (RE2-style: no look-around, no backreferences, so no
//! pattern can backtrack for ever). Constructs from other dialects are caught before the
//! matcher is built and answered with what to search instead.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs::File;
use std::path::{Path, PathBuf};

use grep_regex::RegexMatcher;
use grep_searcher::{BinaryDetection, LineIter, MmapChoice, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};
use ignore::overrides::OverrideBuilder;
use serde::Deserialize;
use serde_json::{Value, json};

mod binary;
pub(crate) mod elsewhere;
mod pattern;

use binary::{BinaryCut, BinaryFrom, TextPart};
use elsewhere::elsewhere;
use pattern::{build_matcher, check_syntax};

use super::walk::{self, Entry, FileVisitor, Filters, Flow, WalkErrors};
use super::{ErrorCode, Tool, ToolContext, ToolError, ToolOutput, ToolResult, fsutil, parse_args};
use crate::sandbox::Resolved;
use crate::sandbox::confined::{Kind, Meta};

/// files_with_matches and count: the most files listed.
pub const MAX_FILES: usize = 1000;
/// How a cut listing says to see the rest.
const NARROW: &str =
    "Narrow with glob (e.g. \"glob\": \"*.rs\"), a path to a subdirectory or file, or a more specific pattern.";
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
    let checked = check_syntax(pattern, case_insensitive, multiline)?;
    let matcher = build_matcher(pattern, &checked, case_insensitive, multiline)?;

    let (target, kind) = match walk::resolve_existing(ctx, args.path.as_deref()) {
        // A guessed path that does not exist: say where the pattern is, as for a search that
        // found nothing, so the next call can go there instead of guessing again.
        Err(mut e) if e.code == ErrorCode::NotFound => {
            if let Some(more) = elsewhere(ctx, None, &matcher, multiline) {
                e.message = format!("{}{more}", e.message.trim_end());
            }
            return Err(e);
        }
        found => found?,
    };
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
    let mut filters = Filters { include_hidden: false, operator, overrides: None, everything: false };
    let mut acc = Accum::new(mode);
    let glob = args.glob.as_deref().filter(|g| !g.is_empty());
    let is_file = kind == Kind::File;
    if is_file {
        if glob.is_some() {
            notes.push("[glob ignored: path is a single file, which is always searched]".to_string());
        }
        let opened = ctx.workspace.open_parent(&target.real).and_then(|(dir, name)| dir.open_file(&name));
        let mut v = GrepVisitor::new(&searcher, &matcher, mode);
        v.search(target.real.clone(), opened.map_err(|e| fsutil::fs_error("search", &target.shown, &target.real, e)));
        acc.merge(v.acc);
    } else if kind == Kind::Dir {
        if let Some(g) = glob {
            filters.overrides = Some(glob_filter(g, &target.shown, &target.real)?);
        }
        let found = walk::run(ctx.workspace, &target.real, &filters, || GrepVisitor::new(&searcher, &matcher, mode))
            .map_err(|e| walk::bounded(fsutil::fs_error("search", &target.shown, &target.real, e)))?;
        for v in found {
            acc.merge(v.acc);
        }
    } else {
        return Err(ToolError::new(
            ErrorCode::Io,
            format!(
                "{} is {}, neither a regular file nor a directory; grep searches files. \
                 Give a file or a directory as path.",
                target.shown.display(),
                kind.describe()
            ),
        ));
    }

    let mut out = ToolOutput::new(String::new());
    let mut text = String::new();
    // (Before render, which takes content mode's files.)
    let matched = acc.files_matched();
    let found = acc.render(&target.shown, &target.real, context > 0, &mut text, &mut out.truncated);
    ctx.fit_window(&mut text, &mut out.truncated, NARROW);
    let shown_pattern = walk::clip(pattern);
    let single_failed = is_file && !acc.failures.is_empty();
    let caseless =
        if kind == Kind::Dir { caseless_more(ctx, args, &checked, &target, &filters, matched) } else { None };
    if !found {
        out.fell_short = true;
        if single_failed {
            // The one file given could not be searched: the headline says so, the next line why.
            let failure = &acc.failures[0];
            let past = if failure.why == Why::LongLine {
                format!(" past a line longer than {} MiB", HEAP_LIMIT >> 20)
            } else {
                String::new()
            };
            text.push_str(&format!(
                "[no matches for {shown_pattern}: {} could not be searched{past}]\n",
                walk::clip_path(ctx.workspace.root(), &target.shown)
            ));
            text.push_str(&failure.why.explain());
        } else {
            match acc.failures.len() {
                0 => text.push_str(&format!("[no matches for {shown_pattern}]\n")),
                n => text.push_str(&format!(
                    "[no matches for {shown_pattern}; {n} {} could not be searched (see below)]\n",
                    if n == 1 { "file" } else { "files" }
                )),
            }
            text.push_str(&no_match_hint(args, &target.shown, &filters, is_file, &acc, caseless.is_some()));
            if let Some(more) = elsewhere(ctx, Some(&target.real), &matcher, multiline) {
                text.push_str(&more);
            }
        }
        text.push('\n');
    } else if acc.binary > 0 {
        let files = if acc.binary == 1 { "file" } else { "files" };
        notes.push(format!("[{} binary {files} skipped]", acc.binary));
    }
    notes.extend(caseless);
    notes.extend(acc.binary_cut_notes(&target.shown, &target.real));
    // (The headline and the line under it said it already for a single file with no results.)
    if found || !single_failed {
        notes.extend(acc.failure_note(&target.shown, &target.real));
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
    // What is binary is decided before the searcher sees the bytes ([`TextPart`]: a file is
    // searched up to its first line holding a NUL byte) and as lines are found ([`BinaryCut`]).
    // The searcher's own detection is for UTF-16 text, which it decodes itself: a NUL in the
    // decoded text stops files_with_matches, as `rg -l` does; count and content go on with
    // NUL read as a line break, and cut their results at it.
    let binary =
        if mode == Mode::FilesWithMatches { BinaryDetection::quit(b'\x00') } else { BinaryDetection::convert(b'\x00') };
    let mut b = SearcherBuilder::new();
    b.binary_detection(binary)
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
    // A filter naming another place matches nothing here: say so rather than search nothing.
    // (`/src/*.rs` is ripgrep's anchored form when the searched directory has a `src`.)
    let anchored_here = || {
        let first = body.trim_start_matches('/').split('/').next().unwrap_or("");
        !first.is_empty() && std::fs::symlink_metadata(real.join(first)).is_ok()
    };
    let outside = (body.starts_with('/') && !anchored_here())
        || Path::new(&body).components().any(|c| c == std::path::Component::ParentDir);
    if outside {
        return Err(ToolError::new(
            ErrorCode::InvalidGlob,
            format!(
                "the `glob` filter `{}` names a place outside the searched directory {}, so it would match nothing there. \
                 The filter applies to paths below the searched directory: give `path` the directory to search and \
                 `glob` a pattern below it, e.g. {{\"path\": \"{}\", \"glob\": \"**/*.rs\"}}.",
                walk::clip(glob),
                shown.display(),
                shown.display()
            ),
        ));
    }
    let mut b = OverrideBuilder::new(real);
    let invalid = |e: ignore::Error| {
        // "error parsing glob 'x': reason": the glob is quoted below already.
        let e = e.to_string();
        let reason = walk::clip(e.split_once("': ").map_or(e.as_str(), |(_, r)| r));
        ToolError::new(
            ErrorCode::InvalidGlob,
            format!(
                "invalid glob `{}` in `glob`: {reason}. A glob without / matches file names at any depth (*.rs, \
                 *_test.go); with / it is relative to the searched directory (src/**/*.ts); ! in front excludes \
                 (!*.min.js). Example: {{\"pattern\": \"TODO\", \"glob\": \"*.rs\"}}.",
                walk::clip(glob)
            ),
        )
    };
    b.add(&format!("{neg}{body}")).map_err(invalid)?;
    b.build().map_err(invalid)
}

// ---------------------------------------------------------------------------------------------
// Searching.

/// One thread's searcher and findings.
struct GrepVisitor<'a> {
    searcher: Searcher,
    matcher: &'a RegexMatcher,
    acc: Accum,
}

/// A file that could not be searched, or not to the end.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Failure {
    path: PathBuf,
    why: Why,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Why {
    /// A line longer than [`HEAP_LIMIT`]: the lines before it were searched.
    LongLine,
    /// Multiline search holds the whole file, and this one is larger than [`HEAP_LIMIT`].
    TooLargeForMultiline,
    /// Could not be opened or read.
    Io(String),
}

impl Why {
    /// As part of the failures note.
    fn brief(&self) -> String {
        let mib = HEAP_LIMIT >> 20;
        match self {
            Why::LongLine => format!("it has a line longer than {mib} MiB; only the lines before it were searched"),
            Why::TooLargeForMultiline => {
                format!("larger than {mib} MiB, too large for a multiline search; search it without multiline")
            }
            Why::Io(e) => e.clone(),
        }
    }

    /// The line under the headline when the one file given could not be searched.
    fn explain(&self) -> String {
        let mib = HEAP_LIMIT >> 20;
        match self {
            Why::LongLine => format!(
                "grep holds one line at a time in memory, at most {mib} MiB: the lines before that one were \
                 searched, the rest of the file was not."
            ),
            Why::TooLargeForMultiline => format!(
                "It is larger than {mib} MiB, too large for a multiline search (which holds the whole file in \
                 memory). Search it without multiline, line by line."
            ),
            Why::Io(e) => format!("The error: {e}."),
        }
    }
}

impl<'a> GrepVisitor<'a> {
    fn new(builder: &SearcherBuilder, matcher: &'a RegexMatcher, mode: Mode) -> Self {
        GrepVisitor { searcher: builder.build(), matcher, acc: Accum::new(mode) }
    }

    /// Search one file, opened (from its directory's handle) by the caller.
    fn search(&mut self, path: PathBuf, opened: Result<(File, Meta), ToolError>) {
        let (file, meta) = match opened {
            Ok(f) => f,
            Err(e) => {
                self.acc.failures.push(Failure { path, why: Why::Io(e.message) });
                return;
            }
        };
        match self.acc.mode {
            Mode::FilesWithMatches => {
                let mut sink = FirstMatch::default();
                let mut text = TextPart::new(&file);
                let res = self.searcher.search_reader(self.matcher, &mut text, &mut sink);
                self.finished(&path, res);
                sink.cut.text_ended(sink.matched, text.binary());
                if sink.matched {
                    self.acc.listed.push((meta.mtime_ns, path));
                } else {
                    self.acc.skipped_binary(sink.cut);
                }
            }
            Mode::Count => {
                let mut sink = Counter::default();
                let mut text = TextPart::new(&file);
                let res = self.searcher.search_reader(self.matcher, &mut text, &mut sink);
                self.finished(&path, res);
                sink.cut.text_ended(sink.lines > 0, text.binary());
                if sink.lines > 0 {
                    if let Some(at) = sink.cut.at {
                        self.acc.binary_cut.push((path.clone(), at));
                    }
                    self.acc.counts.push((path, sink.lines));
                } else {
                    self.acc.skipped_binary(sink.cut);
                }
            }
            Mode::Content => {
                let mut sink = Collect::default();
                let mut text = TextPart::new(&file);
                let res = self.searcher.search_reader(self.matcher, &mut text, &mut sink);
                self.finished(&path, res);
                sink.cut.text_ended(sink.hits.matched_lines > 0, text.binary());
                if sink.hits.matched_lines > 0 {
                    if let Some(at) = sink.cut.at {
                        self.acc.binary_cut.push((path.clone(), at));
                    }
                    self.acc.content.insert(path, sink.hits);
                } else {
                    self.acc.skipped_binary(sink.cut);
                }
            }
        }
    }

    /// Count a search that ran to the end, or note why it did not. What a failed search found
    /// before it failed is kept (the failures note says where it stopped).
    fn finished(&mut self, path: &Path, res: std::io::Result<()>) {
        let Err(e) = res else {
            self.acc.searched += 1;
            return;
        };
        let why = if e.to_string().contains("allocation limit") {
            if self.searcher.multi_line() { Why::TooLargeForMultiline } else { Why::LongLine }
        } else {
            Why::Io(e.to_string())
        };
        self.acc.failures.push(Failure { path: path.to_path_buf(), why });
    }
}

impl FileVisitor for GrepVisitor<'_> {
    fn file(&mut self, entry: Entry) -> Flow {
        let opened = entry.open().map_err(|e| fsutil::fs_error("search", &entry.path, &entry.path, e));
        self.search(entry.into_path(), opened);
        Flow::Continue
    }

    fn error(&mut self, what: String) {
        self.acc.errors.push(what);
    }
}

/// files_with_matches: stop at the first match (a match on a binary line is no match: the
/// file is binary from there).
#[derive(Default)]
struct FirstMatch {
    matched: bool,
    cut: BinaryCut,
}

impl Sink for FirstMatch {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, Self::Error> {
        let mut offset = mat.absolute_byte_offset();
        for line in LineIter::new(b'\n', mat.bytes()) {
            if self.cut.line_is_binary(false, line, offset) {
                return Ok(false);
            }
            offset += line.len() as u64;
        }
        self.matched = true;
        Ok(false)
    }

    fn binary_data(&mut self, _: &Searcher, offset: u64) -> Result<bool, Self::Error> {
        Ok(self.cut.binary_data(false, offset))
    }
}

/// count: matching lines.
#[derive(Default)]
struct Counter {
    lines: u64,
    cut: BinaryCut,
}

impl Sink for Counter {
    type Error = std::io::Error;

    fn matched(&mut self, searcher: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, Self::Error> {
        let (bytes, reached) = self.cut.before_nul(mat.bytes(), mat.absolute_byte_offset());
        if !searcher.multi_line() && reached && bytes.is_empty() {
            return Ok(false);
        }
        let mut offset = mat.absolute_byte_offset();
        for line in LineIter::new(b'\n', bytes) {
            if self.cut.line_is_binary(self.lines > 0, line, offset) {
                return Ok(false);
            }
            offset += line.len() as u64;
            self.lines += 1;
            if !searcher.multi_line() {
                break;
            }
        }
        Ok(!reached)
    }

    fn binary_data(&mut self, _: &Searcher, offset: u64) -> Result<bool, Self::Error> {
        Ok(self.cut.binary_data(self.lines > 0, offset))
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
    cut: BinaryCut,
}

impl Sink for Collect {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, Self::Error> {
        let first = mat.line_number().unwrap_or(0);
        let (bytes, reached) = self.cut.before_nul(mat.bytes(), mat.absolute_byte_offset());
        let mut offset = mat.absolute_byte_offset();
        for (i, line) in LineIter::new(b'\n', bytes).enumerate() {
            if self.cut.line_is_binary(self.hits.matched_lines > 0, line, offset) {
                return Ok(false);
            }
            offset += line.len() as u64;
            self.hits.matched_lines += 1;
            if self.hits.kept_lines < MAX_FILE_LINES {
                self.hits.push(Line::Match(first + i as u64, display_line(line)));
            } else {
                self.hits.full = true;
            }
        }
        Ok(!reached)
    }

    fn context(&mut self, _: &Searcher, ctx: &SinkContext<'_>) -> Result<bool, Self::Error> {
        let (bytes, reached) = self.cut.before_nul(ctx.bytes(), ctx.absolute_byte_offset());
        if self.cut.line_is_binary(self.hits.matched_lines > 0, bytes, ctx.absolute_byte_offset()) {
            return Ok(false);
        }
        if !bytes.is_empty() && self.hits.kept_lines < MAX_FILE_LINES {
            self.hits.push(Line::Context(ctx.line_number().unwrap_or(0), display_line(bytes)));
        }
        Ok(!reached)
    }

    fn context_break(&mut self, _: &Searcher) -> Result<bool, Self::Error> {
        if self.hits.kept_lines < MAX_FILE_LINES {
            self.hits.push(Line::Break);
        }
        Ok(true)
    }

    fn binary_data(&mut self, _: &Searcher, offset: u64) -> Result<bool, Self::Error> {
        Ok(self.cut.binary_data(self.hits.matched_lines > 0, offset))
    }
}

/// One line as text: without its terminator (`\n` or `\r\n`, as read shows lines), cut at
/// [`MAX_LINE_CHARS`] characters.
fn display_line(bytes: &[u8]) -> String {
    let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
    // A character is at most 4 bytes: this many bytes always hold more than the cap.
    let head = &bytes[..bytes.len().min(MAX_LINE_CHARS * 4 + 4)];
    let text = String::from_utf8_lossy(head);
    let text = match text.char_indices().nth(MAX_LINE_CHARS) {
        Some((cut, _)) => format!("{}[...line truncated]", &text[..cut]),
        None => text.into_owned(),
    };
    // As read shows them: a raw ESC or CR would act on a terminal.
    super::read::mark_controls(&text).0.into_owned()
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

/// Everything found: by one thread, then merged for all.
struct Accum {
    mode: Mode,
    /// Files searched to the end (binary ones included), not those that failed.
    searched: usize,
    binary: usize,
    /// The first file skipped as binary, and why (said when it is the one file searched).
    first_binary: Option<BinaryFrom>,
    /// Files with results that turned out binary later on: where their binary part starts.
    binary_cut: Vec<(PathBuf, BinaryFrom)>,
    /// Files that could not be searched (to the end).
    failures: Vec<Failure>,
    errors: WalkErrors,
    /// (mtime in ns, path)
    listed: Vec<(i64, PathBuf)>,
    counts: Vec<(PathBuf, u64)>,
    content: ContentTop,
}

impl Accum {
    fn new(mode: Mode) -> Self {
        Accum {
            mode,
            searched: 0,
            binary: 0,
            first_binary: None,
            binary_cut: Vec::new(),
            failures: Vec::new(),
            errors: WalkErrors::default(),
            listed: Vec::new(),
            counts: Vec::new(),
            content: ContentTop::default(),
        }
    }

    fn merge(&mut self, v: Accum) {
        self.searched += v.searched;
        self.binary += v.binary;
        if self.first_binary.is_none() {
            self.first_binary = v.first_binary;
        }
        self.binary_cut.extend(v.binary_cut);
        self.failures.extend(v.failures);
        self.failures.sort();
        self.errors.merge(v.errors);
        self.listed.extend(v.listed);
        self.counts.extend(v.counts);
        self.content.merge(v.content);
    }

    /// A file with no results: binary ones are counted.
    fn skipped_binary(&mut self, cut: BinaryCut) {
        if let Some(from) = cut.skipped {
            self.binary += 1;
            self.first_binary.get_or_insert(from);
        }
    }

    /// At most this many files are named in each of the notes below.
    const NOTE_FILES: usize = 3;

    /// One note per file whose results stop at binary data found after its first matches.
    fn binary_cut_notes(&mut self, shown: &Path, real: &Path) -> Vec<String> {
        self.binary_cut.sort();
        let mut notes: Vec<String> = self
            .binary_cut
            .iter()
            .take(Self::NOTE_FILES)
            .map(|(p, at)| {
                format!(
                    "[{}: {} marks it as binary; its results stop there]",
                    walk::clip_path(shown, &walk::shown_path(shown, real, p)),
                    at.what
                )
            })
            .collect();
        let more = self.binary_cut.len().saturating_sub(Self::NOTE_FILES);
        if more > 0 {
            let files = if more == 1 { "file" } else { "files" };
            notes.push(format!(
                "[{more} more {files} turned binary after their first matches; their results stop there]"
            ));
        }
        notes
    }

    /// The files that could not be searched (to the end), or `None`.
    fn failure_note(&self, shown: &Path, real: &Path) -> Option<String> {
        let n = self.failures.len();
        if n == 0 {
            return None;
        }
        let examples: Vec<String> = self
            .failures
            .iter()
            .take(Self::NOTE_FILES)
            .map(|f| format!("{} ({})", walk::clip_path(shown, &walk::shown_path(shown, real, &f.path)), f.why.brief()))
            .collect();
        let files = if n == 1 { "file" } else { "files" };
        let more = if n > examples.len() { format!("; and {} more", n - examples.len()) } else { String::new() };
        Some(format!("[{n} {files} could not be searched: {}{more}]", examples.join("; ")))
    }

    /// How many files had results.
    fn files_matched(&self) -> usize {
        match self.mode {
            Mode::FilesWithMatches => self.listed.len(),
            Mode::Count => self.counts.len(),
            Mode::Content => self.content.total_files,
        }
    }

    /// Write the results into `text`; false when nothing matched.
    fn render(&mut self, shown: &Path, real: &Path, context: bool, text: &mut String, truncated: &mut bool) -> bool {
        let show = |p: &Path| super::path_line(&walk::shown_path(shown, real, p));
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

/// A note after a case-sensitive search in lower case (`error`) that found fewer files than the
/// same search ignoring case, listing the files it missed: asked which logs mention "error in
/// any letter case", Qwen2.5-Coder-1.5B grepped `error` without `case_insensitive` and answered
/// with the one file of three it saw; told only how many more there were, it gave up instead of
/// searching again. A pattern with a capital letter is taken to mean its case, as ripgrep's
/// smart case does.
fn caseless_more(
    ctx: &ToolContext<'_>,
    args: &Args,
    checked: &str,
    target: &Resolved,
    filters: &Filters,
    matched: usize,
) -> Option<String> {
    /// The files listed; the rest are counted.
    const SHOWN: usize = 10;
    let multiline = args.multiline.unwrap_or(false);
    let lower = args.pattern.chars().any(char::is_alphabetic) && !args.pattern.chars().any(char::is_uppercase);
    if args.case_insensitive.is_some() || !lower {
        return None;
    }
    let files_matching = |case_insensitive: bool| -> Option<Vec<(i64, PathBuf)>> {
        let matcher = build_matcher(&args.pattern, checked, case_insensitive, multiline).ok()?;
        let searcher = searcher_builder(Mode::FilesWithMatches, 0, multiline);
        let found = walk::run(ctx.workspace, &target.real, filters, || {
            GrepVisitor::new(&searcher, &matcher, Mode::FilesWithMatches)
        })
        .ok()?;
        Some(found.into_iter().flat_map(|v| v.acc.listed).collect())
    };
    let all = files_matching(true)?;
    if all.len() <= matched {
        return None;
    }
    let sensitive: std::collections::HashSet<PathBuf> = files_matching(false)?.into_iter().map(|(_, p)| p).collect();
    let mut more: Vec<(i64, PathBuf)> = all.into_iter().filter(|(_, p)| !sensitive.contains(p)).collect();
    if more.is_empty() {
        return None;
    }
    more.sort_unstable_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let (files, match_) = if more.len() == 1 { ("file", "matches") } else { ("files", "match") };
    let mut text = format!(
        "[the search is case-sensitive; ignoring case, {} {}{files} {match_} (set \"case_insensitive\": true to include them):]",
        more.len(),
        if matched == 0 { "" } else { "more " }
    );
    for (_, p) in more.iter().take(SHOWN) {
        let _ = write!(text, "\n{}", super::path_line(&walk::shown_path(&target.shown, &target.real, p)));
    }
    if more.len() > SHOWN {
        let _ = write!(text, "\n(and {} more files)", more.len() - SHOWN);
    }
    Some(text)
}

/// The second line of an empty result: what was searched and skipped, and what might help.
/// `case_noted`: a note lists the files the search ignoring case would find, so this need not
/// suggest it.
fn no_match_hint(args: &Args, shown: &Path, filters: &Filters, single: bool, acc: &Accum, case_noted: bool) -> String {
    if single && let Some(from) = &acc.first_binary {
        return if from.start == 0 {
            format!(
                "{} is a binary file ({}), so it was not searched. grep searches text files.",
                shown.display(),
                from.what
            )
        } else {
            format!(
                "{} is text up to byte {}, then binary: {}. The text part was searched; the rest was not (grep searches text, line by line, as read shows it).",
                shown.display(),
                from.start,
                from.what
            )
        };
    }
    let mut hint = if single {
        format!("Searched the file {}", shown.display())
    } else {
        let files = if acc.searched == 1 { "file" } else { "files" };
        let mut h = format!(
            "Searched {} {files} under {} (skipping {}",
            acc.searched,
            shown.display(),
            walk::skipped_summary(filters)
        );
        if let Some(g) = args.glob.as_deref().filter(|g| !g.is_empty()) {
            h.push_str(&format!("; only files matching the glob `{}`", walk::clip(g)));
        }
        h.push(')');
        h
    };
    if acc.binary > 0 {
        let files = if acc.binary == 1 { "file" } else { "files" };
        hint.push_str(&format!("; {} binary {files} skipped", acc.binary));
    }
    hint.push('.');
    if acc.searched > 0
        && !case_noted
        && !args.case_insensitive.unwrap_or(false)
        && args.pattern.chars().any(char::is_alphabetic)
    {
        hint.push_str(" The search is case-sensitive: set \"case_insensitive\": true to ignore case.");
    }
    if !args.multiline.unwrap_or(false) && (args.pattern.contains("\\n") || args.pattern.contains("\\s")) {
        hint.push_str(" Each line is searched on its own: set \"multiline\": true to match across lines.");
    }
    hint
}

#[cfg(test)]
mod tests {
    use super::pattern::{group_end, matcher_error};
    use super::*;

    fn matcher(pattern: &str, multiline: bool) -> Result<RegexMatcher, ToolError> {
        let checked = check_syntax(pattern, false, multiline)?;
        build_matcher(pattern, &checked, false, multiline)
    }

    fn code(pattern: &str) -> ErrorCode {
        matcher(pattern, false).unwrap_err().code
    }

    fn is_match(pattern: &str, haystack: &[u8]) -> bool {
        grep_matcher::Matcher::is_match(&matcher(pattern, false).unwrap(), haystack).unwrap()
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
    fn other_dialects_are_named() {
        for (p, named) in [
            (r"(?P<w>\w+) (?P=w)", "backreference `(?P=w)`"),
            (r"(?<w>\w+) \k<w>", r"backreference `\k<w>`"),
            (r"(?<w>\w+) \k'w'", r"backreference `\k'w'`"),
            (r"(?<w>\w+) \k{w}", r"backreference `\k{w}`"),
            (r"(\w+) \g{1}", r"backreference `\g{1}`"),
            (r"(\w+) \g1", r"backreference `\g1`"),
            (r"(\w+) \g{-1}", r"backreference `\g{-1}`"),
            (r"(?>a+)b", "atomic group `(?>…)`"),
        ] {
            let e = check_syntax(p, false, false).unwrap_err();
            assert_eq!(e.code, ErrorCode::UnsupportedRegex, "{p}: {}", e.message);
            assert!(e.message.contains(named), "{p}: {}", e.message);
        }
        let e = check_syntax(r"x(?>ab|a)c", false, false).unwrap_err();
        assert!(e.message.contains("use a plain group instead: `x(?:ab|a)c`"), "{}", e.message);
        assert!(matcher(r"x(?:ab|a)c", false).is_ok());
        // Other unknown flags and escapes stay invalid-regex errors.
        assert_eq!(code(r"(?Q)a"), ErrorCode::InvalidRegex);
        assert_eq!(code(r"\k"), ErrorCode::InvalidRegex);
        assert_eq!(code(r"\q"), ErrorCode::InvalidRegex);
    }

    #[test]
    fn other_errors_classify() {
        assert_eq!(code("foo("), ErrorCode::InvalidRegex);
        assert_eq!(code(r"\p{Nope}"), ErrorCode::InvalidRegex);
        assert_eq!(code(r"a\nb"), ErrorCode::InvalidRegex);
        assert_eq!(code("(a{1000}){1000}"), ErrorCode::RegexTooLarge);
        let deep = format!("{}a{}", "(".repeat(300), ")".repeat(300));
        assert_eq!(code(&deep), ErrorCode::RegexTooLarge);
        assert!(matcher(r"a\nb", true).is_ok());
        assert!(matcher(r"(?<name>x)", false).is_ok());
    }

    #[test]
    fn verbose_comments_survive_grep_regex_wrapping() {
        // grep-regex parses `(?:PATTERN)`: a comment running to the end would swallow the `)`.
        assert!(is_match("(?x)hit#", b"a hit\n"));
        assert!(is_match("(?x) h i t # the word", b"a hit\n"));
        assert!(is_match("(?x)hit # one\n # two", b"a hit\n"));
        assert!(!is_match("(?x)hit#", b"a miss\n"));
        assert_eq!(check_syntax("(?x)hit#", false, false).unwrap(), "(?x)hit#\n");
        assert_eq!(check_syntax("(?x)hit#c\n", false, false).unwrap(), "(?x)hit#c\n");
        assert_eq!(check_syntax("a#b", false, false).unwrap(), "a#b");
        // A literal line break after a comment that ended is not added to: still refused.
        assert_eq!(code("(?x)a#c\n(?-x)\n"), ErrorCode::InvalidRegex);
    }

    #[test]
    fn errors_never_quote_the_wrapper() {
        // The deepest nesting accepted alone is accepted with grep-regex's group around it.
        let deep = format!("{}a{}", "(".repeat(249), ")".repeat(249));
        assert!(matcher(&deep, false).is_ok());
        for p in ["(?x)hit#", "foo(", "(?x)a#(", &format!("{}a{}", "(".repeat(300), ")".repeat(300))] {
            if let Err(e) = matcher(p, false) {
                assert!(!e.message.contains("(?:"), "{p}: {}", e.message);
            }
        }
        let e = matcher("(?x)foo(#", false).unwrap_err();
        assert!(e.message.contains("unclosed group") && !e.message.contains("(?:"), "{}", e.message);
        assert_eq!(
            matcher_error("regex parse error:\n    (?:x\n    ^\nerror: unclosed group"),
            "error: unclosed group"
        );
    }

    #[test]
    fn anchors_match_before_crlf() {
        assert!(is_match("here$", b"end here\r\n"));
        assert!(is_match("^more$", b"end here\r\nmore\r\n"));
        assert!(is_match("here$", b"end here\n"));
        assert!(!is_match("here$", b"here not\r\n"));
        assert!(matcher("here$", true).is_ok_and(|m| grep_matcher::Matcher::is_match(&m, b"end here\r\n").unwrap()));
        // A `\r` in the pattern is allowed (only `\n` is a line break to a line search).
        assert!(is_match(r"here\r", b"end here\r\n"));
    }

    #[test]
    fn long_patterns_give_bounded_errors() {
        let long = "a".repeat(200_000);
        for p in [
            format!("{long}("),
            format!("({long}"),
            format!("{long}(?=x){long}"),
            format!("(?<!{long}){long}"),
            format!("({long})\\1"),
            format!(r"{long}\n"),
            format!("({long}){{1000}}"),
            format!(r"{long}\p{{Nope}}"),
            format!("{}{long}{}", "(".repeat(300), ")".repeat(300)),
        ] {
            let e = matcher(&p, false).unwrap_err();
            assert!(e.message.len() < 2000, "{} characters: {}", e.message.len(), &e.message[..300]);
            assert!(e.message.contains("…(") && e.message.contains(" more characters)"), "{}", e.message);
        }
        let e = matcher(&format!("{long}("), false).unwrap_err();
        assert!(e.message.contains("regex parse error at character 200001 of 200001:"), "{}", e.message);
        assert!(
            e.message.contains(&format!("\n    …{}(\n    {}^\nerror: unclosed group", "a".repeat(60), " ".repeat(61))),
            "{}",
            e.message
        );
    }

    #[test]
    fn a_line_over_the_heap_limit_keeps_the_results_before_it() {
        // A fixture a conformance case cannot make: a short line, then one over 64 MiB.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.txt");
        let mut data = b"hit\n".to_vec();
        data.resize(data.len() + HEAP_LIMIT + 1, b'a');
        data.extend_from_slice(b"\nhit\n");
        std::fs::write(&path, &data).unwrap();
        let m = matcher("hit", false).unwrap();
        for mode in [Mode::Count, Mode::Content] {
            let b = searcher_builder(mode, 0, false);
            let mut v = GrepVisitor::new(&b, &m, mode);
            let dir_handle = crate::sandbox::confined::DirHandle::open_root(dir.path()).unwrap();
            let opened = dir_handle
                .open_file(std::ffi::OsStr::new("x.txt"))
                .map_err(|e| ToolError::new(ErrorCode::Io, e.to_string()));
            v.search(path.clone(), opened);
            assert_eq!(v.acc.searched, 0, "a failed search is not counted as searched");
            assert_eq!(v.acc.failures, vec![Failure { path: path.clone(), why: Why::LongLine }]);
            let mut acc = Accum::new(mode);
            acc.merge(v.acc);
            let (mut text, mut truncated) = (String::new(), false);
            assert!(acc.render(dir.path(), dir.path(), false, &mut text, &mut truncated));
            let shown = path.display();
            let expected = if mode == Mode::Count { format!("{shown}:1\n") } else { format!("{shown}:1:hit\n") };
            assert_eq!(text, expected);
            let note = acc.failure_note(dir.path(), dir.path()).unwrap();
            assert_eq!(
                note,
                format!(
                    "[1 file could not be searched: {shown} (it has a line longer than 64 MiB; only the lines before \
                     it were searched)]"
                )
            );
        }
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
