//! `abhed tool` end to end, as a script or a person runs it: exit statuses, the JSON envelope,
//! sessions shared across invocations, and files too big to load.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;

use serde_json::Value;

mod common;

use common::cli::Env;

fn args(pairs: &[(&str, Value)]) -> String {
    let map: serde_json::Map<String, Value> = pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
    Value::Object(map).to_string()
}

#[test]
fn envelope_has_the_stable_fields() {
    let env = Env::new();
    std::fs::write(env.ws.join("a.txt"), "hello\n").unwrap();
    let (code, v) = env.json("read", &args(&[("path", env.path("a.txt").into())]), &[]);
    assert_eq!(code, 0);
    for key in ["format_version", "tool", "ok", "output", "error", "mutated", "truncated", "session", "path", "sha256"]
    {
        assert!(v.get(key).is_some(), "missing {key} in {v}");
    }
    assert_eq!(v["tool"], "read");
    assert_eq!(v["ok"], true);
    assert_eq!(v["error"], Value::Null);
    assert_eq!(v["mutated"], false);
    assert_eq!(v["path"], env.path("a.txt"));
    // sha256 of "hello\n"
    assert_eq!(v["sha256"], "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03");
    assert!(v["output"].as_str().unwrap().contains("1\thello"));
}

#[test]
fn exit_status_is_1_for_a_tool_error_and_2_for_usage() {
    let env = Env::new();
    let (code, v) = env.json("read", r#"{"path": "relative.txt"}"#, &[]);
    assert_eq!(code, 1);
    assert_eq!(v["ok"], false);
    assert_eq!(v["error"]["code"], "relative_path");
    assert_eq!(v["mutated"], false);
    assert!(v["output"].as_str().unwrap().starts_with("Error [relative_path]"));

    assert_eq!(env.cmd(&["tool", "nosuchtool", "{}"]).status.code(), Some(2));
    assert_eq!(env.cmd(&["tool", "read"]).status.code(), Some(2));
    assert_eq!(env.cmd(&["tool", "read", "{}", "--format", "yaml"]).status.code(), Some(2));
    assert_eq!(env.cmd(&["tool", "read", "{}", "--session", "no-such-session"]).status.code(), Some(2));
    assert_eq!(env.cmd(&["tool", "read", "{}", "--workspace", "/no/such/dir"]).status.code(), Some(2));

    // A session is bound to its workspace.
    let (_, v) = env.json("read", r#"{"path": "/x"}"#, &[]);
    let session = v["session"].as_str().unwrap();
    let other = tempfile::tempdir().unwrap();
    let out = env.cmd(&["tool", "read", "{}", "--session", session, "--workspace", other.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("belongs to workspace"));
    assert_eq!(
        env.cmd(&["tool", "read", "{}", "--session", session, "--workspace", env.ws.to_str().unwrap()]).status.code(),
        Some(1)
    );
}

#[test]
fn text_format_prints_exactly_the_observation() {
    let env = Env::new();
    std::fs::write(env.ws.join("a.txt"), "one\ntwo\n").unwrap();
    let out = env.cmd(&["tool", "read", &args(&[("path", env.path("a.txt").into())])]);
    assert_eq!(out.status.code(), Some(0));
    let (_, v) = env.json("read", &args(&[("path", env.path("a.txt").into())]), &[]);
    assert_eq!(String::from_utf8(out.stdout).unwrap(), format!("{}", v["output"].as_str().unwrap()));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("session: "));
}

#[test]
fn list_prints_the_schemas_the_model_sees() {
    let env = Env::new();
    let out = env.cmd(&["tool", "--list"]);
    assert_eq!(out.status.code(), Some(0));
    let defs: Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = defs.as_array().unwrap().iter().map(|d| d["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["read", "write", "edit", "glob", "grep", "plan", "todo", "bash", "task"]);
    for d in defs.as_array().unwrap() {
        assert_eq!(d["input_schema"]["type"], "object");
        assert!(d["description"].as_str().unwrap().len() > 40, "{d}");
    }
    // Property order is the schema's own (path first), not alphabetical.
    let read = &defs[0]["input_schema"]["properties"];
    assert_eq!(read.as_object().unwrap().keys().next().unwrap(), "path");
}

#[test]
fn a_session_is_shared_across_invocations_and_every_call_is_on_record() {
    let env = Env::new();
    std::fs::write(env.ws.join("a.txt"), "old\n").unwrap();
    let target = env.path("a.txt");

    // A fresh session has not read the file: overwrite refused.
    let (code, v) = env.json("write", &args(&[("path", target.clone().into()), ("content", "new\n".into())]), &[]);
    assert_eq!((code, v["error"]["code"].as_str()), (1, Some("not_read")));

    let (code, v) = env.json("read", &args(&[("path", target.clone().into())]), &[]);
    assert_eq!(code, 0);
    let session = v["session"].as_str().unwrap().to_string();
    assert_eq!((v["action_seq"].as_i64(), v["observation_seq"].as_i64()), (Some(1), Some(2)));

    let (code, v) = env.json(
        "write",
        &args(&[("path", target.clone().into()), ("content", "new\n".into())]),
        &["--session", &session],
    );
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["mutated"], true);
    assert_eq!(v["session"], session.as_str());
    // Between them, the write's approval decision (seq 4).
    assert_eq!((v["action_seq"].as_i64(), v["observation_seq"].as_i64()), (Some(3), Some(5)));
    assert_eq!(std::fs::read_to_string(env.ws.join("a.txt")).unwrap(), "new\n");

    // The store holds both calls, action before observation, chained.
    let store = abhed::store::Store::open(&env.home.join("abhed.db")).unwrap();
    let s = store.open_session(&session).unwrap().unwrap();
    let events = s.events().unwrap();
    let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
    // The write's approval decision sits between its action and its observation.
    assert_eq!(kinds, ["action", "observation", "action", "approval", "observation"]);
    assert_eq!(events[2].payload["tool"], "write");
    assert_eq!(events[2].payload["arguments"]["content"], "new\n");
    assert_eq!(events[3].payload["decision"], "allowed");
    assert_eq!(events[3].payload["by"], "policy");
    assert_eq!(events[4].payload["ok"], true);
    assert!(events[4].payload["duration_ms"].is_u64());
    assert_eq!(s.verify_chain().unwrap(), None);
}

#[test]
fn an_outside_change_after_a_read_makes_write_stale() {
    let env = Env::new();
    std::fs::write(env.ws.join("a.txt"), "v1\n").unwrap();
    let target = env.path("a.txt");
    let (_, v) = env.json("read", &args(&[("path", target.clone().into())]), &[]);
    let session = v["session"].as_str().unwrap().to_string();
    std::fs::write(env.ws.join("a.txt"), "v2 from someone else\n").unwrap();
    let (code, v) =
        env.json("write", &args(&[("path", target.into()), ("content", "mine\n".into())]), &["--session", &session]);
    assert_eq!((code, v["error"]["code"].as_str()), (1, Some("stale_read")), "{v}");
    assert_eq!(v["sha256"], sha256_of(&env.ws.join("a.txt")), "the error names the current identity");
    assert_eq!(std::fs::read_to_string(env.ws.join("a.txt")).unwrap(), "v2 from someone else\n");
}

#[test]
fn an_internal_fault_is_exit_3_not_a_tool_error() {
    let env = Env::new();
    // The store's directory is a file: the store cannot open. That is our fault to report,
    // not an observation for the model.
    std::fs::remove_dir_all(&env.home).unwrap();
    std::fs::write(&env.home, "not a directory").unwrap();
    let out = env.command(&["tool", "read", r#"{"path": "/x"}"#]).env("ABHED_CONFIG", "/dev/null").output().unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("internal error"));
}

/// A 1 GiB file: read with offset/limit answers, and the process never holds the file in
/// memory (peak RSS well under the file's size).
#[test]
fn a_huge_file_is_streamed_not_loaded() {
    use std::io::Write as _;
    let env = Env::new();
    let big = env.ws.join("huge.log");
    {
        let mut f = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&big).unwrap());
        let line = format!("{}\n", "0123456789abcdef".repeat(8)); // 129 bytes
        let chunk = line.repeat(8192);
        let target: u64 = 1 << 30;
        let mut written = 0u64;
        while written < target {
            f.write_all(chunk.as_bytes()).unwrap();
            written += chunk.len() as u64;
        }
        f.write_all(b"NEEDLE at the very end\n").unwrap();
    }
    let size = std::fs::metadata(&big).unwrap().len();
    let lines = size / 129 + 1;

    // Whole-file read: refused with the size and how to read a range.
    let (code, v) = env.json("read", &args(&[("path", env.path("huge.log").into())]), &[]);
    assert_eq!((code, v["error"]["code"].as_str()), (1, Some("too_large")));
    assert!(v["output"].as_str().unwrap().contains("GiB"));

    let before = max_rss_children_kib();
    let (code, v) = env.json(
        "read",
        &args(&[("path", env.path("huge.log").into()), ("offset", 5_000_000.into()), ("limit", 3.into())]),
        &[],
    );
    let peak = max_rss_children_kib();
    assert_eq!(code, 0, "{v}");
    let out = v["output"].as_str().unwrap();
    assert!(out.contains(&format!("{lines} lines · range 5000000-5000002")), "{out}");
    assert!(out.contains("5000001\t0123456789abcdef"), "{out}");
    // ru_maxrss of children is the largest child so far; it must stay far below 1 GiB.
    assert!(peak.max(before) < 200 * 1024, "peak RSS {peak} KiB");

    // grep streams it too: the only match is on the last line.
    let (code, v) = env.json(
        "grep",
        &args(&[
            ("pattern", "NEEDLE".into()),
            ("path", env.path("huge.log").into()),
            ("output_mode", "content".into()),
        ]),
        &[],
    );
    let peak = max_rss_children_kib();
    assert_eq!(code, 0, "{v}");
    assert_eq!(
        v["output"].as_str().unwrap().trim_end(),
        format!("{}:{lines}:NEEDLE at the very end", env.path("huge.log"))
    );
    assert!(peak < 200 * 1024, "peak RSS {peak} KiB after grep");
    std::fs::remove_file(&big).unwrap();
}

fn max_rss_children_kib() -> i64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes a full rusage into the pointer we give it.
    #[allow(unsafe_code)]
    let usage = unsafe {
        libc::getrusage(libc::RUSAGE_CHILDREN, usage.as_mut_ptr());
        usage.assume_init()
    };
    usage.ru_maxrss
}

fn sha256_of(p: &Path) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(std::fs::read(p).unwrap()).iter().map(|b| format!("{b:02x}")).collect()
}

/// A file the process may not read: root reads anything, so the call runs as `nobody`.
#[test]
fn permission_denied_is_an_instructive_error() {
    use std::os::unix::fs::PermissionsExt as _;
    let env = Env::new();
    let open = |p: &Path| std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o777)).unwrap();
    open(env.ws.parent().unwrap());
    open(&env.ws);
    std::fs::create_dir_all(&env.home).unwrap();
    open(&env.home);
    let secret = env.ws.join("secret.txt");
    std::fs::write(&secret, "s\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o000)).unwrap();
    let out = Command::new("setpriv")
        .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", env!("CARGO_BIN_EXE_abhed"), "tool", "read"])
        .arg(args(&[("path", env.path("secret.txt").into())]))
        .args(["--format", "json"])
        .env("ABHED_HOME", &env.home)
        .env("ABHED_CONFIG", env.home.join("no-config.toml"))
        .current_dir(&env.ws)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("not JSON ({e}): {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
    });
    assert_eq!(out.status.code(), Some(1), "{v}");
    assert_eq!(v["error"]["code"], "permission_denied");
    assert!(v["output"].as_str().unwrap().contains("permission denied"), "{v}");
}
