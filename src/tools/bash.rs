//! bash: a shell command in the session microVM (seed 000 §7). Never on the host.
//!
//! Each call is a fresh bash in the session's working directory, which follows the shell's last
//! `cd`. Output is stdout and stderr combined, cut to [`MAX_OUTPUT_CHARS`] keeping its start and
//! end. The exit code is always reported and a non-zero one is an observation, not an error.
//! Before anything runs, every simple command in the line is checked by the approval policy.

use serde::Deserialize;
use serde_json::{Value, json};

use super::{ErrorCode, Tool, ToolContext, ToolError, ToolFailure, ToolOutput, ToolResult, parse_args};
use crate::approval::gate;
use crate::sandbox::{SandboxError, VmFacts};

/// The most characters of output the model sees.
pub const MAX_OUTPUT_CHARS: usize = 30_000;
/// Of what is kept, the share from the start (2 in 5); the rest comes from the end, where errors
/// usually are.
const HEAD_SHARE: (usize, usize) = (2, 5);
pub const DEFAULT_TIMEOUT_MS: u64 = 120_000;
pub const MAX_TIMEOUT_MS: u64 = 600_000;

pub struct Bash;

#[derive(Debug, Deserialize)]
struct Args {
    command: String,
    description: String,
    timeout_ms: Option<u64>,
    #[serde(default)]
    background: bool,
}

impl Tool for Bash {
    fn name(&self) -> &'static str {
        "bash"
    }

    fn description(&self) -> &'static str {
        "Run a shell command in the session sandbox: a VM with no network, where the workspace is shared at its own path. Use for builds, tests, git, and package managers. Prefer read/glob/grep for file inspection — they are cheaper and safer. Each call is a fresh shell: the working directory persists across calls, but shell state (variables, aliases, functions) does not, so chain dependent steps in one command with &&. stdout and stderr come back together, at most 30000 characters, keeping the start and the end. The exit code is always reported; a non-zero exit is a result to reason about. Commands that need a terminal (vim, less, top, git rebase -i) are rejected. Processes a call starts are stopped when it ends: use background for servers and long jobs."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "command": {"type": "string"},
                "description": {"type": "string", "description": "Short human-readable description shown in the approval prompt."},
                "timeout_ms": {"type": "integer", "minimum": 1, "description": "Default 120000, max 600000."},
                "background": {"type": "boolean", "description": "Run detached; returns a handle. Use for servers and long builds."}
            },
            "required": ["command", "description"],
            "additionalProperties": false
        })
    }

    fn mutates(&self) -> bool {
        true
    }

    fn run(&self, ctx: &ToolContext<'_>, args: Value) -> ToolResult {
        let args: Args = parse_args("bash", args)?;
        if args.command.trim().is_empty() {
            return Err(ToolError::new(
                ErrorCode::InvalidArguments,
                "`command` is empty. Give the shell command to run, e.g. \"cargo test\".",
            )
            .into());
        }
        if args.description.trim().is_empty() {
            return Err(ToolError::new(
                ErrorCode::InvalidArguments,
                "`description` is empty. Say in a few words what the command does (e.g. \"Run the unit tests\"); it is what the operator sees when asked to approve it.",
            )
            .into());
        }
        let timeout_ms = args.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS);
        if timeout_ms == 0 || timeout_ms > MAX_TIMEOUT_MS {
            return Err(ToolError::new(
                ErrorCode::InvalidArguments,
                format!(
                    "`timeout_ms` is {timeout_ms}, but it must be between 1 and {MAX_TIMEOUT_MS} (10 minutes). For longer work, run the command with background: true and check its log."
                ),
            )
            .into());
        }
        if args.background && args.timeout_ms.is_some() {
            return Err(ToolError::new(
                ErrorCode::InvalidArguments,
                "`timeout_ms` does not apply to a background command, which runs until it ends or is killed. Drop timeout_ms, or run in the foreground.",
            )
            .into());
        }
        gate::command(ctx, &args.description, &args.command)?;
        if args.background { background(ctx, &args.command) } else { foreground(ctx, &args.command, timeout_ms) }
    }
}

fn foreground(ctx: &ToolContext<'_>, command: &str, timeout_ms: u64) -> ToolResult {
    let (r, facts, cwd_before) = ctx.sandbox.exec(command, timeout_ms).map_err(sandbox_error)?;
    // Less than the cap when the context window has less room (the loop says how much).
    let max = ctx.output_cap(MAX_OUTPUT_CHARS);
    let (body, truncated) = cap_output(&r.output, max);
    let mut text = body;
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    if text.is_empty() {
        text.push_str("(no output)\n");
    }
    if r.cwd_reset {
        text.push_str(&format!(
            "Note: the working directory {} no longer exists, so the command ran in the workspace root.\n",
            cwd_before.display()
        ));
    }
    if r.timed_out {
        text.push_str(&format!(
            "Timed out after {timeout_ms} ms: the command and every process it started were killed. If it needs longer, raise timeout_ms (max {MAX_TIMEOUT_MS}), or run it with background: true and read its log.\n"
        ));
    } else if r.stragglers_killed {
        text.push_str("Note: processes the command left running were stopped when it exited. Run servers and other long-lived processes with background: true.\n");
    }
    match (r.exit_code, r.signal) {
        (Some(code), _) => text.push_str(&format!("Exit code: {code}")),
        (None, Some(sig)) => text.push_str(&format!("Exit code: none (killed by signal {sig}{})", signal_name(sig))),
        (None, None) => text.push_str("Exit code: unknown"),
    }
    let cwd_after = ctx.sandbox.cwd();
    if cwd_after != cwd_before {
        text.push_str(&format!("\nWorking directory is now {}", cwd_after.display()));
    }
    let meta = json!({
        "sandbox": facts_json(&facts),
        "exit_code": r.exit_code,
        "signal": r.signal,
        "timed_out": r.timed_out,
        "output_bytes": r.output.total_bytes,
        "cwd": cwd_before,
        "cwd_after": cwd_after,
        "duration_ms": r.duration_ms,
    });
    // Whatever the command did to the workspace is not known here: say it may have changed files.
    Ok(ToolOutput { text, mutated: true, truncated, file: None, meta: Some(meta) })
}

fn background(ctx: &ToolContext<'_>, command: &str) -> ToolResult {
    let (r, facts, cwd) = ctx.sandbox.spawn(command).map_err(sandbox_error)?;
    let mut text = format!(
        "Started in the background as pid {pid} (also its process group), in {cwd}.\nOutput (stdout and stderr): {log} — read it with bash, e.g. `tail -n 50 {log}`.\nWhen the job ends, its exit code is written to {exit}; until then that file is absent.\nStop it with `kill -- -{pid}` (the whole group).\nThe job lives in this session's VM and is stopped when the session ends.",
        pid = r.pid,
        cwd = cwd.display(),
        log = r.log,
        exit = r.exit_file,
    );
    if r.cwd_reset {
        text.push_str(&format!(
            "\nNote: the working directory {} no longer exists, so the job runs in the workspace root.",
            cwd.display()
        ));
    }
    let meta = json!({
        "sandbox": facts_json(&facts),
        "background": { "pid": r.pid, "log": r.log, "exit_file": r.exit_file },
        "cwd": cwd,
    });
    Ok(ToolOutput { text, mutated: true, truncated: false, file: None, meta: Some(meta) })
}

fn facts_json(f: &VmFacts) -> Value {
    serde_json::to_value(f).unwrap_or(Value::Null)
}

fn sandbox_error(e: SandboxError) -> ToolFailure {
    match e {
        SandboxError::Unavailable(why) => ToolError::new(
            ErrorCode::SandboxUnavailable,
            format!("the command was not run: {why}. The other tools (read, write, edit, glob, grep) still work; tell the operator if the shell is needed."),
        )
        .into(),
        SandboxError::Vm(e) => {
            // The command may have run in part before the VM went away.
            let mut err = ToolError::new(
                ErrorCode::SandboxCrashed,
                format!(
                    "{e}. The command may have run in part: check the workspace before repeating it. The next bash call boots a fresh VM; background jobs and files outside the workspace (such as /tmp) are gone."
                ),
            );
            err.mutated = true;
            err.into()
        }
    }
}

/// Cut output to `max` characters, keeping its start and end, with a note of what was cut.
pub fn cap_output(out: &abhed_guest::Output, max: usize) -> (String, bool) {
    let head_chars = out.head.chars().count();
    let tail_chars = out.tail.chars().count();
    if out.omitted_bytes == 0 && head_chars + tail_chars <= max {
        return (format!("{}{}", out.head, out.tail), false);
    }
    let head_keep = max * HEAD_SHARE.0 / HEAD_SHARE.1;
    let tail_keep = max - head_keep;
    // With nothing omitted, head and tail are one text: cut that. Otherwise cut each piece.
    let (first, last) = if out.omitted_bytes == 0 {
        let all: String = format!("{}{}", out.head, out.tail);
        let n = all.chars().count();
        (all.chars().take(head_keep).collect::<String>(), all.chars().skip(n - tail_keep).collect::<String>())
    } else {
        (
            out.head.chars().take(head_keep).collect::<String>(),
            out.tail.chars().skip(tail_chars.saturating_sub(tail_keep)).collect::<String>(),
        )
    };
    let cut_bytes = out.total_bytes.saturating_sub((first.len() + last.len()) as u64);
    let note = format!(
        "\n[... {cut_bytes} bytes cut from the middle of {} bytes of output; the first {} and last {} characters are shown. To see more, send the output to a file in the workspace (`COMMAND > FILE 2>&1`) and use read or grep on it ...]\n",
        out.total_bytes,
        first.chars().count(),
        last.chars().count(),
    );
    (format!("{first}{note}{last}"), true)
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        1 => ", SIGHUP",
        2 => ", SIGINT",
        6 => ", SIGABRT",
        9 => ", SIGKILL",
        11 => ", SIGSEGV: the program crashed",
        13 => ", SIGPIPE",
        15 => ", SIGTERM",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use abhed_guest::Output;

    #[test]
    fn short_output_is_whole() {
        let out = Output { head: "a\nb\n".into(), tail: String::new(), total_bytes: 4, omitted_bytes: 0 };
        assert_eq!(cap_output(&out, MAX_OUTPUT_CHARS), ("a\nb\n".to_string(), false));
    }

    #[test]
    fn long_output_keeps_head_and_tail_and_says_what_was_cut() {
        let text: String = (0..5000).map(|i| format!("line {i:05}\n")).collect(); // 55000 chars
        let out = Output { head: text.clone(), tail: String::new(), total_bytes: text.len() as u64, omitted_bytes: 0 };
        let (capped, truncated) = cap_output(&out, MAX_OUTPUT_CHARS);
        assert!(truncated);
        assert!(capped.starts_with("line 00000\n"));
        assert!(capped.ends_with("line 04999\n"));
        assert!(capped.contains("[... 25000 bytes cut from the middle of 55000 bytes of output; the first 12000 and last 18000 characters are shown."), "{capped}");
    }

    #[test]
    fn omitted_middle_is_counted() {
        let out = Output {
            head: "h".repeat(65536),
            tail: "t".repeat(65536),
            total_bytes: 1_000_000,
            omitted_bytes: 1_000_000 - 131_072,
        };
        let (capped, _) = cap_output(&out, MAX_OUTPUT_CHARS);
        assert!(capped.contains("[... 970000 bytes cut from the middle of 1000000 bytes"), "{}", &capped[11990..12200]);
        assert!(capped.starts_with(&"h".repeat(12_000)) && !capped.starts_with(&"h".repeat(12_001)));
        assert!(capped.ends_with(&format!("]\n{}", "t".repeat(18_000))));
    }

    /// A small context window gets less than the cap, cut the same way (head and tail).
    #[test]
    fn a_smaller_budget_cuts_to_it() {
        let text: String = (0..5000).map(|i| format!("line {i:05}\n")).collect();
        let out = Output { head: text.clone(), tail: String::new(), total_bytes: text.len() as u64, omitted_bytes: 0 };
        let (capped, truncated) = cap_output(&out, 5_000);
        assert!(truncated);
        assert!(capped.contains("the first 2000 and last 3000 characters are shown"), "{capped}");
        assert!(capped.starts_with("line 00000\n") && capped.ends_with("line 04999\n"));
    }
}
