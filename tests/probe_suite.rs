//! The probe's own tests: every probe task and recovery scenario is reachable (its reference
//! solution, replayed, reaches the goal) and not free (a model that answers at once fails it).
//! And every recovery scenario's failing call fails as designed, with both error texts.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use abhed::config::Config;
use abhed::conformance::Suite;
use abhed::conformance::probe::{self, Part, RunLimits, Runner, Task, Variant};
use abhed::model::scripted::Scripted;

fn suite() -> Suite {
    Suite::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance")).unwrap()
}

/// Run `task` on a script of `turns` (with `$WS` filled in).
fn run(suite: &Suite, task: &Task, part: Part, variant: Option<Variant>, turns: &[String]) -> probe::TaskResult {
    let work = tempfile::tempdir().unwrap();
    let ws = work.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let ws = ws.canonicalize().unwrap();
    let text: String = turns.iter().map(|t| t.replace("$WS", &ws.display().to_string()) + "\n").collect();
    let mut model = Scripted::parse(Path::new("solution"), &text).unwrap();
    let mut runner = Runner::new(suite, &mut model, &Config::default(), RunLimits::default(), work.path()).unwrap();
    assert_eq!(runner.workspace(), ws);
    runner.run(task, part, variant).unwrap_or_else(|e| panic!("{}: {e:#}", task.name))
}

fn check_part(part: Part) {
    let suite = suite();
    let tasks = probe::tasks(&suite, part).unwrap();
    assert!(!tasks.is_empty());
    let mut failures = Vec::new();
    for task in &tasks {
        let variants: &[Option<Variant>] = match part {
            Part::Probe => &[None],
            Part::Recovery => &[Some(Variant::Instructive), Some(Variant::Bare)],
        };
        for &v in variants {
            let r = run(&suite, task, part, v, &task.spec.solution);
            if !r.passed {
                failures.push(format!("{} {v:?}: the reference solution fails: {}", task.name, r.why));
            }
            if r.calls.iter().any(|c| !c.valid) {
                failures.push(format!("{} {v:?}: the reference solution makes an invalid call", task.name));
            }
        }
        // Twice: "done" to a task that asks for a change, with nothing changed, is sent back once
        // (run.check_answers); and each time it is first asked for again as a call
        // (run.act_until_change), which a model that answers at once answers again.
        let idle = vec![r#"{"answer": "done", "status": "done"}"#.to_string(); 4];
        let r = run(&suite, task, part, variants[0], &idle);
        if r.passed {
            failures.push(format!("{}: a model that answers at once passes it", task.name));
        }
        if r.why.is_empty() || !(1..=2).contains(&r.turns) || r.stop != "done" {
            failures.push(format!("{}: idle run graded oddly: {r:?}", task.name));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_probe_task_is_reachable_and_not_free() {
    check_part(Part::Probe);
}

#[test]
fn every_recovery_scenario_is_reachable_and_not_free() {
    check_part(Part::Recovery);
}

#[test]
fn the_probe_grades_what_the_model_did() {
    let suite = suite();
    let tasks = probe::tasks(&suite, Part::Probe).unwrap();
    let read = tasks.iter().find(|t| t.name == "read/001_absolute_path").unwrap();
    // The wrong file: the call is valid and succeeds, but the goal names another path.
    let r = run(
        &suite,
        read,
        Part::Probe,
        None,
        &[r#"{"tool": "read", "arguments": {"path": "$WS/notes/done.txt"}}"#.into()],
    );
    assert!(!r.passed);
    assert!(r.why.starts_with("read was called but /path is \""), "{}", r.why);
    assert_eq!(r.calls.len(), 1);
    assert!(r.calls[0].valid && r.calls[0].ok);
    // Arguments the schema refuses count against call validity.
    let r = run(&suite, read, Part::Probe, None, &[r#"{"tool": "read", "arguments": {"file": "x"}}"#.into()]);
    assert!(!r.passed);
    assert_eq!(r.calls[0].error_code.as_deref(), Some("invalid_arguments"));
    assert!(!r.calls[0].valid);
    // The goal reached on the second turn: the probe stops there, without a third.
    let r = run(
        &suite,
        read,
        Part::Probe,
        None,
        &[
            r#"{"tool": "glob", "arguments": {"pattern": "**/*.txt"}}"#.into(),
            r#"{"tool": "read", "arguments": {"path": "$WS/notes/todo.txt"}}"#.into(),
        ],
    );
    assert!(r.passed, "{}", r.why);
    assert_eq!((r.goal_turn, r.turns, r.stop.as_str()), (Some(2), 2, "max_turns"));
}
