//! `run.given_calls`: the files a new task names are read for the model before its first
//! turn, as given calls on record, and only those worth reading (text, small, in the workspace,
//! not a symlink, not already read unchanged).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use abhed::agent::{Budgets, Event, Op, StopReason};
use abhed::model::Role;
use common::scripted::Fixture;
use serde_json::{Value, json};

const BUDGETS: Budgets = Budgets { max_turns: 10, max_tokens: 100_000, max_wall_ms: None, max_reply_tokens: 256 };

fn fixture() -> Fixture {
    let mut f = Fixture::new();
    f.config.run.given_calls = true;
    f
}

fn end(events: &[Event]) -> (StopReason, Option<String>) {
    match events.last().unwrap() {
        Event::RunEnd { reason, answer, .. } => (*reason, answer.clone()),
        other => panic!("the last event is not run_end: {other:?}"),
    }
}

/// The paths of the reads the run made, in order, from the stored actions.
fn reads(s: &abhed::store::Session<'_>) -> Vec<String> {
    s.events()
        .unwrap()
        .iter()
        .filter(|e| e.kind == "action" && e.payload["tool"] == "read")
        .map(|e| e.payload["arguments"]["path"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_named_file_is_read_before_the_first_turn_and_the_model_may_answer_from_it() {
    let f = fixture();
    std::fs::create_dir(f.ws.join("config")).unwrap();
    std::fs::write(f.ws.join("config/app.toml"), "[cache]\nttl_seconds = 300\n").unwrap();
    let s = f.store.create_session(&f.ws).unwrap();
    // The first reply is an answer: the given read counts as the run's first call
    // (`run.first_turn_acts` is met), and the model has the file's text in its prompt.
    let script = "#expect-prompt 2\tttl_seconds = 300\n{\"answer\": \"300 seconds\", \"status\": \"done\"}\n";
    let task = "What is the cache TTL in config/app.toml?";
    let events = f.run(&s, script, Op::Task(task.into()), BUDGETS);
    assert_eq!(end(&events), (StopReason::Done, Some("300 seconds".into())));
    assert_eq!(reads(&s), [f.p("config/app.toml")]);

    let stored = s.events().unwrap();
    let kinds: Vec<&str> = stored.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, ["run_start", "task", "model_turn", "action", "observation", "model_turn", "run_end"]);
    let given = &stored[2].payload;
    assert_eq!((given["given"].clone(), given["given_why"].clone()), (json!(true), json!("the task names this file")));
    // The model's own turn is the first counted.
    let Event::RunEnd { turns, .. } = events.last().unwrap() else { unreachable!() };
    assert_eq!(*turns, 1);
    // The live stream shows the read as a call.
    assert!(events.iter().any(|e| matches!(e, Event::ToolCall { tool, .. } if tool == "read")));

    // A resumed session sees the read as the model's own call and its result.
    let rebuilt = abhed::agent::history::rebuild(&stored);
    let roles: Vec<Role> = rebuilt.messages.iter().map(|m| m.role).collect();
    assert_eq!(roles, [Role::User, Role::Assistant, Role::User, Role::Assistant]);
    let call: Value = serde_json::from_str(&rebuilt.messages[1].content).unwrap();
    assert_eq!(call, json!({"tool": "read", "arguments": {"path": f.p("config/app.toml")}}));
    assert!(rebuilt.messages[2].content.starts_with("[result of read]\n[read "), "{}", rebuilt.messages[2].content);
}

#[test]
fn only_small_text_files_in_the_workspace_are_read_at_most_three_in_the_order_named() {
    let f = fixture();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "s3cret\n").unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret.txt"), f.ws.join("link.txt")).unwrap();
    std::fs::write(f.ws.join("big.txt"), "x\n".repeat(5000)).unwrap();
    std::fs::write(f.ws.join("blob.bin"), [0u8, 159, 146, 150, 0, 1, 2]).unwrap();
    std::fs::write(f.ws.join("empty.txt"), "").unwrap();
    for name in ["a.py", "b.py", "c.py", "d.py"] {
        std::fs::write(f.ws.join(name), "print(1)\n").unwrap();
    }
    std::fs::write(f.ws.join("Makefile"), "all:\n\ttrue\n").unwrap();
    let s = f.store.create_session(&f.ws).unwrap();
    let task = format!(
        "Look at link.txt, big.txt, blob.bin, empty.txt, missing.py, ../ws/notes.txt, {} and the Makefile, then `python3 b.py` (see a.py:3, b.py again), c.py and d.py.",
        outside.path().join("secret.txt").display()
    );
    let events = f.run(&s, "{\"answer\": \"ok\", \"status\": \"done\"}\n", Op::Task(task), BUDGETS);
    assert_eq!(end(&events).0, StopReason::Done);
    assert_eq!(reads(&s), [f.p("Makefile"), f.p("b.py"), f.p("a.py")]);
    assert!(!format!("{:?}", s.events().unwrap()).contains("s3cret"));
}

#[test]
fn a_file_read_whole_and_unchanged_is_not_read_again_for_the_next_task() {
    let f = fixture();
    let s = f.store.create_session(&f.ws).unwrap();
    let answer = "{\"answer\": \"ok\", \"status\": \"done\"}\n";
    f.run(&s, answer, Op::Task("Summarise notes.txt.".into()), BUDGETS);
    f.run(&s, answer, Op::Task("And notes.txt's first word?".into()), BUDGETS);
    assert_eq!(reads(&s), [f.p("notes.txt")]);
    // Changed since: read again.
    std::fs::write(f.ws.join("notes.txt"), "gamma\n").unwrap();
    f.run(&s, answer, Op::Task("Now notes.txt?".into()), BUDGETS);
    assert_eq!(reads(&s), [f.p("notes.txt"), f.p("notes.txt")]);
}

#[test]
fn with_the_setting_off_nothing_is_read_for_the_model() {
    let mut f = fixture();
    f.config.run.given_calls = false;
    let s = f.store.create_session(&f.ws).unwrap();
    let script = format!(
        "{}\n{{\"answer\": \"alpha\", \"status\": \"done\"}}\n",
        json!({"tool": "read", "arguments": {"path": f.p("notes.txt")}})
    );
    let events = f.run(&s, &script, Op::Task("What is the first word of notes.txt?".into()), BUDGETS);
    assert_eq!(end(&events), (StopReason::Done, Some("alpha".into())));
    assert_eq!(reads(&s), [f.p("notes.txt")]);
    assert!(s.events().unwrap().iter().all(|e| e.payload.get("given").is_none()));
}

/// A task that says a command fails has it run first, in the microVM, through the dispatch;
/// the model's first turn reads its output.
#[test]
fn the_command_a_task_says_fails_is_run_before_the_first_turn() {
    let mut f = fixture();
    f.config.run.given_check = true;
    f.config.sandbox.accel = std::env::var("ABHED_TEST_ACCEL").unwrap_or_else(|_| "tcg".into());
    f.config.sandbox.boot_timeout_s = 120;
    std::fs::write(f.ws.join("main.py"), "import text_utilz\n").unwrap();
    let s = f.store.create_session(&f.ws).unwrap();
    let glob = json!({"tool": "glob", "arguments": {"pattern": "*.py", "path": f.p("")}});
    let script = format!("#expect-prompt No module named 'text_utilz'\n{glob}\n");
    let events =
        f.run(&s, &script, Op::Task("python3 main.py fails; fix it.".into()), Budgets { max_turns: 1, ..BUDGETS });
    assert_eq!(end(&events).0, StopReason::MaxTurns, "{events:?}");
    let stored = s.events().unwrap();
    let given: Vec<(&str, &str)> = stored
        .iter()
        .filter(|e| e.kind == "model_turn" && e.payload["given"] == json!(true))
        .map(|e| (e.payload["raw"].as_str().unwrap(), e.payload["given_why"].as_str().unwrap()))
        .collect();
    assert_eq!(given.len(), 2, "{given:?}");
    assert_eq!(given[0].1, "the task names this file");
    assert_eq!(
        serde_json::from_str::<Value>(given[1].0).unwrap(),
        json!({"tool": "bash", "arguments": {
            "command": "python3 main.py",
            "description": "Run python3 main.py",
            "timeout_ms": 60000,
        }})
    );
    assert_eq!(given[1].1, "the task says this command fails");
    let ran = stored.iter().find(|e| e.kind == "observation" && e.payload["tool"] == "bash").unwrap();
    assert_eq!(ran.payload["meta"]["exit_code"], json!(1), "{}", ran.payload);
}

/// `run.given_check` is off by default: the file is read, the command is the model's to run.
#[test]
fn by_default_the_command_a_task_says_fails_is_left_to_the_model() {
    let f = fixture();
    std::fs::write(f.ws.join("main.py"), "import text_utilz\n").unwrap();
    let s = f.store.create_session(&f.ws).unwrap();
    let events = f.run(
        &s,
        "{\"answer\": \"ok\", \"status\": \"done\"}\n",
        Op::Task("python3 main.py fails; fix it.".into()),
        Budgets { max_turns: 1, ..BUDGETS },
    );
    assert!(!events.iter().any(|e| matches!(e, Event::ToolCall { tool, .. } if tool == "bash")), "{events:?}");
    assert_eq!(reads(&s), [f.p("main.py")]);
}
