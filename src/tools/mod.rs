//! The native tools. Each tool lives in one file holding its schema (exactly what the model
//! sees), its argument type, its semantics and its errors.
//!
//! A tool returns either a [`ToolOutput`] (the observation), a [`ToolError`] (a failure *for the
//! model*: what failed, why, what to do instead, whether anything changed), or an internal fault
//! (a bug or a broken store: never dressed up as a tool result).

pub mod args;
pub mod bash;
pub mod edit;
pub mod fsutil;
pub mod glob;
pub mod grep;
pub mod plan;
pub mod read;
pub mod suggest;
pub mod task;
pub mod todo;
mod walk;
pub mod write;

use std::fmt;
use std::path::Path;

use serde::Serialize;
use serde_json::Value;

use crate::approval::gate::Approvals;
use crate::config::Config;
use crate::sandbox::{PathError, SessionSandbox, Workspace};
use crate::store::Session;

pub use fsutil::FileIdentity;

/// Everything a tool may touch while it runs.
#[derive(Clone, Copy)]
pub struct ToolContext<'a> {
    pub workspace: &'a Workspace,
    pub config: &'a Config,
    pub session: &'a Session<'a>,
    /// Where bash runs: the session's microVM.
    pub sandbox: &'a SessionSandbox,
    /// The approval policy and whoever answers its questions.
    pub approvals: &'a Approvals,
    /// Runs the `task` tool's subagents: set by the agent loop, which holds the model.
    pub delegate: Option<&'a dyn task::Delegate>,
    /// The most characters of output the model's context can take now (set by the agent loop
    /// from what is left of the window); a tool whose output would be longer cuts it and says how
    /// to get the rest, as it does at its own cap.
    pub output_budget: Option<usize>,
}

impl ToolContext<'_> {
    /// A tool's own output cap, lowered to what the context window can take now.
    pub fn output_cap(&self, own: usize) -> usize {
        self.output_budget.map_or(own, |b| b.min(own))
    }

    /// Cut a rendered listing (glob's paths, grep's lines) to what the context window can take
    /// now (`output_budget`), at a line's end, with a note that says so and how to see the rest
    /// (`narrow`). Their own caps count items: a thousand paths of a big tree are some 15,000
    /// tokens, and in the suite one glob of `**/**` ended a run as context_full (2026-12-07).
    pub fn fit_window(&self, text: &mut String, truncated: &mut bool, narrow: &str) {
        if let Some(budget) = self.output_budget {
            *truncated |= fit_text(text, budget, narrow);
        }
    }
}

/// `text` cut to `budget` bytes at a line's end, with a note saying how much is shown and how
/// to see the rest (`narrow`); whether it was cut.
fn fit_text(text: &mut String, budget: usize, narrow: &str) -> bool {
    if text.len() <= budget {
        return false;
    }
    let lines = text.lines().count();
    // Room for the note itself; after a line break is a character boundary, whatever came before.
    let keep = budget.saturating_sub(300).min(text.len());
    let cut = text.as_bytes()[..keep].iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    text.truncate(cut);
    let kept = text.lines().count();
    text.push_str(&format!(
        "[truncated: showing the first {kept} of {lines} lines, as much as the context window has room for now. {narrow}]\n"
    ));
    true
}

/// What the model sees after a successful call, plus the facts the envelope reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolOutput {
    /// The exact text the model sees.
    pub text: String,
    pub mutated: bool,
    pub truncated: bool,
    /// The file the call was about, where there is exactly one.
    pub file: Option<FileIdentity>,
    /// Facts for the event log that the model does not see (bash: the sandbox that ran it,
    /// the exit code, the working directory).
    pub meta: Option<Value>,
    /// Not an error, but the call did not get what it went for: a search that found nothing, a
    /// command that did not exit 0. As after an error, the model's next step must not be to
    /// give up (`run.act_after_error`). The loop's, not the envelope's.
    #[serde(skip)]
    pub fell_short: bool,
}

impl ToolOutput {
    pub fn new(text: String) -> Self {
        ToolOutput { text, fell_short: false, mutated: false, truncated: false, file: None, meta: None }
    }
}

/// Stable error codes. They are part of the contract: conformance cases and scripts match on
/// them, so a code is never renamed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// Arguments JSON that is malformed or does not fit the schema.
    InvalidArguments,
    /// A path argument that is not absolute.
    RelativePath,
    /// A path that resolves outside the workspace roots.
    OutsideWorkspace,
    NotFound,
    IsDirectory,
    NotADirectory,
    PermissionDenied,
    /// An operating-system error on the user's files (disk full, I/O error, ...).
    Io,
    BinaryFile,
    TooLarge,
    OffsetOutOfRange,
    InvalidUtf8,
    /// Overwrite or edit of a file not read in this session.
    NotRead,
    /// Overwrite of a file this session has read only in part.
    PartialRead,
    /// The file changed since this session last read it.
    StaleRead,
    ParentMissing,
    NoMatch,
    AmbiguousMatch,
    IdenticalStrings,
    EmptyOldString,
    InvalidGlob,
    InvalidRegex,
    UnsupportedRegex,
    RegexTooLarge,
    EmptyPattern,
    UnknownTool,
    /// bash could not run: no QEMU, no VM image, or an image that fails its checksums.
    SandboxUnavailable,
    /// The VM died or stopped answering during the call.
    SandboxCrashed,
    /// A command that needs a terminal.
    InteractiveCommand,
    /// The approval policy or the operator refused the call.
    ApprovalDenied,
    /// A mutating call while the session is in plan mode.
    PlanMode,
    /// `task` outside an agent run (no model to run a subagent on).
    TaskUnavailable,
    /// A `task` prompt that refers to the parent's conversation.
    NotSelfContained,
    /// The run's token budget is spent: no subagent may start.
    BudgetExhausted,
    /// More subagents than `task.max_concurrent` at once.
    TooManySubagents,
    /// `task` called by a subagent while nested spawning is off.
    NestedTask,
    /// A path was replaced (by a symlink or another file) while the call ran; nothing was done.
    PathChanged,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidArguments => "invalid_arguments",
            ErrorCode::RelativePath => "relative_path",
            ErrorCode::OutsideWorkspace => "outside_workspace",
            ErrorCode::NotFound => "not_found",
            ErrorCode::IsDirectory => "is_directory",
            ErrorCode::NotADirectory => "not_a_directory",
            ErrorCode::PermissionDenied => "permission_denied",
            ErrorCode::Io => "io",
            ErrorCode::BinaryFile => "binary_file",
            ErrorCode::TooLarge => "too_large",
            ErrorCode::OffsetOutOfRange => "offset_out_of_range",
            ErrorCode::InvalidUtf8 => "invalid_utf8",
            ErrorCode::NotRead => "not_read",
            ErrorCode::PartialRead => "partial_read",
            ErrorCode::StaleRead => "stale_read",
            ErrorCode::ParentMissing => "parent_missing",
            ErrorCode::NoMatch => "no_match",
            ErrorCode::AmbiguousMatch => "ambiguous_match",
            ErrorCode::IdenticalStrings => "identical_strings",
            ErrorCode::EmptyOldString => "empty_old_string",
            ErrorCode::InvalidGlob => "invalid_glob",
            ErrorCode::InvalidRegex => "invalid_regex",
            ErrorCode::UnsupportedRegex => "unsupported_regex",
            ErrorCode::RegexTooLarge => "regex_too_large",
            ErrorCode::EmptyPattern => "empty_pattern",
            ErrorCode::UnknownTool => "unknown_tool",
            ErrorCode::SandboxUnavailable => "sandbox_unavailable",
            ErrorCode::SandboxCrashed => "sandbox_crashed",
            ErrorCode::InteractiveCommand => "interactive_command",
            ErrorCode::ApprovalDenied => "approval_denied",
            ErrorCode::PlanMode => "plan_mode",
            ErrorCode::TaskUnavailable => "task_unavailable",
            ErrorCode::NotSelfContained => "not_self_contained",
            ErrorCode::BudgetExhausted => "budget_exhausted",
            ErrorCode::TooManySubagents => "too_many_subagents",
            ErrorCode::NestedTask => "nested_task",
            ErrorCode::PathChanged => "path_changed",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The most characters of an error message the model sees.
pub const MAX_ERROR_CHARS: usize = 16_000;

/// A failure the model must read and act on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolError {
    pub code: ErrorCode,
    /// What failed, why, and what to do instead. Never ends with the mutation statement:
    /// [`ToolError::render`] adds it, so every error says it the same way.
    pub message: String,
    pub mutated: bool,
    pub file: Option<FileIdentity>,
}

impl ToolError {
    /// An error that changed nothing (the normal case: our mutations are atomic).
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ToolError { code, message: message.into(), mutated: false, file: None }
    }

    pub fn with_file(mut self, file: FileIdentity) -> Self {
        self.file = Some(file);
        self
    }

    /// The exact text the model sees for this error.
    pub fn render(&self) -> String {
        let tail = if self.mutated { "Some changes were made, as described above." } else { "Nothing was changed." };
        format!("Error [{}]: {}\n{}", self.code, self.message.trim_end(), tail)
    }
}

/// Why a tool call did not produce an observation.
#[derive(Debug)]
pub enum ToolFailure {
    /// For the model: an observation it must reason about.
    Model(ToolError),
    /// For us: a bug or a broken environment (the store, say). Ends the call as a fault.
    Internal(anyhow::Error),
}

impl From<ToolError> for ToolFailure {
    fn from(e: ToolError) -> Self {
        ToolFailure::Model(e)
    }
}

impl From<PathError> for ToolFailure {
    fn from(e: PathError) -> Self {
        ToolFailure::Model(e.into())
    }
}

impl From<PathError> for ToolError {
    fn from(e: PathError) -> Self {
        let code = match e {
            PathError::Empty { .. } => ErrorCode::InvalidArguments,
            PathError::Relative { .. } => ErrorCode::RelativePath,
            PathError::Outside { .. } => ErrorCode::OutsideWorkspace,
            PathError::Invalid { .. } => ErrorCode::InvalidArguments,
        };
        ToolError::new(code, e.to_string())
    }
}

pub type ToolResult = Result<ToolOutput, ToolFailure>;

/// One native tool.
pub trait Tool: Send + Sync {
    fn name(&self) -> &'static str;
    /// The description the model reads.
    fn description(&self) -> &'static str;
    /// The JSON schema of the arguments, exactly as the model sees it. The dispatcher validates
    /// every call against it before [`Tool::run`], so `run` may deserialize without surprises.
    fn input_schema(&self) -> Value;
    /// Whether a call may change files. Mutating tools are gated by the approval policy.
    fn mutates(&self) -> bool;
    fn run(&self, ctx: &ToolContext<'_>, args: Value) -> ToolResult;
}

/// The tools the model is offered, in the order it sees them.
pub struct Registry {
    tools: Vec<Box<dyn Tool>>,
}

impl Registry {
    /// The native tools available in this build.
    pub fn native() -> Self {
        Registry {
            tools: vec![
                Box::new(read::Read),
                Box::new(write::Write),
                Box::new(edit::Edit),
                Box::new(glob::Glob),
                Box::new(grep::Grep),
                Box::new(plan::Plan),
                Box::new(todo::Todo),
                Box::new(bash::Bash),
                Box::new(task::Task),
            ],
        }
    }

    /// The native tools named in `names`, in the native order.
    pub fn only(names: &[&str]) -> Self {
        let mut r = Registry::native();
        r.tools.retain(|t| names.contains(&t.name()));
        r
    }

    pub fn get(&self, name: &str) -> Option<&dyn Tool> {
        self.tools.iter().find(|t| t.name() == name).map(|t| t.as_ref())
    }

    pub fn iter(&self) -> impl Iterator<Item = &dyn Tool> {
        self.tools.iter().map(|t| t.as_ref())
    }

    pub fn names(&self) -> Vec<&'static str> {
        self.tools.iter().map(|t| t.name()).collect()
    }

    /// Every tool's definition as the model sees it: name, description, input_schema.
    pub fn definitions(&self) -> Value {
        Value::Array(
            self.iter()
                .map(|t| {
                    serde_json::json!({
                        "name": t.name(),
                        "description": t.description(),
                        "input_schema": t.input_schema(),
                    })
                })
                .collect(),
        )
    }
}

/// Deserialize validated arguments. Validation against the schema already ran, so a failure
/// here is a value the schema cannot express (a negative count where it says only "integer"):
/// still the model's error, told in the schema's terms (the field, what it must be, what came),
/// never in serde's ("expected u64").
pub(crate) fn parse_args<T: serde::de::DeserializeOwned>(tool: &str, args: Value) -> Result<T, ToolError> {
    serde_path_to_error::deserialize(&args).map_err(|e| {
        let schema = Registry::native().get(tool).map(|t| t.input_schema());
        args::from_serde(tool, schema.as_ref(), &args, &e)
    })
}

/// Map an I/O error on a user's file to a model-facing error naming the path.
pub(crate) fn io_error(action: &str, path: &Path, err: &std::io::Error) -> ToolError {
    use std::io::ErrorKind;
    let p = path.display();
    match err.kind() {
        ErrorKind::PermissionDenied => ToolError::new(
            ErrorCode::PermissionDenied,
            format!(
                "cannot {action} {p}: permission denied. The file's permissions forbid it; choose another path or ask the operator."
            ),
        ),
        ErrorKind::NotFound => ToolError::new(
            ErrorCode::NotFound,
            format!(
                "cannot {action} {p}: it no longer exists (it was removed while the call ran). Use glob to see what is there now."
            ),
        ),
        ErrorKind::NotADirectory => ToolError::new(
            ErrorCode::NotADirectory,
            format!(
                "cannot {action} {p}: a component of the path is a file, not a directory. Check the path with glob."
            ),
        ),
        // ELOOP (40 on Linux): symlinks that point at each other.
        _ if err.raw_os_error() == Some(40) => ToolError::new(
            ErrorCode::Io,
            format!(
                "cannot {action} {p}: it is a symlink loop (links that point at each other), so nothing lies behind it. Use the real path of the file you mean; bash `ls -l` shows where each link points."
            ),
        ),
        _ => ToolError::new(ErrorCode::Io, format!("cannot {action} {p}: {err}.")),
    }
}

/// Format a byte count for people and models alike: "1.5 MiB (1572864 bytes)".
pub(crate) fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n == 1 {
        return "1 byte".to_string();
    }
    if n < 1024 {
        return format!("{n} bytes");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = UNITS[0];
    for u in &UNITS[1..] {
        if v < 1024.0 {
            break;
        }
        v /= 1024.0;
        unit = u;
    }
    format!("{v:.1} {unit} ({n} bytes)")
}

/// "1 line", "3 lines".
pub(crate) fn plural(n: u64, one: &str, many: &str) -> String {
    if n == 1 { format!("1 {one}") } else { format!("{n} {many}") }
}

/// A path as (part of) one output line. Control characters (a newline in a file name would split
/// the line) are written as the JSON escapes a model would use to name the file again.
pub(crate) fn path_line(path: &Path) -> String {
    let s = path.to_string_lossy();
    if !s.chars().any(char::is_control) {
        return s.into_owned();
    }
    s.chars()
        .map(|c| match c {
            '\n' => "\\n".to_string(),
            '\r' => "\\r".to_string(),
            '\t' => "\\t".to_string(),
            c if c.is_control() => format!("\\u{:04x}", u32::from(c)),
            c => c.to_string(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_in_names_are_escaped() {
        assert_eq!(path_line(Path::new("/ws/a.rs")), "/ws/a.rs");
        assert_eq!(path_line(Path::new("/ws/new\nline.txt")), "/ws/new\\nline.txt");
        assert_eq!(path_line(Path::new("/ws/bell\u{7}")), "/ws/bell\\u0007");
    }

    /// A thousand paths of a big tree cut to the window's room, at a line's end, with the note;
    /// a listing that fits is left alone.
    #[test]
    fn a_listing_longer_than_the_window_has_room_for_is_cut_with_a_note() {
        let listing: String = (0..1000).map(|i| format!("/ws/src/módulo_{i:04}/file.py\n")).collect();
        let mut text = listing.clone();
        assert!(fit_text(&mut text, 2_000, "Narrow the pattern."));
        assert!(text.len() <= 2_000, "{}", text.len());
        let (body, note) = text.trim_end().rsplit_once('\n').unwrap();
        assert!(listing.starts_with(&format!("{body}\n")));
        let kept = body.lines().count();
        assert_eq!(
            note,
            format!(
                "[truncated: showing the first {kept} of 1000 lines, as much as the context window has room for now. Narrow the pattern.]"
            )
        );
        let mut short = "/ws/a.py\n".to_string();
        assert!(!fit_text(&mut short, 2_000, "x"));
        assert_eq!(short, "/ws/a.py\n");
    }
}
