//! The command line. The only code that prints.

mod tool_cmd;

use std::io::Write as _;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Exit statuses, documented in the README.
pub mod exit {
    /// The command did its job.
    pub const OK: u8 = 0;
    /// The tool ran and returned an error (an observation for the model).
    pub const TOOL_ERROR: u8 = 1;
    /// The command line was wrong: bad flags, unknown tool, bad config.
    pub const USAGE: u8 = 2;
    /// A fault of ours (a bug, or the session store could not be used).
    pub const INTERNAL: u8 = 3;
}

#[derive(Parser)]
#[command(
    name = "abhed",
    version,
    about = "An offline coding agent driven by a local model",
    arg_required_else_help = true
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Make exactly one tool call, as the model would, and print the observation.
    Tool(tool_cmd::ToolArgs),
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
    let result = match cli.command {
        Command::Tool(args) => tool_cmd::run(args),
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
