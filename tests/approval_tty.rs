//! The approval prompt on a real terminal: `script` gives `abhed tool bash` a pseudo-terminal, and
//! the operator's keys are written to it. Commands that are allowed run in the real microVM.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::Write as _;
use std::process::{Command, Stdio};

use common::cli::Env;

/// Run `abhed tool bash ARGS [--session ID]` on a pseudo-terminal, typing `keys`. Returns the
/// exit status and everything the terminal showed.
fn on_tty(env: &Env, config: &std::path::Path, args: &str, session: Option<&str>, keys: &str) -> (i32, String) {
    let mut argv = vec!["tool", "bash", args];
    if let Some(id) = session {
        argv.extend(["--session", id]);
    }
    on_tty_argv(env, config, &argv, keys)
}

/// `abhed ARGV...` on a pseudo-terminal, typing `keys`.
fn on_tty_argv(env: &Env, config: &std::path::Path, argv: &[&str], keys: &str) -> (i32, String) {
    let quote = |s: &str| format!("'{}'", s.replace('\'', r"'\''"));
    let mut line = quote(env!("CARGO_BIN_EXE_abhed"));
    for a in argv {
        line.push(' ');
        line.push_str(&quote(a));
    }
    let mut child = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .env("ABHED_HOME", &env.home)
        .env("ABHED_CONFIG", config)
        .env("ABHED_ALLOW_UNQUALIFIED_MODEL", "1")
        .current_dir(&env.ws)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("`script` (util-linux) runs the command on a pseudo-terminal");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(keys.as_bytes()).unwrap();
    // Keep the terminal open until the command has read its answer: closing it early is EOF.
    let out = std::thread::spawn(move || child.wait_with_output().unwrap());
    std::thread::sleep(std::time::Duration::from_secs(1));
    drop(stdin);
    let out = out.join().unwrap();
    (out.status.code().unwrap(), String::from_utf8_lossy(&out.stdout).replace('\r', ""))
}

fn session_id(screen: &str) -> String {
    screen.split("session: ").nth(1).unwrap().split_whitespace().next().unwrap().to_string()
}

fn approvals(env: &Env, session: &str) -> Vec<serde_json::Value> {
    let store = abhed::store::Store::open(&env.home.join("abhed.db")).unwrap();
    let s = store.open_session(session).unwrap().unwrap();
    s.events().unwrap().into_iter().filter(|e| e.kind == "approval").map(|e| e.payload).collect()
}

#[test]
fn the_operator_answers_once_always_or_deny_and_always_holds_for_the_session() {
    let env = Env::new();
    std::fs::create_dir_all(&env.home).unwrap();
    let config = env.home.join("user.toml");
    // Mode ask: every command needs the operator, so the prompt comes up for a harmless one.
    std::fs::write(&config, "[approval]\nmode = \"ask\"\n[sandbox]\naccel = \"tcg\"\n").unwrap();
    let args = r#"{"command": "echo approved-run", "description": "say something"}"#;

    let (code, screen) = on_tty(&env, &config, args, None, "a\n");
    assert!(screen.contains("── approval needed ── bash: say something"), "{screen}");
    assert!(screen.contains("  $ echo approved-run"), "{screen}");
    assert!(screen.contains("[o]nce, [a]lways for this exact command, [d]eny"), "{screen}");
    assert_eq!(code, 0, "{screen}");
    assert!(screen.contains("approved-run\nExit code: 0"), "{screen}");
    let session = session_id(&screen);
    let a = approvals(&env, &session);
    assert_eq!(
        (a[0]["decision"].as_str(), a[0]["by"].as_str(), a[0]["answer"].as_str()),
        (Some("allowed"), Some("operator"), Some("always"))
    );

    // The same command again in the same session: no prompt (no keys are typed at all).
    let (code, screen) = on_tty(&env, &config, args, Some(&session), "");
    assert_eq!(code, 0, "{screen}");
    assert!(!screen.contains("approval needed"), "{screen}");
    assert!(screen.contains("approved-run\nExit code: 0"), "{screen}");
    let a = approvals(&env, &session);
    assert_eq!((a[1]["decision"].as_str(), a[1]["by"].as_str()), (Some("allowed"), Some("policy")));

    // Another command: the operator says no; nothing runs, and `abhed tool` exits 5.
    let marker = env.ws.join("denied-marker");
    let args = format!(r#"{{"command": "touch {}", "description": "make a file"}}"#, marker.display());
    let (code, screen) = on_tty(&env, &config, &args, Some(&session), "d\n");
    assert_eq!(code, 5, "{screen}");
    assert!(screen.contains("Error [approval_denied]: the operator declined this bash call"), "{screen}");
    assert!(!marker.exists());
    assert_eq!(approvals(&env, &session)[2]["answer"], "deny");
}

#[test]
fn a_destructive_command_is_offered_once_or_deny_only() {
    let env = Env::new();
    std::fs::create_dir_all(&env.home).unwrap();
    let config = env.home.join("user.toml");
    // The most permissive policy there is: destructive commands still ask.
    std::fs::write(&config, "[approval]\nmode = \"auto\"\nallow = [\"*\"]\n[sandbox]\naccel = \"tcg\"\n").unwrap();
    std::fs::create_dir_all(env.ws.join("build")).unwrap();
    let args =
        format!(r#"{{"command": "rm -rf {}", "description": "clean the build"}}"#, env.ws.join("build").display());
    let (code, screen) = on_tty(&env, &config, &args, None, "a\nd\n");
    assert!(screen.contains("[o]nce, [d]eny (a destructive command is confirmed each time)"), "{screen}");
    assert!(screen.contains("deletes a directory tree"), "{screen}");
    // "a" is not on offer: asked again, then denied.
    assert!(screen.contains("Please answer with one of the letters."), "{screen}");
    assert_eq!(code, 5, "{screen}");
    assert!(env.ws.join("build").exists());
}

#[test]
fn in_plan_mode_the_operator_accepts_the_plan_on_the_terminal_and_the_work_goes_on() {
    let env = Env::new();
    std::fs::create_dir_all(&env.home).unwrap();
    let config = env.home.join("user.toml");
    std::fs::write(&config, "").unwrap();
    let target = env.ws.join("out.txt");
    let write = serde_json::json!({"tool": "write", "arguments": {"path": target, "content": "done\n"}}).to_string();
    let plan =
        serde_json::json!({"tool": "plan", "arguments": {"goal": "out.txt says done", "steps": ["Write out.txt"]}})
            .to_string();
    let script = env.home.join("turns.script");
    std::fs::write(&script, format!("{plan}\n{write}\n{{\"answer\": \"written\", \"status\": \"done\"}}\n")).unwrap();
    let s = script.display().to_string();
    let (code, screen) = on_tty_argv(&env, &config, &["run", "--plan", "write done to out.txt", "--script", &s], "o\n");
    assert!(screen.contains("── approval needed ── plan: accept this plan? (plan mode)"), "{screen}");
    assert!(screen.contains("  | Goal: out.txt says done"), "{screen}");
    assert_eq!(code, 0, "{screen}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "done\n");
}

#[test]
fn a_git_hook_is_put_to_the_operator_with_the_reason() {
    let env = Env::new();
    let config = env.home.join("user.toml");
    std::fs::write(&config, "").unwrap();
    std::fs::create_dir_all(env.ws.join(".git/hooks")).unwrap();
    let hook = env.ws.join(".git/hooks/pre-commit");
    let args = serde_json::json!({"path": hook, "content": "#!/bin/sh\nexit 0\n"}).to_string();
    let (code, screen) = on_tty_argv(&env, &config, &["tool", "write", &args], "d\n");
    assert!(screen.contains(&format!("── approval needed ── write: write {}", hook.display())), "{screen}");
    assert!(screen.contains("puts code where the host runs it (git runs hooks on the host"), "{screen}");
    assert!(screen.contains("[o]nce, [d]eny"), "{screen}");
    assert_eq!(code, 5, "{screen}");
    assert!(!hook.exists());
    // The operator allows it once: written.
    let (code, screen) = on_tty_argv(&env, &config, &["tool", "write", &args], "o\n");
    assert_eq!(code, 0, "{screen}");
    assert_eq!(std::fs::read_to_string(&hook).unwrap(), "#!/bin/sh\nexit 0\n");
}
