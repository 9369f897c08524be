//! One task, run and graded.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context as _, Result, bail};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::peer::Peer;
use super::report::TaskResult;
use super::{Expect, Task, answer_miss};
use crate::agent::{Agent, Budgets, RunSetup};
use crate::approval::gate::{Approvals, NoOperator};
use crate::config::Config;
use crate::conformance::suite::Suite;
use crate::conformance::tree;
use crate::model::{Cancel, Model, ModelInfo};
use crate::sandbox::{SessionSandbox, Workspace};
use crate::store::{Store, StoredEvent};
use crate::tools::Registry;

/// What each run may spend, where the task does not say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    pub max_turns: u32,
    pub max_wall_s: u64,
    pub max_reply_tokens: u32,
}

impl Limits {
    pub fn from_config(config: &Config) -> Limits {
        Limits { max_turns: 24, max_wall_s: 900, max_reply_tokens: config.model.max_reply_tokens }
    }
}

/// How long `setup` and `check` may take in the VM.
const SCRIPT_TIMEOUT_MS: u64 = 300_000;
/// How much of a failed check's output the report keeps.
const CHECK_OUTPUT_CHARS: usize = 600;

/// What does the tasks: Abhed's loop on a model, or another agent.
pub enum Driver<'a> {
    Loop(&'a mut dyn Model),
    Peer(Peer, ModelInfo),
}

/// Runs tasks on one model, one after another, in one workspace (the same path every time,
/// so the system prompt and its saved state are the same for every task) and a scratch store.
pub struct Runner<'s, 'd> {
    suite: &'s Suite,
    driver: Driver<'d>,
    config: Config,
    limits: Limits,
    ws: PathBuf,
    store: Store,
    registry: Registry,
}

impl<'s, 'd> Runner<'s, 'd> {
    /// `work` holds the workspace (`work/ws`) and the scratch store. The runs use the user's
    /// model and sandbox settings and the built-in defaults for the rest, as a new user has them.
    pub fn new(suite: &'s Suite, driver: Driver<'d>, config: &Config, limits: Limits, work: &Path) -> Result<Self> {
        let config = config.for_measurement();
        let ws = work.join("ws");
        std::fs::create_dir_all(&ws).with_context(|| format!("cannot create {}", ws.display()))?;
        let ws = ws.canonicalize()?;
        let store = Store::open(&work.join("eval.db"))?;
        Ok(Runner { suite, driver, config, limits, ws, store, registry: Registry::native() })
    }

    pub fn model_info(&self) -> ModelInfo {
        match &self.driver {
            Driver::Loop(model) => model.describe(),
            Driver::Peer(_, info) => info.clone(),
        }
    }

    /// Run one task. `Err` is a fault of ours or of the suite (a setup that failed, a VM that
    /// would not boot), never the model's doing.
    pub fn run(&mut self, task: &Task) -> Result<TaskResult> {
        let start = Instant::now();
        let spec = &task.spec;
        lay_out(self.suite, task, &self.ws)?;
        let session = self.store.create_session(&self.ws)?;
        let workspace = Workspace::new(&self.ws, &[])?;
        let sandbox = SessionSandbox::new(&self.config.sandbox, &workspace);
        if !spec.setup.trim().is_empty() {
            let (ok, out) = script(&sandbox, &self.ws, &spec.setup)?;
            if !ok {
                bail!("{}: setup failed: {out}", task.name);
            }
        }
        let max_wall_s = spec.max_wall_s.unwrap_or(self.limits.max_wall_s);
        let ran = match &mut self.driver {
            Driver::Loop(model) => {
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
                let budgets = Budgets {
                    max_turns: spec.max_turns.unwrap_or(self.limits.max_turns),
                    max_tokens: self.config.run.max_tokens,
                    max_wall_ms: Some(max_wall_s * 1000),
                    max_reply_tokens: self.limits.max_reply_tokens,
                };
                run_loop(&mut **model, &self.registry, &self.config, tools, budgets, &spec.task)?
            }
            Driver::Peer(peer, _) => {
                let r = peer.run(&self.ws, &spec.task, std::time::Duration::from_secs(max_wall_s))?;
                let message = if r.stop == "done" { String::new() } else { format!("stderr: {}", r.stderr_tail) };
                Ran { stop: r.stop, message, answer: r.answer, turns: 0, tokens: 0, facts: None }
            }
        };
        let run_ms = start.elapsed().as_millis() as u64;
        let answer = &ran.answer;

        // Graded in order; the first miss is the reason. A peer has no stop reason for giving
        // up and none of our tools: its gave-up tasks are graded on the answer and the check
        // alone, and `uses` not at all (docs/EVAL.md).
        let mut why = Vec::new();
        let peer = ran.facts.is_none();
        if ran.stop != spec.expect.as_str() && !(peer && spec.expect == Expect::GaveUp) {
            why.push(match spec.expect {
                Expect::Done => format!("the run ended {} ({}), not with a final answer", ran.stop, ran.message),
                Expect::GaveUp => {
                    format!("the run ended {}; the task cannot be done here, so it must give up", ran.stop)
                }
            });
        }
        why.extend(answer_miss(spec, answer));
        let facts = ran.facts.unwrap_or_default();
        for tool in spec.uses.iter().filter(|_| !peer) {
            if !facts.ok_tools.iter().any(|t| t == tool) {
                why.push(format!("no successful {tool} call"));
            }
        }
        let mut check_output = None;
        if !spec.check.trim().is_empty() {
            let (ok, out) = script(&sandbox, &self.ws, &spec.check)?;
            if !ok {
                why.push("the check failed".to_string());
                check_output = Some(out);
            }
        }
        Ok(TaskResult {
            name: task.name.clone(),
            tags: spec.tags.clone(),
            passed: why.is_empty(),
            why: why.join("; "),
            stop: ran.stop,
            turns: ran.turns,
            invalid_turns: facts.invalid_turns,
            calls: facts.calls,
            failed_calls: facts.failed_calls,
            tokens: ran.tokens,
            wall_ms: run_ms,
            answer: clip(answer, 400),
            check_output,
        })
    }
}

/// How a task's run ended, by whichever driver.
struct Ran {
    stop: String,
    message: String,
    answer: String,
    turns: u32,
    tokens: u64,
    /// What the session's log says; none for a peer, which has no log of ours.
    facts: Option<Facts>,
}

/// Abhed's own loop on `task`, with the suite's registry and budgets.
fn run_loop(
    model: &mut dyn Model,
    registry: &Registry,
    config: &Config,
    tools: crate::tools::ToolContext<'_>,
    budgets: Budgets,
    task: &str,
) -> Result<Ran> {
    let session = tools.session;
    let setup = RunSetup {
        registry,
        tools,
        budgets,
        working_budget: config.run.working_budget,
        repeat_limit: config.run.repeat_limit,
        cancel: Cancel::new(),
        subagent: None,
        stream_tokens: false,
    };
    let (tx, rx) = std::sync::mpsc::channel();
    let outcome = Agent::new(model, setup, tx)?.run(Some(task.to_string()))?;
    drop(rx);
    Ok(Ran {
        stop: outcome.reason.as_str().to_string(),
        message: outcome.message,
        answer: outcome.answer.unwrap_or_default(),
        turns: outcome.turns,
        tokens: outcome.tokens,
        facts: Some(Facts::of(&session.events()?)),
    })
}

/// Empty `ws` (the folder itself stays: a VM may share it) and lay out `task`'s starting tree.
pub fn lay_out(suite: &Suite, task: &Task, ws: &Path) -> Result<()> {
    for e in std::fs::read_dir(ws)? {
        let p = e?.path();
        if std::fs::symlink_metadata(&p)?.is_dir() {
            std::fs::remove_dir_all(&p)?;
        } else {
            std::fs::remove_file(&p)?;
        }
    }
    let before = suite.subtree(&format!("{}/before", task.prefix)).unwrap_or_default();
    for (rel, entry) in &before {
        let path = ws.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        match entry {
            tree::Entry::File(bytes) => std::fs::write(&path, bytes)?,
            tree::Entry::Symlink(target) => std::os::unix::fs::symlink(target, &path)?,
        }
    }
    Ok(())
}

/// Run `text` in the sandbox from the workspace root: whether it exited 0, and the end of its
/// output.
pub fn script(sandbox: &SessionSandbox, root: &Path, text: &str) -> Result<(bool, String)> {
    sandbox.set_cwd(root.to_path_buf());
    let ran = sandbox
        .exec(text, SCRIPT_TIMEOUT_MS, &abhed_guest::policy::ExecPolicy::own())
        .map_err(|e| anyhow::anyhow!("the microVM could not run a script: {e}"))?;
    let r = ran.reply;
    let out = format!("{}{}", r.output.head, r.output.tail);
    let status = match (r.exit_code, r.timed_out) {
        (_, true) => "timed out".to_string(),
        (Some(c), _) => format!("exit {c}"),
        (None, _) => format!("signal {}", r.signal.unwrap_or_default()),
    };
    let tail: String = out.chars().rev().take(CHECK_OUTPUT_CHARS).collect::<Vec<_>>().into_iter().rev().collect();
    Ok((r.exit_code == Some(0) && !r.timed_out, format!("[{status}] {}", tail.trim())))
}

fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n { s.to_string() } else { format!("{}…", s.chars().take(n).collect::<String>()) }
}

/// What the session's log says about the calls.
#[derive(Default)]
struct Facts {
    calls: u32,
    failed_calls: u32,
    invalid_turns: u32,
    ok_tools: Vec<String>,
}

impl Facts {
    fn of(events: &[StoredEvent]) -> Facts {
        let mut f = Facts::default();
        for ev in events {
            let p = &ev.payload;
            match ev.kind.as_str() {
                "model_turn" if p.get("kind").and_then(Value::as_str) == Some("invalid") => f.invalid_turns += 1,
                "observation" => {
                    f.calls += 1;
                    if p.get("ok").and_then(Value::as_bool) == Some(true) {
                        f.ok_tools.extend(p.get("tool").and_then(Value::as_str).map(str::to_string));
                    } else {
                        f.failed_calls += 1;
                    }
                }
                _ => {}
            }
        }
        f
    }
}
