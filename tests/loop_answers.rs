//! Final answers the loop reads before it lets them end a run, as the scripted model meets them:
//! a question about where something is, answered without the file that the run's own search
//! showed; an answer whose code block is made into edits, and what it must never be made into.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use abhed::agent::{Budgets, Event, Op, StopReason};
use common::scripted::{Fixture, feedback};
use serde_json::json;

const BUDGETS: Budgets = Budgets { max_turns: 10, max_tokens: 100_000, max_wall_ms: None, max_reply_tokens: 256 };

fn end(events: &[Event]) -> (StopReason, Option<String>) {
    match events.last().unwrap() {
        Event::RunEnd { reason, answer, .. } => (*reason, answer.clone()),
        other => panic!("the last event is not run_end: {other:?}"),
    }
}

fn call(tool: &str, args: serde_json::Value) -> String {
    json!({"tool": tool, "arguments": args}).to_string()
}

fn answer(text: &str, status: &str) -> String {
    json!({"answer": text, "status": status}).to_string()
}

fn tools_called(s: &abhed::store::Session<'_>) -> Vec<String> {
    s.events()
        .unwrap()
        .iter()
        .filter(|e| e.kind == "action")
        .map(|e| e.payload["tool"].as_str().unwrap().to_string())
        .collect()
}

/// A where-question answered without a file, after a grep that showed the definition: the note
/// quotes the grep's lines, definition first, and the model's next answer may be made of them
/// (it is not taken for an echo of the note).
#[test]
fn a_where_answer_without_a_file_is_sent_back_with_the_lines_the_search_found() {
    let f = Fixture::new();
    std::fs::create_dir_all(f.ws.join("src/net")).unwrap();
    std::fs::write(f.ws.join("src/net/backoff.rs"), "//! Retries.\n\npub const MAX_UPLOAD_RETRIES: u32 = 12;\n")
        .unwrap();
    std::fs::write(f.ws.join("src/net/upload.rs"), "use super::backoff::MAX_UPLOAD_RETRIES;\n").unwrap();
    let grep = call("grep", json!({"pattern": "MAX_UPLOAD_RETRIES", "output_mode": "content"}));
    let value = answer("The value of MAX_UPLOAD_RETRIES is 12.", "done");
    let place = format!("{}:3:pub const MAX_UPLOAD_RETRIES: u32 = 12;", f.p("src/net/backoff.rs"));
    let quoted = answer(&place, "done");
    let task = "Where is MAX_UPLOAD_RETRIES defined, and what is its value?";
    let s = f.store.create_session(&f.ws).unwrap();
    // The exact text the model reads next: the note, the lines, what to answer.
    let note = format!(
        "[note] The task asks where something is, and your answer names no file. The run's searches found it here:\n{place}\n{}:1:use super::backoff::MAX_UPLOAD_RETRIES;\nAnswer again: the file's path and line, and what the task asks about it.",
        f.p("src/net/upload.rs")
    );
    let script = format!("{grep}\n{value}\n#expect-prompt {}\n{quoted}\n", note.lines().last().unwrap());
    let events = f.run(&s, &script, Op::Task(task.into()), BUDGETS);
    assert_eq!(end(&events), (StopReason::Done, Some(place.clone())));
    assert_eq!(feedback(&s), [note]);
}

/// Giving up on a where-question when a search's error listed the definition elsewhere: sent
/// back once with the lines. A give-up with nothing found stands.
#[test]
fn a_give_up_on_where_is_sent_back_only_when_a_search_found_it() {
    let f = Fixture::new();
    std::fs::create_dir_all(f.ws.join("invoicer/catalog")).unwrap();
    std::fs::write(f.ws.join("invoicer/catalog/sku.py"), "import re\n\n\ndef normalize_sku(raw):\n    return raw\n")
        .unwrap();
    let task = "Which file defines the function normalize_sku? Give me its path.";
    // A guessed file that does not exist: grep's error names where the pattern does match.
    let guess = call("grep", json!({"pattern": "normalize_sku", "path": f.p("invoicer/invoicer.ts")}));
    let give_up = answer("The file that defines the function normalize_sku was not found.", "gave_up");
    let path = answer(&format!("{}, line 4.", f.p("invoicer/catalog/sku.py")), "done");
    let s = f.store.create_session(&f.ws).unwrap();
    let events = f.run(&s, &format!("{guess}\n{give_up}\n{path}\n"), Op::Task(task.into()), BUDGETS);
    assert_eq!(end(&events).0, StopReason::Done);
    let notes = feedback(&s);
    assert_eq!(notes.len(), 1);
    assert!(
        notes[0].contains(&format!("\n{}:4:def normalize_sku(raw):\n", f.p("invoicer/catalog/sku.py"))),
        "{}",
        notes[0]
    );

    // Nothing found anywhere: the give-up is the answer.
    let s = f.store.create_session(&f.ws).unwrap();
    let nothing = call("grep", json!({"pattern": "normalise_sku"}));
    let events = f.run(&s, &format!("{nothing}\n{give_up}\n"), Op::Task(task.into()), BUDGETS);
    assert_eq!(end(&events).0, StopReason::GaveUp);
    assert!(feedback(&s).is_empty());
}

/// An answer whose code block holds tool calls written as JSON, on a task that asks to change a
/// JSON file the run read: not taken for a new text of that file (it shares only `{` and `}`
/// with it). Found in an eval run, where it replaced config/app.json's settings with the calls.
#[test]
fn calls_written_as_json_in_an_answer_never_become_a_json_files_text() {
    let f = Fixture::new();
    std::fs::create_dir(f.ws.join("config")).unwrap();
    let app = "{\n  \"name\": \"orders-api\",\n  \"features\": {\n    \"bulk_import\": true\n  },\n  \"logging\": {\n    \"level\": \"info\"\n  }\n}\n";
    std::fs::write(f.ws.join("config/app.json"), app).unwrap();
    let read = call("read", json!({"path": f.p("config/app.json")}));
    let calls = format!(
        "Here's how:\n\n```json\n{{\n  \"name\": \"read\", \"arguments\": {{\"path\": \"{p}\"}}}}\n}}\n\n{{\n  \"name\": \"edit\", \"arguments\": {{\n    \"path\": \"{p}\",\n    \"old_string\": \"features\"\n  }}\n}}\n```",
        p = f.p("config/app.json")
    );
    let s = f.store.create_session(&f.ws).unwrap();
    let task = "Add the flag dark_mode = true to the \"features\" object in config/app.json.";
    let script = format!("{read}\n{}\n{}\n", answer(&calls, "done"), answer(&calls, "done"));
    f.run(&s, &script, Op::Task(task.into()), BUDGETS);
    assert_eq!(std::fs::read_to_string(f.ws.join("config/app.json")).unwrap(), app);
    assert!(!tools_called(&s).contains(&"edit".to_string()), "{:?}", tools_called(&s));
}

/// After a change, an answer that restates the file with two lines left out is not sent back
/// as "delete them", unless the task asks to delete something. Found in an eval run, where the
/// note had the model delete two settings of deploy/staging.env it was never asked to touch.
#[test]
fn lines_an_answer_leaves_out_are_deletions_only_when_the_task_asks_for_one() {
    let f = Fixture::new();
    let env = "APP_ENV=staging\nDATABASE_HOST=db-1.internal\nREDIS_URL=redis://cache:6379/0\nLOG_LEVEL=info\nDEBUG=true\nSENTRY_ENVIRONMENT=staging\n";
    let read = call("read", json!({"path": f.p("staging.env")}));
    let edit =
        call("edit", json!({"path": f.p("staging.env"), "old_string": "DEBUG=true", "new_string": "DEBUG=false"}));
    let shortened = answer(
        "Done. The file now reads:\n\n```\nAPP_ENV=staging\nDATABASE_HOST=db-1.internal\nDEBUG=false\n```",
        "done",
    );
    // Sent back, the next turn must be the deletion.
    let delete = call(
        "edit",
        json!({"path": f.p("staging.env"), "old_string": "REDIS_URL=redis://cache:6379/0\nLOG_LEVEL=info\n", "new_string": ""}),
    );
    for (task, deletes) in [
        ("In staging.env, turn debug mode off.", false),
        ("In staging.env, turn debug mode off and remove the Redis and log level settings.", true),
    ] {
        std::fs::write(f.ws.join("staging.env"), env).unwrap();
        let s = f.store.create_session(&f.ws).unwrap();
        let script = if deletes {
            format!("{read}\n{edit}\n{shortened}\n{delete}\n{shortened}\n")
        } else {
            format!("{read}\n{edit}\n{shortened}\n")
        };
        let events = f.run(&s, &script, Op::Task(task.into()), BUDGETS);
        assert_eq!(end(&events).0, StopReason::Done);
        let notes = feedback(&s);
        let listed =
            notes.iter().any(|n| n.contains("\"old_string\": \"REDIS_URL=redis://cache:6379/0\\nLOG_LEVEL=info\\n\""));
        assert_eq!(listed, deletes, "{task}: {notes:?}");
    }
}

/// An answer that holds a write call whose content is left out (`[...]`) is not sent back with
/// that call to make: the 1.5B model made it, and replaced the file it had just changed
/// correctly with `[...]` (the suite's config-yaml-value, 2026-12-07).
#[test]
fn a_call_written_as_text_with_its_content_left_out_is_never_offered() {
    let f = Fixture::new();
    std::fs::write(f.ws.join("app.yaml"), "replicas: 1\n").unwrap();
    let task = "Set replicas in app.yaml to 4.";
    let read = call("read", json!({"path": f.p("app.yaml")}));
    let edit = call("edit", json!({"path": f.p("app.yaml"), "old_string": "replicas: 1", "new_string": "replicas: 4"}));
    let text = format!(
        "Save the changes with write:\n\n```json\n{}\n```\n\nReplace `[...]` with the content.",
        json!({"name": "write", "arguments": {"path": f.p("app.yaml"), "content": "[...]"}})
    );
    let s = f.store.create_session(&f.ws).unwrap();
    let script = [read, edit, answer(&text, "done"), answer("Done: replicas is 4.", "done")].join("\n");
    f.run(&s, &script, Op::Task(task.into()), BUDGETS);
    assert!(feedback(&s).iter().all(|n| !n.contains("written as text")), "{:?}", feedback(&s));
    assert_eq!(std::fs::read_to_string(f.ws.join("app.yaml")).unwrap(), "replicas: 4\n");
}
