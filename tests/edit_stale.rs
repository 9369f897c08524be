//! edit against a file that changed outside the session since it was read: refused as
//! stale_read, naming both versions, with the file untouched. A conformance case cannot make
//! such an outside change between two calls, so this test drives the library directly.

// Test helpers: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use abhed::agent::{CallOutcome, execute};
use abhed::config::Config;
use abhed::model::ToolCall;
use abhed::sandbox::Workspace;
use abhed::store::{Session, Store};
use abhed::tools::{ErrorCode, Registry, ToolContext};

struct Fixture {
    _tmp: tempfile::TempDir,
    ws: PathBuf,
    store: Store,
}

impl Fixture {
    fn new() -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        let ws = ws.canonicalize().unwrap();
        let store = Store::open(&tmp.path().join("abhed.db")).unwrap();
        Fixture { _tmp: tmp, ws, store }
    }

    fn file(&self, name: &str) -> PathBuf {
        self.ws.join(name)
    }
}

fn call(ws: &Path, session: &Session<'_>, tool: &str, args: serde_json::Value) -> CallOutcome {
    let workspace = Workspace::new(ws, &[]).unwrap();
    let config = Config::default();
    let ctx = ToolContext { workspace: &workspace, config: &config, session };
    execute(&Registry::native(), &ctx, &ToolCall { name: tool.to_string(), arguments: args.to_string() }).unwrap()
}

fn sha12(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    let d = sha2::Sha256::digest(bytes);
    d.iter().map(|b| format!("{b:02x}")).collect::<String>()[..12].to_string()
}

#[test]
fn outside_change_after_read_is_stale() {
    let f = Fixture::new();
    let session = f.store.create_session(&f.ws).unwrap();
    let path = f.file("app.py");
    std::fs::write(&path, "x = 1\ny = 2\n").unwrap();
    let p = path.display().to_string();

    assert!(call(&f.ws, &session, "read", serde_json::json!({"path": p})).ok());
    // Someone else changes the file after the read.
    std::fs::write(&path, "x = 1\ny = 3\n").unwrap();

    let out =
        call(&f.ws, &session, "edit", serde_json::json!({"path": p, "old_string": "x = 1", "new_string": "x = 10"}));
    let err = out.result.as_ref().unwrap_err();
    assert_eq!(err.code, ErrorCode::StaleRead);
    assert!(!err.mutated);
    let text = out.text();
    assert!(text.contains(&sha12(b"x = 1\ny = 2\n")), "names the version read: {text}");
    assert!(text.contains(&sha12(b"x = 1\ny = 3\n")), "names the version now: {text}");
    assert!(text.contains("Read it again"), "{text}");
    assert!(text.ends_with("Nothing was changed."), "{text}");
    assert_eq!(err.file.as_ref().map(|f| f.sha256[..12].to_string()), Some(sha12(b"x = 1\ny = 3\n")));
    assert_eq!(std::fs::read(&path).unwrap(), b"x = 1\ny = 3\n", "the file is untouched");

    // Reading again makes the edit possible.
    assert!(call(&f.ws, &session, "read", serde_json::json!({"path": p})).ok());
    let out =
        call(&f.ws, &session, "edit", serde_json::json!({"path": p, "old_string": "x = 1", "new_string": "x = 10"}));
    assert!(out.ok(), "{}", out.text());
    assert_eq!(std::fs::read(&path).unwrap(), b"x = 10\ny = 3\n");
}

#[test]
fn outside_change_after_own_edit_is_stale() {
    let f = Fixture::new();
    let session = f.store.create_session(&f.ws).unwrap();
    let path = f.file("notes.txt");
    std::fs::write(&path, "one\ntwo\n").unwrap();
    let p = path.display().to_string();

    assert!(call(&f.ws, &session, "read", serde_json::json!({"path": p})).ok());
    let out = call(&f.ws, &session, "edit", serde_json::json!({"path": p, "old_string": "one", "new_string": "ONE"}));
    assert!(out.ok() && out.mutated(), "{}", out.text());
    std::fs::write(&path, "ONE\ntwo\nthree\n").unwrap();

    let out = call(&f.ws, &session, "edit", serde_json::json!({"path": p, "old_string": "two", "new_string": "TWO"}));
    assert_eq!(out.result.as_ref().unwrap_err().code, ErrorCode::StaleRead, "{}", out.text());
    assert_eq!(std::fs::read(&path).unwrap(), b"ONE\ntwo\nthree\n");
}

#[test]
fn reads_are_per_session() {
    let f = Fixture::new();
    let path = f.file("a.txt");
    std::fs::write(&path, "alpha\n").unwrap();
    let p = path.display().to_string();
    let first = f.store.create_session(&f.ws).unwrap();
    assert!(call(&f.ws, &first, "read", serde_json::json!({"path": p})).ok());
    let second = f.store.create_session(&f.ws).unwrap();
    let out = call(&f.ws, &second, "edit", serde_json::json!({"path": p, "old_string": "alpha", "new_string": "beta"}));
    assert_eq!(out.result.as_ref().unwrap_err().code, ErrorCode::NotRead, "{}", out.text());
}
