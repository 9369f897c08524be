//! The interactive mode in a real terminal: `abhed chat` runs in a tmux pane, the operator's
//! keys go in with `send-keys`, and what the terminal shows comes back with `capture-pane`.
//! The scripted model drives the deterministic flows (streaming, the live todo list, Ctrl-C,
//! approvals, resuming a session); one test drives the real small model.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::cli::Env;
use serde_json::json;

/// A tmux server of its own, with one pane running `abhed ARGS` in the env's workspace.
struct Pane {
    socket: String,
}

impl Pane {
    fn start(env: &Env, args: &[&str]) -> Pane {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let socket = format!("abhed-test-{}-{n}", std::process::id());
        let quote = |s: &str| format!("'{}'", s.replace('\'', r"'\''"));
        let mut line = format!(
            "env ABHED_ALLOW_UNQUALIFIED_MODEL=1 ABHED_HOME={} ABHED_CONFIG={} {}",
            quote(&env.home.display().to_string()),
            quote(&env.home.join("no-config.toml").display().to_string()),
            quote(env!("CARGO_BIN_EXE_abhed"))
        );
        for a in args {
            line.push(' ');
            line.push_str(&quote(a));
        }
        // The pane stays after abhed exits, showing its status.
        line.push_str("; echo EXITED $?; sleep 600");
        let ok = Command::new("tmux")
            .args(["-L", &socket, "-f", "/dev/null", "new-session", "-d", "-s", "t", "-x", "200", "-y", "50"])
            .args(["-c", &env.ws.display().to_string(), &line])
            .status()
            .expect("tmux runs the interactive tests (apt-get install tmux)");
        assert!(ok.success());
        Pane { socket }
    }

    fn keys(&self, keys: &[&str]) {
        let ok = Command::new("tmux").args(["-L", &self.socket, "send-keys", "-t", "t"]).args(keys).status().unwrap();
        assert!(ok.success());
    }

    /// Type a line and press Enter.
    fn line(&self, text: &str) {
        self.keys(&["-l", text]);
        self.keys(&["Enter"]);
    }

    /// Everything the pane shows, scrollback included, lines joined where they wrapped.
    fn screen(&self) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket, "capture-pane", "-p", "-J", "-t", "t", "-S", "-2000"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The screen once `text` has appeared on it `times` times; fails after `secs`.
    fn wait_for_n(&self, text: &str, times: usize, secs: u64) -> String {
        let start = Instant::now();
        loop {
            let s = self.screen();
            if s.matches(text).count() >= times {
                return s;
            }
            assert!(start.elapsed() < Duration::from_secs(secs), "{text:?} did not appear {times}x; the screen:\n{s}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn wait_for(&self, text: &str, secs: u64) -> String {
        self.wait_for_n(text, 1, secs)
    }
}

impl Drop for Pane {
    fn drop(&mut self) {
        let _ = Command::new("tmux").args(["-L", &self.socket, "kill-server"]).status();
    }
}

fn call(tool: &str, args: serde_json::Value) -> String {
    json!({"tool": tool, "arguments": args}).to_string()
}

fn answer(text: &str) -> String {
    json!({"answer": text, "status": "done"}).to_string()
}

/// The ids of the env's top-level sessions.
fn sessions(env: &Env) -> Vec<String> {
    let store = abhed::store::Store::open(&env.home.join("abhed.db")).unwrap();
    store.sessions().unwrap().into_iter().filter(|s| s.parent.is_none()).map(|s| s.id).collect()
}

fn tasks(env: &Env, id: &str) -> Vec<String> {
    let store = abhed::store::Store::open(&env.home.join("abhed.db")).unwrap();
    let s = store.open_session(id).unwrap().unwrap();
    s.events()
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == "task")
        .map(|e| e.payload["text"].as_str().unwrap().into())
        .collect()
}

#[test]
fn chat_streams_shows_the_todo_list_and_ctrl_c_stops_the_turn_not_the_session() {
    let env = Env::new();
    let todos = json!({"todos": [
        {"content": "Read the notes", "status": "in_progress"},
        {"content": "Write the summary", "status": "pending"},
    ]});
    let script = [
        call("todo", todos),
        answer("The notes are read."),
        // The second task: a reply that takes long enough to be stopped.
        "#sleep 30000".into(),
        answer("never shown"),
        // The third: the same session, its first task still in the conversation.
        "#expect-prompt Summarise the notes".into(),
        answer("Still here after the stop."),
    ]
    .join("\n");
    let script = env.file("chat.script", &script);
    let pane = Pane::start(&env, &["chat", "--script", &script.display().to_string()]);
    pane.wait_for("/help for commands", 20);
    pane.line("Summarise the notes");
    let screen = pane.wait_for("The notes are read.\n", 20);
    // The checklist, live, as the todo call made it.
    assert!(screen.contains("[>] 1. Read the notes"), "{screen}");
    assert!(screen.contains("[ ] 2. Write the summary"), "{screen}");
    // The reply streamed as written (the raw turn), then the answer itself.
    assert!(screen.contains(r#"  {"answer":"The notes are read.","status":"done"}"#), "{screen}");

    pane.line("Now take your time");
    std::thread::sleep(Duration::from_millis(1500));
    pane.keys(&["C-c"]);
    pane.wait_for("turn stopped; the session goes on", 20);
    pane.line("And now?");
    pane.wait_for("Still here after the stop.\n", 20);
    pane.line("/exit");
    let screen = pane.wait_for("EXITED 0", 20);
    assert!(screen.contains("stopped: interrupted"), "{screen}");

    let ids = sessions(&env);
    assert_eq!(ids.len(), 1, "one session for the whole chat");
    assert_eq!(tasks(&env, &ids[0]), ["Summarise the notes", "Now take your time", "And now?"]);
    assert!(screen.contains(&format!("abhed chat --resume {}", ids[0])), "{screen}");
}

#[test]
fn chat_asks_approval_with_the_call_s_description() {
    let env = Env::new();
    std::fs::create_dir(env.ws.join("build")).unwrap();
    let rm = call(
        "bash",
        json!({"command": format!("rm -rf {}", env.path("build")), "description": "Remove the old build folder"}),
    );
    let script = [rm, "#expect-prompt approval_denied".into(), answer("Left the folder alone.")].join("\n");
    let script = env.file("chat.script", &script);
    let pane = Pane::start(&env, &["chat", "--script", &script.display().to_string()]);
    pane.wait_for("/help for commands", 20);
    pane.line("Clean up the build");
    let screen = pane.wait_for("Allow?", 20);
    assert!(screen.contains("approval needed ── bash: Remove the old build folder"), "{screen}");
    pane.line("d");
    pane.wait_for("Left the folder alone.\n", 20);
    assert!(env.ws.join("build").is_dir());
    pane.line("/exit");
    pane.wait_for("EXITED 0", 20);
}

#[test]
fn chat_resumes_a_stored_session() {
    let env = Env::new();
    let first = env.file("first.script", &answer("Noted: the code word is heron."));
    let pane = Pane::start(&env, &["chat", "--script", &first.display().to_string()]);
    pane.wait_for("/help for commands", 20);
    pane.line("Remember the code word heron");
    pane.wait_for("Noted: the code word is heron.\n", 20);
    pane.line("/exit");
    pane.wait_for("EXITED 0", 20);
    drop(pane);
    let id = sessions(&env).pop().unwrap();

    // A new chat: /resume lists the session, /resume ID continues it with its conversation.
    let second = env.file(
        "second.script",
        &["#expect-prompt Remember the code word heron".into(), answer("The code word was heron.")].join("\n"),
    );
    let pane = Pane::start(&env, &["chat", "--script", &second.display().to_string()]);
    pane.wait_for("/help for commands", 20);
    pane.line("/resume");
    pane.wait_for(&id, 20);
    pane.line(&format!("/resume {id}"));
    pane.wait_for(&format!("continuing session {id}"), 20);
    pane.line("What was the code word?");
    pane.wait_for("The code word was heron.\n", 20);
    pane.line("/exit");
    pane.wait_for("EXITED 0", 20);
    assert_eq!(sessions(&env), std::slice::from_ref(&id));
    assert_eq!(tasks(&env, &id), ["Remember the code word heron", "What was the code word?"]);
}

/// `/undo` puts back what the last task's calls changed; `/undo all` what the session's did.
#[test]
fn chat_undo_puts_back_the_last_task_then_the_session() {
    let env = Env::new();
    let write = |name: &str| call("write", json!({"path": env.path(name), "content": format!("{name}\n")}));
    let script = [write("a.txt"), answer("Wrote a.txt."), write("b.txt"), answer("Wrote b.txt.")].join("\n");
    let script = env.file("chat.script", &script);
    let pane = Pane::start(&env, &["chat", "--script", &script.display().to_string()]);
    pane.wait_for("/help for commands", 20);
    pane.line("Write a.txt");
    pane.wait_for("Wrote a.txt.\n", 20);
    pane.line("Write b.txt");
    pane.wait_for("Wrote b.txt.\n", 20);
    assert!(env.ws.join("a.txt").is_file() && env.ws.join("b.txt").is_file());
    pane.line("/undo");
    pane.wait_for("0 put back, 1 removed", 20);
    assert!(env.ws.join("a.txt").is_file() && !env.ws.join("b.txt").exists());
    pane.line("/undo all");
    pane.wait_for_n("0 put back, 1 removed", 2, 20);
    assert!(!env.ws.join("a.txt").exists());
    pane.line("/exit");
    pane.wait_for("EXITED 0", 20);
}

/// The real small model (SmolLM2-135M) in the terminal: its reply streams, and the turn ends.
#[test]
fn chat_on_the_real_model_streams_its_reply() {
    let env = Env::new();
    std::fs::write(env.ws.join("notes.txt"), "alpha\nbeta\n").unwrap();
    let model = abhed::model::locate::small_model_path().unwrap().display().to_string();
    let pane = Pane::start(&env, &["chat", "--model", &model, "--max-turns", "3", "--max-reply-tokens", "96"]);
    pane.wait_for("/help for commands", 60);
    pane.line(&format!("Read the file {} and tell me its first line.", env.path("notes.txt")));
    // Whatever the model decides, its first turn is one JSON object, streamed as it is written,
    // and the run ends with a summary line.
    let screen = pane.wait_for(" tokens, ", 180);
    assert!(screen.contains("  {"), "{screen}");
    pane.wait_for_n("\n> ", 2, 180);
    pane.line("/exit");
    pane.wait_for("EXITED 0", 30);
}
