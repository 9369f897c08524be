//! The session microVM: QEMU's `microvm` machine, booted from our kernel and initramfs, with no
//! network device at all. The workspace roots are shared read-write over 9p at their own
//! absolute paths, the host's `/usr` read-only if the operator allows it. Commands travel over
//! one virtio-serial port to the guest agent (see the `abhed-guest` crate for the protocol).

use std::collections::VecDeque;
use std::io;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use abhed_guest::policy::ExecPolicy;
use abhed_guest::{ExecResult, PROTOCOL_VERSION, Request, Response, Share, SpawnResult, read_frame, write_frame};

use super::Qemu;
use super::diskguard::{Actions, DiskWatch, Trip};
use super::image::Image;
use super::lifeline::{Pidfd, VmDir, spawn_tied};

/// How much of the guest's console (its kernel's messages, the agent's errors) is kept for a
/// crash report: the last 64 KiB, in memory. A guest can print without end.
pub const CONSOLE_KEEP_BYTES: usize = 64 * 1024;

/// How the guest's CPU is provided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Accel {
    Kvm,
    Tcg,
}

impl Accel {
    pub fn as_str(self) -> &'static str {
        match self {
            Accel::Kvm => "kvm",
            Accel::Tcg => "tcg",
        }
    }
}

/// What a boot needs besides the image.
#[derive(Debug, Clone)]
pub struct BootSpec {
    pub qemu: Qemu,
    pub memory_mib: u32,
    pub cpus: u32,
    /// Shared read-write at the same path in the guest (the workspace roots).
    pub shares: Vec<PathBuf>,
    /// Shared read-only at the same path (host toolchains: /usr, and what the operator adds).
    pub readonly: Vec<PathBuf>,
    pub accel: Accel,
    /// Boot to a ready agent within this, or the boot failed.
    pub deadline: Duration,
    /// The most one call may add to the disks of `shares` (see [`super::diskguard`]); `None`
    /// watches nothing.
    pub disk_quota: Option<u64>,
    /// How `shares` are shared.
    pub share_mode: ShareMode,
}

/// How the workspace roots are shared with the guest (QEMU's 9p `security_model`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShareMode {
    /// `mapped-xattr`: what the guest sets as owner, mode, device or symlink is kept in an
    /// extended attribute of a plain file on the host. A guest running as root can then make
    /// neither a setuid program nor a device node nor a symlink on the host: the host sees
    /// files of the abhed user with mode 0644 (directories 0755). Files the host made keep
    /// their own modes, and the guest sees them as they are.
    Mapped,
    /// `none`: the guest's chmod, chown and symlinks reach the host as they are.
    Passthrough,
}

impl ShareMode {
    pub fn from_config(s: &str) -> ShareMode {
        if s == "passthrough" { ShareMode::Passthrough } else { ShareMode::Mapped }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ShareMode::Mapped => "mapped",
            ShareMode::Passthrough => "passthrough",
        }
    }

    /// QEMU's name for it, with the modes files and directories the guest makes get on the host.
    fn qemu_model(self) -> &'static str {
        match self {
            ShareMode::Mapped => "mapped-xattr,fmode=0644,dmode=0755",
            ShareMode::Passthrough => "none",
        }
    }
}

/// Whether the filesystem holding `dir` keeps user extended attributes, as the mapped share
/// needs: tried on `dir` itself and undone. `Err` only when it cannot be told.
pub fn keeps_xattrs(dir: &Path) -> std::io::Result<bool> {
    const NAME: &str = "user.abhed.probe";
    match rustix::fs::setxattr(dir, NAME, b"1", rustix::fs::XattrFlags::empty()) {
        Ok(()) => {
            let _ = rustix::fs::removexattr(dir, NAME);
            Ok(true)
        }
        Err(rustix::io::Errno::NOTSUP) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Why the VM could not do what was asked. The messages are for the model, which sees them
/// inside a bash error, and for the operator.
#[derive(Debug, thiserror::Error)]
pub enum VmError {
    /// Nothing ran.
    #[error("the sandbox VM did not boot: {0}")]
    Boot(String),
    /// The guest refused the request or could not start the shell; nothing ran, and the VM
    /// is still there.
    #[error("the guest could not start the command: {0}")]
    NotStarted(String),
    /// The VM died or stopped answering. `sent`: the request had reached it, so the command
    /// may have run in part.
    #[error("the sandbox VM stopped unexpectedly: {message}")]
    Crashed { message: String, sent: bool },
    /// The disk watchdog killed the VM (the guest did not stop writing when asked).
    #[error("the sandbox VM was stopped: {0}")]
    DiskQuota(String),
}

impl VmError {
    /// Whether the command may have run, in part or whole.
    pub fn may_have_run(&self) -> bool {
        match self {
            VmError::Boot(_) | VmError::NotStarted(_) => false,
            VmError::Crashed { sent, .. } => *sent,
            VmError::DiskQuota(_) => true,
        }
    }

    /// Whether the VM is gone (the next call boots a fresh one).
    pub fn vm_lost(&self) -> bool {
        !matches!(self, VmError::NotStarted(_))
    }
}

/// The last [`CONSOLE_KEEP_BYTES`] the guest printed on its serial console.
#[derive(Clone, Default)]
struct Console(Arc<Mutex<VecDeque<u8>>>);

impl Console {
    /// Keep reading `from` (QEMU's stdout, where the serial port goes) until it ends.
    fn follow(&self, mut from: impl io::Read + Send + 'static) {
        let ring = Arc::clone(&self.0);
        let _ = std::thread::Builder::new().name("abhed-vm-console".into()).spawn(move || {
            let mut buf = vec![0u8; 16 * 1024];
            while let Ok(n) = from.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let Ok(mut r) = ring.lock() else { break };
                r.extend(&buf[..n]);
                let over = r.len().saturating_sub(CONSOLE_KEEP_BYTES);
                r.drain(..over);
            }
        });
    }

    fn text(&self) -> String {
        let bytes: Vec<u8> = self.0.lock().map(|r| r.iter().copied().collect()).unwrap_or_default();
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// What the disk watchdog saw around one call: a trip between the last call and this one
/// (background jobs), and one during this call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DiskTrips {
    pub before: Option<Trip>,
    pub during: Option<Trip>,
}

/// A running microVM with a ready guest agent.
pub struct MicroVm {
    child: Child,
    /// Reads the guest's answers; requests go through `writer`, which the disk watchdog shares.
    stream: UnixStream,
    writer: Arc<Mutex<UnixStream>>,
    accel: Accel,
    shell: String,
    kernel: String,
    boot_ms: u64,
    console: Console,
    watch: Option<DiskWatch>,
    trips: DiskTrips,
    /// Holds the control socket and QEMU's own log; removed with the VM.
    _dir: VmDir,
}

impl MicroVm {
    pub fn boot(image: &Image, spec: &BootSpec) -> Result<MicroVm, VmError> {
        let start = Instant::now();
        let dir =
            VmDir::create().map_err(|e| VmError::Boot(format!("cannot create a private directory for the VM: {e}")))?;
        let sock = dir.path().join("agent.sock");
        // QEMU's own messages, to a file: nobody reads them during the session, and they are
        // few (the guest cannot write there). The guest's console goes to a pipe we read.
        let qemu_log = dir.path().join("qemu.log");
        let log = std::fs::File::create(&qemu_log)
            .map_err(|e| VmError::Boot(format!("cannot create {}: {e}", qemu_log.display())))?;
        let mut cmd = spec.qemu.command();
        cmd.args(qemu_args(image, spec, &sock)).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(log);
        let mut child =
            spawn_tied(cmd).map_err(|e| VmError::Boot(format!("cannot start {}: {e}", spec.qemu.binary.display())))?;
        let console = Console::default();
        if let Some(out) = child.stdout.take() {
            console.follow(out);
        }
        let deadline = start + spec.deadline;
        let fail = |child: &mut Child, why: String| {
            let _ = child.kill();
            let status = child.wait().ok();
            let mut msg = why;
            let text = std::fs::read_to_string(&qemu_log).unwrap_or_default();
            let text: String = text.trim().chars().take(2000).collect();
            if !text.is_empty() {
                msg.push_str(&format!("; QEMU said: {text}"));
            }
            if let Some(s) = status.filter(|s| s.code().is_some()) {
                msg.push_str(&format!(" (QEMU exit status {s})"));
            }
            VmError::Boot(msg)
        };
        // QEMU creates the socket as it starts; connect as soon as it is there.
        let stream = loop {
            if let Ok(s) = UnixStream::connect(&sock) {
                break s;
            }
            if let Ok(Some(_)) = child.try_wait() {
                return Err(fail(&mut child, "QEMU exited during start-up".into()));
            }
            if Instant::now() > deadline {
                return Err(fail(&mut child, format!("no control socket within {} ms", spec.deadline.as_millis())));
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let writer = match stream.try_clone() {
            Ok(w) => w,
            Err(e) => return Err(fail(&mut child, format!("cannot use the control socket: {e}"))),
        };
        // A guest that stops reading must not hang a writer (the watchdog's stop included).
        let _ = writer.set_write_timeout(Some(Duration::from_secs(10)));
        let writer = Arc::new(Mutex::new(writer));
        let mut vm = MicroVm {
            child,
            stream,
            writer,
            accel: spec.accel,
            shell: String::new(),
            kernel: String::new(),
            boot_ms: 0,
            console,
            watch: None,
            trips: DiskTrips::default(),
            _dir: dir,
        };
        let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
        match vm.recv(left) {
            Ok(Response::Ready { protocol, kernel }) if protocol == PROTOCOL_VERSION => vm.kernel = kernel,
            Ok(Response::Ready { protocol, .. }) => {
                return Err(fail(
                    &mut vm.child,
                    format!(
                        "the guest agent speaks protocol {protocol}, this abhed speaks {PROTOCOL_VERSION}: rebuild the image with `bash bundle/vm-image.sh`"
                    ),
                ));
            }
            Ok(other) => return Err(fail(&mut vm.child, format!("unexpected first message {other:?}"))),
            Err(_) => {
                let tail = vm.console_tail();
                return Err(fail(
                    &mut vm.child,
                    format!("the guest agent was not ready within {} ms{tail}", spec.deadline.as_millis()),
                ));
            }
        }
        let share =
            |tag: String, p: &Path, readonly: bool| Share { tag, path: p.to_string_lossy().into_owned(), readonly };
        let shares: Vec<Share> = (spec.shares.iter().enumerate().map(|(i, p)| share(format!("ws{i}"), p, false)))
            .chain(spec.readonly.iter().enumerate().map(|(i, p)| share(format!("ro{i}"), p, true)))
            .collect();
        vm.send(&Request::Setup { shares, path: guest_path(&spec.readonly) })?;
        match vm.recv(Duration::from_secs(30))? {
            Response::SetupDone { shell, errors } if errors.is_empty() => vm.shell = shell,
            Response::SetupDone { errors, .. } => {
                return Err(fail(
                    &mut vm.child,
                    format!("the guest could not mount the shares: {}", errors.join("; ")),
                ));
            }
            other => return Err(fail(&mut vm.child, format!("unexpected reply to setup {other:?}"))),
        }
        vm.boot_ms = start.elapsed().as_millis() as u64;
        if let Some(cap) = spec.disk_quota {
            vm.watch = Some(vm.start_watch(&spec.shares, cap));
        }
        Ok(vm)
    }

    /// The disk watchdog for this VM: a stop goes to the guest as a frame, a kill to QEMU
    /// through a pidfd (never a pid, which may be reused once QEMU is reaped).
    fn start_watch(&self, shares: &[PathBuf], cap: u64) -> DiskWatch {
        let writer = Arc::clone(&self.writer);
        let pidfd = Pidfd::open(self.child.id());
        let reason = format!(
            "the disk watchdog: this call added more than {} to the workspace's disk",
            super::diskguard::mib(cap)
        );
        DiskWatch::start(
            shares,
            cap,
            Actions {
                stop: Box::new(move || {
                    if let Ok(mut w) = writer.lock() {
                        let _ = write_frame(&mut *w, &Request::Stop { reason: reason.clone() });
                    }
                }),
                kill: Box::new(move || {
                    if let Some(p) = &pidfd {
                        p.kill();
                    }
                }),
            },
        )
    }

    /// What the disk watchdog saw around the last call.
    pub fn disk_trips(&self) -> &DiskTrips {
        &self.trips
    }

    /// Why this VM ended, when abhed ended it (the disk watchdog), for the next call to say.
    pub fn end_note(&self) -> Option<String> {
        let trip = self.watch.as_ref()?.peek()?;
        trip.vm_killed.then(|| {
            format!(
                "the previous sandbox VM was killed while no call ran: {}, and its background jobs did not stop when asked. Its background jobs and its /tmp are gone; files they wrote in the workspace are still there",
                trip.describe()
            )
        })
    }

    /// A call starts: the watchdog measures from now.
    fn call_starts(&mut self) {
        self.trips = DiskTrips { before: self.watch.as_ref().and_then(DiskWatch::rebase), during: None };
    }

    fn call_ends(&mut self) {
        self.trips.during = self.watch.as_ref().and_then(DiskWatch::take);
    }

    pub fn accel(&self) -> Accel {
        self.accel
    }

    pub fn shell(&self) -> &str {
        &self.shell
    }

    pub fn kernel(&self) -> &str {
        &self.kernel
    }

    pub fn boot_ms(&self) -> u64 {
        self.boot_ms
    }

    /// Run one command and wait for it. The guest enforces `timeout_ms`, and `policy` on every
    /// program the command executes; the host waits a while longer before it calls the VM dead.
    pub fn exec(
        &mut self,
        id: u64,
        command: &str,
        cwd: &Path,
        fallback: &Path,
        timeout_ms: u64,
        policy: &ExecPolicy,
    ) -> Result<ExecResult, VmError> {
        self.call_starts();
        self.send(&Request::Exec {
            id,
            command: command.to_string(),
            cwd: cwd.to_string_lossy().into_owned(),
            fallback_cwd: fallback.to_string_lossy().into_owned(),
            timeout_ms,
            policy: policy.clone(),
        })?;
        let reply = self.recv(Duration::from_millis(timeout_ms) + Duration::from_secs(20));
        self.call_ends();
        match reply? {
            Response::Exec(r) if r.id == id => Ok(r),
            Response::Failed { message, .. } => Err(VmError::NotStarted(message)),
            other => Err(self.crashed(format!("unexpected reply {other:?}"))),
        }
    }

    /// Start a background job named `job`.
    pub fn spawn(
        &mut self,
        id: u64,
        job: &str,
        command: &str,
        cwd: &Path,
        fallback: &Path,
        policy: &ExecPolicy,
    ) -> Result<SpawnResult, VmError> {
        self.call_starts();
        self.send(&Request::Spawn {
            id,
            job: job.to_string(),
            command: command.to_string(),
            cwd: cwd.to_string_lossy().into_owned(),
            fallback_cwd: fallback.to_string_lossy().into_owned(),
            policy: policy.clone(),
        })?;
        let reply = self.recv(Duration::from_secs(30));
        self.call_ends();
        match reply? {
            Response::Spawned(r) if r.id == id => Ok(r),
            Response::Failed { message, .. } => Err(VmError::NotStarted(message)),
            other => Err(self.crashed(format!("unexpected reply {other:?}"))),
        }
    }

    /// Whether QEMU is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Send a request. A failure here means the guest never had it: nothing ran.
    fn send(&mut self, req: &Request) -> Result<(), VmError> {
        let sent = match self.writer.lock() {
            Ok(mut w) => write_frame(&mut *w, req),
            Err(_) => Err(io::Error::other("the channel's writer is poisoned")),
        };
        sent.map_err(|e| match self.crashed(format!("cannot write to the guest: {e}")) {
            VmError::Crashed { message, .. } => VmError::Crashed { message, sent: false },
            other => other,
        })
    }

    fn recv(&mut self, wait: Duration) -> Result<Response, VmError> {
        let _ = self.stream.set_read_timeout(Some(wait));
        match read_frame::<_, Response>(&mut self.stream) {
            Ok(Some(r)) => Ok(r),
            Ok(None) => Err(self.crashed("the guest closed the channel".into())),
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                Err(self.crashed(format!("the guest did not answer within {} s", wait.as_secs())))
            }
            Err(e) => Err(self.crashed(format!("the channel failed: {e}"))),
        }
    }

    /// Describe a dead or hung VM and make sure it is gone.
    fn crashed(&mut self, what: String) -> VmError {
        if let Some(w) = self.watch.as_mut() {
            w.quit();
        }
        let killed_by_watch = self.watch.as_ref().and_then(DiskWatch::peek).filter(|t| t.vm_killed);
        let status = match self.child.try_wait() {
            Ok(Some(s)) => format!(" (QEMU exited: {s})"),
            _ => String::new(),
        };
        let tail = self.console_tail();
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(t) = killed_by_watch {
            self.trips.during = Some(t.clone());
            return VmError::DiskQuota(format!(
                "{}, and the guest did not stop writing when asked, so the VM was killed",
                t.describe()
            ));
        }
        VmError::Crashed { message: format!("{what}{status}{tail}"), sent: true }
    }

    /// The last lines the guest kernel printed, for a report.
    fn console_tail(&self) -> String {
        let text = self.console.text();
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        let tail = &lines[lines.len().saturating_sub(5)..];
        if tail.is_empty() { String::new() } else { format!("; the guest console ended with: {}", tail.join(" | ")) }
    }
}

impl Drop for MicroVm {
    fn drop(&mut self) {
        // First, so that its kill cannot reach a process that takes QEMU's place.
        if let Some(w) = self.watch.as_mut() {
            w.quit();
        }
        if self.alive() && self.send(&Request::Shutdown).is_ok() {
            let _ = self.recv(Duration::from_secs(1));
            let end = Instant::now() + Duration::from_secs(2);
            while Instant::now() < end && self.alive() {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn qemu_args(image: &Image, spec: &BootSpec, sock: &Path) -> Vec<String> {
    let (accel, cpu) = match spec.accel {
        Accel::Kvm => ("kvm", "host"),
        Accel::Tcg => ("tcg", "max"),
    };
    // Without tsc_early_khz the guest calibrates its TSC against emulated timers, which under TCG
    // on a loaded host hangs the boot at random. Under TCG the guest's TSC is the host's.
    let mut append = "console=ttyS0 quiet loglevel=3 panic=-1 rdinit=/init".to_string();
    if spec.accel == Accel::Tcg
        && let Some(khz) = super::tsc::host_tsc_khz()
    {
        append.push_str(&format!(" tsc_early_khz={khz}"));
    }
    let mut a: Vec<String> = [
        "-M",
        "microvm,x-option-roms=off,rtc=on",
        "-accel",
        accel,
        "-cpu",
        cpu,
        "-nodefaults",
        "-no-user-config",
        "-nographic",
        "-no-reboot",
        // virtio 1.0 only: the legacy MMIO layout is not what the guest drivers expect.
        "-global",
        "virtio-mmio.force-legacy=false",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    a.extend([
        "-m".into(),
        spec.memory_mib.to_string(),
        "-smp".into(),
        spec.cpus.to_string(),
        "-kernel".into(),
        image.kernel.to_string_lossy().into_owned(),
        "-initrd".into(),
        image.initramfs.to_string_lossy().into_owned(),
        "-append".into(),
        append,
        // The serial console to QEMU's stdout, a pipe whose last bytes we keep (`Console`).
        "-chardev".into(),
        "stdio,id=console,signal=off".into(),
        "-serial".into(),
        "chardev:console".into(),
        "-device".into(),
        "virtio-serial-device".into(),
        "-chardev".into(),
        format!("socket,id=agent,path={},server=on,wait=off", sock.display()),
        "-device".into(),
        format!("virtserialport,chardev=agent,name={}", abhed_guest::PORT_NAME),
    ]);
    let mut fsdev = |id: String, path: &Path, readonly: bool| {
        // QEMU's option syntax doubles commas inside a value.
        let p = path.to_string_lossy().replace(',', ",,");
        // Read-only shares change nothing on the host, so they need no mapping.
        let (model, ro) = if readonly {
            (ShareMode::Passthrough.qemu_model(), ",readonly=on")
        } else {
            (spec.share_mode.qemu_model(), "")
        };
        a.extend([
            "-fsdev".into(),
            format!("local,id={id},path={p},security_model={model}{ro}"),
            "-device".into(),
            format!("virtio-9p-device,fsdev={id},mount_tag={id}"),
        ]);
    };
    for (i, p) in spec.shares.iter().enumerate() {
        fsdev(format!("ws{i}"), p, false);
    }
    for (i, p) in spec.readonly.iter().enumerate() {
        fsdev(format!("ro{i}"), p, true);
    }
    a
}

/// The guest's PATH: the `bin` folders of the read-only shares (a toolchain such as
/// `~/.cargo`), then the usual ones.
fn guest_path(readonly: &[PathBuf]) -> String {
    let mut dirs: Vec<String> = readonly
        .iter()
        .filter(|p| p.as_path() != Path::new("/usr") && p.join("bin").is_dir())
        .map(|p| p.join("bin").to_string_lossy().into_owned())
        .collect();
    dirs.extend(["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"].map(String::from));
    dirs.join(":")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    /// A guest printing without end costs a fixed 64 KiB: the last bytes, in memory.
    #[test]
    fn the_console_keeps_only_its_last_64_kib() {
        let (r, mut w) = io::pipe().unwrap();
        let console = Console::default();
        console.follow(r);
        for i in 0..40_000 {
            writeln!(w, "line {i:06}").unwrap(); // 12 bytes each: 480 KB
        }
        drop(w);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !console.text().ends_with("line 039999\n") {
            assert!(Instant::now() < deadline, "the console reader fell behind");
            std::thread::sleep(Duration::from_millis(10));
        }
        let text = console.text();
        assert_eq!(text.len(), CONSOLE_KEEP_BYTES);
        assert!(text.ends_with("line 039998\nline 039999\n"));
    }
}
