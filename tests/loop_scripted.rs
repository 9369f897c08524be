//! The loop's deterministic behaviour, driven by the scripted adapter through the queue pair:
//! stop reasons and budgets, tool errors as observations, invalid turns, faults, and resume
//! after a crash (an action without an observation is reported as interrupted, never re-run).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use abhed::agent::events::TurnKind;
use abhed::agent::{Budgets, Event, Op, StopReason};
use abhed::model::{Cancel, Role};
use abhed::store::EventKind;
use abhed::tools::Registry;
use common::scripted::{Fixture, feedback};
use serde_json::json;

const BUDGETS: Budgets = Budgets { max_turns: 10, max_tokens: 100_000, max_wall_ms: None, max_reply_tokens: 256 };

fn end(events: &[Event]) -> (StopReason, String, Option<String>) {
    match events.last().unwrap() {
        Event::RunEnd { reason, message, answer, .. } => (*reason, message.clone(), answer.clone()),
        other => panic!("the last event is not run_end: {other:?}"),
    }
}

fn call(tool: &str, args: serde_json::Value) -> String {
    json!({"tool": tool, "arguments": args}).to_string()
}

#[test]
fn a_call_then_an_answer_is_done_and_every_step_is_on_record() {
    let f = Fixture::new();
    let s = f.store.create_session(&f.ws).unwrap();
    let script = format!(
        "{}\n{{\"answer\": \"alpha\", \"status\": \"done\"}}\n",
        call("read", json!({"path": f.p("notes.txt")}))
    );
    let events = f.run(&s, &script, Op::Task("first line?".into()), BUDGETS);
    assert_eq!(end(&events), (StopReason::Done, "the model gave its final answer".into(), Some("alpha".into())));
    let kinds: Vec<String> = s.events().unwrap().iter().map(|e| e.kind.clone()).collect();
    assert_eq!(kinds, ["run_start", "task", "model_turn", "action", "observation", "model_turn", "run_end"]);
    assert_eq!(s.verify_chain().unwrap(), None);
    // The live events carry the stored sequence numbers.
    let seqs: Vec<i64> = events
        .iter()
        .filter_map(|e| match e {
            Event::ToolCall { seq, .. } | Event::ToolResult { seq, .. } => Some(*seq),
            _ => None,
        })
        .collect();
    assert_eq!(seqs, [4, 5]);
}

#[test]
fn a_tool_error_is_an_observation_and_the_loop_goes_on() {
    let f = Fixture::new();
    let s = f.store.create_session(&f.ws).unwrap();
    let script = format!(
        "{}\n{}\n{{\"answer\": \"found it\", \"status\": \"done\"}}\n",
        call("read", json!({"path": "notes.txt"})),
        call("read", json!({"path": f.p("notes.txt")}))
    );
    let events = f.run(&s, &script, Op::Task("t".into()), BUDGETS);
    let results: Vec<(bool, Option<String>)> = events
        .iter()
        .filter_map(|e| match e {
            Event::ToolResult { ok, error_code, .. } => Some((*ok, error_code.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(results, [(false, Some("relative_path".into())), (true, None)]);
    assert_eq!(end(&events).0, StopReason::Done);
}

#[test]
fn gave_up_is_its_own_stop_reason() {
    let f = Fixture::new();
    let s = f.store.create_session(&f.ws).unwrap();
    let events = f.run(&s, r#"{"answer": "no such file", "status": "gave_up"}"#, Op::Task("t".into()), BUDGETS);
    assert_eq!(end(&events).0, StopReason::GaveUp);
}

#[test]
fn each_budget_has_its_own_stop_reason() {
    let f = Fixture::new();
    let glob = call("glob", json!({"pattern": "*.txt", "path": f.p("")}));
    let looping = format!("{glob}\n{glob}\n{glob}\n{glob}\n");

    let s = f.store.create_session(&f.ws).unwrap();
    let e = f.run(&s, &looping, Op::Task("t".into()), Budgets { max_turns: 2, ..BUDGETS });
    let (reason, msg, _) = end(&e);
    assert_eq!(
        (reason, msg.as_str()),
        (StopReason::MaxTurns, "the turn budget is spent (2 turns) before a final answer")
    );

    // Scripted turns cost a token per four bytes of prompt and reply.
    let s = f.store.create_session(&f.ws).unwrap();
    let e = f.run(&s, &looping, Op::Task("t".into()), Budgets { max_tokens: 50, ..BUDGETS });
    assert_eq!(end(&e).0, StopReason::MaxTokens);

    let s = f.store.create_session(&f.ws).unwrap();
    let slow = format!("#sleep 5000\n{glob}\n");
    let started = std::time::Instant::now();
    let e = f.run(&s, &slow, Op::Task("t".into()), Budgets { max_wall_ms: Some(300), ..BUDGETS });
    assert_eq!(end(&e).0, StopReason::WallTime);
    assert!(started.elapsed().as_millis() < 3000, "the deadline must cut a slow turn short");

    let s = f.store.create_session(&f.ws).unwrap();
    let e = f.run(&s, "#context-full\n", Op::Task("t".into()), BUDGETS);
    assert_eq!(end(&e).0, StopReason::ContextFull);
}

#[test]
fn an_invalid_turn_is_explained_to_the_model() {
    let f = Fixture::new();
    let s = f.store.create_session(&f.ws).unwrap();
    let script = "I think I should read the file\n{\"answer\": \"ok\", \"status\": \"done\"}\n";
    let events = f.run(&s, script, Op::Task("t".into()), BUDGETS);
    let invalid = events.iter().find_map(|e| match e {
        Event::ModelTurn { kind: TurnKind::Invalid, feedback, .. } => feedback.clone(),
        _ => None,
    });
    assert!(invalid.unwrap().starts_with("your reply is not one JSON object"));
    assert_eq!(end(&events).0, StopReason::Done);
}

#[test]
fn a_model_fault_ends_the_run_as_internal_and_is_recorded() {
    let f = Fixture::new();
    let s = f.store.create_session(&f.ws).unwrap();
    let events = f.run(&s, "#fault the decoder exploded\n", Op::Task("t".into()), BUDGETS);
    let (reason, msg, _) = end(&events);
    assert_eq!(reason, StopReason::InternalError);
    assert!(msg.contains("the decoder exploded"), "{msg}");
    let last = s.events().unwrap().pop().unwrap();
    assert_eq!((last.kind.as_str(), last.payload["reason"].as_str()), ("run_end", Some("internal_error")));
}

#[test]
fn cancel_stops_the_run_as_interrupted() {
    let f = Fixture::new();
    let s = f.store.create_session(&f.ws).unwrap();
    let cancel = Cancel::new();
    let c2 = cancel.clone();
    std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(200));
        c2.cancel();
    });
    let script = format!("#sleep 5000\n{}\n", call("glob", json!({"pattern": "*"})));
    let events = f.run_cancel(&s, &script, Op::Task("t".into()), BUDGETS, cancel);
    assert_eq!(end(&events).0, StopReason::Interrupted);
}

#[test]
fn resume_reports_a_lost_action_as_interrupted_and_never_reruns_it() {
    let f = Fixture::new();
    let s = f.store.create_session(&f.ws).unwrap();
    // What a kill -9 during a write leaves: the action committed, no observation.
    let target = f.p("out.txt");
    let raw = call("write", json!({"path": target, "content": "x"}));
    s.append(EventKind::RunStart, &json!({})).unwrap();
    s.append(EventKind::Task, &json!({"text": "write out.txt"})).unwrap();
    s.append(EventKind::ModelTurn, &json!({"turn": 1, "kind": "call", "raw": raw})).unwrap();
    s.append(EventKind::Action, &json!({"tool": "write", "arguments": {"path": target, "content": "x"}})).unwrap();

    let events = f.run(&s, "{\"answer\": \"checked\", \"status\": \"done\"}\n", Op::Continue, BUDGETS);
    let lost = events.iter().find_map(|e| match e {
        Event::ToolResult { interrupted: true, action_seq, output, .. } => Some((*action_seq, output.clone())),
        _ => None,
    });
    let (action_seq, output) = lost.expect("the lost action is reported");
    assert_eq!(action_seq, Some(4));
    assert!(output.starts_with("Error [interrupted]: this write call was recorded but its result was not"), "{output}");
    // Not re-run: the file was never written, and there is exactly one write action.
    assert!(!Path::new(&target).exists());
    let stored = s.events().unwrap();
    assert_eq!(stored.iter().filter(|e| e.kind == "action").count(), 1);
    assert_eq!(stored[4].kind, "observation");
    assert_eq!(stored[4].payload["interrupted"], true);
    assert_eq!(end(&events).0, StopReason::Done);
    assert_eq!(s.verify_chain().unwrap(), None);
}

#[test]
fn resume_rebuilds_the_conversation_the_model_saw() {
    let f = Fixture::new();
    let s = f.store.create_session(&f.ws).unwrap();
    let glob = call("glob", json!({"pattern": "*.txt", "path": f.p("")}));
    let first = f.run(&s, &format!("{glob}\n{glob}\n"), Op::Task("list".into()), Budgets { max_turns: 1, ..BUDGETS });
    assert_eq!(end(&first).0, StopReason::MaxTurns);
    let rebuilt = abhed::agent::history::rebuild(&s.events().unwrap());
    let roles: Vec<Role> = rebuilt.messages.iter().map(|m| m.role).collect();
    assert_eq!(roles, [Role::User, Role::Assistant, Role::User]);
    assert!(rebuilt.messages[2].content.starts_with("[result of glob]\n"), "{}", rebuilt.messages[2].content);
    assert_eq!(rebuilt.last_stop, Some(StopReason::MaxTurns));
    let second = f.run(&s, r#"{"answer": "notes.txt", "status": "done"}"#, Op::Continue, BUDGETS);
    assert!(matches!(second.first(), Some(Event::Session { resumed: true, .. })));
    assert_eq!(end(&second).2.as_deref(), Some("notes.txt"));
}

#[test]
fn the_preflight_refuses_a_prompt_that_cannot_fit_and_runs_nothing() {
    let f = Fixture::new();
    let s = f.store.create_session(&f.ws).unwrap();
    let script = "#n-ctx 1000\n{\"answer\": \"a\", \"status\": \"done\"}\n";
    let events = f.run(&s, script, Op::Task("t".into()), BUDGETS);
    let (reason, msg, _) = end(&events);
    assert_eq!(reason, StopReason::ContextFull);
    assert!(
        msg.starts_with(
            "the context window is too small for this task: the system prompt with the tool schemas and the task take "
        ),
        "{msg}"
    );
    assert!(msg.contains("> n_ctx 1000. Raise the context (--ctx, model.n_ctx)"), "{msg}");
    assert!(!events.iter().any(|e| matches!(e, Event::ModelTurn { .. })), "no turn may run");
}

#[test]
fn the_same_call_three_times_in_a_row_leaves_only_the_answer() {
    let f = Fixture::new();
    let s = f.store.create_session(&f.ws).unwrap();
    let glob = call("glob", json!({"pattern": "*.txt", "path": f.p("")}));
    // The scripted model ignores grammars, so it can try a fourth call: it is refused as the
    // grammar of a local model would have refused it, and the answer after that is taken.
    let script = format!("{glob}\n{glob}\n{glob}\n{glob}\n{{\"answer\": \"notes.txt\", \"status\": \"done\"}}\n");
    let events = f.run(&s, &script, Op::Task("which text files?".into()), BUDGETS);
    let turns: Vec<(TurnKind, bool, Option<String>)> = events
        .iter()
        .filter_map(|e| match e {
            Event::ModelTurn { kind, answer_only, feedback, .. } => Some((*kind, *answer_only, feedback.clone())),
            _ => None,
        })
        .collect();
    let flags: Vec<(TurnKind, bool)> = turns.iter().map(|(k, a, _)| (*k, *a)).collect();
    assert_eq!(
        flags,
        [
            (TurnKind::Call, false),
            (TurnKind::Call, false),
            (TurnKind::Call, false),
            (TurnKind::Invalid, true),
            (TurnKind::Answer, true)
        ]
    );
    let fb = turns[3].2.as_deref().unwrap();
    assert!(fb.starts_with("you called glob again after making the same call 3 times in a row"), "{fb}");
    // Three calls ran; the refused fourth did not.
    assert_eq!(s.events().unwrap().iter().filter(|e| e.kind == "action").count(), 3);
    assert_eq!(end(&events).0, StopReason::Done);
}

#[test]
fn a_denied_bash_call_is_an_approval_event_and_an_observation_and_the_run_goes_on() {
    let f = Fixture::new();
    let s = f.store.create_session(&f.ws).unwrap();
    let script = format!(
        "{}\n{{\"answer\": \"could not clean\", \"status\": \"gave_up\"}}\n",
        call("bash", json!({"command": format!("rm -rf {}", f.ws.display()), "description": "clean up"}))
    );
    let events = f.run(&s, &script, Op::Task("clean the workspace".into()), BUDGETS);
    assert_eq!(end(&events).0, StopReason::GaveUp);
    let approval = events
        .iter()
        .find_map(|e| match e {
            Event::Approval { record, .. } => Some(record.clone()),
            _ => None,
        })
        .expect("an approval event in the live stream");
    assert_eq!((approval["decision"].as_str(), approval["by"].as_str()), (Some("denied"), Some("no_operator")));
    let result = events.iter().find_map(|e| match e {
        Event::ToolResult { error_code, output, .. } => Some((error_code.clone(), output.clone())),
        _ => None,
    });
    let (code, output) = result.unwrap();
    assert_eq!(code.as_deref(), Some("approval_denied"));
    assert!(output.contains("deletes a directory tree"), "{output}");
    assert!(f.ws.exists());
    let kinds: Vec<String> = s.events().unwrap().iter().map(|e| e.kind.clone()).collect();
    assert_eq!(
        kinds,
        ["run_start", "task", "model_turn", "action", "approval", "observation", "model_turn", "run_end"]
    );
}

#[test]
fn the_todo_list_is_kept_in_the_session_and_sent_live() {
    let f = Fixture::new();
    let s = f.store.create_session(&f.ws).unwrap();
    let two = json!({"todos": [{"content": "a", "status": "in_progress"}, {"content": "b", "status": "in_progress"}]});
    let good = json!({"todos": [{"content": "a", "status": "in_progress"}, {"content": "b", "status": "pending"}]});
    let script = format!(
        "{}\n{}\n{{\"answer\": \"listed\", \"status\": \"done\"}}\n",
        call("todo", two),
        call("todo", good.clone())
    );
    let events = f.run(&s, &script, Op::Task("make a list".into()), BUDGETS);
    assert_eq!(end(&events).0, StopReason::Done);
    // The refused list (two in progress) is an observation; only the good one is live and kept.
    let live: Vec<&serde_json::Value> = events
        .iter()
        .filter_map(|e| match e {
            Event::Todo { todos, .. } => Some(todos),
            _ => None,
        })
        .collect();
    assert_eq!(live, [&good["todos"]]);
    assert_eq!(s.state("todos").unwrap(), Some(good["todos"].clone()));
}

#[test]
fn compaction_keeps_the_plan_and_the_todo_list_verbatim_and_the_run_goes_on() {
    let f = Fixture::new();
    let s = f.store.create_session(&f.ws).unwrap();
    // A window just big enough for the system prompt and one reply: compaction is due before
    // every turn, and happens as soon as there are turns old enough to drop.
    let system = abhed::agent::prompt::system_prompt(&Registry::native(), &f.ws);
    let n_ctx = system.len().div_ceil(4) + 300;
    let plan = call("plan", json!({"goal": "Know the first line of notes.txt", "steps": ["Read notes.txt", "Answer"]}));
    let todo = call(
        "todo",
        json!({"todos": [{"content": "Read the notes", "status": "in_progress"}, {"content": "Answer", "status": "pending"}]}),
    );
    let read = call("read", json!({"path": f.p("notes.txt")}));
    let glob = call("glob", json!({"pattern": "*.txt", "path": f.p("")}));
    let script = [
        format!("#n-ctx {n_ctx}"),
        plan,
        todo,
        read,
        // Compaction 1 drops the plan call: the summariser's reply, then the plan must be back.
        r#"{"answer": "SUMMARY-ONE: made a plan to read notes.txt and answer", "status": "done"}"#.to_string(),
        "#expect-prompt SUMMARY-ONE".into(),
        "#expect-prompt Goal: Know the first line of notes.txt".into(),
        glob,
        // Compaction 2 drops the todo call: the list must be back, with the plan.
        r#"{"answer": "SUMMARY-TWO: listed the todos; before that, SUMMARY-ONE", "status": "done"}"#.to_string(),
        "#expect-prompt SUMMARY-TWO".into(),
        "#expect-prompt [>] 1. Read the notes\\n[ ] 2. Answer".into(),
        "#expect-prompt 1. Read notes.txt\\n2. Answer".into(),
        r#"{"answer": "alpha", "status": "done"}"#.to_string(),
    ]
    .join("\n");
    let events = f.run(&s, &script, Op::Task("first line of notes.txt?".into()), BUDGETS);
    assert_eq!(end(&events), (StopReason::Done, "the model gave its final answer".into(), Some("alpha".into())));
    let compactions: Vec<&serde_json::Value> = events
        .iter()
        .filter_map(|e| match e {
            Event::Compaction { record, .. } => Some(record),
            _ => None,
        })
        .collect();
    assert_eq!(compactions.len(), 2, "{compactions:?}");
    assert_eq!(compactions[0]["summary_by"], "model");
    assert_eq!(compactions[1]["plan_version"], 1);
    assert_eq!(compactions[1]["todos"], 2);
    assert!(compactions[1]["tokens_after"].as_u64() < compactions[1]["tokens_before"].as_u64());
    // The log keeps everything: every call is still there, and the compactions are events.
    let kinds: Vec<String> = s.events().unwrap().iter().map(|e| e.kind.clone()).collect();
    assert_eq!(kinds.iter().filter(|k| *k == "action").count(), 4);
    assert_eq!(kinds.iter().filter(|k| *k == "compaction").count(), 2);
}

#[test]
fn a_summary_too_short_to_be_one_is_replaced_by_the_mechanical_one() {
    let f = Fixture::new();
    let s = f.store.create_session(&f.ws).unwrap();
    let system = abhed::agent::prompt::system_prompt(&Registry::native(), &f.ws);
    let n_ctx = system.len().div_ceil(4) + 300;
    let read = |offset: u32| call("read", json!({"path": f.p("notes.txt"), "offset": offset}));
    let script = [
        format!("#n-ctx {n_ctx}"),
        read(1),
        read(2),
        glob_call(&f),
        r#"{"answer": "a", "status": "done"}"#.to_string(),
        "#expect-prompt the model's summary was unusable".into(),
        r#"{"answer": "alpha", "status": "done"}"#.to_string(),
    ]
    .join("\n");
    let events = f.run(&s, &script, Op::Task("first line?".into()), BUDGETS);
    assert_eq!(end(&events).0, StopReason::Done);
    let c = events.iter().find_map(|e| match e {
        Event::Compaction { record, .. } => Some(record.clone()),
        _ => None,
    });
    assert_eq!(c.unwrap()["summary_by"], "mechanical");
}

fn glob_call(f: &Fixture) -> String {
    call("glob", json!({"pattern": "*.txt", "path": f.p("")}))
}

/// Regression: reading a file larger than what was left of the window (the README, 9k tokens, on
/// an 8k context) ended the run as context_full after one turn. The loop now tells the tool how
/// much the window can take, and read cuts its output there, saying how to read the rest.
#[test]
fn a_read_larger_than_the_window_can_take_is_cut_and_the_run_goes_on() {
    let mut f = Fixture::new();
    f.config.read.max_output_chars = 1_000_000;
    let line = "x".repeat(99);
    std::fs::write(f.ws.join("big.txt"), format!("{line}\n").repeat(2_000)).unwrap();
    let s = f.store.create_session(&f.ws).unwrap();
    // The scripted model counts a token per 4 bytes; 200k characters would need 50k tokens.
    let script = format!(
        "#n-ctx 40000\n{}\n#expect-prompt Use offset/limit to read more\n{{\"answer\": \"read part\", \"status\": \"done\"}}\n",
        call("read", json!({"path": f.p("big.txt")}))
    );
    let events = f.run(&s, &script, Op::Task("read big.txt".into()), BUDGETS);
    assert_eq!(end(&events).0, StopReason::Done, "{:?}", end(&events));
    let obs = s.events().unwrap().into_iter().find(|e| e.kind == "observation").unwrap();
    let output = obs.payload["output"].as_str().unwrap();
    assert!(output.len() < 120_000, "{} characters", output.len());
    assert_eq!(obs.payload["truncated"], true);
}

/// The `call_only` flag of each stored model turn: what the loop asked the adapter's grammar to
/// allow.
fn call_only_flags(s: &abhed::store::Session<'_>) -> Vec<bool> {
    s.events()
        .unwrap()
        .iter()
        .filter(|e| e.kind == "model_turn")
        .map(|e| e.payload["call_only"].as_bool().unwrap())
        .collect()
}

#[test]
fn after_a_call_that_failed_or_found_nothing_the_next_turn_must_act_until_three_in_a_row() {
    let f = Fixture::new();
    let missing = call("read", json!({"path": f.p("missing.txt")}));
    let found = call("read", json!({"path": f.p("notes.txt")}));
    let answer = "{\"answer\": \"alpha\", \"status\": \"done\"}";

    // The first turn must act; a failure keeps the next one a call; a success frees it.
    let s = f.store.create_session(&f.ws).unwrap();
    let events = f.run(&s, &format!("{missing}\n{found}\n{answer}\n"), Op::Task("first line?".into()), BUDGETS);
    assert_eq!(end(&events).0, StopReason::Done);
    assert_eq!(call_only_flags(&s), [true, true, false]);

    // Three failures in a row leave the model free to answer (or give up) again.
    let s = f.store.create_session(&f.ws).unwrap();
    let other = call("read", json!({"path": f.p("gone.txt")}));
    let script = format!("{missing}\n{other}\n{missing}\n{answer}\n");
    let events = f.run(&s, &script, Op::Task("first line?".into()), BUDGETS);
    assert_eq!(end(&events).0, StopReason::Done);
    assert_eq!(call_only_flags(&s), [true, true, true, false]);

    // A search that finds nothing is not an error, but the model has not got what it went for.
    let s = f.store.create_session(&f.ws).unwrap();
    let nothing = call("glob", json!({"pattern": "**/*.nothing", "path": f.p("")}));
    let events = f.run(&s, &format!("{nothing}\n{found}\n{answer}\n"), Op::Task("first line?".into()), BUDGETS);
    assert_eq!(end(&events).0, StopReason::Done);
    assert_eq!(call_only_flags(&s), [true, true, false]);
}

#[test]
fn an_answer_that_claims_a_change_no_call_made_is_sent_back_once() {
    let mut f = Fixture::new();
    // The notes, without answers set aside for a call (`run.act_until_change`, tested below).
    f.config.run.act_until_change = 0;
    let read = call("read", json!({"path": f.p("notes.txt")}));
    let fixed = "{\"answer\": \"I fixed the typo in notes.txt.\", \"status\": \"done\"}";

    // A task that asks for a change, answered after a read only: the answer goes back with a
    // note, the next turn must be a call, and the second answer stands.
    let s = f.store.create_session(&f.ws).unwrap();
    let events = f.run(
        &s,
        &format!("{read}\n{fixed}\n{read}\n{fixed}\n"),
        Op::Task("Fix the typo in notes.txt.".into()),
        BUDGETS,
    );
    assert_eq!(
        end(&events),
        (StopReason::Done, "the model gave its final answer".into(), Some("I fixed the typo in notes.txt.".into()))
    );
    let turns: Vec<(String, serde_json::Value)> = s
        .events()
        .unwrap()
        .iter()
        .filter(|e| e.kind == "model_turn")
        .map(|e| (e.payload["kind"].as_str().unwrap().to_string(), e.payload["feedback"].clone()))
        .collect();
    assert_eq!(turns.len(), 4);
    assert_eq!((turns[1].0.as_str(), turns[3].0.as_str()), ("answer", "answer"));
    assert_eq!(call_only_flags(&s), [true, false, true, false]);
    let note = turns[1].1.as_str().unwrap();
    assert!(note.contains("no call in this task changed anything"), "{note}");
    assert!(turns[3].1.is_null());
    // The note is what the model saw next, and a resumed session sees it too.
    let rebuilt = abhed::agent::history::rebuild(&s.events().unwrap());
    assert!(rebuilt.messages.iter().any(|m| m.role == Role::User && m.content == note));

    // An answer that claims a change to a question goes back too, but may be answered again.
    let s = f.store.create_session(&f.ws).unwrap();
    let events = f.run(
        &s,
        &format!("{read}\n{fixed}\n{fixed}\n"),
        Op::Task("What is the first line of notes.txt?".into()),
        BUDGETS,
    );
    assert_eq!(end(&events).0, StopReason::Done);
    assert_eq!(call_only_flags(&s), [true, false, false]);

    // A question answered after a read is not sent back, nor is a change that was made.
    let s = f.store.create_session(&f.ws).unwrap();
    let answer = "{\"answer\": \"alpha\", \"status\": \"done\"}";
    let events =
        f.run(&s, &format!("{read}\n{answer}\n"), Op::Task("What is the first line of notes.txt?".into()), BUDGETS);
    assert_eq!(end(&events).2.as_deref(), Some("alpha"));
    let s = f.store.create_session(&f.ws).unwrap();
    let edit = call("edit", json!({"path": f.p("notes.txt"), "old_string": "alpha", "new_string": "alpha2"}));
    let events =
        f.run(&s, &format!("{read}\n{edit}\n{fixed}\n"), Op::Task("Fix the typo in notes.txt.".into()), BUDGETS);
    assert_eq!(end(&events).0, StopReason::Done);
    assert_eq!(s.events().unwrap().iter().filter(|e| e.kind == "model_turn").count(), 3);
}

#[test]
fn giving_up_when_every_call_worked_is_sent_back_once_and_the_next_turn_must_act() {
    let f = Fixture::new();
    let read = call("read", json!({"path": f.p("notes.txt")}));
    let give_up = "{\"answer\": \"This needs exploration.\", \"status\": \"gave_up\"}";
    let s = f.store.create_session(&f.ws).unwrap();
    let events = f.run(
        &s,
        &format!("{read}\n{give_up}\n{read}\n{give_up}\n"),
        Op::Task("What is in notes.txt?".into()),
        BUDGETS,
    );
    // Sent back once; the second give-up stands.
    assert_eq!(end(&events).0, StopReason::GaveUp);
    assert_eq!(call_only_flags(&s), [true, false, true, false]);
    let notes = feedback(&s);
    assert_eq!(notes.len(), 1);
    assert!(notes[0].starts_with("[note] You gave up, but every call you made worked"), "{notes:?}");

    // After a call that fell short, giving up stands at once.
    let s = f.store.create_session(&f.ws).unwrap();
    let missing = call("read", json!({"path": f.p("missing.txt")}));
    let script = format!("{missing}\n{missing}\n{missing}\n{give_up}\n");
    let events = f.run(&s, &script, Op::Task("What is in missing.txt?".into()), BUDGETS);
    assert_eq!(end(&events).0, StopReason::GaveUp);
}

#[test]
fn a_call_that_repeats_one_made_since_the_last_change_is_asked_for_again_before_it_runs() {
    let f = Fixture::new();
    let missing = call("read", json!({"path": f.p("missing.txt")}));
    let found = call("read", json!({"path": f.p("notes.txt")}));
    let answer = "{\"answer\": \"alpha\", \"status\": \"done\"}";
    let set_aside = |s: &abhed::store::Session<'_>| -> Vec<serde_json::Value> {
        s.events().unwrap().iter().filter(|e| e.kind == "model_turn").map(|e| e.payload["set_aside"].clone()).collect()
    };
    let reads = |s: &abhed::store::Session<'_>| -> usize {
        s.events().unwrap().iter().filter(|e| e.kind == "action" && e.payload["tool"] == "read").count()
    };

    // The repeat is asked for again; the other reply is what runs, and the repeat is kept in
    // the turn's record.
    let s = f.store.create_session(&f.ws).unwrap();
    let events = f.run(
        &s,
        &format!("{missing}\n{missing}\n#retry {found}\n{answer}\n"),
        Op::Task("first line?".into()),
        BUDGETS,
    );
    assert_eq!(end(&events).2.as_deref(), Some("alpha"));
    assert_eq!(set_aside(&s), [json!(null), json!([missing]), json!(null)]);
    assert_eq!(reads(&s), 2);

    // A model that gives the same call again every time: after the tries it runs, as before.
    let s = f.store.create_session(&f.ws).unwrap();
    let events =
        f.run(&s, &format!("{missing}\n{missing}\n{found}\n{answer}\n"), Op::Task("first line?".into()), BUDGETS);
    assert_eq!(end(&events).2.as_deref(), Some("alpha"));
    assert_eq!(set_aside(&s)[1], json!([missing, missing]));
    assert_eq!(reads(&s), 3);

    // A call after a change is no repeat: the same read after an edit runs at once.
    let s = f.store.create_session(&f.ws).unwrap();
    let edit = call("edit", json!({"path": f.p("notes.txt"), "old_string": "alpha", "new_string": "alpha2"}));
    let events =
        f.run(&s, &format!("{found}\n{edit}\n{found}\n{answer}\n"), Op::Task("Fix notes.txt.".into()), BUDGETS);
    assert_eq!(end(&events).0, StopReason::Done);
    assert!(set_aside(&s).iter().all(serde_json::Value::is_null));
}

#[test]
fn a_resumed_session_whose_last_call_failed_must_act_next() {
    let f = Fixture::new();
    let missing = call("read", json!({"path": f.p("missing.txt")}));
    let found = call("read", json!({"path": f.p("notes.txt")}));
    let answer = "{\"answer\": \"alpha\", \"status\": \"done\"}";
    let one_turn = Budgets { max_turns: 1, ..BUDGETS };

    // The first run stops right after a failed call; the resumed run's first turn must act.
    let s = f.store.create_session(&f.ws).unwrap();
    let first = f.run(&s, &format!("{missing}\n"), Op::Task("first line?".into()), one_turn);
    assert_eq!(end(&first).0, StopReason::MaxTurns);
    let second = f.run(&s, &format!("{found}\n{answer}\n"), Op::Continue, BUDGETS);
    assert_eq!(end(&second).2.as_deref(), Some("alpha"));
    assert_eq!(call_only_flags(&s), [true, true, false]);

    // After a call that worked, the resumed run may answer at once.
    let s = f.store.create_session(&f.ws).unwrap();
    f.run(&s, &format!("{found}\n"), Op::Task("first line?".into()), one_turn);
    let second = f.run(&s, &format!("{answer}\n"), Op::Continue, BUDGETS);
    assert_eq!(end(&second).2.as_deref(), Some("alpha"));
    assert_eq!(call_only_flags(&s), [true, false]);
}

#[test]
fn an_answer_sent_back_with_a_call_to_make_is_asked_for_again_when_repeated_before_a_change() {
    let f = Fixture::new();
    let read = call("read", json!({"path": f.p("notes.txt")}));
    let glob = call("glob", json!({"pattern": "**/*", "path": f.p("")}));
    let give_up = "{\"answer\": \"This needs exploration.\", \"status\": \"gave_up\"}";
    let answer = "{\"answer\": \"alpha\", \"status\": \"done\"}";
    let s = f.store.create_session(&f.ws).unwrap();
    let events = f.run(
        &s,
        &format!("{read}\n{give_up}\n{glob}\n{give_up}\n#retry {answer}\n"),
        Op::Task("What is in notes.txt?".into()),
        BUDGETS,
    );
    // The give-up that was sent back, given again with nothing changed, is set aside.
    assert_eq!(end(&events).2.as_deref(), Some("alpha"));
    let turns: Vec<serde_json::Value> =
        s.events().unwrap().iter().filter(|e| e.kind == "model_turn").map(|e| e.payload["set_aside"].clone()).collect();
    assert_eq!(turns, [json!(null), json!(null), json!(null), json!([give_up])]);
}

#[test]
fn done_after_a_change_without_running_the_command_the_task_names_is_sent_back_once() {
    let f = Fixture::new();
    let read = call("read", json!({"path": f.p("notes.txt")}));
    let edit = call("edit", json!({"path": f.p("notes.txt"), "old_string": "alpha", "new_string": "alpha2"}));
    let done = "{\"answer\": \"Fixed.\", \"status\": \"done\"}";
    let s = f.store.create_session(&f.ws).unwrap();
    let events = f.run(
        &s,
        &format!("{read}\n{edit}\n{done}\n{read}\n{done}\n"),
        Op::Task("python3 check_notes.py fails; fix notes.txt.".into()),
        BUDGETS,
    );
    assert_eq!(end(&events).0, StopReason::Done);
    assert_eq!(call_only_flags(&s), [true, false, false, true, false]);
    let notes = feedback(&s);
    assert_eq!(notes.len(), 1);
    assert!(notes[0].contains("have not run `python3 check_notes.py` since"), "{notes:?}");

    // Giving up after a change is sent back the same way, once; the next give-up stands.
    let s = f.store.create_session(&f.ws).unwrap();
    let run = call("bash", json!({"command": "python3 check_notes.py", "description": "run it"}));
    let give_up = "{\"answer\": \"It cannot be fixed.\", \"status\": \"gave_up\"}";
    let script = format!("{run}\n{read}\n{edit}\n{give_up}\n{read}\n{give_up}\n");
    let events = f.run(&s, &script, Op::Task("python3 check_notes.py fails; fix notes.txt.".into()), BUDGETS);
    assert_eq!(end(&events).0, StopReason::GaveUp);
    let notes = feedback(&s);
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0].contains("have not run `python3 check_notes.py` since"), "{notes:?}");

    // A task that names no command is done at once.
    let s = f.store.create_session(&f.ws).unwrap();
    let events = f.run(&s, &format!("{read}\n{edit}\n{done}\n"), Op::Task("Fix notes.txt.".into()), BUDGETS);
    assert_eq!(end(&events).0, StopReason::Done);
    assert_eq!(call_only_flags(&s), [true, false, false]);
}

#[test]
fn giving_up_without_running_the_command_the_task_names_is_sent_back_once() {
    let mut f = Fixture::new();
    f.config.run.act_until_change = 0;
    let read = call("read", json!({"path": f.p("notes.txt")}));
    let give_up = "{\"answer\": \"The file cannot be read.\", \"status\": \"gave_up\"}";
    let s = f.store.create_session(&f.ws).unwrap();
    let events = f.run(
        &s,
        &format!("{read}\n{give_up}\n{read}\n{give_up}\n"),
        Op::Task("python3 main.py fails; fix it.".into()),
        BUDGETS,
    );
    // Sent back once, naming the command, with a call to make next; the second give-up stands
    // (the general "every call worked" note is not sent on top).
    assert_eq!(end(&events).0, StopReason::GaveUp);
    assert_eq!(call_only_flags(&s), [true, false, true, false]);
    let notes = feedback(&s);
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0].contains("gave up without running `python3 main.py`"), "{notes:?}");
}

/// `run.act_until_change`: on a task that asks for a change, an answer given before anything
/// was written is set aside and the turn asked for again as a call; a run of a command the
/// task names is a check, not the change. After a write, or three answers set aside, answers
/// are judged as before. A question keeps its answer.
#[test]
fn an_answer_before_any_change_is_set_aside_for_a_call() {
    let f = Fixture::new();
    let read = call("read", json!({"path": f.p("notes.txt")}));
    let give_up = "{\"answer\": \"The file is not readable due to a permission issue.\", \"status\": \"gave_up\"}";
    let edit = call("edit", json!({"path": f.p("notes.txt"), "old_string": "beta", "new_string": "gamma"}));
    let done = "{\"answer\": \"Done.\", \"status\": \"done\"}";
    let s = f.store.create_session(&f.ws).unwrap();
    let task = "Change beta to gamma in notes.txt.";
    let events = f.run(&s, &format!("{read}\n{give_up}\n{edit}\n{done}\n"), Op::Task(task.into()), BUDGETS);
    assert_eq!(end(&events), (StopReason::Done, "the model gave its final answer".into(), Some("Done.".into())));
    assert_eq!(std::fs::read_to_string(f.ws.join("notes.txt")).unwrap(), "alpha\ngamma\n");
    let stored = s.events().unwrap();
    let turns: Vec<&serde_json::Value> = stored.iter().filter(|e| e.kind == "model_turn").map(|e| &e.payload).collect();
    // The give-up is kept in the turn's record, the call made in its place is the turn, and
    // the model sees only the call: no note to repeat.
    assert_eq!(turns.len(), 3);
    assert_eq!(turns[1]["kind"], "call");
    assert_eq!(turns[1]["call_only"], true);
    assert_eq!(turns[1]["set_aside"], json!([give_up]));
    assert!(turns[1]["feedback"].is_null());
    let rebuilt = abhed::agent::history::rebuild(&stored);
    assert!(!rebuilt.messages.iter().any(|m| m.content.contains("permission issue")));

    // At most three a run; then the answer is judged as before (a give-up after calls that all
    // worked is sent back once with a note, and then stands).
    let s = f.store.create_session(&f.ws).unwrap();
    let script = format!("{read}\n{give_up}\n{read}\n{read}\n{read}\n{give_up}\n{give_up}\n");
    let events = f.run(&s, &script, Op::Task("Change alpha to omega in notes.txt.".into()), BUDGETS);
    assert_eq!(end(&events).0, StopReason::GaveUp);
    let asides: Vec<usize> = s
        .events()
        .unwrap()
        .iter()
        .filter(|e| e.kind == "model_turn")
        .map(|e| e.payload["set_aside"].as_array().map_or(0, Vec::len))
        .collect();
    assert_eq!(asides.iter().filter(|&&n| n > 0).count(), 3, "{asides:?}");

    // Running the command the task names is not the change: the give-up after it is set aside.
    let s = f.store.create_session(&f.ws).unwrap();
    let run = call("bash", json!({"command": "python3 main.py", "description": "run it"}));
    let script = format!("{run}\n{give_up}\n{read}\n{done}\n");
    let events = f.run(&s, &script, Op::Task("python3 main.py fails; fix it.".into()), BUDGETS);
    let aside = s
        .events()
        .unwrap()
        .iter()
        .filter(|e| e.kind == "model_turn")
        .filter(|e| !e.payload["set_aside"].is_null())
        .count();
    assert_eq!(aside, 1, "{:?}", end(&events));

    // A question keeps its first answer.
    let s = f.store.create_session(&f.ws).unwrap();
    let answer = "{\"answer\": \"beta\", \"status\": \"done\"}";
    let events =
        f.run(&s, &format!("{read}\n{answer}\n"), Op::Task("What is the second line of notes.txt?".into()), BUDGETS);
    assert_eq!(end(&events).2.as_deref(), Some("beta"));
}

/// An answer that only repeats what a note or a tool's error said is sent back once, with the
/// task quoted; the next answer stands.
#[test]
fn an_answer_that_echoes_a_note_is_sent_back_with_the_task() {
    let f = Fixture::new();
    let missing = call("read", json!({"path": f.p("orders.go")}));
    let echo = "{\"answer\": \"Use glob to list what exists.\", \"status\": \"done\"}";
    let grep = call("grep", json!({"pattern": "beta"}));
    let answer = "{\"answer\": \"notes.txt\", \"status\": \"done\"}";
    let s = f.store.create_session(&f.ws).unwrap();
    let task = "Which file holds the word beta?";
    let events = f.run(&s, &format!("{missing}\n{grep}\n{echo}\n{answer}\n"), Op::Task(task.into()), BUDGETS);
    assert_eq!(end(&events).2.as_deref(), Some("notes.txt"));
    let notes = feedback(&s);
    assert_eq!(
        notes,
        [format!("[note] Your answer repeats what a tool or note said; it does not answer the task. The task: {task}")]
    );

    // Before the note, the turn is asked for again: a reply that answers stands, with no note.
    let s = f.store.create_session(&f.ws).unwrap();
    let events = f.run(&s, &format!("{missing}\n{grep}\n{echo}\n#retry {answer}\n"), Op::Task(task.into()), BUDGETS);
    assert_eq!(end(&events).2.as_deref(), Some("notes.txt"));
    assert!(feedback(&s).is_empty());
    let last = s.events().unwrap().into_iter().rfind(|e| e.kind == "model_turn").unwrap();
    assert_eq!(last.payload["set_aside"], json!([echo]));
}

#[test]
fn a_write_on_a_task_that_asks_a_question_is_held_back_once() {
    let f = Fixture::new();
    let write = call("write", json!({"path": f.p("orders.go"), "content": "package orders\n"}));
    let grep = call("grep", json!({"pattern": "beta"}));
    let answer = "{\"answer\": \"notes.txt\", \"status\": \"done\"}";
    let s = f.store.create_session(&f.ws).unwrap();
    let events =
        f.run(&s, &format!("{write}\n{grep}\n{answer}\n"), Op::Task("Which file mentions beta?".into()), BUDGETS);
    assert_eq!(end(&events).2.as_deref(), Some("notes.txt"));
    assert!(!f.ws.join("orders.go").exists(), "the held write ran");
    let notes = feedback(&s);
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(
        notes[0].starts_with(&format!(
            "[note] The task asks a question, not for a change, so this write of {} was not run",
            f.p("orders.go")
        )),
        "{notes:?}"
    );
    // Only the grep ran; a resumed session sees the note after the held call.
    assert_eq!(s.events().unwrap().iter().filter(|e| e.kind == "action").count(), 1);
    let rebuilt = abhed::agent::history::rebuild(&s.events().unwrap());
    assert!(rebuilt.messages.iter().any(|m| m.role == Role::User && m.content == notes[0]));
    assert!(rebuilt.lost.is_empty());

    // Held once: made again, it runs. And a task that asks for a change is not held.
    let s = f.store.create_session(&f.ws).unwrap();
    f.run(&s, &format!("{write}\n{write}\n{answer}\n"), Op::Task("Which file mentions beta?".into()), BUDGETS);
    assert!(f.ws.join("orders.go").exists());
    std::fs::remove_file(f.ws.join("orders.go")).unwrap();
    let s = f.store.create_session(&f.ws).unwrap();
    f.run(&s, &format!("{write}\n{answer}\n"), Op::Task("Can you create orders.go?".into()), BUDGETS);
    assert!(f.ws.join("orders.go").exists());
    assert!(feedback(&s).is_empty());
}

#[test]
fn a_write_that_creates_a_file_on_a_task_that_asks_no_change_is_held_back_once() {
    let f = Fixture::new();
    // Told that utils.py does not exist and util.py does, the 1.5B model wrote a utils.py.
    std::fs::write(f.ws.join("util.py"), "def add(a, b):\n    return a + b\n").unwrap();
    let read_missing = call("read", json!({"path": f.p("utils.py")}));
    let write = call("write", json!({"path": f.p("utils.py"), "content": "def add(a, b):\n    pass\n"}));
    let read = call("read", json!({"path": f.p("util.py")}));
    let answer = "{\"answer\": \"add\", \"status\": \"done\"}";
    let task = "Read the helper module utils.py and list its functions.";
    let s = f.store.create_session(&f.ws).unwrap();
    let events = f.run(&s, &format!("{read_missing}\n{write}\n{read}\n{answer}\n"), Op::Task(task.into()), BUDGETS);
    assert_eq!(end(&events).2.as_deref(), Some("add"));
    assert!(!f.ws.join("utils.py").exists(), "the held write ran");
    let notes = feedback(&s);
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(
        notes[0].starts_with(&format!(
            "[note] {} does not exist, and the task does not ask for a new file, so this write was not run and nothing changed.",
            f.p("utils.py")
        )),
        "{notes:?}"
    );
    // A write over a file that exists is not held (write's own rules apply), nor is a new file
    // no call was told is missing, nor one on a task that asks for it.
    let s = f.store.create_session(&f.ws).unwrap();
    f.run(
        &s,
        &format!("{write}\n{answer}\n"),
        Op::Task("The operator accepted your plan. Carry it out now.".into()),
        BUDGETS,
    );
    assert!(f.ws.join("utils.py").exists());
    assert!(feedback(&s).is_empty());
    std::fs::remove_file(f.ws.join("utils.py")).unwrap();
    let s = f.store.create_session(&f.ws).unwrap();
    let over = call("write", json!({"path": f.p("util.py"), "content": "x\n"}));
    f.run(&s, &format!("{over}\n{answer}\n"), Op::Task(task.into()), BUDGETS);
    assert!(feedback(&s).is_empty());
    let s = f.store.create_session(&f.ws).unwrap();
    f.run(&s, &format!("{write}\n{answer}\n"), Op::Task("Create utils.py with an add function.".into()), BUDGETS);
    assert!(f.ws.join("utils.py").exists());
    assert!(feedback(&s).is_empty());
}

#[test]
fn a_reply_that_pastes_reads_output_is_stopped_and_told_what_the_file_text_is() {
    let f = Fixture::new();
    let read = call("read", json!({"path": f.p("notes.txt")}));
    let numbered: String = (1..200).map(|i| format!("{i}\\tline {i}\\n")).collect();
    let pasted = format!(
        "{{\"tool\": \"write\", \"arguments\": {{\"path\": \"{p}\", \"content\": \"[read {p} · sha256 0123456789ab · 3 lines · full]\\n{numbered}",
        p = f.p("notes.txt")
    );
    let answer = "{\"answer\": \"alpha\", \"status\": \"done\"}";
    let s = f.store.create_session(&f.ws).unwrap();
    let events = f.run(&s, &format!("{read}\n{pasted}\n{answer}\n"), Op::Task("What is in notes.txt?".into()), BUDGETS);
    assert_eq!(end(&events).2.as_deref(), Some("alpha"));
    let turns: Vec<serde_json::Value> =
        s.events().unwrap().iter().filter(|e| e.kind == "model_turn").map(|e| e.payload.clone()).collect();
    assert_eq!(turns[1]["cut_off"], true);
    let note = turns[1]["feedback"].as_str().unwrap();
    assert!(
        note.starts_with(&format!(
            "your reply copied read's output ([read {} · sha256 0123456789ab · 3 lines · full] and the numbered lines after it), so it was stopped",
            f.p("notes.txt")
        )) && note.contains("the `N\\t` line numbers are not part of the file"),
        "{note}"
    );
    // Nothing was written.
    assert_eq!(s.events().unwrap().iter().filter(|e| e.kind == "action").count(), 1);
}

#[test]
fn a_reply_that_loops_is_named_and_the_next_is_decoded_with_some_randomness() {
    let f = Fixture::new();
    let read = call("read", json!({"path": f.p("notes.txt")}));
    // A write whose content repeats one line past the reply budget.
    let looping = format!(
        "{{\"tool\": \"write\", \"arguments\": {{\"path\": \"{}\", \"content\": \"import unittest\\n{}",
        f.p("test_notes.py"),
        "        self.assertEqual(slugify(1), 2)\\n".repeat(40)
    );
    let answer = "{\"answer\": \"alpha\", \"status\": \"done\"}";
    let s = f.store.create_session(&f.ws).unwrap();
    // `#retry`: the turn after the cut-off is asked with `vary`, as a repeated call is.
    let events =
        f.run(&s, &format!("{looping}\n#retry {read}\n{answer}\n"), Op::Task("What is in notes.txt?".into()), BUDGETS);
    assert_eq!(end(&events).2.as_deref(), Some("alpha"));
    let turns: Vec<serde_json::Value> =
        s.events().unwrap().iter().filter(|e| e.kind == "model_turn").map(|e| e.payload.clone()).collect();
    assert_eq!(turns[0]["cut_off"], true);
    let note = turns[0]["feedback"].as_str().unwrap();
    assert!(
        note.starts_with("your reply repeated this over and over")
            && note.contains("\nself.assertEqual(slugify(1), 2)\nMake one short call instead."),
        "{note}"
    );
}

#[test]
fn an_answer_that_holds_a_new_text_of_a_file_read_is_made_into_the_edit_it_means() {
    let f = Fixture::new();
    std::fs::write(f.ws.join("Dockerfile"), "FROM python:3.9-slim AS build\nWORKDIR /src\nFROM python:3.9-slim\n")
        .unwrap();
    let read = call("read", json!({"path": f.p("Dockerfile")}));
    let updated = json!({"answer": "Here's the updated Dockerfile:\n\n```dockerfile\nFROM python:3.12-slim AS build\nWORKDIR /src\nFROM python:3.12-slim\n```", "status": "done"}).to_string();
    let done = "{\"answer\": \"Done.\", \"status\": \"done\"}";
    let s = f.store.create_session(&f.ws).unwrap();
    let task = "Update the Dockerfile so that it is based on python:3.12-slim instead of python:3.9-slim.";
    let events = f.run(&s, &format!("{read}\n{updated}\n{done}\n"), Op::Task(task.into()), BUDGETS);
    assert_eq!(end(&events).0, StopReason::Done, "{:?}", end(&events));
    assert_eq!(
        std::fs::read_to_string(f.ws.join("Dockerfile")).unwrap(),
        "FROM python:3.12-slim AS build\nWORKDIR /src\nFROM python:3.12-slim\n"
    );
    let stored = s.events().unwrap();
    let turns: Vec<&serde_json::Value> = stored.iter().filter(|e| e.kind == "model_turn").map(|e| &e.payload).collect();
    // The answer's turn is recorded as it was written, as a call, with the edit it became.
    assert_eq!(turns[1]["kind"], "call");
    assert!(turns[1]["raw"].as_str().unwrap().contains("Here's the updated Dockerfile"));
    assert_eq!(
        turns[1]["from_answer"],
        json!({"name": "edit", "arguments": {"path": f.p("Dockerfile"), "edits": [
            {"old_string": "FROM python:3.9-slim AS build", "new_string": "FROM python:3.12-slim AS build"},
            {"old_string": "WORKDIR /src\nFROM python:3.9-slim", "new_string": "WORKDIR /src\nFROM python:3.12-slim"},
        ]}})
    );
    // Through the dispatch like any call: an action, its approval, its observation.
    let actions: Vec<&str> =
        stored.iter().filter(|e| e.kind == "action").map(|e| e.payload["tool"].as_str().unwrap()).collect();
    assert_eq!(actions, ["read", "edit"]);
    let results: Vec<(String, bool)> = events
        .iter()
        .filter_map(|e| match e {
            Event::ToolResult { tool, ok, .. } => Some((tool.clone(), *ok)),
            _ => None,
        })
        .collect();
    assert_eq!(results, [("read".to_string(), true), ("edit".to_string(), true)]);
    // The model is told what became of its answer, before the edit's result; a resumed
    // session rebuilds the same text.
    let rebuilt = abhed::agent::history::rebuild(&stored);
    let told = rebuilt.messages.iter().find(|m| m.content.contains("[result of edit]")).unwrap();
    assert!(
        told.content.starts_with("[note] Text in an answer changes no file, so your answer's new text of the file was made into this call, and it was run: {\"name\":\"edit\",\"arguments\":"),
        "{}",
        told.content
    );
    assert!(rebuilt.lost.is_empty());
    // A task that asks no change keeps its answer, which changes no file (this one, that says
    // "updated", is sent back once, and given again it stands).
    let s = f.store.create_session(&f.ws).unwrap();
    std::fs::write(f.ws.join("Dockerfile"), "FROM python:3.9-slim AS build\nWORKDIR /src\nFROM python:3.9-slim\n")
        .unwrap();
    let script = format!("{read}\n{updated}\n{updated}\n");
    let events = f.run(&s, &script, Op::Task("What is the Dockerfile based on?".into()), BUDGETS);
    assert_eq!(end(&events).0, StopReason::Done);
    assert!(std::fs::read_to_string(f.ws.join("Dockerfile")).unwrap().contains("3.9"));
}

/// The system prompt of both protocols and the tool definitions the native chat template lists:
/// the text the model is given, kept as a file so that a wording change shows in review. After a
/// deliberate change: `ABHED_BLESS=1 cargo test --test loop_scripted`.
#[test]
fn the_system_prompt_and_the_tool_definitions_are_the_snapshot() {
    use abhed::agent::prompt::system_prompt_for;
    let f = Fixture::new();
    let registry = Registry::native();
    let text = format!(
        "=== the JSON protocol's system prompt\n{}\n=== the native protocol's system prompt\n{}\n=== the tool definitions\n{}\n",
        system_prompt_for(&registry, &f.ws, false),
        system_prompt_for(&registry, &f.ws, true),
        serde_json::to_string_pretty(&registry.definitions()).unwrap()
    )
    .replace(&f.ws.display().to_string(), "$WS");
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots/system_prompt.txt");
    if std::env::var_os("ABHED_BLESS").is_some() {
        std::fs::write(&path, &text).unwrap();
    }
    let want = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        want == text,
        "the system prompt is not {}; if the change is meant, bless it: ABHED_BLESS=1 cargo test --test loop_scripted",
        path.display()
    );
}

/// "done" while the command the task names failed when last run, with nothing changed since,
/// is sent back (twice at most) with the lines of its output that name the fault; after a
/// change it is not (the command has not run on the change); a question's answer stands.
#[test]
fn an_answer_while_the_named_check_still_fails_is_sent_back_with_its_error() {
    let mut f = Fixture::new();
    f.config.run.act_until_change = 0;
    std::fs::write(f.ws.join("main.py"), "from helper import missing_name\nprint(missing_name)\n").unwrap();
    std::fs::write(f.ws.join("helper.py"), "present_name = 1\n").unwrap();
    let run = call("bash", json!({"command": "python3 main.py", "description": "run it"}));
    let read = call("read", json!({"path": f.p("main.py")}));
    let done = "{\"answer\": \"Done.\", \"status\": \"done\"}";
    let task = "python3 main.py fails; fix it.";
    let s = f.store.create_session(&f.ws).unwrap();
    // A look with bash (`cat`) between is not a change: the second "done" is sent back too.
    let cat = call("bash", json!({"command": "cat main.py", "description": "look"}));
    let script = format!("{run}\n{done}\n{cat}\n{done}\n{read}\n{done}\n");
    let events = f.run(&s, &script, Op::Task(task.into()), BUDGETS);
    assert_eq!(end(&events).2.as_deref(), Some("Done."));
    let notes = feedback(&s);
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert!(
        notes[0].starts_with(
            "[note] `python3 main.py`, which the task names, failed the last time you ran it (exit code 1), and no call has changed anything since, so the task is not done. It said:\n"
        ),
        "{notes:?}"
    );
    assert!(notes[0].contains("ImportError: cannot import name 'missing_name' from 'helper'"), "{notes:?}");
    // (After the failed run the next turn must be a call: the scripted model answers anyway.)
    assert_eq!(call_only_flags(&s), [true, true, true, false, true, false]);

    // A give-up after the failure is sent back once, saying when giving up is right.
    let give_up = "{\"answer\": \"It cannot be fixed.\", \"status\": \"gave_up\"}";
    let s = f.store.create_session(&f.ws).unwrap();
    let events = f.run(&s, &format!("{run}\n{give_up}\n{read}\n{give_up}\n"), Op::Task(task.into()), BUDGETS);
    assert_eq!(end(&events).0, StopReason::GaveUp);
    let notes = feedback(&s);
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0].contains("Give up only if what fails is outside the workspace"), "{notes:?}");

    // An edit after the failed run: the check is not known to fail any more.
    let edit = call(
        "edit",
        json!({"path": f.p("main.py"), "old_string": "missing_name", "new_string": "present_name", "replace_all": true}),
    );
    let s = f.store.create_session(&f.ws).unwrap();
    f.run(&s, &format!("{run}\n{read}\n{edit}\n{done}\n{done}\n"), Op::Task(task.into()), BUDGETS);
    let notes = feedback(&s);
    assert!(notes.iter().all(|n| !n.contains("failed the last time")), "{notes:?}");

    // A question about the failure is answered, not sent back.
    std::fs::write(f.ws.join("main.py"), "from helper import missing_name\n").unwrap();
    let why = "{\"answer\": \"helper.py has no missing_name.\", \"status\": \"done\"}";
    let s = f.store.create_session(&f.ws).unwrap();
    let events = f.run(&s, &format!("{run}\n{why}\n"), Op::Task("Why does python3 main.py fail?".into()), BUDGETS);
    assert_eq!(end(&events).2.as_deref(), Some("helper.py has no missing_name."));
    assert!(feedback(&s).is_empty());
}

/// An answer that tells the operator how to do the rest, after a change, is sent back once; one
/// whose text of the file is the file as the calls left it says what was done, and stands.
#[test]
fn an_answer_telling_how_to_do_the_rest_is_sent_back_once() {
    let f = Fixture::new();
    let read = call("read", json!({"path": f.p("notes.txt")}));
    let edit = call("edit", json!({"path": f.p("notes.txt"), "old_string": "beta", "new_string": "gamma"}));
    let how =
        "{\"answer\": \"To finish, you need to open the file and replace alpha with omega.\", \"status\": \"done\"}";
    let task = "Replace beta with gamma and alpha with omega in notes.txt.";
    let s = f.store.create_session(&f.ws).unwrap();
    let events = f.run(&s, &format!("{read}\n{edit}\n{how}\n{read}\n{how}\n"), Op::Task(task.into()), BUDGETS);
    assert_eq!(end(&events).0, StopReason::Done);
    let notes = feedback(&s);
    assert_eq!(
        notes,
        [
            "[note] Your answer tells someone how to do the task, but nobody else will do it: the changes are yours to make, with tool calls. Make the call for the first step of it that is not done yet. If every step is done already, answer again with what you changed."
        ]
    );
    assert_eq!(call_only_flags(&s), [true, false, false, true, false]);

    std::fs::write(f.ws.join("notes.txt"), "alpha\nbeta\n").unwrap();
    let shown = json!({"answer": "You need to edit the file. Here is the updated content:\n```\nalpha\ngamma\n```", "status": "done"});
    let s = f.store.create_session(&f.ws).unwrap();
    let events = f.run(
        &s,
        &format!("{read}\n{edit}\n{shown}\n"),
        Op::Task("Change beta to gamma in notes.txt.".into()),
        BUDGETS,
    );
    assert_eq!(end(&events).0, StopReason::Done);
    assert!(feedback(&s).is_empty());
}

/// An answer to a question about where something is that names no file is sent back once.
#[test]
fn an_answer_to_where_that_names_no_file_is_sent_back_once() {
    let f = Fixture::new();
    let grep = call("grep", json!({"pattern": "beta"}));
    let value = "{\"answer\": \"It is the second word.\", \"status\": \"done\"}";
    let task = "Where is the word beta, and which line is it on?";
    let s = f.store.create_session(&f.ws).unwrap();
    let events = f.run(&s, &format!("{grep}\n{value}\n{value}\n"), Op::Task(task.into()), BUDGETS);
    assert_eq!(end(&events).2.as_deref(), Some("It is the second word."));
    assert_eq!(
        feedback(&s),
        [
            "[note] The task asks where something is, and your answer names no file. Answer again with the file's path (and the line, if you know it), as the tool results above show it."
        ]
    );
    let s = f.store.create_session(&f.ws).unwrap();
    let named = "{\"answer\": \"notes.txt, line 2.\", \"status\": \"done\"}";
    f.run(&s, &format!("{grep}\n{named}\n"), Op::Task(task.into()), BUDGETS);
    assert!(feedback(&s).is_empty());
}
