//! edit against a file that changed outside the session since it was read: refused as
//! stale_read, naming both versions in the text and the current one in the envelope, with the
//! file untouched; and read-tracking is per session. (The conformance cases edit/042 and
//! write/016 snapshot the text; these check the structured result and several sessions.)

// Test helpers: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use abhed::tools::ErrorCode;
use common::Harness;

fn sha12(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    let d = sha2::Sha256::digest(bytes);
    d.iter().map(|b| format!("{b:02x}")).collect::<String>()[..12].to_string()
}

#[test]
fn outside_change_after_read_is_stale() {
    let h = Harness::new();
    let session = h.session();
    let path = h.ws.join("app.py");
    std::fs::write(&path, "x = 1\ny = 2\n").unwrap();
    let p = path.display().to_string();

    assert!(h.call(&session, "read", serde_json::json!({"path": p})).ok());
    // Someone else changes the file after the read.
    std::fs::write(&path, "x = 1\ny = 3\n").unwrap();

    let out = h.call(&session, "edit", serde_json::json!({"path": p, "old_string": "x = 1", "new_string": "x = 10"}));
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
    assert!(h.call(&session, "read", serde_json::json!({"path": p})).ok());
    let out = h.call(&session, "edit", serde_json::json!({"path": p, "old_string": "x = 1", "new_string": "x = 10"}));
    assert!(out.ok(), "{}", out.text());
    assert_eq!(std::fs::read(&path).unwrap(), b"x = 10\ny = 3\n");
}

#[test]
fn outside_change_after_own_edit_is_stale() {
    let h = Harness::new();
    let session = h.session();
    let path = h.ws.join("notes.txt");
    std::fs::write(&path, "one\ntwo\n").unwrap();
    let p = path.display().to_string();

    assert!(h.call(&session, "read", serde_json::json!({"path": p})).ok());
    let out = h.call(&session, "edit", serde_json::json!({"path": p, "old_string": "one", "new_string": "ONE"}));
    assert!(out.ok() && out.mutated(), "{}", out.text());
    std::fs::write(&path, "ONE\ntwo\nthree\n").unwrap();

    let out = h.call(&session, "edit", serde_json::json!({"path": p, "old_string": "two", "new_string": "TWO"}));
    assert_eq!(out.result.as_ref().unwrap_err().code, ErrorCode::StaleRead, "{}", out.text());
    assert_eq!(std::fs::read(&path).unwrap(), b"ONE\ntwo\nthree\n");
}

#[test]
fn reads_are_per_session() {
    let h = Harness::new();
    let path = h.ws.join("a.txt");
    std::fs::write(&path, "alpha\n").unwrap();
    let p = path.display().to_string();
    let first = h.session();
    assert!(h.call(&first, "read", serde_json::json!({"path": p})).ok());
    let second = h.session();
    let out = h.call(&second, "edit", serde_json::json!({"path": p, "old_string": "alpha", "new_string": "beta"}));
    assert_eq!(out.result.as_ref().unwrap_err().code, ErrorCode::NotRead, "{}", out.text());
}
