//! The microVM test helper: a workspace, a config and a session sandbox, and one bash call
//! through the dispatcher exactly as the agent loop makes it (tests/sandbox_vm.rs,
//! tests/exec_attacks.rs).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde_json::{Value, json};

use abhed::agent::{CallOutcome, execute};
use abhed::approval::gate::{Answer, Approvals, Approver, NoOperator, Question};
use abhed::config::Config;
use abhed::model::ToolCall;
use abhed::sandbox::{SessionSandbox, Workspace};
use abhed::store::Store;
use abhed::tools::{Registry, ToolContext};

/// Stands in for an operator who answers yes: for the tests whose point is what the VM contains,
/// not what the policy lets through.
pub struct Yes;

impl Approver for Yes {
    fn ask(&self, _: &Question<'_>) -> Option<Answer> {
        Some(Answer::Once)
    }
}

pub struct Vm {
    _tmp: tempfile::TempDir,
    pub ws: PathBuf,
    pub workspace: Workspace,
    pub config: Config,
    pub sandbox: SessionSandbox,
    /// The last call's observation metadata.
    meta: std::sync::Mutex<Value>,
}

impl Vm {
    pub fn new() -> Vm {
        Vm::with(|_| {})
    }

    pub fn with(adjust: impl FnOnce(&mut Config)) -> Vm {
        Vm::in_dir(&std::env::temp_dir(), adjust)
    }

    /// With the workspace under `base` (a tmpfs, for a test that measures its disk).
    pub fn in_dir(base: &Path, adjust: impl FnOnce(&mut Config)) -> Vm {
        let tmp = tempfile::tempdir_in(base).unwrap();
        let ws = tmp.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        let ws = ws.canonicalize().unwrap();
        let workspace = Workspace::new(&ws, &[]).unwrap();
        let mut config = Config::default();
        // The probe belongs to `abhed doctor`; tests boot the way CI's host can.
        config.sandbox.accel = std::env::var("ABHED_TEST_ACCEL").unwrap_or_else(|_| "tcg".into());
        config.sandbox.boot_timeout_s = 120;
        adjust(&mut config);
        let sandbox = SessionSandbox::new(&config.sandbox, &workspace);
        Vm { _tmp: tmp, ws, workspace, config, sandbox, meta: std::sync::Mutex::new(Value::Null) }
    }

    /// The VM most tests share, booted by whichever test comes first.
    pub fn shared() -> &'static Vm {
        static VM: OnceLock<Vm> = OnceLock::new();
        VM.get_or_init(Vm::new)
    }

    pub fn call_with(&self, approver: Box<dyn Approver>, args: Value) -> (CallOutcome, Vec<Value>) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("abhed.db")).unwrap();
        let session = store.create_session(&self.ws).unwrap();
        let (approvals, _) = Approvals::from_config(&self.config, approver).unwrap();
        let ctx = ToolContext {
            workspace: &self.workspace,
            config: &self.config,
            session: &session,
            sandbox: &self.sandbox,
            approvals: &approvals,
            delegate: None,
            output_budget: None,
        };
        let call = ToolCall { name: "bash".into(), arguments: args.to_string() };
        let out = execute(&Registry::native(), &ctx, &call).unwrap();
        let events: Vec<Value> =
            session.events().unwrap().into_iter().map(|e| json!({"kind": e.kind, "payload": e.payload})).collect();
        if let Some(o) = events.iter().find(|e| e["kind"] == "observation") {
            *self.meta.lock().unwrap() = o["payload"]["meta"].clone();
        }
        (out, events)
    }

    pub fn last_meta(&self) -> Value {
        self.meta.lock().unwrap().clone()
    }

    pub fn bash(&self, command: &str) -> CallOutcome {
        self.call_with(Box::new(NoOperator), json!({"command": command, "description": "test"})).0
    }

    pub fn bash_yes(&self, args: Value) -> CallOutcome {
        self.call_with(Box::new(Yes), args).0
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.ws.join(rel)
    }
}
