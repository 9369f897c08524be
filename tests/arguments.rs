//! A call's arguments on their way in (issue 15, item 12 and the minor items on arguments): the
//! size cap, applied before anything is stored whole; numbers out of range told in the schema's
//! terms, never serde's; "did you mean" for tool and field names; duplicate keys refused; and
//! `abhed tool --format json` answering with an envelope when no call could be made.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::Harness;
use common::cli::{Env, json_lines};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use abhed::store::EventKind;
use abhed::tools::args::{KEPT_PREFIX_BYTES, MAX_ARGUMENTS_BYTES};
use abhed::tools::{MAX_ERROR_CHARS, Registry};

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn store_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("abhed.db"))
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum()
}

#[test]
fn arguments_over_the_cap_are_refused_before_anything_is_stored_whole() {
    let h = Harness::new();
    let s = h.session();
    let dir = h.store.path().parent().unwrap().to_path_buf();
    let before = store_bytes(&dir);
    let content = "x".repeat(MAX_ARGUMENTS_BYTES + 1);
    let out = h.call(&s, "write", json!({"path": h.path("big.txt"), "content": content}));
    let text = out.text();
    assert!(!out.ok());
    assert!(text.starts_with("Error [invalid_arguments]: the arguments of this write call are 16.0 MiB"), "{text}");
    assert!(text.contains("over the 16.0 MiB (16777216 bytes) of JSON a call may carry"), "{text}");
    assert!(text.ends_with("Nothing was changed."), "{text}");
    assert!(!h.ws.join("big.txt").exists());

    // The action keeps a bounded prefix, the size, and the size and sha256 of the rest.
    let raw = json!({"path": h.path("big.txt"), "content": content}).to_string();
    let events = s.events().unwrap();
    let action = events.iter().find(|e| e.kind == EventKind::Action.as_str()).unwrap();
    let kept = &action.payload["arguments_omitted"];
    assert!(action.payload.get("arguments").is_none() && action.payload.get("arguments_raw").is_none());
    assert_eq!(kept["prefix"].as_str().unwrap(), &raw[..KEPT_PREFIX_BYTES]);
    assert_eq!(kept["bytes"], raw.len());
    assert_eq!(kept["rest_bytes"], raw.len() - KEPT_PREFIX_BYTES);
    assert_eq!(kept["rest_sha256"], hex(&Sha256::digest(&raw.as_bytes()[KEPT_PREFIX_BYTES..])));
    // The store grew by kilobytes, not by the 16 MiB sent.
    let grown = store_bytes(&dir) - before;
    assert!(grown < 256 * 1024, "the store grew by {grown} bytes");
    assert_eq!(s.verify_chain().unwrap(), None);

    // A large legitimate write (8 MiB of lines, more as JSON) is well inside the cap.
    let content = "let x = \"y\";\n".repeat(8 * 1024 * 1024 / 13);
    let out = h.call(&s, "write", json!({"path": h.path("large.rs"), "content": content}));
    assert!(out.ok(), "{}", out.text());
    assert_eq!(std::fs::read_to_string(h.ws.join("large.rs")).unwrap(), content);
}

#[test]
fn error_messages_and_stored_outputs_are_bounded() {
    let h = Harness::new();
    let s = h.session();
    // An error that echoes a 300,000-character path.
    let long = format!("{}/{}", h.ws.display(), "a".repeat(300_000));
    let out = h.call(&s, "read", json!({"path": long}));
    assert!(!out.ok());
    let text = out.text();
    assert!(text.chars().count() <= MAX_ERROR_CHARS + 100, "{} characters", text.chars().count());
    assert!(text.ends_with("Nothing was changed."), "{}", &text[text.len() - 200..]);
    // The log holds what the model saw.
    let events = s.events().unwrap();
    let obs = events.iter().rfind(|e| e.kind == EventKind::Observation.as_str()).unwrap();
    assert_eq!(obs.payload["output"].as_str().unwrap(), text);
    assert!(obs.payload.to_string().len() < 4 * MAX_ERROR_CHARS, "{}", obs.payload.to_string().len());
}

/// serde's own words: what the model must never read.
fn serde_words(text: &str) -> bool {
    ["expected u", "expected i", "invalid value:", "invalid type:", "at line 1 column"].iter().any(|w| text.contains(w))
}

#[test]
fn numbers_out_of_range_are_told_in_the_schema_terms() {
    let h = Harness::new();
    let s = h.session();
    let cases = [
        (
            "bash",
            json!({"command": "ls", "description": "list", "timeout_ms": -5}),
            "`timeout_ms` must be at least 1, got -5",
        ),
        (
            "task",
            json!({"prompt": "Read /x and report.", "description": "d", "max_turns": -5}),
            "`max_turns` must be at least 1, got -5",
        ),
        (
            "task",
            json!({"prompt": "Read /x and report.", "description": "d", "max_turns": 5_000_000_000u64}),
            "`max_turns` must be a whole number from 1 to 4294967295, got 5000000000",
        ),
        ("read", json!({"path": h.path("a"), "offset": 0}), "`offset` must be at least 1, got 0"),
    ];
    for (tool, args, want) in cases {
        let text = h.call(&s, tool, args.clone()).text();
        assert!(text.contains(want), "{tool} {args}: {text}");
        assert!(text.starts_with("Error [invalid_arguments]: invalid arguments for "), "{text}");
        assert!(!serde_words(&text), "{tool} {args}: {text}");
    }

    // Every integer field of every tool, with values no field takes: never serde's words.
    let registry = Registry::native();
    for tool in registry.iter() {
        let schema = tool.input_schema();
        let props = schema["properties"].as_object().unwrap();
        let required: Vec<&str> = schema["required"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
        for (field, prop) in props.iter().filter(|(_, p)| p["type"] == "integer") {
            for bad in [json!(-5), json!(5_000_000_000_000_000_000u64), json!(1e30), json!(2.5), json!("7")] {
                let mut args = serde_json::Map::new();
                for r in &required {
                    let v = if *r == "path" { h.path("a") } else { "Read /x/a.txt and report.".to_string() };
                    args.insert(r.to_string(), json!(v));
                }
                args.insert(field.clone(), bad.clone());
                let out = h.call(&s, tool.name(), Value::Object(args));
                let text = out.text();
                assert!(!serde_words(&text), "{} {field}={bad} ({prop}): {text}", tool.name());
            }
        }
    }
}

#[test]
fn unknown_names_get_a_did_you_mean() {
    let h = Harness::new();
    let s = h.session();
    std::fs::write(h.ws.join("a.txt"), "alpha\n").unwrap();
    let cases = [
        ("reed", json!({"path": h.path("a.txt")}), "there is no tool named `reed`. Did you mean `read`?"),
        ("Read", json!({"path": h.path("a.txt")}), "Did you mean `read`?"),
        ("shell", json!({"command": "ls"}), "Did you mean `bash`?"),
        ("str_replace", json!({}), "Did you mean `edit`?"),
        ("read", json!({"file_path": h.path("a.txt")}), "(did you mean `path` instead of `file_path`?)"),
        ("bash", json!({"cmd": "ls", "description": "d"}), "(did you mean `command` instead of `cmd`?)"),
        (
            "edit",
            json!({"path": h.path("a.txt"), "old": "alpha", "new": "beta"}),
            "(did you mean `new_string` instead of `new`, `old_string` instead of `old`?)",
        ),
        ("grep", json!({"regex": "a"}), "(did you mean `pattern` instead of `regex`?)"),
    ];
    for (tool, args, want) in cases {
        let text = h.call(&s, tool, args).text();
        assert!(text.contains(want), "{tool}: {text}");
    }
    // Nothing that is not close is suggested.
    let text = h.call(&s, "frobnicate", json!({})).text();
    assert!(!text.contains("Did you mean"), "{text}");
}

#[test]
fn a_key_given_twice_is_refused_naming_it() {
    let env = Env::new();
    std::fs::write(env.ws.join("a.txt"), "alpha\n").unwrap();
    let (a, c) = (env.path("a.txt"), env.path("c.txt"));
    let (code, v) = env.json("read", &format!(r#"{{"path": "{a}", "path": "{c}"}}"#), &[]);
    assert_eq!(code, 1);
    assert_eq!(v["error"]["code"], "invalid_arguments");
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(msg.contains("the key `path` appears more than once"), "{msg}");
    assert!(msg.contains("The fields of read are: path (string, required)"), "{msg}");

    let raw = format!(r#"{{"path": "{c}", "content": "one", "content": "two"}}"#);
    let (code, v) = env.json("write", &raw, &[]);
    assert_eq!((code, v["mutated"].clone()), (1, json!(false)));
    assert!(!env.ws.join("c.txt").exists());
    // The action keeps what was sent, byte for byte.
    let id = v["session"].as_str().unwrap();
    let action =
        json_lines(&env.cmd(&["sessions", "export", id]).stdout).into_iter().find(|e| e["kind"] == "action").unwrap();
    assert_eq!(action["payload"]["arguments_raw"], raw.as_str());

    // Nested, inside `parallel`.
    let raw =
        r#"{"prompt": "p", "description": "d", "parallel": [{"prompt": "a", "description": "b", "description": "c"}]}"#;
    let (_, v) = env.json("task", raw, &[]);
    assert!(
        v["error"]["message"].as_str().unwrap().contains("`parallel[0].description` appears more than once"),
        "{v}"
    );
}

#[test]
fn format_json_answers_with_an_envelope_when_no_call_was_made() {
    let env = Env::new();
    let (code, v) = env.json("reed", "{}", &[]);
    assert_eq!(code, 2);
    assert_eq!(
        (v["ok"].clone(), v["tool"].clone(), v["format_version"].clone()),
        (json!(false), json!("reed"), json!(1))
    );
    assert_eq!(v["error"]["code"], "unknown_tool");
    assert!(
        v["output"]
            .as_str()
            .unwrap()
            .starts_with("Error [unknown_tool]: there is no tool named `reed`. Did you mean `read`?"),
        "{v}"
    );
    assert_eq!(v["session"], Value::Null);

    let (code, v) = env.json("read", "{}", &["--session", "20990101-000000-nosuchid"]);
    assert_eq!(code, 2);
    assert_eq!(v["error"]["code"], "unknown_session");
    assert_eq!(v["session"], "20990101-000000-nosuchid");
    assert!(v["error"]["message"].as_str().unwrap().contains("no session `20990101-000000-nosuchid`"), "{v}");

    let (code, v) = env.json("read", "{}", &["--workspace", "/no/such/dir"]);
    assert_eq!(code, 2);
    assert_eq!(v["error"]["code"], "usage");
    for key in ["format_version", "tool", "ok", "output", "error", "mutated", "truncated", "session", "path", "sha256"]
    {
        assert!(v.get(key).is_some(), "missing {key} in {v}");
    }

    // Without --format json: the message on stderr, with the suggestion.
    let out = env.cmd(&["tool", "reed", "{}"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("Did you mean `read`?"));
}
