//! The disk watchdog: how much one bash call may add to the disks the workspace is on.
//!
//! The guest writes the workspace through QEMU's 9p server, so nothing in the guest can be
//! trusted to count. A host thread watches the free space of each disk that holds a shared
//! root (statvfs, every [`POLL`]), in windows: from the start of each call to its end, and from
//! there to the next call's start (background jobs). When more than the cap has gone,
//! it asks the guest to stop the command and every background job; if the disk keeps filling
//! after that (a guest that does not obey), it kills QEMU.
//!
//! The measure is the disk's free space, so another program on the host writing to the same
//! disk during the call counts too; the messages say so.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the free space is read.
const POLL: Duration = Duration::from_millis(100);
/// After a stop request, how much more may go before QEMU is killed. A guest that obeys stops
/// within milliseconds (a few MiB in flight); one that writes this much more did not.
const HARD_MARGIN: u64 = 256 * 1024 * 1024;

/// The watchdog tripped: `added` bytes went from the disk since the call started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trip {
    pub added: u64,
    pub cap: u64,
    /// The guest was asked to stop everything.
    pub stopped: bool,
    /// The guest did not stop in time, and QEMU was killed.
    pub vm_killed: bool,
}

impl Trip {
    /// What happened, for the model: the cap, with the key that sets it.
    pub fn describe(&self) -> String {
        format!(
            "the disk that holds the workspace lost {} of free space, more than the {} one bash call may add (sandbox.disk_quota_mib = {} in the user config). The measure is the disk's free space, so writes by other programs on the host count too",
            mib(self.added),
            mib(self.cap),
            self.cap / (1024 * 1024)
        )
    }
}

pub fn mib(bytes: u64) -> String {
    let m = bytes as f64 / (1024.0 * 1024.0);
    if m >= 1024.0 { format!("{:.1} GiB", m / 1024.0) } else { format!("{m:.0} MiB") }
}

/// What the watchdog does when it trips.
pub struct Actions {
    /// Ask the guest to stop the command and every job.
    pub stop: Box<dyn Fn() + Send>,
    /// Kill QEMU.
    pub kill: Box<dyn Fn() + Send>,
}

pub struct DiskWatch {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

struct Shared {
    /// One path on each distinct disk among the shares.
    disks: Vec<PathBuf>,
    cap: u64,
    state: Mutex<State>,
    quit: AtomicBool,
}

struct State {
    /// Free bytes of each disk when the current call started.
    base: Vec<u64>,
    /// The trip, and how much had gone when it happened.
    trip: Option<(Trip, u64)>,
}

impl DiskWatch {
    /// Watch the disks of `shares` with `cap` bytes per call.
    pub fn start(shares: &[PathBuf], cap: u64, actions: Actions) -> DiskWatch {
        let mut devs = Vec::new();
        let mut disks = Vec::new();
        for s in shares {
            if let Ok(m) = std::fs::metadata(s) {
                let dev = std::os::unix::fs::MetadataExt::dev(&m);
                if !devs.contains(&dev) {
                    devs.push(dev);
                    disks.push(s.clone());
                }
            }
        }
        let base = disks.iter().map(|d| free_bytes(d).unwrap_or(0)).collect();
        let shared = Arc::new(Shared {
            disks,
            cap,
            state: Mutex::new(State { base, trip: None }),
            quit: AtomicBool::new(false),
        });
        let thread = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new().name("abhed-disk-watch".into()).spawn(move || watch(&shared, &actions)).ok()
        };
        DiskWatch { shared, thread }
    }

    /// A call starts: measure from now. Returns a trip that happened since the last call ended
    /// (background jobs writing between calls).
    pub fn rebase(&self) -> Option<Trip> {
        self.restart()
    }

    /// The call now ending: its trip, if any. The next window (until the next call) is measured
    /// from now.
    pub fn take(&self) -> Option<Trip> {
        self.restart()
    }

    fn restart(&self) -> Option<Trip> {
        let base: Vec<u64> = self.shared.disks.iter().map(|d| free_bytes(d).unwrap_or(0)).collect();
        let mut st = self.shared.state.lock().ok()?;
        st.base = base;
        st.trip.take().map(|(t, ..)| t)
    }

    /// The trip so far, left in place.
    pub fn peek(&self) -> Option<Trip> {
        self.shared.state.lock().ok()?.trip.as_ref().map(|(t, ..)| t.clone())
    }

    /// Stop watching (before QEMU is reaped, so that its kill cannot reach anything else).
    pub fn quit(&mut self) {
        self.shared.quit.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for DiskWatch {
    fn drop(&mut self) {
        self.quit();
    }
}

fn watch(shared: &Shared, actions: &Actions) {
    while !shared.quit.load(Ordering::SeqCst) {
        std::thread::sleep(POLL);
        let free: Vec<Option<u64>> = shared.disks.iter().map(|d| free_bytes(d)).collect();
        let Ok(mut st) = shared.state.lock() else { return };
        let added = st.base.iter().zip(&free).filter_map(|(b, f)| f.map(|f| b.saturating_sub(f))).max().unwrap_or(0);
        match &mut st.trip {
            None if added > shared.cap => {
                st.trip = Some((Trip { added, cap: shared.cap, stopped: true, vm_killed: false }, added));
                drop(st);
                (actions.stop)();
            }
            Some((t, at_trip)) if !t.vm_killed => {
                t.added = t.added.max(added);
                if added > *at_trip + HARD_MARGIN {
                    t.vm_killed = true;
                    drop(st);
                    (actions.kill)();
                }
            }
            _ => {}
        }
    }
}

/// Free bytes on the disk holding `p` (blocks free to root too: what a write consumes).
fn free_bytes(p: &Path) -> Option<u64> {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).ok()?;
    #[allow(unsafe_code)]
    // SAFETY: statvfs is plain data, zeroed is a valid value; the call fills it from a
    // NUL-terminated path that outlives it.
    let (rc, st) = unsafe {
        let mut st: libc::statvfs = std::mem::zeroed();
        (libc::statvfs(c.as_ptr(), &mut st), st)
    };
    (rc == 0).then(|| st.f_bfree.saturating_mul(st.f_frsize))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;
    use std::time::Instant;

    /// Real writes to a real disk trip it; the stop action runs once, and the kill only when the
    /// disk keeps filling.
    #[test]
    fn writing_past_the_cap_trips_the_stop_and_then_the_kill() {
        // A tmpfs of its own where there is one: writes by other programs to the build disk
        // would count too.
        let dir = if Path::new("/dev/shm").is_dir() {
            tempfile::tempdir_in("/dev/shm").unwrap()
        } else {
            tempfile::tempdir().unwrap()
        };
        let stops = Arc::new(AtomicU32::new(0));
        let kills = Arc::new(AtomicU32::new(0));
        let (s, k) = (Arc::clone(&stops), Arc::clone(&kills));
        let watch = DiskWatch::start(
            &[dir.path().to_path_buf()],
            8 * 1024 * 1024,
            Actions {
                stop: Box::new(move || {
                    s.fetch_add(1, Ordering::SeqCst);
                }),
                kill: Box::new(move || {
                    k.fetch_add(1, Ordering::SeqCst);
                }),
            },
        );
        assert_eq!(watch.rebase(), None);
        let write = |name: &str, mib: usize| {
            use std::io::Write as _;
            let mut f = std::fs::File::create(dir.path().join(name)).unwrap();
            for _ in 0..mib {
                f.write_all(&vec![7u8; 1024 * 1024]).unwrap();
            }
            f.sync_all().unwrap();
        };
        write("a", 4);
        std::thread::sleep(POLL * 4);
        assert_eq!(watch.peek(), None, "4 MiB is under an 8 MiB cap");
        write("b", 12);
        let deadline = Instant::now() + Duration::from_secs(10);
        while watch.peek().is_none() && Instant::now() < deadline {
            std::thread::sleep(POLL);
        }
        let trip = watch.peek().expect("16 MiB did not trip an 8 MiB cap");
        assert!(trip.added >= 8 * 1024 * 1024 && trip.stopped && !trip.vm_killed, "{trip:?}");
        assert!(trip.describe().contains("sandbox.disk_quota_mib = 8"), "{}", trip.describe());
        std::thread::sleep(POLL * 3);
        assert_eq!((stops.load(Ordering::SeqCst), kills.load(Ordering::SeqCst)), (1, 0));
        // The "guest" ignores the stop and writes on: QEMU is killed.
        write("c", 300);
        let deadline = Instant::now() + Duration::from_secs(10);
        while kills.load(Ordering::SeqCst) == 0 && Instant::now() < deadline {
            std::thread::sleep(POLL);
        }
        assert_eq!(kills.load(Ordering::SeqCst), 1);
        assert!(watch.take().unwrap().vm_killed);
        // A new call measures from its own start.
        assert_eq!(watch.rebase(), None);
    }
}
