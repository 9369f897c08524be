//! The real local model: SmolLM2-135M-Instruct (the small model, fetched by `bash models/fetch.sh smollm2-135m`) run
//! in-process by llama.cpp. The model is weak; these tests assert what the system guarantees
//! whatever the model decides: every turn parses into a schema-valid call or an answer (the
//! grammar), the calls run and are recorded, the chain verifies, the KV cache and the saved
//! system prompt are reused, and bad input is refused with a clear message.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::cli::{Env, json_lines};
use serde_json::Value;

use abhed::model::locate;
use abhed::tools::Registry;

fn model() -> String {
    let p = locate::small_model_path().unwrap_or_else(|e| panic!("the real-model tests need the small model: {e}"));
    p.display().to_string()
}

/// One model run at a time: each uses every core, and llama.cpp's threads oversubscribed on a
/// small machine run many times slower than the same runs in a row.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

fn setup() -> Env {
    let env = Env::new();
    std::fs::write(env.ws.join("notes.txt"), "alpha\nbeta\ngamma\n").unwrap();
    std::fs::write(env.ws.join("main.rs"), "fn main() {\n    println!(\"hello\");\n}\n").unwrap();
    env
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// One run on the real model, `--json`; returns the exit code and the events.
fn run(env: &Env, task: &str, extra: &[&str]) -> (i32, Vec<Value>) {
    let m = model();
    let mut argv = vec!["run", task, "--json", "--model", &m];
    argv.extend_from_slice(extra);
    let out = env.cmd(&argv);
    (out.status.code().unwrap(), json_lines(&out.stdout))
}

fn of_type<'a>(events: &'a [Value], t: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == t).collect()
}

#[test]
fn a_real_run_parses_executes_and_records_every_turn() {
    let _one = serial();
    let env = setup();
    let task = format!("Read the file {} and tell me its first line.", env.path("notes.txt"));
    let (code, events) = run(&env, &task, &["--max-turns", "4", "--max-reply-tokens", "128"]);
    assert!([0, 1, 4].contains(&code), "exit {code}: {events:?}");

    let start = of_type(&events, "run_start");
    assert_eq!(start.len(), 1);
    assert_eq!(start[0]["model"]["adapter"], "llama");
    assert_eq!(start[0]["model"]["sha256"], "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53");
    assert_eq!(start[0]["model"]["template"], "gguf");

    let turns = of_type(&events, "model_turn");
    assert!(!turns.is_empty());
    let registry = Registry::native();
    // The task names notes.txt: its read is given before the first turn (`run.given_calls`),
    // a call on record with no tokens.
    let (given, turns): (Vec<&Value>, Vec<&Value>) = turns.into_iter().partition(|t| t.get("given_why").is_some());
    assert_eq!(given.len(), 1, "{given:?}");
    assert!(!turns.is_empty());
    for t in &turns {
        // The grammar: every complete reply is a call or an answer, never free text.
        if t["cut_off"] == false {
            assert_ne!(t["kind"], "invalid", "the grammar let through: {}", t["raw"]);
        }
        assert!(t["usage"]["generated_tokens"].as_u64().unwrap() > 0);
    }
    let calls = of_type(&events, "tool_call");
    let results = of_type(&events, "tool_result");
    assert_eq!(calls.len(), results.len(), "every call has its result");
    for (c, r) in calls.iter().zip(&results) {
        assert_eq!(r["action_seq"], c["seq"]);
        // Schema-valid: the arguments satisfy the tool's own schema.
        let tool = registry.get(c["tool"].as_str().unwrap()).expect("a known tool");
        abhed::tools::args::validate(tool.name(), &tool.input_schema(), &c["arguments"])
            .unwrap_or_else(|e| panic!("not schema-valid: {} {}: {}", c["tool"], c["arguments"], e.message));
    }
    let end = events.last().unwrap();
    assert_eq!(end["type"], "run_end");

    // Persisted, in order, with an intact chain.
    let id = events[0]["session"].as_str().unwrap();
    let stored = json_lines(&env.cmd(&["sessions", "export", id]).stdout);
    // The session line and the todo lines (the todo observation's list, shown live) are the
    // stream's own; every other event is stored.
    let live_only = events.iter().filter(|e| e["type"] == "session" || e["type"] == "todo").count();
    assert_eq!(stored.len(), events.len() - live_only, "every event but the session and todo lines is stored");
    assert_eq!(env.cmd(&["sessions", "verify", id]).status.code(), Some(0));
}

#[test]
fn turns_evaluate_only_new_tokens_and_the_system_prompt_is_saved() {
    let _one = serial();
    let env = setup();
    let task = format!("Search {} for the word println with grep.", env.ws.display());
    // Six tokens cannot hold a complete turn (the shortest answer takes about ten), so every
    // turn is cut off and the run lasts its three turns whatever the model would choose.
    let (_, first) = run(&env, &task, &["--max-turns", "3", "--max-reply-tokens", "6"]);
    let turns = of_type(&first, "model_turn");
    assert_eq!(turns.len(), 3, "{first:?}");
    assert!(turns.iter().all(|t| t["cut_off"] == true && t["kind"] == "invalid"));
    for (i, t) in turns.iter().enumerate().skip(1) {
        let u = &t["usage"];
        let cached = u["cached_tokens"].as_u64().unwrap();
        let prompt = u["prompt_tokens"].as_u64().unwrap();
        assert!(cached > 0 && cached < prompt, "turn {}: {u}", i + 1);
        assert_eq!(u["evaluated_tokens"].as_u64().unwrap(), prompt - cached);
    }
    // A second session: its first turn finds the system prompt's state on disk.
    let (_, second) = run(&env, "Say hello.", &["--max-turns", "1"]);
    let u = &of_type(&second, "model_turn")[0]["usage"];
    let prompt = of_type(&second, "run_start")[0]["preflight"]["prompt_tokens"].as_u64().unwrap();
    assert!(u["cached_tokens"].as_u64().unwrap() > prompt / 2, "the saved system prompt was not used: {u}");
    // And without the cache, all of it is evaluated.
    let (_, third) = run(&env, "Say hello.", &["--max-turns", "1", "--no-prompt-cache"]);
    let u = &of_type(&third, "model_turn")[0]["usage"];
    assert_eq!(u["cached_tokens"], 0, "{u}");
}

/// Regression: the saved system prompt was tried only at a session's first turn. Compaction
/// decodes its own prompt in the same context, and `abhed eval` runs task after task in one
/// session, so the turn after a compaction, and every task after one, evaluated the whole
/// system prompt again (50 s each for the 1.5B model on 2 cores).
#[test]
fn the_saved_system_prompt_is_loaded_again_after_another_prompt_took_the_cache() {
    use abhed::model::llama::{LlamaEngine, LlamaParams};
    use abhed::model::{Cancel, Message, Model, Role, TurnRequest, TurnSchema};
    let _one = serial();
    let env = setup();
    let mut params = LlamaParams::new(model().into());
    params.settings.n_ctx = Some(4096);
    params.prompt_cache_dir = Some(env.home.join("prompt-cache"));
    let engine = LlamaEngine::load(params, String::new(), |_| {}).unwrap();
    let registry = Registry::native();
    let mut session = engine.session(&TurnSchema::new(&registry)).unwrap();
    let system = abhed::agent::prompt::system_prompt(&registry, &env.ws);
    let shared = abhed::agent::prompt::stable_len(&system);
    let task = |text: &str| {
        vec![Message::new(Role::System, system.clone()).with_shared_prefix(shared), Message::new(Role::User, text)]
    };
    let cancel = Cancel::new();
    let mut turn = |messages: &[Message]| {
        let req = TurnRequest::new(messages, 8, &cancel);
        session.complete(&req).unwrap().usage
    };
    let first = turn(&task("Read notes.txt."));
    assert!(first.evaluated_tokens > first.prompt_tokens / 2, "a fresh cache evaluates the prompt: {first:?}");
    // A summary's prompt, as compaction sends it: another system message takes the cache.
    turn(&[
        Message::new(Role::System, "Summarize the conversation below."),
        Message::new(Role::User, "read notes.txt"),
    ]);
    let after = turn(&task("Read main.rs."));
    assert!(
        after.cached_tokens > after.prompt_tokens / 2,
        "the saved system prompt was not loaded again: {after:?} (first turn: {first:?})"
    );
}

#[test]
fn a_context_too_small_for_the_prompt_is_refused_with_the_numbers() {
    let _one = serial();
    let env = setup();
    let m = model();
    let out = env.cmd(&["run", "hello", "--model", &m, "--ctx", "512"]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("stopped: context_full: the context window is too small for this task"), "{err}");
    assert!(err.contains("> n_ctx 512. Raise the context (--ctx, model.n_ctx)"), "{err}");
}

#[test]
fn an_unknown_template_name_says_what_to_use() {
    let _one = serial();
    let env = setup();
    let m = model();
    let out = env.cmd(&["run", "hello", "--model", &m, "--chat-template", "no-such-template"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("llama.cpp does not know the chat template of"), "{}", stderr(&out));
    assert!(stderr(&out).contains("--chat-template chatml"), "{}", stderr(&out));
}

#[test]
fn a_truncated_gguf_is_refused_by_name() {
    let _one = serial();
    let env = setup();
    let bytes = std::fs::read(model()).unwrap();
    let cut = env.file("cut.gguf", "");
    std::fs::write(&cut, &bytes[..bytes.len() / 3]).unwrap();
    let out = env.cmd(&["run", "hello", "--model", cut.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("llama.cpp could not load"), "{}", stderr(&out));
    assert!(stderr(&out).contains("cut.gguf"), "{}", stderr(&out));
}

/// Regression: the `path` pattern was `^/.*$`, whose `.` let a quote through, so a model could
/// write `"/x/Cargo.toml\"},\"type\":..."` as one path and the turn no longer parsed (seen on
/// the default model with a workspace under /tmp/ci-clone).
#[test]
fn the_turn_grammar_admits_valid_turns_only() {
    use abhed::model::TurnSchema;
    use abhed::model::llama::{LlamaEngine, LlamaParams};
    let _one = serial();
    let engine = LlamaEngine::load(LlamaParams::new(model().into()), String::new(), |_| {}).unwrap();
    let session = engine.session(&TurnSchema::new(&Registry::native())).unwrap();
    let ok = [
        r#"{"tool": "read", "arguments": {"path": "/tmp/ci-clone/Cargo.toml"}}"#,
        r#"{"tool": "grep", "arguments": {"pattern": "fn main", "path": "/w/a \"quoted\" dir"}}"#,
        r#"{"answer": "abhed", "status": "done"}"#,
    ];
    for reply in ok {
        assert!(session.grammar_accepts(reply).unwrap(), "rejected: {reply}");
    }
    let bad = [
        // What the default model wrote under the old pattern.
        r#"{"tool":"read", "arguments":{"path":"/tmp/ci-clone/Cargo.toml"},"type":"object","description":"Cargo.toml"}}"#,
        r#"{"tool": "read", "arguments": {"path": "/a"}, "extra": 1}"#,
        r#"{"tool": "read", "arguments": {"path": "relative/a"}}"#,
        r#"{"tool": "read", "arguments": {"path": "/a", "mode": "fast"}}"#,
        r#"{"tool": "bash", "arguments": {}}"#,
        r#"{"answer": "x", "status": "maybe"}"#,
        "I will read the file.",
    ];
    for reply in bad {
        assert!(!session.grammar_accepts(reply).unwrap(), "admitted: {reply}");
    }
    // A turn held to the tool the task names admits a call of that tool only.
    let todo = r#"{"tool": "todo", "arguments": {"todos": [{"content": "run the tests", "status": "done"}]}}"#;
    assert!(session.tool_grammar_accepts("todo", todo).unwrap(), "rejected: {todo}");
    for reply in [ok[0], ok[2], r#"{"tool": "write", "arguments": {"path": "/w/todo", "content": "x"}}"#] {
        assert!(!session.tool_grammar_accepts("todo", reply).unwrap(), "admitted as a todo call: {reply}");
    }
}

#[test]
fn a_long_session_is_compacted_and_goes_on() {
    let _one = serial();
    let env = setup();
    // The prompt's size on this model, from a one-turn run's preflight.
    let (_, probe) = run(&env, "Say hello.", &["--max-turns", "1", "--max-reply-tokens", "6"]);
    let p = of_type(&probe, "run_start")[0]["preflight"]["prompt_tokens"].as_u64().unwrap();
    // A window 1200 tokens over the prompt: the session outgrows 80% of it within a few turns.
    // Replies of 6 tokens are always cut off, so the session lasts its turns whatever the model
    // would say, and every turn adds the cut reply and the feedback on it.
    let ctx = (p + 1200).to_string();
    let config = env.home.join("small.toml");
    std::fs::create_dir_all(&env.home).unwrap();
    std::fs::write(&config, "[run]\nworking_budget = 0\nrepeat_limit = 0\n").unwrap();
    let m = model();
    let out = env
        .command(&[
            "run",
            "Say hello.",
            "--json",
            "--model",
            &m,
            "--ctx",
            &ctx,
            "--max-turns",
            "12",
            "--max-reply-tokens",
            "6",
        ])
        .env("ABHED_CONFIG", &config)
        .output()
        .unwrap();
    let events = json_lines(&out.stdout);
    let at = events
        .iter()
        .position(|e| e["type"] == "compaction")
        .unwrap_or_else(|| panic!("no compaction: {}", stderr(&out)));
    let c = &events[at];
    assert!(c["removed_messages"].as_u64().unwrap() >= 2, "{c}");
    assert!(c["tokens_after"].as_u64() < c["tokens_before"].as_u64(), "{c}");
    assert!(["model", "mechanical"].contains(&c["summary_by"].as_str().unwrap()), "{c}");
    // The session goes on after it, to its turn budget, never running out of context.
    assert!(events[at..].iter().any(|e| e["type"] == "model_turn"), "no turn after the compaction");
    let end = of_type(&events, "run_end")[0];
    assert_eq!(end["reason"], "max_turns", "{end}");
    assert_eq!(out.status.code(), Some(4));
}

/// Subagents on the real model: three conversations decode together as sequences of one
/// context (a decode carried all three), each reply is a valid turn, identical conversations get
/// identical replies (nothing leaks between sequences), and a sequence's next turn evaluates only
/// what is new (its slot kept its cache).
#[test]
fn subagent_turns_decode_together_in_one_context() {
    use std::sync::Mutex;

    use abhed::model::llama::{LlamaEngine, LlamaParams};
    use abhed::model::{Cancel, Job, Message, Model, Reply, Role, TurnRequest, TurnSchema};
    let _one = serial();
    let mut params = LlamaParams::new(model().into());
    params.settings.n_ctx = Some(2048);
    params.settings.parallel = 3;
    let engine = LlamaEngine::load(params, String::new(), |_| {}).unwrap();
    let registry = Registry::only(&["read", "glob", "grep"]);
    let schema = TurnSchema::new(&registry);
    let mut session = engine.session(&schema).unwrap();
    let system = abhed::agent::prompt::system_prompt(&registry, std::path::Path::new("/ws"));
    let convo = |task: &str| vec![Message::new(Role::System, system.clone()), Message::new(Role::User, task)];
    let tasks =
        [convo("Find the file /ws/main.rs."), convo("Find the file /ws/main.rs."), convo("Read /ws/notes.txt.")];
    // Two turns per subagent: the second adds a tool result to the first.
    let replies: Vec<Mutex<Vec<Reply>>> = (0..3).map(|_| Mutex::new(Vec::new())).collect();
    let jobs: Vec<Job<'_>> = tasks
        .iter()
        .zip(&replies)
        .map(|(messages, out)| {
            let job: Job<'_> = Box::new(move |m: &mut dyn Model| {
                let cancel = Cancel::new();
                let mut messages = messages.clone();
                for _ in 0..2 {
                    let req = TurnRequest::new(&messages, 96, &cancel);
                    let r = m.complete(&req).unwrap();
                    messages.push(Message::new(Role::Assistant, r.text.clone()));
                    messages.push(Message::new(Role::User, "Tool result: no files match."));
                    out.lock().unwrap().push(r);
                }
            });
            job
        })
        .collect();
    session.run_parallel(jobs).unwrap();
    assert_eq!(session.subagent_batch_width(), 3);
    let replies: Vec<Vec<Reply>> = replies.into_iter().map(|m| m.into_inner().unwrap()).collect();
    for turns in &replies {
        for r in turns {
            assert!(r.cut_off || schema.parse(&r.text).is_ok(), "not a turn: {}", r.text);
        }
        let second = &turns[1].usage;
        assert!(second.cached_tokens >= turns[0].usage.prompt_tokens - 1, "{second:?} after {:?}", turns[0].usage);
    }
    assert_eq!(replies[0][0].text, replies[1][0].text);
}

/// The task tool end to end on the real model: three explore subagents from one call run their
/// own loops on their own threads, at once on one context, each in a child session linked to
/// the parent's action, and the parent gets one summary block per subagent.
#[test]
fn a_task_call_runs_three_real_subagents_at_once() {
    use std::sync::Arc;

    use abhed::agent::events::Budgets;
    use abhed::agent::subagent::{Allowance, Subagents};
    use abhed::approval::gate::{Approvals, NoOperator};
    use abhed::config::Config;
    use abhed::model::llama::{LlamaEngine, LlamaParams};
    use abhed::model::{Cancel, ToolCall, TurnSchema};
    use abhed::sandbox::{SessionSandbox, Workspace};
    use abhed::store::Store;
    use abhed::tools::ToolContext;
    let _one = serial();
    let env = setup();
    let mut params = LlamaParams::new(model().into());
    params.settings.n_ctx = Some(4096);
    params.settings.parallel = 3;
    let engine = LlamaEngine::load(params, String::new(), |_| {}).unwrap();
    let registry = Registry::native();
    let mut llama = engine.session(&TurnSchema::new(&registry)).unwrap();
    std::fs::create_dir_all(&env.home).unwrap();
    let store = Store::open(&env.home.join("abhed.db")).unwrap();
    let session = store.create_session(&env.ws).unwrap();
    let config = Config::default();
    let workspace = Workspace::new(&env.ws, &[]).unwrap();
    let sandbox = SessionSandbox::new(&config.sandbox, &workspace);
    let (approvals, _) = Approvals::from_config(&config, Box::new(NoOperator)).unwrap();
    let (events, rx) = std::sync::mpsc::channel();
    let budgets = Budgets { max_turns: 10, max_tokens: 200_000, max_wall_ms: None, max_reply_tokens: 96 };
    let left =
        Allowance { budgets, tokens_left: 200_000, deadline: None, cancel: Cancel::new(), running: Arc::default() };
    let delegate = Subagents::new(&mut llama, events, left);
    let ctx = ToolContext {
        workspace: &workspace,
        config: &config,
        session: &session,
        sandbox: &sandbox,
        approvals: &approvals,
        delegate: Some(&delegate),
        output_budget: None,
    };
    let one = |file: &str| serde_json::json!({"prompt": format!("Read the file {} and report its first line.", env.path(file)), "description": format!("Read {file}"), "agent_type": "explore", "max_turns": 2});
    let mut args = one("notes.txt");
    args["parallel"] = serde_json::json!([one("main.rs"), one("notes.txt")]);
    let call = ToolCall { name: "task".into(), arguments: args.to_string() };
    let outcome = abhed::agent::execute_with(&registry, &ctx, &call, |seq, _, _| delegate.set_action(seq)).unwrap();
    let spent = delegate.spent();
    drop(delegate);
    assert!(outcome.ok(), "{}", outcome.text());
    let text = outcome.text();
    for i in 1..=3 {
        assert!(text.contains(&format!("Subagent {i} of 3 (explore: ")), "{text}");
    }
    assert!(llama.subagent_batch_width() >= 2, "the subagents never decoded together");
    assert!(spent > 0);
    // Each subagent: a child session whose run points at the parent's action, chain intact.
    let kids: Vec<_> =
        store.sessions().unwrap().into_iter().filter(|s| s.parent.as_deref() == Some(session.id())).collect();
    assert_eq!(kids.len(), 3);
    for k in &kids {
        let s = store.open_session(&k.id).unwrap().unwrap();
        let ev = s.events().unwrap();
        assert_eq!(ev[0].payload["parent"]["action_seq"], outcome.action_seq);
        assert_eq!(ev.last().unwrap().kind, "run_end");
        assert_eq!(s.verify_chain().unwrap(), None);
    }
    // Their events reached the stream, wrapped.
    let wrapped = rx.try_iter().filter(|e| matches!(e, abhed::agent::Event::Subagent { .. })).count();
    assert!(wrapped >= 9, "{wrapped} subagent events");
}
