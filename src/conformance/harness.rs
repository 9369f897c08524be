//! The tool-contract cases, `conformance/cases/<tool>/<NNN_slug>/` (docs/CONFORMANCE-CASES.md):
//! calls made straight to the tools, no model, each checked against the exact text the model
//! must see and the tree expected afterwards.

use std::path::Path;

use anyhow::{Context as _, Result, bail};
use serde::Deserialize;

use super::suite::{Item, Suite};
use super::tree::{self, Tree};
use super::{BASE_MTIME_SECS, TMP, WS};
use crate::agent;
use crate::approval::gate::{Approvals, NoOperator};
use crate::config::Config;
use crate::model::ToolCall;
use crate::sandbox::{SessionSandbox, Workspace};
use crate::store::Store;
use crate::tools::{Registry, ToolContext};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaseSpec {
    pub description: String,
    #[serde(default)]
    pub config: Option<toml::Table>,
    #[serde(default)]
    pub setup: Vec<Setup>,
    #[serde(default, rename = "call")]
    pub calls: Vec<CallSpec>,
    #[serde(default)]
    pub expect_mode: Vec<ExpectMode>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Setup {
    pub path: Option<String>,
    pub repeat: Option<String>,
    pub count: Option<usize>,
    pub bytes_hex: Option<String>,
    pub dir: Option<String>,
    pub mode: Option<String>,
    pub symlink: Option<String>,
    /// A hard link of `target` (relative to the workspace), named this.
    pub hardlink: Option<String>,
    pub target: Option<String>,
    /// A Unix socket: a path that exists but is no regular file.
    pub socket: Option<String>,
    pub age_secs: Option<u64>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallSpec {
    /// Another process rewrites a file just before this call (to make a read stale).
    #[serde(default)]
    pub outside_change: Option<OutsideChange>,
    pub tool: String,
    pub args: String,
    pub expect: Expect,
    pub code: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutsideChange {
    pub path: String,
    pub content: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Expect {
    Ok,
    Error,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectMode {
    pub path: String,
    pub mode: String,
}

/// One case folder.
pub type Case = Item<CaseSpec>;

/// What running a case found. An empty `failures` is a pass.
#[derive(Debug, Clone, Default)]
pub struct CaseReport {
    pub name: String,
    pub failures: Vec<String>,
    /// Snapshots were rewritten (bless mode).
    pub blessed: bool,
}

/// The cases of the suite, sorted by name.
pub fn cases(suite: &Suite) -> Result<Vec<Case>> {
    suite.items("cases", "case.toml")
}

/// Run one case in a fresh temporary workspace and store. With `bless` (a suite read from
/// disk), rewrite the case's snapshots (expected.txt, after/) from what happened instead of
/// comparing.
pub fn run_case(suite: &Suite, case: &Case, bless: bool) -> Result<CaseReport> {
    let disk_dir = match (bless, suite.disk()) {
        (false, _) => None,
        (true, Some(root)) => Some(root.join(&case.prefix)),
        (true, None) => bail!("bless needs the suite read from a folder, not the one built in"),
    };
    let tmp = tempfile::tempdir()?;
    let ws_dir = tmp.path().join("ws");
    let before = suite.subtree(&format!("{}/before", case.prefix)).unwrap_or_default();
    tree::write(&ws_dir, &before)?;
    let ws_dir = ws_dir.canonicalize()?;
    let ws_str = ws_dir.display().to_string();
    let tmp_str = ws_dir.parent().unwrap_or(&ws_dir).display().to_string();
    let generated = apply_setup(&case.spec.setup, &ws_dir, &ws_str)?;
    let initial = tree::snapshot(&ws_dir)?;

    let config = case_config(case, &ws_str)?;
    let workspace = Workspace::new(&ws_dir, &config.workspace.extra_roots)?;
    let store = Store::open(&tmp.path().join("abhed.db"))?;
    let session = store.create_session(&ws_dir)?;
    let sandbox = SessionSandbox::new(&config.sandbox, &workspace);
    let (approvals, _) = Approvals::from_config(&config, Box::new(NoOperator))?;
    let ctx = ToolContext {
        workspace: &workspace,
        config: &config,
        session: &session,
        sandbox: &sandbox,
        approvals: &approvals,
        delegate: None,
        output_budget: None,
    };
    let registry = Registry::native();

    let mut report = CaseReport { name: case.name.clone(), ..Default::default() };
    let mut transcript = String::new();
    let mut outside_changed = Vec::new();
    for (i, call) in case.spec.calls.iter().enumerate() {
        if let Some(change) = &call.outside_change {
            std::fs::write(ws_dir.join(&change.path), &change.content)?;
            outside_changed.push(change);
        }
        let args = call.args.replace(WS, &ws_str);
        let outcome = agent::execute(&registry, &ctx, &ToolCall { name: call.tool.clone(), arguments: args })
            .with_context(|| format!("call {} ({}) hit an internal error", i + 1, call.tool))?;
        let text = outcome.text().replace(&ws_str, WS).replace(&tmp_str, TMP);
        transcript.push_str(&format!(">>> {} {}\n{}", call.tool, call.args, text));
        if !text.ends_with('\n') {
            transcript.push('\n');
        }
        transcript.push('\n');
        match (&outcome.result, call.expect) {
            (Ok(_), Expect::Error) => {
                report.failures.push(format!("call {} ({}): expected an error, it succeeded", i + 1, call.tool))
            }
            (Err(e), Expect::Ok) => {
                report.failures.push(format!("call {} ({}): expected success, got [{}]", i + 1, call.tool, e.code))
            }
            (Err(e), Expect::Error) => {
                if let Some(code) = &call.code
                    && code != e.code.as_str()
                {
                    report.failures.push(format!(
                        "call {} ({}): expected code {code}, got {}",
                        i + 1,
                        call.tool,
                        e.code
                    ));
                }
                if e.mutated {
                    report.failures.push(format!("call {} ({}): an error reported a mutation", i + 1, call.tool));
                }
            }
            (Ok(_), Expect::Ok) => {}
        }
    }
    // Every call must be on record, action and observation. (Approval decisions of write and
    // edit sit between them; they are not counted here.)
    let events = session.events()?;
    let calls_on_record = events.iter().filter(|e| e.kind == "action" || e.kind == "observation").count();
    if calls_on_record != 2 * case.spec.calls.len() {
        report.failures.push(format!(
            "expected {} action and observation events in the store, found {calls_on_record}",
            2 * case.spec.calls.len(),
        ));
    }

    let final_tree = tree::snapshot(&ws_dir)?;
    let after = suite.subtree(&format!("{}/after", case.prefix));
    let mut expected_tree = after.clone().unwrap_or_else(|| initial.clone());
    if after.is_some() {
        // Files made by [[setup]] cannot live in after/ (they may be huge): unless after/
        // names them, they must be unchanged.
        for g in &generated {
            if let Some(e) = initial.get(g) {
                expected_tree.entry(g.clone()).or_insert_with(|| e.clone());
            }
        }
    }

    // What another process wrote is not the tools' doing: expect it as it was written.
    if after.is_none() {
        for change in outside_changed {
            expected_tree.insert(change.path.clone(), tree::Entry::File(change.content.clone().into_bytes()));
        }
    }

    let expected_path = format!("{}/expected.txt", case.prefix);
    if let Some(dir) = disk_dir {
        std::fs::write(dir.join("expected.txt"), &transcript)?;
        if final_tree != expected_tree && (after.is_some() || final_tree != initial) {
            let keep: Tree = final_tree
                .iter()
                .filter(|(k, v)| !(generated.contains(*k) && initial.get(*k) == Some(*v)))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            tree::write(&dir.join("after"), &keep)?;
        }
        report.blessed = true;
    } else {
        let expected = suite.text(&expected_path).unwrap_or_default();
        if expected != transcript {
            report.failures.push(format!(
                "the model-facing text differs from {expected_path} (- expected, + actual):\n{}",
                similar::TextDiff::from_lines(expected, &transcript).unified_diff().context_radius(2)
            ));
        }
        report.failures.extend(tree::compare(&expected_tree, &final_tree));
    }

    for m in &case.spec.expect_mode {
        use std::os::unix::fs::PermissionsExt as _;
        let want = u32::from_str_radix(&m.mode, 8).with_context(|| format!("bad mode {:?}", m.mode))?;
        let got = std::fs::symlink_metadata(ws_dir.join(&m.path))?.permissions().mode() & 0o7777;
        if got != want {
            report.failures.push(format!("{}: expected mode {want:04o}, found {got:04o}", m.path));
        }
    }
    Ok(report)
}

fn case_config(case: &Case, ws: &str) -> Result<Config> {
    let Some(table) = &case.spec.config else { return Ok(Config::default()) };
    let text = toml::to_string(table)?.replace(WS, ws);
    let mut table: toml::Table =
        toml::from_str(&text).with_context(|| format!("invalid [config] in {}", case.prefix))?;
    // A case's [config.approval] is the operator's (user) policy.
    let approval = match table.remove("approval") {
        Some(toml::Value::Table(t)) => Some((t, Path::new(&case.prefix).join("case.toml"))),
        _ => None,
    };
    let mut config: Config =
        toml::Value::Table(table).try_into().with_context(|| format!("invalid [config] in {}", case.prefix))?;
    config.approval.user = approval;
    Ok(config)
}

/// Apply the `[[setup]]` steps; returns the workspace-relative paths of files they made.
pub(super) fn apply_setup(steps: &[Setup], ws: &Path, ws_str: &str) -> Result<Vec<String>> {
    use std::os::unix::fs::PermissionsExt as _;
    let mut generated = Vec::new();
    // The base mtime first, so that age_secs below wins.
    tree::set_all_mtimes(ws, BASE_MTIME_SECS)?;
    for s in steps {
        if let Some(dir) = &s.dir {
            std::fs::create_dir_all(ws.join(dir))?;
        }
        if let Some(sock) = &s.socket {
            // Bound and dropped: the socket file stays behind.
            std::os::unix::net::UnixListener::bind(ws.join(sock))?;
        }
        if let Some(link) = &s.symlink {
            let target = s.target.as_deref().context("a symlink setup needs `target`")?.replace(WS, ws_str);
            std::os::unix::fs::symlink(target, ws.join(link))?;
        }
        if let Some(link) = &s.hardlink {
            let target = s.target.as_deref().context("a hardlink setup needs `target`")?;
            std::fs::hard_link(ws.join(target), ws.join(link))?;
        }
        let Some(path) = &s.path else { continue };
        let full = ws.join(path);
        let content = match (&s.repeat, &s.bytes_hex) {
            (Some(r), None) => Some(r.repeat(s.count.unwrap_or(1)).into_bytes()),
            (None, Some(h)) => Some(decode_hex(h)?),
            (None, None) => None,
            (Some(_), Some(_)) => bail!("setup for {path}: give `repeat` or `bytes_hex`, not both"),
        };
        if let Some(bytes) = content {
            if let Some(parent) = full.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(&full, bytes)?;
            tree::set_mtime(&full, BASE_MTIME_SECS)?;
            generated.push(path.clone());
        }
        if let Some(mode) = &s.mode {
            let bits = u32::from_str_radix(mode, 8).with_context(|| format!("bad mode {mode:?}"))?;
            std::fs::set_permissions(&full, std::fs::Permissions::from_mode(bits))?;
        }
        if let Some(age) = s.age_secs {
            tree::set_mtime(&full, BASE_MTIME_SECS.saturating_sub(age))?;
        }
    }
    Ok(generated)
}

fn decode_hex(h: &str) -> Result<Vec<u8>> {
    let h: String = h.chars().filter(|c| !c.is_whitespace()).collect();
    if !h.len().is_multiple_of(2) {
        bail!("bytes_hex has an odd number of digits");
    }
    (0..h.len()).step_by(2).map(|i| u8::from_str_radix(&h[i..i + 2], 16).context("bad hex in bytes_hex")).collect()
}
