//! The command line. The only code that prints.

mod approve;
mod bench_cmd;
mod bench_compact;
mod bench_sandbox;
mod bench_subagents;
mod chat_cmd;
mod conformance_cmd;
mod doctor_cmd;
mod eval_cmd;
mod render;
mod run_cmd;
mod sessions_cmd;
mod tool_cmd;
mod undo_cmd;

use std::io::{IsTerminal as _, Write as _};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Exit statuses, documented in the README.
pub mod exit {
    /// The command did its job (`run`: the model gave its final answer).
    pub const OK: u8 = 0;
    /// `tool`: the tool returned an error (an observation for the model). `sessions verify`:
    /// the chain is broken.
    pub const TOOL_ERROR: u8 = 1;
    /// `run`: the model gave up on the task.
    pub const GAVE_UP: u8 = 1;
    /// The command line or setup was wrong: bad flags, unknown tool, bad config, no model.
    pub const USAGE: u8 = 2;
    /// A fault of ours (a bug, or the session store could not be used), or a model that could
    /// not be used (an endpoint that does not answer).
    pub const INTERNAL: u8 = 3;
    /// `run`: a budget ran out (turns, tokens, wall time, context window).
    pub const BUDGET: u8 = 4;
    /// `tool`: the approval policy or the operator refused the call. (In `run` a refusal is an
    /// observation the model reads, and the run goes on.)
    pub const APPROVAL_DENIED: u8 = 5;
    /// `run`: interrupted by Ctrl-C; the session can be resumed.
    pub const INTERRUPTED: u8 = 130;
}

#[derive(Parser)]
#[command(
    name = "abhed",
    version,
    about = "An offline coding agent driven by a local model",
    after_help = "Without a command, on a terminal: the interactive mode (abhed chat)."
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Run a task to its end on the local model: the final answer on stdout, progress on stderr.
    Run(run_cmd::RunArgs),
    /// The interactive mode: tasks and follow-ups typed at a prompt, replies streamed as the
    /// model writes them, approvals asked here, Ctrl-C stops the turn.
    Chat(chat_cmd::ChatArgs),
    /// Measure the local model's speed here, as llama-bench does, and the grammar's cost.
    Bench(bench_cmd::BenchArgs),
    /// Test a model before it serves: the tool-contract cases, a capability probe per tool, and
    /// error-recovery scenarios; the report is stored, and `run` refuses a model without a
    /// passing one.
    Conformance(conformance_cmd::ConformanceArgs),
    /// Run the task suite (docs/EVAL.md): real coding tasks, each run to its end on the model
    /// and checked in the microVM; the report is stored under the model.
    Eval(eval_cmd::EvalArgs),
    /// List, show, export, verify and resume sessions.
    #[command(subcommand)]
    Sessions(sessions_cmd::SessionsCmd),
    /// Make exactly one tool call, as the model would, and print the observation.
    Tool(tool_cmd::ToolArgs),
    /// Put the workspace back as it was before a session's calls changed it (bash's changes
    /// included), latest call first.
    Undo(undo_cmd::UndoArgs),
    /// Check what this host can run: QEMU, the VM image's checksums, KVM (by a timed boot), the
    /// sandbox backend, the model.
    Doctor(doctor_cmd::DoctorArgs),
}

/// An error that ends the command, with the status to exit with.
pub struct Failure {
    pub code: u8,
    pub message: String,
}

impl Failure {
    pub fn usage(message: impl Into<String>) -> Self {
        Failure { code: exit::USAGE, message: message.into() }
    }
    pub fn internal(err: &anyhow::Error) -> Self {
        Failure { code: exit::INTERNAL, message: format!("internal error: {err:#}") }
    }
}

pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { exit::USAGE } else { exit::OK };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    init_tracing();
    let command = match cli.command {
        Some(c) => c,
        None if std::io::stdin().is_terminal() => Command::Chat(chat_cmd::ChatArgs::default()),
        None => {
            let _ = <Cli as clap::CommandFactory>::command().print_help();
            return ExitCode::from(exit::USAGE);
        }
    };
    start_temp_journal(&command);
    let result = match command {
        Command::Run(args) => run_cmd::run(args),
        Command::Chat(args) => chat_cmd::run(args),
        Command::Bench(args) => bench_cmd::run(args),
        Command::Conformance(args) => conformance_cmd::run(args),
        Command::Eval(args) => eval_cmd::run(args),
        Command::Sessions(cmd) => sessions_cmd::run(cmd),
        Command::Tool(args) => tool_cmd::run(args),
        Command::Undo(args) => undo_cmd::run(args),
        Command::Doctor(args) => doctor_cmd::run(args),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(f) => {
            let _ = writeln!(std::io::stderr(), "abhed: {}", f.message);
            ExitCode::from(f.code)
        }
    }
}

/// Write to stdout; a closed pipe (`abhed ... | head`) is not an error.
pub fn print_stdout(text: &str) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(Failure { code: exit::INTERNAL, message: format!("cannot write to stdout: {e}") }),
    }
}

/// The commands that write the user's files keep their temp files in the journal beside the
/// store, and first remove those a killed abhed left (`sandbox::confined::TempJournal`).
fn start_temp_journal(command: &Command) {
    if matches!(command, Command::Bench(_) | Command::Doctor(_)) {
        return;
    }
    let Some(dir) = abhed::store::Store::default_path().ok().and_then(|p| p.parent().map(|d| d.join("tmp-journal")))
    else {
        return;
    };
    match abhed::sandbox::confined::TempJournal::start(&dir) {
        Ok(0) => {}
        Ok(n) => tracing::info!("removed {n} temp files a killed abhed left behind"),
        Err(e) => tracing::warn!("cannot keep the temp journal in {}: {e}", dir.display()),
    }
}

/// Logs (ours and llama.cpp's) go to stderr only when `ABHED_LOG` asks, e.g.
/// `ABHED_LOG=llama_cpp_2=info`; by default nothing is logged.
fn init_tracing() {
    let Ok(filter) = std::env::var("ABHED_LOG") else { return };
    let Ok(filter) = tracing_subscriber::EnvFilter::try_new(filter) else { return };
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
}

/// The workspace directory, canonical: the flag, else the session's, else the current directory.
pub fn workspace_dir(flag: Option<PathBuf>, session_ws: Option<PathBuf>) -> Result<PathBuf, Failure> {
    let dir = match (flag, session_ws) {
        (Some(d), _) => d,
        (None, Some(s)) => s,
        (None, None) => {
            std::env::current_dir().map_err(|e| Failure::usage(format!("cannot read the current directory: {e}")))?
        }
    };
    if !dir.is_dir() {
        return Err(Failure::usage(format!("workspace {} is not a directory", dir.display())));
    }
    dir.canonicalize().map_err(|e| Failure::usage(format!("cannot use workspace {}: {e}", dir.display())))
}
