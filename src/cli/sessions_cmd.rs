//! `abhed sessions list | show ID | export ID | verify ID [--head HASH] | resume ID [TASK]`.

use clap::Subcommand;
use serde_json::Value;

use abhed::store::{ChainCheck, Session, Store, StoredEvent, Verdict};

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
    /// Check a session's hash chain under the store's key and print its head: exit 0 when
    /// intact, 1 with the first bad event (or a recorded head not in the chain), 3 when it cannot
    /// be checked (the key is missing or not this store's).
    Verify {
        /// The session's id (`abhed sessions list` shows them).
        id: String,
        /// A head recorded earlier (`run_end`'s `head`, or this command's `head:` line): the log
        /// must still contain it, so events cut from its end are found.
        #[arg(long, value_name = "HASH")]
        head: Option<String>,
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
    let session = |id: &str| -> Result<Session<'_>, Failure> {
        store.session_unchecked(id).map_err(|e| Failure::internal(&e))?.ok_or_else(|| {
            Failure::usage(format!("no session `{id}` in {}; `abhed sessions list` shows them", path.display()))
        })
    };
    // Show and export print a damaged log as it is (that is what it is for), with a warning.
    let events = |id: &str| -> Result<Vec<StoredEvent>, Failure> {
        let s = session(id)?;
        let check = s.verify().map_err(|e| Failure::internal(&e))?;
        match &check.verdict {
            Verdict::Intact => {}
            Verdict::Broken { seq, why } => {
                eprintln!("abhed: warning: session {id} does not verify (at event {seq}: {why}); shown as stored")
            }
            Verdict::Unverifiable { why } => eprintln!("abhed: warning: session {id} cannot be verified: {why}"),
        }
        s.raw_events().map_err(|e| Failure::internal(&e))
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
        SessionsCmd::Verify { id, head } => {
            let recorded = match head {
                Some(h) if h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()) => Some(h.to_ascii_lowercase()),
                Some(h) => {
                    return Err(Failure::usage(format!(
                        "--head takes a hash of 64 hex digits (run_end's `head`), not `{h}`"
                    )));
                }
                None => None,
            };
            let s = session(&id)?;
            let check = s.verify().map_err(|e| Failure::internal(&e))?;
            let keyed_at = store.keyed_at().ok().flatten().unwrap_or_default();
            let (text, code) = verify_report(&id, &check, &keyed_at, recorded.as_deref(), |h| s.seq_of_hash(h))
                .map_err(|e| Failure::internal(&e))?;
            print_stdout(&text)?;
            Ok(code)
        }
        SessionsCmd::Resume(_) => unreachable!("handled above"),
    }
}

/// What `sessions verify` prints, and its exit status.
fn verify_report(
    id: &str,
    check: &ChainCheck,
    keyed_at: &str,
    recorded: Option<&str>,
    seq_of: impl Fn(&str) -> anyhow::Result<Option<i64>>,
) -> anyhow::Result<(String, u8)> {
    let n = check.events;
    let head_line = match &check.head {
        Some(h) => format!("head: event {} {}\n", h.seq, h.hash),
        None => "head: none (no events)\n".to_string(),
    };
    let mut out = String::new();
    let code = match &check.verdict {
        Verdict::Unverifiable { why } => {
            out.push_str(&format!("session {id}: {n} events, cannot verify the hash chain: {why}\n"));
            return Ok((out, exit::INTERNAL));
        }
        Verdict::Broken { seq: 0, why } => {
            out.push_str(&format!("session {id}: the session's record does not verify: {why}\n"));
            exit::TOOL_ERROR
        }
        Verdict::Broken { seq, why } => {
            out.push_str(&format!("session {id}: the hash chain breaks at event {seq}: {why}\n"));
            exit::TOOL_ERROR
        }
        Verdict::Intact => {
            out.push_str(&format!("session {id}: {n} events, hash chain intact\n"));
            out.push_str(&head_line);
            if let Some(a) = &check.unkeyed {
                let when = if keyed_at.is_empty() { a.keyed_at.clone() } else { keyed_at.to_string() };
                out.push_str(&format!(
                    "note: events 1-{} were written before this store had a key ({when}); their hashes are unkeyed, so they are proven unchanged since then, not since they were written\n",
                    a.seq
                ));
            }
            exit::OK
        }
    };
    if code == exit::OK
        && let Some(h) = recorded
    {
        let last = check.head.as_ref().map_or(0, |h| h.seq);
        match seq_of(h)? {
            Some(seq) if seq == last => {
                out.push_str(&format!("recorded head: event {seq}, the last: nothing was cut from the end\n"))
            }
            Some(seq) => {
                out.push_str(&format!("recorded head: event {seq}; {} events were added after it\n", last - seq))
            }
            None => {
                out.push_str(&format!(
                    "recorded head {h} is not in this log: events were cut from its end, or the store was put back to an earlier state\n"
                ));
                return Ok((out, exit::TOOL_ERROR));
            }
        }
    }
    Ok((out, code))
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
        // A call the model was given, not one it wrote (`run.given_calls`, the probe).
        "model_turn" if p.get("given").is_some() => match p.get("given_why").and_then(Value::as_str) {
            Some(why) => format!("given call ({why}): {}", s("raw")),
            None => format!("given call: {}", s("raw")),
        },
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
