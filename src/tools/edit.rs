//! `edit`: replace exact text in a file the model has read in this session.
//!
//! old_string must match byte for byte: nothing is normalised, trimmed or fuzzy-matched, so a
//! miss changes nothing, and the error says precisely what differs ([`nearest`]). One call is
//! one replacement (`old_string`/`new_string`) or an atomic batch (`edits`, applied in order,
//! each to the result of the one before, all or nothing), written with one atomic rename.
//! Afterwards the read record holds the new version, so the next edit needs no re-read.

mod ambiguous;
mod endings;
mod nearest;
mod other_file;
mod remaining;
pub(crate) use nearest::strip_line_numbers;

use std::ffi::{OsStr, OsString};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Value, json};

use super::fsutil::{self, Existing, FileIdentity};
use super::read::{LINE_CUT_MARKER, MAX_LINE_CHARS, cut_line, mark_controls};
use super::{
    ErrorCode, Tool, ToolContext, ToolError, ToolFailure, ToolOutput, ToolResult, human_bytes, io_error, plural,
    suggest,
};
use crate::sandbox::confined::{DirHandle, DirLock};
use crate::store::ReadRecord;
use endings::Endings;

pub struct Edit;

const DESCRIPTION: &str = "Replace exact text in a file. old_string must match the file byte for byte, including whitespace, indentation and line endings: copy it from read's output without the line-number prefix. Include enough surrounding context to make it unique, or set replace_all to replace every occurrence. You must read the file with read in this session first. Give either old_string and new_string (one replacement), or edits: several {old_string, new_string, replace_all} replacements applied in order, each to the result of the one before, all or nothing. An empty old_string creates a new file holding new_string. Returns the changed lines, numbered.";

/// Occurrence lines listed in an ambiguous-match error.
const MAX_LISTED: usize = 20;
/// Context lines shown around a changed region.
const CONTEXT: usize = 3;
/// Changed regions shown after a replace_all or a batch.
const MAX_WINDOWS: usize = 3;
/// Lines shown of one changed region and its context.
const MAX_WINDOW_LINES: usize = 40;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    path: String,
    old_string: Option<String>,
    new_string: Option<String>,
    replace_all: Option<bool>,
    edits: Option<Vec<EditArg>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EditArg {
    old_string: String,
    new_string: String,
    replace_all: Option<bool>,
}

/// One replacement.
#[derive(Debug, Clone)]
struct Member {
    old: String,
    new: String,
    all: bool,
}

/// What the call asks for: one replacement, or a batch given as `edits`.
#[derive(Clone)]
struct Plan {
    members: Vec<Member>,
    batch: bool,
}

impl Tool for Edit {
    fn name(&self) -> &'static str {
        "edit"
    }

    fn description(&self) -> &'static str {
        DESCRIPTION
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Absolute path."},
                "old_string": {"type": "string", "description": "Exact text to replace, including indentation. Must be unique in the file unless replace_all is true."},
                "new_string": {"type": "string", "description": "Replacement text. Must differ from old_string."},
                "replace_all": {"type": "boolean", "description": "Replace every occurrence. Default false."},
                "edits": {
                    "type": "array",
                    "description": "Instead of old_string/new_string: several replacements, applied in order, all or nothing.",
                    "items": {
                        "type": "object",
                        "properties": {
                            "old_string": {"type": "string"},
                            "new_string": {"type": "string"},
                            "replace_all": {"type": "boolean"}
                        },
                        "required": ["old_string", "new_string"]
                    }
                }
            },
            "required": ["path"]
        })
    }

    fn mutates(&self) -> bool {
        true
    }

    fn run(&self, ctx: &ToolContext<'_>, args: Value) -> ToolResult {
        let mut args: Args = super::parse_args(self.name(), args)?;
        let raw_path = std::mem::take(&mut args.path);
        let plan = Plan::from_args(args)?;
        let path = ctx.workspace.resolve("path", &raw_path)?;
        let shown = path.shown.as_path();
        let real = path.real.as_path();
        crate::approval::gate::path(ctx, self.name(), shown, real)?;
        // What this session knew when the call began (see write).
        let known = ctx.session.last_read(real).map_err(ToolFailure::Internal)?;

        let Some((dir, name)) = fsutil::open_parent(ctx.workspace, "edit", shown, real)? else {
            return create(ctx, &plan, shown, real, None);
        };
        let lock = dir.lock().map_err(|e| io_error("edit", shown, &e))?;
        match fsutil::existing(&dir, &name, "edit", shown, real)? {
            Existing::Dir => Err(ToolError::new(
                ErrorCode::IsDirectory,
                format!(
                    "{} is a directory, not a file; edit changes one file. Give the path of a file in it (to list them use glob, e.g. {{\"pattern\": \"*\", \"path\": \"{}\"}}).",
                    shown.display(),
                    shown.display()
                ),
            )
            .into()),
            Existing::Other(kind) => Err(ToolError::new(
                ErrorCode::Io,
                format!("{} is {}, not a regular file; edit only changes regular files.", shown.display(), kind.describe()),
            )
            .into()),
            Existing::File { bytes, meta } => {
                let target = Target { dir: &dir, name: &name, mode: meta.mode, _lock: lock };
                edit_existing(ctx, &plan, shown, real, known.as_ref(), bytes, &target, Links { count: meta.nlink })
            }
            Existing::Absent => create(ctx, &plan, shown, real, Some((dir, name, lock))),
        }
    }
}

/// Where an edit writes: the file's directory (locked) and name, and the mode to keep.
struct Target<'a> {
    dir: &'a DirHandle,
    name: &'a OsStr,
    mode: u32,
    _lock: DirLock,
}

impl Plan {
    fn from_args(a: Args) -> Result<Plan, ToolError> {
        let invalid =
            |what: &str| ToolError::new(ErrorCode::InvalidArguments, format!("invalid arguments for edit: {what}"));
        let forms = "Give either old_string and new_string (one replacement), or edits (a list of {\"old_string\": ..., \"new_string\": ...} applied in order, all or nothing)";
        // An empty edits beside old_string/new_string is no batch: small models fill every
        // field of the schema (`"edits": []`), or repeat the one replacement in it; either way
        // the one replacement is plain.
        let same = |e: &[EditArg]| match (&a.old_string, &a.new_string) {
            (Some(old), Some(new)) => e.iter().all(|m| &m.old_string == old && &m.new_string == new),
            _ => e.is_empty() && (a.old_string.is_some() || a.new_string.is_some()),
        };
        let edits = a.edits.filter(|e| !same(e));
        match (edits, a.old_string, a.new_string) {
            (Some(_), Some(_), _) | (Some(_), _, Some(_)) => Err(invalid(&format!(
                "both old_string/new_string and edits are given. {forms}, not both: to make this replacement part of the batch, add it to edits."
            ))),
            (Some(edits), None, None) => {
                if edits.is_empty() {
                    return Err(invalid(&format!("edits is empty. {forms}.")));
                }
                if a.replace_all == Some(true) {
                    return Err(invalid(
                        "replace_all at the top level applies only to old_string/new_string. With edits, set replace_all inside each member that should replace every occurrence.",
                    ));
                }
                let members = edits
                    .into_iter()
                    .map(|e| Member { old: e.old_string, new: e.new_string, all: e.replace_all.unwrap_or(false) })
                    .collect();
                Ok(Plan { members, batch: true })
            }
            (None, Some(old), Some(new)) => {
                Ok(Plan { members: vec![Member { old, new, all: a.replace_all.unwrap_or(false) }], batch: false })
            }
            (None, Some(_), None) => Err(invalid(
                "old_string is given but new_string is missing. Give both (an empty new_string deletes old_string).",
            )),
            (None, None, Some(_)) => Err(invalid(
                "new_string is given but old_string is missing. Give the exact text to replace as old_string (an empty old_string creates a new file).",
            )),
            (None, None, None) => Err(invalid(&format!(
                "no replacement is given. {forms}, e.g. {{\"path\": \"/abs/file\", \"old_string\": \"x = 1\", \"new_string\": \"x = 2\"}}."
            ))),
        }
    }

    /// The error of member `i`, as the model must read it: which member, and for a batch that
    /// none of it was applied.
    fn member_error(&self, i: usize, code: ErrorCode, detail: String) -> ToolError {
        if !self.batch {
            return ToolError::new(code, detail);
        }
        let n = self.members.len();
        let none = if n == 1 {
            "The edit was not applied.".to_string()
        } else {
            format!("None of the {n} edits was applied (edits are all or nothing).")
        };
        ToolError::new(code, format!("edits[{i}]: {detail}\n{none}"))
    }

    /// For a batch member after the first, which text its line numbers refer to.
    fn intermediate_note(&self, i: usize) -> String {
        match i {
            0 => String::new(),
            1 => {
                "\n(Line numbers are those of the text after edits[0], which matched but was not applied.)".to_string()
            }
            _ => format!(
                "\n(Line numbers are those of the text after edits[0]-edits[{}], which matched but were not applied.)",
                i - 1
            ),
        }
    }
}

/// The identical-strings check of member `i`. `endings` is the line ending new_string's line
/// breaks were converted to, if they were.
fn check_identical(plan: &Plan, i: usize, endings: Option<Endings>) -> Result<(), ToolError> {
    let m = &plan.members[i];
    if m.old != m.new {
        return Ok(());
    }
    let detail = if let Some(e) = endings {
        format!(
            "new_string differs from old_string only in its line breaks, and edit writes them as {} like the rest of the file, so this edit would change nothing. To change the file's line endings, use bash (e.g. {}).",
            e.name(),
            e.convert_away()
        )
    } else if m.old.is_empty() {
        "old_string and new_string are both empty, so there is nothing to do. To create an empty file, use write with content \"\".".to_string()
    } else if let Some(bare) = strip_line_numbers(&m.old) {
        // The 1.5B model sent `"1\t'use strict';"` as both strings, twice, then gave up
        // quoting this error: what it copied was read's line number, not the file's text.
        format!(
            "old_string and new_string are identical, so this edit would change nothing. Both also start with read's line number and a tab (`{}`), which are not part of the file's text; without them old_string is {}. Put the text the file should have in new_string, without line numbers.",
            m.old.split('\t').next().unwrap_or_default().trim_start().to_string() + "\\t",
            serde_json::to_string(&bare).unwrap_or_default()
        )
    } else {
        "old_string and new_string are identical, so this edit would change nothing. Put the text the file should have in new_string.".to_string()
    };
    Err(plan.member_error(i, ErrorCode::IdenticalStrings, detail))
}

fn empty_old_error(plan: &Plan, i: usize, shown: &Path, text: Option<&str>) -> ToolError {
    let detail = match text {
        Some(t) => format!(
            "old_string is empty, but {} already exists ({}, {}). An empty old_string only creates a new file. To change this file, give the exact text to replace as old_string (copy it from read's output); to replace all of its content, use write.",
            shown.display(),
            plural(fsutil::lines_from(fsutil::count_newlines(t.as_bytes()), t.as_bytes()) as u64, "line", "lines"),
            human_bytes(t.len() as u64)
        ),
        None => format!(
            "old_string is empty, but by then {} exists: edits[0] creates it. Only edits[0] may have an empty old_string (to create the file); give the exact text to replace here.",
            shown.display()
        ),
    };
    plan.member_error(i, ErrorCode::EmptyOldString, detail)
}

/// The hard links of the file edited: its link count before the edit.
#[derive(Debug, Clone, Copy)]
struct Links {
    count: u64,
}

#[allow(clippy::too_many_arguments)]
fn edit_existing(
    ctx: &ToolContext<'_>,
    plan: &Plan,
    shown: &Path,
    real: &Path,
    known: Option<&ReadRecord>,
    bytes: Vec<u8>,
    target: &Target<'_>,
    links: Links,
) -> ToolResult {
    // The refusals below are rare: they hash on their own. The common path hashes in parallel.
    let refuse = |e: ToolError| ToolFailure::Model(e.with_file(FileIdentity::new(shown, fsutil::sha256_hex(&bytes))));

    if let Some(e) = binary_refusal(shown, &bytes) {
        return Err(refuse(e));
    }
    let text = std::str::from_utf8(&bytes).map_err(|e| refuse(utf8_error(shown, &bytes, e.valid_up_to())))?;
    // new_string's line breaks follow the file's one line ending (old_string still matches
    // byte for byte: this is about what is written, not what is matched).
    let endings = Endings::of(text);
    let (plan, converted) = match endings {
        Some(e) => e.adapt(plan),
        None => (std::borrow::Cow::Borrowed(plan), Vec::new()),
    };
    let plan = plan.as_ref();
    for i in 0..plan.members.len() {
        check_identical(plan, i, endings.filter(|_| converted.contains(&i))).map_err(refuse)?;
        if plan.members[i].old.is_empty() {
            return Err(refuse(empty_old_error(plan, i, shown, Some(text))));
        }
    }

    // Hash the current content while the replacements are worked out; neither is acted on
    // before the read checks below.
    let (sha, applied) = std::thread::scope(|s| {
        let hasher = s.spawn(|| fsutil::sha256_hex(&bytes));
        let applied = apply(plan, text, 0);
        (hasher.join(), applied)
    });
    let sha = sha.map_err(|_| ToolFailure::Internal(anyhow::anyhow!("hashing {} panicked", shown.display())))?;
    let ident = FileIdentity::new(shown, sha.clone());
    let with = |e: ToolError| ToolFailure::Model(e.with_file(ident.clone()));

    match known {
        None => {
            return Err(with(ToolError::new(
                ErrorCode::NotRead,
                format!(
                    "{} has not been read in this session, and edit changes only text you have seen. Read it first with read {{\"path\": \"{}\"}}, then retry this edit.",
                    shown.display(),
                    shown.display()
                ),
            )));
        }
        Some(rec) if rec.sha256 != sha => {
            return Err(with(ToolError::new(
                ErrorCode::StaleRead,
                format!(
                    "{} changed since you last read it (you read sha256 {}, it is now sha256 {}), so old_string may be based on text that is no longer there. Read it again with read {{\"path\": \"{}\"}}, then redo the edit against the current text.",
                    shown.display(),
                    fsutil::short(&rec.sha256),
                    fsutil::short(&sha),
                    shown.display()
                ),
            )));
        }
        Some(_) => {}
    }

    let applied = applied.map_err(|miss| with(miss_error(ctx, plan, miss, (shown, real), text)))?;
    // One replacement always changes the text; a batch may undo itself.
    if plan.batch && applied.text == text {
        return Err(with(ToolError::new(
            ErrorCode::IdenticalStrings,
            format!(
                "the {} edits cancel out: applied in order they leave {} exactly as it is, so there is nothing to write. Check that each edit does what you meant.",
                plan.members.len(),
                shown.display()
            ),
        )));
    }

    let (new_sha, mtime_ns) =
        write_and_hash(target, applied.text.as_bytes(), Some(&sha), shown, real).map_err(|e| match e {
            ToolFailure::Model(e) => with(e),
            other => other,
        })?;
    record(ctx, real, &applied, &new_sha, mtime_ns)?;
    let mut notes = Vec::new();
    if let Some(e) = endings.filter(|_| !converted.is_empty()) {
        let whose = if plan.batch {
            let list: Vec<String> = converted.iter().map(|i| format!("edits[{i}]")).collect();
            format!("the new_string of {}", list.join(", "))
        } else {
            "new_string".to_string()
        };
        notes.push(format!(
            "The line breaks in {whose} were written as {}, the file's line ending, so that it keeps one kind.",
            e.name()
        ));
    }
    if let [m] = plan.members.as_slice()
        && !plan.batch
        && !m.all
    {
        notes.extend(remaining::note(&applied.text, &m.old, &m.new));
    }
    notes.extend(fsutil::hard_link_note("edit", shown, links.count));
    if let Some(note) = fsutil::moved_note(target.dir, ctx.workspace, target.name) {
        notes.push(note.trim_start().to_string());
    }
    let (text, truncated) = render(shown, plan, &applied, Some(applied.lines_before), &new_sha, None, &notes);
    Ok(ToolOutput { mutated: true, truncated, file: Some(FileIdentity::new(shown, new_sha)), ..ToolOutput::new(text) })
}

/// Why edit refuses a file that is not UTF-8 text with its bytes as they are: a binary format,
/// UTF-16 or UTF-32 text, or a NUL byte anywhere (read stops at that line). Invalid UTF-8 is
/// refused after this, by [`utf8_error`].
fn binary_refusal(shown: &Path, bytes: &[u8]) -> Option<ToolError> {
    let head = &bytes[..bytes.len().min(fsutil::SNIFF_BYTES)];
    let size = human_bytes(bytes.len() as u64);
    let p = shown.display();
    let message = if let Some(kind) = fsutil::file_type(head) {
        format!(
            "{p} is a binary file ({kind}, {size}); edit changes UTF-8 text only. To change a binary file use bash; to replace it with text, use write."
        )
    } else if let Some(w) = fsutil::wide_text(head) {
        format!(
            "{p} is {} text (it starts with a byte-order mark), {size}; edit changes UTF-8 text only. Convert it to UTF-8 first with bash, if the project allows (this rewrites it): `iconv -f {iconv} -t UTF-8 {p} > {p}.tmp && mv {p}.tmp {p}`, then read it and edit. Or change it with bash as it is.",
            w.name,
            iconv = w.iconv
        )
    } else {
        let nul = memchr::memchr(0, bytes)?;
        let line = fsutil::count_newlines(&bytes[..nul]) + 1;
        let text = match line {
            1 => String::new(),
            2 => " read shows its line 1, which is text, but".to_string(),
            _ => format!(" read shows lines 1-{}, which are text, but", line - 1),
        };
        format!(
            "{p} holds binary data: a NUL byte on line {line}, at byte {nul} of its {size}.{text} edit changes text files only (it rewrites the whole file). To change this file use bash (e.g. sed or a short script)."
        )
    };
    Some(ToolError::new(ErrorCode::BinaryFile, message))
}

/// Write atomically (the content must still be `expected` right before the rename), hashing
/// the new content while the disk syncs. Returns its sha256 and the new file's mtime.
fn write_and_hash(
    target: &Target<'_>,
    new: &[u8],
    expected: Option<&str>,
    shown: &Path,
    real: &Path,
) -> Result<(String, i64), ToolFailure> {
    let (written, sha) = std::thread::scope(|s| {
        let hasher = s.spawn(|| fsutil::sha256_hex(new));
        (fsutil::replace(target.dir, target.name, new, target.mode, expected, shown, real), hasher.join())
    });
    let meta = written?;
    let sha = sha.map_err(|_| ToolFailure::Internal(anyhow::anyhow!("hashing {} panicked", shown.display())))?;
    Ok((sha, meta.mtime_ns))
}

/// After an edit the model knows the whole new content: record it as read, so the next edit
/// of this version needs no re-read.
fn record(ctx: &ToolContext<'_>, real: &Path, a: &Applied, sha: &str, mtime_ns: i64) -> Result<(), ToolFailure> {
    let total = a.lines as u64;
    let rec = ReadRecord {
        sha256: sha.to_string(),
        size: a.text.len() as u64,
        mtime_ns,
        total_lines: total,
        lines_seen: if total > 0 { vec![(1, total)] } else { Vec::new() },
    };
    ctx.session.record_read(real, &rec).map_err(ToolFailure::Internal)
}

/// A file that does not exist: an empty old_string (of the first member) creates it.
fn create(
    ctx: &ToolContext<'_>,
    plan: &Plan,
    shown: &Path,
    real: &Path,
    parent: Option<(DirHandle, OsString, DirLock)>,
) -> ToolResult {
    check_identical(plan, 0, None)?;
    let first = &plan.members[0];
    if !first.old.is_empty() {
        let mut e = suggest::not_found(ctx, shown);
        e.message.push_str(" To create a new file, use write, or edit with an empty old_string.");
        return Err(e.into());
    }
    for i in 1..plan.members.len() {
        check_identical(plan, i, None)?;
        if plan.members[i].old.is_empty() {
            return Err(empty_old_error(plan, i, shown, None).into());
        }
    }
    let applied = apply(plan, &first.new, 1).map_err(|miss| miss_error(ctx, plan, miss, (shown, real), &first.new))?;

    let (dir, name, lock, created_dirs) = match parent {
        Some((dir, name, lock)) => (dir, name, lock, Vec::new()),
        None => {
            let (dir, name, created) =
                fsutil::create_parent(ctx.workspace, "edit", ctx.config.write.create_parent_dirs, shown, real)?;
            let lock = dir.lock().map_err(|e| io_error("edit", shown, &e))?;
            (dir, name, lock, created)
        }
    };
    let mode = ctx.config.write.mode();
    let target = Target { dir: &dir, name: &name, mode, _lock: lock };
    let (sha, mtime_ns) = match write_and_hash(&target, applied.text.as_bytes(), None, shown, real) {
        Ok(done) => done,
        Err(ToolFailure::Model(mut err)) if !created_dirs.is_empty() => {
            err.mutated = true;
            err.message.push_str(&format!(
                " The file was not created, but these directories were: {}.",
                fsutil::list_paths(&created_dirs)
            ));
            return Err(err.into());
        }
        Err(e) => return Err(e),
    };
    record(ctx, real, &applied, &sha, mtime_ns)?;
    let notes: Vec<String> =
        fsutil::moved_note(&dir, ctx.workspace, &name).map(|n| n.trim_start().to_string()).into_iter().collect();
    let (text, truncated) = render(shown, plan, &applied, None, &sha, Some((mode, &created_dirs)), &notes);
    Ok(ToolOutput { mutated: true, truncated, file: Some(FileIdentity::new(shown, sha)), ..ToolOutput::new(text) })
}

fn utf8_error(shown: &Path, bytes: &[u8], at: usize) -> ToolError {
    let line_start = bytes[..at].iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1);
    let line = bytes[..at].iter().filter(|&&b| b == b'\n').count() + 1;
    let byte = bytes.get(at).copied().unwrap_or(0);
    ToolError::new(
        ErrorCode::InvalidUtf8,
        format!(
            "{} is not valid UTF-8: the first invalid byte, 0x{byte:02x}, is on line {line}, byte {} of that line (byte {at} of the file). edit matches UTF-8 text only, so it cannot change this file. If the file should be UTF-8, rewrite it whole with write (write takes UTF-8 text, so the invalid bytes will not survive); to change the bytes as they are, use bash (e.g. sed or a short script).",
            shown.display(),
            at - line_start + 1
        ),
    )
}

// ---------------------------------------------------------------------------------------------
// Applying the replacements

/// The result of all members, with the byte ranges of the new text they wrote.
struct Applied {
    text: String,
    /// Sorted, merged byte ranges of `text` that the edits wrote (empty for a deletion).
    regions: Vec<(usize, usize)>,
    /// Occurrences replaced by each member.
    counts: Vec<usize>,
    /// Lines of the text the members were applied to, and of the result.
    lines_before: usize,
    lines: usize,
}

/// Member `index` did not apply to `text` (the text as the members before it left it).
struct Miss {
    index: usize,
    text: String,
    ambiguous: bool,
}

enum Found {
    None,
    Many,
    /// Start of each occurrence replaced.
    At(Vec<usize>),
}

/// Where member `m` applies in `text`. A unique edit needs exactly one start position (an
/// overlapping second one is ambiguous too); replace_all takes the non-overlapping
/// occurrences from the left, like `str::replace`.
fn locate(text: &str, m: &Member) -> Found {
    if m.all {
        let at: Vec<usize> = text.match_indices(m.old.as_str()).map(|(p, _)| p).collect();
        return if at.is_empty() { Found::None } else { Found::At(at) };
    }
    let Some(p) = text.find(m.old.as_str()) else { return Found::None };
    let next = p + m.old.chars().next().map_or(1, char::len_utf8);
    if text[next..].contains(m.old.as_str()) { Found::Many } else { Found::At(vec![p]) }
}

/// Apply members `from..` in order to `start`. Pure: nothing is written.
fn apply(plan: &Plan, start: &str, from: usize) -> Result<Applied, Miss> {
    let mut regions: Vec<(usize, usize)> = if from == 1 { vec![(0, start.len())] } else { Vec::new() };
    let mut counts = vec![0; from];
    let start_nl = fsutil::count_newlines(start.as_bytes());
    let mut nl = start_nl as isize;
    let mut owned: Option<String> = None;
    for (i, m) in plan.members.iter().enumerate().skip(from) {
        let text = owned.as_deref().unwrap_or(start);
        let at = match locate(text, m) {
            Found::At(at) => at,
            found => return Err(Miss { index: i, text: text.to_string(), ambiguous: matches!(found, Found::Many) }),
        };
        let (old_len, new_len) = (m.old.len(), m.new.len());
        let mut out = String::with_capacity(text.len() - at.len() * old_len + at.len() * new_len);
        let mut last = 0;
        for &p in &at {
            out.push_str(&text[last..p]);
            out.push_str(&m.new);
            last = p + old_len;
        }
        out.push_str(&text[last..]);
        for r in &mut regions {
            *r = (map_pos(r.0, &at, old_len, new_len, false), map_pos(r.1, &at, old_len, new_len, true));
        }
        regions.extend(at.iter().enumerate().map(|(k, &p)| {
            let s = p - k * old_len + k * new_len;
            (s, s + new_len)
        }));
        regions = merge(regions);
        nl += at.len() as isize
            * (fsutil::count_newlines(m.new.as_bytes()) as isize - fsutil::count_newlines(m.old.as_bytes()) as isize);
        counts.push(at.len());
        owned = Some(out);
    }
    let text = owned.unwrap_or_else(|| start.to_string());
    let lines = fsutil::lines_from(nl.max(0) as usize, text.as_bytes());
    Ok(Applied { lines_before: fsutil::lines_from(start_nl, start.as_bytes()), lines, text, regions, counts })
}

/// The error for a member that did not apply. `original` is the text before any member.
fn miss_error(
    ctx: &ToolContext<'_>,
    plan: &Plan,
    miss: Miss,
    (shown, real): (&Path, &Path),
    original: &str,
) -> ToolError {
    let m = &plan.members[miss.index];
    let i = miss.index;
    if miss.ambiguous {
        let detail = format!("{}{}", ambiguous::explain(&miss.text, &m.old, shown), plan.intermediate_note(i));
        return plan.member_error(i, ErrorCode::AmbiguousMatch, detail);
    }
    let mut detail = format!("old_string was not found in {}.", shown.display());
    detail.push_str(&plan.intermediate_note(i));
    detail.push('\n');
    if let Some(note) = other_file::note(ctx, &m.old, real) {
        let _ = writeln!(detail, "{note}");
    }
    if i > 0 && original.contains(m.old.as_str()) {
        let (earlier, leave) =
            if i == 1 { ("edits[0]".to_string(), "leaves") } else { (format!("edits[0]-edits[{}]", i - 1), "leave") };
        let _ = writeln!(
            detail,
            "old_string does occur in the file as it is now, but {earlier} changed that text first: edits apply in order, each to the result of the one before. Write old_string against the text as {earlier} {leave} it, or fold this change into the member that touches the same text."
        );
    }
    detail.push_str(&nearest::explain(&miss.text, &m.old, &m.new, &shown.display().to_string()));
    plan.member_error(i, ErrorCode::NoMatch, detail)
}

/// Where byte `x` of the text before a replacement lands after it. A position inside a
/// replaced occurrence moves to the start (or, for the end of a range, the end) of its
/// replacement.
fn map_pos(x: usize, at: &[usize], old_len: usize, new_len: usize, is_end: bool) -> usize {
    let k = at.partition_point(|&p| p + old_len <= x);
    if k < at.len() && at[k] < x {
        let s = at[k] - k * old_len + k * new_len;
        return if is_end { s + new_len } else { s };
    }
    x - k * old_len + k * new_len
}

fn merge(mut v: Vec<(usize, usize)>) -> Vec<(usize, usize)> {
    v.sort_unstable();
    let mut out: Vec<(usize, usize)> = Vec::with_capacity(v.len());
    for (s, e) in v {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

/// The line of byte `p`, counting on from the last position asked (`counted`, at `line`).
fn line_at(text: &str, counted: &mut usize, line: &mut usize, p: usize) -> usize {
    if p > *counted {
        *line += fsutil::count_newlines(&text.as_bytes()[*counted..p]);
        *counted = p;
    }
    *line
}

// ---------------------------------------------------------------------------------------------
// The observation

/// One changed region in lines of the new text (1-based, inclusive), with its byte range.
struct Changed {
    first: usize,
    last: usize,
    start: usize,
    end: usize,
}

fn changed_lines(text: &str, regions: &[(usize, usize)], total: usize) -> Vec<Changed> {
    let (mut counted, mut line) = (0usize, 1usize);
    let top = total.max(1);
    regions
        .iter()
        .map(|&(s, e)| {
            let first = line_at(text, &mut counted, &mut line, s);
            let last = if e > s { line_at(text, &mut counted, &mut line, e - 1) } else { first };
            Changed { first: first.min(top), last: last.min(top), start: s, end: e }
        })
        .collect()
}

fn span(first: usize, last: usize) -> String {
    if last <= first { format!("{first}") } else { format!("{first}-{last}") }
}

/// "line 5" / "lines 5-7" / "lines 3, 8-9 and 12" for the changed regions (capped).
fn where_changed(changed: &[Changed]) -> String {
    let spans: Vec<String> = changed.iter().take(MAX_LISTED).map(|c| span(c.first, c.last)).collect();
    let single = changed.len() == 1 && changed[0].first == changed[0].last;
    let mut s = format!("{} {}", if single { "line" } else { "lines" }, spans.join(", "));
    if changed.len() > MAX_LISTED {
        let _ = write!(s, " and {} more places", changed.len() - MAX_LISTED);
    }
    s
}

fn render(
    shown: &Path,
    plan: &Plan,
    a: &Applied,
    old_lines: Option<usize>,
    sha: &str,
    created: Option<(u32, &[PathBuf])>,
    notes: &[String],
) -> (String, bool) {
    let total = a.lines;
    let changed = changed_lines(&a.text, &a.regions, total);
    let mut out = String::new();
    let replacements: usize = a.counts.iter().sum();
    let lines_now = plural(total as u64, "line", "lines");
    let size = human_bytes(a.text.len() as u64);
    let short = fsutil::short(sha);

    if let Some((mode, dirs)) = created {
        let _ = write!(out, "Created {} ({size}, {lines_now}, mode {mode:04o}, sha256 {short}).", shown.display());
        if plan.batch && plan.members.len() > 1 {
            let _ = write!(
                out,
                " Its content is edits[0]'s new_string with the later edits applied in order ({}).",
                batch_details(plan, a, 1)
            );
        }
        if !dirs.is_empty() {
            let _ = write!(out, " Created directories: {}.", fsutil::list_paths(dirs));
        }
    } else {
        let deleted_only = plan.members.iter().all(|m| m.new.is_empty());
        let at = where_changed(&changed);
        let _ = write!(out, "Edited {}: ", shown.display());
        if plan.batch {
            let n = plan.members.len();
            let _ = write!(
                out,
                "applied {} in order, {} in all ({}); ",
                plural(n as u64, "edit", "edits"),
                plural(replacements as u64, "replacement", "replacements"),
                batch_details(plan, a, 0)
            );
            let _ =
                write!(out, "{} at {at}.", if deleted_only { "the text was removed" } else { "the changed text is" });
        } else {
            let all = if plan.members[0].all { " (replace_all)" } else { "" };
            let occ = plural(replacements as u64, "occurrence", "occurrences");
            if deleted_only {
                let _ = write!(out, "removed {occ}{all} of old_string, at {at}.");
            } else {
                let _ = write!(out, "replaced {occ}{all}; the new text is at {at}.");
            }
        }
        let was = match old_lines {
            Some(o) if o != total => format!(" (was {o})"),
            _ => String::new(),
        };
        let _ = write!(out, " The file now has {lines_now}{was}, {size}, sha256 {short}.");
    }
    for note in notes {
        out.push(' ');
        out.push_str(note);
    }

    if total == 0 {
        out.push_str("\n[the file is now empty]");
        return (out, false);
    }
    let windows = windows(&a.text, &changed, total);
    let mut truncated = false;
    for (k, w) in windows.iter().take(MAX_WINDOWS).enumerate() {
        if k > 0 {
            out.push_str("\n...");
        }
        let mut n = w.first;
        let mut at = w.start;
        for raw in a.text[w.start..w.end].split('\n').take(MAX_WINDOW_LINES) {
            // A CR is not shown before a line's LF (as read shows CRLF lines); any other CR is.
            let crlf = a.text.as_bytes().get(at + raw.len()) == Some(&b'\n');
            let line = if crlf { raw.strip_suffix('\r').unwrap_or(raw) } else { raw };
            // As read shows it: without a byte-order mark, control characters as symbols.
            let bom = if at == 0 && line.starts_with('\u{feff}') { '\u{feff}'.len_utf8() } else { 0 };
            let line_at = at + bom;
            let line = &line[bom..];
            let (shown_line, note) = show_line(line, line_at, &a.regions, n);
            let _ = write!(out, "\n{n}\t{}", mark_controls(&shown_line).0);
            if let Some(note) = note {
                let _ = write!(out, "\n{note}");
            }
            at += raw.len() + 1;
            n += 1;
        }
        if w.last >= n {
            truncated = true;
            let _ = write!(
                out,
                "\n[lines {}-{} not shown: read with offset {} and limit {} to see them]",
                n,
                w.last,
                n,
                w.last + 1 - n
            );
        }
    }
    if windows.len() > MAX_WINDOWS {
        truncated = true;
        let rest = &windows[MAX_WINDOWS..];
        let mut starts: Vec<String> = rest.iter().take(MAX_LISTED).map(|w| w.region_first.to_string()).collect();
        if rest.len() > MAX_LISTED {
            starts.push("...".to_string());
        }
        let _ = write!(
            out,
            "\n[{} more changed {} not shown, at lines {}; read the file to see them]",
            rest.len(),
            if rest.len() == 1 { "place" } else { "places" },
            starts.join(", ")
        );
    }
    (out, truncated)
}

/// Characters shown of a long line before the change, when the line is shown around it.
const BEFORE_CHANGE: usize = 100;

/// Line `n` of the snippet (starting at byte `at` of the new text), as read shows it: cut at
/// [`MAX_LINE_CHARS`]. When a change in it lies past what that shows, the line is shown
/// around the change instead, with a note saying which characters these are.
fn show_line<'t>(
    line: &'t str,
    at: usize,
    regions: &[(usize, usize)],
    n: usize,
) -> (std::borrow::Cow<'t, str>, Option<String>) {
    let (shown, cut) = cut_line(line);
    if !cut {
        return (shown, None);
    }
    // The first change that starts in this line.
    let Some(&(start, end)) = regions.iter().find(|r| r.0 >= at && r.0 < at + line.len().max(1)) else {
        return (shown, None);
    };
    let col = line[..start - at].chars().count();
    if col + BEFORE_CHANGE / 2 < MAX_LINE_CHARS {
        return (shown, None);
    }
    let total = line.chars().count();
    let from = col.saturating_sub(BEFORE_CHANGE).min(total.saturating_sub(MAX_LINE_CHARS));
    let from_byte = line.char_indices().nth(from).map_or(line.len(), |(i, _)| i);
    let (rest, rest_cut) = cut_line(&line[from_byte..]);
    let shown_to = from + rest.chars().count() - if rest_cut { LINE_CUT_MARKER.chars().count() } else { 0 };
    let new_len = line[start - at..(end - at).min(line.len())].chars().count();
    let what = if new_len == 0 {
        format!("the text was removed at character {}", col + 1)
    } else {
        format!("the new text is characters {}-{}", col + 1, col + new_len)
    };
    let note = format!(
        "[line {n} has {total} characters: shown are characters {}-{shown_to}, around the change ({what})]",
        from + 1
    );
    (format!("[...{from} characters...]{rest}").into(), Some(note))
}

/// "edits[0]: 1 occurrence, edits[1]: 3 occurrences with replace_all".
fn batch_details(plan: &Plan, a: &Applied, from: usize) -> String {
    plan.members
        .iter()
        .zip(&a.counts)
        .enumerate()
        .skip(from)
        .map(|(i, (m, &c))| {
            let all = if m.all { " with replace_all" } else { "" };
            format!("edits[{i}]: {}{all}", plural(c as u64, "occurrence", "occurrences"))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A run of lines shown: changed regions with their context, merged where they touch.
struct Shown {
    first: usize,
    last: usize,
    /// Byte range of lines `first..=last` (without the final newline).
    start: usize,
    end: usize,
    /// First changed line in it.
    region_first: usize,
}

fn windows(text: &str, changed: &[Changed], total: usize) -> Vec<Shown> {
    let mut out: Vec<Shown> = Vec::new();
    for c in changed {
        let first = c.first.saturating_sub(CONTEXT).max(1);
        let last = (c.last + CONTEXT).min(total);
        // A position at the very end belongs to the last line, as its line number says.
        let clamp = |p: usize| p.min(text.len().saturating_sub(1));
        let anchor_end = if c.end > c.start { c.end - 1 } else { c.start };
        let start = lines_back(text, clamp(c.start), c.first - first);
        let end = lines_forward(text, clamp(anchor_end), last - c.last);
        match out.last_mut() {
            Some(prev) if first <= prev.last + 1 => {
                if last > prev.last {
                    prev.last = last;
                    prev.end = end;
                }
            }
            _ => out.push(Shown { first, last, start, end, region_first: c.first }),
        }
    }
    out
}

/// The start of the line holding byte `pos`, then `k` lines further up.
fn lines_back(text: &str, pos: usize, k: usize) -> usize {
    let b = text.as_bytes();
    let mut start = b[..pos].iter().rposition(|&c| c == b'\n').map_or(0, |p| p + 1);
    for _ in 0..k {
        if start == 0 {
            break;
        }
        start = b[..start - 1].iter().rposition(|&c| c == b'\n').map_or(0, |p| p + 1);
    }
    start
}

/// The end (before its newline) of the line holding byte `pos`, then `k` lines further down.
fn lines_forward(text: &str, pos: usize, k: usize) -> usize {
    let b = text.as_bytes();
    let next_nl = |from: usize| b[from..].iter().position(|&c| c == b'\n').map_or(b.len(), |p| from + p);
    // A region ending in a newline ends its line there.
    let mut end = if b.get(pos) == Some(&b'\n') { pos } else { next_nl(pos.min(b.len())) };
    for _ in 0..k {
        if end >= b.len() {
            break;
        }
        end = next_nl(end + 1);
    }
    end
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(old: &str, new: &str, all: bool) -> Member {
        Member { old: old.into(), new: new.into(), all }
    }

    fn plan(members: Vec<Member>) -> Plan {
        let batch = members.len() > 1;
        Plan { members, batch }
    }

    #[test]
    fn unique_and_overlapping_matches() {
        assert!(matches!(locate("abc abd", &m("ab", "x", false)), Found::Many));
        assert!(matches!(locate("aaa", &m("aa", "b", false)), Found::Many), "overlapping is ambiguous");
        assert!(matches!(locate("aaa", &m("aa", "b", true)), Found::At(v) if v == vec![0]));
        assert!(matches!(locate("xyz", &m("q", "b", false)), Found::None));
        assert!(matches!(locate("héllo", &m("é", "e", false)), Found::At(v) if v == vec![1]));
    }

    #[test]
    fn regions_follow_later_edits() {
        let p = plan(vec![m("b", "BBB", false), m("a", "", false), m("d", "D", false)]);
        let a = apply(&p, "abcd", 0).ok().unwrap();
        assert_eq!(a.text, "BBBcD");
        assert_eq!(a.regions, vec![(0, 3), (4, 5)]);
        assert_eq!(a.counts, vec![1, 1, 1]);
    }

    #[test]
    fn edit_inside_an_earlier_replacement_keeps_one_region() {
        let p = plan(vec![m("b", "xyz", false), m("y", "YY", false)]);
        let a = apply(&p, "abc", 0).ok().unwrap();
        assert_eq!(a.text, "axYYzc");
        assert_eq!(a.regions, vec![(1, 5)]);
    }

    #[test]
    fn ambiguous_lists_lines_capped() {
        let text = "x\n".repeat(30);
        let msg = ambiguous::explain(&text, "x", Path::new("/f"));
        assert!(msg.contains("occurs 30 times"), "{msg}");
        assert!(msg.contains("at lines 1, 2, 3,"), "{msg}");
        assert!(msg.contains("20 and 10 more"), "{msg}");
        let msg = ambiguous::explain("x x\ny\nx\n", "x", Path::new("/f"));
        assert!(msg.contains("at lines 1 (2 times), 3;"), "{msg}");
        assert!(!msg.contains("overlap"), "{msg}");
        let msg = ambiguous::explain("aaa\n", "aa", Path::new("/f"));
        assert!(msg.contains("occurs 2 times") && msg.contains("replace_all would replace 1"), "{msg}");
    }

    #[test]
    fn windows_cover_context_and_merge() {
        let text: String = (1..=20).map(|i| format!("l{i}\n")).collect();
        let p = plan(vec![m("l5\n", "L5\n", false), m("l8\n", "L8\n", false), m("l18\n", "L18\n", false)]);
        let a = apply(&p, &text, 0).ok().unwrap();
        let (out, truncated) = render(Path::new("/f"), &p, &a, Some(20), &"0".repeat(64), None, &[]);
        assert!(!truncated);
        assert!(out.contains("the changed text is at lines 5, 8, 18."), "{out}");
        assert!(out.contains("\n2\tl2\n3\tl3\n4\tl4\n5\tL5\n"), "{out}");
        assert!(out.contains("\n11\tl11\n...\n15\tl15\n"), "{out}");
        assert!(out.ends_with("\n20\tl20"), "{out}");
    }

    #[test]
    fn a_change_far_into_a_long_line_is_shown_around_it() {
        let line = format!("{}NEW{}", "a".repeat(3_000_000), "b".repeat(1_500_000));
        let (shown, note) = show_line(&line, 0, &[(3_000_000, 3_000_003)], 1);
        assert!(shown.starts_with("[...2999900 characters...]aaa"), "{}", &shown[..60]);
        assert!(shown.contains("NEWbbb") && shown.ends_with(LINE_CUT_MARKER));
        assert_eq!(shown.chars().count(), "[...2999900 characters...]".len() + MAX_LINE_CHARS + LINE_CUT_MARKER.len());
        assert_eq!(
            note.unwrap(),
            "[line 1 has 4500003 characters: shown are characters 2999901-3001900, around the change (the new text is characters 3000001-3000003)]"
        );
        // Near the start: the line is shown from its start, as read shows it.
        let (shown, note) = show_line(&line, 0, &[(10, 13)], 1);
        assert!(shown.starts_with("aaa") && note.is_none());
        // A deletion at the very end.
        let (_, note) = show_line(&line, 0, &[(line.len() - 1, line.len() - 1)], 7);
        assert!(note.unwrap().contains("the text was removed at character 4500003"));
    }

    #[test]
    fn unique_edit_on_a_big_file_lands() {
        let text: String = (1..=100_000).map(|i| format!("line number {i} of the file\n")).collect();
        let p = plan(vec![m("line number 54321 of", "LINE 54321 of", false)]);
        let a = apply(&p, &text, 0).ok().unwrap();
        let (out, _) = render(Path::new("/f"), &p, &a, Some(100_000), &"0".repeat(64), None, &[]);
        assert!(out.contains("54321\tLINE 54321 of the file"), "{out}");
    }
}
