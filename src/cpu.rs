//! The CPU baseline this build was compiled for (our code and ggml's, both from the same
//! `target-cpu`: `.cargo/config.toml`, docs/BUNDLE.md), against the CPU it runs on. A build for
//! x86-64-v3 on a CPU without AVX2 dies with SIGILL, even before main (llama.cpp's static
//! constructors are built for the baseline too), so the refusal itself happens in a start-up
//! guard compiled for plain x86-64 (src/native/cpu_guard.c); this module reports the same facts
//! for `abhed doctor`.

/// The instruction-set extensions a baseline is made of, in the order people name them, and
/// whether this build was compiled to use each.
const COMPILED: [(&str, bool); 11] = [
    ("sse4.2", cfg!(target_feature = "sse4.2")),
    ("popcnt", cfg!(target_feature = "popcnt")),
    ("movbe", cfg!(target_feature = "movbe")),
    ("fma", cfg!(target_feature = "fma")),
    ("avx", cfg!(target_feature = "avx")),
    ("f16c", cfg!(target_feature = "f16c")),
    ("xsave", cfg!(target_feature = "xsave")),
    ("avx2", cfg!(target_feature = "avx2")),
    ("bmi1", cfg!(target_feature = "bmi1")),
    ("bmi2", cfg!(target_feature = "bmi2")),
    ("lzcnt", cfg!(target_feature = "lzcnt")),
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
            "this build of abhed is for {} CPUs (it uses {}), and this CPU lacks {}: it would stop with an illegal instruction. Build abhed for this CPU from the bundle's sources, offline: cd src && CPU=native bash bundle/static.sh (docs/BUNDLE.md)",
            self.name,
            self.required.join(", "),
            self.missing.join(", ")
        )
    }
}

// The guard (src/native/cpu_guard.c, built by build.rs) refuses to start on a CPU without the
// baseline, before main; this reference keeps the linker from dropping it.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
unsafe extern "C" {
    fn abhed_cpu_guard_baseline() -> *const std::ffi::c_char;
}

/// The baseline the start-up guard checks, as the guard names it.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
pub fn guard_baseline() -> &'static str {
    // SAFETY: the guard returns a pointer to a static NUL-terminated string literal.
    unsafe { std::ffi::CStr::from_ptr(abhed_cpu_guard_baseline()) }.to_str().unwrap_or("?")
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
        "movbe" => std::arch::is_x86_feature_detected!("movbe"),
        "fma" => std::arch::is_x86_feature_detected!("fma"),
        "avx" => std::arch::is_x86_feature_detected!("avx"),
        "f16c" => std::arch::is_x86_feature_detected!("f16c"),
        "xsave" => std::arch::is_x86_feature_detected!("xsave"),
        "avx2" => std::arch::is_x86_feature_detected!("avx2"),
        "bmi1" => std::arch::is_x86_feature_detected!("bmi1"),
        "bmi2" => std::arch::is_x86_feature_detected!("bmi2"),
        "lzcnt" => std::arch::is_x86_feature_detected!("lzcnt"),
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
    fn the_start_up_guard_checks_the_same_baseline() {
        assert_eq!(guard_baseline(), check().name);
    }

    #[test]
    fn the_advice_names_what_is_missing_and_how_to_rebuild() {
        let b = Baseline { name: "x86-64-v3", required: vec!["avx2", "fma"], missing: vec!["avx2"] };
        let a = b.advice();
        assert!(a.contains("this CPU lacks avx2"), "{a}");
        assert!(a.contains("CPU=native bash bundle/static.sh"), "{a}");
    }
}
