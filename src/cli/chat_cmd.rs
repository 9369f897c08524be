//! `abhed chat` (and `abhed` alone on a terminal): the interactive mode. Each line is a task
//! (or a follow-up) in one session; the model's reply streams as it is written, tool calls and
//! the todo list show as they happen, approvals are asked on the terminal with the call's
//! description, and Ctrl-C stops the turn, not the session. `/resume ID` continues a stored
//! session; `/exit` or Ctrl-D leaves.
//!
//! The loop runs on its own thread (as in `abhed run`); this thread reads the operator's lines
//! and renders the loop's events until each run ends.

use std::io::{BufRead as _, Write as _};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::thread::JoinHandle;

use clap::Args;

use abhed::agent::{Event, Op, StopReason};
use abhed::config::Config;
use abhed::model::Cancel;
use abhed::store::Store;

use super::render::Renderer;
use super::run_cmd::{self, BudgetArgs, GateArgs, ModelArgs};
use super::{Failure, exit};

#[derive(Args, Default)]
pub struct ChatArgs {
    /// The workspace root (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Continue a stored session (`abhed sessions list` shows them).
    #[arg(long, value_name = "ID")]
    pub resume: Option<String>,
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub budgets: BudgetArgs,
    #[command(flatten)]
    pub gate: GateArgs,
}

const HELP: &str = "Type a task and press Enter; follow-ups continue the same session.
  Ctrl-C     stop the current turn (the session goes on)
  /resume    list this workspace's recent sessions; /resume ID continues one
  /continue  pick up where the last turn stopped, without a new task
  /undo      put back what the last task's calls changed in the workspace; /undo all: the session's
  /exit      leave (or Ctrl-D)";

/// The loop thread and its two channels.
struct Worker {
    ops: mpsc::Sender<Op>,
    events: mpsc::Receiver<Event>,
    thread: JoinHandle<Result<(), Failure>>,
}

impl Worker {
    fn start(plan: run_cmd::Plan, cancel: Cancel) -> Result<Worker, Failure> {
        let (ops, op_rx) = mpsc::channel();
        let (ev_tx, events) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("abhed-loop".into())
            .spawn(move || run_cmd::drive(plan, cancel, op_rx, ev_tx))
            .map_err(|e| Failure::internal(&e.into()))?;
        Ok(Worker { ops, events, thread })
    }

    /// Hang up and wait for the loop to end (it closes the session's VM).
    fn stop(self) -> Result<(), Failure> {
        drop(self.ops);
        self.thread.join().map_err(|_| Failure { code: exit::INTERNAL, message: "the loop thread panicked".into() })?
    }
}

pub fn run(a: ChatArgs) -> Result<u8, Failure> {
    let cancel = Cancel::new();
    let flag = cancel.flag();
    // Ctrl-C stops the turn at the next safe point; a second one before it has stopped leaves.
    let _ = ctrlc::set_handler(move || {
        if flag.swap(true, Ordering::SeqCst) {
            std::process::exit(i32::from(exit::INTERRUPTED));
        }
    });
    let mut session = a.resume.clone();
    let ws = match &session {
        Some(id) => session_workspace(id)?,
        None => super::workspace_dir(a.workspace.clone(), None)?,
    };
    // The gate, before anything is typed: a refused model ends the chat here.
    run_cmd::say_config_warnings(&chat_plan(&a, ws.clone(), session.clone())?.config);
    // Started at the first task, so that a chat that only resumes another session, or ends at
    // once, leaves no empty session behind.
    let mut worker: Option<Worker> = None;
    let mut worker_ws = ws.clone();
    let mut renderer = Renderer::new(false);
    say(&format!(
        "abhed chat in {}{}. /help for commands.",
        ws.display(),
        session.as_deref().map(|s| format!(", session {s}")).unwrap_or_default()
    ));
    let stdin = std::io::stdin();
    let mut lines = stdin.lock().lines();
    loop {
        prompt();
        let Some(line) = lines.next() else { break };
        let line = line.map_err(|e| Failure::usage(format!("cannot read the terminal: {e}")))?;
        let line = line.trim();
        // A Ctrl-C pressed while idle has nothing to stop.
        cancel.reset();
        let op = match line {
            "" => continue,
            "/exit" | "/quit" => break,
            "/help" => {
                say(HELP);
                continue;
            }
            "/continue" => Op::Continue,
            "/resume" => {
                list_sessions(&ws)?;
                continue;
            }
            l if l.starts_with("/resume ") => {
                let id = l["/resume ".len()..].trim().to_string();
                let ws = match session_workspace(&id) {
                    Ok(ws) => ws,
                    Err(f) => {
                        say(&f.message);
                        continue;
                    }
                };
                if let Some(w) = worker.take() {
                    w.stop()?;
                }
                worker_ws = ws;
                say(&format!("continuing session {id}; type a follow-up, or /continue"));
                session = Some(id);
                continue;
            }
            "/undo" | "/undo all" => {
                match &session {
                    Some(id) => {
                        let _ = super::undo_cmd::in_chat(id, line == "/undo all").map_err(|f| say(&f.message));
                    }
                    None => say("nothing to undo: no task has run in this chat yet"),
                }
                continue;
            }
            l if l.starts_with('/') => {
                say(&format!("unknown command {l}. {HELP}"));
                continue;
            }
            task => Op::Task(task.to_string()),
        };
        let w = match &mut worker {
            Some(w) => w,
            None => worker.insert(Worker::start(chat_plan(&a, worker_ws.clone(), session.clone())?, cancel.clone())?),
        };
        if w.ops.send(op).is_err() {
            break;
        }
        // Render until this run ends; the loop thread ending early (a setup failure) ends chat.
        let mut ended = None;
        while ended.is_none() {
            let Ok(ev) = w.events.recv() else { break };
            if let Event::Session { session: id, .. } = &ev {
                session = Some(id.clone());
            }
            if let Event::RunEnd { reason, .. } = &ev {
                ended = Some(*reason);
            }
            renderer.render(&ev)?;
        }
        renderer.finish();
        match ended {
            None => {
                let w = worker.take();
                return w.map_or(Ok(()), Worker::stop).map(|()| exit::INTERNAL);
            }
            Some(StopReason::Interrupted) => {
                say("turn stopped; the session goes on. Type a follow-up, /continue, or /exit.")
            }
            Some(_) => {}
        }
    }
    if let Some(id) = &session {
        say(&format!("session {id}; continue it with: abhed chat --resume {id}"));
    }
    if let Some(w) = worker {
        w.stop()?;
    }
    Ok(exit::OK)
}

fn chat_plan(a: &ChatArgs, ws: PathBuf, session: Option<String>) -> Result<run_cmd::Plan, Failure> {
    let config = Config::load(&ws).map_err(|e| Failure::usage(format!("{e:#}")))?;
    let mut plan = run_cmd::plan(ws, session, config, &a.model, &a.budgets, Op::Continue)?;
    run_cmd::check_workspace(&plan)?;
    run_cmd::gate(&plan, &a.gate)?;
    plan.stream = true;
    Ok(plan)
}

/// The session store, where `abhed run` and `sessions` find it too.
fn open_store() -> Result<Store, Failure> {
    let path = Store::default_path().map_err(|e| Failure::internal(&e))?;
    Store::open(&path).map_err(|e| Failure::internal(&e))
}

fn session_workspace(id: &str) -> Result<PathBuf, Failure> {
    let store = open_store()?;
    let s = store
        .open_session(id)
        .map_err(|e| Failure::internal(&e))?
        .ok_or_else(|| Failure::usage(format!("no session `{id}`; /resume lists this workspace's sessions")))?;
    Ok(s.workspace().to_path_buf())
}

/// This workspace's ten most recent top-level sessions.
fn list_sessions(ws: &std::path::Path) -> Result<(), Failure> {
    let store = open_store()?;
    let ws = ws.display().to_string();
    let mine: Vec<_> = store
        .sessions()
        .map_err(|e| Failure::internal(&e))?
        .into_iter()
        .filter(|s| s.workspace == ws && s.parent.is_none())
        .take(10)
        .collect();
    if mine.is_empty() {
        say("no stored sessions in this workspace");
    }
    for s in mine {
        let task: String = s.task.as_deref().unwrap_or("(no task)").chars().take(60).collect();
        say(&format!("  {}  {}  {:<12} {}", s.id, s.created_at, s.stop_reason.as_deref().unwrap_or("-"), task));
    }
    Ok(())
}

fn prompt() {
    let mut e = std::io::stderr();
    let _ = write!(e, "\n> ");
    let _ = e.flush();
}

fn say(text: &str) {
    let _ = writeln!(std::io::stderr(), "{text}");
}
