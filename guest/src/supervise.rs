//! The exec supervisor: runs one command's shell as a traced child and decides on every program
//! its process tree executes, before that program runs (`crate::policy::decide`).
//!
//! How (x86-64 Linux):
//! - The child asks to be traced, stops, and installs a seccomp filter that turns `execve` and
//!   `execveat` into a trace stop (every other syscall passes untouched, so a command that execs
//!   little pays little); forks, vforks and clones are followed, so every descendant is traced.
//! - At the stop before an exec the supervisor reads the path, argv and (for git) environment
//!   from the caller's memory and decides. A refused exec is skipped and returns `EPERM`; the
//!   shell prints "Operation not permitted" and goes on, and the refusal, with its rule and what to
//!   do instead, is written to the command's output and reported to the agent.
//! - seccomp_unotify(2) warns that such pointers can change after they were read (another thread
//!   of the caller, or a process sharing its memory, can rewrite them before the kernel copies
//!   them). So the decision is made again at the stop *after* the exec, on the argv the kernel
//!   copied into the new program (`/proc/PID/cmdline`) and the program it loaded
//!   (`/proc/PID/exe`), before its first instruction: if they are not what was allowed and the
//!   policy refuses them, the process is killed there.
//! - The shell and everything it starts lose CAP_SYS_PTRACE, CAP_SYS_ADMIN, CAP_SYS_MODULE,
//!   CAP_SYS_RAWIO and CAP_SYS_BOOT (root in the guest otherwise), and `ptrace` and
//!   `process_vm_writev` fail for them with `EPERM`; the supervisor and the agent are not
//!   dumpable, so their `/proc/PID/mem` is closed to a process without CAP_SYS_PTRACE. So a
//!   command cannot attach to or rewrite the supervisor or the agent, mount over /proc, or load
//!   code into the kernel. If the supervisor dies, the kernel kills every tracee
//!   (`PTRACE_O_EXITKILL`): the check fails closed.

use std::collections::HashMap;
use std::ffi::CString;
use std::io::{self, Write as _};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::{FileExt as _, MetadataExt as _};
use std::path::{Path, PathBuf};

use crate::policy::{self, Context, Denial, Exec, ExecPolicy};

/// The name the agent starts its own binary under to supervise a command.
pub const SUPERVISE_NAME: &str = "abhed-supervise";

const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;
const X32_SYSCALL_BIT: u32 = 0x4000_0000;
const SYS_EXECVE: u32 = 59;
const SYS_EXECVEAT: u32 = 322;
const SYS_PTRACE: u32 = 101;
const SYS_PROCESS_VM_WRITEV: u32 = 311;
/// The capabilities the supervised command loses (see the module doc).
const DROPPED_CAPS: &[u32] = &[
    19, // CAP_SYS_PTRACE
    21, // CAP_SYS_ADMIN
    16, // CAP_SYS_MODULE
    17, // CAP_SYS_RAWIO
    22, // CAP_SYS_BOOT
];
/// The most argv entries, and bytes of them, read from a caller (the kernel's own limit on one
/// exec's arguments is far above what a real command uses; past these the exec is refused).
const MAX_ARGS: usize = 64 * 1024;
const MAX_ARG_BYTES: usize = 8 * 1024 * 1024;
/// The most refusals told in full per command; the rest are counted. A command that retries a
/// refused exec in a loop must not flood its output, or block on a report pipe nobody empties.
const MAX_TOLD: usize = 16;

/// How a supervised command was started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// A foreground command: the supervisor ends when the shell does (the kernel kills what the
    /// shell left behind), and each refusal goes as a JSON line to `report` (fd 0).
    Exec,
    /// A background job: the supervisor keeps supervising until every process of the job has
    /// ended, and writes the shell's exit status to this file when the shell ends.
    Job { exit_file: PathBuf },
}

/// The supervisor's arguments: `MODE POLICY_JSON [EXIT_FILE] -- SHELL ARGS...`.
#[derive(Debug)]
pub struct Args {
    pub mode: Mode,
    pub policy: ExecPolicy,
    pub shell: Vec<String>,
}

impl Args {
    /// The command line the agent starts the supervisor with (after its name).
    pub fn to_argv(&self) -> io::Result<Vec<String>> {
        let mut out = Vec::new();
        match &self.mode {
            Mode::Exec => out.push("exec".to_string()),
            Mode::Job { exit_file } => {
                out.push("job".to_string());
                out.push(exit_file.to_string_lossy().into_owned());
            }
        }
        out.push(serde_json::to_string(&self.policy).map_err(io::Error::other)?);
        out.push("--".to_string());
        out.extend(self.shell.iter().cloned());
        Ok(out)
    }

    pub fn parse(argv: &[String]) -> Result<Args, String> {
        let (mode, rest) = match argv {
            [m, rest @ ..] if m == "exec" => (Mode::Exec, rest),
            [m, file, rest @ ..] if m == "job" => (Mode::Job { exit_file: PathBuf::from(file) }, rest),
            _ => return Err("usage: abhed-supervise exec|job EXIT_FILE POLICY_JSON -- SHELL ARGS...".into()),
        };
        let [policy, dashes, shell @ ..] = rest else { return Err("missing the policy or the command".into()) };
        if dashes != "--" || shell.is_empty() {
            return Err("missing `--` and the command".into());
        }
        let policy: ExecPolicy = serde_json::from_str(policy).map_err(|e| format!("bad policy: {e}"))?;
        Ok(Args { mode, policy, shell: shell.to_vec() })
    }
}

/// One line of the supervisor's report to the agent (fd 0 in [`Mode::Exec`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Report {
    /// An exec refused before it ran (skipped with `EPERM`), or killed at its first instruction
    /// (`killed`: its arguments changed between the check and the exec).
    Denied {
        #[serde(flatten)]
        denial: Denial,
        pid: i32,
        killed: bool,
    },
}

/// The supervisor's `main`: returns the exit status to exit with.
pub fn main(argv: &[String]) -> i32 {
    let args = match Args::parse(argv) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("abhed-supervise: {e}");
            return 125;
        }
    };
    match run(&args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("abhed-supervise: {e}");
            125
        }
    }
}

/// Close this process's memory to processes without CAP_SYS_PTRACE (see the module doc). The
/// agent calls it at start too.
#[allow(unsafe_code)]
pub fn set_not_dumpable() -> io::Result<()> {
    // SAFETY: prctl with integer arguments.
    if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } != 0 {
        return Err(last_error("PR_SET_DUMPABLE"));
    }
    Ok(())
}

fn last_error(what: &str) -> io::Error {
    let e = io::Error::last_os_error();
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

/// The seccomp program: trace execve and execveat, refuse ptrace and writes into another
/// process's memory (the supervisor and the agent are the only processes worth attaching to),
/// refuse x32 syscalls, kill other ABIs.
fn filter() -> Vec<libc::sock_filter> {
    const LD_W_ABS: u16 = 0x20;
    const JEQ_K: u16 = 0x15;
    const JGE_K: u16 = 0x35;
    const RET_K: u16 = 0x06;
    let stmt = |code, k| libc::sock_filter { code, jt: 0, jf: 0, k };
    let jump = |code, k, jt, jf| libc::sock_filter { code, jt, jf, k };
    vec![
        stmt(LD_W_ABS, 4), // arch
        jump(JEQ_K, AUDIT_ARCH_X86_64, 1, 0),
        stmt(RET_K, libc::SECCOMP_RET_KILL_PROCESS),
        stmt(LD_W_ABS, 0), // nr
        jump(JGE_K, X32_SYSCALL_BIT, 0, 1),
        stmt(RET_K, libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32),
        jump(JEQ_K, SYS_EXECVE, 5, 0),
        jump(JEQ_K, SYS_EXECVEAT, 4, 0),
        jump(JEQ_K, SYS_PTRACE, 2, 0),
        jump(JEQ_K, SYS_PROCESS_VM_WRITEV, 1, 0),
        stmt(RET_K, libc::SECCOMP_RET_ALLOW),
        stmt(RET_K, libc::SECCOMP_RET_ERRNO | libc::EPERM as u32),
        stmt(RET_K, libc::SECCOMP_RET_TRACE),
    ]
}

/// Start the shell as a traced child and supervise it (and all it starts) to the end.
fn run(args: &Args) -> io::Result<i32> {
    let to_c = |s: &str| CString::new(s).map_err(|_| io::Error::other(format!("{s:?} holds a NUL byte")));
    let program = to_c(&args.shell[0])?;
    let argv_c: Vec<CString> = args.shell.iter().map(|s| to_c(s)).collect::<io::Result<_>>()?;
    let mut argv_p: Vec<*const libc::c_char> = argv_c.iter().map(|c| c.as_ptr()).collect();
    argv_p.push(std::ptr::null());
    let devnull = to_c("/dev/null")?;
    let prog = filter();
    let fprog = libc::sock_fprog { len: prog.len() as u16, filter: prog.as_ptr().cast_mut() };
    // The report channel is our stdin (the agent holds the read end); a duplicate that closes
    // on exec, so the shell, which gets /dev/null as its stdin, never holds it.
    let (report, exit_file) = match &args.mode {
        Mode::Exec => {
            use std::os::fd::AsFd as _;
            let fd = io::stdin()
                .as_fd()
                .try_clone_to_owned()
                .map_err(|e| io::Error::other(format!("the report channel: {e}")))?;
            (Some(std::fs::File::from(fd)), None)
        }
        Mode::Job { exit_file } => (None, Some(exit_file.clone())),
    };
    let child = spawn_traced(&program, &argv_p, &devnull, &fprog)?;
    set_not_dumpable()?;
    Supervisor::new(&args.policy, child, report, exit_file).run()
}

/// Fork; the child becomes traced, stops for the parent to set the options, installs the filter,
/// drops the capabilities, takes /dev/null as stdin and execs. Returns the child's pid once it
/// has stopped and is traced with every option.
#[allow(unsafe_code)]
fn spawn_traced(
    program: &CString,
    argv: &[*const libc::c_char],
    devnull: &CString,
    fprog: &libc::sock_fprog,
) -> io::Result<i32> {
    // SAFETY: the supervisor is single-threaded (started for this command, it spawns no thread),
    // so the child may run ordinary code until it execs; it only makes syscalls with pointers
    // prepared before the fork.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(last_error("fork"));
    }
    if pid == 0 {
        // SAFETY: plain syscalls on valid pointers (see above); the child never returns.
        unsafe {
            if libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0) != 0 {
                libc::_exit(126);
            }
            libc::raise(libc::SIGSTOP);
            let fd = libc::open(devnull.as_ptr(), libc::O_RDONLY);
            if fd < 0 || libc::dup2(fd, 0) < 0 {
                libc::_exit(126);
            }
            if fd != 0 {
                libc::close(fd);
            }
            for cap in DROPPED_CAPS {
                libc::prctl(libc::PR_CAPBSET_DROP, *cap as libc::c_ulong, 0, 0, 0);
            }
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                || libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER, fprog as *const _, 0, 0) != 0
            {
                libc::_exit(126);
            }
            libc::execv(program.as_ptr(), argv.as_ptr());
            libc::_exit(127);
        }
    }
    let mut status = 0;
    // SAFETY: waiting for our own child; `status` is a valid out-pointer.
    let r = unsafe { libc::waitpid(pid, &mut status, libc::__WALL) };
    if r != pid || !libc::WIFSTOPPED(status) {
        return Err(io::Error::other("the command's shell did not stop to be traced"));
    }
    let options = libc::PTRACE_O_TRACESECCOMP
        | libc::PTRACE_O_TRACEEXEC
        | libc::PTRACE_O_TRACEFORK
        | libc::PTRACE_O_TRACEVFORK
        | libc::PTRACE_O_TRACECLONE
        | libc::PTRACE_O_EXITKILL;
    // SAFETY: ptrace requests on our stopped tracee with integer arguments.
    unsafe {
        if libc::ptrace(libc::PTRACE_SETOPTIONS, pid, 0, options as libc::c_long) != 0 {
            let e = last_error("PTRACE_SETOPTIONS");
            libc::kill(pid, libc::SIGKILL);
            return Err(e);
        }
        libc::ptrace(libc::PTRACE_CONT, pid, 0, 0);
    }
    Ok(pid)
}

/// What was allowed at an exec's first stop, to compare with what the kernel then ran.
struct Allowed {
    program: String,
    args: Vec<String>,
}

struct Supervisor<'p> {
    policy: &'p ExecPolicy,
    shell: i32,
    report: Option<std::fs::File>,
    /// A job's exit file, written when its shell ends.
    exit_file: Option<PathBuf>,
    /// Tracees seen, so that a new one's first stop (its SIGSTOP) is not passed on as a signal.
    known: std::collections::HashSet<i32>,
    allowed: HashMap<i32, Allowed>,
    ids: Identities,
    /// Refusals so far (the first [`MAX_TOLD`] are told in full).
    refused: usize,
    /// The shell's own exec is done: every exec from now on is the command's.
    shell_started: bool,
}

impl<'p> Supervisor<'p> {
    fn new(policy: &'p ExecPolicy, shell: i32, report: Option<std::fs::File>, exit_file: Option<PathBuf>) -> Self {
        let mut known = std::collections::HashSet::new();
        known.insert(shell);
        Supervisor {
            policy,
            shell,
            report,
            exit_file,
            known,
            allowed: HashMap::new(),
            ids: Identities::new(policy),
            refused: 0,
            shell_started: false,
        }
    }

    /// Until the shell (foreground) or every tracee (job) has ended: the shell's exit status,
    /// as a shell reports it (128 + N for signal N).
    #[allow(unsafe_code)]
    fn run(&mut self) -> io::Result<i32> {
        let mut shell_status: Option<i32> = None;
        loop {
            let mut status = 0;
            // SAFETY: `status` is a valid out-pointer.
            let pid = unsafe { libc::waitpid(-1, &mut status, libc::__WALL) };
            if pid < 0 {
                let e = io::Error::last_os_error();
                if e.raw_os_error() == Some(libc::EINTR) {
                    continue;
                }
                // ECHILD: nothing left to wait for.
                return Ok(shell_status.unwrap_or(125));
            }
            if libc::WIFEXITED(status) || libc::WIFSIGNALED(status) {
                self.known.remove(&pid);
                self.allowed.remove(&pid);
                if pid == self.shell {
                    let code =
                        if libc::WIFEXITED(status) { libc::WEXITSTATUS(status) } else { 128 + libc::WTERMSIG(status) };
                    shell_status = Some(code);
                    self.tell_untold();
                    match &self.exit_file {
                        // A job: its status now, its other processes supervised to their end.
                        Some(file) => {
                            let _ = std::fs::write(file, format!("{code}\n"));
                        }
                        // Foreground: what the shell left behind dies with us (EXITKILL).
                        None => return Ok(code),
                    }
                }
                continue;
            }
            if !libc::WIFSTOPPED(status) {
                continue;
            }
            let sig = libc::WSTOPSIG(status);
            let event = (status >> 16) & 0xffff;
            let resume = |pid: i32, sig: i32| {
                // SAFETY: restarting our own stopped tracee.
                unsafe { libc::ptrace(libc::PTRACE_CONT, pid, 0, sig as libc::c_long) };
            };
            // The shell's own exec, which the supervisor made itself (its program is the
            // agent's, its script not yet read): nothing to decide, and skipping it keeps a
            // command that execs nothing (`true`, `cd`, `echo`) from paying for a check.
            let own_exec = pid == self.shell && !self.shell_started;
            if sig == libc::SIGTRAP && event == libc::PTRACE_EVENT_SECCOMP {
                if own_exec {
                    resume(pid, 0);
                } else {
                    self.before_exec(pid);
                }
                continue;
            }
            if sig == libc::SIGTRAP && event == libc::PTRACE_EVENT_EXEC {
                if own_exec {
                    self.shell_started = true;
                    resume(pid, 0);
                } else {
                    self.after_exec(pid);
                }
                continue;
            }
            if sig == libc::SIGTRAP
                && matches!(event, libc::PTRACE_EVENT_FORK | libc::PTRACE_EVENT_VFORK | libc::PTRACE_EVENT_CLONE)
            {
                resume(pid, 0);
                continue;
            }
            if !self.known.contains(&pid) {
                // A new tracee's first stop: its SIGSTOP from the kernel, not a signal to pass on.
                self.known.insert(pid);
                if sig == libc::SIGSTOP {
                    resume(pid, 0);
                    continue;
                }
            }
            // A signal for the tracee: deliver it. A group-stop (no siginfo) is not kept: the
            // command has no terminal to continue it from.
            // SAFETY: siginfo_t is plain data; zeroed is a valid value.
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            // SAFETY: `info` is a valid out-pointer for a siginfo_t.
            let has_info = unsafe { libc::ptrace(libc::PTRACE_GETSIGINFO, pid, 0, &mut info as *mut _) } == 0;
            resume(pid, if has_info { sig } else { 0 });
        }
    }

    /// The stop before an exec: decide on what the caller passed; skip the call with EPERM if
    /// refused.
    #[allow(unsafe_code)]
    fn before_exec(&mut self, pid: i32) {
        // SAFETY: user_regs_struct is plain data; zeroed is a valid value.
        let mut regs: libc::user_regs_struct = unsafe { std::mem::zeroed() };
        // SAFETY: `regs` is a valid out-pointer for this architecture's register set.
        if unsafe { libc::ptrace(libc::PTRACE_GETREGS, pid, 0, &mut regs as *mut _) } != 0 {
            // The tracee is gone (killed meanwhile).
            return;
        }
        let verdict = match self.read_exec(pid, &regs) {
            Ok((program, args, env, busybox)) => {
                let git_config = if program == "git" { git_config_files(pid, &env) } else { Vec::new() };
                let ctx = Context { env: &env, git_config: &git_config };
                match policy::decide(self.policy, &Exec { program: &program, args: &args, busybox, ctx }) {
                    Ok(_) => {
                        self.allowed.insert(pid, Allowed { program, args });
                        None
                    }
                    Err(d) => Some(d),
                }
            }
            Err(why) => Some(Denial {
                command: "(unreadable)".into(),
                rule: "unreadable".into(),
                message: format!(
                    "an exec was refused because its arguments could not be read ({why}); nothing ran. Run the program by its plain path with ordinary arguments."
                ),
            }),
        };
        if let Some(denial) = verdict {
            regs.orig_rax = u64::MAX; // -1: skip the syscall
            regs.rax = (-libc::EPERM) as i64 as u64;
            // SAFETY: writing back the register set read above, for our stopped tracee.
            unsafe { libc::ptrace(libc::PTRACE_SETREGS, pid, 0, &regs as *const _) };
            self.tell(&denial, pid, false);
        }
        // SAFETY: restarting our own stopped tracee.
        unsafe { libc::ptrace(libc::PTRACE_CONT, pid, 0, 0) };
    }

    /// The stop after an exec, before the new program's first instruction: check that what the
    /// kernel ran is what was allowed, and decide again when it is not.
    #[allow(unsafe_code)]
    fn after_exec(&mut self, pid: i32) {
        let mut former: libc::c_ulong = 0;
        // SAFETY: `former` is a valid out-pointer for the event message (the exec'ing thread's
        // old id, when another thread than the leader exec'd).
        unsafe { libc::ptrace(libc::PTRACE_GETEVENTMSG, pid, 0, &mut former as *mut _) };
        let allowed = self.allowed.remove(&(former as i32)).or_else(|| self.allowed.remove(&pid));
        let argv = read_cmdline(pid);
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
        let (program, args, busybox) = match &argv {
            Some(argv) if !argv.is_empty() => {
                let named = self.ids.name(&exe, &exe);
                let (p, skip) = policy::normalise::program_name(&named, argv);
                (
                    p.to_string(),
                    argv[skip.min(argv.len())..].to_vec(),
                    policy::destructive::basename(&named) == "busybox",
                )
            }
            _ => (String::new(), Vec::new(), false),
        };
        let same = allowed.as_ref().is_some_and(|a| a.program == program && a.args == args);
        if !same {
            let env = read_environ(pid);
            let git_config = if program == "git" { git_config_files(pid, &env) } else { Vec::new() };
            let ctx = Context { env: &env, git_config: &git_config };
            if let Err(mut d) = policy::decide(self.policy, &Exec { program: &program, args: &args, busybox, ctx }) {
                d.message = format!(
                    "{} (It was killed before it ran: what the kernel executed is not what was checked a moment before, as when a command rewrites its own arguments during the exec.)",
                    d.message
                );
                // SAFETY: killing our own stopped tracee.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                self.tell(&d, pid, true);
                return;
            }
        }
        // SAFETY: restarting our own stopped tracee.
        unsafe { libc::ptrace(libc::PTRACE_CONT, pid, 0, 0) };
    }

    /// The program's name, its arguments and (for git) its `GIT_*` environment, from the
    /// caller's memory at the stop before the exec.
    fn read_exec(
        &mut self,
        pid: i32,
        regs: &libc::user_regs_struct,
    ) -> Result<(String, Vec<String>, Vec<String>, bool), String> {
        let mem = std::fs::File::open(format!("/proc/{pid}/mem")).map_err(|e| format!("its memory: {e}"))?;
        let (path_ptr, argv_ptr, envp_ptr, dirfd, flags) = match regs.orig_rax as u32 {
            SYS_EXECVE => (regs.rdi, regs.rsi, regs.rdx, libc::AT_FDCWD, 0),
            _ => (regs.rsi, regs.rdx, regs.r10, regs.rdi as i32, regs.r8 as i32),
        };
        let path = read_cstring(&mem, path_ptr, 4096)?;
        let argv = read_strings(&mem, argv_ptr)?;
        let resolved = resolve(pid, dirfd, &path, flags);
        let named = self.ids.name(Path::new(&path), &resolved);
        let busybox = policy::destructive::basename(&named) == "busybox";
        let (program, skip) = policy::normalise::program_name(&named, &argv);
        let program = program.to_string();
        let args = argv.get(skip..).unwrap_or_default().to_vec();
        let env = if program == "git" {
            read_strings(&mem, envp_ptr)?
                .into_iter()
                .filter(|e| e.starts_with("GIT_") || e.starts_with("HOME=") || e.starts_with("XDG_CONFIG_HOME="))
                .collect()
        } else {
            Vec::new()
        };
        Ok((program, args, env, busybox))
    }

    fn tell(&mut self, denial: &Denial, pid: i32, killed: bool) {
        self.refused += 1;
        if self.refused > MAX_TOLD {
            return;
        }
        // In the command's own output, where the model reads it beside bash's "Operation not
        // permitted".
        let mut err = io::stderr();
        let _ = writeln!(err, "[abhed: {}]", denial.message);
        if let Some(r) = self.report.as_mut()
            && let Ok(line) = serde_json::to_string(&Report::Denied { denial: denial.clone(), pid, killed })
        {
            let _ = writeln!(r, "{line}");
        }
    }

    /// When the shell ends: how many refusals were not told one by one.
    fn tell_untold(&mut self) {
        if self.refused > MAX_TOLD {
            let _ = writeln!(
                io::stderr(),
                "[abhed: {} more execs were refused the same way and not listed; {} in all. Do not retry refused commands in a loop.]",
                self.refused - MAX_TOLD,
                self.refused
            );
        }
    }
}

/// Read a NUL-terminated string at `addr` from a tracee's memory, at most `max` bytes.
fn read_cstring(mem: &std::fs::File, addr: u64, max: usize) -> Result<String, String> {
    if addr == 0 {
        return Err("a null pointer".into());
    }
    let mut out = Vec::new();
    let mut at = addr;
    while out.len() < max {
        // Never across a page boundary: the next page may be unmapped.
        let chunk = (4096 - (at % 4096) as usize).min(256);
        let mut buf = vec![0u8; chunk];
        let n = mem.read_at(&mut buf, at).map_err(|e| format!("reading at {at:#x}: {e}"))?;
        if n == 0 {
            return Err(format!("nothing readable at {at:#x}"));
        }
        if let Some(end) = buf[..n].iter().position(|&b| b == 0) {
            out.extend_from_slice(&buf[..end]);
            return Ok(String::from_utf8_lossy(&out).into_owned());
        }
        out.extend_from_slice(&buf[..n]);
        at += n as u64;
    }
    Err(format!("a string longer than {max} bytes"))
}

/// Read a NULL-terminated array of string pointers (argv or envp).
fn read_strings(mem: &std::fs::File, addr: u64) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    if addr == 0 {
        return Ok(out);
    }
    let mut total = 0;
    for i in 0..MAX_ARGS {
        let mut ptr = [0u8; 8];
        let n = mem.read_at(&mut ptr, addr + 8 * i as u64).map_err(|e| format!("the argument list: {e}"))?;
        if n != 8 {
            return Err("the argument list ends unreadably".into());
        }
        let p = u64::from_ne_bytes(ptr);
        if p == 0 {
            return Ok(out);
        }
        let s = read_cstring(mem, p, MAX_ARG_BYTES - total)?;
        total += s.len() + 1;
        out.push(s);
    }
    Err(format!("more than {MAX_ARGS} arguments"))
}

/// The argv the kernel copied for the program now running in `pid`.
fn read_cmdline(pid: i32) -> Option<Vec<String>> {
    let bytes = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let body = bytes.strip_suffix(&[0]).unwrap_or(&bytes);
    Some(body.split(|&b| b == 0).map(|s| String::from_utf8_lossy(s).into_owned()).collect())
}

/// The `GIT_*` and `HOME` entries of the environment the kernel copied for `pid`.
fn read_environ(pid: i32) -> Vec<String> {
    let bytes = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
    bytes
        .split(|&b| b == 0)
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .filter(|e| e.starts_with("GIT_") || e.starts_with("HOME="))
        .collect()
}

/// The file an exec names, as the caller sees it: relative to its working directory or to
/// `dirfd`, the fd itself with `AT_EMPTY_PATH`.
fn resolve(pid: i32, dirfd: i32, path: &str, flags: i32) -> PathBuf {
    if path.starts_with('/') {
        return PathBuf::from(path);
    }
    let base = if dirfd == libc::AT_FDCWD {
        std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap_or_default()
    } else {
        std::fs::read_link(format!("/proc/{pid}/fd/{dirfd}")).unwrap_or_default()
    };
    if path.is_empty() && flags & libc::AT_EMPTY_PATH != 0 {
        return base;
    }
    base.join(path)
}

/// The git config files a git in `pid` would read: system, global, and the repository's.
fn git_config_files(pid: i32, env: &[String]) -> Vec<String> {
    let var = |name: &str| env.iter().rev().find_map(|e| e.strip_prefix(name)?.strip_prefix('=').map(str::to_string));
    let home = var("HOME").unwrap_or_else(|| "/root".into());
    let xdg = var("XDG_CONFIG_HOME").map(PathBuf::from).unwrap_or_else(|| Path::new(&home).join(".config"));
    // Where git looks, as git does: the environment can name other files for each level.
    let mut files = Vec::new();
    if var("GIT_CONFIG_NOSYSTEM").is_none() {
        files.push(var("GIT_CONFIG_SYSTEM").map(PathBuf::from).unwrap_or_else(|| "/etc/gitconfig".into()));
    }
    match var("GIT_CONFIG_GLOBAL") {
        Some(g) => files.push(PathBuf::from(g)),
        None => {
            files.push(xdg.join("git/config"));
            files.push(Path::new(&home).join(".gitconfig"));
        }
    }
    let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap_or_default();
    let git_dir = match var("GIT_DIR") {
        Some(d) => Some(cwd.join(d)),
        None => cwd.ancestors().map(|d| d.join(".git")).find(|g| g.exists()),
    };
    if let Some(g) = git_dir {
        // A `.git` file names the real directory: `gitdir: PATH`.
        let dir = match std::fs::read_to_string(&g) {
            Ok(text) => {
                text.trim().strip_prefix("gitdir:").map(|p| g.parent().unwrap_or(&g).join(p.trim())).unwrap_or(g)
            }
            Err(_) => g,
        };
        files.push(dir.join("config"));
    }
    let mut out = Vec::new();
    for f in files {
        read_with_includes(&f, &home, 0, &mut out);
    }
    out
}

/// How deep `include.path` may nest, and how many files one exec's check reads (git's own
/// nesting limit is 10).
const MAX_INCLUDE_DEPTH: usize = 10;
const MAX_CONFIG_FILES: usize = 64;

/// A config file's text, then the files it includes, at the place git reads them (after the
/// including file's earlier lines: later settings win, so that order is close enough for
/// aliases). `[includeIf "…"]` is followed whatever its condition: an alias it may bring in is
/// judged, which at worst refuses more.
fn read_with_includes(file: &Path, home: &str, depth: usize, out: &mut Vec<String>) {
    if depth > MAX_INCLUDE_DEPTH || out.len() >= MAX_CONFIG_FILES {
        return;
    }
    let Ok(text) = std::fs::read_to_string(file) else { return };
    let includes = include_paths(&text);
    out.push(text);
    for p in includes {
        let path = match p.strip_prefix("~/") {
            Some(rest) => Path::new(home).join(rest),
            None => file.parent().unwrap_or(Path::new("/")).join(&p),
        };
        read_with_includes(&path, home, depth + 1, out);
    }
}

/// The `path` values of a config text's `[include]` and `[includeIf "…"]` sections.
pub(crate) fn include_paths(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_include = false;
    for line in text.lines() {
        let line = line.trim();
        if let Some(header) = line.strip_prefix('[') {
            let name = header.split([']', ' ', '"']).next().unwrap_or("").to_ascii_lowercase();
            in_include = name == "include" || name == "includeif";
            continue;
        }
        if in_include
            && let Some((key, value)) = line.split_once('=')
            && key.trim().eq_ignore_ascii_case("path")
        {
            out.push(value.trim().trim_matches('"').to_string());
        }
    }
    out
}

/// Programs known by name to the checks, found on the guest's PATH, so that a copy or a link
/// of one under another name is still that program.
struct Identities {
    names: Vec<String>,
    /// By (device, inode): links and the file itself.
    by_inode: HashMap<(u64, u64), String>,
    /// By size, with the path to compare contents with: copies.
    by_size: HashMap<u64, Vec<(PathBuf, String)>>,
    built: bool,
}

const KNOWN: &[&str] = &[
    "rm",
    "dd",
    "git",
    "chmod",
    "chown",
    "chgrp",
    "find",
    "truncate",
    "tee",
    "cp",
    "mv",
    "ln",
    "shred",
    "mkfs",
    "mke2fs",
    "mkswap",
    "wipefs",
    "fdisk",
    "sfdisk",
    "parted",
    "blkdiscard",
    "kill",
    "killall",
    "pkill",
    "crontab",
    "rsync",
    "shutdown",
    "reboot",
    "halt",
    "poweroff",
    "systemctl",
];
const BIN_DIRS: &[&str] = &["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"];

impl Identities {
    fn new(policy: &ExecPolicy) -> Self {
        let mut names: Vec<String> = KNOWN.iter().map(|s| s.to_string()).collect();
        // The first word of each rule names a program too (`curl*` is curl).
        for p in policy.deny.iter().chain(&policy.ask) {
            let first: String = p.split_whitespace().next().unwrap_or("").trim_end_matches('*').to_string();
            if !first.is_empty() && !first.contains('*') && !names.contains(&first) {
                names.push(first);
            }
        }
        Identities { names, by_inode: HashMap::new(), by_size: HashMap::new(), built: false }
    }

    fn build(&mut self) {
        self.built = true;
        for name in &self.names {
            for dir in BIN_DIRS {
                let p = Path::new(dir).join(name);
                if let Ok(m) = std::fs::metadata(&p)
                    && m.is_file()
                    && !is_multicall(&p)
                {
                    self.by_inode.insert((m.dev(), m.ino()), name.clone());
                    self.by_size.entry(m.len()).or_default().push((p, name.clone()));
                }
            }
        }
    }

    /// The name to judge an exec of `given` (the path the caller named; `resolved` the file) by.
    fn name(&mut self, given: &Path, resolved: &Path) -> String {
        let base = given.file_name().map(|n| String::from_utf8_lossy(n.as_bytes()).into_owned()).unwrap_or_default();
        if self.names.contains(&base) || base == "busybox" {
            return base;
        }
        if !self.built {
            self.build();
        }
        // A busybox applet (a link to busybox) is named by its argv, as busybox picks it.
        if is_multicall(resolved) {
            return "busybox".to_string();
        }
        let Ok(m) = std::fs::metadata(resolved) else { return base };
        if let Some(n) = self.by_inode.get(&(m.dev(), m.ino())) {
            return n.clone();
        }
        if let Some(candidates) = self.by_size.get(&m.len())
            && let Ok(bytes) = std::fs::read(resolved)
        {
            for (path, name) in candidates {
                if std::fs::read(path).is_ok_and(|b| b == bytes) {
                    return name.clone();
                }
            }
        }
        base
    }
}

/// Whether `path` is (a link to) busybox, one binary that is every applet: its identity is its
/// argv, never its file.
fn is_multicall(path: &Path) -> bool {
    std::fs::canonicalize(path).is_ok_and(|p| p.file_name().is_some_and(|n| n == "busybox"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn includes_are_found_in_include_and_include_if_sections() {
        let text = "[core]\n\tpath = not-this\n[include]\n\tpath = a.inc\n[includeIf \"gitdir:/w/\"]\n  path = \"~/b.inc\"\n[alias]\n\tx = status\n";
        assert_eq!(include_paths(text), ["a.inc", "~/b.inc"]);
    }

    #[test]
    fn arguments_round_trip() {
        let a = Args {
            mode: Mode::Job { exit_file: "/tmp/x.exit".into() },
            policy: ExecPolicy { deny: vec!["curl*".into()], ..Default::default() },
            shell: vec!["/bin/bash".into(), "-c".into(), "echo hi".into()],
        };
        let argv = a.to_argv().unwrap();
        let b = Args::parse(&argv).unwrap();
        assert_eq!(b.mode, a.mode);
        assert_eq!(b.policy, a.policy);
        assert_eq!(b.shell, a.shell);
        assert!(Args::parse(&["exec".into(), "{}".into(), "bash".into()]).is_err());
    }
}
