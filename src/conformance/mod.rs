//! Conformance cases as data: a folder per case holding the input tree, the calls, the exact
//! text the model must see, and the tree expected afterwards (docs/CONFORMANCE-CASES.md).
//!
//! `cargo test` runs every case through [`run_case`]; `abhed conformance` will run the same
//! cases from the same code.

mod tree;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};
use serde::Deserialize;

use crate::agent;
use crate::approval::gate::{Approvals, NoOperator};
use crate::config::Config;
use crate::model::ToolCall;
use crate::sandbox::{SessionSandbox, Workspace};
use crate::store::Store;
use crate::tools::{Registry, ToolContext};

use tree::Entry;

/// Every file of a case's workspace starts with this mtime (2026-01-01T00:00:00Z), so that
/// mtime ordering is deterministic.
pub const BASE_MTIME_SECS: u64 = 1_767_225_600;

/// The placeholder for the workspace root in calls and snapshots.
pub const WS: &str = "$WS";
/// The placeholder for the case's temporary directory (the workspace's parent) in snapshots.
pub const TMP: &str = "$TMP";

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
#[derive(Debug, Clone)]
pub struct Case {
    /// `tool/NNN_slug`.
    pub name: String,
    pub dir: PathBuf,
    pub spec: CaseSpec,
}

/// What running a case found. An empty `failures` is a pass.
#[derive(Debug, Clone, Default)]
pub struct CaseReport {
    pub name: String,
    pub failures: Vec<String>,
    /// Snapshots were rewritten (bless mode).
    pub blessed: bool,
}

/// The case folders under `root` (`root/<tool>/<case>/case.toml`), sorted by name.
pub fn discover(root: &Path) -> Result<Vec<Case>> {
    let mut cases = Vec::new();
    for group in sorted_dirs(root)? {
        for dir in sorted_dirs(&group)? {
            let toml_path = dir.join("case.toml");
            if !toml_path.exists() {
                continue;
            }
            let text =
                std::fs::read_to_string(&toml_path).with_context(|| format!("cannot read {}", toml_path.display()))?;
            let spec: CaseSpec = toml::from_str(&text).with_context(|| format!("invalid {}", toml_path.display()))?;
            let name = format!("{}/{}", file_name(&group), file_name(&dir));
            cases.push(Case { name, dir, spec });
        }
    }
    Ok(cases)
}

/// Run one case in a fresh temporary workspace and store. With `bless`, rewrite the case's
/// snapshots (expected.txt, after/) from what happened instead of comparing.
pub fn run_case(case: &Case, bless: bool) -> Result<CaseReport> {
    let tmp = tempfile::tempdir()?;
    let ws_dir = tmp.path().join("ws");
    std::fs::create_dir(&ws_dir)?;
    let before = case.dir.join("before");
    if before.is_dir() {
        tree::copy(&before, &ws_dir)?;
    }
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
    let after_dir = case.dir.join("after");
    let mut expected_tree = if after_dir.is_dir() { tree::snapshot(&after_dir)? } else { initial.clone() };
    if after_dir.is_dir() {
        // Files made by [[setup]] cannot live in after/ (they may be huge): unless after/
        // names them, they must be unchanged.
        for g in &generated {
            if let Some(e) = initial.get(g) {
                expected_tree.entry(g.clone()).or_insert_with(|| e.clone());
            }
        }
    }

    // What another process wrote is not the tools' doing: expect it as it was written.
    if !after_dir.is_dir() {
        for change in outside_changed {
            expected_tree.insert(change.path.clone(), Entry::File(change.content.clone().into_bytes()));
        }
    }

    let expected_path = case.dir.join("expected.txt");
    if bless {
        std::fs::write(&expected_path, &transcript)?;
        if final_tree != expected_tree && (after_dir.is_dir() || final_tree != initial) {
            let keep: BTreeMap<String, Entry> = final_tree
                .iter()
                .filter(|(k, v)| !(generated.contains(*k) && initial.get(*k) == Some(*v)))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            tree::write(&after_dir, &keep)?;
        }
        report.blessed = true;
    } else {
        let expected = std::fs::read_to_string(&expected_path).unwrap_or_default();
        if expected != transcript {
            report.failures.push(format!(
                "the model-facing text differs from {} (- expected, + actual):\n{}",
                expected_path.display(),
                similar::TextDiff::from_lines(&expected, &transcript).unified_diff().context_radius(2)
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
        toml::from_str(&text).with_context(|| format!("invalid [config] in {}", case.dir.display()))?;
    // A case's [config.approval] is the operator's (user) policy.
    let approval = match table.remove("approval") {
        Some(toml::Value::Table(t)) => Some((t, case.dir.join("case.toml"))),
        _ => None,
    };
    let mut config: Config =
        toml::Value::Table(table).try_into().with_context(|| format!("invalid [config] in {}", case.dir.display()))?;
    config.approval.user = approval;
    Ok(config)
}

/// Apply the `[[setup]]` steps; returns the workspace-relative paths of files they made.
fn apply_setup(steps: &[Setup], ws: &Path, ws_str: &str) -> Result<Vec<String>> {
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
    if h.len() % 2 != 0 {
        bail!("bytes_hex has an odd number of digits");
    }
    (0..h.len()).step_by(2).map(|i| u8::from_str_radix(&h[i..i + 2], 16).context("bad hex in bytes_hex")).collect()
}

fn sorted_dirs(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot list {}", dir.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    out.sort();
    Ok(out)
}

fn file_name(p: &Path) -> String {
    p.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default()
}
