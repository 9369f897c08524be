//! The store's key and the chain it keys (issue 15, item 9), end to end through the binary: the
//! forged-chain attacks (an edited event re-hashed with the documented formula, two events
//! removed and the rest re-chained, the tail cut), the key file's mode, a store copied without its
//! key, a store from before keys, and a corrupt store named in its error.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Output;

use common::cli::{Env, json_lines};
use hmac::{Hmac, Mac as _};
use rusqlite::{Connection, params};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

fn call(tool: &str, args: Value) -> String {
    json!({"tool": tool, "arguments": args}).to_string()
}

const DONE: &str = r#"{"answer": "done", "status": "done"}"#;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A run of three calls (13 events: run_start, task, then a turn, an action and an observation per
/// call, the final turn and run_end). Returns the session and run_end's `head`.
fn run_session(env: &Env) -> (String, String) {
    std::fs::write(env.ws.join("notes.txt"), "alpha\nbeta\n").unwrap();
    let read = call("read", json!({"path": env.path("notes.txt")}));
    let lines = [read.clone(), call("glob", json!({"pattern": "*"})), read, DONE.to_string()];
    let script = env.file("turns.script", &(lines.join("\n") + "\n"));
    let out = env.cmd(&["run", "read the notes", "--script", script.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let events = json_lines(&out.stdout);
    let end = events.last().unwrap();
    assert_eq!(end["type"], "run_end");
    (events[0]["session"].as_str().unwrap().to_string(), end["head"].as_str().unwrap().to_string())
}

/// `abhed sessions verify ID [extra]` against the store in `home`.
fn verify(env: &Env, home: &Path, id: &str, extra: &[&str]) -> (i32, String) {
    let mut argv = vec!["sessions", "verify", id];
    argv.extend_from_slice(extra);
    let out: Output = env.command(&argv).env("ABHED_HOME", home).output().unwrap();
    (out.status.code().unwrap(), text(&out.stdout) + &text(&out.stderr))
}

/// A copy of the data directory (store and, with `with_key`, its key) in a new directory.
fn copy_home(env: &Env, name: &str, with_key: bool) -> PathBuf {
    let to = env.ws.parent().unwrap().join(name);
    std::fs::create_dir_all(&to).unwrap();
    for entry in std::fs::read_dir(&env.home).unwrap() {
        let p = entry.unwrap().path();
        let file = p.file_name().unwrap().to_str().unwrap().to_string();
        if file.starts_with("abhed.db") || (with_key && file == "abhed.key") {
            std::fs::copy(&p, to.join(&file)).unwrap();
        }
    }
    to
}

/// `F(x)` of docs/EVENTS.md: the length as 8 bytes big-endian, then the bytes.
fn hmac_hex(key: &[u8], domain: &str, fields: &[&str]) -> String {
    let mut m = <Hmac<Sha256> as hmac::Mac>::new_from_slice(key).unwrap();
    for part in std::iter::once(domain).chain(fields.iter().copied()) {
        m.update(&(part.len() as u64).to_be_bytes());
        m.update(part.as_bytes());
    }
    m.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect()
}

/// The unkeyed formula (the one the issue's attack used, still documented for old events).
fn unkeyed(prev: &str, session: &str, seq: i64, kind: &str, ts: &str, payload: &str) -> String {
    let mut h = Sha256::new();
    for part in [prev, session, &seq.to_string(), kind, ts, payload] {
        h.update(part.as_bytes());
        h.update(b"\n");
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// How a forger recomputes a hash: (prev, session, seq, kind, ts, payload) -> hash.
type Hasher<'a> = &'a dyn Fn(&str, &str, i64, &str, &str, &str) -> String;

/// Recompute `prev_hash` and `hash` of every event from `from` on, as a forger would, and the
/// session's head seal with `head_key` (a forger without the key has none to use).
fn rechain(db: &Path, id: &str, from: i64, hash: Hasher<'_>, head_key: Option<&[u8]>) {
    let c = Connection::open(db).unwrap();
    let rows: Vec<(i64, String, String, String, String)> = c
        .prepare("SELECT seq, kind, ts, payload, hash FROM events WHERE session_id = ?1 ORDER BY seq")
        .unwrap()
        .query_map([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut prev = "0".repeat(64);
    let mut last = (0, prev.clone());
    for (seq, kind, ts, payload, old) in rows {
        let h = if seq >= from { hash(&prev, id, seq, &kind, &ts, &payload) } else { old };
        c.execute(
            "UPDATE events SET prev_hash = ?1, hash = ?2 WHERE session_id = ?3 AND seq = ?4",
            params![prev, h, id, seq],
        )
        .unwrap();
        prev = h.clone();
        last = (seq, h);
    }
    if let Some(key) = head_key {
        let mac = hmac_hex(key, "head", &[id, &last.0.to_string(), &last.1]);
        c.execute("UPDATE sessions SET head_seq = ?1, head_mac = ?2 WHERE id = ?3", params![last.0, mac, id]).unwrap();
    }
}

fn key_bytes(home: &Path) -> Vec<u8> {
    let hex = std::fs::read_to_string(home.join("abhed.key")).unwrap();
    let hex = hex.trim_end();
    (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect()
}

fn edit_event(db: &Path, id: &str, seq: i64) {
    let c = Connection::open(db).unwrap();
    let n = c
        .execute(
            "UPDATE events SET payload = replace(payload, 'alpha', 'gamma') WHERE session_id = ?1 AND seq = ?2",
            params![id, seq],
        )
        .unwrap();
    assert_eq!(n, 1);
}

#[test]
fn an_edited_event_rehashed_with_the_documented_formula_does_not_verify() {
    let env = Env::new();
    let (id, _) = run_session(&env);
    let (code, out) = verify(&env, &env.home, &id, &[]);
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with(&format!("session {id}: 13 events, hash chain intact\nhead: event 13 ")), "{out}");
    let keyed = |key: Vec<u8>| {
        move |p: &str, s: &str, q: i64, k: &str, t: &str, pl: &str| {
            hmac_hex(&key, "event", &[p, s, &q.to_string(), k, t, pl])
        }
    };

    // The issue's attack: event 5 (the first read's result) edited, every hash from it on
    // recomputed with the unkeyed formula.
    let home = copy_home(&env, "unkeyed", true);
    edit_event(&home.join("abhed.db"), &id, 5);
    rechain(&home.join("abhed.db"), &id, 5, &unkeyed, None);
    let (code, out) = verify(&env, &home, &id, &[]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("the hash chain breaks at event 5"), "{out}");
    assert!(!out.contains("intact"), "{out}");

    // The keyed formula under a key of the forger's own: the head seal re-made too.
    let home = copy_home(&env, "guessed", true);
    let guessed = vec![7u8; 32];
    edit_event(&home.join("abhed.db"), &id, 5);
    rechain(&home.join("abhed.db"), &id, 1, &keyed(guessed.clone()), Some(&guessed));
    let (code, out) = verify(&env, &home, &id, &[]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("the hash chain breaks at event 1"), "{out}");

    // Control: with the store's own key the same forgery passes. So the formula in
    // docs/EVENTS.md is exact, and the key is the one secret (a thief with it can forge).
    let home = copy_home(&env, "stolen", true);
    let key = key_bytes(&home);
    edit_event(&home.join("abhed.db"), &id, 5);
    rechain(&home.join("abhed.db"), &id, 5, &keyed(key.clone()), Some(&key));
    let (code, out) = verify(&env, &home, &id, &[]);
    assert_eq!(code, 0, "{out}");
}

#[test]
fn two_events_removed_and_the_rest_rechained_does_not_verify() {
    let env = Env::new();
    let (id, _) = run_session(&env);
    for (name, renumber) in [("gap", false), ("renumbered", true)] {
        let home = copy_home(&env, name, true);
        let db = home.join("abhed.db");
        let c = Connection::open(&db).unwrap();
        // The first read's action and observation go.
        c.execute("DELETE FROM events WHERE session_id = ?1 AND seq IN (4, 5)", [&id]).unwrap();
        if renumber {
            for seq in 6..=13 {
                c.execute("UPDATE events SET seq = ?1 WHERE session_id = ?2 AND seq = ?3", params![seq - 2, id, seq])
                    .unwrap();
            }
        }
        drop(c);
        rechain(&db, &id, 4, &unkeyed, None);
        let (code, out) = verify(&env, &home, &id, &[]);
        assert_eq!(code, 1, "{name}: {out}");
        assert!(out.contains("the hash chain breaks at event 4"), "{name}: {out}");
    }
}

#[test]
fn a_cut_tail_is_caught_and_a_restored_older_store_fails_the_recorded_head() {
    let env = Env::new();
    let (id, first_head) = run_session(&env);
    // run_end's head is the last event's hash, as verify and export show it.
    let (code, out) = verify(&env, &env.home, &id, &[]);
    assert_eq!(code, 0);
    assert!(out.contains(&format!("head: event 13 {first_head}\n")), "{out}");
    let exported = json_lines(&env.cmd(&["sessions", "export", &id]).stdout);
    assert_eq!(exported.last().unwrap()["hash"], first_head.as_str());

    // Deleting the last two rows: the sealed head says the log went further.
    let cut = copy_home(&env, "cut", true);
    Connection::open(cut.join("abhed.db"))
        .unwrap()
        .execute("DELETE FROM events WHERE session_id = ?1 AND seq > 11", [&id])
        .unwrap();
    let (code, out) = verify(&env, &cut, &id, &[]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("events after 11 were removed from the end"), "{out}");

    // A copy of the store as it was after the first run, then a second run.
    let older = copy_home(&env, "older", true);
    let script = env.file("more.script", &format!("{}\n{DONE}\n", call("glob", json!({"pattern": "*"}))));
    let out = env.cmd(&["sessions", "resume", &id, "again", "--script", script.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let second_head = json_lines(&out.stdout).last().unwrap()["head"].as_str().unwrap().to_string();
    assert_ne!(second_head, first_head);
    let (code, out) = verify(&env, &env.home, &id, &["--head", &first_head]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("recorded head: event 13; 7 events were added after it"), "{out}");
    let (code, out) = verify(&env, &env.home, &id, &["--head", &second_head.to_uppercase()]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("recorded head: event 20, the last: nothing was cut from the end"), "{out}");

    // The older store put back in place of the newer: consistent and sealed, so only the head
    // kept elsewhere shows the second run is gone.
    for entry in std::fs::read_dir(&older).unwrap() {
        let p = entry.unwrap().path();
        std::fs::copy(&p, env.home.join(p.file_name().unwrap())).unwrap();
    }
    let _ = std::fs::remove_file(env.home.join("abhed.db-wal"));
    let (code, out) = verify(&env, &env.home, &id, &[]);
    assert_eq!(code, 0, "{out}");
    let (code, out) = verify(&env, &env.home, &id, &["--head", &second_head]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains(&format!("recorded head {second_head} is not in this log")), "{out}");

    let (code, out) = verify(&env, &env.home, &id, &["--head", "abc"]);
    assert_eq!(code, 2, "{out}");
}

#[test]
fn the_key_file_is_private_and_one_others_can_read_is_refused() {
    let env = Env::new();
    let (id, _) = run_session(&env);
    let key = env.home.join("abhed.key");
    let mode = std::fs::metadata(&key).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    assert_eq!(std::fs::read_to_string(&key).unwrap().trim_end().len(), 64);
    // No temporary key file is left beside it.
    let names: Vec<String> =
        std::fs::read_dir(&env.home).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(names.iter().all(|n| !n.contains(".tmp")), "{names:?}");

    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (code, out) = verify(&env, &env.home, &id, &[]);
    assert_eq!(code, 3, "{out}");
    assert!(out.contains("cannot verify") && out.contains("mode 0644") && out.contains("chmod 600"), "{out}");
    // Nothing is added to a store whose key is not private.
    let read = env.cmd(&["tool", "read", &json!({"path": env.path("notes.txt")}).to_string()]);
    assert_eq!(read.status.code(), Some(3), "{}", text(&read.stderr));
    assert!(text(&read.stderr).contains("chmod 600"), "{}", text(&read.stderr));
}

#[test]
fn a_store_copied_without_its_key_cannot_verify() {
    let env = Env::new();
    let (id, _) = run_session(&env);
    let bare = copy_home(&env, "bare", false);
    let (code, out) = verify(&env, &bare, &id, &[]);
    assert_eq!(code, 3, "{out}");
    assert!(out.contains("cannot verify the hash chain") && out.contains("is missing"), "{out}");
    assert!(!out.contains("intact"), "{out}");
    // No key was made for it: a new key would make every old event look forged.
    assert!(!bare.join("abhed.key").exists());
    // Its log can still be read, with a warning.
    let export = env.command(&["sessions", "export", &id]).env("ABHED_HOME", &bare).output().unwrap();
    assert_eq!(export.status.code(), Some(0));
    assert_eq!(json_lines(&export.stdout).len(), 13);
    assert!(text(&export.stderr).contains("cannot be verified"), "{}", text(&export.stderr));

    // Beside another store's key: named as the wrong key.
    let other = Env::new();
    run_session(&other);
    std::fs::copy(other.home.join("abhed.key"), bare.join("abhed.key")).unwrap();
    let (code, out) = verify(&env, &bare, &id, &[]);
    assert_eq!(code, 3, "{out}");
    assert!(out.contains("is not the key of the session store"), "{out}");
}

#[test]
fn a_tampered_session_is_not_resumed_or_used() {
    let env = Env::new();
    let (id, _) = run_session(&env);
    edit_event(&env.home.join("abhed.db"), &id, 5);
    let script = env.file("more.script", &format!("{DONE}\n"));
    let out = env.cmd(&["sessions", "resume", &id, "again", "--script", script.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("does not verify at event 5"), "{}", text(&out.stderr));
    let out = env.cmd(&["tool", "glob", r#"{"pattern": "*"}"#, "--session", &id]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
}

/// The schema abhed wrote before stores had keys (version 4), for a store made by hand.
const SCHEMA_4: &str = "
CREATE TABLE sessions (id TEXT PRIMARY KEY, created_at TEXT NOT NULL, workspace TEXT NOT NULL, parent_id TEXT REFERENCES sessions(id));
CREATE TABLE events (session_id TEXT NOT NULL REFERENCES sessions(id), seq INTEGER NOT NULL, kind TEXT NOT NULL, ts TEXT NOT NULL, payload TEXT NOT NULL, prev_hash TEXT NOT NULL, hash TEXT NOT NULL, PRIMARY KEY (session_id, seq));
CREATE TABLE reads (session_id TEXT NOT NULL REFERENCES sessions(id), path TEXT NOT NULL, sha256 TEXT NOT NULL, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, total_lines INTEGER NOT NULL, lines_seen TEXT NOT NULL, read_at TEXT NOT NULL, PRIMARY KEY (session_id, path));
CREATE TABLE session_state (session_id TEXT NOT NULL REFERENCES sessions(id), key TEXT NOT NULL, value TEXT NOT NULL, updated_at TEXT NOT NULL, PRIMARY KEY (session_id, key));
CREATE TABLE conformance_reports (id INTEGER PRIMARY KEY AUTOINCREMENT, model_key TEXT NOT NULL, created_at TEXT NOT NULL, suite_digest TEXT NOT NULL, report TEXT NOT NULL);
CREATE TABLE file_hashes (path TEXT NOT NULL, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, sha256 TEXT NOT NULL, PRIMARY KEY (path));
PRAGMA user_version = 4;
";

#[test]
fn a_store_from_before_keys_verifies_as_unkeyed_and_is_pinned_at_the_upgrade() {
    let env = Env::new();
    std::fs::create_dir_all(&env.home).unwrap();
    let db = env.home.join("abhed.db");
    let id = "20261201-120000-0badc0de";
    {
        let c = Connection::open(&db).unwrap();
        c.execute_batch(SCHEMA_4).unwrap();
        c.execute(
            "INSERT INTO sessions VALUES (?1, '2026-12-01T12:00:00.000Z', ?2, NULL)",
            params![id, env.ws.display().to_string()],
        )
        .unwrap();
        let mut prev = "0".repeat(64);
        for (seq, kind, payload) in [
            (1, "task", r#"{"text":"old task alpha"}"#),
            (2, "model_turn", "{}"),
            (3, "run_end", r#"{"reason":"done"}"#),
        ] {
            let ts = format!("2026-12-01T12:00:0{seq}.000Z");
            let h = unkeyed(&prev, id, seq, kind, &ts, payload);
            c.execute(
                "INSERT INTO events VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![id, seq, kind, ts, payload, prev, h],
            )
            .unwrap();
            prev = h;
        }
        c.execute(
            "INSERT INTO session_state VALUES (?1, 'plan_mode', '{\"on\":true}', '2026-12-01T12:00:00.000Z')",
            [id],
        )
        .unwrap();
    }
    let (code, out) = verify(&env, &env.home, id, &[]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("3 events, hash chain intact"), "{out}");
    assert!(out.contains("note: events 1-3 were written before this store had a key"), "{out}");
    let mode = std::fs::metadata(env.home.join("abhed.key")).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let v: i64 = Connection::open(&db).unwrap().query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert_eq!(v, 6, "migrated through schema 5 (the key) to 6 (eval reports)");

    // New events are keyed; the old ones stay as they were.
    let out = env.cmd(&["tool", "glob", r#"{"pattern": "*"}"#, "--session", id]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let (code, out) = verify(&env, &env.home, id, &[]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("5 events, hash chain intact") && out.contains("events 1-3 were written before"), "{out}");

    // Rewriting an old event with the old formula after the upgrade is caught: the upgrade
    // pinned event 3's hash under the key.
    edit_event(&db, id, 1);
    rechain(&db, id, 1, &unkeyed, None);
    let (code, out) = verify(&env, &env.home, id, &[]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("breaks at event 3: it is not the event pinned"), "{out}");
}

#[test]
fn a_corrupt_store_is_named_with_what_to_do() {
    let env = Env::new();
    std::fs::create_dir_all(&env.home).unwrap();
    let db = env.home.join("abhed.db");
    std::fs::write(&db, "this is not a database, it is a text file that is long enough to have a header").unwrap();
    for argv in [&["sessions", "list"][..], &["tool", "glob", r#"{"pattern": "*"}"#]] {
        let out = env.cmd(argv);
        assert_eq!(out.status.code(), Some(3), "{argv:?}");
        let err = text(&out.stderr);
        assert!(err.contains(&db.display().to_string()) && err.contains("not a SQLite database"), "{err}");
        assert!(err.contains(&format!("mv {} {}.damaged", db.display(), db.display())), "{err}");
    }
    // Under --format json the same failure is an envelope.
    let (code, v) = env.json("glob", r#"{"pattern": "*"}"#, &[]);
    assert_eq!(code, 3);
    assert_eq!(v["error"]["code"], "internal");
    assert!(v["error"]["message"].as_str().unwrap().contains(&db.display().to_string()), "{v}");

    // A real store whose pages were overwritten.
    let env = Env::new();
    run_session(&env);
    let db = env.home.join("abhed.db");
    let mut bytes = std::fs::read(&db).unwrap();
    assert!(bytes.len() > 8192, "{}", bytes.len());
    for b in &mut bytes[4096..] {
        *b = 0x5a;
    }
    std::fs::write(&db, bytes).unwrap();
    let _ = std::fs::remove_file(env.home.join("abhed.db-wal"));
    let out = env.cmd(&["sessions", "list"]);
    assert_eq!(out.status.code(), Some(3));
    let err = text(&out.stderr);
    assert!(err.contains(&db.display().to_string()) && err.contains("Move it aside"), "{err}");
}
