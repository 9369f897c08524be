//! The task tool's subagents, driven by the scripted adapter (which runs a call's subagents one
//! after another, so a script lists the parent's turns and then each subagent's): a fresh
//! context, the profiles' tools, linked sessions and events, hierarchical budgets, the
//! concurrency cap, nested spawning refused, and prompts that are not self-contained.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use abhed::agent::{Budgets, Event, Op, StopReason};
use common::scripted::Fixture;
use serde_json::{Value, json};

const BUDGETS: Budgets = Budgets { max_turns: 10, max_tokens: 200_000, max_wall_ms: None, max_reply_tokens: 256 };

trait Family {
    fn children(&self, parent: &str) -> Vec<String>;
    fn events_of(&self, id: &str) -> Vec<abhed::store::StoredEvent>;
}

impl Family for Fixture {
    /// The sessions spawned by `parent`, oldest first.
    fn children(&self, parent: &str) -> Vec<String> {
        let mut kids: Vec<_> =
            self.store.sessions().unwrap().into_iter().filter(|s| s.parent.as_deref() == Some(parent)).collect();
        kids.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)));
        kids.into_iter().map(|s| s.id).collect()
    }

    fn events_of(&self, id: &str) -> Vec<abhed::store::StoredEvent> {
        self.store.open_session(id).unwrap().unwrap().events().unwrap()
    }
}

fn call(tool: &str, args: Value) -> String {
    json!({"tool": tool, "arguments": args}).to_string()
}

fn answer(text: &str) -> String {
    json!({"answer": text, "status": "done"}).to_string()
}

fn end(events: &[Event]) -> (StopReason, String) {
    match events.last().unwrap() {
        Event::RunEnd { reason, message, .. } => (*reason, message.clone()),
        other => panic!("the last event is not run_end: {other:?}"),
    }
}

/// The text of the parent's observations of `tool`, in order.
fn results(events: &[Event], tool: &str) -> Vec<(bool, Option<String>, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::ToolResult { tool: t, ok, error_code, output, .. } if t == tool => {
                Some((*ok, error_code.clone(), output.clone()))
            }
            _ => None,
        })
        .collect()
}

const TASK: &str = "Survey the notes for me.";

const PROMPT: &str = "Read the file NOTES and report its first line exactly.";

#[test]
fn a_subagent_gets_a_fresh_context_its_profile_s_tools_and_a_linked_session() {
    let f = Fixture::new();
    let s = f.store.create_session(&f.ws).unwrap();
    let prompt = PROMPT.replace("NOTES", &f.p("notes.txt"));
    let script = [
        call("task", json!({"prompt": prompt, "description": "Read the notes", "agent_type": "explore"})),
        // The subagent: its own prompt, its profile, none of the parent's turns.
        "#expect-prompt # You are a subagent".into(),
        "#expect-prompt You explore".into(),
        format!("#expect-prompt {prompt}"),
        "#reject-prompt Survey the notes for me.".into(),
        "#reject-prompt \\n## write\\n".into(),
        call("write", json!({"path": f.p("x.txt"), "content": "no"})),
        call("read", json!({"path": f.p("notes.txt")})),
        answer("The first line is alpha."),
        // The parent again, with the summary.
        "#expect-prompt Subagent (explore: Read the notes) finished in 3 turns".into(),
        "#expect-prompt Its summary:\\nThe first line is alpha.".into(),
        answer("alpha"),
    ]
    .join("\n");
    let events = f.run(&s, &script, Op::Task(TASK.into()), BUDGETS);
    assert_eq!(end(&events).0, StopReason::Done, "{events:#?}");
    assert!(!f.ws.join("x.txt").exists());

    let kids = f.children(s.id());
    assert_eq!(kids.len(), 1);
    let child = f.events_of(&kids[0]);
    // The parent's action and the subagent's run point at each other.
    let action = s.events().unwrap().into_iter().find(|e| e.kind == "action").unwrap();
    assert_eq!(child[0].kind, "run_start");
    assert_eq!(child[0].payload["parent"]["session"], s.id());
    assert_eq!(child[0].payload["parent"]["action_seq"], action.seq);
    assert_eq!(child[0].payload["parent"]["agent_type"], "explore");
    let obs = s.events().unwrap().into_iter().find(|e| e.kind == "observation").unwrap();
    assert_eq!(obs.payload["meta"]["subagents"][0]["session"], kids[0].as_str());
    assert_eq!(obs.payload["meta"]["subagents"][0]["reason"], "done");
    // write is not an explore tool.
    let child_obs: Vec<_> = child.iter().filter(|e| e.kind == "observation").collect();
    assert_eq!(child_obs[0].payload["error"]["code"], "unknown_tool");
    assert!(child_obs[0].payload["output"].as_str().unwrap().contains("The tools are: read, glob, grep."));

    // The live stream carries the subagent's events, wrapped and linked.
    let wrapped: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Event::Subagent { action_seq, index, session, event, .. } => Some((*action_seq, *index, session, event)),
            _ => None,
        })
        .collect();
    assert!(wrapped.iter().all(|(a, i, sess, _)| *a == action.seq && *i == 0 && **sess == kids[0]));
    assert!(matches!(wrapped.last().unwrap().3.as_ref(), Event::RunEnd { reason: StopReason::Done, .. }));
    // The subagent's tokens count against the parent's.
    let child_tokens = child.last().unwrap().payload["tokens"].as_u64().unwrap();
    let Event::RunEnd { tokens, .. } = events.last().unwrap() else { unreachable!() };
    assert!(*tokens > child_tokens, "{tokens} vs {child_tokens}");
}

#[test]
fn parallel_subagents_each_report_and_a_summary_over_the_limit_is_cut_with_a_note() {
    let mut f = Fixture::new();
    f.config.task.summary_tokens = 100;
    let s = f.store.create_session(&f.ws).unwrap();
    // Over the summary limit (100 tokens), within the reply limit (256): a longer reply is cut off.
    let long = "word ".repeat(180);
    let script = [
        call(
            "task",
            json!({"prompt": "List every file under /tmp/x and report their names.", "description": "List files",
                   "agent_type": "explore",
                   "parallel": [{"prompt": "Count the lines of every file in /tmp/y and report the counts.", "description": "Count lines", "agent_type": "review"}]}),
        ),
        answer("one"),
        "#expect-prompt You review".into(),
        answer(&long),
        "#expect-prompt Subagent 1 of 2 (explore: List files) finished in 1 turns".into(),
        "#expect-prompt Subagent 2 of 2 (review: Count lines) finished".into(),
        "#expect-prompt [summary truncated: about 100 of its".into(),
        answer("both done"),
    ]
    .join("\n");
    let events = f.run(&s, &script, Op::Task(TASK.into()), BUDGETS);
    assert_eq!(end(&events).0, StopReason::Done, "{events:#?}");
    assert_eq!(f.children(s.id()).len(), 2);
    let indexes: std::collections::BTreeSet<u32> = events
        .iter()
        .filter_map(|e| match e {
            Event::Subagent { index, .. } => Some(*index),
            _ => None,
        })
        .collect();
    assert_eq!(indexes.into_iter().collect::<Vec<_>>(), [0, 1]);
}

#[test]
fn budget_exhaustion_mid_subagent_stops_it_with_budget_limit_reached() {
    let f = Fixture::new();
    let s = f.store.create_session(&f.ws).unwrap();
    // Each scripted turn costs its whole prompt (a few thousand tokens: the system prompt holds
    // the tool schemas), so the subagent runs dry a few reads in.
    let read = call("read", json!({"path": f.p("notes.txt")}));
    let mut script = vec![call(
        "task",
        json!({"prompt": "Read /ws/notes.txt over and over, and report.", "description": "Loop reads"}),
    )];
    script.extend(std::iter::repeat_n(read, 30));
    let budgets = Budgets { max_tokens: 15_000, max_turns: 40, ..BUDGETS };
    let events = f.run(&s, &script.join("\n"), Op::Task(TASK.into()), budgets);

    let kids = f.children(s.id());
    let child = f.events_of(&kids[0]);
    let child_end = &child.last().unwrap().payload;
    assert_eq!(child_end["reason"], "max_tokens");
    assert!(child_end["message"].as_str().unwrap().starts_with("Budget limit reached"), "{child_end}");
    let task = results(&events, "task");
    assert!(task[0].0);
    assert!(task[0].2.contains("stopped before it finished"), "{}", task[0].2);
    assert!(task[0].2.contains("Budget limit reached"), "{}", task[0].2);
    // The parent is out of budget too: its run stops there, not at the next turn's cost.
    assert_eq!(end(&events).0, StopReason::MaxTokens);
}

#[test]
fn a_spawn_with_the_budget_spent_fails_cleanly() {
    let f = Fixture::new();
    let s = f.store.create_session(&f.ws).unwrap();
    let script =
        call("task", json!({"prompt": "Read /ws/notes.txt and report its first line.", "description": "Read notes"}));
    // The first turn alone spends more than this.
    let events = f.run(&s, &script, Op::Task(TASK.into()), Budgets { max_tokens: 100, ..BUDGETS });
    let task = results(&events, "task");
    assert_eq!(task[0].1.as_deref(), Some("budget_exhausted"));
    assert!(task[0].2.starts_with("Error [budget_exhausted]: Budget limit reached"), "{}", task[0].2);
    assert!(f.children(s.id()).is_empty());
    assert_eq!(end(&events).0, StopReason::MaxTokens);
}

#[test]
fn the_concurrency_cap_refuses_a_call_over_it() {
    let mut f = Fixture::new();
    f.config.task.max_concurrent = 2;
    let s = f.store.create_session(&f.ws).unwrap();
    let one = |n: u32| json!({"prompt": format!("Report the size of /ws/file{n}.txt in bytes."), "description": format!("Size {n}")});
    let mut first = one(1);
    first["parallel"] = json!([one(2), one(3)]);
    let script = [call("task", first), answer("too many")].join("\n");
    let events = f.run(&s, &script, Op::Task(TASK.into()), BUDGETS);
    let task = results(&events, "task");
    assert_eq!(task[0].1.as_deref(), Some("too_many_subagents"));
    assert!(task[0].2.contains("at most 2 run at once (task.max_concurrent)"), "{}", task[0].2);
    assert!(f.children(s.id()).is_empty());
}

#[test]
fn nested_spawning_is_refused_by_default() {
    let f = Fixture::new();
    let s = f.store.create_session(&f.ws).unwrap();
    let inner =
        call("task", json!({"prompt": "Read /ws/notes.txt and report its first line.", "description": "Nested read"}));
    let script = [
        call("task", json!({"prompt": "Delegate reading /ws/notes.txt to another agent.", "description": "Delegate"})),
        "#reject-prompt \\n## task\\n".into(),
        inner,
        answer("could not delegate"),
        answer("done"),
    ]
    .join("\n");
    let events = f.run(&s, &script, Op::Task(TASK.into()), BUDGETS);
    assert_eq!(end(&events).0, StopReason::Done);
    let kids = f.children(s.id());
    assert_eq!(kids.len(), 1);
    let child = f.events_of(&kids[0]);
    let obs = child.iter().find(|e| e.kind == "observation").unwrap();
    assert_eq!(obs.payload["error"]["code"], "nested_task");
    assert!(obs.payload["output"].as_str().unwrap().contains("a subagent cannot spawn subagents"));
    assert!(f.children(&kids[0]).is_empty());
}

#[test]
fn a_prompt_that_leans_on_the_conversation_is_refused() {
    let f = Fixture::new();
    let s = f.store.create_session(&f.ws).unwrap();
    let script = [
        call("task", json!({"prompt": "Fix the bug in the file we discussed.", "description": "Fix bug"})),
        answer("ok"),
    ]
    .join("\n");
    let events = f.run(&s, &script, Op::Task(TASK.into()), BUDGETS);
    let task = results(&events, "task");
    assert_eq!(task[0].1.as_deref(), Some("not_self_contained"));
    assert!(task[0].2.contains("\"we discussed\""), "{}", task[0].2);
    assert!(task[0].2.contains("name the files by absolute path"), "{}", task[0].2);
    assert!(f.children(s.id()).is_empty());
}

#[test]
fn subagents_of_a_parent_in_plan_mode_change_nothing() {
    let f = Fixture::new();
    let s = f.store.create_session(&f.ws).unwrap();
    abhed::tools::plan::set_plan_mode(&s, true).unwrap();
    let script = [
        call("task", json!({"prompt": "Write the word hi into /ws/x.txt as a new file.", "description": "Write file"})),
        call("write", json!({"path": f.p("x.txt"), "content": "hi"})),
        answer("plan mode stopped me"),
        answer("done"),
    ]
    .join("\n");
    f.run(&s, &script, Op::Task(TASK.into()), BUDGETS);
    let kids = f.children(s.id());
    let obs = f.events_of(&kids[0]).into_iter().find(|e| e.kind == "observation").unwrap();
    assert_eq!(obs.payload["error"]["code"], "plan_mode");
    assert!(!f.ws.join("x.txt").exists());
}
