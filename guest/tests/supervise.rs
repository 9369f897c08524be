//! The exec supervisor on this machine's kernel (ptrace and seccomp as the guest has them): every
//! program a command runs is checked, however the command reaches it. The same cases run in the
//! real microVM through the bash tool (tests/sandbox_vm.rs, `the_exec_check_*`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Read as _;
use std::os::unix::process::CommandExt as _;
use std::process::{Command, Stdio};

use abhed_guest::policy::ExecPolicy;
use abhed_guest::supervise::{Args, Mode, Report, SUPERVISE_NAME};

struct Run {
    code: i32,
    output: String,
    reports: Vec<Report>,
}

fn supervised(policy: &ExecPolicy, script: &str, cwd: &std::path::Path) -> Run {
    let args =
        Args { mode: Mode::Exec, policy: policy.clone(), shell: vec!["/bin/bash".into(), "-c".into(), script.into()] };
    let (mut reader, writer) = std::io::pipe().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_abhed-guest"))
        .arg0(SUPERVISE_NAME)
        .args(args.to_argv().unwrap())
        .current_dir(cwd)
        .stdin(Stdio::from(writer))
        .output()
        .unwrap();
    let mut text = String::new();
    reader.read_to_string(&mut text).unwrap();
    let reports = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let mut output = String::from_utf8_lossy(&out.stdout).into_owned();
    output.push_str(&String::from_utf8_lossy(&out.stderr));
    Run { code: out.status.code().unwrap_or(-1), output, reports }
}

fn canary() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("C/sub")).unwrap();
    std::fs::write(dir.path().join("C/sub/f"), "keep").unwrap();
    dir
}

#[test]
fn an_allowed_command_runs_and_keeps_its_exit_status() {
    let dir = canary();
    let r = supervised(&ExecPolicy::default(), "echo hi; ls C; exit 3", dir.path());
    assert_eq!(r.code, 3, "{}", r.output);
    assert!(r.output.contains("hi\nsub\n"), "{}", r.output);
    assert!(r.reports.is_empty());
}

#[test]
fn a_destructive_exec_is_refused_however_the_command_reaches_it() {
    let cases = [
        "rm -rf C",
        "r\\\nm -rf C",
        "x='$(rm -rf C)'; echo ${x@P}",
        "x='a[$(rm -rf C)]'; echo $((x))",
        "PS4='$(rm -rf C) '; set -x; :",
        "bash -s <<< 'rm -rf C'",
        "echo -rf | xargs rm C",
        "env -S'rm -rf C'",
        "find . -maxdepth 1 -name C -exec rm -rf {} +",
        "cp /usr/bin/rm ./k && ./k -rf C",
        "rm --recurs --forc C",
        "printf 'rm -rf C' | sh",
        "eval 'rm -rf C'",
    ];
    for case in cases {
        let dir = canary();
        let r = supervised(&ExecPolicy::default(), case, dir.path());
        assert!(dir.path().join("C/sub/f").exists(), "{case}: the canary is gone\n{}", r.output);
        assert!(
            r.reports.iter().any(|Report::Denied { denial, .. }| denial.rule == "destructive"),
            "{case}: {:?}\n{}",
            r.reports,
            r.output
        );
        assert!(r.output.contains("was refused when it was about to run"), "{case}: {}", r.output);
    }
}

#[test]
fn a_deny_rule_holds_for_copies_and_git_globals() {
    let dir = canary();
    let policy = ExecPolicy { deny: vec!["git push*".into(), "curl*".into()], ..Default::default() };
    for case in ["git -C . push", "git --no-pager push origin", "git -c k=v push"] {
        let r = supervised(&policy, case, dir.path());
        assert!(
            r.reports.iter().any(|Report::Denied { denial, .. }| denial.rule == "deny:git push*"),
            "{case}: {:?}\n{}",
            r.reports,
            r.output
        );
    }
    if std::path::Path::new("/usr/bin/curl").exists() {
        let r = supervised(&policy, "cp /usr/bin/curl ./k && ./k --version", dir.path());
        assert!(
            r.reports.iter().any(|Report::Denied { denial, .. }| denial.rule == "deny:curl*"),
            "{:?}\n{}",
            r.reports,
            r.output
        );
    }
}

#[test]
fn common_commands_are_not_refused() {
    let dir = canary();
    let r = supervised(
        &ExecPolicy { deny: vec!["git push*".into()], ..Default::default() },
        "pwd && ls | wc -l && git --version && rm -r C/sub && echo done",
        dir.path(),
    );
    assert!(r.reports.is_empty(), "{:?}\n{}", r.reports, r.output);
    assert!(r.output.contains("done"), "{}", r.output);
    assert!(!dir.path().join("C/sub").exists());
}

/// seccomp_unotify(2)'s documented limit: the argv a check read can change before the kernel
/// copies it. A C program whose second thread flips the exec's path between `true` (allowed) and
/// `rm` (refused for `-rf C`) while the first execs, a few hundred times: the check after the
/// exec sees what the kernel really ran, so the canary survives every try.
#[test]
fn an_argv_rewritten_during_the_exec_is_caught_after_it() {
    let dir = canary();
    let src = dir.path().join("race.c");
    std::fs::write(
        &src,
        r#"
#include <pthread.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
static char path[64];
static void *flip(void *arg) {
    (void)arg;
    /* The barriers keep the compiler from dropping the first copy as a dead store. */
    for (;;) {
        strcpy(path, "/usr/bin/rm");
        __asm__ volatile("" ::: "memory");
        strcpy(path, "/usr/bin/true");
        __asm__ volatile("" ::: "memory");
    }
    return 0;
}
int main(void) {
    for (int i = 0; i < 300; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            strcpy(path, "/usr/bin/true");
            pthread_t t;
            pthread_create(&t, 0, flip, 0);
            char *argv[] = {"x", "-rf", "C", 0};
            execv(path, argv);
            _exit(1);
        }
        int st;
        waitpid(pid, &st, 0);
    }
    return 0;
}
"#,
    )
    .unwrap();
    let bin = dir.path().join("race");
    let cc = Command::new("cc").arg("-O1").arg("-pthread").arg(&src).arg("-o").arg(&bin).status();
    assert!(cc.is_ok_and(|s| s.success()), "cc is needed (build-essential)");
    let r = supervised(&ExecPolicy::default(), "./race", dir.path());
    assert!(dir.path().join("C/sub/f").exists(), "the race deleted the canary\n{}", r.output);
    // Most tries are refused at the first stop; any that won the race was killed at the second.
    assert!(r.reports.iter().any(|Report::Denied { .. }| true), "{}", r.output);
    let killed = r.reports.iter().filter(|Report::Denied { killed, .. }| *killed).count();
    eprintln!("race: {} refusals listed, {killed} of them killed after the exec", r.reports.len());
}

/// A supervised command cannot take the supervisor over: `ptrace` fails for it, and the
/// supervisor's memory is closed to it (not dumpable, and the command has no CAP_SYS_PTRACE).
/// Without these, root in the guest could attach to its supervisor and approve anything.
#[test]
fn a_command_cannot_attach_to_or_read_its_supervisor() {
    let dir = canary();
    let script = r#"python3 - "$PPID" <<'PY'
import ctypes, os, sys
ppid = int(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
r = libc.ptrace(16, ppid, None, None)  # PTRACE_ATTACH
print("attach", r, os.strerror(ctypes.get_errno()))
r = libc.ptrace(0, 0, None, None)  # PTRACE_TRACEME
print("traceme", r, os.strerror(ctypes.get_errno()))
try:
    open(f"/proc/{ppid}/mem", "rb").close()
    print("mem opened")
except OSError as e:
    print("mem", e.strerror)
PY"#;
    let r = supervised(&ExecPolicy::default(), script, dir.path());
    assert!(r.output.contains("attach -1 Operation not permitted"), "{}", r.output);
    assert!(r.output.contains("traceme -1 Operation not permitted"), "{}", r.output);
    assert!(r.output.contains("mem Permission denied"), "{}", r.output);
    assert!(!r.output.contains("mem opened"), "{}", r.output);
}

/// A command that retries a refused exec in a loop gets the first refusals in full and a count
/// of the rest: its output stays small, and the report pipe (which this harness reads only at
/// the end, like a slow agent) never fills and blocks the supervisor.
#[test]
fn refusals_in_a_loop_are_counted_not_repeated() {
    let dir = canary();
    let r =
        supervised(&ExecPolicy::default(), "for i in $(seq 5000); do rm -rf C 2>/dev/null; done; echo end", dir.path());
    assert!(dir.path().join("C/sub/f").exists());
    assert_eq!(r.reports.len(), 16, "{:?}", r.reports.len());
    assert!(r.output.contains("end\n"), "{}", r.output);
    assert!(
        r.output.contains("[abhed: 4984 more execs were refused the same way and not listed; 5000 in all."),
        "{}",
        r.output
    );
}
