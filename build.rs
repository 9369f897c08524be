//! Builds the CPU guard (src/native/cpu_guard.c): a check that runs before main and before any
//! C++ static constructor, compiled for plain x86-64 whatever `target-cpu` the rest is built for.
//! And embeds the folders `conformance/` and `eval/` so that an installed binary carries its own suites: the
//! same files `cargo test` reads, not a copy.

// A build script that cannot write its header or compile the guard must stop the build.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Write as _;

/// The target features a build may require, where CPUID reports each: (rustc's name, leaf,
/// subleaf, register 1=ebx 2=ecx 3=edx, bit).
const KNOWN: [(&str, u32, u32, u32, u32); 11] = [
    ("sse4.2", 1, 0, 2, 20),
    ("popcnt", 1, 0, 2, 23),
    ("movbe", 1, 0, 2, 22),
    ("fma", 1, 0, 2, 12),
    ("avx", 1, 0, 2, 28),
    ("f16c", 1, 0, 2, 29),
    ("xsave", 1, 0, 2, 26),
    ("avx2", 7, 0, 1, 5),
    ("bmi1", 7, 0, 1, 3),
    ("bmi2", 7, 0, 1, 8),
    ("lzcnt", 0x8000_0001, 0, 2, 5),
];

fn main() {
    println!("cargo::rerun-if-changed=src/native/cpu_guard.c");
    println!("cargo::rerun-if-changed=build.rs");
    embed_suites();
    if std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() != Ok("x86_64") {
        return;
    }
    let enabled = std::env::var("CARGO_CFG_TARGET_FEATURE").unwrap_or_default();
    let enabled: Vec<&str> = enabled.split(',').collect();
    let required: Vec<_> = KNOWN.iter().filter(|k| enabled.contains(&k.0)).collect();
    let baseline = if enabled.contains(&"avx2") && enabled.contains(&"fma") {
        "x86-64-v3"
    } else if enabled.contains(&"sse4.2") {
        "x86-64-v2"
    } else {
        "x86-64"
    };
    let mut h = String::new();
    writeln!(h, "#define ABHED_BASELINE \"{baseline}\"").unwrap();
    // Ended by a NULL name, which also keeps the array non-empty when nothing is required.
    h.push_str("static const struct feature ABHED_REQUIRED[] = {\n");
    for (name, leaf, sub, reg, bit) in &required {
        writeln!(h, "    {{\"{name}\", {leaf:#x}, {sub}, {reg}, {bit}}},").unwrap();
    }
    h.push_str("    {0, 0, 0, 0, 0},\n};\n");
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").unwrap());
    std::fs::write(out.join("abhed_cpu_features.h"), h).unwrap();
    // Every binary must keep the guard's constructor, including those that never call into it
    // (only doctor does); otherwise the linker drops the object, constructor and all.
    println!("cargo::rustc-link-arg=-Wl,--undefined=abhed_cpu_guard_baseline");
    cc::Build::new()
        .file("src/native/cpu_guard.c")
        .include(&out)
        // Plain x86-64: this code runs on the CPUs the rest of the binary cannot.
        .flag("-march=x86-64")
        .flag("-mtune=generic")
        .warnings(true)
        .compile("abhed_cpu_guard");
}

/// `$OUT_DIR/conformance_files.rs` and `$OUT_DIR/eval_files.rs`: the suites an installed binary
/// carries (`conformance/`, and the task suite `eval/`).
fn embed_suites() {
    embed_folder("conformance", "conformance_files.rs");
    embed_folder("eval", "eval_files.rs");
}

/// Every file and symlink under `folder`, sorted, as `(relative path, Embedded)`. Files come in
/// by `include_bytes!`, so an edit rebuilds; the folder is watched too (cargo scans a watched
/// folder recursively), so an added case does.
fn embed_folder(folder: &str, generated: &str) {
    let root = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap()).join(folder);
    println!("cargo::rerun-if-changed={}", root.display());
    let mut entries = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let path = e.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                stack.push(path);
            } else {
                entries.push((path, meta.file_type().is_symlink()));
            }
        }
    }
    entries.sort();
    let mut out = String::from("pub static FILES: &[(&str, Embedded)] = &[\n");
    for (path, link) in entries {
        let rel = path.strip_prefix(&root).unwrap().to_str().expect("suite paths are UTF-8");
        if link {
            let target = std::fs::read_link(&path).unwrap();
            writeln!(out, "    ({rel:?}, Embedded::Symlink({:?})),", target.to_str().unwrap()).unwrap();
        } else {
            writeln!(out, "    ({rel:?}, Embedded::File(include_bytes!({:?}))),", path.to_str().unwrap()).unwrap();
        }
    }
    out.push_str("];\n");
    let dest = std::path::PathBuf::from(std::env::var("OUT_DIR").unwrap()).join(generated);
    std::fs::write(dest, out).unwrap();
}
