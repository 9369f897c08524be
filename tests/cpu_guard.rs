//! The start-up CPU guard (src/native/cpu_guard.c). Regression: with the check in `main`, a
//! binary built for x86-64-v3 died with SIGILL on a CPU without AVX2 before printing anything,
//! in llama.cpp's static constructors, `--version` included. qemu-user plays the older CPU.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

fn on_cpu(model: &str, args: &[&str]) -> std::process::Output {
    Command::new("qemu-x86_64")
        .args(["-cpu", model, env!("CARGO_BIN_EXE_abhed")])
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot start qemu-x86_64 ({e}); install it: apt-get install qemu-user"))
}

#[test]
fn a_cpu_without_the_baseline_gets_a_refusal_not_sigill() {
    // Westmere (2010): SSE4.2 and POPCNT, no AVX, AVX2, FMA, BMI or MOVBE.
    for args in [&["--version"][..], &["run", "hello"], &["doctor"]] {
        let out = on_cpu("Westmere", args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
        assert!(
            err.starts_with("abhed: this CPU lacks movbe, fma, avx, f16c, xsave, avx2, bmi1, bmi2, lzcnt, which this build of abhed uses (it is built for x86-64-v3 CPUs: sse4.2, popcnt, movbe, fma, avx, f16c, xsave, avx2, bmi1, bmi2, lzcnt)."),
            "{args:?}: {err}"
        );
        assert!(err.trim_end().ends_with("cd src && CPU=native bash bundle/static.sh (docs/BUNDLE.md)"), "{err}");
    }
}

#[test]
fn a_cpu_with_the_baseline_starts() {
    // Haswell (2013) is the first with all of x86-64-v3.
    let out = on_cpu("Haswell", &["--version"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), concat!("abhed ", env!("CARGO_PKG_VERSION")));
}
