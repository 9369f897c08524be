//! A task that names the tool to use ("Use the todo tool to …", "Run the script …"): each turn
//! that must be a call is held to that tool until a call of it works, and the model turn's
//! record says so (`only_tool`). The grammar that enforces it is tested on the real model in
//! tests/real_model.rs; here, on the scripted model, which turns ask for it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use abhed::agent::{Budgets, Op};
use common::scripted::Fixture;
use serde_json::{Value, json};

const BUDGETS: Budgets = Budgets { max_turns: 10, max_tokens: 100_000, max_wall_ms: None, max_reply_tokens: 256 };

fn call(tool: &str, args: Value) -> String {
    json!({"tool": tool, "arguments": args}).to_string()
}

fn answer(text: &str) -> String {
    json!({"answer": text, "status": "done"}).to_string()
}

/// Each model turn's (`call_only`, `only_tool`), in order.
fn turns(s: &abhed::store::Session<'_>) -> Vec<(bool, Option<String>)> {
    s.events()
        .unwrap()
        .iter()
        .filter(|e| e.kind == "model_turn" && e.payload.get("given_why").is_none())
        .map(|e| {
            (
                e.payload["call_only"].as_bool().unwrap_or(false),
                e.payload.get("only_tool").and_then(Value::as_str).map(str::to_string),
            )
        })
        .collect()
}

#[test]
fn a_turn_that_must_be_a_call_is_held_to_the_named_tool_until_a_call_of_it_works() {
    let f = Fixture::new();
    let s = f.store.create_session(&f.ws).unwrap();
    let task =
        "Use the todo tool to write a todo list of two items: run the tests (in_progress), fix the failures (pending).";
    let todo = call(
        "todo",
        json!({"todos": [{"content": "run the tests", "status": "in_progress"}, {"content": "fix the failures", "status": "pending"}]}),
    );
    // A todo call that fails (two items in progress), one that works, then a failed read: the
    // turn after it must be a call, of any tool now.
    let bad_todo = call(
        "todo",
        json!({"todos": [{"content": "a", "status": "in_progress"}, {"content": "b", "status": "in_progress"}]}),
    );
    let missing = call("read", json!({"path": f.p("missing.txt")}));
    let read = call("read", json!({"path": f.p("notes.txt")}));
    let script = [bad_todo, todo, missing, read, answer("The list is saved.")].join("\n");
    f.run(&s, &script, Op::Task(task.into()), BUDGETS);
    let todo = Some("todo".to_string());
    assert_eq!(
        turns(&s),
        [
            (true, todo.clone()), // the first turn of a task
            (true, todo),         // after the failed todo call
            (false, None),
            (true, None), // after the failed read: the todo call worked
            (false, None),
        ]
    );
}

#[test]
fn a_task_that_names_no_tool_leaves_every_call_open() {
    let f = Fixture::new();
    let s = f.store.create_session(&f.ws).unwrap();
    let task = "Read notes.txt and tell me its first word.";
    let script = [call("read", json!({"path": f.p("notes.txt")})), answer("alpha")].join("\n");
    f.run(&s, &script, Op::Task(task.into()), BUDGETS);
    assert_eq!(turns(&s), [(true, None), (false, None)]);
}

#[test]
fn a_task_that_starts_with_run_holds_the_first_call_to_bash() {
    let f = Fixture::new();
    let s = f.store.create_session(&f.ws).unwrap();
    let task = "Run the script check.sh with sh and tell me its last line of output.";
    // The scripted model ignores the grammar: its read stands, fails, and bash is asked again.
    let script = [call("read", json!({"path": f.p("check.sh")})), answer("I could not run it.")].join("\n");
    f.run(&s, &script, Op::Task(task.into()), Budgets { max_turns: 2, ..BUDGETS });
    assert_eq!(turns(&s), [(true, Some("bash".into())), (true, Some("bash".into()))]);
}
