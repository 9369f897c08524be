//! One tool call, end to end: the action is committed to the store before the tool runs, the
//! observation after. `abhed tool` and the agent loop both come through here, so what a
//! script sees is what a model sees.

use std::time::Instant;

use anyhow::{Context as _, Result};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use crate::model::ToolCall;
use crate::store::EventKind;
use crate::tools::args::ArgsError;
use crate::tools::{ErrorCode, MAX_ERROR_CHARS, Registry, ToolContext, ToolError, ToolFailure, ToolOutput, args};

/// What came of one call.
#[derive(Debug, Clone)]
pub struct CallOutcome {
    pub tool: String,
    /// Sequence numbers of the action and observation events.
    pub action_seq: i64,
    pub observation_seq: i64,
    pub result: Result<ToolOutput, ToolError>,
    pub duration_ms: u64,
}

impl CallOutcome {
    /// The exact text the model sees.
    pub fn text(&self) -> String {
        match &self.result {
            Ok(out) => out.text.clone(),
            Err(e) => e.render(),
        }
    }

    pub fn ok(&self) -> bool {
        self.result.is_ok()
    }

    /// A call that failed, or fell short (a search that found nothing, a command that did not
    /// exit 0): either way the model has not got what it went for.
    pub fn fell_short(&self) -> bool {
        self.result.as_ref().map_or(true, |o| o.fell_short)
    }

    pub fn mutated(&self) -> bool {
        match &self.result {
            Ok(o) => o.mutated,
            Err(e) => e.mutated,
        }
    }
}

/// Run `call` against `registry`. An `Err` is an internal fault (the store failed, or a tool
/// hit a bug); it is recorded when the store still works, and must end the run.
pub fn execute(registry: &Registry, ctx: &ToolContext<'_>, call: &ToolCall) -> Result<CallOutcome> {
    execute_with(registry, ctx, call, |_, _, _| {})
}

/// The most bytes of one observation's output the store keeps: tool outputs are capped far below
/// this (bash 30,000 characters, read `read.max_output_chars`), so only an output an operator's
/// config made enormous is cut, and then the log keeps its start, its size and its sha256.
pub const MAX_STORED_OUTPUT_BYTES: usize = 1024 * 1024;

/// [`execute`], telling `on_action` (sequence number, tool, recorded arguments) once the action
/// is committed and before the tool runs, so a live view can show the call as it starts.
pub fn execute_with(
    registry: &Registry,
    ctx: &ToolContext<'_>,
    call: &ToolCall,
    on_action: impl FnOnce(i64, &str, &Value),
) -> Result<CallOutcome> {
    // Parsed once: the action records it, the tool runs on it. Arguments over the cap are never
    // parsed or stored whole.
    let parsed = args::parse_text(&call.arguments);
    let mut action = json!({ "tool": call.name });
    match &parsed {
        Ok(v) => action["arguments"] = v.clone(),
        Err(ArgsError::TooLarge(_)) => action["arguments_omitted"] = args::omitted(&call.arguments),
        // Keep what the model wrote, byte for byte, when it is not JSON (or not one object).
        Err(_) => action["arguments_raw"] = Value::String(call.arguments.clone()),
    }
    let action_ev = ctx.session.append(EventKind::Action, &action).context("cannot record the tool call")?;
    let shown =
        ["arguments", "arguments_raw", "arguments_omitted"].iter().find_map(|k| action.get(*k)).unwrap_or(&Value::Null);
    on_action(action_ev.seq, &call.name, shown);

    // The workspace as it was before a call that may change it, so `abhed undo` can put it back.
    let pending = super::checkpoint::before(ctx, &call.name);
    let start = Instant::now();
    let mut result = run(registry, ctx, &call.name, parsed);
    let duration_ms = start.elapsed().as_millis() as u64;
    let workspace = super::checkpoint::after(ctx, &call.name, shown, pending, &mut result);

    let mut obs = json!({ "action_seq": action_ev.seq, "tool": call.name, "duration_ms": duration_ms });
    let result = match result {
        Ok(out) => {
            obs["ok"] = json!(true);
            store_output(&mut obs, &out.text);
            obs["mutated"] = json!(out.mutated);
            obs["truncated"] = json!(out.truncated);
            obs["file"] = json!(out.file);
            if let Some(meta) = &out.meta {
                obs["meta"] = meta.clone();
            }
            Ok(out)
        }
        Err(ToolFailure::Model(mut e)) => {
            e.message = cap_message(&e.message);
            obs["ok"] = json!(false);
            store_output(&mut obs, &e.render());
            obs["error"] = json!({ "code": e.code, "message": e.message });
            obs["mutated"] = json!(e.mutated);
            obs["truncated"] = json!(false);
            obs["file"] = json!(e.file);
            Err(e)
        }
        Err(ToolFailure::Internal(fault)) => {
            obs["ok"] = json!(false);
            obs["internal_error"] = json!(cap_message(&format!("{fault:#}")));
            // Best effort: the fault may be the store itself.
            let _ = ctx.session.append(EventKind::Observation, &obs);
            return Err(fault.context(format!("internal error in tool {}", call.name)));
        }
    };
    if let Some(fields) = workspace.map_err(|f| match f {
        ToolFailure::Internal(e) => e,
        ToolFailure::Model(e) => anyhow::anyhow!("{}", e.message),
    })? && let Some(map) = fields.as_object()
    {
        for (k, v) in map {
            obs[k.as_str()] = v.clone();
        }
    }
    let obs_ev = ctx.session.append(EventKind::Observation, &obs).context("cannot record the observation")?;
    Ok(CallOutcome {
        tool: call.name.clone(),
        action_seq: action_ev.seq,
        observation_seq: obs_ev.seq,
        result,
        duration_ms,
    })
}

/// `output` as the observation keeps it: whole up to [`MAX_STORED_OUTPUT_BYTES`], else its start
/// with a note, and `output_bytes` and `output_sha256` of what the model saw.
fn store_output(obs: &mut Value, text: &str) {
    if text.len() <= MAX_STORED_OUTPUT_BYTES {
        obs["output"] = json!(text);
        return;
    }
    let mut cut = MAX_STORED_OUTPUT_BYTES;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let sha = crate::tools::fsutil::hex(&Sha256::digest(text.as_bytes()));
    obs["output"] = json!(format!(
        "{}\n[the store keeps the first {cut} of {} bytes of this output; the model saw all of it (sha256 {sha})]",
        &text[..cut],
        text.len()
    ));
    obs["output_bytes"] = json!(text.len());
    obs["output_sha256"] = json!(sha);
}

/// An error message cut to [`MAX_ERROR_CHARS`] (one that echoes a huge input, say), keeping its
/// start and its end, where the advice is.
fn cap_message(msg: &str) -> String {
    let n = msg.chars().count();
    if n <= MAX_ERROR_CHARS {
        return msg.to_string();
    }
    let note = format!("\n[... {} characters of this message cut ...]\n", n - MAX_ERROR_CHARS + 200);
    let keep = MAX_ERROR_CHARS - 200;
    let head: String = msg.chars().take(keep * 3 / 4).collect();
    let tail: String = msg.chars().skip(n - (keep - keep * 3 / 4)).collect();
    format!("{head}{note}{tail}")
}

/// Names models use for our tools (from other tool sets, or by habit), and ours.
const TOOL_ALIASES: &[(&str, &str)] = &[
    ("cat", "read"),
    ("open", "read"),
    ("view", "read"),
    ("read_file", "read"),
    ("file_read", "read"),
    ("create", "write"),
    ("create_file", "write"),
    ("write_file", "write"),
    ("save", "write"),
    ("replace", "edit"),
    ("str_replace", "edit"),
    ("str_replace_editor", "edit"),
    ("edit_file", "edit"),
    ("patch", "edit"),
    ("ls", "glob"),
    ("list", "glob"),
    ("list_files", "glob"),
    ("list_dir", "glob"),
    ("find", "glob"),
    ("find_files", "glob"),
    ("search", "grep"),
    ("rg", "grep"),
    ("ripgrep", "grep"),
    ("search_files", "grep"),
    ("find_in_files", "grep"),
    ("shell", "bash"),
    ("sh", "bash"),
    ("run", "bash"),
    ("exec", "bash"),
    ("execute", "bash"),
    ("run_command", "bash"),
    ("execute_command", "bash"),
    ("terminal", "bash"),
    ("cmd", "bash"),
    ("bash_exec", "bash"),
    ("todo_write", "todo"),
    ("todos", "todo"),
    ("subagent", "task"),
    ("agent", "task"),
];

/// The tool `name` most likely meant: ours in another case, a known alias, then the nearest by
/// edit distance.
pub fn suggest_tool<'a>(name: &str, names: &[&'a str]) -> Option<&'a str> {
    let lower = name.to_lowercase().replace('-', "_");
    if let Some(n) = names.iter().find(|n| **n == lower) {
        return Some(n);
    }
    if let Some((_, t)) = TOOL_ALIASES.iter().find(|(a, _)| *a == lower)
        && let Some(n) = names.iter().find(|n| *n == t)
    {
        return Some(n);
    }
    names
        .iter()
        .map(|n| (strsim::damerau_levenshtein(&lower, n), *n))
        .filter(|(d, n)| *d <= n.len().min(lower.len()) / 2 && *d <= 2)
        .min_by_key(|(d, _)| *d)
        .map(|(_, n)| n)
}

/// The error for a call to a tool that does not exist, with the likeliest meant one.
pub fn unknown_tool(name: &str, names: &[&str]) -> ToolError {
    let hint = suggest_tool(name, names).map(|n| format!(" Did you mean `{n}`?")).unwrap_or_default();
    ToolError::new(
        ErrorCode::UnknownTool,
        format!("there is no tool named `{name}`.{hint} The tools are: {}.", names.join(", ")),
    )
}

fn run(
    registry: &Registry,
    ctx: &ToolContext<'_>,
    name: &str,
    parsed: Result<Value, ArgsError>,
) -> Result<ToolOutput, ToolFailure> {
    let Some(tool) = registry.get(name) else {
        if name == "task" {
            return Err(ToolError::new(
                ErrorCode::NestedTask,
                format!(
                    "a subagent cannot spawn subagents (task.nested is off). Do the work yourself with your tools: {}.",
                    registry.names().join(", ")
                ),
            )
            .into());
        }
        return Err(unknown_tool(name, &registry.names()).into());
    };
    let schema = tool.input_schema();
    let value = parsed.map_err(|e| args::rejected(tool.name(), &schema, &e))?;
    args::validate(tool.name(), &schema, &value)?;
    if tool.mutates() && crate::tools::plan::plan_mode(ctx.session).map_err(ToolFailure::Internal)? {
        return Err(ToolError::new(
            ErrorCode::PlanMode,
            format!(
                "plan mode is on: nothing may change until the operator accepts a plan, so {name} was not run. Explore with read, glob and grep, then call plan with your plan."
            ),
        )
        .into());
    }
    tool.run(ctx, value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_error_messages_keep_their_start_and_end() {
        let msg = format!("cannot read /ws/{}: too long. Use a shorter name.", "a".repeat(100_000));
        let cut = cap_message(&msg);
        assert!(cut.chars().count() <= MAX_ERROR_CHARS + 100, "{}", cut.chars().count());
        assert!(cut.starts_with("cannot read /ws/aaa") && cut.ends_with("Use a shorter name."));
        assert!(cut.contains("characters of this message cut"));
        assert_eq!(cap_message("short"), "short");
    }

    #[test]
    fn huge_outputs_are_stored_as_their_start_and_digest() {
        let mut obs = json!({});
        let text = format!("{}é", "x".repeat(MAX_STORED_OUTPUT_BYTES - 1));
        store_output(&mut obs, &text);
        let stored = obs["output"].as_str().unwrap();
        assert!(stored.starts_with("xxx") && stored.len() < MAX_STORED_OUTPUT_BYTES + 300);
        assert!(stored.contains(&format!(
            "the store keeps the first {} of {} bytes",
            MAX_STORED_OUTPUT_BYTES - 1,
            text.len()
        )));
        assert_eq!(obs["output_bytes"], text.len());
        assert_eq!(obs["output_sha256"], crate::tools::fsutil::hex(&Sha256::digest(text.as_bytes())));
        let mut small = json!({});
        store_output(&mut small, "ok");
        assert_eq!(small, json!({"output": "ok"}));
    }

    #[test]
    fn tools_are_suggested_by_case_alias_and_distance() {
        let names = ["read", "write", "edit", "glob", "grep", "plan", "todo", "bash", "task"];
        let s = |n| suggest_tool(n, &names);
        assert_eq!(s("reed"), Some("read"));
        assert_eq!(s("READ"), Some("read"));
        assert_eq!(s("bash_exec"), Some("bash"));
        assert_eq!(s("str_replace_editor"), Some("edit"));
        assert_eq!(s("grpe"), Some("grep"));
        assert_eq!(s("ls"), Some("glob"));
        assert_eq!(s("frobnicate"), None);
        assert_eq!(s("xy"), None);
        // An alias for a tool this registry lacks (a subagent without task) suggests nothing.
        assert_eq!(suggest_tool("subagent", &["read"]), None);
    }
}
