//! The session VM across abhed processes, on the real microVM: it dies with abhed (`kill -9`
//! during the boot, during a command, and idle with a background job), a later start removes
//! what the dead one left, and the working directory persists between `abhed tool --session`
//! calls.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use common::cli::Env;
use serde_json::json;

/// A user config that boots under TCG (the KVM probe belongs to `abhed doctor`).
fn config(env: &Env) -> PathBuf {
    std::fs::create_dir_all(&env.home).unwrap();
    let accel = std::env::var("ABHED_TEST_ACCEL").unwrap_or_else(|_| "tcg".into());
    let p = env.home.join("user.toml");
    std::fs::write(&p, format!("[sandbox]\naccel = \"{accel}\"\nboot_timeout_s = 120\n")).unwrap();
    p
}

fn abhed(env: &Env, args: &[&str]) -> Command {
    let mut c = env.command(args);
    c.env("ABHED_CONFIG", config(env));
    c
}

fn bash_args(command: &str) -> String {
    json!({"command": command, "description": "test"}).to_string()
}

/// Fields of /proc/PID/stat after the command name: state, ppid, ...
fn stat(pid: u32) -> Option<Vec<String>> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    Some(s[s.rfind(')')? + 1..].split_whitespace().map(str::to_string).collect())
}

/// Gone, or a zombie waiting for whoever inherited it: either way not running.
fn dead(pid: u32) -> bool {
    stat(pid).is_none_or(|f| f[0] == "Z" || f[0] == "X")
}

/// The QEMU that `parent` started, and the VM directory it runs from.
fn qemu_of(parent: u32) -> Option<(u32, PathBuf)> {
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        if stat(pid).is_none_or(|f| f[1] != parent.to_string()) {
            continue;
        }
        let cmdline =
            String::from_utf8_lossy(&std::fs::read(e.path().join("cmdline")).unwrap_or_default()).into_owned();
        if !cmdline.contains("microvm") {
            continue;
        }
        let sock = cmdline.split("socket,id=agent,path=").nth(1)?.split([',', '\0']).next()?;
        return Some((pid, Path::new(sock).parent()?.to_path_buf()));
    }
    None
}

/// An abhed this test started, killed if the test fails before it does.
struct Running(Option<Child>);

impl Running {
    fn id(&self) -> u32 {
        self.0.as_ref().unwrap().id()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn start(c: &mut Command) -> Running {
    Running(Some(c.spawn().unwrap()))
}

fn wait_until<T>(what: &str, limit: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "{what} did not happen within {limit:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// kill -9 abhed; its QEMU must be gone within 5 s. Returns the VM directory it left.
fn kill_9(mut abhed: Running, qemu: u32, dir: PathBuf, when: &str) -> PathBuf {
    let mut child = abhed.0.take().unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    let start = Instant::now();
    while !dead(qemu) && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(dead(qemu), "QEMU {qemu} still runs 5 s after abhed was killed {when}");
    dir
}

/// Three ways to die, one after the other: each start must remove the directory the last
/// dead one left (and the last is removed by a final call).
#[test]
fn a_killed_abhed_leaves_no_vm_and_the_next_start_cleans_up() {
    let env = Env::new();
    let marker = env.ws.join("marker");

    // During the boot: as soon as QEMU is there, before the guest is up.
    let child = start(&mut abhed(&env, &["tool", "bash", &bash_args("true")]));
    let (qemu, dir) = wait_until("QEMU starting", Duration::from_secs(60), || qemu_of(child.id()));
    assert!(dir.join("owner.lock").exists(), "{}", dir.display());
    let left_by_boot = kill_9(child, qemu, dir, "during the boot");
    assert!(left_by_boot.exists(), "nothing left to clean up: the test proves nothing");

    // During a command.
    let cmd = format!("touch {}; sleep 600", marker.display());
    let child = start(&mut abhed(&env, &["tool", "bash", &bash_args(&cmd)]));
    let (qemu, dir) = wait_until("QEMU starting", Duration::from_secs(60), || qemu_of(child.id()));
    // This start's boot has already swept the last one's directory.
    assert!(!left_by_boot.exists(), "{} was not cleaned up by the next start", left_by_boot.display());
    wait_until("the command starting", Duration::from_secs(120), || marker.exists().then_some(()));
    let left_by_command = kill_9(child, qemu, dir, "during a command");

    // Idle, with a background job running: a run whose model is thinking.
    std::fs::remove_file(&marker).unwrap();
    let call = json!({"tool": "bash", "arguments": {"command": cmd, "description": "a job", "background": true}});
    let script =
        env.file("idle.script", &format!("{call}\n#sleep 600000\n{{\"answer\": \"done\", \"status\": \"done\"}}\n"));
    let child = start(&mut abhed(&env, &["run", "t", "--script", script.to_str().unwrap()]));
    let (qemu, dir) = wait_until("QEMU starting", Duration::from_secs(60), || qemu_of(child.id()));
    assert!(!left_by_command.exists(), "{} was not cleaned up by the next start", left_by_command.display());
    wait_until("the job starting", Duration::from_secs(120), || marker.exists().then_some(()));
    std::thread::sleep(Duration::from_millis(500)); // the observation is written; the loop waits
    let left_idle = kill_9(child, qemu, dir, "while idle with a background job");

    let out = abhed(&env, &["tool", "bash", &bash_args("echo fresh")]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "fresh\nExit code: 0\n");
    assert!(!left_idle.exists(), "{} was not cleaned up by the next start", left_idle.display());
}

/// Seed 000 §7: the working directory persists across the calls of a session, also when each
/// call is its own `abhed tool` process (and so its own VM); and a background job started that
/// way says that it ends with the process.
#[test]
fn the_working_directory_persists_across_abhed_tool_calls_of_a_session() {
    let env = Env::new();
    let sub = env.ws.join("sub");
    let out = abhed(&env, &["tool", "bash", &bash_args("mkdir -p sub && cd sub")]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(text.ends_with(&format!("Working directory is now {}\n", sub.display())), "{text}");
    let err = String::from_utf8_lossy(&out.stderr);
    let id = err.lines().find_map(|l| l.strip_prefix("session: ")).unwrap().to_string();

    let args = json!({"command": "sleep 1", "description": "a job", "background": true}).to_string();
    let out = abhed(&env, &["tool", "--session", &id, "bash", &args]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(text.contains(&format!(", in {}.\n", sub.display())), "{text}");
    assert!(
        text.contains(
            "last as long as this session's VM: until this `abhed tool` process exits, which is right after this call"
        ),
        "{text}"
    );

    let out = abhed(&env, &["tool", "--session", &id, "bash", &bash_args("pwd")]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), format!("{}\nExit code: 0\n", sub.display()));
    // A new session starts at the workspace root.
    let out = abhed(&env, &["tool", "bash", &bash_args("pwd")]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), format!("{}\nExit code: 0\n", env.ws.display()));
}
