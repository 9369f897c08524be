//! The capability probe and the error-recovery scenarios: a real model on small real tasks.
//!
//! Both are folders of the same shape, `<part>/<group>/<NNN_slug>/task.toml` with optional
//! `before/` and `after/` trees (docs/CONFORMANCE.md):
//!
//! - `probe/<tool>/...`: a task that one call of `<tool>` with the right arguments does;
//! - `recovery/<scenario>/...`: a session whose last call (made for the model, in `[[given]]`)
//!   failed by design; the model must reach the goal within a few turns. Each one runs twice:
//!   with the tool's own error message, and with a bare one (`bare`), as an A/B of the messages.
//!
//! Every run is a real session in a scratch store, driven by the real loop; the workspace path
//! is the same for every run, so the system prompt (and its KV cache) is shared by all of them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context as _, Result, bail};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::WS;
use super::harness::{OutsideChange, Setup, apply_setup};
use super::suite::{Item, Suite};
use super::tree::{self, Tree};
use crate::agent::{self, Agent, Budgets, RunSetup, StopReason};
use crate::approval::gate::{Approvals, NoOperator};
use crate::config::Config;
use crate::model::{Cancel, Message, Model, ModelError, ModelInfo, Reply, ToolCall, TurnRequest};
use crate::sandbox::{SessionSandbox, Workspace};
use crate::store::{EventKind, Session, Store, StoredEvent};
use crate::tools::Registry;

/// `task.toml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskSpec {
    pub description: String,
    /// What the model is asked; `$WS` is the workspace root.
    pub task: String,
    #[serde(default)]
    pub setup: Vec<Setup>,
    /// Calls made on the model's behalf before its first turn, shown to it as its own.
    #[serde(default)]
    pub given: Vec<Given>,
    /// Recovery: what a terse tool would have said instead of the last given call's error.
    pub bare: Option<String>,
    /// The model turns the run may take (default: 2 for a probe task, 3 for a recovery).
    pub max_turns: Option<u32>,
    /// What counts as done.
    pub goal: Goal,
    /// A reference answer, one model turn per entry (`$WS` substituted): the suite's own tests
    /// check that it reaches the goal, and that doing nothing does not.
    #[serde(default)]
    pub solution: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Given {
    #[serde(default)]
    pub outside_change: Option<OutsideChange>,
    pub tool: String,
    pub args: String,
    /// The error code the call must fail with; absent: it must succeed.
    pub code: Option<String>,
}

/// The goal: a successful call of `tool` (or of one of `or_tool`) whose arguments hold the
/// `equal` values and match the `matches` regexes (keys are JSON pointers into the arguments)
/// and whose output contains `output_contains`; and, when the item has `after/`, the
/// workspace equal to it at the end.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Goal {
    pub tool: String,
    #[serde(default)]
    pub or_tool: Vec<String>,
    #[serde(default)]
    pub equal: BTreeMap<String, toml::Value>,
    #[serde(default)]
    pub matches: BTreeMap<String, String>,
    pub output_contains: Option<String>,
}

pub type Task = Item<TaskSpec>;

/// Which part of the suite an item belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Part {
    Probe,
    Recovery,
}

impl Part {
    pub fn dir(self) -> &'static str {
        match self {
            Part::Probe => "probe",
            Part::Recovery => "recovery",
        }
    }
    fn default_turns(self) -> u32 {
        match self {
            Part::Probe => 2,
            Part::Recovery => 3,
        }
    }
}

/// Which error text a recovery run shows the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Variant {
    /// The tool's own message.
    Instructive,
    /// The scenario's `bare` text.
    Bare,
}

/// The items of one part, sorted by name.
pub fn tasks(suite: &Suite, part: Part) -> Result<Vec<Task>> {
    let tasks: Vec<Task> = suite.items(part.dir(), "task.toml")?;
    for t in &tasks {
        if part == Part::Recovery && (t.spec.bare.is_none() || t.spec.given.last().is_none_or(|g| g.code.is_none())) {
            bail!("{}/{}: a recovery scenario needs `bare` and a last [[given]] call with `code`", part.dir(), t.name);
        }
    }
    Ok(tasks)
}

/// One call the model made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallRecord {
    pub tool: String,
    /// The tool accepted the arguments (they parsed and fit its schema).
    pub valid: bool,
    pub ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_code: Option<String>,
}

/// What came of one run of one item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskResult {
    /// `group/NNN_slug`.
    pub name: String,
    pub part: Part,
    /// The tool (probe) or the scenario (recovery).
    pub group: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub variant: Option<Variant>,
    pub passed: bool,
    /// The model turn that reached the goal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub goal_turn: Option<u32>,
    pub turns: u32,
    pub max_turns: u32,
    /// Turns that were not one valid JSON turn (cut off, or not JSON).
    pub invalid_turns: u32,
    pub calls: Vec<CallRecord>,
    /// Why it did not pass (empty when it did).
    pub why: String,
    /// How the run ended: a stop reason, or `goal` when the probe ended it at its goal.
    pub stop: String,
    pub tokens: u64,
    pub wall_ms: u64,
}

/// How each run is budgeted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunLimits {
    pub max_reply_tokens: u32,
    /// Wall time of one run, in seconds.
    pub max_wall_s: u64,
    /// A subagent's turns (the `task` tool).
    pub subagent_turns: u32,
}

impl Default for RunLimits {
    fn default() -> Self {
        RunLimits { max_reply_tokens: 256, max_wall_s: 180, subagent_turns: 3 }
    }
}

/// Runs items against one model, one after another, in one scratch workspace and store.
pub struct Runner<'a> {
    suite: &'a Suite,
    model: &'a mut dyn Model,
    config: Config,
    limits: RunLimits,
    ws: PathBuf,
    store: Store,
    registry: Registry,
}

impl<'a> Runner<'a> {
    /// `work` holds the workspace (`work/ws`) and the scratch store; `config` gives the model
    /// and sandbox settings (everything else is the built-in default, so that results compare
    /// across machines).
    pub fn new(
        suite: &'a Suite,
        model: &'a mut dyn Model,
        config: &Config,
        limits: RunLimits,
        work: &Path,
    ) -> Result<Runner<'a>> {
        let mut probe_config = config.for_measurement();
        probe_config.task.max_turns = limits.subagent_turns.max(1);
        // The probe measures the model's own calls: a read the loop makes for a task that names
        // its file would pass the read cases for it (`run.given_calls`).
        probe_config.run.given_calls = false;
        probe_config.run.given_check = false;
        let ws = work.join("ws");
        std::fs::create_dir_all(&ws).with_context(|| format!("cannot create {}", ws.display()))?;
        let ws = ws.canonicalize()?;
        let store = Store::open(&work.join("probe.db"))?;
        Ok(Runner { suite, model, config: probe_config, limits, ws, store, registry: Registry::native() })
    }

    /// The workspace root every run uses.
    pub fn workspace(&self) -> &Path {
        &self.ws
    }

    /// The model's description.
    pub fn model_info(&self) -> ModelInfo {
        self.model.describe()
    }

    /// The system prompt the runs get, in the model's protocol: with the native protocol the
    /// chat template lists the tools, so the prompt does not (counting both overstated the
    /// context Qwen2.5 needs, 5,271 tokens for 2,9xx).
    pub fn system_prompt(&self) -> String {
        let native = crate::model::native::is_native(&self.model.describe().protocol);
        agent::prompt::system_prompt_for(&self.registry, &self.ws, native)
    }

    /// Tokens `messages` take, where the model can count.
    pub fn count_tokens(&self, messages: &[Message]) -> Result<Option<u32>, ModelError> {
        self.model.count_tokens(messages)
    }

    /// Run one item. `Err` is a fault of ours or of the suite (a given call that did not fail
    /// as designed), never the model's doing.
    pub fn run(&mut self, task: &Task, part: Part, variant: Option<Variant>) -> Result<TaskResult> {
        let start = Instant::now();
        let ws_str = self.ws.display().to_string();
        let sub = |s: &str| s.replace(WS, &ws_str);
        let after = self.prepare(task)?;
        let session = self.store.create_session(&self.ws)?;
        let workspace = Workspace::new(&self.ws, &self.config.workspace.extra_roots)?;
        let sandbox = SessionSandbox::new(&self.config.sandbox, &workspace);
        let (approvals, _) = Approvals::from_config(&self.config, Box::new(NoOperator))?;
        let tools = crate::tools::ToolContext {
            workspace: &workspace,
            config: &self.config,
            session: &session,
            sandbox: &sandbox,
            approvals: &approvals,
            delegate: None,
            output_budget: None,
        };
        let spec = &task.spec;
        let text = sub(&spec.task);
        if !spec.given.is_empty() {
            session.append(EventKind::Task, &json!({ "text": text }))?;
        }
        for (i, g) in spec.given.iter().enumerate() {
            if let Some(change) = &g.outside_change {
                std::fs::write(self.ws.join(&change.path), &change.content)?;
            }
            let args = sub(&g.args);
            let raw = format!("{{\"tool\": \"{}\", \"arguments\": {args}}}", g.tool);
            session.append(EventKind::ModelTurn, &json!({ "kind": "call", "raw": raw, "given": true }))?;
            let last = i + 1 == spec.given.len();
            let bare = spec.bare.as_deref().filter(|_| last && variant == Some(Variant::Bare));
            if let (Some(bare), Some(code)) = (bare, &g.code) {
                record_bare(&session, &g.tool, &args, code, bare)?;
                continue;
            }
            let call = ToolCall { name: g.tool.clone(), arguments: args };
            let outcome = agent::execute(&self.registry, &tools, &call)?;
            match (&outcome.result, &g.code) {
                (Ok(_), None) => {}
                (Err(e), Some(code)) if e.code.as_str() == code => {}
                (Ok(_), Some(code)) => bail!("{}: given call {} succeeded; it must fail with {code}", task.name, i + 1),
                (Err(e), _) => bail!("{}: given call {} failed unexpectedly: {}", task.name, i + 1, e.render()),
            }
        }

        let max_turns = spec.max_turns.unwrap_or(part.default_turns());
        let goal = GoalCheck::new(&spec.goal, &ws_str, after)?;
        let cancel = Cancel::new();
        let (tx, rx) = std::sync::mpsc::channel();
        let outcome = {
            let mut watched = GoalModel {
                inner: &mut *self.model,
                session: &session,
                goal: &goal,
                ws: &self.ws,
                cancel: cancel.clone(),
            };
            let setup = RunSetup {
                registry: &self.registry,
                tools,
                budgets: Budgets {
                    max_turns,
                    max_tokens: 10_000_000,
                    max_wall_ms: Some(self.limits.max_wall_s * 1000),
                    max_reply_tokens: self.limits.max_reply_tokens,
                },
                working_budget: self.config.run.working_budget,
                repeat_limit: self.config.run.repeat_limit,
                cancel,
                subagent: None,
                stream_tokens: false,
            };
            let mut agent = Agent::new(&mut watched, setup, tx)?;
            let outcome = if spec.given.is_empty() { agent.run(Some(text))? } else { agent.run(None)? };
            drop(agent);
            outcome
        };
        drop(rx);
        let events = session.events()?;
        let grade = goal.grade(&events, &self.ws)?;
        let why = if grade.passed {
            String::new()
        } else if matches!(outcome.reason, StopReason::Done | StopReason::GaveUp | StopReason::MaxTurns) {
            grade.why
        } else {
            format!("{} (the run ended: {}: {})", grade.why, outcome.reason.as_str(), outcome.message)
        };
        Ok(TaskResult {
            name: task.name.clone(),
            part,
            group: task.name.split('/').next().unwrap_or_default().to_string(),
            variant,
            passed: grade.passed,
            goal_turn: grade.goal_turn,
            turns: grade.turns,
            max_turns,
            invalid_turns: grade.invalid_turns,
            calls: grade.calls,
            why,
            // The probe itself ends a run at its goal, by cancelling it.
            stop: if grade.passed && outcome.reason == StopReason::Interrupted {
                "goal".to_string()
            } else {
                outcome.reason.as_str().to_string()
            },
            tokens: outcome.tokens,
            wall_ms: start.elapsed().as_millis() as u64,
        })
    }

    /// Empty the workspace and lay out the item's files; returns the tree expected at the end.
    fn prepare(&self, task: &Task) -> Result<Option<Tree>> {
        let before = self.suite.subtree(&format!("{}/before", task.prefix)).unwrap_or_default();
        tree::write(&self.ws, &before)?;
        // Every file gets the same base mtime (then `age_secs` of [[setup]]).
        let generated = apply_setup(&task.spec.setup, &self.ws, &self.ws.display().to_string())?;
        let Some(mut after) = self.suite.subtree(&format!("{}/after", task.prefix)) else { return Ok(None) };
        // Files made by [[setup]] are expected unchanged unless after/ names them.
        let initial = tree::snapshot(&self.ws)?;
        for g in generated {
            if let Some(e) = initial.get(&g) {
                after.entry(g).or_insert_with(|| e.clone());
            }
        }
        Ok(Some(after))
    }
}

/// The bare variant's failing call: on record as the action and an observation carrying the
/// bare text; the tool is not run (a failing call changes nothing).
fn record_bare(session: &Session<'_>, tool: &str, args: &str, code: &str, bare: &str) -> Result<()> {
    let arguments: Value = serde_json::from_str(args).unwrap_or(Value::String(args.to_string()));
    let action = session.append(EventKind::Action, &json!({ "tool": tool, "arguments": arguments }))?;
    session.append(
        EventKind::Observation,
        &json!({
            "action_seq": action.seq, "tool": tool, "duration_ms": 0, "ok": false, "output": bare,
            "error": {"code": code, "message": bare}, "mutated": false, "truncated": false, "bare": true,
        }),
    )?;
    Ok(())
}

/// The goal, compiled.
struct GoalCheck {
    tools: Vec<String>,
    equal: Vec<(String, Value)>,
    matches: Vec<(String, regex::Regex)>,
    output_contains: Option<String>,
    after: Option<Tree>,
}

/// What the session's log says about a run.
struct Grade {
    passed: bool,
    goal_turn: Option<u32>,
    turns: u32,
    invalid_turns: u32,
    calls: Vec<CallRecord>,
    why: String,
}

impl GoalCheck {
    fn new(goal: &Goal, ws: &str, after: Option<Tree>) -> Result<GoalCheck> {
        let sub = |s: &str| s.replace(WS, ws);
        let equal = goal
            .equal
            .iter()
            .map(|(k, v)| {
                let mut v: Value = serde_json::to_value(v)?;
                if let Value::String(s) = &v {
                    v = Value::String(sub(s));
                }
                Ok((k.clone(), v))
            })
            .collect::<Result<Vec<_>>>()?;
        let matches = goal
            .matches
            .iter()
            .map(|(k, r)| Ok((k.clone(), regex::Regex::new(&sub(r)).with_context(|| format!("bad regex {r:?}"))?)))
            .collect::<Result<Vec<_>>>()?;
        let mut tools = vec![goal.tool.clone()];
        tools.extend(goal.or_tool.iter().cloned());
        Ok(GoalCheck { tools, equal, matches, output_contains: goal.output_contains.as_deref().map(sub), after })
    }

    /// Why these arguments miss the goal; `None` when they hold it.
    fn args_miss(&self, args: &Value) -> Option<String> {
        for (ptr, want) in &self.equal {
            match args.pointer(ptr) {
                Some(got) if got == want => {}
                Some(got) => return Some(format!("{ptr} is {got}, the goal needs {want}")),
                None => return Some(format!("{ptr} is missing, the goal needs {want}")),
            }
        }
        for (ptr, re) in &self.matches {
            let got = match args.pointer(ptr) {
                Some(Value::String(s)) => s.clone(),
                Some(v) => v.to_string(),
                None => return Some(format!("{ptr} is missing, the goal needs it to match /{re}/")),
            };
            if !re.is_match(&got) {
                return Some(format!("{ptr} is {got:?}, which does not match /{re}/"));
            }
        }
        None
    }

    /// Grade the run from the session's events (the model's own turns; given ones are skipped).
    fn grade(&self, events: &[StoredEvent], ws: &Path) -> Result<Grade> {
        let mut g =
            Grade { passed: false, goal_turn: None, turns: 0, invalid_turns: 0, calls: Vec::new(), why: String::new() };
        let mut given = false;
        let mut pending: Option<Value> = None;
        let mut misses = Vec::new();
        for ev in events {
            let p = &ev.payload;
            match ev.kind.as_str() {
                "model_turn" => {
                    given = p.get("given").is_some();
                    if !given {
                        g.turns += 1;
                        if p.get("kind").and_then(Value::as_str) == Some("invalid") {
                            g.invalid_turns += 1;
                        }
                    }
                }
                "action" if !given => pending = Some(p.get("arguments").cloned().unwrap_or(Value::Null)),
                "observation" if !given => {
                    let args = pending.take().unwrap_or(Value::Null);
                    let tool = p.get("tool").and_then(Value::as_str).unwrap_or_default().to_string();
                    let ok = p.get("ok").and_then(Value::as_bool).unwrap_or(false);
                    let code = p.pointer("/error/code").and_then(Value::as_str).map(str::to_string);
                    let valid = !matches!(code.as_deref(), Some("invalid_arguments" | "unknown_tool"));
                    if g.goal_turn.is_none() && self.tools.contains(&tool) {
                        let output = p.get("output").and_then(Value::as_str).unwrap_or_default();
                        let miss = if !ok {
                            Some(format!("{tool} failed: {}", first_line(output)))
                        } else if let Some(m) = self.args_miss(&args) {
                            Some(format!("{tool} was called but {m}"))
                        } else {
                            self.output_contains
                                .as_ref()
                                .filter(|want| !output.contains(want.as_str()))
                                .map(|want| format!("{tool}'s output does not contain {want:?}"))
                        };
                        match miss {
                            None => g.goal_turn = Some(g.turns),
                            Some(m) => misses.push(m),
                        }
                    }
                    g.calls.push(CallRecord { tool, valid, ok, error_code: code });
                }
                _ => {}
            }
        }
        if g.goal_turn.is_none() {
            g.why = match misses.first() {
                Some(m) => m.clone(),
                None => {
                    let made: Vec<&str> = g.calls.iter().map(|c| c.tool.as_str()).collect();
                    format!(
                        "no {} call{}",
                        self.tools.join(" or "),
                        if made.is_empty() {
                            " (no calls at all)".to_string()
                        } else {
                            format!(" (calls: {})", made.join(", "))
                        }
                    )
                }
            };
            return Ok(g);
        }
        if let Some(after) = &self.after {
            let diffs = tree::compare(after, &tree::snapshot(ws)?);
            if let Some(d) = diffs.first() {
                g.why = format!("the workspace is not as expected at the end: {}", first_line(d));
                return Ok(g);
            }
        }
        g.passed = true;
        Ok(g)
    }

    /// Whether the goal holds now: checked before each model turn, to end the run there.
    fn met(&self, session: &Session<'_>, ws: &Path) -> bool {
        session.events().ok().and_then(|evs| self.grade(&evs, ws).ok()).is_some_and(|g| g.passed)
    }
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or_default()
}

/// The model, with the goal checked before each of its turns: once the goal holds, the turn is
/// not taken and the run ends (as interrupted), so the probe spends no time past its answer.
struct GoalModel<'m, 's> {
    inner: &'m mut dyn Model,
    session: &'s Session<'s>,
    goal: &'s GoalCheck,
    ws: &'s Path,
    cancel: Cancel,
}

impl Model for GoalModel<'_, '_> {
    fn describe(&self) -> ModelInfo {
        self.inner.describe()
    }
    fn n_ctx(&self) -> Option<u32> {
        self.inner.n_ctx()
    }
    fn count_tokens(&self, messages: &[Message]) -> Result<Option<u32>, ModelError> {
        self.inner.count_tokens(messages)
    }
    fn complete(&mut self, req: &TurnRequest<'_>) -> Result<Reply, ModelError> {
        if self.goal.met(self.session, self.ws) {
            self.cancel.cancel();
            return Err(ModelError::Cancelled);
        }
        self.inner.complete(req)
    }
    fn run_parallel<'s>(&mut self, jobs: Vec<crate::model::Job<'s>>) -> Result<(), ModelError> {
        self.inner.run_parallel(jobs)
    }
}
