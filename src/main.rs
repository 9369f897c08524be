//! The `abhed` binary: parse flags, run, map the outcome to an exit status.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
