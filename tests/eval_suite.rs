//! The task suite itself (eval/, docs/EVAL.md) holds: every task's check fails on the starting
//! tree and passes after its reference solution, both run in the real microVM as `abhed eval`
//! runs them; the answer regexes take the reference answer and not the task text; and the suite
//! covers what people ask a coding agent. Needs QEMU and the VM image (`bash bundle/vm-image.sh`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::Path;

use abhed::config::Config;
use abhed::conformance::Suite;
use abhed::eval::{self, Expect};
use abhed::sandbox::{SessionSandbox, Workspace};

mod common;

fn suite() -> Suite {
    Suite::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("eval")).unwrap()
}

#[test]
fn the_suite_is_wide_enough() {
    let suite = suite();
    let tasks = eval::tasks(&suite).unwrap();
    assert!(tasks.len() >= 40, "{} tasks; the suite needs at least 40", tasks.len());
    let tags: BTreeSet<&str> = tasks.iter().flat_map(|t| t.spec.tags.iter().map(String::as_str)).collect();
    for lang in ["python", "shell", "rust", "javascript", "go", "yaml", "markdown"] {
        assert!(tags.contains(lang), "no task tagged {lang}; tags: {tags:?}");
    }
    assert!(tasks.iter().any(|t| t.spec.expect == Expect::GaveUp), "no task whose right answer is to give up");
    for tool in ["todo", "task"] {
        assert!(tasks.iter().any(|t| t.spec.uses.iter().any(|u| u == tool)), "no task that needs {tool}");
    }
    common::assert_committed(&Path::new(env!("CARGO_MANIFEST_DIR")).join("eval"));
    // The built-in copy is what an installed abhed runs.
    assert_eq!(Suite::embedded_eval().digest(), suite.digest(), "the suite built into the binary is stale; rebuild");
}

#[test]
fn answers_take_the_reference_and_not_the_task_text() {
    let suite = suite();
    for t in eval::tasks(&suite).unwrap() {
        assert_eq!(
            eval::answer_miss(&t.spec, &t.spec.solution_answer),
            None,
            "{}: the reference answer misses a regex",
            t.name
        );
        if !t.spec.answer.is_empty() {
            assert!(
                eval::answer_miss(&t.spec, &t.spec.task).is_some(),
                "{}: repeating the task text would pass its answer check",
                t.name
            );
        }
    }
}

/// The checks, in one VM as a session would run them: doing nothing fails (unless giving up is
/// the answer, where the check says nothing changed), the reference solution passes.
#[test]
fn each_check_fails_on_the_start_and_passes_after_the_solution() {
    let suite = suite();
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let ws = ws.canonicalize().unwrap();
    let workspace = Workspace::new(&ws, &[]).unwrap();
    let config = Config::default();
    let sandbox = SessionSandbox::new(&config.sandbox, &workspace);
    let mut problems = Vec::new();
    for t in eval::tasks(&suite).unwrap() {
        let run = |scripts: &[&str]| -> (bool, String) {
            eval::lay_out(&suite, &t, &ws).unwrap();
            let mut last = (true, String::new());
            for s in std::iter::once(t.spec.setup.as_str()).chain(scripts.iter().copied()) {
                if s.trim().is_empty() {
                    continue;
                }
                last = eval::script(&sandbox, &ws, s).unwrap();
                if !last.0 {
                    break;
                }
            }
            last
        };
        let check = t.spec.check.as_str();
        if check.trim().is_empty() {
            continue;
        }
        let (start_passes, _) = run(&[check]);
        let must_fail = t.spec.expect == Expect::Done && t.spec.answer.is_empty() && t.spec.uses.is_empty();
        if start_passes && must_fail {
            problems.push(format!("{}: the check passes on the starting tree", t.name));
        }
        let solution = eval::solution(&suite, &t).unwrap();
        let (solved, out) = run(&[solution, check]);
        if !solved {
            problems.push(format!("{}: the check fails after solution.sh: {out}", t.name));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
