//! bash: a shell command in the session microVM (seed 000 §7). Never on the host.
//!
//! Each call is a fresh bash in the session's working directory, which follows the shell's last
//! `cd`. Output is stdout and stderr combined, cut to [`MAX_OUTPUT_CHARS`] keeping its start and
//! end, with terminal escape sequences removed and other control characters made visible. The
//! exit code is always reported and a non-zero one is an observation, not an error. Before
//! anything runs, every simple command in the line is checked by the approval policy.

use std::path::PathBuf;

use serde::Deserialize;
use serde_json::{Value, json};

use abhed_guest::policy::ExecPolicy;

use super::{ErrorCode, Tool, ToolContext, ToolError, ToolFailure, ToolOutput, ToolResult, parse_args};
use crate::approval::gate;
use crate::sandbox::vm::VmError;
use crate::sandbox::{DiskTrip, SandboxError, VmFacts, VmLifetime};
use crate::store::Session;

/// The longest command, in bytes (the guest's limit; see `abhed_guest::MAX_COMMAND_BYTES`).
pub const MAX_COMMAND_BYTES: usize = abhed_guest::MAX_COMMAND_BYTES;

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
        if args.command.len() > MAX_COMMAND_BYTES {
            return Err(ToolError::new(
                ErrorCode::InvalidArguments,
                format!(
                    "`command` is {} bytes; the most bash takes is {MAX_COMMAND_BYTES} bytes (1 MiB). Put long content in a file with write, then run a short command that uses it (e.g. `bash script.sh`).",
                    args.command.len()
                ),
            )
            .into());
        }
        if let Some(at) = args.command.find('\0') {
            return Err(ToolError::new(
                ErrorCode::InvalidArguments,
                format!(
                    "`command` contains a NUL character (at byte {at}), which no shell command can hold. Remove it; to produce a NUL byte, write it in the shell, e.g. printf '\\0'."
                ),
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
        let policy = gate::command(ctx, &args.description, &args.command)?;
        if args.background {
            background(ctx, &args.command, &policy)
        } else {
            foreground(ctx, &args.command, timeout_ms, &policy)
        }
    }
}

fn foreground(ctx: &ToolContext<'_>, command: &str, timeout_ms: u64, policy: &ExecPolicy) -> ToolResult {
    let ran = ctx.sandbox.exec(command, timeout_ms, policy).map_err(sandbox_error)?;
    let (r, cwd_before) = (&ran.reply, &ran.cwd);
    let shown = Shown::of(&r.output);
    // Less than the cap when the context window has less room (the loop says how much).
    let max = ctx.output_cap(MAX_OUTPUT_CHARS);
    let (body, truncated) = cap_output(&shown.output, max);
    let mut text = body;
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    if text.is_empty() {
        text.push_str("(no output)\n");
    }
    shown.notes(&mut text);
    if let Some(note) = &ran.note {
        text.push_str(&format!("Note: {note}.\n"));
    }
    if let Some(t) = &ran.disk.before {
        text.push_str(&format!(
            "Note: before this call, while background jobs ran, {}; every background job was stopped.\n",
            t.describe()
        ));
    }
    if r.cwd_reset {
        text.push_str(&format!(
            "Note: the working directory {} no longer exists, so the command ran in the workspace root.\n",
            cwd_before.display()
        ));
    }
    if !r.denied.is_empty() {
        let names: Vec<String> = r.denied.iter().map(|d| format!("`{}`", d.command)).collect();
        text.push_str(&format!(
            "Note: the approval policy refused {} before {} ran (the [abhed: …] lines above say why and what to do instead); nothing else of the command was held back.\n",
            names.join(", "),
            if names.len() == 1 { "it" } else { "they" }
        ));
    }
    if r.stopped || ran.disk.during.is_some() {
        text.push_str(&disk_stop_text(ran.disk.during.as_ref(), r.stopped));
    } else if r.timed_out {
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
    if &cwd_after != cwd_before {
        text.push_str(&format!("\nWorking directory is now {}", cwd_after.display()));
    }
    let meta = json!({
        "sandbox": facts_json(&ran.facts),
        "exit_code": r.exit_code,
        "signal": r.signal,
        "timed_out": r.timed_out,
        "disk_stopped": r.stopped,
        "output_bytes": r.output.total_bytes,
        "cwd": cwd_before,
        "cwd_after": cwd_after,
        "duration_ms": r.duration_ms,
        "exec_denied": r.denied,
    });
    // Whatever the command did to the workspace is not known here: say it may have changed files.
    let fell_short = r.exit_code != Some(0);
    Ok(ToolOutput { fell_short, mutated: true, truncated, meta: Some(meta), ..ToolOutput::new(text) })
}

/// The disk watchdog stopped the call (or tripped as it ended).
fn disk_stop_text(trip: Option<&DiskTrip>, stopped: bool) -> String {
    let what = trip.map(DiskTrip::describe).unwrap_or_else(|| "the host's disk watchdog asked for it".into());
    let done = if stopped {
        "The command and every background job were killed"
    } else {
        "The command had ended; every background job was killed"
    };
    format!(
        "Stopped: {what}. {done}. What was written before the stop is still in the workspace: find the large files (e.g. `du -sh DIR/* | sort -h`) and remove what is not needed. Write less per call, or ask the operator to raise sandbox.disk_quota_mib.\n"
    )
}

fn background(ctx: &ToolContext<'_>, command: &str, policy: &ExecPolicy) -> ToolResult {
    let ran = ctx.sandbox.spawn(command, policy).map_err(sandbox_error)?;
    let (r, cwd) = (&ran.reply, &ran.cwd);
    let lifetime = match ctx.sandbox.lifetime() {
        VmLifetime::Run => {
            "until this run ends (or the VM crashes): later bash calls of this run can read and stop it".to_string()
        }
        VmLifetime::OneCall => "until this `abhed tool` process exits, which is right after this call: the job is stopped then and its log is gone. For a job to outlive the call, start it from `abhed run` or `abhed chat`, or run the command in the foreground".to_string(),
    };
    let mut text = format!(
        "Started in the background as job {job}, in {cwd}.\nOutput (stdout and stderr): {log} — read it with bash, e.g. `tail -n 50 {log}`.\nWhen the job's shell ends, its exit code is written to {exit}; until then that file is absent. `abhed-job status {job}` tells whether it still runs.\nStop it with `abhed-job kill {job}` (every process the job started). The id names this job only: once the job has ended, or in another VM, the command does nothing.\nThe job, its log and this handle last as long as this session's VM: {lifetime}.",
        job = r.job,
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
    if let Some(note) = &ran.note {
        text.push_str(&format!("\nNote: {note}."));
    }
    if let Some(t) = ran.disk.before.as_ref().or(ran.disk.during.as_ref()) {
        text.push_str(&format!(
            "\nNote: {}; every background job was stopped (this one may be too: check its log).",
            t.describe()
        ));
    }
    let meta = json!({
        "sandbox": facts_json(&ran.facts),
        "background": {
            "job": r.job,
            "pgid": r.pgid,
            "log": r.log,
            "exit_file": r.exit_file,
            "lifetime": match ctx.sandbox.lifetime() { VmLifetime::Run => "run", VmLifetime::OneCall => "one_call" },
        },
        "cwd": cwd,
    });
    Ok(ToolOutput { mutated: true, meta: Some(meta), ..ToolOutput::new(text) })
}

/// Where the session's last bash call left its shell: the `cwd_after` of its last bash
/// observation. A resumed run and every `abhed tool --session` call start there.
pub fn last_cwd(session: &Session<'_>) -> Option<PathBuf> {
    let events = session.events().ok()?;
    events.iter().rev().filter(|e| e.kind == "observation").find_map(|e| {
        let p: &Value = &e.payload;
        (p.get("tool")?.as_str()? == "bash").then_some(())?;
        Some(PathBuf::from(p.get("meta")?.get("cwd_after")?.as_str()?))
    })
}

/// The guest's output as the model is shown it: terminal escape sequences removed, other
/// control characters as `\xNN`, with the counts for the notes that say so.
struct Shown {
    output: abhed_guest::Output,
    escapes: usize,
    controls: usize,
    invalid_utf8: u64,
}

impl Shown {
    fn of(out: &abhed_guest::Output) -> Shown {
        let (head, e1, c1) = clean_controls(&out.head);
        let (tail, e2, c2) = clean_controls(&out.tail);
        Shown {
            output: abhed_guest::Output { head, tail, ..out.clone() },
            escapes: e1 + e2,
            controls: c1 + c2,
            invalid_utf8: out.invalid_utf8_bytes,
        }
    }

    /// The note lines, in a fixed order, only for what happened.
    fn notes(&self, text: &mut String) {
        if self.escapes > 0 {
            text.push_str(&format!(
                "Note: {} terminal escape sequence{} (colours, cursor movement) removed from the output.\n",
                self.escapes,
                plural(self.escapes)
            ));
        }
        if self.controls > 0 {
            text.push_str(&format!(
                "Note: {} control character{} (such as NUL) shown as \\xNN (C1 controls as \\u{{NN}}).\n",
                self.controls,
                plural(self.controls)
            ));
        }
        if self.invalid_utf8 > 0 {
            text.push_str(&format!(
                "Note: {} byte{} of the output {} not UTF-8, shown as U+FFFD (\u{FFFD}). To see the bytes, send the output to a file and inspect it with `od -c` or `xxd`.\n",
                self.invalid_utf8,
                plural(self.invalid_utf8 as usize),
                if self.invalid_utf8 == 1 { "is" } else { "are" }
            ));
        }
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Remove terminal escape sequences (CSI, OSC and the like) and show the other control
/// characters (except tab, newline and carriage return) as `\xNN`. Returns the text, the
/// number of sequences removed, and the number of characters shown escaped.
pub fn clean_controls(s: &str) -> (String, usize, usize) {
    if !s.chars().any(|c| c.is_control() && !matches!(c, '\n' | '\t' | '\r')) {
        return (s.to_string(), 0, 0);
    }
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    let (mut escapes, mut controls) = (0, 0);
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\u{1b}'
            && let Some(len) = escape_len(&chars[i..])
        {
            escapes += 1;
            i += len;
            continue;
        }
        match c {
            '\n' | '\t' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32));
                controls += 1;
            }
            c if c.is_control() => {
                out.push_str(&format!("\\u{{{:x}}}", c as u32));
                controls += 1;
            }
            c => out.push(c),
        }
        i += 1;
    }
    (out, escapes, controls)
}

/// The length of the escape sequence at the start of `s` (which starts with ESC), if it is one.
fn escape_len(s: &[char]) -> Option<usize> {
    // A string sequence (OSC, DCS, ...) longer than this is not one: ESC is shown instead.
    const MAX_STRING: usize = 4096;
    let next = *s.get(1)?;
    match next {
        // CSI: parameters 0x30-0x3F, intermediates 0x20-0x2F, a final byte 0x40-0x7E.
        '[' => {
            let mut i = 2;
            while s.get(i).is_some_and(|c| ('\u{30}'..='\u{3f}').contains(c)) {
                i += 1;
            }
            while s.get(i).is_some_and(|c| ('\u{20}'..='\u{2f}').contains(c)) {
                i += 1;
            }
            s.get(i).is_some_and(|c| ('\u{40}'..='\u{7e}').contains(c)).then_some(i + 1)
        }
        // OSC, DCS, SOS, PM, APC: up to BEL or ESC \.
        ']' | 'P' | 'X' | '^' | '_' => {
            let end = s.len().min(MAX_STRING);
            (2..end).find_map(|i| match s[i] {
                '\u{7}' => Some(i + 1),
                '\u{1b}' if s.get(i + 1) == Some(&'\\') => Some(i + 2),
                _ => None,
            })
        }
        // nF (charset selection and the like): intermediates then a final byte.
        '\u{20}'..='\u{2f}' => {
            let mut i = 2;
            while s.get(i).is_some_and(|c| ('\u{20}'..='\u{2f}').contains(c)) {
                i += 1;
            }
            s.get(i).is_some_and(|c| ('\u{30}'..='\u{7e}').contains(c)).then_some(i + 1)
        }
        // Two-character sequences (ESC 7, ESC =, ESC c, ...).
        '\u{30}'..='\u{7e}' => Some(2),
        _ => None,
    }
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
        SandboxError::Vm(e @ VmError::Boot(_)) => ToolError::new(
            ErrorCode::SandboxUnavailable,
            format!("the command was not run: {e}. The next bash call tries to boot the VM again; if it fails the same way, tell the operator (`abhed doctor` checks the sandbox)."),
        )
        .into(),
        SandboxError::Vm(e @ VmError::NotStarted(_)) => ToolError::new(
            ErrorCode::SandboxCrashed,
            format!("the command was not run: {e}. The VM is still there; try again, with a simpler command if this repeats."),
        )
        .into(),
        SandboxError::Vm(e @ VmError::DiskQuota(_)) => {
            let mut err = ToolError::new(
                ErrorCode::SandboxCrashed,
                format!(
                    "{e}. The command, background jobs and files outside the workspace (such as /tmp) are gone; what was written in the workspace before the stop is still there: find the large files (e.g. `du -sh DIR/* | sort -h`) and remove what is not needed. Write less per call, or ask the operator to raise sandbox.disk_quota_mib. The next bash call boots a fresh VM."
                ),
            );
            err.mutated = true;
            err.into()
        }
        SandboxError::Vm(e) => {
            let ran = e.may_have_run();
            let what = if ran {
                "The command may have run in part: check the workspace before repeating it."
            } else {
                "The command was not run: the VM was gone before it could be sent."
            };
            let mut err = ToolError::new(
                ErrorCode::SandboxCrashed,
                format!(
                    "{e}. {what} The next bash call boots a fresh VM; background jobs and files outside the workspace (such as /tmp) are gone."
                ),
            );
            err.mutated = ran;
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

    fn out(head: String, tail: String, total_bytes: u64, omitted_bytes: u64) -> Output {
        Output { head, tail, total_bytes, omitted_bytes, invalid_utf8_bytes: 0 }
    }

    #[test]
    fn escape_sequences_go_and_control_characters_show() {
        let (t, e, c) =
            clean_controls("\u{1b}[1;31mred\u{1b}[0m a\u{0}b\u{7}\u{1b}]0;title\u{7}ok\tend\r\n\u{1b}(B\u{9b}x\u{1b}");
        assert_eq!(t, "red a\\x00b\\x07ok\tend\r\n\\u{9b}x\\x1b");
        assert_eq!((e, c), (4, 4));
        assert_eq!(clean_controls("plain\n"), ("plain\n".to_string(), 0, 0));
        // An unterminated OSC is not swallowed: ESC is shown and the rest stays.
        assert_eq!(clean_controls("\u{1b}]no end").0, "\\x1b]no end");
    }

    #[test]
    fn the_notes_say_what_was_changed() {
        let o = Output {
            head: "\u{1b}[32mok\u{1b}[0m\u{0}\u{FFFD}\n".into(),
            tail: String::new(),
            total_bytes: 14,
            omitted_bytes: 0,
            invalid_utf8_bytes: 2,
        };
        let shown = Shown::of(&o);
        let mut text = shown.output.head.clone();
        shown.notes(&mut text);
        assert_eq!(
            text,
            "ok\\x00\u{FFFD}\nNote: 2 terminal escape sequences (colours, cursor movement) removed from the output.\nNote: 1 control character (such as NUL) shown as \\xNN (C1 controls as \\u{NN}).\nNote: 2 bytes of the output are not UTF-8, shown as U+FFFD (\u{FFFD}). To see the bytes, send the output to a file and inspect it with `od -c` or `xxd`.\n"
        );
    }

    #[test]
    fn short_output_is_whole() {
        let out = out("a\nb\n".into(), String::new(), 4, 0);
        assert_eq!(cap_output(&out, MAX_OUTPUT_CHARS), ("a\nb\n".to_string(), false));
    }

    #[test]
    fn long_output_keeps_head_and_tail_and_says_what_was_cut() {
        let text: String = (0..5000).map(|i| format!("line {i:05}\n")).collect(); // 55000 chars
        let out = out(text.clone(), String::new(), text.len() as u64, 0);
        let (capped, truncated) = cap_output(&out, MAX_OUTPUT_CHARS);
        assert!(truncated);
        assert!(capped.starts_with("line 00000\n"));
        assert!(capped.ends_with("line 04999\n"));
        assert!(capped.contains("[... 25000 bytes cut from the middle of 55000 bytes of output; the first 12000 and last 18000 characters are shown."), "{capped}");
    }

    #[test]
    fn omitted_middle_is_counted() {
        let out = out("h".repeat(65536), "t".repeat(65536), 1_000_000, 1_000_000 - 131_072);
        let (capped, _) = cap_output(&out, MAX_OUTPUT_CHARS);
        assert!(capped.contains("[... 970000 bytes cut from the middle of 1000000 bytes"), "{}", &capped[11990..12200]);
        assert!(capped.starts_with(&"h".repeat(12_000)) && !capped.starts_with(&"h".repeat(12_001)));
        assert!(capped.ends_with(&format!("]\n{}", "t".repeat(18_000))));
    }

    /// A small context window gets less than the cap, cut the same way (head and tail).
    #[test]
    fn a_smaller_budget_cuts_to_it() {
        let text: String = (0..5000).map(|i| format!("line {i:05}\n")).collect();
        let out = out(text.clone(), String::new(), text.len() as u64, 0);
        let (capped, truncated) = cap_output(&out, 5_000);
        assert!(truncated);
        assert!(capped.contains("the first 2000 and last 3000 characters are shown"), "{capped}");
        assert!(capped.starts_with("line 00000\n") && capped.ends_with("line 04999\n"));
    }
}
