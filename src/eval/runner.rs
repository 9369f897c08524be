//! One task, run and graded.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context as _, Result, bail};
use serde::{Deserialize, Serialize};
use serde_json::Value;

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

/// Runs tasks on one model, one after another, in one workspace (the same path every time,
/// so the system prompt and its saved state are the same for every task) and a scratch store.
pub struct Runner<'a> {
    suite: &'a Suite,
    model: &'a mut dyn Model,
    config: Config,
    limits: Limits,
    ws: PathBuf,
    store: Store,
    registry: Registry,
}

impl<'a> Runner<'a> {
    /// `work` holds the workspace (`work/ws`) and the scratch store. The runs use the user's
    /// model and sandbox settings and the built-in defaults for the rest, as a new user has them.
    pub fn new(
        suite: &'a Suite,
        model: &'a mut dyn Model,
        config: &Config,
        limits: Limits,
        work: &Path,
    ) -> Result<Self> {
        let config = config.for_measurement();
        let ws = work.join("ws");
        std::fs::create_dir_all(&ws).with_context(|| format!("cannot create {}", ws.display()))?;
        let ws = ws.canonicalize()?;
        let store = Store::open(&work.join("eval.db"))?;
        Ok(Runner { suite, model, config, limits, ws, store, registry: Registry::native() })
    }

    pub fn model_info(&self) -> ModelInfo {
        self.model.describe()
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
        let (approvals, _) = Approvals::from_config(&self.config, Box::new(NoOperator))?;
        let max_turns = spec.max_turns.unwrap_or(self.limits.max_turns);
        let setup = RunSetup {
            registry: &self.registry,
            tools: crate::tools::ToolContext {
                workspace: &workspace,
                config: &self.config,
                session: &session,
                sandbox: &sandbox,
                approvals: &approvals,
                delegate: None,
                output_budget: None,
            },
            budgets: Budgets {
                max_turns,
                max_tokens: self.config.run.max_tokens,
                max_wall_ms: Some(spec.max_wall_s.unwrap_or(self.limits.max_wall_s) * 1000),
                max_reply_tokens: self.limits.max_reply_tokens,
            },
            working_budget: self.config.run.working_budget,
            repeat_limit: self.config.run.repeat_limit,
            cancel: Cancel::new(),
            subagent: None,
            stream_tokens: false,
        };
        let (tx, rx) = std::sync::mpsc::channel();
        let outcome = {
            let mut agent = Agent::new(&mut *self.model, setup, tx)?;
            agent.run(Some(spec.task.clone()))?
        };
        drop(rx);
        let run_ms = start.elapsed().as_millis() as u64;
        let events = session.events()?;
        let facts = Facts::of(&events);
        let answer = outcome.answer.clone().unwrap_or_default();

        // Graded in order; the first miss is the reason.
        let mut why = Vec::new();
        if outcome.reason.as_str() != spec.expect.as_str() {
            why.push(match spec.expect {
                Expect::Done => {
                    format!("the run ended {} ({}), not with a final answer", outcome.reason.as_str(), outcome.message)
                }
                Expect::GaveUp => format!(
                    "the run ended {}; the task cannot be done here, so it must give up",
                    outcome.reason.as_str()
                ),
            });
        }
        if let Some(re) = answer_miss(spec, &answer) {
            why.push(format!("the final answer does not match /{re}/"));
        }
        for tool in &spec.uses {
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
            stop: outcome.reason.as_str().to_string(),
            turns: outcome.turns,
            invalid_turns: facts.invalid_turns,
            calls: facts.calls,
            failed_calls: facts.failed_calls,
            tokens: outcome.tokens,
            wall_ms: run_ms,
            answer: clip(&answer, 400),
            check_output,
        })
    }
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
        .exec(text, SCRIPT_TIMEOUT_MS)
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
