//! `abhed doctor`: the host's sandbox checked for real (a KVM probe boot, a TCG boot that runs a
//! command), and a missing part reported as a failure with its fix.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::cli::Env;
use serde_json::Value;

fn doctor(env: &Env, config: &str) -> (i32, Value) {
    std::fs::create_dir_all(&env.home).unwrap();
    let cfg = env.home.join("user.toml");
    std::fs::write(&cfg, config).unwrap();
    let out = env.command(&["doctor", "--json"]).env("ABHED_CONFIG", &cfg).output().unwrap();
    (out.status.code().unwrap(), serde_json::from_slice(&out.stdout).unwrap())
}

#[test]
fn doctor_boots_the_vm_and_reports_every_part() {
    let env = Env::new();
    let (code, v) = doctor(&env, "");
    let c = &v["checks"];
    assert_eq!(code, 0, "{v:#}");
    // The build's CPU baseline against this CPU (the build machine: it has all of it).
    assert_eq!(c["cpu"]["ok"], true, "{v:#}");
    assert_eq!(c["cpu"]["facts"]["baseline"], "x86-64-v3", "{v:#}");
    assert_eq!(c["qemu"]["ok"], true);
    assert_eq!(c["image"]["ok"], true);
    assert!(c["image"]["detail"].as_str().unwrap().contains("checksums match its manifest"), "{v:#}");
    // KVM is reported by its probe, working or not; TCG must work, with only loopback.
    assert!(c["kvm"]["facts"]["works"].is_boolean(), "{v:#}");
    assert_eq!(c["tcg"]["ok"], true, "{v:#}");
    assert!(c["tcg"]["detail"].as_str().unwrap().ends_with("network interfaces: lo"), "{v:#}");
    assert_eq!(c["backend"]["facts"]["backend"], "microvm");
}

#[test]
fn doctor_fails_when_the_image_is_missing_and_says_bash_fails_closed() {
    let env = Env::new();
    let empty = env.home.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let (code, v) = doctor(&env, &format!("[sandbox]\nimage_dir = \"{}\"\n", empty.display()));
    assert_eq!(code, 1, "{v:#}");
    assert_eq!(v["checks"]["image"]["ok"], false);
    assert!(v["checks"]["image"]["detail"].as_str().unwrap().contains("bash bundle/vm-image.sh"), "{v:#}");
    assert_eq!(v["checks"]["backend"]["ok"], false);
    assert!(v["checks"]["backend"]["detail"].as_str().unwrap().contains("bash fails closed"), "{v:#}");
}
