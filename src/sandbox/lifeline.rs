//! A VM never outlives the abhed that started it, and what a dead abhed left behind is cleaned
//! up by the next one.
//!
//! QEMU is started with `PR_SET_PDEATHSIG(SIGKILL)`: the kernel kills it the moment its parent
//! dies, `kill -9` included. The kernel's "parent" is the *thread* that forked, not the
//! process, and abhed boots VMs from threads that end while the process goes on (the agent
//! loop's, a subagent's), so every QEMU is forked by one spawner thread that lives as long as
//! the process. The child checks `getppid()` after setting the signal, for a parent that died
//! before it could.
//!
//! Each VM's private directory (`$TMPDIR/abhed-vm-*`) holds `owner.lock`, locked by the abhed
//! that owns it for as long as that process lives (the kernel drops the lock when it dies). A
//! lock that can be taken therefore means a dead owner: the next boot kills any QEMU still
//! running from that directory and removes it.

use std::fs::File;
use std::io::{self, Write as _};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::{Mutex, OnceLock, mpsc};
use std::time::{Duration, SystemTime};

/// The prefix of every VM directory in the temp directory.
pub const DIR_PREFIX: &str = "abhed-vm-";
/// The lock file in a VM directory.
const LOCK: &str = "owner.lock";
/// A directory without a lock file younger than this may be one being made: left alone.
const YOUNG: Duration = Duration::from_secs(10);

type Order = (Command, mpsc::Sender<io::Result<Child>>);

/// Start `cmd` so that it dies with this process: forked by the process-wide spawner thread,
/// with `PR_SET_PDEATHSIG(SIGKILL)`.
pub fn spawn_tied(mut cmd: Command) -> io::Result<Child> {
    let parent = std::process::id() as libc::pid_t;
    #[allow(unsafe_code)]
    // SAFETY: the closure runs in the child between fork and exec; it calls only prctl and
    // getppid, both async-signal-safe, and builds its errors without allocating.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The parent died before the signal was set: it will never come. Don't start.
            if libc::getppid() != parent {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
    let (reply, answer) = mpsc::channel();
    let sent = spawner().lock().map_err(|_| io::Error::other("the VM spawner is poisoned"))?.send((cmd, reply));
    if sent.is_err() {
        return Err(io::Error::other("the VM spawner thread is not running"));
    }
    answer.recv().map_err(|_| io::Error::other("the VM spawner thread stopped"))?
}

/// The spawner thread's queue. The thread never ends: the sender lives in a static.
fn spawner() -> &'static Mutex<mpsc::Sender<Order>> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<Order>>> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Order>();
        // If the thread cannot start, `rx` is dropped with the closure and every send fails,
        // which `spawn_tied` reports.
        let _ = std::thread::Builder::new().name("abhed-vm-spawner".into()).spawn(move || {
            for (mut cmd, reply) in rx {
                let _ = reply.send(cmd.spawn());
            }
        });
        Mutex::new(tx)
    })
}

/// A VM's private directory: created mode 0700 in the temp directory, locked by this process
/// while it lives, removed when dropped.
pub struct VmDir {
    dir: tempfile::TempDir,
    _lock: File,
}

impl VmDir {
    /// Create one, after removing what dead owners left (see the module's comment).
    pub fn create() -> io::Result<VmDir> {
        let dir = tempfile::Builder::new().prefix(DIR_PREFIX).tempdir()?;
        // Locked under another name, then renamed: `owner.lock` is never seen unlocked while
        // its owner lives, so a sweeper needs no grace period to judge it.
        let fresh = dir.path().join(format!("{LOCK}.new"));
        let lock = File::create(&fresh)?;
        lock.lock()?;
        let _ = writeln!(&lock, "{}", std::process::id());
        std::fs::rename(&fresh, dir.path().join(LOCK))?;
        let uid = std::fs::metadata(dir.path())?.uid();
        if let Some(parent) = dir.path().parent() {
            sweep(parent, uid, dir.path());
        }
        Ok(VmDir { dir, _lock: lock })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// Remove the VM directories in `tmp` that belong to `uid` and whose owner is gone, killing any
/// QEMU still running from them; `keep` is the caller's own. Returns what was removed.
pub fn sweep(tmp: &Path, uid: u32, keep: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(tmp) else { return Vec::new() };
    let mut removed = Vec::new();
    for e in entries.flatten() {
        let path = e.path();
        if path == keep || !e.file_name().to_string_lossy().starts_with(DIR_PREFIX) {
            continue;
        }
        // Not a symlink, and ours: another user's directories are theirs to clean.
        let Ok(meta) = std::fs::symlink_metadata(&path) else { continue };
        if !meta.is_dir() || meta.uid() != uid {
            continue;
        }
        // Held until the directory is gone, so two sweepers do not race each other.
        let _held = match File::open(path.join(LOCK)) {
            Ok(f) => {
                if f.try_lock().is_err() {
                    continue; // a live owner
                }
                Some(f)
            }
            // Left by an abhed from before the lock (or a half-made directory): stale only when
            // no QEMU with a living parent runs from it, and it is not new.
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if age(&path) < YOUNG || qemus_of(&path).iter().any(|p| parent_of(*p).is_some_and(|pp| pp > 1)) {
                    continue;
                }
                None
            }
            Err(_) => continue,
        };
        for pid in qemus_of(&path) {
            kill_exactly(pid, &path);
        }
        if std::fs::remove_dir_all(&path).is_ok() {
            removed.push(path);
        }
    }
    removed
}

fn age(p: &Path) -> Duration {
    std::fs::symlink_metadata(p)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| SystemTime::now().duration_since(t).ok())
        .unwrap_or_default()
}

/// The processes whose command line names something inside `dir` (QEMU names its socket there).
fn qemus_of(dir: &Path) -> Vec<u32> {
    let needle = format!("{}/", dir.display());
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| cmdline_mentions(*pid, &needle))
        .collect()
}

fn cmdline_mentions(pid: u32, needle: &str) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline")).map(|c| String::from_utf8_lossy(&c).contains(needle)).unwrap_or(false)
}

fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// SIGKILL `pid` if it still names something inside `dir`: through a pidfd, so that a pid
/// reused between the look and the kill is not hit.
fn kill_exactly(pid: u32, dir: &Path) {
    let Some(fd) = Pidfd::open(pid) else { return };
    if cmdline_mentions(pid, &format!("{}/", dir.display())) {
        fd.kill();
    }
}

/// A handle on one process that stays valid however its pid is reused.
pub struct Pidfd(OwnedFd);

impl Pidfd {
    pub fn open(pid: u32) -> Option<Pidfd> {
        #[allow(unsafe_code)]
        // SAFETY: a plain syscall with integer arguments.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
        if fd < 0 {
            return None;
        }
        #[allow(unsafe_code)]
        // SAFETY: pidfd_open returned a new descriptor that nothing else owns.
        Some(Pidfd(unsafe { OwnedFd::from_raw_fd(fd as i32) }))
    }

    /// SIGKILL the process, if it has not been reaped.
    pub fn kill(&self) -> bool {
        #[allow(unsafe_code)]
        // SAFETY: a plain syscall on a descriptor we own; a null siginfo is allowed.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.0.as_raw_fd(),
                libc::SIGKILL,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            )
        };
        rc == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spawned_child_dies_with_the_thread_that_outlives_its_caller() {
        // Spawned from a short-lived thread: it must not die when that thread ends (the
        // spawner thread, not the caller, is its parent), and it must be running.
        let child = std::thread::spawn(|| {
            let mut cmd = Command::new("sleep");
            cmd.arg("30");
            spawn_tied(cmd).unwrap()
        })
        .join()
        .unwrap();
        std::thread::sleep(Duration::from_millis(200));
        let mut child = child;
        assert!(child.try_wait().unwrap().is_none(), "the child died with the thread that asked for it");
        // Its parent is this process (the spawner thread is one of ours). That it dies with the
        // process is tested end to end in tests/sandbox_orphans.rs, by kill -9 of abhed.
        assert_eq!(parent_of(child.id()), Some(std::process::id()));
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn a_dead_owners_directory_is_swept_and_a_live_ones_is_not() {
        let tmp = tempfile::tempdir().unwrap();
        let uid = std::fs::metadata(tmp.path()).unwrap().uid();
        let old = SystemTime::now() - Duration::from_secs(3600);
        let mk = |name: &str, locked: bool| {
            let d = tmp.path().join(name);
            std::fs::create_dir(&d).unwrap();
            let f = File::create(d.join(LOCK)).unwrap();
            f.set_modified(old).unwrap();
            if locked {
                // Another open file description: flock conflicts with it as with another process.
                let holder = File::open(d.join(LOCK)).unwrap();
                holder.lock().unwrap();
                return (d, Some(holder));
            }
            (d, None)
        };
        let (dead, _) = mk("abhed-vm-dead", false);
        let (live, _holder) = mk("abhed-vm-live", true);
        // Being made: no lock file yet (only its temporary one), and new.
        let young = tmp.path().join("abhed-vm-young");
        std::fs::create_dir(&young).unwrap();
        File::create(young.join(format!("{LOCK}.new"))).unwrap();
        let other = tmp.path().join("not-a-vm");
        std::fs::create_dir(&other).unwrap();
        let removed = sweep(tmp.path(), uid, Path::new("/nonexistent"));
        assert_eq!(removed, vec![dead.clone()]);
        assert!(!dead.exists() && live.exists() && young.exists() && other.exists());
    }
}
