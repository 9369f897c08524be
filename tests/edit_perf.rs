//! The edit benchmark of docs/BENCHMARKS.md: edit on a 100k-line file, end to end in process
//! (store, hashing, atomic write). It measures and prints; it asserts only correctness, since
//! timings on a shared machine are not a test. Run:
//! `cargo test --release --test edit_perf -- --ignored --nocapture`.

// Test helpers: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use abhed::tools::ErrorCode;
use common::Harness;

const LINES: usize = 100_000;

fn big_file() -> String {
    (1..=LINES).map(|i| format!("    let value_{i} = compute({i}, \"item {i}\");\n")).collect()
}

/// Best of a few runs of `f`, each on a fresh copy of the file.
fn time_edit(args: impl Fn(&str) -> serde_json::Value, expect_ok: bool) -> Duration {
    let h = Harness::new();
    let path = h.ws.join("big.rs");
    let p = h.path("big.rs");
    let mut best = Duration::MAX;
    for _ in 0..5 {
        std::fs::write(&path, big_file()).unwrap();
        let session = h.session();
        assert!(h.call(&session, "read", serde_json::json!({"path": p, "limit": 5})).ok());
        let t = Instant::now();
        let out = h.call(&session, "edit", args(&p));
        let took = t.elapsed();
        assert_eq!(out.ok(), expect_ok, "{}", out.text());
        if !expect_ok {
            assert_eq!(out.result.as_ref().unwrap_err().code, ErrorCode::NoMatch);
        }
        best = best.min(took);
    }
    best
}

#[test]
#[ignore = "benchmark: run in release with --ignored --nocapture"]
fn bench_unique_edit() {
    let took = time_edit(
        |p| serde_json::json!({"path": p, "old_string": "let value_54321 = compute(54321,", "new_string": "let value_54321 = compute_fast(54321,"}),
        true,
    );
    eprintln!("unique edit on {LINES} lines: {took:?} (best of 5, end to end)");
}

#[test]
#[ignore = "benchmark: run in release with --ignored --nocapture"]
fn bench_miss() {
    let took = time_edit(
        |p| serde_json::json!({"path": p, "old_string": "    let value_77777 = compute(77777, \"item 7777\");\n    let value_77778 = compute(77778, \"item 77778\");", "new_string": "x"}),
        false,
    );
    eprintln!("miss with nearest match on {LINES} lines: {took:?} (best of 5, end to end)");
}

#[test]
#[ignore = "benchmark: run in release with --ignored --nocapture"]
fn bench_hard_misses() {
    // Every line of a 50-line old_string is slightly wrong: no exact anchors at all.
    let many: String = (60_000..60_050).map(|i| format!("    let value_{i} = compute({i}, \"itm {i}\");\n")).collect();
    // One line, part of a line, with a typo.
    let fragment = "compute(4242, \"item 4243\")".to_string();
    // A long old_string (500 lines), one line wrong in the middle.
    let mut long: String =
        (30_000..30_500).map(|i| format!("    let value_{i} = compute({i}, \"item {i}\");\n")).collect();
    long = long.replacen("value_30250", "value_3O250", 1);
    for (name, needle) in [("50 wrong lines", many), ("fragment", fragment), ("500 lines", long)] {
        let took = time_edit(|p| serde_json::json!({"path": p, "old_string": needle, "new_string": "x"}), false);
        eprintln!("miss ({name}) on {LINES} lines: {took:?}");
    }
}
