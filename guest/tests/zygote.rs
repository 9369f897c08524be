//! The zygote (abhed_guest::zygote) on this machine's kernel: supervisors forked from it run
//! the command, report refusals, keep the exit status, die with their group, and leave the
//! command no descriptor but its own. `harness = false`: the zygote must be forked while the
//! process is single-threaded, which a test harness's process is not.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Read as _;
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

use abhed_guest::policy::ExecPolicy;
use abhed_guest::supervise::{Args, Mode, Report};
use abhed_guest::zygote::{self, Zygote};

struct Run {
    code: Option<i32>,
    signal: Option<i32>,
    output: String,
    reports: Vec<Report>,
}

fn env() -> Vec<(String, String)> {
    vec![("PATH".into(), "/usr/bin:/bin".into()), ("ZYGOTE_TEST".into(), "1".into())]
}

/// `script` under a supervisor from `z`; `kill_after` kills its group after that long.
fn run(z: &mut Zygote, policy: &ExecPolicy, script: &str, kill_after: Option<Duration>) -> Run {
    use std::os::unix::process::ExitStatusExt as _;
    let args =
        Args { mode: Mode::Exec, policy: policy.clone(), shell: vec!["/bin/bash".into(), "-c".into(), script.into()] };
    let (mut out, out_tx) = std::io::pipe().unwrap();
    let (mut reports, report_tx) = std::io::pipe().unwrap();
    let err_tx = out_tx.try_clone().unwrap();
    let started = z
        .supervise(
            args.to_argv().unwrap(),
            env(),
            OwnedFd::from(report_tx),
            OwnedFd::from(out_tx),
            OwnedFd::from(err_tx),
        )
        .unwrap();
    let pid = started.pid;
    if let Some(after) = kill_after {
        std::thread::sleep(after);
        // The supervisor's pid is its process group.
        assert_eq!(kill_group(pid), 0);
    }
    let status = zygote::wait(started);
    // Gone when wait returns: after a command that ended by itself, nothing is left in its
    // group for the agent to take for a process left running. (Killed, its shell's children
    // may linger as zombies until init reaps them.)
    if kill_after.is_none() {
        assert_ne!(kill_group(pid), 0, "the group still exists after wait");
    }
    let mut output = String::new();
    out.read_to_string(&mut output).unwrap();
    let mut text = String::new();
    reports.read_to_string(&mut text).unwrap();
    Run {
        code: status.code(),
        signal: status.signal(),
        output,
        reports: text.lines().map(|l| serde_json::from_str(l).unwrap()).collect(),
    }
}

#[allow(unsafe_code)]
fn kill_group(pgid: i32) -> i32 {
    // SAFETY: a plain syscall; a negative pid addresses the group.
    unsafe { libc::kill(-pgid, libc::SIGKILL) }
}

/// Close every descriptor above 2 that this process inherited (whatever started the test may
/// leak some), as the agent in the VM starts with none: what the command holds is then ours.
#[allow(unsafe_code)]
fn close_inherited() {
    let fds: Vec<i32> = std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|&fd| fd > 2)
        .collect();
    for fd in fds {
        // SAFETY: closing descriptors nothing in this single-threaded process uses yet (the
        // directory's own is gone by now and fails harmlessly).
        unsafe { libc::close(fd) };
    }
}

fn main() {
    close_inherited();
    // First, while this process has one thread.
    let mut z = Zygote::start(false).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("C/sub")).unwrap();
    std::fs::write(dir.path().join("C/sub/f"), "keep").unwrap();
    let cd = format!("cd '{}' && ", dir.path().display());
    let policy = ExecPolicy::default();

    // Output, exit status, and the environment given, nothing else.
    let r = run(&mut z, &policy, &format!("{cd}echo out; echo err >&2; ls C; env | sort; exit 3"), None);
    assert_eq!(r.code, Some(3), "{}", r.output);
    assert!(r.output.starts_with("out\nerr\nsub\n"), "{}", r.output);
    assert!(r.output.contains("PATH=/usr/bin:/bin\n") && r.output.contains("ZYGOTE_TEST=1\n"), "{}", r.output);
    assert!(!r.output.contains("HOME="), "the test's own environment leaked: {}", r.output);
    assert!(r.reports.is_empty());

    // A destructive exec is refused and reported; the canary stays.
    let r = run(&mut z, &policy, &format!("{cd}rm -rf C; echo after"), None);
    assert!(dir.path().join("C/sub/f").exists(), "{}", r.output);
    assert!(r.output.contains("after"), "{}", r.output);
    assert_eq!(r.reports.len(), 1, "{}", r.output);

    // The shell holds 0, 1 and 2 only: not the status pipe, the report channel or the socket.
    // (Listed by a child: a glob in the shell would list its own open directory.)
    let r = run(&mut z, &policy, "ls /proc/$$/fd; true", None);
    assert_eq!(r.output, "0\n1\n2\n", "{}", r.output);

    // Killed with its group: the status says SIGKILL, and it comes at once.
    let t0 = Instant::now();
    let r = run(&mut z, &policy, "sleep 30", Some(Duration::from_millis(300)));
    assert_eq!((r.code, r.signal), (None, Some(libc::SIGKILL)), "{}", r.output);
    assert!(t0.elapsed() < Duration::from_secs(10));

    // Many in a row from one zygote.
    for i in 0..20 {
        let r = run(&mut z, &policy, &format!("echo {i}"), None);
        assert_eq!((r.code, r.output), (Some(0), format!("{i}\n")));
    }
    println!("zygote: 5 cases pass");
}
