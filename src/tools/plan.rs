//! plan: the model's plan for the task (seed 000 §9): a goal, ordered steps, notes. Each call
//! replaces the plan; it is kept in the session (every version stays in the event log) so that
//! it can be put back in front of the model when older turns are compacted away.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{ErrorCode, Tool, ToolContext, ToolError, ToolFailure, ToolOutput, ToolResult, parse_args};
use crate::store::Session;

/// The session-state key the plan is kept under.
pub const STATE_KEY: &str = "plan";
/// The session-state key of plan mode: `{"on": bool}`.
pub const MODE_KEY: &str = "plan_mode";

/// Whether the session is in plan mode: the model plans, and nothing may change until the
/// operator accepts a plan.
pub fn plan_mode(session: &Session<'_>) -> anyhow::Result<bool> {
    Ok(session.state(MODE_KEY)?.is_some_and(|v| v["on"] == true))
}

pub fn set_plan_mode(session: &Session<'_>, on: bool) -> anyhow::Result<()> {
    session.set_state(MODE_KEY, &json!({ "on": on }))
}

/// The current plan of the session, if any.
pub fn current(session: &Session<'_>) -> anyhow::Result<Option<PlanDoc>> {
    Ok(session.state(STATE_KEY)?.and_then(|v| serde_json::from_value(v).ok()))
}
pub const MAX_STEPS: usize = 30;
pub const MAX_CHARS: usize = 4_000;

pub struct Plan;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanDoc {
    pub goal: String,
    pub steps: Vec<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub notes: String,
    /// 1 for the first plan of the session, then one more per change.
    #[serde(default)]
    pub version: u32,
}

#[derive(Debug, Deserialize)]
struct Args {
    goal: String,
    steps: Vec<String>,
    #[serde(default)]
    notes: Option<String>,
}

impl Tool for Plan {
    fn name(&self) -> &'static str {
        "plan"
    }

    fn description(&self) -> &'static str {
        "Write or update your plan for the task: the goal, the ordered steps, and notes (findings, risks, decisions). Call it before starting multi-step work and again when the approach changes; each call replaces the whole plan. It is kept for the session and shown to you again if older turns are dropped. Track progress with todo."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "goal": {"type": "string", "description": "What done looks like, in one or two sentences."},
                "steps": {"type": "array", "items": {"type": "string"}, "description": "The steps, in order."},
                "notes": {"type": "string", "description": "Findings, risks and decisions worth keeping."}
            },
            "required": ["goal", "steps"],
            "additionalProperties": false
        })
    }

    fn mutates(&self) -> bool {
        false
    }

    fn run(&self, ctx: &ToolContext<'_>, args: Value) -> ToolResult {
        let args: Args = parse_args("plan", args)?;
        let bad = |msg: String| ToolFailure::from(ToolError::new(ErrorCode::InvalidArguments, msg));
        let goal = args.goal.trim().to_string();
        if goal.is_empty() {
            return Err(bad("`goal` is empty. Say what the finished task looks like.".into()));
        }
        let steps: Vec<String> = args.steps.iter().map(|s| s.trim().to_string()).collect();
        if let Some(n) = steps.iter().position(String::is_empty) {
            return Err(bad(format!("step {} is empty. Remove it, or say what the step does.", n + 1)));
        }
        if steps.len() > MAX_STEPS {
            return Err(bad(format!(
                "the plan has {} steps; at most {MAX_STEPS}. Group small steps together.",
                steps.len()
            )));
        }
        let notes = args.notes.unwrap_or_default().trim().to_string();
        let size =
            goal.chars().count() + notes.chars().count() + steps.iter().map(|s| s.chars().count()).sum::<usize>();
        if size > MAX_CHARS {
            return Err(bad(format!(
                "the plan is {size} characters; at most {MAX_CHARS} are kept. Say it more briefly: the plan is a map, not the work."
            )));
        }
        let previous: Option<PlanDoc> =
            ctx.session.state(STATE_KEY).map_err(ToolFailure::Internal)?.and_then(|v| serde_json::from_value(v).ok());
        let mut doc = PlanDoc { goal, steps, notes, version: 1 };
        let unchanged =
            previous.as_ref().is_some_and(|p| p.goal == doc.goal && p.steps == doc.steps && p.notes == doc.notes);
        let text = if let (true, Some(p)) = (unchanged, &previous) {
            doc.version = p.version;
            format!("Unchanged: the plan already is exactly this (version {}).\n{}", p.version, render(&doc))
        } else {
            doc.version = previous.map_or(1, |p| p.version + 1);
            let value = serde_json::to_value(&doc).map_err(|e| ToolFailure::Internal(e.into()))?;
            ctx.session.set_state(STATE_KEY, &value).map_err(ToolFailure::Internal)?;
            format!("Plan saved (version {}).\n{}", doc.version, render(&doc))
        };
        let mut text = text;
        if plan_mode(ctx.session).map_err(ToolFailure::Internal)? {
            text.push_str("\n\n");
            text.push_str(&match crate::approval::gate::plan_acceptance(ctx, &render(&doc), doc.version)? {
                Some(true) => {
                    set_plan_mode(ctx.session, false).map_err(ToolFailure::Internal)?;
                    "The operator accepted this plan: plan mode is over. Carry it out now, and keep the todo list up to date.".to_string()
                }
                Some(false) => "The operator did not accept this plan. Ask yourself what is missing or wrong, and call plan again with a better one; nothing may change until a plan is accepted.".to_string(),
                None => format!(
                    "Plan mode: the plan is saved for the operator to review, and nobody can accept it in this run. Finish now: give your final answer, summarising the plan. (The operator continues with `abhed sessions resume {} --accept-plan`.)",
                    ctx.session.id()
                ),
            });
        }
        let meta = serde_json::to_value(&doc).map_err(|e| ToolFailure::Internal(e.into()))?;
        Ok(ToolOutput { meta: Some(json!({ "plan": meta })), ..ToolOutput::new(text) })
    }
}

/// The plan as the model sees it.
pub fn render(p: &PlanDoc) -> String {
    let mut s = format!("Goal: {}\n", p.goal);
    if p.steps.is_empty() {
        s.push_str("Steps: (none yet)\n");
    } else {
        s.push_str("Steps:\n");
        for (n, step) in p.steps.iter().enumerate() {
            s.push_str(&format!("{}. {step}\n", n + 1));
        }
    }
    if !p.notes.is_empty() {
        s.push_str(&format!("Notes: {}\n", p.notes));
    }
    s.trim_end().to_string()
}
