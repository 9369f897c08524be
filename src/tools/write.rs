//! `write`: create a file or replace it whole, atomically.
//!
//! Overwriting needs a prior read of the current version in this session, so the model never
//! destroys content it has not seen. Missing parent directories are created only when the
//! operator enabled `write.create_parent_dirs`.

use std::path::Path;

use serde::Deserialize;
use serde_json::{Value, json};

use super::fsutil::{self, Existing, FileIdentity};
use super::{ErrorCode, Tool, ToolContext, ToolError, ToolFailure, ToolOutput, ToolResult, io_error};
use crate::store::{ReadRecord, Session};

pub struct Write;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    path: String,
    content: String,
}

impl Tool for Write {
    fn name(&self) -> &'static str {
        "write"
    }

    fn description(&self) -> &'static str {
        "Write content to a file, creating it or overwriting it entirely. For modifying part of an existing file, use `edit` instead — it is safer and cheaper. Overwriting an existing file requires a prior read of it in this session. The parent directory must already exist."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Absolute path."},
                "content": {"type": "string", "description": "Complete file content."}
            },
            "required": ["path", "content"]
        })
    }

    fn mutates(&self) -> bool {
        true
    }

    fn run(&self, ctx: &ToolContext<'_>, args: Value) -> ToolResult {
        let args: Args = super::parse_args(self.name(), args)?;
        let path = ctx.workspace.resolve("path", &args.path)?;
        if is_placeholder(&args.content) {
            // Qwen2.5-Coder-1.5B wrote `"content": "[...]"` over an 84-line YAML file it had
            // just changed correctly (the suite's config-yaml-value, 2026-12-07).
            return Err(ToolError::new(
                ErrorCode::InvalidArguments,
                format!(
                    "content is {:?}, which stands for text left out, not a file's text: written, {} would hold only that. Give the file's whole text as content; to change part of a file, use edit, with old_string and new_string copied from it.",
                    args.content.trim(),
                    path.shown.display()
                ),
            )
            .into());
        }
        let pasted = pasted_read_output(&args.content, &path.shown)?;
        let unpasted = pasted.as_ref().map(|p| p.text.clone());
        let shown = path.shown.as_path();
        let real = path.real.as_path();
        crate::approval::gate::path(ctx, self.name(), shown, real)?;
        let new = unpasted.as_deref().unwrap_or(&args.content).as_bytes();
        // What this session knew when the call began: the check below is against it, so a
        // change made while the call runs (another call, the guest) is never overwritten.
        let known = ctx.session.last_read(real).map_err(ToolFailure::Internal)?;

        let (dir, name, created_dirs) = match fsutil::open_parent(ctx.workspace, "write", shown, real)? {
            Some((dir, name)) => (dir, name, Vec::new()),
            None => fsutil::create_parent(ctx.workspace, "write", ctx.config.write.create_parent_dirs, shown, real)?,
        };
        let with_dirs = |mut err: ToolError| {
            if !created_dirs.is_empty() {
                err.mutated = true;
                err.message.push_str(&format!(
                    " The file was not written, but these directories were created: {}.",
                    fsutil::list_paths(&created_dirs)
                ));
            }
            err
        };
        let _lock = dir.lock().map_err(|e| with_dirs(io_error("write", shown, &e)))?;
        let previous = match fsutil::existing(&dir, &name, "write", shown, real).map_err(with_dirs)? {
            Existing::Dir => {
                return Err(ToolError::new(
                    ErrorCode::IsDirectory,
                    format!(
                        // No example file name: small models create it as given.
                        "{} is a directory; write replaces files only. To write a file in it, give the file's own path: {}/ followed by the file's name.",
                        shown.display(),
                        shown.display()
                    ),
                )
                .into());
            }
            Existing::Other(kind) => {
                return Err(ToolError::new(
                    ErrorCode::Io,
                    format!(
                        "{} is {}, not a regular file; write only replaces regular files.",
                        shown.display(),
                        kind.describe()
                    ),
                )
                .into());
            }
            Existing::File { bytes, meta } => Some((check_overwrite(known.as_ref(), shown, bytes)?, meta)),
            Existing::Absent => None,
        };
        if let Some(pasted) = &pasted {
            pasted.check(previous.as_ref().map(|((old, _), _)| old.as_slice()), shown).map_err(with_dirs)?;
        }

        if let Some(((old, _), _)) = &previous
            && old.as_slice() == new
        {
            let sha = fsutil::sha256_hex(new);
            let mut text = format!(
                "Unchanged: {} already has exactly this content ({} bytes, sha256 {}); nothing was written.",
                shown.display(),
                new.len(),
                fsutil::short(&sha)
            );
            if unpasted.is_some() {
                text.push_str(UNPASTED_NOTE);
            }
            return Ok(ToolOutput { file: Some(FileIdentity::new(shown, sha)), ..ToolOutput::new(text) });
        }

        let mode = previous.as_ref().map_or(ctx.config.write.mode(), |(_, meta)| meta.mode);
        let expected = previous.as_ref().map(|((_, sha), _)| sha.as_str());
        let written = fsutil::replace(&dir, &name, new, mode, expected, shown, real).map_err(with_dirs)?;

        let sha = fsutil::sha256_hex(new);
        let lines = fsutil::line_count(new) as u64;
        record_written(ctx.session, real, new, &sha, written.mtime_ns).map_err(ToolFailure::Internal)?;

        let lines = super::plural(lines, "line", "lines");
        let mut text = match &previous {
            None => format!(
                "Created {} ({} bytes, {lines}, mode {mode:04o}, sha256 {}).",
                shown.display(),
                new.len(),
                fsutil::short(&sha)
            ),
            Some(((old, _), _)) => format!(
                "Overwrote {} ({} bytes, {lines}; it had {} bytes, {}; sha256 {}).",
                shown.display(),
                new.len(),
                old.len(),
                super::plural(fsutil::line_count(old) as u64, "line", "lines"),
                fsutil::short(&sha)
            ),
        };
        if !created_dirs.is_empty() {
            text.push_str(&format!(" Created directories: {}.", fsutil::list_paths(&created_dirs)));
        }
        let summary = previous.as_ref().and_then(|((old, _), _)| overwrite_summary(old, new));
        if let Some((sentences, _)) = &summary {
            text.push_str(sentences);
        }
        if let Some(note) = previous.as_ref().and_then(|(_, meta)| fsutil::hard_link_note("write", shown, meta.nlink)) {
            text.push(' ');
            text.push_str(&note);
        }
        if let Some(note) = fsutil::moved_note(&dir, ctx.workspace, &name) {
            text.push_str(&note);
        }
        if unpasted.is_some() {
            text.push_str(UNPASTED_NOTE);
        }
        // The lines go last, after every sentence, as read shows lines.
        if let Some((_, Some(lines))) = &summary {
            text.push_str(lines);
        }
        Ok(ToolOutput { mutated: true, file: Some(FileIdentity::new(shown, sha)), ..ToolOutput::new(text) })
    }
}

/// Content that starts with read's header: Qwen2.5-Coder-1.5B wrote read's whole output, header
/// and `N\t` line numbers, as a file's new text when it meant to rewrite the file (at least 4
/// of the suite's first 20 tasks, 2026-12-06). With every line numbered the text is plain:
/// `Some` with the text without the header and numbers, which is what is written (and said),
/// once [`Pasted::check`] finds it whole. Without numbers on every line the text is not
/// certain, and the call is refused. No file begins with that header by accident; one that
/// must can be written with bash.
fn pasted_read_output(content: &str, shown: &Path) -> Result<Option<Pasted>, ToolFailure> {
    let Some(first) = super::read::header_prefix(content.lines().next().unwrap_or_default()) else { return Ok(None) };
    // What follows the header; the first line number may be glued to it (`…· full]1\t…`).
    let after = &content[first.len()..];
    let body = after.strip_prefix('\n').unwrap_or(after);
    if !body.trim().is_empty()
        && let Some(text) = super::edit::strip_line_numbers(body)
    {
        // `[read PATH · sha256 H · 49 lines · full]`: the line count is the field before the last.
        let total = first.trim_end_matches(']').rsplit(" · ").nth(1).and_then(|f| f.split(' ').next()?.parse().ok());
        return Ok(Some(Pasted { total, numbered: body.lines().filter_map(numbered_line).collect(), text }));
    }
    let rest = content.split_once('\n').map_or("", |(_, rest)| rest);
    let numbered = rest.trim().is_empty() || super::edit::strip_line_numbers(rest).is_some();
    let numbers = if numbered { " and every line with read's line number and a tab (`12\\t`)" } else { "" };
    Err(ToolError::new(
        ErrorCode::InvalidArguments,
        format!(
            "content starts with read's header line ({}){numbers}: that is read's output, not the text of {}. Give content as the file's own text only, without the header{}. To change a few lines, edit is shorter: old_string and new_string copied from the file's text.",
            first.chars().take(80).collect::<String>(),
            shown.display(),
            if numbered { " and without line numbers" } else { "" },
        ),
    )
    .into())
}

/// `12\tTEXT` as (12, TEXT).
fn numbered_line(line: &str) -> Option<(usize, String)> {
    let (n, text) = line.trim_start_matches(' ').split_once('\t')?;
    Some((n.parse().ok()?, text.to_string()))
}

/// read's output pasted as content, with its numbers: which lines of the file it holds.
struct Pasted {
    /// The text without the header and the numbers.
    text: String,
    /// The file's line count as read's header gave it.
    total: Option<usize>,
    numbered: Vec<(usize, String)>,
}

/// The most changed lines a refusal lists; more are a loose copy, not a change.
const MAX_LISTED: usize = 3;

/// Whether two lines differ only in quotes and whitespace: a copy's slip, not a change. The
/// 1.5B model's copies turn a docstring's `"""` into `"` and spaces into tabs; listed as an
/// edit, the slip was made as the fix, and the file no longer parsed (2026-12-07).
fn slip(old: &str, new: &str) -> bool {
    let bare = |t: &str| t.chars().filter(|c| !c.is_whitespace() && *c != '"' && *c != '\'').collect::<String>();
    bare(old) == bare(new)
}

impl Pasted {
    /// Refused unless it is the whole file: numbered 1 to the header's count, its last line not
    /// cut short. The 1.5B model's pasted writes ended at the first `"` it did not escape
    /// (`FORMATS = (` of a 49-line file; `CMD [` of a Dockerfile's last line), and written,
    /// they cut the file there (2026-12-07 suite run). The refusal lists the lines it did change,
    /// as edits: the numbers say which line of the file each one is.
    fn check(&self, old: Option<&[u8]>, shown: &Path) -> Result<(), ToolError> {
        let old_lines: Vec<&str> =
            old.map(|o| std::str::from_utf8(o).unwrap_or_default().lines().collect()).unwrap_or_default();
        let total = self.total.unwrap_or(old_lines.len());
        let first = self.numbered.first().map_or(1, |(n, _)| *n);
        let (last_n, last_text) = self.numbered.last().cloned().unwrap_or((1, String::new()));
        let file_last = old_lines.get(last_n.wrapping_sub(1)).copied();
        // The last line pasted is the start of the file's line: the string ended inside it.
        let cut_line = file_last.filter(|f| f.len() > last_text.len() && f.starts_with(last_text.as_str()));
        if first == 1 && last_n >= total && cut_line.is_none() {
            return Ok(());
        }
        let what = if first == 1 && last_n >= total {
            format!("read's output of all {total} lines of {}, but its line {last_n} stops short", shown.display())
        } else {
            format!(
                "read's output of lines {}-{} of the {total} lines {} had: written as the file, it would drop the others",
                first,
                last_n,
                shown.display()
            )
        };
        let quote = match cut_line.map(|f| &f[last_text.len()..]) {
            Some(rest) if rest.starts_with('"') => format!(
                " Your content ends at line {last_n} ({}), where the file goes on with `\"`: a `\"` in the text must be written as `\\\"` in a JSON string, or the string ends there.",
                json!(last_text)
            ),
            Some(_) => format!(" Your content ends inside line {last_n} ({}).", json!(last_text)),
            None => String::new(),
        };
        let changed: Vec<String> = self
            .numbered
            .iter()
            .filter(|(n, text)| {
                Some(*n) != cut_line.map(|_| last_n)
                    && old_lines.get(n.wrapping_sub(1)).is_some_and(|o| o != text && !slip(o, text))
            })
            .map(|(n, text)| format!("line {n}: old_string {} new_string {}", json!(old_lines[n - 1]), json!(text)))
            .collect();
        let next = if changed.is_empty() {
            "No line you gave changes the file's text (quotes and spacing aside). To change a few lines, use edit: old_string a line as the file has it, new_string the line as it should be.".to_string()
        } else if changed.len() > MAX_LISTED {
            // Not a few changes but a loose copy (blank lines dropped, spaces made tabs, quotes
            // lost): listed as edits, the copy's slips were made by the model as the fix
            // (2026-12-07, a docstring's `"""` turned into `"`).
            format!(
                "{} of the lines you gave differ from the file's lines with those numbers: a copy of read's output that loose cannot be written as the file. To change a few lines, use edit: old_string the lines as read shows them, new_string the lines as they should be.",
                changed.len()
            )
        } else {
            format!(
                "The lines you changed, as edit's arguments:\n{}\nMake these changes with edit on {}, one call each; the rest of the file stays as it is.",
                changed.join("\n"),
                shown.display()
            )
        };
        Err(ToolError::new(ErrorCode::InvalidArguments, format!("content is {what}.{quote} {next}")))
    }
}

/// What the result says when the content was read's output with the header and numbers left out.
/// Whether `text` is only a mark for text left out (`...`, `[...]`, `…`, `// ...`): what a
/// model writes where it skips a file's text, never a file's text itself.
pub(crate) fn is_placeholder(text: &str) -> bool {
    let core: String = text.chars().filter(|c| !"[](){}<>#/ \t\r\n".contains(*c)).collect();
    !core.is_empty() && core.chars().all(|c| c == '.' || c == '…') && (core.contains('…') || core.len() >= 3)
}

/// What an overwrite changed, for the model to check against what it meant: the lines it
/// changed or added, numbered as read numbers them (a few; else their ranges), how many it
/// removed, and a final newline lost or gained. Qwen2.5-Coder-1.5B rewrote whole files to change
/// one line and changed others on the way (renamed an export it was told to leave, dropped the
/// final newline: the suite's and the probe's transcripts, 2026-12-05 to 12-07); "it had 81
/// bytes" alone did not show it. The sentences, and the lines (numbered, for the end of the
/// result); `None` for text that is not UTF-8, or where nothing is worth saying.
fn overwrite_summary(old: &[u8], new: &[u8]) -> Option<(String, Option<String>)> {
    /// Changed lines shown with their text; more are given as ranges.
    const SHOWN: usize = 8;
    let (old, new) = (std::str::from_utf8(old).ok()?, std::str::from_utf8(new).ok()?);
    // Bounded: a rewrite of a big file with little in common is quadratic for Myers, and the
    // summary is a note, not the write (past the deadline the diff is coarser, never wrong).
    let diff = similar::TextDiff::configure().timeout(std::time::Duration::from_millis(100)).diff_lines(old, new);
    let old_lines: Vec<&str> = old.lines().collect();
    let new_lines: Vec<&str> = new.lines().collect();
    let mut changed: Vec<usize> = Vec::new();
    let mut removed = 0;
    for op in diff.ops() {
        let (old_range, new_range) = (op.old_range(), op.new_range());
        if matches!(op.tag(), similar::DiffTag::Equal) {
            continue;
        }
        removed += old_range.len().saturating_sub(new_range.len());
        // A line whose only change is the final newline is the newline note's, not a change.
        let paired = old_range.len() == new_range.len();
        for (k, i) in new_range.enumerate() {
            if paired && old_lines.get(old_range.start + k) == new_lines.get(i) {
                continue;
            }
            changed.push(i + 1);
        }
    }
    let total = new_lines.len();
    let mut out = String::new();
    if changed.len() == total && total > 0 {
        out.push_str(" Every line is new or changed.");
    } else if !changed.is_empty() {
        out.push_str(&format!(
            " {} of its {total} lines {} new or changed: {}.",
            changed.len(),
            if changed.len() == 1 { "is" } else { "are" },
            ranges(&changed)
        ));
    }
    if removed > 0 {
        out.push_str(&format!(" {} removed.", super::plural(removed as u64, "line was", "lines were")));
    }
    match (old.ends_with('\n'), new.ends_with('\n') || new.is_empty()) {
        (true, false) => out.push_str(" The file no longer ends with a newline (it did before)."),
        (false, true) if !old.is_empty() && !new.is_empty() => out.push_str(" The file now ends with a newline."),
        _ => {}
    }
    let mut lines = None;
    if !changed.is_empty() && changed.len() <= SHOWN && changed.len() < total {
        let mut shown = String::from(if changed.len() == 1 { "\nThat line now:" } else { "\nThose lines now:" });
        for &n in &changed {
            let line = new_lines.get(n - 1).copied().unwrap_or_default();
            let clipped: String = line.chars().take(200).collect();
            let more = if clipped.len() < line.len() { " …" } else { "" };
            shown.push_str(&format!("\n{n}\t{clipped}{more}"));
        }
        lines = Some(shown);
    }
    (!out.is_empty()).then_some((out, lines))
}

/// Line numbers, sorted, as `line 1, 5 and 9-12`.
fn ranges(lines: &[usize]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let start = lines[i];
        let mut end = start;
        while i + 1 < lines.len() && lines[i + 1] == end + 1 {
            i += 1;
            end = lines[i];
        }
        parts.push(if start == end { format!("{start}") } else { format!("{start}-{end}") });
        i += 1;
    }
    let word = if lines.len() == 1 { "line" } else { "lines" };
    match parts.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{word} {} and {last}", rest.join(", ")),
        _ => format!("{word} {}", parts.join("")),
    }
}

const UNPASTED_NOTE: &str = " The content began with read's header line and every line with read's line number and a tab: those are read's, not the file's, so they were left out, and the file holds the text after them.";

/// Overwrite is allowed only over the version this session last read (`known`). Returns the
/// current content and its sha256.
fn check_overwrite(
    known: Option<&ReadRecord>,
    shown: &Path,
    current: Vec<u8>,
) -> Result<(Vec<u8>, String), ToolFailure> {
    let sha = fsutil::sha256_hex(&current);
    let ident = FileIdentity::new(shown, sha.clone());
    match known {
        None => {
            let binary = fsutil::sniff_binary(&current[..current.len().min(fsutil::SNIFF_BYTES)]);
            let hint = match binary {
                Some(kind) => format!(
                    " It is a binary file ({kind}), which read cannot show: if you mean to replace it, remove it first with bash (`rm {}`), then write.",
                    shown.display()
                ),
                None => format!(" Read it first ({{\"path\": \"{}\"}}), then write again — or use edit to change only part of it.", shown.display()),
            };
            Err(ToolError::new(
                ErrorCode::NotRead,
                format!(
                    "{} already exists ({} bytes) and has not been read in this session, so overwriting it would destroy content you have not seen.{hint}",
                    shown.display(),
                    current.len()
                ),
            )
            .with_file(ident)
            .into())
        }
        Some(rec) if rec.sha256 != sha => Err(ToolError::new(
            ErrorCode::StaleRead,
            format!(
                "{} changed since you last read it (you read sha256 {}, it is now sha256 {}). Read it again and base the new content on what is there now.",
                shown.display(),
                fsutil::short(&rec.sha256),
                fsutil::short(&sha)
            ),
        )
        .with_file(ident)
        .into()),
        Some(rec) => match unseen(rec) {
            // write replaces everything: it needs the model to have seen everything.
            Some(gap) => Err(ToolError::new(
                ErrorCode::PartialRead,
                format!(
                    "{} has {}, and this session has seen {} in full: {gap} not read yet, or shown cut short. Overwriting it would destroy content you have not seen. Read the rest first (read with offset and limit; read cuts lines over 2000 characters, so such lines can only be changed with edit), or change just the part you know with edit. To discard the file whatever it holds, remove it with bash (`rm {}`), then write.",
                    shown.display(),
                    super::plural(rec.total_lines, "line", "lines"),
                    seen_ranges(&rec.lines_seen),
                    shown.display()
                ),
            )
            .with_file(ident)
            .into()),
            None => Ok((current, sha)),
        },
    }
}

/// The first range of lines not seen in full, as "lines 2-5000", or `None` when every line was.
fn unseen(rec: &ReadRecord) -> Option<String> {
    let mut next = 1u64;
    for &(a, b) in &rec.lines_seen {
        if a > next {
            break;
        }
        next = next.max(b + 1);
    }
    (next <= rec.total_lines).then(|| {
        let end = rec.lines_seen.iter().map(|r| r.0).find(|&a| a > next).map_or(rec.total_lines, |a| a - 1);
        if end == next { format!("line {next}") } else { format!("lines {next}-{end}") }
    })
}

fn seen_ranges(ranges: &[(u64, u64)]) -> String {
    if ranges.is_empty() {
        return "none of it".to_string();
    }
    let parts: Vec<String> =
        ranges.iter().map(|&(a, b)| if a == b { a.to_string() } else { format!("{a}-{b}") }).collect();
    format!("lines {}", parts.join(", "))
}

/// After a write the model knows the whole content: record it as read, so the next edit or
/// write of this version is allowed.
pub(crate) fn record_written(
    session: &Session<'_>,
    real: &Path,
    content: &[u8],
    sha: &str,
    mtime_ns: i64,
) -> anyhow::Result<()> {
    let total = fsutil::line_count(content) as u64;
    session.record_read(
        real,
        &ReadRecord {
            sha256: sha.to_string(),
            size: content.len() as u64,
            mtime_ns,
            total_lines: total,
            lines_seen: if total > 0 { vec![(1, total)] } else { Vec::new() },
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_paste_over_a_strange_file_or_header_is_refused_not_written() {
        let shown = Path::new("/w/f");
        // A line count that overflows: the file's own count stands in.
        let p = pasted_read_output("[read /w/f · sha256 ab · 99999999999999999999999 lines · full]\n1\ta\n", shown)
            .unwrap()
            .unwrap();
        assert_eq!(p.total, None);
        assert!(p.check(Some(b"a\nb\n"), shown).is_err());
        assert!(p.check(Some(b"a\n"), shown).is_ok());
        // An existing file that is not UTF-8: no lines to compare, refused as a part.
        let p = pasted_read_output("[read /w/f · sha256 ab · 2 lines · full]\n1\ta\n", shown).unwrap().unwrap();
        assert!(p.check(Some(b"a\xff\nb\n"), shown).is_err());
        // Cut inside a multibyte character's line: no panic, refused.
        let p = pasted_read_output("[read /w/f · sha256 ab · 1 line · full]\n1\tcaf", shown).unwrap().unwrap();
        assert!(p.check(Some("café \"x\"\n".as_bytes()), shown).is_err());
    }

    #[test]
    fn a_line_that_differs_in_quotes_and_whitespace_only_is_a_slip() {
        assert!(slip("\"\"\"Write report rows.\"\"\"", "\"Write report rows."));
        assert!(slip("    return x", "\treturn x"));
        assert!(!slip("FROM python:3.9-slim", "FROM python:3.12-slim"));
    }

    fn rec(total: u64, seen: Vec<(u64, u64)>) -> ReadRecord {
        ReadRecord { sha256: String::new(), size: 0, mtime_ns: 0, total_lines: total, lines_seen: seen }
    }

    #[test]
    fn unseen_finds_the_first_gap() {
        assert_eq!(unseen(&rec(10, vec![(1, 10)])), None);
        assert_eq!(unseen(&rec(0, vec![])), None);
        assert_eq!(unseen(&rec(10, vec![(1, 1)])).as_deref(), Some("lines 2-10"));
        assert_eq!(unseen(&rec(10, vec![(1, 4), (6, 10)])).as_deref(), Some("line 5"));
        assert_eq!(unseen(&rec(10, vec![(3, 10)])).as_deref(), Some("lines 1-2"));
    }
}
