//! bash in the real session microVM (QEMU microvm; TCG on hosts whose KVM does not work).
//! These tests need QEMU and the image that `bash bundle/vm-image.sh` builds; without them they
//! fail and say so: bash never falls back to the host.
//!
//! Most tests share one VM, as one session's calls would; those that break their VM on purpose
//! get their own.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use abhed::agent::CallOutcome;
use abhed::approval::gate::NoOperator;
use abhed::tools::ErrorCode;
use abhed::tools::bash::MAX_COMMAND_BYTES;
use common::vm::Vm;

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

/// Issue 15 (found in review): under `security_model=none` a guest running as root made a
/// setuid-root program in the workspace, on the host. The mapped share keeps what the guest
/// sets (modes, owners, symlinks, devices) in extended attributes: the guest sees them, the
/// host gets plain files of its own user.
#[test]
fn the_guest_cannot_make_a_setuid_program_a_symlink_or_a_device_on_the_host() {
    let vm = Vm::shared();
    let d = vm.path("mapped");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("host.sh"), "#!/bin/sh\necho host-made\n").unwrap();
    std::fs::set_permissions(d.join("host.sh"), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = vm.bash_yes(json!({"command": format!(
        "cd {} && cp /bin/busybox suid && chmod 4755 suid && ln -s /etc lnk && mknod dev c 1 3; \
         printf '#!/bin/sh\\necho guest-made\\n' > g.sh && chmod 755 g.sh && ./g.sh && ./host.sh && \
         stat -c '%a %F' suid lnk g.sh", d.display()), "description": "test"}));
    let text = out.text();
    // The guest sees what it made.
    assert!(text.contains("guest-made") && text.contains("host-made"), "{text}");
    assert!(text.contains("4755 regular file") && text.contains("symbolic link"), "{text}");
    // The host does not.
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let suid = std::fs::symlink_metadata(d.join("suid")).unwrap();
    assert_eq!(suid.permissions().mode() & 0o7777, 0o644, "no setuid bit, not even executable, on the host");
    let lnk = std::fs::symlink_metadata(d.join("lnk")).unwrap();
    assert!(lnk.is_file(), "the guest's symlink is a plain file on the host");
    assert_eq!(std::fs::read_to_string(d.join("lnk")).unwrap(), "/etc");
    if let Ok(dev) = std::fs::symlink_metadata(d.join("dev")) {
        assert!(!dev.file_type().is_char_device(), "no device node on the host");
    }
    assert_eq!(
        std::fs::metadata(d.join("host.sh")).unwrap().permissions().mode() & 0o777,
        0o755,
        "the host's modes stay"
    );
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

/// The job id and log of a background observation.
fn job_of(text: &str) -> (String, String) {
    assert!(text.starts_with("Started in the background as job "), "{text}");
    let id = text["Started in the background as job ".len()..].split(',').next().unwrap().to_string();
    let log = text.split("Output (stdout and stderr): ").nth(1).unwrap().split(' ').next().unwrap().to_string();
    (id, log)
}

/// Poll `command` until its output contains `want` (30 s at most).
fn wait_for(vm: &Vm, command: &str, want: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = vm.bash(command).text();
        if text.contains(want) {
            return text;
        }
        assert!(Instant::now() < deadline, "never saw {want:?}: {text}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_background_job_can_be_read_back_and_killed_by_its_id() {
    let vm = Vm::shared();
    let out = vm.bash_yes(json!({
        "command": "for i in 1 2 3; do echo tick $i; done; sleep 300",
        "description": "a long job",
        "background": true
    }));
    let text = out.text();
    let (id, log) = job_of(&text);
    assert_eq!(id.len(), 8, "{text}");
    assert!(text.contains(&format!("Stop it with `abhed-job kill {id}`")), "{text}");
    // The observation says how long the job lives (this sandbox belongs to a run).
    assert!(text.ends_with("last as long as this session's VM: until this run ends (or the VM crashes): later bash calls of this run can read and stop it."), "{text}");
    // The job keeps running between calls: its output is there to read.
    wait_for(vm, &format!("cat {log}"), "tick 3");
    assert_eq!(vm.bash(&format!("abhed-job status {id}")).text(), "running\nExit code: 0");
    let out = vm.bash_yes(json!({"command": format!("abhed-job kill {id}"), "description": "stop the job"}));
    assert_eq!(out.text(), format!("sent SIGTERM to job {id} (every process of its group)\nExit code: 0"));
    wait_for(vm, &format!("abhed-job status {id}"), "ended with exit code 143");
    // Once it has ended, the same command is harmless.
    let out = vm.bash_yes(json!({"command": format!("abhed-job kill {id}"), "description": "stop the job again"}));
    assert_eq!(
        out.text(),
        format!("job {id} has already ended (ended with exit code 143); nothing to kill\nExit code: 0")
    );
}

/// A job whose shell has exited but whose children run on keeps its handle: the id still
/// reaches them, and only them.
#[test]
fn a_job_handle_reaches_what_the_job_left_running() {
    let vm = Vm::shared();
    let out = vm.bash_yes(json!({"command": "sleep 300 & exit 3", "description": "leave a child", "background": true}));
    let (id, _) = job_of(&out.text());
    wait_for(vm, &format!("abhed-job status {id}"), "its shell exited with 3; processes it started are still running");
    let out = vm.bash_yes(json!({"command": format!("abhed-job kill {id} KILL"), "description": "stop it"}));
    assert!(out.text().starts_with(&format!("sent SIGKILL to job {id}")), "{}", out.text());
    wait_for(vm, &format!("abhed-job status {id}"), "ended with exit code 3");
}

/// The old handle was a pid (`kill -- -102`), and a fresh VM gives out the same pids: it killed
/// an unrelated shell. A job id names one job in one VM; in another VM its kill does nothing.
#[test]
fn a_job_handle_from_another_vm_kills_nothing() {
    let first = Vm::new();
    let out = first.bash_yes(json!({"command": "sleep 300", "description": "job in VM 1", "background": true}));
    let (old_id, _) = job_of(&out.text());
    let old_pgid = first.last_meta()["background"]["pgid"].as_i64().unwrap();
    drop(first);
    let second = Vm::new();
    let out = second.bash_yes(json!({"command": "sleep 300", "description": "job in VM 2", "background": true}));
    let (new_id, _) = job_of(&out.text());
    let new_pgid = second.last_meta()["background"]["pgid"].as_i64().unwrap();
    assert_ne!(old_id, new_id);
    let out = second.bash_yes(json!({"command": format!("abhed-job kill {old_id}"), "description": "stale handle"}));
    assert_eq!(
        out.text(),
        format!(
            "abhed-job: there is no job {old_id} in this VM. Jobs live only as long as the VM that runs them: this one ended with its VM, or ran in another.\nExit code: 1"
        )
    );
    // The other job, very likely under the very pid the old handle had, still runs.
    assert_eq!(
        second.bash(&format!("abhed-job status {new_id}")).text(),
        "running\nExit code: 0",
        "old pgid {old_pgid}, new {new_pgid}"
    );
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
    // SysRq is closed to commands (the init puts /dev/null over its trigger): killing the agent
    // is what ends a guest from inside now (its init then powers the VM off).
    let out = vm.bash_yes(
        json!({"command": "kill -9 $(pidof abhed-guest); sleep 10", "description": "end the VM from inside"}),
    );
    let Err(e) = &out.result else { panic!("{}", out.text()) };
    assert_eq!(e.code, ErrorCode::SandboxCrashed);
    assert!(e.message.contains("The next bash call boots a fresh VM"), "{}", e.message);
    assert!(e.message.contains("The command may have run in part"), "{}", e.message);
    assert!(e.mutated);
    // A fresh VM: the old one's /tmp is gone.
    let out = vm.bash("cat /tmp/state 2>&1; echo booted");
    assert!(out.text().contains("No such file") && out.text().contains("booted"), "{}", out.text());
}

/// What QEMU keeps on the host for this process's VMs: its private directories' files.
fn vm_dir_bytes() -> u64 {
    let me = std::process::id().to_string();
    let mut total = 0;
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else { continue };
        let rest = &stat[stat.rfind(')').unwrap() + 1..];
        if rest.split_whitespace().nth(1) != Some(me.as_str()) {
            continue;
        }
        let cmdline =
            String::from_utf8_lossy(&std::fs::read(e.path().join("cmdline")).unwrap_or_default()).into_owned();
        let Some(sock) =
            cmdline.split("path=").find(|p| p.starts_with(&format!("{}/abhed-vm-", std::env::temp_dir().display())))
        else {
            continue;
        };
        let dir = Path::new(sock.split(',').next().unwrap()).parent().unwrap().to_path_buf();
        for f in std::fs::read_dir(&dir).unwrap().flatten() {
            total += f.metadata().unwrap().len();
        }
    }
    total
}

/// The guest's console was a file that grew without end (270 KB/s from a guest printing to
/// it). Only its last 64 KiB are kept, in memory, and a crash report still quotes its end.
#[test]
fn a_console_flood_is_not_kept_and_a_crash_still_quotes_the_console() {
    let vm = Vm::new();
    let out = vm.bash_yes(json!({
        "command": "head -c 1000000 /dev/zero | tr '\\0' x > /dev/ttyS0; echo flooded",
        "description": "flood the console",
        "timeout_ms": 120000
    }));
    assert_eq!(out.text(), "flooded\nExit code: 0");
    let kept = vm_dir_bytes();
    assert!(kept < 64 * 1024, "the VM's directory holds {kept} bytes after a 1 MB console flood");
    let out = vm.bash_yes(json!({"command": "kill -9 $(pidof abhed-guest); sleep 10", "description": "end the guest"}));
    let Err(e) = &out.result else { panic!("{}", out.text()) };
    assert_eq!(e.code, ErrorCode::SandboxCrashed);
    // The console's last lines, after the flood: the init's own and the kernel's power-down.
    assert!(
        e.message.contains("the guest console ended with: ") && e.message.contains("reboot: Power down"),
        "{}",
        e.message
    );
}

/// A long command: 153 KB went to `bash -c` as one argument, which the kernel refuses above
/// 128 KiB, and came back as `sandbox_crashed ... Some changes were made` though nothing ran.
#[test]
fn a_long_command_runs_and_one_past_the_cap_or_with_a_nul_is_refused_unchanged() {
    let vm = Vm::shared();
    let cmd = format!("x='{}'; echo ${{#x}}", "a".repeat(153_000));
    assert_eq!(vm.bash(&cmd).text(), "153000\nExit code: 0");
    // Line numbers are the command's own.
    assert_eq!(
        vm.bash("true\nnot-a-command-here 2>&1 | sed 's/.*: line/line/'").text(),
        "line 2: not-a-command-here: command not found\nExit code: 0"
    );

    let marker = vm.path("nul-marker");
    for (cmd, says) in [
        (
            format!("touch {} #{}", marker.display(), "a".repeat(MAX_COMMAND_BYTES)),
            "the most bash takes is 1048576 bytes (1 MiB)",
        ),
        (format!("touch {}\0; echo", marker.display()), "contains a NUL character (at byte"),
    ] {
        let out = vm.bash(&cmd);
        let Err(e) = &out.result else { panic!("ran: {}", out.text()) };
        assert_eq!(e.code, ErrorCode::InvalidArguments);
        assert!(e.message.contains(says), "{}", e.message);
        assert!(!e.mutated && e.render().ends_with("Nothing was changed."), "{}", e.render());
        assert!(!marker.exists());
    }
}

/// ANSI escapes, NULs and bytes that are not UTF-8 reach the model marked, not raw.
#[test]
fn control_sequences_and_invalid_utf8_in_output_are_marked() {
    let out = Vm::shared().bash(r"printf '\033[1;31mred\033[0m|\000|\377\376|ok\n'");
    assert_eq!(
        out.text(),
        "red|\\x00|\u{FFFD}\u{FFFD}|ok\nNote: 2 terminal escape sequences (colours, cursor movement) removed from the output.\nNote: 1 control character (such as NUL) shown as \\xNN (C1 controls as \\u{NN}).\nNote: 2 bytes of the output are not UTF-8, shown as U+FFFD (\u{FFFD}). To see the bytes, send the output to a file and inspect it with `od -c` or `xxd`.\nExit code: 0"
    );
}

/// The workspace had no quota: 400 MB went through the share in seconds. One call may add
/// `sandbox.disk_quota_mib` to the workspace's disk; past it the command and the jobs stop, a
/// job writing between calls is stopped and reported at the next call, and a guest that keeps
/// writing after the stop (here it freezes the agent first) loses its VM.
#[test]
fn the_disk_quota_stops_a_call_a_job_and_a_guest_that_ignores_it() {
    // A tmpfs of its own: other programs writing to the build disk would count too.
    let base = if Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
    let vm = Vm::in_dir(&base, |c| c.sandbox.disk_quota_mib = 64);
    let size = |f: &str| std::fs::metadata(vm.path(f)).map(|m| m.len()).unwrap_or(0);
    let big = vm.path("big");
    let out = vm.bash_yes(json!({
        "command": format!("dd if=/dev/zero of={} bs=1M count=400 2>&1; echo finished", big.display()),
        "description": "write 400 MB",
        "timeout_ms": 300000
    }));
    let text = out.text();
    assert!(out.ok(), "{text}");
    assert!(text.contains("Stopped: the disk that holds the workspace lost "), "{text}");
    assert!(
        text.contains("more than the 64 MiB one bash call may add (sandbox.disk_quota_mib = 64 in the user config)"),
        "{text}"
    );
    assert!(text.contains("The command and every background job were killed. What was written before the stop is still in the workspace"), "{text}");
    assert!(text.ends_with("Exit code: none (killed by signal 9, SIGKILL)"), "{text}");
    assert!(!text.contains("finished"), "{text}");
    assert!(size("big") < 300 * 1024 * 1024, "{} bytes written", size("big"));
    assert_eq!(vm.last_meta()["disk_stopped"], true);

    // The session goes on, measured from each call's start.
    assert_eq!(vm.bash(&format!("rm {}; echo ok", big.display())).text(), "ok\nExit code: 0");

    let out = vm.bash_yes(json!({
        "command": format!("dd if=/dev/zero of={} bs=1M count=400", vm.path("bg").display()),
        "description": "write 400 MB in the background",
        "background": true
    }));
    let (id, _) = job_of(&out.text());
    // Wait until the job stops writing (stopped by the watchdog, or done).
    let mut last = u64::MAX;
    loop {
        std::thread::sleep(Duration::from_secs(1));
        let now = size("bg");
        if now == last && now > 0 {
            break;
        }
        last = now;
    }
    assert!(size("bg") < 300 * 1024 * 1024, "the job wrote {} bytes", size("bg"));
    let out = vm.bash(&format!("abhed-job status {id}; rm {}", vm.path("bg").display()));
    let text = out.text();
    assert!(text.starts_with("ended with exit code 137\nNote: before this call, while background jobs ran, the disk that holds the workspace lost "), "{text}");
    assert!(text.contains("; every background job was stopped."), "{text}");

    let out = vm.bash_yes(json!({
        "command": format!("kill -STOP $(pidof abhed-guest); dd if=/dev/zero of={} bs=1M count=700", vm.path("evil").display()),
        "description": "freeze the agent, then write",
        "timeout_ms": 300000
    }));
    let Err(e) = &out.result else { panic!("{}", out.text()) };
    assert_eq!(e.code, ErrorCode::SandboxCrashed);
    assert!(e.message.contains("the guest did not stop writing when asked, so the VM was killed"), "{}", e.message);
    assert!(e.mutated);
    assert!(size("evil") < 600 * 1024 * 1024, "{} bytes written", size("evil"));
    let _ = std::fs::remove_file(vm.path("evil"));
    assert_eq!(vm.bash("echo alive").text(), "alive\nExit code: 0");
}

/// A VM that does not boot ran nothing: the error says so ("Nothing was changed"), never "may
/// have run in part".
#[test]
fn a_failed_boot_says_nothing_ran() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let qemu = dir.path().join("qemu-system-x86_64");
    std::fs::write(&qemu, "#!/bin/sh\necho cannot start here >&2\nexit 1\n").unwrap();
    std::fs::set_permissions(&qemu, std::fs::Permissions::from_mode(0o755)).unwrap();
    let vm = Vm::with(|c| c.sandbox.qemu = Some(qemu.clone()));
    let marker = vm.path("boot-marker");
    let out = vm.bash(&format!("touch {}", marker.display()));
    let Err(e) = &out.result else { panic!("{}", out.text()) };
    assert_eq!(e.code, ErrorCode::SandboxUnavailable);
    assert!(
        e.message.starts_with("the command was not run: the sandbox VM did not boot: QEMU exited during start-up; QEMU said: cannot start here"),
        "{}",
        e.message
    );
    assert!(!e.mutated && e.render().ends_with("Nothing was changed."), "{}", e.render());
    assert!(!marker.exists());
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

/// Issue 17: every program a command executes is checked in the guest, on the argv the kernel
/// copied, whatever the command line looks like. Each of these got past the static check in the
/// attack pass (or would have, in ask mode with `echo*` allowed) and deleted the canary; here the
/// canary survives every one, and each refusal is in the observation.
#[test]
fn the_exec_check_refuses_what_the_command_line_hides() {
    let vm = Vm::shared();
    let cases = [
        "r\\\nm -rf C",
        "x='$(rm -rf C)'; echo ${x@P}",
        "x='a[$(rm -rf C)]'; echo $((x))",
        "PS4='$(rm -rf C) '; set -x; :",
        "printf -v 'a[$(rm -rf C)]' x",
        "mapfile -C 'rm -rf C #' -c 1 <<< x",
        "bash -s <<< 'rm -rf C'",
        "echo -rf | xargs rm C",
        "env -S'rm -rf C'",
        "cp /usr/bin/rm k && ./k -rf C",
        "rm --recurs --forc C",
        "find . -maxdepth 1 -name C -exec rm -rf {} +",
    ];
    let root = vm.path("exec-check");
    let mut by_exec = 0;
    for case in cases {
        std::fs::create_dir_all(root.join("C/sub")).unwrap();
        std::fs::write(root.join("C/sub/f"), "keep").unwrap();
        let out = vm.bash(&format!("cd {} && {case}", root.display()));
        let text = out.text();
        assert!(root.join("C/sub/f").exists(), "{case:?} deleted the canary:\n{text}");
        // Refused by the first look (an approval error, nothing ran), or it ran and the exec
        // check refused the program inside it.
        if out.ok() {
            let meta = vm.last_meta();
            assert!(
                meta["exec_denied"].as_array().is_some_and(|d| !d.is_empty()),
                "{case:?}: ran, no exec refused\n{text}"
            );
            assert!(text.contains("was refused when it was about to run"), "{case:?}: {text}");
            assert!(text.contains("Note: the approval policy refused"), "{case:?}: {text}");
            by_exec += 1;
        }
    }
    // Most of these are invisible to the first look: the exec check is what stopped them. (The
    // first look reads the destructive list through the guest's normaliser, so it refuses a few
    // itself, `rm --recurs --forc` among them; 8 were left to the exec check on 2026-12-06.)
    assert!(by_exec >= 8, "only {by_exec} of {} were stopped at exec time", cases.len());
    // A git alias is expanded inside git, with no exec of its own: the normaliser reads it from
    // `-c`, the environment and the config files. A tracked, changed canary keeps its change.
    let repo = vm.path("exec-git");
    std::fs::create_dir_all(&repo).unwrap();
    std::fs::write(repo.join("f"), "committed").unwrap();
    let setup = format!(
        "cd {} && git init -q . && git add f && git -c user.name=t -c user.email=t@t commit -qm one && echo changed > f",
        repo.display()
    );
    assert!(vm.bash_yes(json!({"command": setup, "description": "test"})).ok());
    for case in [
        "git -c alias.nuke='reset --hard' nuke",
        "git config alias.zap 'reset --hard' && git zap",
        "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=alias.z GIT_CONFIG_VALUE_0='reset --hard' git z",
        "git reset --har",
    ] {
        let text = vm.bash(&format!("cd {} && {case}", repo.display())).text();
        assert_eq!(std::fs::read_to_string(repo.join("f")).unwrap(), "changed\n", "{case:?}:\n{text}");
        // At exec time, or by the first look where the alias is on the command line (it reads
        // `-c` the way the guest does).
        assert!(
            text.contains("`git reset --hard` was refused") || text.contains("discards all uncommitted changes"),
            "{case:?}: {text}"
        );
    }
}

/// The exec check asks nothing of the commands an agent runs all day.
#[test]
fn the_exec_check_leaves_common_commands_alone() {
    let vm = Vm::shared();
    let root = vm.path("exec-common");
    std::fs::create_dir_all(root.join("build")).unwrap();
    std::fs::write(root.join("build/o"), "x").unwrap();
    let command = format!(
        "cd {} && git init -q . && git status --short && pwd && ls | wc -l && python3 -c 'print(6*7)' && rm -r build && ls -a . > /dev/null && printenv PATH > /dev/null && which -a python3 > /dev/null && echo fine",
        root.display()
    );
    let out = vm.bash(&command);
    let text = out.text();
    assert!(out.ok() && text.contains("42\n") && text.contains("fine\n"), "{text}");
    assert_eq!(vm.last_meta()["exec_denied"], json!([]), "{text}");
    assert!(!root.join("build").exists());
}
