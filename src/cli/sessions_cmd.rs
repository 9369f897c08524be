//! `abhed sessions list | show ID | export ID | verify ID | resume ID [TASK]`.

use clap::Subcommand;
use serde_json::Value;

use abhed::store::{Store, StoredEvent};

use super::run_cmd;
use super::{Failure, exit, print_stdout};

#[derive(Subcommand)]
pub enum SessionsCmd {
    /// Every session, newest first: id, created, events, last stop reason, task.
    List {
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// A session's transcript, for people.
    Show {
        /// The session's id (`abhed sessions list` shows them).
        id: String,
    },
    /// A session's events as JSON lines, with their hash chain.
    Export {
        /// The session's id (`abhed sessions list` shows them).
        id: String,
    },
    /// Check a session's hash chain: exit 0 when intact, 1 with the first bad event.
    Verify {
        /// The session's id (`abhed sessions list` shows them).
        id: String,
    },
    /// Continue a session that stopped (budget, Ctrl-C, a crash), or give it a follow-up task.
    Resume(Box<run_cmd::ResumeArgs>),
}

pub fn run(cmd: SessionsCmd) -> Result<u8, Failure> {
    if let SessionsCmd::Resume(r) = cmd {
        return run_cmd::resume(*r);
    }
    let path = Store::default_path().map_err(|e| Failure::internal(&e))?;
    let store = Store::open(&path).map_err(|e| Failure::internal(&e))?;
    let events = |id: &str| -> Result<Vec<StoredEvent>, Failure> {
        let s = store.open_session(id).map_err(|e| Failure::internal(&e))?.ok_or_else(|| {
            Failure::usage(format!("no session `{id}` in {}; `abhed sessions list` shows them", path.display()))
        })?;
        s.events().map_err(|e| Failure::internal(&e))
    };
    match cmd {
        SessionsCmd::List { json } => {
            let mut out = String::new();
            for s in store.sessions().map_err(|e| Failure::internal(&e))? {
                if json {
                    out.push_str(&serde_json::to_string(&s).unwrap_or_default());
                } else {
                    let mut task = s.task.as_deref().map(one_line).unwrap_or_else(|| "(tool calls only)".into());
                    if let Some(parent) = &s.parent {
                        task = format!("[subagent of {parent}] {task}");
                    }
                    let stop = s.stop_reason.as_deref().unwrap_or("-");
                    out.push_str(&format!("{}  {}  {:>5} events  {:<13} {}", s.id, s.created_at, s.events, stop, task));
                }
                out.push('\n');
            }
            print_stdout(&out)?;
            Ok(exit::OK)
        }
        SessionsCmd::Show { id } => {
            let mut out = String::new();
            for ev in events(&id)? {
                out.push_str(&show_event(&ev));
            }
            print_stdout(&out)?;
            Ok(exit::OK)
        }
        SessionsCmd::Export { id } => {
            let mut out = String::new();
            for ev in events(&id)? {
                out.push_str(&serde_json::to_string(&ev).unwrap_or_default());
                out.push('\n');
            }
            print_stdout(&out)?;
            Ok(exit::OK)
        }
        SessionsCmd::Verify { id } => {
            let s = store
                .open_session(&id)
                .map_err(|e| Failure::internal(&e))?
                .ok_or_else(|| Failure::usage(format!("no session `{id}` in {}", path.display())))?;
            let n = s.event_count().map_err(|e| Failure::internal(&e))?;
            match s.verify_chain().map_err(|e| Failure::internal(&e))? {
                None => {
                    print_stdout(&format!("session {id}: {n} events, hash chain intact\n"))?;
                    Ok(exit::OK)
                }
                Some(seq) => {
                    print_stdout(&format!(
                        "session {id}: the hash chain breaks at event {seq}: it, or the one before it, was changed after it was written\n"
                    ))?;
                    Ok(exit::TOOL_ERROR)
                }
            }
        }
        SessionsCmd::Resume(_) => unreachable!("handled above"),
    }
}

fn one_line(s: &str) -> String {
    let s: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if s.chars().count() > 60 { format!("{}...", s.chars().take(60).collect::<String>()) } else { s }
}

fn show_event(ev: &StoredEvent) -> String {
    let p = &ev.payload;
    let s = |k: &str| p.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
    let body = match ev.kind.as_str() {
        "run_start" => format!(
            "run start: model {} ({})",
            p.pointer("/model/name").and_then(Value::as_str).unwrap_or("?"),
            p.pointer("/model/adapter").and_then(Value::as_str).unwrap_or("?")
        ),
        "task" => format!("task: {}", s("text")),
        "model_turn" => {
            let mut t = format!("model turn {} ({}): {}", p["turn"], s("kind"), s("raw"));
            if let Some(f) = p.get("feedback").and_then(Value::as_str) {
                t.push_str(&format!("\n    told: {f}"));
            }
            t
        }
        "action" => format!(
            "call {} {}",
            s("tool"),
            p.get("arguments").or_else(|| p.get("arguments_raw")).map(Value::to_string).unwrap_or_default()
        ),
        "observation" => {
            let out =
                p.get("output").and_then(Value::as_str).or_else(|| p.get("internal_error").and_then(Value::as_str));
            let indented = out.unwrap_or_default().lines().map(|l| format!("    {l}")).collect::<Vec<_>>().join("\n");
            format!("result of {}:\n{indented}", s("tool"))
        }
        "run_end" => {
            let mut t = format!("run end: {} ({})", s("reason"), s("message"));
            if let Some(a) = p.get("answer").and_then(Value::as_str) {
                t.push_str(&format!("\n    answer: {a}"));
            }
            t
        }
        other => format!("{other}: {p}"),
    };
    format!("#{} {} {body}\n", ev.seq, ev.ts)
}
