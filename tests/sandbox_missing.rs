//! bash without its sandbox: it fails closed, naming what is missing and the command that fixes
//! it, and nothing runs on the host.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::cli::Env;

fn bash_with_config(env: &Env, config: &str, marker: &std::path::Path) -> (i32, String) {
    let cfg = env.home.join("user.toml");
    std::fs::create_dir_all(&env.home).unwrap();
    std::fs::write(&cfg, config).unwrap();
    let args = format!(r#"{{"command": "touch {}", "description": "make a marker"}}"#, marker.display());
    let out = env.command(&["tool", "bash", &args]).env("ABHED_CONFIG", &cfg).output().unwrap();
    (out.status.code().unwrap(), String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn without_qemu_bash_fails_closed_and_names_the_fix() {
    let env = Env::new();
    let marker = env.ws.join("marker");
    let (code, text) = bash_with_config(&env, "[sandbox]\nqemu = \"/nonexistent/qemu-system-x86_64\"\n", &marker);
    assert_eq!(code, 1, "{text}");
    assert!(text.starts_with("Error [sandbox_unavailable]: the command was not run: sandbox.qemu is set to /nonexistent/qemu-system-x86_64, which does not exist."), "{text}");
    assert!(!marker.exists(), "the command ran somewhere");
}

#[test]
fn without_an_image_bash_fails_closed_and_names_the_fix() {
    let env = Env::new();
    let marker = env.ws.join("marker");
    let empty = env.home.join("no-image");
    std::fs::create_dir_all(&empty).unwrap();
    let (code, text) = bash_with_config(&env, &format!("[sandbox]\nimage_dir = \"{}\"\n", empty.display()), &marker);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("no VM image (manifest.json, vmlinux, initramfs.img) in"), "{text}");
    assert!(text.contains("Build one with `bash bundle/vm-image.sh`"), "{text}");
    assert!(text.contains("bash runs only inside the microVM, never on the host"), "{text}");
    assert!(!marker.exists(), "the command ran somewhere");
}

#[test]
fn a_tampered_image_is_refused() {
    let env = Env::new();
    let marker = env.ws.join("marker");
    let real = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("vm");
    let copy = env.home.join("vm");
    std::fs::create_dir_all(&copy).unwrap();
    for f in ["vmlinux", "manifest.json"] {
        std::fs::copy(real.join(f), copy.join(f)).expect("the VM image: run `bash bundle/vm-image.sh`");
    }
    let mut initramfs = std::fs::read(real.join("initramfs.img")).unwrap();
    let n = initramfs.len();
    initramfs[n / 2] ^= 0xff;
    std::fs::write(copy.join("initramfs.img"), initramfs).unwrap();
    let (code, text) = bash_with_config(&env, &format!("[sandbox]\nimage_dir = \"{}\"\n", copy.display()), &marker);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("initramfs.img does not match its manifest"), "{text}");
    assert!(text.contains("the image is damaged or was tampered with"), "{text}");
    assert!(!marker.exists(), "the command ran somewhere");
}
