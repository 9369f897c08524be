//! `abhed undo`: what a session's calls changed in the workspace (bash's in the microVM
//! included) put back byte for byte from the checkpoints taken around each call; what changed
//! again since is left alone unless forced; a folder swapped for a symlink since never leads a
//! restore outside the workspace.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use common::cli::Env;
use serde_json::json;

/// Every path below `dir`: a file's bytes and mode, a symlink's target, a folder's mode.
fn tree(dir: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let rel = p.strip_prefix(root).unwrap().display().to_string();
        let m = std::fs::symlink_metadata(&p).unwrap();
        let mode = m.permissions().mode() & 0o7777;
        if m.file_type().is_symlink() {
            out.insert(rel, format!("link {}", std::fs::read_link(&p).unwrap().display()));
        } else if m.is_dir() {
            out.insert(rel, format!("dir {mode:o}"));
            walk(root, &p, out);
        } else {
            out.insert(rel, format!("file {mode:o} {:?}", std::fs::read(&p).unwrap()));
        }
    }
}

fn session_of(v: &serde_json::Value) -> String {
    v["session"].as_str().unwrap_or_else(|| panic!("no session in {v}")).to_string()
}

fn stdout(o: &std::process::Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// The deletion the exec check cannot see (a program's own code, no exec of rm), of the whole
/// workspace, in the real VM: `abhed undo` puts every file, mode, link and folder back, and
/// removes what the command made.
#[test]
fn a_workspace_wiped_by_bash_in_the_vm_is_put_back_byte_for_byte() {
    let env = Env::new();
    std::fs::create_dir_all(env.ws.join("src/lib")).unwrap();
    std::fs::create_dir_all(env.ws.join(".hidden")).unwrap();
    std::fs::create_dir_all(env.ws.join("empty")).unwrap();
    std::fs::write(env.ws.join("src/app.py"), "print('hi')\n").unwrap();
    std::fs::write(env.ws.join("src/lib/run.sh"), "#!/bin/sh\necho run\n").unwrap();
    std::fs::set_permissions(env.ws.join("src/lib/run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(env.ws.join(".hidden/key.bin"), (0u8..=255).collect::<Vec<u8>>()).unwrap();
    std::fs::write(env.ws.join("README.md"), "# app\n").unwrap();
    std::os::unix::fs::symlink("src/app.py", env.ws.join("main.py")).unwrap();
    let before = tree(&env.ws);

    let wipe = "python3 -c \"import os, shutil\nfor p in os.listdir('.'):\n    shutil.rmtree(p) if os.path.isdir(p) and not os.path.islink(p) else os.remove(p)\" && echo new > made.txt && mkdir -p newdir/sub && echo x > newdir/sub/f";
    let (code, v) = env.json("bash", &json!({"command": wipe, "description": "wipe the workspace"}).to_string(), &[]);
    assert_eq!(code, 0, "{v}");
    let id = session_of(&v);
    assert_eq!(tree(&env.ws).keys().cloned().collect::<Vec<_>>(), ["made.txt", "newdir", "newdir/sub", "newdir/sub/f"]);

    // The log says what the call changed.
    let export = env.cmd(&["sessions", "export", &id]);
    let events = common::cli::json_lines(&export.stdout);
    let obs = events.iter().find(|e| e["kind"] == "observation").unwrap();
    let changes = obs["payload"]["workspace_changes"]["changes"].as_array().unwrap();
    assert_eq!(changes.len(), before.len() + 4, "{changes:?}");

    let out = env.cmd(&["undo", &id]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(stdout(&out).contains("undid bash `python3 -c"), "{}", stdout(&out));
    assert_eq!(tree(&env.ws), before);

    // Undone once: the undo is on record, and a second one has nothing to do.
    let again = env.cmd(&["undo", &id]);
    assert_eq!(again.status.code(), Some(0));
    assert!(stdout(&again).starts_with("Nothing to undo"), "{}", stdout(&again));
    let verify = env.cmd(&["sessions", "verify", &id]);
    assert_eq!(verify.status.code(), Some(0), "{}", stdout(&verify));
}

/// A file the call wrote and someone changed again since is left as it is, and reported; the
/// undo does the rest, and `--force` puts that file back too.
#[test]
fn what_changed_again_since_is_left_alone_unless_forced() {
    let env = Env::new();
    std::fs::write(env.ws.join("a.txt"), "one\n").unwrap();
    std::fs::write(env.ws.join("b.txt"), "bee\n").unwrap();
    let (_, v) = env.json("read", &json!({"path": env.path("a.txt")}).to_string(), &[]);
    let id = session_of(&v);
    let session = ["--session", id.as_str()];
    let (code, v) = env.json(
        "edit",
        &json!({"path": env.path("a.txt"), "old_string": "one", "new_string": "two"}).to_string(),
        &session,
    );
    assert_eq!(code, 0, "{v}");
    let (code, v) = env.json("write", &json!({"path": env.path("c.txt"), "content": "new\n"}).to_string(), &session);
    assert_eq!(code, 0, "{v}");
    env.json("read", &json!({"path": env.path("b.txt")}).to_string(), &session);
    let (code, v) = env.json("write", &json!({"path": env.path("b.txt"), "content": "BEE\n"}).to_string(), &session);
    assert_eq!(code, 0, "{v}");

    // --list shows the three calls, latest first, and changes nothing.
    let list = env.cmd(&["undo", &id, "--list"]);
    let text = stdout(&list);
    let at = |s: &str| text.find(s).unwrap_or_else(|| panic!("{s} not in {text}"));
    assert!(at("write ") < at("edit "), "{text}");
    assert_eq!(std::fs::read_to_string(env.ws.join("b.txt")).unwrap(), "BEE\n");

    // --steps 1: only the last call.
    let out = env.cmd(&["undo", &id, "--steps", "1"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_eq!(std::fs::read_to_string(env.ws.join("b.txt")).unwrap(), "bee\n");
    assert_eq!(std::fs::read_to_string(env.ws.join("a.txt")).unwrap(), "two\n");

    // a.txt changed by hand after the edit: left, reported, exit 1; c.txt is removed.
    std::fs::write(env.ws.join("a.txt"), "three\n").unwrap();
    let out = env.cmd(&["undo", &id]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(
        stdout(&out).contains(&format!("not undone: {}: changed again since", env.path("a.txt"))),
        "{}",
        stdout(&out)
    );
    assert_eq!(std::fs::read_to_string(env.ws.join("a.txt")).unwrap(), "three\n");
    assert!(!env.ws.join("c.txt").exists());

    let out = env.cmd(&["undo", &id, "--force"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_eq!(std::fs::read_to_string(env.ws.join("a.txt")).unwrap(), "one\n");
    assert_eq!(tree(&env.ws).keys().cloned().collect::<Vec<_>>(), ["a.txt", "b.txt"]);
}

/// After the call, the folder it wrote in is swapped for a symlink to a folder outside the
/// workspace (what a guest can do at any moment): the undo reaches nothing through it, and
/// says so.
#[test]
fn a_folder_swapped_for_a_symlink_never_leads_an_undo_outside() {
    let env = Env::new();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("f.txt"), "outside\n").unwrap();
    std::fs::create_dir(env.ws.join("d")).unwrap();
    std::fs::write(env.ws.join("d/f.txt"), "inside\n").unwrap();
    let (_, v) = env.json("read", &json!({"path": env.path("d/f.txt")}).to_string(), &[]);
    let id = session_of(&v);
    let (code, v) = env.json(
        "write",
        &json!({"path": env.path("d/f.txt"), "content": "changed\n"}).to_string(),
        &["--session", id.as_str()],
    );
    assert_eq!(code, 0, "{v}");
    std::fs::rename(env.ws.join("d"), env.ws.join("d.moved")).unwrap();
    std::os::unix::fs::symlink(outside.path(), env.ws.join("d")).unwrap();

    let out = env.cmd(&["undo", &id]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stdout(&out).contains(&format!("not undone: {}", env.path("d/f.txt"))), "{}", stdout(&out));
    assert_eq!(std::fs::read_to_string(outside.path().join("f.txt")).unwrap(), "outside\n");
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 1);
}

/// A bash call that deletes more files than one call may (20 by default), or a file git tracks,
/// with no operator to confirm it: its changes are undone at once, the model is told, and the
/// refusal is an approval event. Fewer untracked files: kept.
#[test]
fn deletions_past_the_limit_or_of_tracked_files_are_undone_without_confirmation() {
    let env = Env::new();
    std::fs::create_dir(env.ws.join("many")).unwrap();
    for i in 0..25 {
        std::fs::write(env.ws.join(format!("many/f{i:02}.txt")), format!("{i}\n")).unwrap();
    }
    let before = tree(&env.ws);
    let delete_all = "python3 -c \"import shutil; shutil.rmtree('many')\" && echo made > new.txt";
    let (code, v) = env.json("bash", &json!({"command": delete_all, "description": "delete many"}).to_string(), &[]);
    assert_eq!(code, 0, "{v}");
    let text = v.to_string();
    assert!(text.contains("this command deleted 25 files; one call may delete at most 20 files"), "{text}");
    assert!(text.contains("26 put back, 1 removed"), "{text}"); // the folder and its 25 files
    assert_eq!(tree(&env.ws), before);
    let id = session_of(&v);
    let export = common::cli::json_lines(&env.cmd(&["sessions", "export", &id]).stdout);
    // The command's own approval (allowed by the policy), then the question on its deletions.
    let approval = export.iter().filter(|e| e["kind"] == "approval").nth(1).unwrap();
    assert!(
        approval["payload"]["subject"].as_str().unwrap().contains("deleted 25 files (0 tracked by git)"),
        "{approval}"
    );
    assert_eq!(
        (approval["payload"]["decision"].as_str(), approval["payload"]["by"].as_str()),
        (Some("denied"), Some("no_operator"))
    );

    // Five untracked files: kept.
    let some = "python3 -c \"import os; [os.remove('many/f%02d.txt' % i) for i in range(5)]\"";
    let (code, v) = env.json("bash", &json!({"command": some, "description": "delete five"}).to_string(), &[]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(std::fs::read_dir(env.ws.join("many")).unwrap().count(), 20);

    // One file git tracks: undone.
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git").args(args).current_dir(&env.ws).output().unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    std::fs::write(env.ws.join("tracked.txt"), "keep me\n").unwrap();
    git(&["init", "-q"]);
    git(&["add", "tracked.txt"]);
    git(&["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one"]);
    let one = "python3 -c \"import os; os.remove('tracked.txt')\"";
    let (code, v) = env.json("bash", &json!({"command": one, "description": "delete a tracked file"}).to_string(), &[]);
    assert_eq!(code, 0, "{v}");
    assert!(v.to_string().contains("this command deleted 1 file, 1 of them tracked by git"), "{v}");
    assert_eq!(std::fs::read_to_string(env.ws.join("tracked.txt")).unwrap(), "keep me\n");
}
