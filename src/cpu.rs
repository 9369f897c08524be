//! The CPU baseline this build was compiled for (our code and ggml's, both from the same
//! `target-cpu`: `.cargo/config.toml`, docs/BUNDLE.md), against the CPU it runs on. A build for
//! x86-64-v3 on a CPU without AVX2 dies with SIGILL at the first model turn; this says so first.

/// The instruction-set extensions a baseline is made of, in the order people name them, and
/// whether this build was compiled to use each.
const COMPILED: [(&str, bool); 7] = [
    ("sse4.2", cfg!(target_feature = "sse4.2")),
    ("popcnt", cfg!(target_feature = "popcnt")),
    ("avx", cfg!(target_feature = "avx")),
    ("avx2", cfg!(target_feature = "avx2")),
    ("fma", cfg!(target_feature = "fma")),
    ("f16c", cfg!(target_feature = "f16c")),
    ("bmi2", cfg!(target_feature = "bmi2")),
];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Baseline {
    /// `x86-64-v3`, `x86-64-v2` or `x86-64`, from what the build requires.
    pub name: &'static str,
    /// The extensions this build was compiled to use.
    pub required: Vec<&'static str>,
    /// Of those, the ones this CPU lacks.
    pub missing: Vec<&'static str>,
}

impl Baseline {
    pub fn ok(&self) -> bool {
        self.missing.is_empty()
    }

    /// What to tell the operator when the CPU lacks something.
    pub fn advice(&self) -> String {
        format!(
            "this build of abhed is for {} CPUs (it uses {}), and this CPU lacks {}: the model would stop with an illegal instruction. Rebuild from the bundle's sources for this CPU: RUSTFLAGS=\"-C target-feature=+crt-static -C target-cpu=native\" cargo build --release --offline --target x86_64-unknown-linux-gnu (docs/BUNDLE.md)",
            self.name,
            self.required.join(", "),
            self.missing.join(", ")
        )
    }
}

/// This build's baseline, checked against this CPU.
pub fn check() -> Baseline {
    let required: Vec<&'static str> = COMPILED.iter().filter(|(_, on)| *on).map(|(f, _)| *f).collect();
    let missing = required.iter().copied().filter(|f| !detected(f)).collect();
    let name = if compiled("avx2") && compiled("fma") {
        "x86-64-v3"
    } else if compiled("sse4.2") {
        "x86-64-v2"
    } else {
        "x86-64"
    };
    Baseline { name, required, missing }
}

fn compiled(feature: &str) -> bool {
    COMPILED.iter().any(|(f, on)| *f == feature && *on)
}

#[cfg(target_arch = "x86_64")]
fn detected(feature: &str) -> bool {
    match feature {
        "sse4.2" => std::arch::is_x86_feature_detected!("sse4.2"),
        "popcnt" => std::arch::is_x86_feature_detected!("popcnt"),
        "avx" => std::arch::is_x86_feature_detected!("avx"),
        "avx2" => std::arch::is_x86_feature_detected!("avx2"),
        "fma" => std::arch::is_x86_feature_detected!("fma"),
        "f16c" => std::arch::is_x86_feature_detected!("f16c"),
        "bmi2" => std::arch::is_x86_feature_detected!("bmi2"),
        _ => false,
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn detected(_: &str) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_build_is_for_x86_64_v3_and_runs_here() {
        // .cargo/config.toml chooses x86-64-v3; the test runs on the build machine.
        let b = check();
        assert_eq!(b.name, "x86-64-v3");
        assert!(b.required.contains(&"avx2") && b.required.contains(&"fma"), "{b:?}");
        assert!(b.ok(), "{b:?}");
    }

    #[test]
    fn the_advice_names_what_is_missing_and_how_to_rebuild() {
        let b = Baseline { name: "x86-64-v3", required: vec!["avx2", "fma"], missing: vec!["avx2"] };
        let a = b.advice();
        assert!(a.contains("this CPU lacks avx2"), "{a}");
        assert!(a.contains("target-cpu=native"), "{a}");
    }
}
