//! The library-layer test helper: a temporary workspace and store, and one call through the
//! dispatcher exactly as the agent loop makes it. (`tests/cli.rs` has the CLI-layer one.)
// Each test crate uses a different part of this module.
#![allow(dead_code)]

pub mod cli;
pub mod scripted;
pub mod vm;

use std::path::PathBuf;

use abhed::agent::{CallOutcome, execute};
use abhed::approval::gate::{Approvals, NoOperator};
use abhed::config::Config;
use abhed::model::ToolCall;
use abhed::sandbox::{SessionSandbox, Workspace};
use abhed::store::{Session, Store};
use abhed::tools::{Registry, ToolContext};

pub struct Harness {
    _tmp: tempfile::TempDir,
    /// The workspace root, canonical.
    pub ws: PathBuf,
    pub store: Store,
    workspace: Workspace,
    config: Config,
    registry: Registry,
    sandbox: SessionSandbox,
    approvals: Approvals,
}

impl Harness {
    /// An empty workspace with the default config and a fresh store beside it.
    pub fn new() -> Harness {
        Harness::with_config(|_, _| Config::default())
    }

    /// An empty workspace and a fresh store, with the config `make` returns given the temporary
    /// folder and the workspace root (its `workspace.extra_roots` become roots, its `[approval]`
    /// the policy, with nobody to answer).
    pub fn with_config(make: impl FnOnce(&std::path::Path, &std::path::Path) -> Config) -> Harness {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        let ws = ws.canonicalize().unwrap();
        let store = Store::open(&tmp.path().join("abhed.db")).unwrap();
        let config = make(&tmp.path().canonicalize().unwrap(), &ws);
        let workspace = Workspace::new(&ws, &config.workspace.extra_roots).unwrap();
        let sandbox = SessionSandbox::new(&config.sandbox, &workspace);
        let (approvals, _) = Approvals::from_config(&config, Box::new(NoOperator)).unwrap();
        Harness { _tmp: tmp, ws, store, workspace, config, registry: Registry::native(), sandbox, approvals }
    }

    pub fn session(&self) -> Session<'_> {
        self.store.create_session(&self.ws).unwrap()
    }

    /// The absolute path of `rel` in the workspace, as the model would write it.
    pub fn path(&self, rel: &str) -> String {
        self.ws.join(rel).display().to_string()
    }

    /// One tool call in `session`; an internal fault fails the test.
    pub fn call(&self, session: &Session<'_>, tool: &str, args: serde_json::Value) -> CallOutcome {
        let ctx = ToolContext {
            workspace: &self.workspace,
            config: &self.config,
            session,
            sandbox: &self.sandbox,
            approvals: &self.approvals,
            delegate: None,
            output_budget: None,
        };
        execute(&self.registry, &ctx, &ToolCall { name: tool.to_string(), arguments: args.to_string() }).unwrap()
    }
}

/// Every file under `dir` is one git would commit: a suite folder's own `.gitignore` (a case
/// that tests ignore rules has one) hides its files from `git add`, and then the case passes
/// here and fails on a fresh clone. Such files must be added with `git add -f`. Outside a
/// checkout (an unpacked bundle's source) there is nothing to compare with.
pub fn assert_committed(dir: &std::path::Path) {
    let Ok(out) = std::process::Command::new("git")
        .current_dir(dir)
        .args(["ls-files", "--others", "--ignored", "--exclude-standard", "--", "."])
        .output()
    else {
        return;
    };
    if !out.status.success() {
        return;
    }
    let hidden = String::from_utf8_lossy(&out.stdout);
    assert!(
        hidden.trim().is_empty(),
        "these files under {} are ignored by git, so a fresh clone lacks them; add them with `git add -f`:\n{hidden}",
        dir.display()
    );
}
