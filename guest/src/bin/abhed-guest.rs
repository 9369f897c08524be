//! The guest agent: started by the VM's init script (PID 1, busybox sh), it opens the
//! `abhed.0` virtio-serial port and runs the host's requests. One request at a time: the host
//! never sends the next before it has the answer to the last, except [`Request::Stop`], which
//! may come at any moment (a reader thread takes frames off the port as they arrive).
//!
//! Each command runs in a fresh shell in its own process group, stdin from /dev/null, stdout and
//! stderr combined into one pipe. When the shell exits, whatever is left of its group is killed,
//! so a foreground call never leaves processes behind; `Spawn` is the way to keep one running.
//!
//! The same binary is `abhed-job` (by its name), the command the model uses on a background job:
//! `abhed-job kill ID`, `abhed-job status ID`, `abhed-job list`; and `abhed-supervise`, which
//! runs one command's shell and checks every exec in it (`abhed_guest::supervise`).

use std::collections::VecDeque;
use std::ffi::CString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write as _};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use abhed_guest::policy::{Denial, ExecPolicy};
use abhed_guest::supervise::{self, Report, SUPERVISE_NAME};
use abhed_guest::zygote::{self, Zygote};
use abhed_guest::{
    ExecResult, HeadTail, JOBS_DIR, MAX_COMMAND_BYTES, PORT_NAME, PROTOCOL_VERSION, Request, Response, Share,
    SpawnResult, read_frame, valid_job_id, write_frame,
};

/// Where the shell's exit trap leaves its working directory, and where commands are written
/// before the shell sources them: the guest's own tmpfs.
const RUN_DIR: &str = "/run/abhed";
/// How long the first message may wait for a host to read it.
const READY_DEADLINE: Duration = Duration::from_secs(20);
/// The PATH a command gets until the host sets one.
const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

fn main() {
    let name = std::env::args().next().unwrap_or_default();
    if Path::new(&name).file_name().is_some_and(|n| n == "abhed-job") {
        std::process::exit(job_cli(std::env::args().skip(1).collect()));
    }
    if Path::new(&name).file_name().is_some_and(|n| n == abhed_guest::zygote::ZYGOTE_NAME) {
        let args: Vec<String> = std::env::args().skip(1).collect();
        std::process::exit(abhed_guest::zygote::main(&args));
    }
    if Path::new(&name).file_name().is_some_and(|n| n == abhed_guest::supervise::SUPERVISE_NAME) {
        let args: Vec<String> = std::env::args().skip(1).collect();
        std::process::exit(abhed_guest::supervise::main(&args));
    }
    if let Err(e) = serve() {
        // The console is the serial log the host keeps for a crash report.
        eprintln!("abhed-guest: {e}");
        std::process::exit(1);
    }
}

/// What the main loop waits for: a frame from the host, the end of the channel, or (while a
/// command runs) its shell's exit.
enum Event {
    Frame(Request),
    Closed(String),
    Exited(io::Result<ExitStatus>),
}

fn serve() -> io::Result<()> {
    supervise::set_not_dumpable()?;
    // Forked now, before the first thread (abhed_guest::zygote). Without it, each command's
    // supervisor is an exec of this binary, as before.
    let zygote = match Zygote::start(true) {
        Ok(z) => Some(z),
        Err(e) => {
            eprintln!("abhed-guest: no zygote ({e}); supervisors will be started by exec");
            None
        }
    };
    let port = find_port()?;
    let mut rx = OpenOptions::new().read(true).write(true).open(&port)?;
    let mut tx = rx.try_clone()?;
    let kernel = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim().to_string();
    // A write to the port blocks while no host is connected. The host connects as QEMU starts,
    // long before this; if it has gone (abhed died during the boot), nobody will ever read
    // this, so power off instead of waiting for ever.
    let greeted = Arc::new(std::sync::atomic::AtomicBool::new(false));
    {
        let greeted = Arc::clone(&greeted);
        std::thread::spawn(move || {
            std::thread::sleep(READY_DEADLINE);
            if !greeted.load(std::sync::atomic::Ordering::SeqCst) {
                eprintln!("abhed-guest: no host read the ready message within {READY_DEADLINE:?}; powering off");
                power_off();
            }
        });
    }
    write_frame(&mut tx, &Response::Ready { protocol: PROTOCOL_VERSION, kernel })?;
    greeted.store(true, std::sync::atomic::Ordering::SeqCst);
    fs::create_dir_all(RUN_DIR)?;
    fs::create_dir_all(JOBS_DIR)?;
    let (events_tx, events) = mpsc::channel();
    {
        let events_tx = events_tx.clone();
        std::thread::spawn(move || {
            loop {
                match read_frame::<_, Request>(&mut rx) {
                    Ok(Some(req)) => {
                        if events_tx.send(Event::Frame(req)).is_err() {
                            return;
                        }
                    }
                    Ok(None) => {
                        let _ = events_tx.send(Event::Closed("the host closed the channel".into()));
                        return;
                    }
                    Err(e) => {
                        let _ = events_tx.send(Event::Closed(format!("the channel failed: {e}")));
                        return;
                    }
                }
            }
        });
    }
    let mut agent = Agent {
        shell: "/bin/sh".to_string(),
        path: DEFAULT_PATH.to_string(),
        jobs: Vec::new(),
        events,
        events_tx,
        pending: VecDeque::new(),
        zygote,
    };
    loop {
        let event = match agent.pending.pop_front() {
            Some(e) => e,
            None => agent.events.recv().map_err(io::Error::other)?,
        };
        let req = match event {
            Event::Frame(req) => req,
            // The host is gone (abhed died, or closed the session without a shutdown): nothing
            // will read our answers, so stop everything and let init power the VM off.
            Event::Closed(why) => {
                agent.stop_jobs(&why);
                return Ok(());
            }
            Event::Exited(_) => continue,
        };
        // Reap finished background jobs and write their status, before a command can look.
        agent.poll_jobs();
        let resp = match req {
            Request::Setup { shares, path } => {
                let errors = setup(&shares);
                agent.path = path;
                if Path::new("/bin/bash").exists() {
                    agent.shell = "/bin/bash".to_string();
                }
                Response::SetupDone { shell: agent.shell.clone(), errors }
            }
            Request::Exec { id, command, cwd, fallback_cwd, timeout_ms, policy } => {
                match agent.exec(id, &command, &cwd, &fallback_cwd, timeout_ms, &policy) {
                    Ok(Ok(r)) => Response::Exec(r),
                    Ok(Err(closed)) => {
                        agent.stop_jobs(&closed);
                        return Ok(());
                    }
                    Err(e) => Response::Failed { id, message: format!("could not start the shell: {e}") },
                }
            }
            Request::Spawn { id, job, command, cwd, fallback_cwd, policy } => {
                match agent.spawn(id, &job, &command, &cwd, &fallback_cwd, &policy) {
                    Ok(r) => Response::Spawned(r),
                    Err(e) => Response::Failed { id, message: format!("could not start the job: {e}") },
                }
            }
            Request::Stop { reason } => {
                agent.stop_jobs(&reason);
                continue;
            }
            Request::Shutdown => {
                agent.stop_jobs("the session ended");
                write_frame(&mut tx, &Response::ShuttingDown)?;
                power_off();
                return Ok(());
            }
        };
        write_frame(&mut tx, &resp)?;
    }
}

/// How to wait for a started command's exit status (from another thread).
type WaitFn = Box<dyn FnOnce() -> io::Result<ExitStatus> + Send>;

struct Agent {
    shell: String,
    path: String,
    jobs: Vec<Job>,
    events: mpsc::Receiver<Event>,
    events_tx: mpsc::Sender<Event>,
    /// Frames that arrived while a command ran, in order (the host sends none but `Stop`; any
    /// other is answered after the command).
    pending: VecDeque<Event>,
    /// Starts the supervisors of foreground commands without an exec (`None`: it could not be
    /// started, or failed once; they are exec'd then).
    zygote: Option<Zygote>,
}

impl Agent {
    fn poll_jobs(&mut self) {
        self.jobs.retain_mut(Job::poll);
    }

    /// Kill every background job (the host asked, or is gone), noting `why` in each one's log.
    fn stop_jobs(&mut self, why: &str) {
        for job in &mut self.jobs {
            if let Ok(mut log) = OpenOptions::new().append(true).open(job.file("log")) {
                let _ = writeln!(log, "\n[abhed: job stopped: {why}]");
            }
            kill_group_fully(job.pgid);
        }
        // Give the kernel a moment to turn them into zombies, then reap what can be.
        std::thread::sleep(Duration::from_millis(20));
        self.poll_jobs();
    }

    /// Run one command. `Ok(Err(why))` when the host went away while it ran.
    fn exec(
        &mut self,
        id: u64,
        command: &str,
        cwd: &str,
        fallback: &str,
        timeout_ms: u64,
        policy: &ExecPolicy,
    ) -> io::Result<Result<ExecResult, String>> {
        let start = Instant::now();
        let (cwd, cwd_reset) = pick_cwd(cwd, fallback);
        let cwd_file = format!("{RUN_DIR}/cwd.{id}");
        let script_file = write_command(&format!("{RUN_DIR}/cmd-{id}.sh"), command)?;
        // The trap reports where the shell ended up, so the next call starts there. The command
        // is sourced from a file: no limit on one argument applies, its line numbers are its own,
        // and `$0` is `bash` as with `bash -c`.
        let script = format!(
            "trap 'pwd -P > {} 2>/dev/null' EXIT\ncd -- {} || exit 1\n. {}",
            quote(&cwd_file),
            quote(&cwd),
            quote(&script_file)
        );
        let (reader, writer) = io::pipe()?;
        // The supervisor's refusals come back on its stdin (a pipe it writes to).
        let (mut reports, report_tx) = io::pipe()?;
        let started = self.start_exec(&script, policy, report_tx, writer);
        let (pgid, wait) = match started {
            Ok(s) => s,
            Err(e) => {
                let _ = fs::remove_file(&script_file);
                return Err(e);
            }
        };

        let (denied_tx, denied_rx) = mpsc::channel::<Vec<Denial>>();
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = reports.read_to_string(&mut text);
            let list = text.lines().filter_map(|l| serde_json::from_str::<Report>(l).ok());
            let _ = denied_tx.send(list.map(|Report::Denied { denial, .. }| denial).collect());
        });
        let capture = Arc::new(Mutex::new(HeadTail::default()));
        let (eof_tx, eof_rx) = mpsc::channel();
        {
            let capture = Arc::clone(&capture);
            std::thread::spawn(move || {
                let mut reader = reader;
                let mut buf = vec![0u8; 64 * 1024];
                loop {
                    match reader.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            if let Ok(mut c) = capture.lock() {
                                c.push(&buf[..n]);
                            }
                        }
                    }
                }
                let _ = eof_tx.send(());
            });
        }
        {
            let exited = self.events_tx.clone();
            std::thread::spawn(move || {
                let _ = exited.send(Event::Exited(wait()));
            });
        }

        let deadline = start + Duration::from_millis(timeout_ms);
        let mut timed_out = false;
        let mut stopped = false;
        let status = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.events.recv_timeout(if timed_out || stopped { Duration::from_secs(3600) } else { left }) {
                Ok(Event::Exited(s)) => break s?,
                Ok(Event::Frame(Request::Stop { reason })) => {
                    if !stopped {
                        stopped = true;
                        kill_group_fully(pgid);
                        self.stop_jobs(&reason);
                    }
                }
                Ok(Event::Frame(other)) => self.pending.push_back(Event::Frame(other)),
                Ok(Event::Closed(why)) => {
                    kill_group_fully(pgid);
                    let _ = fs::remove_file(&script_file);
                    return Ok(Err(why));
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    timed_out = true;
                    kill_group_fully(pgid);
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => return Err(io::Error::other("the event channel closed")),
            }
        };
        // Whatever the shell left running in its group goes with it.
        let stragglers_killed = !timed_out && !stopped && kill_group_fully(pgid);
        // A process that left the group (setsid) may still hold the pipe: don't wait for it long.
        let _ = eof_rx.recv_timeout(Duration::from_millis(500));
        let output = capture.lock().map(|c| c.finish()).unwrap_or_default();
        // The report pipe ends with the supervisor, its only writer.
        let denied = denied_rx.recv_timeout(Duration::from_millis(500)).unwrap_or_default();
        let new_cwd = fs::read_to_string(&cwd_file).ok().map(|s| s.trim_end_matches('\n').to_string());
        let _ = fs::remove_file(&cwd_file);
        let _ = fs::remove_file(&script_file);
        Ok(Ok(ExecResult {
            id,
            exit_code: status.code(),
            signal: status.signal(),
            timed_out,
            stragglers_killed,
            output,
            cwd: new_cwd.filter(|s| !s.is_empty()),
            cwd_reset,
            duration_ms: start.elapsed().as_millis() as u64,
            stopped,
            denied,
        }))
    }

    /// Start a foreground command's shell under its supervisor, through the zygote where there
    /// is one (falling back to an exec of the supervisor if it fails), with the report channel
    /// and the output pipe; our copies of both are gone when this returns. Its process group,
    /// and how to wait for its exit status.
    fn start_exec(
        &mut self,
        script: &str,
        policy: &ExecPolicy,
        report_tx: io::PipeWriter,
        writer: io::PipeWriter,
    ) -> io::Result<(i32, WaitFn)> {
        if !policy.unchecked
            && let Some(zygote) = self.zygote.as_mut()
        {
            let args = supervise::Args {
                mode: supervise::Mode::Exec,
                policy: policy.clone(),
                shell: vec![self.shell.clone(), "-c".to_string(), script.to_string()],
            };
            let started = args.to_argv().and_then(|argv| {
                zygote.supervise(
                    argv,
                    command_env(&self.path),
                    report_tx.try_clone()?.into(),
                    writer.try_clone()?.into(),
                    writer.try_clone()?.into(),
                )
            });
            match started {
                Ok(s) => return Ok((s.pid, Box::new(move || Ok(zygote::wait(s))))),
                Err(e) => {
                    eprintln!("abhed-guest: the zygote failed ({e}); supervisors will be started by exec");
                    self.zygote = None;
                }
            }
        }
        let mut cmd = supervised(&self.shell, &self.path, script, supervise::Mode::Exec, policy)?;
        if policy.unchecked {
            cmd.stdin(Stdio::null());
            // No supervisor writes reports: their reader sees the end at once.
            drop(report_tx);
        } else {
            cmd.stdin(report_tx);
        }
        cmd.stdout(writer.try_clone()?).stderr(writer);
        let spawned = cmd.spawn();
        // Our copies of the write end are gone with `cmd`: EOF comes when the group's are.
        drop(cmd);
        let mut child = spawned?;
        Ok((child.id() as i32, Box::new(move || child.wait())))
    }

    fn spawn(
        &mut self,
        id: u64,
        job: &str,
        command: &str,
        cwd: &str,
        fallback: &str,
        policy: &ExecPolicy,
    ) -> io::Result<SpawnResult> {
        if !valid_job_id(job) {
            return Err(io::Error::other(format!("{job:?} is not a job id")));
        }
        let (cwd, cwd_reset) = pick_cwd(cwd, fallback);
        let paths = JobPaths::new(job);
        if Path::new(&paths.log).exists() {
            return Err(io::Error::other(format!("job {job} exists already")));
        }
        let script_file = write_command(&paths.command, command)?;
        let script = format!("cd -- {} || exit 1\n. {}", quote(&cwd), quote(&script_file));
        let out = File::create(&paths.log)?;
        let mode = supervise::Mode::Job { exit_file: paths.exit.clone().into() };
        let mut cmd = supervised(&self.shell, &self.path, &script, mode, policy)?;
        cmd.stdin(Stdio::null()).stdout(out.try_clone()?).stderr(out);
        let child = cmd.spawn()?;
        let pgid = child.id() as i32;
        // Written only now that the group exists, and removed before its number is released.
        fs::write(&paths.pgid, format!("{pgid}\n"))?;
        self.jobs.push(Job { id: job.to_string(), child, pgid, exit_written: false });
        Ok(SpawnResult { id, job: job.to_string(), pgid, log: paths.log, exit_file: paths.exit, cwd_reset })
    }
}

/// Write `command` to `path` (the guest's tmpfs) for the shell to source.
fn write_command(path: &str, command: &str) -> io::Result<String> {
    if command.len() > MAX_COMMAND_BYTES {
        return Err(io::Error::other(format!(
            "the command is {} bytes; the limit is {MAX_COMMAND_BYTES}",
            command.len()
        )));
    }
    if command.contains('\0') {
        return Err(io::Error::other("the command contains a NUL byte"));
    }
    fs::write(path, command)?;
    Ok(path.to_string())
}

/// The device node of the port named [`PORT_NAME`]. It appears a little after the module loads,
/// so look for a while.
fn find_port() -> io::Result<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(entries) = fs::read_dir("/sys/class/virtio-ports") {
            for e in entries.flatten() {
                let name = fs::read_to_string(e.path().join("name")).unwrap_or_default();
                if name.trim() == PORT_NAME {
                    let dev = format!("/dev/{}", e.file_name().to_string_lossy());
                    if Path::new(&dev).exists() {
                        return Ok(dev);
                    }
                }
            }
        }
        if Instant::now() > deadline {
            return Err(io::Error::new(io::ErrorKind::NotFound, format!("no virtio-serial port named {PORT_NAME}")));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Mount the host's shares. Errors are reported to the host, which decides what they mean.
fn setup(shares: &[Share]) -> Vec<String> {
    let mut errors = Vec::new();
    for s in shares {
        if let Err(e) = fs::create_dir_all(&s.path).and_then(|_| mount_9p(s)) {
            errors.push(format!("mount {} at {}: {e}", s.tag, s.path));
        }
    }
    errors
}

#[allow(unsafe_code)]
fn mount_9p(s: &Share) -> io::Result<()> {
    // Read-only shares (host toolchains) may cache; the workspace must not, so that the host's
    // tools and the guest's see each other's writes at once.
    let cache = if s.readonly { "loose" } else { "none" };
    let opts = format!("trans=virtio,version=9p2000.L,msize=262144,cache={cache}");
    let c = |v: &str| CString::new(v).map_err(io::Error::other);
    let (src, dst, fstype, data) = (c(&s.tag)?, c(&s.path)?, c("9p")?, c(&opts)?);
    let mut flags = libc::MS_NODEV | libc::MS_NOSUID;
    if s.readonly {
        flags |= libc::MS_RDONLY;
    }
    // SAFETY: every pointer is a NUL-terminated string that outlives the call.
    let rc = unsafe { libc::mount(src.as_ptr(), dst.as_ptr(), fstype.as_ptr(), flags, data.as_ptr().cast()) };
    if rc == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

#[allow(unsafe_code)]
fn power_off() {
    // SAFETY: plain syscalls without pointers.
    unsafe {
        libc::sync();
        libc::reboot(libc::RB_POWER_OFF);
    }
}

#[allow(unsafe_code)]
fn signal_group(pgid: i32, sig: i32) -> bool {
    // SAFETY: plain syscall. A negative pid addresses the process group.
    unsafe { libc::kill(-pgid, sig) == 0 }
}

/// Kill the group until nothing is left in it: a process forking as the signal lands (a fork
/// bomb) can leave a member behind one kill. `true` if there was anything to kill.
fn kill_group_fully(pgid: i32) -> bool {
    let found = signal_group(pgid, libc::SIGKILL);
    for _ in 0..1000 {
        if !signal_group(pgid, libc::SIGKILL) {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    found
}

/// Single-quote `s` for the shell.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

fn pick_cwd(cwd: &str, fallback: &str) -> (String, bool) {
    if Path::new(cwd).is_dir() { (cwd.to_string(), false) } else { (fallback.to_string(), true) }
}

/// The command's shell under the exec supervisor (this binary as `abhed-supervise`), in a
/// process group of its own whose leader is the supervisor (the shell itself when
/// `policy.unchecked`, for the benchmark).
fn supervised(
    shell: &str,
    path: &str,
    script: &str,
    mode: supervise::Mode,
    policy: &ExecPolicy,
) -> io::Result<Command> {
    let args = supervise::Args {
        mode,
        policy: policy.clone(),
        shell: vec![shell.to_string(), "-c".to_string(), script.to_string()],
    };
    // The image links this binary as /sbin/abhed-supervise, so the supervisor has a name of its
    // own (`pidof abhed-guest` finds the agent only); elsewhere (the host's tests) it runs
    // under that name from wherever it is.
    let mut cmd = if policy.unchecked {
        let mut cmd = Command::new(shell);
        cmd.args(&args.shell[1..]);
        cmd
    } else {
        let exe = std::env::current_exe()?;
        let linked = exe.with_file_name(SUPERVISE_NAME);
        let mut cmd = Command::new(if linked.exists() { linked } else { exe });
        cmd.arg0(SUPERVISE_NAME).args(args.to_argv()?);
        cmd
    };
    cmd.env_clear();
    cmd.envs(command_env(path));
    cmd.process_group(0);
    Ok(cmd)
}

/// A command's whole environment, given its PATH.
fn command_env(path: &str) -> Vec<(String, String)> {
    [
        ("PATH", path),
        ("HOME", "/root"),
        ("USER", "root"),
        ("TERM", "dumb"),
        ("LANG", "C.UTF-8"),
        ("PAGER", "cat"),
        ("GIT_PAGER", "cat"),
        // Nothing can answer an editor or a password prompt: fail at once instead of hanging.
        ("EDITOR", "false"),
        ("VISUAL", "false"),
        ("GIT_EDITOR", "false"),
        ("GIT_TERMINAL_PROMPT", "0"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// The files of one job, by id.
struct JobPaths {
    log: String,
    exit: String,
    pgid: String,
    command: String,
}

impl JobPaths {
    fn new(id: &str) -> JobPaths {
        JobPaths {
            log: format!("{JOBS_DIR}/{id}.log"),
            exit: format!("{JOBS_DIR}/{id}.exit"),
            pgid: format!("{JOBS_DIR}/{id}.pgid"),
            command: format!("{RUN_DIR}/job-{id}.sh"),
        }
    }
}

/// A background job: its own process group (pgid = its shell's pid), so a signal to the group
/// reaches all of it and nothing else. The agent keeps the shell unreaped (a zombie) until no
/// process of the group is left: while it exists the kernel cannot give the group's number to
/// another process, so the `ID.pgid` file, removed just before the shell is reaped, never names
/// anything but this job.
struct Job {
    id: String,
    child: Child,
    pgid: i32,
    exit_written: bool,
}

impl Job {
    fn file(&self, what: &str) -> String {
        format!("{JOBS_DIR}/{}.{what}", self.id)
    }

    /// `true` while the job's group holds its number. The group's leader is the job's
    /// supervisor, which writes the shell's status (128+N for signal N, as shells report it) to
    /// the exit file when the shell ends, and lives on while anything the job started runs. If
    /// the supervisor itself ended without writing it (killed), its own status goes there; when
    /// nothing of the group is left, the handle goes and the supervisor is reaped.
    fn poll(&mut self) -> bool {
        if !self.exit_written && Path::new(&self.file("exit")).exists() {
            self.exit_written = true;
        }
        if !self.exit_written {
            match exited_status(self.pgid) {
                Some(code) => {
                    let _ = fs::write(self.file("exit"), format!("{code}\n"));
                    self.exit_written = true;
                }
                None => return true,
            }
        }
        if group_has_live_members(self.pgid) {
            return true;
        }
        // `abhed-job kill` holds a shared lock on the handle while it signals: take it
        // exclusively, so no kill is in flight when the number is released.
        let pgid_file = self.file("pgid");
        if let Ok(f) = File::open(&pgid_file) {
            let _ = f.lock();
            let _ = fs::remove_file(&pgid_file);
        }
        let _ = self.child.wait();
        let _ = fs::remove_file(JobPaths::new(&self.id).command);
        false
    }
}

/// The exit status of the job's shell if it has ended, without reaping it (so its pid stays
/// taken).
#[allow(unsafe_code)]
fn exited_status(pid: i32) -> Option<i32> {
    // SAFETY: siginfo_t is plain data, zeroed is a valid value; waitid writes into it.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: `info` is a valid, writable siginfo_t for the duration of the call.
    let rc = unsafe {
        libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, libc::WEXITED | libc::WNOHANG | libc::WNOWAIT)
    };
    // SAFETY: si_pid and si_status are valid to read for a SIGCHLD siginfo, which waitid fills.
    let (who, status) = unsafe { (info.si_pid(), info.si_status()) };
    if rc != 0 || who == 0 {
        return None;
    }
    Some(if info.si_code == libc::CLD_EXITED { status } else { 128 + status })
}

/// Whether any process of group `pgid` is still running (not a zombie).
fn group_has_live_members(pgid: i32) -> bool {
    let Ok(entries) = fs::read_dir("/proc") else { return false };
    entries.flatten().any(|e| {
        let Ok(stat) = fs::read_to_string(e.path().join("stat")) else { return false };
        // pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else { return false };
        let mut f = rest.split_whitespace();
        let state = f.next().unwrap_or("");
        let pgrp = f.nth(1).and_then(|p| p.parse::<i32>().ok());
        pgrp == Some(pgid) && state != "Z" && state != "X"
    })
}

/// `abhed-job kill ID [SIGNAL]`, `abhed-job status ID`, `abhed-job list`.
fn job_cli(args: Vec<String>) -> i32 {
    let usage = "usage: abhed-job kill ID [TERM|KILL|INT|HUP] | abhed-job status ID | abhed-job list";
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args.as_slice() {
        ["list"] => {
            let mut ids: Vec<String> = fs::read_dir(JOBS_DIR)
                .map(|d| {
                    d.flatten()
                        .filter_map(|e| e.file_name().to_str()?.strip_suffix(".log").map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            ids.sort();
            if ids.is_empty() {
                println!("no background jobs in this VM");
            }
            for id in ids {
                println!("{id} {}", job_state(&id));
            }
            0
        }
        ["status", id] => match check_id(id) {
            Err(code) => code,
            Ok(()) => {
                println!("{}", job_state(id));
                0
            }
        },
        ["kill", id] | ["kill", id, _] => {
            if let Err(code) = check_id(id) {
                return code;
            }
            let sig = match args.get(2).map(|s| s.trim_start_matches('-').trim_start_matches("SIG")) {
                None | Some("TERM") | Some("15") => libc::SIGTERM,
                Some("KILL") | Some("9") => libc::SIGKILL,
                Some("INT") | Some("2") => libc::SIGINT,
                Some("HUP") | Some("1") => libc::SIGHUP,
                Some(other) => {
                    eprintln!("abhed-job: unknown signal {other}; use TERM, KILL, INT or HUP");
                    return 2;
                }
            };
            kill_job(id, sig)
        }
        _ => {
            eprintln!("{usage}");
            2
        }
    }
}

/// A known job id, or the exit code of a message saying why not.
fn check_id(id: &str) -> Result<(), i32> {
    if !valid_job_id(id) {
        eprintln!("abhed-job: {id:?} is not a job id (8 hex digits, as the bash observation gave it)");
        return Err(2);
    }
    if !Path::new(&JobPaths::new(id).log).exists() {
        eprintln!(
            "abhed-job: there is no job {id} in this VM. Jobs live only as long as the VM that runs them: this one ended with its VM, or ran in another."
        );
        return Err(1);
    }
    Ok(())
}

fn job_state(id: &str) -> String {
    let p = JobPaths::new(id);
    let exit = fs::read_to_string(&p.exit).ok().map(|s| s.trim().to_string());
    let running = Path::new(&p.pgid).exists();
    match (exit, running) {
        (None, _) => "running".into(),
        (Some(code), true) => format!("its shell exited with {code}; processes it started are still running"),
        (Some(code), false) => format!("ended with exit code {code}"),
    }
}

fn kill_job(id: &str, sig: i32) -> i32 {
    let p = JobPaths::new(id);
    // Held while signalling: the agent takes it exclusively before it releases the group's
    // number, so the number read here is still the job's when the signal goes.
    let file = match File::open(&p.pgid) {
        Ok(f) => f,
        Err(_) => {
            println!("job {id} has already ended ({}); nothing to kill", job_state(id));
            return 0;
        }
    };
    if file.lock_shared().is_err() {
        eprintln!("abhed-job: cannot lock the handle of job {id}");
        return 1;
    }
    let mut text = String::new();
    let linked = fs::metadata(&p.pgid).is_ok();
    let pgid = (&file).read_to_string(&mut text).ok().and_then(|_| text.trim().parse::<i32>().ok());
    match pgid {
        Some(pgid) if linked && pgid > 1 => {
            if signal_group(pgid, sig) {
                println!("sent SIG{} to job {id} (every process of its group)", signal_name(sig));
            } else {
                println!("job {id} has already ended; nothing to kill");
            }
            0
        }
        _ => {
            println!("job {id} has already ended; nothing to kill");
            0
        }
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGKILL => "KILL",
        libc::SIGINT => "INT",
        libc::SIGHUP => "HUP",
        _ => "TERM",
    }
}
