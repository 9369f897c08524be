//! Issue 17's attack table (tests/data/exec_attacks.toml), case by case, through the bash tool
//! in the real microVM with no operator: each command that once talked past the command-line
//! policy must now be refused, by the first look or at exec time, with its canaries intact.
//! Needs QEMU and the image of `bash bundle/vm-image.sh`, as tests/sandbox_vm.rs does.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use abhed::tools::ErrorCode;
use common::vm::Vm;

#[derive(serde::Deserialize)]
struct Table {
    case: Vec<Case>,
}

#[derive(serde::Deserialize)]
struct Case {
    command: String,
    #[serde(default)]
    mode: Option<String>,
    #[serde(default)]
    effect: Option<String>,
    #[serde(default)]
    git: bool,
    /// The canary tree is committed to a repository: deleting it deletes files git tracks.
    #[serde(default)]
    tracked: bool,
    #[serde(default)]
    gap: Option<String>,
}

fn table() -> Vec<Case> {
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/exec_attacks.toml")).unwrap();
    toml::from_str::<Table>(&text).unwrap().case
}

/// A VM whose user config holds this `[approval]` table.
fn vm(approval: &str) -> Vm {
    Vm::with(|c| c.approval.user = Some((approval.parse().unwrap(), PathBuf::from("/user/config.toml"))))
}

/// What happened to one case.
struct Outcome {
    refused: bool,
    intact: Result<(), String>,
    text: String,
}

fn run(vm: &Vm, n: usize, case: &Case) -> Outcome {
    let dir = vm.path(&format!("case{n:02}"));
    std::fs::create_dir_all(dir.join("C/sub")).unwrap();
    std::fs::write(dir.join("C/sub/f"), "keep").unwrap();
    std::fs::write(dir.join("f"), "keep").unwrap();
    if case.git {
        std::fs::write(dir.join("g"), "committed\n").unwrap();
        let setup = format!(
            "cd {} && git init -q . && git add g && git -c user.name=t -c user.email=t@t commit -qm one && echo changed > g",
            dir.display()
        );
        let out = vm.bash(&setup);
        assert!(out.ok() && out.text().contains("Exit code: 0"), "case {n}: setup: {}", out.text());
    }
    if case.tracked {
        let setup = format!(
            "cd {} && git init -q . && git add C && git -c user.name=t -c user.email=t@t commit -qm one",
            dir.display()
        );
        let out = vm.bash(&setup);
        assert!(out.ok() && out.text().contains("Exit code: 0"), "case {n}: setup: {}", out.text());
    }
    let (out, events) = vm.call_with(
        Box::new(abhed::approval::gate::NoOperator),
        serde_json::json!({"command": format!("cd {} && {}", dir.display(), case.command), "description": "test"}),
    );
    let text = out.text();
    // Or it ran, and what it deleted needed a confirmation nobody gave: its changes were undone.
    let by_undo = events.iter().any(|e| e["kind"] == "observation" && e["payload"]["deletions_undone"].is_object());
    // The first look refused (an approval error: nothing ran), or the call ran and the exec check
    // refused a program in it. Any other error (the VM died: `kill -9 -1` reached the agent) is
    // not a refusal.
    let by_first_look = matches!(&out.result, Err(e) if e.code == ErrorCode::ApprovalDenied);
    let by_exec = out.ok() && vm.last_meta()["exec_denied"].as_array().is_some_and(|d| !d.is_empty());
    let refused = by_first_look || by_exec || by_undo;
    let mut problems = Vec::new();
    if case.effect.as_deref().unwrap_or("tree") == "tree" && !dir.join("C/sub/f").exists() {
        problems.push("C/sub/f is gone".to_string());
    }
    if case.effect.as_deref() == Some("file") && std::fs::read_to_string(dir.join("f")).ok().as_deref() != Some("keep")
    {
        problems.push("f lost its text".to_string());
    }
    if case.git && std::fs::read_to_string(dir.join("g")).ok().as_deref() != Some("changed\n") {
        problems.push("the tracked file's change is lost".to_string());
    }
    if case.effect.as_deref() == Some("vm") && matches!(&out.result, Err(e) if e.code == ErrorCode::SandboxCrashed) {
        problems.push("the VM went down".to_string());
    }
    let intact = if problems.is_empty() { Ok(()) } else { Err(problems.join("; ")) };
    // What the VM contains without a refusal (`effect = "vm"`) counts as stopped when it is
    // contained.
    let refused = refused || case.effect.as_deref() == Some("vm");
    Outcome { refused, intact, text }
}

#[test]
fn every_attack_of_the_table_is_refused_with_its_canaries_intact() {
    let cases = table();
    assert!(cases.len() >= 60, "the table has {} cases", cases.len());
    let auto = vm("mode = \"auto\"\ndeny = [\"git push*\", \"curl*\"]\n");
    let ask = vm("mode = \"ask\"\nallow = [\"echo*\"]\ndeny = [\"git push*\", \"curl*\"]\n");
    let mut bypasses = Vec::new();
    let mut gaps_closed = Vec::new();
    let mut gaps = 0;
    for (n, case) in cases.iter().enumerate() {
        let vm = if case.mode.as_deref() == Some("ask") { &ask } else { &auto };
        let o = run(vm, n, case);
        let stopped = o.refused && o.intact.is_ok();
        match (&case.gap, stopped) {
            (None, true) => {}
            (None, false) => bypasses.push(format!(
                "{:?}: {}{}\n{}",
                case.command,
                if o.refused { "" } else { "not refused. " },
                o.intact.err().unwrap_or_default(),
                o.text
            )),
            (Some(_), true) => gaps_closed.push(format!("{:?}", case.command)),
            (Some(_), false) => gaps += 1,
        }
    }
    eprintln!("{} cases: {} bypasses, {gaps} known gaps", cases.len(), bypasses.len());
    assert!(bypasses.is_empty(), "{} of {} got through:\n\n{}", bypasses.len(), cases.len(), bypasses.join("\n\n"));
    assert!(
        gaps_closed.is_empty(),
        "these are stopped now: remove their `gap` in tests/data/exec_attacks.toml: {}",
        gaps_closed.join(", ")
    );
}
