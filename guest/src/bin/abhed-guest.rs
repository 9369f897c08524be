//! The guest agent: started by the VM's init script (PID 1, busybox sh), it opens the
//! `abhed.0` virtio-serial port and runs the host's requests. One request at a time: the host
//! never sends the next before it has the answer to the last.
//!
//! Each command runs in a fresh shell in its own process group, stdin from /dev/null, stdout and
//! stderr combined into one pipe. When the shell exits, whatever is left of its group is killed,
//! so a foreground call never leaves processes behind; `Spawn` is the way to keep one running.

use std::ffi::CString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use abhed_guest::{
    ExecResult, HeadTail, PORT_NAME, PROTOCOL_VERSION, Request, Response, Share, SpawnResult, read_frame, write_frame,
};

/// Where background jobs keep their output and exit status. /tmp is the guest's own tmpfs, so
/// the model can read a log with `cat` or `tail` in a later call.
const JOBS_DIR: &str = "/tmp/abhed-jobs";
/// Where the shell's exit trap leaves its working directory.
const CWD_DIR: &str = "/run/abhed";
/// The PATH a command gets until the host sets one.
const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

fn main() {
    if let Err(e) = serve() {
        // The console is the serial log the host keeps for a crash report.
        eprintln!("abhed-guest: {e}");
        std::process::exit(1);
    }
}

fn serve() -> io::Result<()> {
    let port = find_port()?;
    let mut rx = OpenOptions::new().read(true).write(true).open(&port)?;
    let mut tx = rx.try_clone()?;
    let kernel = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim().to_string();
    write_frame(&mut tx, &Response::Ready { protocol: PROTOCOL_VERSION, kernel })?;
    fs::create_dir_all(CWD_DIR)?;
    fs::create_dir_all(JOBS_DIR)?;
    let mut shell = "/bin/sh".to_string();
    let mut path = DEFAULT_PATH.to_string();
    let mut jobs: Vec<Job> = Vec::new();
    while let Some(req) = read_frame::<_, Request>(&mut rx)? {
        // Reap finished background jobs and write their status, before a command can look.
        jobs.retain_mut(Job::poll);
        let resp = match req {
            Request::Setup { shares, path: p } => {
                let errors = setup(&shares);
                path = p;
                if Path::new("/bin/bash").exists() {
                    shell = "/bin/bash".to_string();
                }
                Response::SetupDone { shell: shell.clone(), errors }
            }
            Request::Exec { id, command, cwd, fallback_cwd, timeout_ms } => {
                match exec(&shell, &path, id, &command, &cwd, &fallback_cwd, timeout_ms) {
                    Ok(r) => Response::Exec(r),
                    Err(e) => Response::Failed { id, message: format!("could not start the shell: {e}") },
                }
            }
            Request::Spawn { id, command, cwd, fallback_cwd } => {
                match spawn(&shell, &path, id, &command, &cwd, &fallback_cwd) {
                    Ok((r, job)) => {
                        jobs.push(job);
                        Response::Spawned(r)
                    }
                    Err(e) => Response::Failed { id, message: format!("could not start the job: {e}") },
                }
            }
            Request::Shutdown => {
                write_frame(&mut tx, &Response::ShuttingDown)?;
                power_off();
                return Ok(());
            }
        };
        write_frame(&mut tx, &resp)?;
    }
    Ok(())
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
fn kill_group(pgid: i32) -> bool {
    // SAFETY: plain syscall. A negative pid addresses the process group.
    unsafe { libc::kill(-pgid, libc::SIGKILL) == 0 }
}

/// Kill the group until nothing is left in it: a process forking as the signal lands (a fork
/// bomb) can leave a member behind one kill. `true` if there was anything to kill.
fn kill_group_fully(pgid: i32) -> bool {
    let found = kill_group(pgid);
    for _ in 0..1000 {
        if !kill_group(pgid) {
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

fn shell_command(shell: &str, path: &str, script: &str) -> Command {
    let mut cmd = Command::new(shell);
    cmd.arg("-c").arg(script).env_clear();
    for (k, v) in [
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
    ] {
        cmd.env(k, v);
    }
    cmd.stdin(Stdio::null()).process_group(0);
    cmd
}

#[allow(clippy::too_many_arguments)]
fn exec(
    shell: &str,
    path: &str,
    id: u64,
    command: &str,
    cwd: &str,
    fallback: &str,
    timeout_ms: u64,
) -> io::Result<ExecResult> {
    let start = Instant::now();
    let (cwd, cwd_reset) = pick_cwd(cwd, fallback);
    let cwd_file = format!("{CWD_DIR}/cwd.{id}");
    // The trap reports where the shell ended up, so the next call starts there.
    let script =
        format!("trap 'pwd -P > {} 2>/dev/null' EXIT\ncd -- {} || exit 1\n{command}", quote(&cwd_file), quote(&cwd));
    let (reader, writer) = io::pipe()?;
    let mut cmd = shell_command(shell, path, &script);
    cmd.stdout(writer.try_clone()?).stderr(writer);
    let mut child = cmd.spawn()?;
    // Our copies of the write end are gone with `cmd`: EOF comes when the group's are.
    drop(cmd);
    let pgid = child.id() as i32;

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
    let (exit_tx, exit_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = exit_tx.send(child.wait());
    });

    let mut timed_out = false;
    let status = match exit_rx.recv_timeout(Duration::from_millis(timeout_ms)) {
        Ok(s) => s?,
        Err(_) => {
            timed_out = true;
            kill_group_fully(pgid);
            exit_rx.recv().map_err(io::Error::other)??
        }
    };
    // Whatever the shell left running in its group goes with it.
    let stragglers_killed = !timed_out && kill_group_fully(pgid);
    // A process that left the group (setsid) may still hold the pipe: don't wait for it long.
    let _ = eof_rx.recv_timeout(Duration::from_millis(500));
    let output = capture.lock().map(|c| c.finish()).unwrap_or_default();
    let new_cwd = fs::read_to_string(&cwd_file).ok().map(|s| s.trim_end_matches('\n').to_string());
    let _ = fs::remove_file(&cwd_file);
    Ok(ExecResult {
        id,
        exit_code: status.code(),
        signal: status.signal(),
        timed_out,
        stragglers_killed,
        output,
        cwd: new_cwd.filter(|s| !s.is_empty()),
        cwd_reset,
        duration_ms: start.elapsed().as_millis() as u64,
    })
}

fn spawn(shell: &str, path: &str, id: u64, command: &str, cwd: &str, fallback: &str) -> io::Result<(SpawnResult, Job)> {
    let (cwd, cwd_reset) = pick_cwd(cwd, fallback);
    let log = format!("{JOBS_DIR}/{id}.log");
    let exit_file = format!("{JOBS_DIR}/{id}.exit");
    let script = format!("cd -- {} || exit 1\n{command}", quote(&cwd));
    let out = File::create(&log)?;
    let mut cmd = shell_command(shell, path, &script);
    cmd.stdout(out.try_clone()?).stderr(out);
    let child = cmd.spawn()?;
    let pid = child.id() as i32;
    Ok((SpawnResult { id, pid, log, exit_file: exit_file.clone(), cwd_reset }, Job { child, exit_file }))
}

/// A background job. Its own process group (pid = pgid), so `kill -- -PID` reaches all of it
/// and nothing else; the agent reaps it and writes its status.
struct Job {
    child: Child,
    exit_file: String,
}

impl Job {
    /// `true` while it runs. Once it has ended, its status (128+N for signal N, as shells
    /// report it) is written to its exit file.
    fn poll(&mut self) -> bool {
        match self.child.try_wait() {
            Ok(None) => true,
            Ok(Some(status)) => {
                let code = status.code().or_else(|| status.signal().map(|s| 128 + s)).unwrap_or(-1);
                let _ = fs::write(&self.exit_file, format!("{code}\n"));
                false
            }
            Err(_) => false,
        }
    }
}
