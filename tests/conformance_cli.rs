//! `abhed conformance` and the gate, through the binary: a scripted model that does every
//! task's reference solution passes and opens the gate; one that answers at once fails and is
//! refused; the override runs it anyway; thresholds come from the user config only.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use abhed::conformance::Suite;
use abhed::conformance::probe::{self, Part};
use common::cli::Env;
use serde_json::Value;

const ALLOW: &str = "ABHED_ALLOW_UNQUALIFIED_MODEL";
const IDLE: &str = r#"{"answer": "done", "status": "done"}"#;

fn suite() -> Suite {
    Suite::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance")).unwrap()
}

/// Every run the probe makes, in its order: the probe tasks, then each recovery scenario with
/// our error and with the bare one.
fn runs() -> Vec<Vec<String>> {
    let suite = suite();
    let mut out: Vec<Vec<String>> =
        probe::tasks(&suite, Part::Probe).unwrap().into_iter().map(|t| t.spec.solution).collect();
    for t in probe::tasks(&suite, Part::Recovery).unwrap() {
        out.push(t.spec.solution.clone());
        out.push(t.spec.solution);
    }
    out
}

/// `abhed conformance --script SCRIPT --work-dir WORK --json`, with the gate's override unset.
fn probe(env: &Env, script: &Path, work: &Path) -> (i32, Value) {
    let out = env
        .command(&["conformance", "--quiet", "--json", "--script"])
        .arg(script)
        .arg("--work-dir")
        .arg(work)
        .env_remove(ALLOW)
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code().unwrap(), report)
}

/// `abhed run --script SCRIPT TASK EXTRA...` without the override in the environment.
fn run_gated(env: &Env, script: &Path, extra: &[&str]) -> (i32, String) {
    let mut argv = vec!["run", "--max-turns", "1", "say hello", "--script"];
    let s = script.display().to_string();
    argv.push(&s);
    argv.extend_from_slice(extra);
    let out = env.command(&argv).env_remove(ALLOW).output().unwrap();
    (out.status.code().unwrap(), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn work_dir(env: &Env) -> PathBuf {
    let w = env.ws.parent().unwrap().join("probe-work");
    std::fs::create_dir_all(w.join("ws")).unwrap();
    w.canonicalize().unwrap()
}

#[test]
fn harness_only_runs_the_cases_built_into_the_binary() {
    let env = Env::new();
    let out = env.cmd(&["conformance", "--harness-only", "--json", "--quiet"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    let h: Value = serde_json::from_slice(&out.stdout).unwrap();
    let on_disk = abhed::conformance::harness::cases(&suite()).unwrap().len() as u64;
    assert_eq!(h["cases"], on_disk);
    assert_eq!(h["passed"], on_disk);
}

#[test]
fn without_a_report_the_gate_refuses_and_the_override_runs() {
    let env = Env::new();
    let script = env.file("answer.txt", &format!("{IDLE}\n"));
    let (code, err) = run_gated(&env, &script, &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("has no conformance report on record, so it may not serve"), "{err}");
    assert!(err.contains(&format!("abhed conformance --script {}", script.display())), "{err}");
    assert!(err.contains("--allow-unqualified-model") && err.contains(ALLOW), "{err}");
    let (code, err) = run_gated(&env, &script, &["--allow-unqualified-model"]);
    assert_eq!(code, 0, "{err}");
    // The environment variable does the same (the other tests run that way).
    assert_eq!(env.cmd(&["run", "say hello", "--script", &script.display().to_string()]).status.code(), Some(0));
    // An endpoint is known by its URL and model name, and refused before any connection.
    let out = env
        .command(&["run", "x", "--endpoint", "http://127.0.0.1:9", "--endpoint-model", "qwen"])
        .env_remove(ALLOW)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("model `qwen` at http://127.0.0.1:9 has no conformance report"), "{err}");
    assert!(err.contains("abhed conformance --endpoint http://127.0.0.1:9 --endpoint-model qwen"), "{err}");
    // With --json the refusal is the stream's last line too.
    let out = env
        .command(&["run", "--json", "x", "--script", &script.display().to_string()])
        .env_remove(ALLOW)
        .output()
        .unwrap();
    let last: Value = serde_json::from_slice(out.stdout.trim_ascii_end()).unwrap();
    assert_eq!((last["type"].as_str(), last["exit"].as_u64()), (Some("error"), Some(2)));
}

#[test]
fn a_model_that_does_every_task_passes_and_may_serve() {
    let env = Env::new();
    let work = work_dir(&env);
    let ws = work.join("ws").display().to_string();
    let text: String = runs().concat().iter().map(|t| t.replace("$WS", &ws) + "\n").collect();
    let script = env.file("oracle.txt", &text);
    let (code, report) = probe(&env, &script, &work);
    assert_eq!(code, 0, "{}", serde_json::to_string_pretty(&report["verdict"]).unwrap());
    assert_eq!(report["verdict"]["pass"], true);
    let t = &report["totals"];
    assert_eq!(t["probe"]["passed"], t["probe"]["runs"]);
    assert_eq!(t["recovery_instructive"]["rate"], 1.0);
    assert_eq!(t["recovery_bare"]["rate"], 1.0);
    assert_eq!(t["call_validity"], 1.0);
    let tools: Vec<&str> = report["tools"].as_array().unwrap().iter().filter_map(|s| s["tool"].as_str()).collect();
    assert_eq!(tools, ["bash", "edit", "glob", "grep", "plan", "read", "task", "todo", "write"]);
    assert_eq!(report["scenarios"].as_array().unwrap().len(), 8);
    assert!(report["errors"].as_array().unwrap().is_empty());
    // A scripted model has no context window to report.
    assert_eq!(report["context"]["n_ctx"], Value::Null);

    // On record: the gate lets it serve, and --show prints the same report.
    let (code, err) = run_gated(&env, &script, &[]);
    assert!(!err.contains("conformance"), "{err}");
    assert_ne!(code, 2, "{err}");
    let out =
        env.command(&["conformance", "--show", "--json", "--script"]).arg(&script).env_remove(ALLOW).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown["totals"], report["totals"]);
    assert_eq!(shown["started_at"], report["started_at"]);
}

#[test]
fn a_model_that_fails_the_probe_is_refused_with_the_reasons() {
    let env = Env::new();
    let work = work_dir(&env);
    let text = format!("{IDLE}\n").repeat(runs().len());
    let script = env.file("idle.txt", &text);
    let (code, report) = probe(&env, &script, &work);
    assert_eq!(code, 1);
    assert_eq!(report["verdict"]["pass"], false);
    assert_eq!(report["totals"]["probe"]["passed"], 0);
    for r in report["probe"].as_array().unwrap() {
        // Two turns where the task asks for a change: "done" with nothing changed is sent back
        // once (run.check_answers), and the second answer stands.
        assert!(matches!(r["turns"].as_u64(), Some(1 | 2)) && r["stop"] == "done", "{r}");
        assert!(r["why"].as_str().unwrap().starts_with("no "), "{r}");
    }
    let (code, err) = run_gated(&env, &script, &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("failed its conformance probe of"), "{err}");
    assert!(err.contains("  - probe: pass rate 0% < min_pass_rate 80%"), "{err}");
    assert!(err.contains("  - recovery: 0% < min_recovery_rate 50%"), "{err}");
    assert!(err.contains("--allow-unqualified-model"), "{err}");
    assert_eq!(run_gated(&env, &script, &["--allow-unqualified-model"]).0, 0);

    // The thresholds are the operator's: the same stored report passes a lower bar...
    let config = env.home.join("no-config.toml");
    std::fs::create_dir_all(&env.home).unwrap();
    std::fs::write(
        &config,
        "[conformance]\nmin_pass_rate = 0.0\nmin_tool_pass_rate = 0.0\nmin_call_validity = 0.0\nmin_recovery_rate = 0.0\n",
    )
    .unwrap();
    let (code, err) = run_gated(&env, &script, &[]);
    assert_eq!(code, 0, "{err}");
    std::fs::write(&config, "[conformance]\nrequire = false\n").unwrap();
    assert_eq!(run_gated(&env, &script, &[]).0, 0);
    // ... but a repository cannot lower it for itself: its setting is ignored, and said to be.
    std::fs::write(&config, "").unwrap();
    std::fs::write(env.ws.join("abhed.toml"), "[conformance]\nrequire = false\n").unwrap();
    let (code, err) = run_gated(&env, &script, &[]);
    assert_eq!(code, 2);
    assert!(err.contains("ignored `conformance.require = false` in"), "{err}");
    assert!(err.contains("a repository cannot lower the bar for the model that works on it"), "{err}");
    assert!(err.contains("failed its conformance probe of"), "{err}");
    std::fs::remove_file(env.ws.join("abhed.toml")).unwrap();

    // A report made with another suite (another build's tools or tests) no longer counts.
    let store = abhed::store::Store::open(&env.home.join("abhed.db")).unwrap();
    let key = format!("script:{}", abhed::tools::fsutil::sha256_file(&script).unwrap());
    let stored = store.latest_report(&key).unwrap().unwrap();
    store.save_report(&key, "another-suite", &stored.report).unwrap();
    drop(store);
    std::fs::write(&config, "[conformance]\nmin_pass_rate = 0.0\nmin_tool_pass_rate = 0.0\nmin_call_validity = 0.0\nmin_recovery_rate = 0.0\n").unwrap();
    let (code, err) = run_gated(&env, &script, &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("was made with another suite (abhed 0.1.0); this build's tools or tests differ"), "{err}");
}

#[test]
fn an_unreadable_report_does_not_count() {
    let env = Env::new();
    let script = env.file("answer.txt", &format!("{IDLE}\n"));
    let sha = abhed::tools::fsutil::sha256_file(&script).unwrap();
    let store = abhed::store::Store::open(&env.home.join("abhed.db")).unwrap();
    let report = serde_json::json!({"abhed_version": "0.0.9"});
    store.save_report(&format!("script:{sha}"), &Suite::embedded().digest(), &report).unwrap();
    drop(store);
    let (code, err) = run_gated(&env, &script, &[]);
    assert_eq!(code, 2, "{err}");
    // A report of another shape (an older abhed's) is refused, and says so.
    assert!(err.contains("was written by another version of abhed and cannot be read"), "{err}");
}

#[test]
fn a_part_of_the_suite_is_shown_and_never_stored() {
    let env = Env::new();
    let work = work_dir(&env);
    let ws = work.join("ws").display().to_string();
    let reads: Vec<Vec<String>> = probe::tasks(&suite(), Part::Probe)
        .unwrap()
        .into_iter()
        .filter(|t| t.name.starts_with("read/"))
        .map(|t| t.spec.solution)
        .collect();
    let text: String = reads.concat().iter().map(|t| t.replace("$WS", &ws) + "\n").collect();
    let script = env.file("reads.txt", &text);
    let out = env
        .command(&["conformance", "--json", "--only", "probe/read", "--script"])
        .arg(&script)
        .arg("--work-dir")
        .arg(&work)
        .env_remove(ALLOW)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--only: a part of the suite ran; the report below is not stored"), "{err}");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let tools: Vec<&str> = report["tools"].as_array().unwrap().iter().filter_map(|s| s["tool"].as_str()).collect();
    assert_eq!(tools, ["read"]);
    assert_eq!(report["totals"]["probe"]["passed"], reads.len());
    // Nothing on record: the gate still refuses the model.
    let (code, err) = run_gated(&env, &script, &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("has no conformance report on record"), "{err}");
}
