//! One tool call, end to end: the action is committed to the store before the tool runs, the
//! observation after. `abhed tool` and the agent loop both come through here, so what a
//! script sees is what a model sees.

use std::time::Instant;

use anyhow::{Context as _, Result};
use serde_json::{Value, json};

use crate::model::ToolCall;
use crate::store::EventKind;
use crate::tools::{ErrorCode, Registry, ToolContext, ToolError, ToolFailure, ToolOutput, args};

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

/// [`execute`], telling `on_action` (sequence number, tool, recorded arguments) once the action
/// is committed and before the tool runs, so a live view can show the call as it starts.
pub fn execute_with(
    registry: &Registry,
    ctx: &ToolContext<'_>,
    call: &ToolCall,
    on_action: impl FnOnce(i64, &str, &Value),
) -> Result<CallOutcome> {
    // Parsed once: the action records it, the tool runs on it.
    let parsed = args::parse_text(&call.arguments);
    let mut action = json!({ "tool": call.name });
    match &parsed {
        Ok(v) => action["arguments"] = v.clone(),
        // Keep what the model wrote, byte for byte, when it is not JSON.
        Err(_) => action["arguments_raw"] = Value::String(call.arguments.clone()),
    }
    let action_ev = ctx.session.append(EventKind::Action, &action).context("cannot record the tool call")?;
    let shown = action.get("arguments").or_else(|| action.get("arguments_raw")).unwrap_or(&Value::Null);
    on_action(action_ev.seq, &call.name, shown);

    let start = Instant::now();
    let result = run(registry, ctx, &call.name, parsed);
    let duration_ms = start.elapsed().as_millis() as u64;

    let mut obs = json!({ "action_seq": action_ev.seq, "tool": call.name, "duration_ms": duration_ms });
    let result = match result {
        Ok(out) => {
            obs["ok"] = json!(true);
            obs["output"] = json!(out.text);
            obs["mutated"] = json!(out.mutated);
            obs["truncated"] = json!(out.truncated);
            obs["file"] = json!(out.file);
            if let Some(meta) = &out.meta {
                obs["meta"] = meta.clone();
            }
            Ok(out)
        }
        Err(ToolFailure::Model(e)) => {
            obs["ok"] = json!(false);
            obs["output"] = json!(e.render());
            obs["error"] = json!({ "code": e.code, "message": e.message });
            obs["mutated"] = json!(e.mutated);
            obs["truncated"] = json!(false);
            obs["file"] = json!(e.file);
            Err(e)
        }
        Err(ToolFailure::Internal(fault)) => {
            obs["ok"] = json!(false);
            obs["internal_error"] = json!(format!("{fault:#}"));
            // Best effort: the fault may be the store itself.
            let _ = ctx.session.append(EventKind::Observation, &obs);
            return Err(fault.context(format!("internal error in tool {}", call.name)));
        }
    };
    let obs_ev = ctx.session.append(EventKind::Observation, &obs).context("cannot record the observation")?;
    Ok(CallOutcome {
        tool: call.name.clone(),
        action_seq: action_ev.seq,
        observation_seq: obs_ev.seq,
        result,
        duration_ms,
    })
}

fn run(
    registry: &Registry,
    ctx: &ToolContext<'_>,
    name: &str,
    parsed: Result<Value, serde_json::Error>,
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
        return Err(ToolError::new(
            ErrorCode::UnknownTool,
            format!("there is no tool named `{name}`. The tools are: {}.", registry.names().join(", ")),
        )
        .into());
    };
    let schema = tool.input_schema();
    let value = parsed.map_err(|e| args::not_json(tool.name(), &schema, &e))?;
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
