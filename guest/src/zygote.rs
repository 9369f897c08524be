//! A process forked from the agent at its start, while the agent is still single-threaded, that
//! forks one supervisor per command on request. The supervisor then needs no exec of its own:
//! under TCG the exec of the agent's static binary as `abhed-supervise` was most of the exec
//! check's cost on a command that execs little (a `true` round trip went from 29.7 to 61.9 ms
//! with it, docs/BENCHMARKS.md).
//!
//! Why a zygote and not a fork of the agent: the agent runs threads (the channel's reader, the
//! output readers), and a child forked from a multi-threaded process may only make
//! async-signal-safe calls until it execs; the supervisor allocates, parses and decides. The
//! zygote never starts a thread, so its children may run the supervisor as they are.
//!
//! The channel is a `SOCK_SEQPACKET` socket pair. A request is one message: JSON
//! `{"argv": [...], "env": [[K, V], ...]}` (the supervisor's argv as [`supervise::Args::to_argv`]
//! writes it) with four descriptors: the supervisor's stdin (its report channel), the
//! command's stdout and stderr, and a pipe for the exit status. The reply is the supervisor's
//! pid (also its process group), or a negative errno. The supervisor writes its exit status (4
//! bytes, native order) to the status pipe as it exits; a supervisor that was killed writes
//! none, and the end of the pipe without a status means SIGKILL.

use std::io::{self, Read as _};
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd, RawFd};
use std::os::unix::process::ExitStatusExt as _;
use std::process::ExitStatus;

use crate::supervise;

/// The descriptors a request carries.
const FDS: usize = 4;
/// The largest request (a policy is a few KiB; the socket's own limit is lower than this).
const MAX_REQUEST: usize = 1024 * 1024;

#[derive(serde::Serialize, serde::Deserialize)]
struct Request {
    argv: Vec<String>,
    env: Vec<(String, String)>,
}

/// The agent's end of the channel.
pub struct Zygote {
    sock: OwnedFd,
}

/// A supervisor the zygote started.
pub struct Started {
    /// Its pid, which is also its process group.
    pub pid: i32,
    /// The read end of its exit-status pipe ([`wait`]).
    pub status: std::io::PipeReader,
}

impl Zygote {
    /// Fork the zygote. Call it while this process is single-threaded (see the module doc).
    /// `exec_self`: the child execs this binary as [`ZYGOTE_NAME`] (the agent; a test binary
    /// serves in the forked child as it is).
    #[allow(unsafe_code)]
    pub fn start(exec_self: bool) -> io::Result<Zygote> {
        let mut fds = [0 as RawFd; 2];
        // SAFETY: `fds` is a valid out-array of two descriptors.
        if unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0, fds.as_mut_ptr()) }
            != 0
        {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both descriptors were just made and are owned here only.
        let (ours, theirs) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // SAFETY: the caller is single-threaded (the contract of this function), so the child
        // may run ordinary code.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(io::Error::last_os_error());
        }
        if pid == 0 {
            drop(ours);
            if exec_self {
                become_zygote(theirs);
            }
            serve(&theirs);
        }
        Ok(Zygote { sock: ours })
    }

    /// Start a supervisor with `argv` (as [`supervise::Args::to_argv`] writes it, after the
    /// name), `env` as its whole environment, and these descriptors as its stdin, stdout and
    /// stderr. The caller's copies of the descriptors may be dropped once this returns.
    pub fn supervise(
        &mut self,
        argv: Vec<String>,
        env: Vec<(String, String)>,
        stdin: OwnedFd,
        stdout: OwnedFd,
        stderr: OwnedFd,
    ) -> io::Result<Started> {
        let (status, status_tx) = io::pipe()?;
        let data = serde_json::to_vec(&Request { argv, env }).map_err(io::Error::other)?;
        let status_tx = OwnedFd::from(status_tx);
        let fds = [stdin.as_raw_fd(), stdout.as_raw_fd(), stderr.as_raw_fd(), status_tx.as_raw_fd()];
        send(&self.sock, &data, &fds)?;
        let mut reply = [0u8; 4];
        let (n, _) = recv(&self.sock, &mut reply)?;
        if n != 4 {
            return Err(io::Error::other("the zygote is gone"));
        }
        match i32::from_ne_bytes(reply) {
            pid if pid > 0 => Ok(Started { pid, status }),
            errno => Err(io::Error::from_raw_os_error(-errno)),
        }
    }
}

/// The exit status of a started supervisor, once it is gone: what it wrote, or SIGKILL where
/// it was killed before it could. It returns only when the process no longer exists (up to a
/// second after its status), as a `wait` would: the agent then kills what is left in the group
/// and reports it as left running, which the supervisor itself must not count as.
#[allow(unsafe_code)]
pub fn wait(started: Started) -> ExitStatus {
    let Started { pid, mut status } = started;
    let mut bytes = [0u8; 4];
    let exit = match status.read_exact(&mut bytes) {
        Ok(()) => ExitStatus::from_raw((i32::from_ne_bytes(bytes) & 0xff) << 8),
        Err(_) => ExitStatus::from_raw(libc::SIGKILL),
    };
    // The pipe's end comes as the supervisor's descriptors close, just before it is reaped.
    let _ = status.read_to_end(&mut Vec::new());
    for _ in 0..1000 {
        // SAFETY: signal 0 only asks whether the process exists.
        if unsafe { libc::kill(pid, 0) } != 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    exit
}

/// The name the zygote runs under: not the agent's, so that `pidof abhed-guest` finds the agent
/// alone (a command that kills the agent by that name must not kill its own supervisor first).
pub const ZYGOTE_NAME: &str = "abhed-zygote";

/// In the forked child: exec this binary again as [`ZYGOTE_NAME`] with the socket (one exec
/// per VM, so its command line and name are its own); where that fails, serve as it is.
#[allow(unsafe_code)]
fn become_zygote(sock: OwnedFd) -> ! {
    let fd = sock.as_raw_fd();
    if let (Ok(exe), Ok(name), Ok(arg)) = (
        std::fs::read_link("/proc/self/exe"),
        std::ffi::CString::new(ZYGOTE_NAME),
        std::ffi::CString::new(fd.to_string()),
    ) && let Ok(exe) = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(exe.as_os_str()))
    {
        let argv = [name.as_ptr(), arg.as_ptr(), std::ptr::null()];
        // SAFETY: the socket must outlive the exec (close-on-exec off); every pointer is a
        // NUL-terminated string or the array's NULL end, alive for the call.
        unsafe {
            libc::fcntl(fd, libc::F_SETFD, 0);
            libc::execv(exe.as_ptr(), argv.as_ptr());
            libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
        }
    }
    serve(&sock)
}

/// The zygote's `main`, exec'd by [`become_zygote`]: `abhed-zygote FD`.
#[allow(unsafe_code)]
pub fn main(args: &[String]) -> i32 {
    let Some(fd) = args.first().and_then(|a| a.parse::<RawFd>().ok()).filter(|fd| *fd > 2) else {
        eprintln!("{ZYGOTE_NAME}: usage: {ZYGOTE_NAME} FD (started by the agent only)");
        return 2;
    };
    // SAFETY: the descriptor was left open for us by the agent's fork (become_zygote); nothing
    // else here owns it. PR_SET_NAME with a NUL-terminated name.
    unsafe {
        libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
        libc::prctl(libc::PR_SET_NAME, c"abhed-zygote".as_ptr(), 0, 0, 0);
        serve(&OwnedFd::from_raw_fd(fd))
    }
}

/// The zygote's loop: one supervisor per request, until the agent closes its end.
#[allow(unsafe_code)]
fn serve(sock: &OwnedFd) -> ! {
    // Supervisors are reaped by the kernel: their status goes through their pipe.
    // SAFETY: setting a signal disposition to a constant.
    unsafe { libc::signal(libc::SIGCHLD, libc::SIG_IGN) };
    let mut buf = vec![0u8; MAX_REQUEST];
    loop {
        let (n, fds) = match recv(sock, &mut buf) {
            Ok((0, _)) | Err(_) => {
                // SAFETY: leaving the process without running the agent's destructors.
                unsafe { libc::_exit(0) }
            }
            Ok(got) => got,
        };
        let reply = match (serde_json::from_slice::<Request>(&buf[..n]), <[OwnedFd; FDS]>::try_from(fds)) {
            (Ok(req), Ok(fds)) => {
                // SAFETY: this process is single-threaded (module doc), so the child may run the
                // supervisor as it is; it never returns.
                let pid = unsafe { libc::fork() };
                if pid == 0 {
                    child(sock, req, fds);
                }
                if pid > 0 {
                    // The child makes its own group too; whichever runs first, the group
                    // exists before the agent hears the pid and may signal it.
                    // SAFETY: a plain syscall.
                    unsafe { libc::setpgid(pid, pid) };
                }
                if pid < 0 { -io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO) } else { pid }
            }
            _ => -libc::EINVAL,
        };
        let _ = send(sock, &reply.to_ne_bytes(), &[]);
    }
}

/// A supervisor's start in the zygote's child: its own process group, the descriptors in place,
/// its environment, then the supervisor; its exit status to the pipe.
#[allow(unsafe_code)]
fn child(sock: &OwnedFd, req: Request, fds: [OwnedFd; FDS]) -> ! {
    let [stdin, stdout, stderr, status] = fds;
    // SAFETY: plain syscalls on descriptors this process owns; `clearenv`/`setenv` in a
    // single-threaded process.
    unsafe {
        libc::signal(libc::SIGCHLD, libc::SIG_DFL);
        libc::prctl(libc::PR_SET_NAME, c"abhed-supervise".as_ptr(), 0, 0, 0);
        libc::setpgid(0, 0);
        libc::close(sock.as_raw_fd());
        // dup2 clears close-on-exec on the copies: the shell inherits 1 and 2 (the supervisor
        // keeps 0 for itself); the status pipe stays close-on-exec, the supervisor's alone.
        if libc::dup2(stdin.as_raw_fd(), 0) < 0
            || libc::dup2(stdout.as_raw_fd(), 1) < 0
            || libc::dup2(stderr.as_raw_fd(), 2) < 0
        {
            libc::_exit(125);
        }
        libc::clearenv();
        for (k, v) in &req.env {
            if let (Ok(k), Ok(v)) = (std::ffi::CString::new(k.as_str()), std::ffi::CString::new(v.as_str())) {
                libc::setenv(k.as_ptr(), v.as_ptr(), 1);
            }
        }
    }
    for fd in [stdin, stdout, stderr] {
        // A descriptor received as 0, 1 or 2 (none is, while the zygote's own are open) is
        // now the copy itself.
        if fd.as_raw_fd() <= 2 {
            std::mem::forget(fd);
        }
    }
    let code = supervise::main(&req.argv);
    let bytes = code.to_ne_bytes();
    // SAFETY: writing 4 bytes from a live buffer, then leaving without destructors.
    unsafe {
        libc::write(status.as_raw_fd(), bytes.as_ptr().cast(), bytes.len());
        libc::_exit(code)
    }
}

/// Send `data` with `fds` as one message.
#[allow(unsafe_code)]
fn send(sock: &OwnedFd, data: &[u8], fds: &[RawFd]) -> io::Result<()> {
    let mut iov = libc::iovec { iov_base: data.as_ptr().cast_mut().cast(), iov_len: data.len() };
    let bytes = std::mem::size_of_val(fds) as u32;
    // u64s: the control buffer must be aligned for `cmsghdr`.
    // SAFETY: CMSG_SPACE is arithmetic.
    let space = unsafe { libc::CMSG_SPACE(bytes) } as usize;
    let mut control = vec![0u64; space.div_ceil(8)];
    // SAFETY: a zeroed msghdr is valid; every pointer set below outlives the sendmsg call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if !fds.is_empty() {
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        // SAFETY: the control buffer holds one header and `bytes` of data (CMSG_SPACE above).
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(bytes) as _;
            std::ptr::copy_nonoverlapping(fds.as_ptr(), libc::CMSG_DATA(cmsg).cast::<RawFd>(), fds.len());
        }
    }
    // SAFETY: `msg` is fully set up above.
    if unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Receive one message into `buf`, with the descriptors it carries (close-on-exec here).
#[allow(unsafe_code)]
fn recv(sock: &OwnedFd, buf: &mut [u8]) -> io::Result<(usize, Vec<OwnedFd>)> {
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    // SAFETY: CMSG_SPACE is arithmetic.
    let space = unsafe { libc::CMSG_SPACE((FDS * std::mem::size_of::<RawFd>()) as u32) } as usize;
    let mut control = vec![0u64; space.div_ceil(8)];
    // SAFETY: a zeroed msghdr is valid; every pointer set below outlives the recvmsg call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    // SAFETY: `msg` is fully set up above.
    let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut fds = Vec::new();
    // SAFETY: the kernel filled the control buffer; each header is walked with the CMSG macros
    // and its descriptors are new ones, owned here from now on.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let len = (*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                let data = libc::CMSG_DATA(cmsg).cast::<RawFd>();
                for i in 0..len / std::mem::size_of::<RawFd>() {
                    fds.push(OwnedFd::from_raw_fd(data.add(i).read_unaligned()));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    if msg.msg_flags & (libc::MSG_TRUNC | libc::MSG_CTRUNC) != 0 {
        return Err(io::Error::other("a request was cut short"));
    }
    Ok((n as usize, fds))
}
