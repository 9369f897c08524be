//! Runs every case folder under conformance/cases. `ABHED_BLESS=1` rewrites the snapshots.
//! A filter argument (`cargo test --test conformance -- edit`) narrows the cases.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

mod common;

use abhed::conformance::{Suite, harness};

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance");
    let bless = std::env::var_os("ABHED_BLESS").is_some_and(|v| v != "0");
    let filter: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let suite = Suite::load(&root).expect("cannot read the conformance suite");
    let cases = harness::cases(&suite).expect("cannot load the conformance cases");
    let (mut passed, mut failed) = (0usize, 0usize);
    for case in cases.iter().filter(|c| filter.is_empty() || filter.iter().any(|f| c.name.contains(f.as_str()))) {
        match harness::run_case(&suite, case, bless) {
            Ok(r) if r.failures.is_empty() => {
                passed += 1;
                println!("ok   {}{}", r.name, if r.blessed { " (blessed)" } else { "" });
            }
            Ok(r) => {
                failed += 1;
                println!("FAIL {} — {}", r.name, case.spec.description);
                for f in &r.failures {
                    println!("     {}", f.replace('\n', "\n     "));
                }
            }
            Err(e) => {
                failed += 1;
                println!("FAIL {}: the case could not run: {e:#}", case.name);
            }
        }
    }
    println!("\nconformance: {passed} passed, {failed} failed");
    assert!(passed + failed > 0 || !filter.is_empty(), "no conformance cases found under {}", root.display());
    // The binary carries the same suite: a stale embed would run other cases than these.
    // (Blessing rewrites the files, so the embed is stale until the next build.)
    assert!(
        bless || Suite::embedded().digest() == suite.digest(),
        "the suite built into the binary differs from {}; rebuild",
        root.display()
    );
    common::assert_committed(&root.join("cases"));
    if failed > 0 {
        std::process::exit(1);
    }
}
