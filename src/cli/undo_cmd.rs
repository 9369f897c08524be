//! `abhed undo [SESSION] [--steps N] [--list] [--force]`: put the workspace back as it was before
//! a session's calls changed it, bash's changes included, latest call first. Each call's changes
//! are in its observation event (`workspace_changes`, docs/EVENTS.md); the contents come from
//! the checkpoint's kept objects, checked by their sha256. The undo is an event of the session.

use clap::Args;
use serde_json::{Value, json};

use abhed::config::Config;
use abhed::sandbox::Workspace;
use abhed::store::{EventKind, Session, Store, StoredEvent};
use abhed::undo::{Change, Objects, Report, undo_changes};

use super::{Failure, exit, print_stdout};

#[derive(Args)]
pub struct UndoArgs {
    /// The session whose calls to undo; default: the newest in the current folder.
    pub session: Option<String>,
    /// Undo only the last N calls that changed the workspace (default: all of them).
    #[arg(long, value_name = "N")]
    pub steps: Option<usize>,
    /// List the calls that changed the workspace, and what each changed; undo nothing.
    #[arg(long)]
    pub list: bool,
    /// Put back also what changed again after the call (else left as it is, and reported).
    #[arg(long)]
    pub force: bool,
}

/// One call that changed the workspace.
struct Step {
    session: String,
    observation_seq: i64,
    ts: String,
    what: String,
    changes: Vec<Change>,
}

pub fn run(args: UndoArgs) -> Result<u8, Failure> {
    let path = Store::default_path().map_err(|e| Failure::internal(&e))?;
    let store = Store::open(&path).map_err(|e| Failure::internal(&e))?;
    let id = match &args.session {
        Some(id) => id.clone(),
        None => newest_here(&store)?,
    };
    undo(&store, &id, &args, false)
}

/// `/undo` in chat: the calls of the session's last task (`all`: every call of the session).
pub fn in_chat(id: &str, all: bool) -> Result<u8, Failure> {
    let path = Store::default_path().map_err(|e| Failure::internal(&e))?;
    let store = Store::open(&path).map_err(|e| Failure::internal(&e))?;
    let args = UndoArgs { session: Some(id.to_string()), steps: None, list: false, force: false };
    undo(&store, id, &args, !all)
}

/// Undo `args`' calls of session `id`; `last_task`: only those since its last task.
fn undo(store: &Store, id: &str, args: &UndoArgs, last_task: bool) -> Result<u8, Failure> {
    let path = store.path();
    let session = store.open_session(id).map_err(|e| Failure::usage(format!("{e:#}")))?.ok_or_else(|| {
        Failure::usage(format!("no session `{id}` in {}; `abhed sessions list` shows them", path.display()))
    })?;
    let mut steps = Vec::new();
    collect(store, &session, &mut steps)?;
    let done = undone(&session)?;
    steps.retain(|s| !done.contains(&(s.session.clone(), s.observation_seq)));
    if last_task {
        let events = session.events().map_err(|e| Failure::usage(format!("{e:#}")))?;
        if let Some(task) = events.iter().rev().find(|e| e.kind == "task") {
            steps.retain(|s| s.ts >= task.ts);
        }
    }
    steps.sort_by(|a, b| (&b.ts, b.observation_seq).cmp(&(&a.ts, a.observation_seq)));
    if let Some(n) = args.steps {
        steps.truncate(n);
    }
    if steps.is_empty() {
        print_stdout(&format!(
            "Nothing to undo: no call of session {id} has changes to the workspace on record that are not undone yet (calls made with checkpoints off, or before abhed kept them, have none).\n"
        ))?;
        return Ok(exit::OK);
    }
    if args.list {
        for s in &steps {
            print_stdout(&format!("{} {}: {}\n", s.ts, s.what, summary(&s.changes)))?;
            for c in &s.changes {
                print_stdout(&format!("  {} {}\n", verb(c), c.path))?;
            }
        }
        return Ok(exit::OK);
    }
    let config = Config::load(session.workspace()).map_err(|e| Failure::usage(format!("{e:#}")))?;
    let ws = Workspace::new(session.workspace(), &config.workspace.extra_roots).map_err(|e| {
        Failure::usage(format!("the session's workspace {} cannot be opened: {e}", session.workspace().display()))
    })?;
    let objects = Objects::beside(store.path());
    let mut total = Report::default();
    let mut record = Vec::new();
    for s in &steps {
        let mut report = Report::default();
        undo_changes(&ws, &objects, &s.changes, args.force, &mut report);
        print_stdout(&format!(
            "undid {}: {} put back, {} removed{}\n",
            s.what,
            report.restored.len(),
            report.removed.len(),
            trouble(&report)
        ))?;
        for (p, why) in report.conflicts.iter().chain(&report.failed) {
            print_stdout(&format!("  not undone: {p}: {why}\n"))?;
        }
        // A call with paths left as they are is not done: a later undo (`--force`) takes it again.
        if report.conflicts.is_empty() && report.failed.is_empty() {
            record.push(json!({"session": s.session, "observation_seq": s.observation_seq}));
        }
        total.restored.extend(report.restored);
        total.removed.extend(report.removed);
        total.conflicts.extend(report.conflicts);
        total.failed.extend(report.failed);
    }
    let payload = json!({
        "steps": record,
        "restored": total.restored.len(),
        "removed": total.removed.len(),
        "conflicts": total.conflicts.iter().map(|(p, w)| json!({"path": p, "why": w})).collect::<Vec<_>>(),
        "failed": total.failed.iter().map(|(p, w)| json!({"path": p, "why": w})).collect::<Vec<_>>(),
        "force": args.force,
    });
    session.append(EventKind::Undo, &payload).map_err(|e| Failure::internal(&e))?;
    if total.conflicts.is_empty() && total.failed.is_empty() {
        Ok(exit::OK)
    } else {
        print_stdout("Some paths were not put back (listed above); `--force` puts back those changed again since.\n")?;
        Ok(exit::TOOL_ERROR)
    }
}

/// The newest top-level session whose workspace is the current folder.
fn newest_here(store: &Store) -> Result<String, Failure> {
    let here = std::env::current_dir().and_then(|d| d.canonicalize()).map_err(|e| Failure::usage(e.to_string()))?;
    let sessions = store.sessions().map_err(|e| Failure::internal(&e))?;
    sessions
        .into_iter()
        .find(|s| s.parent.is_none() && std::path::Path::new(&s.workspace) == here)
        .map(|s| s.id)
        .ok_or_else(|| Failure::usage(format!("no session in {}; name one (`abhed sessions list`)", here.display())))
}

/// The calls of `session` and of its subagents' sessions that changed the workspace.
fn collect(store: &Store, session: &Session<'_>, out: &mut Vec<Step>) -> Result<(), Failure> {
    let events = session.events().map_err(|e| Failure::usage(format!("{e:#}")))?;
    for ev in events.iter().filter(|e| e.kind == "observation") {
        let Some(changes) = ev.payload.get("workspace_changes").and_then(|w| w.get("changes")) else { continue };
        let changes: Vec<Change> = serde_json::from_value(changes.clone())
            .map_err(|e| Failure::internal(&anyhow::anyhow!("event {} of {}: {e}", ev.seq, session.id())))?;
        out.push(Step {
            session: session.id().to_string(),
            observation_seq: ev.seq,
            ts: ev.ts.clone(),
            what: describe(&events, &ev.payload),
            changes,
        });
    }
    let children = store.sessions().map_err(|e| Failure::internal(&e))?;
    for child in children.iter().filter(|c| c.parent.as_deref() == Some(session.id())) {
        if let Some(s) = store.open_session(&child.id).map_err(|e| Failure::usage(format!("{e:#}")))? {
            collect(store, &s, out)?;
        }
    }
    Ok(())
}

/// The steps the session's earlier undos did.
fn undone(session: &Session<'_>) -> Result<Vec<(String, i64)>, Failure> {
    let events = session.events().map_err(|e| Failure::usage(format!("{e:#}")))?;
    Ok(events
        .iter()
        .filter(|e| e.kind == "undo")
        .flat_map(|e| e.payload["steps"].as_array().cloned().unwrap_or_default())
        .filter_map(|s| Some((s["session"].as_str()?.to_string(), s["observation_seq"].as_i64()?)))
        .collect())
}

/// "bash `rm -rf src`", "write /ws/a.py": the call, from its action event.
fn describe(events: &[StoredEvent], obs: &Value) -> String {
    let action = obs["action_seq"].as_i64().and_then(|seq| events.iter().find(|e| e.seq == seq));
    let tool = obs["tool"].as_str().unwrap_or("a call");
    let args = action.map(|a| &a.payload["arguments"]);
    match (tool, args) {
        ("bash", Some(a)) => format!("bash `{}`", a["command"].as_str().unwrap_or_default()),
        (_, Some(a)) if a["path"].is_string() => format!("{tool} {}", a["path"].as_str().unwrap_or_default()),
        _ => tool.to_string(),
    }
}

fn verb(c: &Change) -> &'static str {
    match (&c.before, &c.after) {
        (None, _) => "made",
        (_, None) => "deleted",
        _ => "changed",
    }
}

fn summary(changes: &[Change]) -> String {
    let count = |v: &str| changes.iter().filter(|c| verb(c) == v).count();
    format!("{} made, {} changed, {} deleted", count("made"), count("changed"), count("deleted"))
}

fn trouble(r: &Report) -> String {
    let n = r.conflicts.len() + r.failed.len();
    if n == 0 { String::new() } else { format!(", {n} not undone") }
}
