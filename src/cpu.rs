//! The CPU baseline this build was compiled for (our code and ggml's, both from the same
//! `target-cpu`: `.cargo/config.toml`, docs/BUNDLE.md), against the CPU it runs on. A build for
//! x86-64-v3 on a CPU without AVX2 dies with SIGILL, even before main (llama.cpp's static
//! constructors are built for the baseline too), so the refusal itself happens in a start-up
//! guard compiled for plain x86-64 (src/native/cpu_guard.c); this module asks that guard what it
//! checks, for `abhed doctor`.

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
}

// The guard (src/native/cpu_guard.c, built by build.rs from the target features rustc was
// given) refuses to start on a CPU without the baseline, before main. Doctor asks it what it
// checks, so the report and the refusal cannot disagree.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
unsafe extern "C" {
    fn abhed_cpu_guard_baseline() -> *const std::ffi::c_char;
    fn abhed_cpu_guard_feature(i: usize, ok: *mut std::ffi::c_int) -> *const std::ffi::c_char;
}

/// This build's baseline, checked against this CPU by the start-up guard's own code.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
pub fn check() -> Baseline {
    // SAFETY: the guard returns pointers to static NUL-terminated string literals (or NULL past
    // its last feature), and writes only `ok`.
    let text = |p: *const std::ffi::c_char| unsafe { std::ffi::CStr::from_ptr(p) }.to_str().unwrap_or("?");
    let name = text(unsafe { abhed_cpu_guard_baseline() });
    let (mut required, mut missing) = (Vec::new(), Vec::new());
    for i in 0.. {
        let mut ok: std::ffi::c_int = 0;
        let feature = unsafe { abhed_cpu_guard_feature(i, &mut ok) };
        if feature.is_null() {
            break;
        }
        required.push(text(feature));
        if ok == 0 {
            missing.push(text(feature));
        }
    }
    Baseline { name, required, missing }
}

/// No guard and no baseline off x86-64.
#[cfg(not(target_arch = "x86_64"))]
pub fn check() -> Baseline {
    Baseline { name: std::env::consts::ARCH, required: Vec::new(), missing: Vec::new() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_build_is_for_x86_64_v3_and_runs_here() {
        // .cargo/config.toml chooses x86-64-v3; the test runs on the build machine.
        let b = check();
        assert_eq!(b.name, "x86-64-v3");
        // What the guard checks, in build.rs's order: all of x86-64-v3.
        let v3 = ["sse4.2", "popcnt", "movbe", "fma", "avx", "f16c", "xsave", "avx2", "bmi1", "bmi2", "lzcnt"];
        assert_eq!(b.required, v3, "{b:?}");
        assert!(b.ok(), "{b:?}");
    }
}
