//! Subagents: what the `task` tool starts. Each one is an agent loop of its own, with a fresh
//! context (its own system prompt and the workspace's ABHED.md/AGENTS.md, none of the parent's
//! turns), its profile's tools, and a session of its own in the store whose parent is the
//! caller's session. Its events reach the live stream wrapped as `subagent` events.
//!
//! The subagents of one call share what their parent had left of its token budget (a [`Pool`]):
//! their spend counts against the parent's, and when the pool runs dry every one of them stops
//! with "Budget limit reached". They run at once through [`Model::run_parallel`].

use std::cell::{Cell, RefCell};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::time::Instant;

use serde_json::{Value, json};

use super::events::{Budgets, Event, StopReason};
use super::run::{Agent, RunOutcome, RunSetup};
use crate::approval::gate::Approvals;
use crate::config::Config;
use crate::model::{Cancel, Job, Message, Model, Role};
use crate::sandbox::{SessionSandbox, Workspace};
use crate::store::Store;
use crate::tools::task::{Delegate, Profile, TaskSpec};
use crate::tools::{ErrorCode, Registry, ToolContext, ToolError, ToolOutput, ToolResult, plan};

/// The token budget a group of sibling subagents shares: what their parent had left.
pub struct Pool {
    limit: u64,
    used: AtomicU64,
    exhausted: AtomicBool,
    /// Cancelled when the pool runs dry (and with the parent's own flag): every sibling stops.
    cancel: Cancel,
}

impl Pool {
    pub fn new(limit: u64, parent: &Cancel) -> Self {
        Pool { limit, used: AtomicU64::new(0), exhausted: AtomicBool::new(false), cancel: parent.child() }
    }

    /// Count `tokens` spent by one of the subagents; stops them all once the limit is reached.
    pub fn charge(&self, tokens: u64) {
        let used = self.used.fetch_add(tokens, Ordering::SeqCst) + tokens;
        if used >= self.limit {
            self.exhausted.store(true, Ordering::SeqCst);
            self.cancel.cancel();
        }
    }

    pub fn exhausted(&self) -> bool {
        self.exhausted.load(Ordering::SeqCst)
    }

    pub fn used(&self) -> u64 {
        self.used.load(Ordering::SeqCst)
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The message a subagent stopped by the pool ends with.
    pub fn limit_message(&self) -> String {
        format!(
            "Budget limit reached: the subagents spent {} of the {} tokens their parent had left",
            self.used(),
            self.limit
        )
    }
}

/// A subagent run's place under its parent.
pub struct Link<'a> {
    pub pool: &'a Pool,
    pub parent_session: String,
    /// The parent's `task` action.
    pub action_seq: i64,
    /// Which of the call's subagents (0 first).
    pub index: u32,
    pub description: String,
    pub profile: Profile,
    /// Subagents running in the whole session, for the concurrency cap.
    pub running: Arc<AtomicU32>,
}

/// What a parent has left to give its subagents when it makes a `task` call.
pub struct Allowance {
    /// The parent run's budgets.
    pub budgets: Budgets,
    /// Tokens left of the parent's budget.
    pub tokens_left: u64,
    pub deadline: Option<Instant>,
    /// The parent's cancel flag: the subagents' flags are its children.
    pub cancel: Cancel,
    /// Subagents running in the session, for the concurrency cap.
    pub running: Arc<AtomicU32>,
}

/// What a parent loop lends the task tool for one call.
pub struct Subagents<'m, 'x> {
    model: RefCell<&'m mut (dyn Model + 'x)>,
    events: Sender<Event>,
    left: Allowance,
    /// The parent's `task` action, once recorded.
    action_seq: Cell<i64>,
    /// Tokens the call's subagents spent.
    spent: Cell<u64>,
}

impl<'m, 'x> Subagents<'m, 'x> {
    pub fn new(model: &'m mut (dyn Model + 'x), events: Sender<Event>, left: Allowance) -> Self {
        Subagents { model: RefCell::new(model), events, left, action_seq: Cell::new(0), spent: Cell::new(0) }
    }

    /// Called when the parent's action is on record.
    pub fn set_action(&self, seq: i64) {
        self.action_seq.set(seq);
    }

    /// Tokens the subagents of this call spent (charged to the parent after the call).
    pub fn spent(&self) -> u64 {
        self.spent.get()
    }
}

/// What came of one subagent.
struct Report {
    session: String,
    outcome: Result<RunOutcome, String>,
}

impl Delegate for Subagents<'_, '_> {
    fn run_tasks(&self, ctx: &ToolContext<'_>, specs: Vec<TaskSpec>) -> ToolResult {
        let n = specs.len() as u32;
        if self.left.tokens_left == 0 || self.left.cancel.is_cancelled() {
            return Err(ToolError::new(
                ErrorCode::BudgetExhausted,
                format!(
                    "Budget limit reached: the run's token budget ({} tokens) is spent, so no subagent was started. Give your final answer with what you have.",
                    self.left.budgets.max_tokens
                ),
            )
            .into());
        }
        let cap = ctx.config.task.max_concurrent;
        let running = self.left.running.fetch_add(n, Ordering::SeqCst);
        if running + n > cap {
            self.left.running.fetch_sub(n, Ordering::SeqCst);
            return Err(ToolError::new(
                ErrorCode::TooManySubagents,
                format!(
                    "{n} subagents asked for, with {running} already running: at most {cap} run at once (task.max_concurrent). Ask for fewer at a time. No subagent was started."
                ),
            )
            .into());
        }
        let pool = Pool::new(self.left.tokens_left, &self.left.cancel);
        let reports = self.spawn(ctx, &specs, &pool);
        self.left.running.fetch_sub(n, Ordering::SeqCst);
        self.spent.set(pool.used());
        let reports = reports.map_err(crate::tools::ToolFailure::Internal)?;
        Ok(self.summarise(ctx, &specs, &reports, &pool))
    }
}

impl Subagents<'_, '_> {
    fn spawn(&self, ctx: &ToolContext<'_>, specs: &[TaskSpec], pool: &Pool) -> anyhow::Result<Vec<Report>> {
        let env = ChildEnv {
            store_path: ctx.session.store_path(),
            parent_session: ctx.session.id(),
            plan_mode: plan::plan_mode(ctx.session)?,
            workspace: ctx.workspace,
            config: ctx.config,
            sandbox: ctx.sandbox,
            approvals: ctx.approvals,
            pool,
            budgets: Budgets {
                max_tokens: self.left.tokens_left,
                max_wall_ms: self.left.deadline.map(|d| d.saturating_duration_since(Instant::now()).as_millis() as u64),
                ..self.left.budgets
            },
            action_seq: self.action_seq.get(),
            running: self.left.running.clone(),
        };
        let results: Vec<std::sync::Mutex<Option<Report>>> = specs.iter().map(|_| Default::default()).collect();
        let jobs: Vec<Job<'_>> = specs
            .iter()
            .enumerate()
            .map(|(i, spec)| {
                let (env, slot, events) = (&env, &results[i], self.events.clone());
                let job: Job<'_> = Box::new(move |model: &mut dyn Model| {
                    let report = env.run(model, i as u32, spec, events);
                    if let Ok(mut s) = slot.lock() {
                        *s = Some(report);
                    }
                });
                job
            })
            .collect();
        self.model.borrow_mut().run_parallel(jobs).map_err(|e| anyhow::anyhow!("the subagents' model failed: {e}"))?;
        Ok(results
            .into_iter()
            .map(|m| {
                m.into_inner().ok().flatten().unwrap_or(Report {
                    session: String::new(),
                    outcome: Err("the subagent's thread ended without a result".into()),
                })
            })
            .collect())
    }

    /// The text the parent sees: each subagent's summary, bounded.
    fn summarise(&self, ctx: &ToolContext<'_>, specs: &[TaskSpec], reports: &[Report], pool: &Pool) -> ToolOutput {
        let limit = ctx.config.task.summary_tokens;
        let mut text = String::new();
        let mut meta = Vec::new();
        let mut truncated = false;
        for (i, (spec, r)) in specs.iter().zip(reports).enumerate() {
            let head = if specs.len() == 1 {
                format!("Subagent ({}: {})", spec.profile.as_str(), spec.description)
            } else {
                format!("Subagent {} of {} ({}: {})", i + 1, specs.len(), spec.profile.as_str(), spec.description)
            };
            let mut record = json!({
                "session": r.session, "description": spec.description, "agent_type": spec.profile,
            });
            match &r.outcome {
                Err(fault) => {
                    text.push_str(&format!("{head} failed to run: {fault}. Do the subtask yourself.\n"));
                    record["error"] = json!(fault);
                }
                Ok(o) => {
                    record["reason"] = json!(o.reason);
                    record["turns"] = json!(o.turns);
                    record["tokens"] = json!(o.tokens);
                    match (&o.answer, o.reason) {
                        (Some(answer), reason) => {
                            let state = if reason == StopReason::GaveUp { "gave up" } else { "finished" };
                            let (summary, cut) = self.bound(answer, limit);
                            truncated |= cut;
                            text.push_str(&format!(
                                "{head} {state} in {} turns ({} tokens). Its summary:\n{summary}\n",
                                o.turns, o.tokens
                            ));
                        }
                        (None, _) => text.push_str(&format!(
                            "{head} stopped before it finished, after {} turns: {}. It left no summary; its session {} holds what it did.\n",
                            o.turns, o.message, r.session
                        )),
                    }
                }
            }
            if i + 1 < specs.len() {
                text.push('\n');
            }
            meta.push(record);
        }
        if pool.exhausted() {
            text.push_str(&format!("\n{}. No more subagents can start in this run.\n", pool.limit_message()));
        }
        let mut out = ToolOutput::new(text.trim_end().to_string());
        out.truncated = truncated;
        out.meta = Some(json!({ "subagents": meta, "tokens": pool.used() }));
        out
    }

    /// `answer` cut to about `limit` tokens, and whether it was cut.
    fn bound(&self, answer: &str, limit: u32) -> (String, bool) {
        let model = self.model.borrow();
        let count = |s: &str| {
            model
                .count_tokens(&[Message::new(Role::User, s)])
                .ok()
                .flatten()
                .unwrap_or_else(|| s.len().div_ceil(4) as u32)
        };
        let total = count(answer);
        if total <= limit {
            return (answer.to_string(), false);
        }
        let chars = answer.chars().count();
        let keep = (chars as u64 * u64::from(limit) / u64::from(total.max(1))) as usize;
        let cut: String = answer.chars().take(keep).collect();
        (
            format!(
                "{cut}\n[summary truncated: about {limit} of its {total} tokens shown. Start a subagent with a narrower prompt for the rest.]"
            ),
            true,
        )
    }
}

/// What every subagent of one call shares: the parent's tools but its session (a SQLite
/// connection stays on its thread; each subagent opens its own).
struct ChildEnv<'a> {
    store_path: &'a std::path::Path,
    parent_session: &'a str,
    plan_mode: bool,
    workspace: &'a Workspace,
    config: &'a Config,
    sandbox: &'a SessionSandbox,
    approvals: &'a Approvals,
    pool: &'a Pool,
    budgets: Budgets,
    action_seq: i64,
    running: Arc<AtomicU32>,
}

impl ChildEnv<'_> {
    fn run(&self, model: &mut dyn Model, index: u32, spec: &TaskSpec, events: Sender<Event>) -> Report {
        let mut session_id = String::new();
        let outcome = (|| -> anyhow::Result<RunOutcome> {
            let store = Store::open(self.store_path)?;
            let workspace = self.workspace;
            let session = store.create_child_session(workspace.root(), self.parent_session)?;
            session_id = session.id().to_string();
            if self.plan_mode {
                // Nothing mutates in plan mode, by the parent or its subagents.
                plan::set_plan_mode(&session, true)?;
            }
            let mut names = spec.profile.tools().to_vec();
            if self.config.task.nested {
                names.push("task");
            }
            let registry = Registry::only(&names);
            let setup = RunSetup {
                registry: &registry,
                tools: ToolContext {
                    workspace,
                    config: self.config,
                    session: &session,
                    sandbox: self.sandbox,
                    approvals: self.approvals,
                    delegate: None,
                    output_budget: None,
                },
                budgets: Budgets { max_turns: spec.max_turns, ..self.budgets },
                working_budget: self.config.run.working_budget,
                repeat_limit: self.config.run.repeat_limit,
                cancel: self.pool.cancel.clone(),
                subagent: Some(Link {
                    pool: self.pool,
                    parent_session: self.parent_session.to_string(),
                    action_seq: self.action_seq,
                    index,
                    description: spec.description.clone(),
                    profile: spec.profile,
                    running: self.running.clone(),
                }),
                stream_tokens: false,
            };
            let mut agent = Agent::new(model, setup, events)?;
            agent.run(Some(spec.prompt.clone()))
        })();
        Report { session: session_id, outcome: outcome.map_err(|e| format!("{e:#}")) }
    }
}

/// The `subagent` wrapper of a child's event for the live stream.
pub fn wrap(link: &Link<'_>, session: &str, event: Event) -> Event {
    Event::Subagent {
        action_seq: link.action_seq,
        index: link.index,
        session: session.to_string(),
        description: link.description.clone(),
        agent_type: link.profile.as_str().to_string(),
        event: Box::new(event),
    }
}

/// The record of a subagent's parent, for its `run_start`.
pub fn parent_record(link: &Link<'_>) -> Value {
    json!({
        "session": link.parent_session, "action_seq": link.action_seq, "index": link.index,
        "description": link.description, "agent_type": link.profile,
    })
}
