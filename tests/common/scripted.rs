//! The loop-layer test helper: a temporary workspace and store, and a run of the agent loop on
//! the scripted model through the queue pair, returning every event it emitted.

use std::path::Path;
use std::sync::mpsc;

use abhed::agent::{Agent, Budgets, Event, Op, RunSetup};
use abhed::approval::gate::{Approvals, NoOperator};
use abhed::config::Config;
use abhed::model::Cancel;
use abhed::model::scripted::Scripted;
use abhed::sandbox::{SessionSandbox, Workspace};
use abhed::store::{Session, Store};
use abhed::tools::{Registry, ToolContext};

pub struct Fixture {
    _tmp: tempfile::TempDir,
    /// The workspace root, canonical; it holds `notes.txt` ("alpha\nbeta\n").
    pub ws: std::path::PathBuf,
    pub store: Store,
    pub config: Config,
}

impl Fixture {
    pub fn new() -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        let ws = ws.canonicalize().unwrap();
        std::fs::write(ws.join("notes.txt"), "alpha\nbeta\n").unwrap();
        let store = Store::open(&tmp.path().join("abhed.db")).unwrap();
        let mut config = Config::default();
        // The scripts of the loop's other rules make their own calls for what their tasks name;
        // the tests of the calls given to the model turn this on (`run.given_calls`).
        config.run.given_calls = false;
        Fixture { _tmp: tmp, ws, store, config }
    }

    /// The absolute path of `rel` in the workspace, as the model would write it.
    pub fn p(&self, rel: &str) -> String {
        self.ws.join(rel).display().to_string()
    }

    /// Run `op` on a script in `session`, with `budgets`; returns every event emitted.
    pub fn run(&self, session: &Session<'_>, script: &str, op: Op, budgets: Budgets) -> Vec<Event> {
        self.run_cancel(session, script, op, budgets, Cancel::new())
    }

    pub fn run_cancel(
        &self,
        session: &Session<'_>,
        script: &str,
        op: Op,
        budgets: Budgets,
        cancel: Cancel,
    ) -> Vec<Event> {
        let mut model = Scripted::parse(Path::new("test.script"), script).unwrap();
        let registry = Registry::native();
        let workspace = Workspace::new(&self.ws, &[]).unwrap();
        let sandbox = SessionSandbox::new(&self.config.sandbox, &workspace);
        let (approvals, _) = Approvals::from_config(&self.config, Box::new(NoOperator)).unwrap();
        let setup = RunSetup {
            registry: &registry,
            tools: ToolContext {
                workspace: &workspace,
                config: &self.config,
                session,
                sandbox: &sandbox,
                approvals: &approvals,
                delegate: None,
                output_budget: None,
            },
            budgets,
            working_budget: 0,
            repeat_limit: 3,
            cancel,
            subagent: None,
            stream_tokens: false,
        };
        let (op_tx, op_rx) = mpsc::channel();
        let (ev_tx, ev_rx) = mpsc::channel();
        op_tx.send(op).unwrap();
        drop(op_tx);
        let mut agent = Agent::new(&mut model, setup, ev_tx).unwrap();
        agent.serve(op_rx).unwrap();
        drop(agent);
        ev_rx.into_iter().collect()
    }
}

/// The notes the loop sent back with answers, in order (each model_turn's `feedback`).
pub fn feedback(s: &Session<'_>) -> Vec<String> {
    s.events()
        .unwrap()
        .iter()
        .filter(|e| e.kind == "model_turn")
        .filter_map(|e| e.payload["feedback"].as_str().map(str::to_string))
        .collect()
}
