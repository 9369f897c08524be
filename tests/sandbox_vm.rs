//! bash in the real session microVM (QEMU microvm; TCG on hosts whose KVM does not work).
//! These tests need QEMU and the image that `bash bundle/vm-image.sh` builds; without them they
//! fail and say so: bash never falls back to the host.
//!
//! Most tests share one VM, as one session's calls would; those that break their VM on purpose
//! get their own.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use abhed::agent::{CallOutcome, execute};
use abhed::approval::gate::{Answer, Approvals, Approver, NoOperator, Question};
use abhed::config::Config;
use abhed::model::ToolCall;
use abhed::sandbox::{SessionSandbox, Workspace};
use abhed::store::Store;
use abhed::tools::{ErrorCode, Registry, ToolContext};

/// Stands in for an operator who answers yes: for the tests whose point is what the VM contains,
/// not what the policy lets through.
struct Yes;

impl Approver for Yes {
    fn ask(&self, _: &Question<'_>) -> Option<Answer> {
        Some(Answer::Once)
    }
}

struct Vm {
    _tmp: tempfile::TempDir,
    ws: PathBuf,
    workspace: Workspace,
    config: Config,
    sandbox: SessionSandbox,
}

impl Vm {
    fn new() -> Vm {
        Vm::with(|_| {})
    }

    fn with(adjust: impl FnOnce(&mut Config)) -> Vm {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        let ws = ws.canonicalize().unwrap();
        let workspace = Workspace::new(&ws, &[]).unwrap();
        let mut config = Config::default();
        // The probe belongs to `abhed doctor`; tests boot the way CI's host can.
        config.sandbox.accel = std::env::var("ABHED_TEST_ACCEL").unwrap_or_else(|_| "tcg".into());
        config.sandbox.boot_timeout_s = 120;
        adjust(&mut config);
        let sandbox = SessionSandbox::new(&config.sandbox, &workspace);
        Vm { _tmp: tmp, ws, workspace, config, sandbox }
    }

    /// The VM most tests share, booted by whichever test comes first.
    fn shared() -> &'static Vm {
        static VM: OnceLock<Vm> = OnceLock::new();
        VM.get_or_init(Vm::new)
    }

    fn call_with(&self, approver: Box<dyn Approver>, args: Value) -> (CallOutcome, Vec<Value>) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("abhed.db")).unwrap();
        let session = store.create_session(&self.ws).unwrap();
        let (approvals, _) = Approvals::from_config(&self.config, approver).unwrap();
        let ctx = ToolContext {
            workspace: &self.workspace,
            config: &self.config,
            session: &session,
            sandbox: &self.sandbox,
            approvals: &approvals,
            delegate: None,
            output_budget: None,
        };
        let call = ToolCall { name: "bash".into(), arguments: args.to_string() };
        let out = execute(&Registry::native(), &ctx, &call).unwrap();
        let events =
            session.events().unwrap().into_iter().map(|e| json!({"kind": e.kind, "payload": e.payload})).collect();
        (out, events)
    }

    fn bash(&self, command: &str) -> CallOutcome {
        self.call_with(Box::new(NoOperator), json!({"command": command, "description": "test"})).0
    }

    fn bash_yes(&self, args: Value) -> CallOutcome {
        self.call_with(Box::new(Yes), args).0
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.ws.join(rel)
    }
}

fn observation(events: &[Value]) -> &Value {
    &events.iter().find(|e| e["kind"] == "observation").unwrap()["payload"]
}

#[test]
fn commands_run_and_their_output_comes_back() {
    let vm = Vm::shared();
    let out = vm.bash("echo hello; echo to-stderr >&2");
    assert!(out.ok(), "{}", out.text());
    assert_eq!(out.text(), "hello\nto-stderr\nExit code: 0");
}

#[test]
fn a_nonzero_exit_is_an_observation_not_an_error() {
    let out = Vm::shared().bash("echo failing; exit 3");
    assert!(out.ok());
    assert_eq!(out.text(), "failing\nExit code: 3");
}

#[test]
fn every_observation_names_the_backend_that_ran_it() {
    let vm = Vm::shared();
    let (out, events) = vm.call_with(Box::new(NoOperator), json!({"command": "true", "description": "nothing"}));
    assert_eq!(out.text(), "(no output)\nExit code: 0");
    let meta = &observation(&events)["meta"];
    assert_eq!(meta["sandbox"]["backend"], "microvm");
    assert!(["tcg", "kvm"].contains(&meta["sandbox"]["accel"].as_str().unwrap()), "{meta}");
    assert_eq!(meta["sandbox"]["shell"], "/bin/bash");
    assert_eq!(meta["exit_code"], 0);
    // The policy's decision is an event too, between the action and the observation.
    let kinds: Vec<&str> = events.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["action", "approval", "observation"]);
}

#[test]
fn a_file_written_in_the_guest_appears_on_the_host_and_back() {
    let vm = Vm::shared();
    let f = vm.path("from-guest.txt");
    let out = vm.bash(&format!("echo written-in-vm > {}", f.display()));
    assert!(out.ok(), "{}", out.text());
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "written-in-vm\n");
    std::fs::write(vm.path("from-host.txt"), "written-on-host\n").unwrap();
    assert_eq!(vm.bash(&format!("cat {}", vm.path("from-host.txt").display())).text(), "written-on-host\nExit code: 0");
}

#[test]
fn nothing_outside_the_workspace_changes_on_the_host() {
    let vm = Vm::shared();
    let marker = format!("abhed-escape-{}", std::process::id());
    let targets = [format!("/tmp/{marker}"), format!("/root/{marker}"), format!("/{marker}")];
    let cmd = targets.iter().map(|t| format!("echo x > {t}")).collect::<Vec<_>>().join("; ");
    let out = vm.bash(&format!("{cmd}; ls /tmp/{marker} && echo guest-has-it; touch /usr/{marker} 2>&1; true"));
    // The guest has its own /tmp and root; /usr is the host's, read-only.
    assert!(out.text().contains("guest-has-it"), "{}", out.text());
    assert!(out.text().contains("Read-only file system"), "{}", out.text());
    for t in targets.iter().chain([&format!("/usr/{marker}")]) {
        assert!(!Path::new(t).exists(), "{t} appeared on the host");
    }
}

#[test]
fn the_guest_has_no_network_but_loopback() {
    let out = Vm::shared().bash("ls /sys/class/net; cat /proc/net/route | wc -l");
    // One interface (lo); the routing table has only its header line.
    assert_eq!(out.text(), "lo\n1\nExit code: 0");
}

#[test]
fn the_working_directory_persists_but_shell_state_does_not() {
    let vm = Vm::shared();
    std::fs::create_dir_all(vm.path("cwd-test/sub")).unwrap();
    // One session: the same sandbox, consecutive calls. Other tests share the VM but their
    // commands start wherever this one left off only if they rely on the cwd, which they don't.
    let dir = vm.path("cwd-test/sub");
    let out = vm.bash(&format!("cd {} && export FOO=set", dir.display()));
    assert!(out.text().ends_with(&format!("Working directory is now {}", dir.display())), "{}", out.text());
    let out = vm.bash("pwd; echo ${FOO:-unset}");
    assert!(out.text().starts_with(&format!("{}\nunset\n", dir.display())), "{}", out.text());
    vm.bash(&format!("cd {}", vm.ws.display()));
}

#[test]
fn a_timeout_kills_the_whole_process_group() {
    let vm = Vm::shared();
    let late = vm.path("late-marker");
    let start = Instant::now();
    let out = vm.bash_yes(json!({
        "command": format!("(sleep 3; touch {}) & sleep 60", late.display()),
        "description": "sleep past the timeout",
        "timeout_ms": 1000
    }));
    assert!(out.ok(), "{}", out.text());
    assert!(start.elapsed() < Duration::from_secs(30));
    assert!(
        out.text().contains("Timed out after 1000 ms: the command and every process it started were killed."),
        "{}",
        out.text()
    );
    assert!(out.text().contains("background: true"), "{}", out.text());
    std::thread::sleep(Duration::from_secs(4));
    assert!(!late.exists(), "a process of the timed-out command lived on");
}

#[test]
fn long_output_keeps_its_head_and_tail() {
    let out = Vm::shared().bash("seq 1 30000");
    let text = out.text();
    assert!(text.starts_with("1\n2\n3\n"), "{}", &text[..50]);
    assert!(text.ends_with("29999\n30000\nExit code: 0"), "{}", &text[text.len() - 50..]);
    // seq 1 30000 prints 168894 bytes; 12000 + 18000 characters of it are kept.
    assert!(text.contains("\n[... 138894 bytes cut from the middle of 168894 bytes of output; the first 12000 and last 18000 characters are shown."), "{text}");
    let CallOutcome { result: Ok(o), .. } = &out else { panic!() };
    assert!(o.truncated);
}

#[test]
fn a_background_job_can_be_read_back_and_killed() {
    let vm = Vm::shared();
    let out = vm.bash_yes(json!({
        "command": "for i in 1 2 3; do echo tick $i; done; sleep 300",
        "description": "a long job",
        "background": true
    }));
    let text = out.text();
    assert!(text.starts_with("Started in the background as pid "), "{text}");
    let pid: i32 = text["Started in the background as pid ".len()..].split(' ').next().unwrap().parse().unwrap();
    let log = text.split("Output (stdout and stderr): ").nth(1).unwrap().split(' ').next().unwrap().to_string();
    let exit_file = text.split("its exit code is written to ").nth(1).unwrap().split(';').next().unwrap().to_string();
    // The job keeps running between calls: its output is there to read.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = vm.bash(&format!("cat {log}"));
        if out.text().contains("tick 3") {
            break;
        }
        assert!(Instant::now() < deadline, "{}", out.text());
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(vm.bash(&format!("kill -0 {pid} && echo running")).text(), "running\nExit code: 0");
    let out = vm.bash_yes(json!({"command": format!("kill -- -{pid}"), "description": "stop the job"}));
    assert!(out.text().ends_with("Exit code: 0"), "{}", out.text());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = vm.bash(&format!("cat {exit_file} 2>/dev/null; kill -0 {pid} 2>/dev/null && echo still-running"));
        if !out.text().contains("still-running") && out.text().starts_with("143") {
            break;
        }
        assert!(Instant::now() < deadline, "{}", out.text());
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_command_that_needs_a_terminal_is_rejected_before_it_runs() {
    let vm = Vm::shared();
    for cmd in ["vim notes.txt", "less Cargo.toml", "git rebase -i HEAD~3", "top"] {
        let out = vm.bash(cmd);
        let Err(e) = &out.result else { panic!("{cmd} ran: {}", out.text()) };
        assert_eq!(e.code, ErrorCode::InteractiveCommand, "{cmd}");
        assert!(e.message.contains("needs a terminal"), "{}", e.message);
    }
}

#[test]
fn a_denied_command_does_not_run_and_the_model_is_told_why() {
    let vm = Vm::shared();
    let marker = vm.path("denied-marker");
    let victim = vm.path("denied-victim");
    std::fs::create_dir_all(&victim).unwrap();
    let (out, events) = vm.call_with(
        Box::new(NoOperator),
        json!({"command": format!("touch {} && rm -rf {}", marker.display(), victim.display()), "description": "clean up"}),
    );
    let Err(e) = &out.result else { panic!("ran: {}", out.text()) };
    assert_eq!(e.code, ErrorCode::ApprovalDenied);
    assert!(e.message.contains("Nobody can answer an approval prompt in this run"), "{}", e.message);
    assert!(!marker.exists() && victim.exists(), "part of a denied command ran");
    let approval = &events.iter().find(|e| e["kind"] == "approval").unwrap()["payload"];
    assert_eq!(approval["decision"], "denied");
    assert_eq!(approval["by"], "no_operator");
}

#[test]
fn a_fork_bomb_stays_inside_the_vm() {
    let vm = Vm::new();
    let host_procs = || {
        std::fs::read_dir("/proc")
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().parse::<u32>().is_ok())
            .count()
    };
    let before = host_procs();
    let start = Instant::now();
    let out = vm.bash_yes(json!({"command": ":(){ :|:& };:", "description": "fork bomb", "timeout_ms": 5000}));
    assert!(start.elapsed() < Duration::from_secs(90), "the call did not come back");
    // The bomb's first shell returns at once, leaving its forks behind: the guest kills its whole
    // process group then (or at the timeout, or the VM goes down). The host is untouched.
    match &out.result {
        Ok(_) => assert!(
            out.text().contains("processes the command left running were stopped") || out.text().contains("Timed out"),
            "{}",
            out.text()
        ),
        Err(e) => assert_eq!(e.code, ErrorCode::SandboxCrashed, "{}", e.message),
    }
    assert!(host_procs() < before + 20, "host processes grew from {before} to {}", host_procs());
    // The session goes on (in a fresh VM if that one died).
    let out = vm.bash("echo alive");
    assert_eq!(out.text(), "alive\nExit code: 0");
}

#[test]
fn a_crashed_vm_is_reported_and_the_next_call_boots_a_fresh_one() {
    let vm = Vm::new();
    assert_eq!(vm.bash("echo first > /tmp/state; cat /tmp/state").text(), "first\nExit code: 0");
    let out =
        vm.bash_yes(json!({"command": "echo o > /proc/sysrq-trigger; sleep 10", "description": "power the VM off"}));
    let Err(e) = &out.result else { panic!("{}", out.text()) };
    assert_eq!(e.code, ErrorCode::SandboxCrashed);
    assert!(e.message.contains("The next bash call boots a fresh VM"), "{}", e.message);
    assert!(e.mutated);
    // A fresh VM: the old one's /tmp is gone.
    let out = vm.bash("cat /tmp/state 2>&1; echo booted");
    assert!(out.text().contains("No such file") && out.text().contains("booted"), "{}", out.text());
}

#[test]
fn host_toolchains_are_visible_read_only_with_their_bin_on_path() {
    use std::os::unix::fs::PermissionsExt as _;
    let tool = tempfile::tempdir().unwrap();
    let tool_dir = tool.path().canonicalize().unwrap();
    std::fs::create_dir(tool_dir.join("bin")).unwrap();
    let script = tool_dir.join("bin/hostlocal-tool");
    std::fs::write(&script, "#!/bin/sh\necho from-a-host-toolchain\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let vm = Vm::with(|c| c.sandbox.host_readonly = vec![tool_dir.clone()]);
    let out =
        vm.bash(&format!("hostlocal-tool; touch {}/new 2>&1 | grep -o 'Read-only file system'", tool_dir.display()));
    assert_eq!(out.text(), "from-a-host-toolchain\nRead-only file system\nExit code: 0");
    // Debian's alternatives (cc -> /etc/alternatives/cc -> gcc) resolve, as on the host.
    if Path::new("/usr/bin/cc").exists() {
        let out = vm.bash("cc --version >/dev/null && echo cc-works");
        assert_eq!(out.text(), "cc-works\nExit code: 0");
    }
}
