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

/// `abhed eval --peer`: another agent's run, graded like the loop's, its check in the microVM
/// and its report stored apart from the model's own. This peer does the reference solution of
/// one task and nothing on the other.
#[test]
fn a_peer_runs_in_the_workspace_and_is_graded_like_the_loop() {
    let suite = suite();
    let tasks = eval::tasks(&suite).unwrap();
    let toml = tasks.iter().find(|t| t.name == "config-toml-value").unwrap();
    let env = common::cli::Env::new();
    let sol = env.file("solution.sh", eval::solution(&suite, toml).unwrap());
    let peer = format!(
        r#"case "$ABHED_TASK" in *TTL*) bash {} >/dev/null && echo 'ttl_seconds is now 600';; *) echo 'I did nothing';; esac"#,
        sol.display()
    );
    let work = env.ws.parent().unwrap().join("eval");
    let (work, work_arg) = (work.display().to_string(), "--work-dir");
    let names = ["config-toml-value", "locate-python-definition"];
    let out = env.cmd(&[&["eval", "--peer", &peer, "--json", "--quiet", work_arg, &work][..], &names[..]].concat());
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["protocol"], "peer");
    assert_eq!(r["model"]["location"], peer.as_str());
    assert!(r["key"].as_str().unwrap().starts_with(&format!("peer:{peer}@sha256:")), "{}", r["key"]);
    let row = |name: &str| r["tasks"].as_array().unwrap().iter().find(|t| t["name"] == name).unwrap().clone();
    let done = row("config-toml-value");
    assert_eq!(
        (done["passed"].as_bool(), done["stop"].as_str(), done["turns"].as_u64()),
        (Some(true), Some("done"), Some(0))
    );
    assert_eq!(done["answer"], "ttl_seconds is now 600\n");
    let idle = row("locate-python-definition");
    assert_eq!(idle["passed"], false);
    assert!(idle["why"].as_str().unwrap().starts_with("the final answer does not match"), "{idle}");

    // Stored under the peer: `--show` with the same peer prints it; the model has none of its own.
    let shown = env.cmd(&["eval", "--peer", &peer, "--show", "--json"]);
    let s: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(s["tasks"], r["tasks"]);
    let own = env.cmd(&["eval", "--show"]);
    assert_eq!(own.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&own.stderr).contains("has no eval report on record"));
}
