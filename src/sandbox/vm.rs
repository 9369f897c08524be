//! The session microVM: QEMU's `microvm` machine, booted from our kernel and initramfs, with no
//! network device at all. The workspace roots are shared read-write over 9p at their own
//! absolute paths, the host's `/usr` read-only if the operator allows it. Commands travel over
//! one virtio-serial port to the guest agent (see the `abhed-guest` crate for the protocol).

use std::io;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use abhed_guest::{ExecResult, PROTOCOL_VERSION, Request, Response, Share, SpawnResult, read_frame, write_frame};

use super::Qemu;
use super::image::Image;

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
}

/// Why the VM could not do what was asked. The messages are for the model, which sees them
/// inside a bash error, and for the operator.
#[derive(Debug, thiserror::Error)]
pub enum VmError {
    #[error("the sandbox VM did not boot: {0}")]
    Boot(String),
    #[error("the sandbox VM stopped unexpectedly: {0}")]
    Crashed(String),
}

/// A running microVM with a ready guest agent.
pub struct MicroVm {
    child: Child,
    stream: UnixStream,
    accel: Accel,
    shell: String,
    kernel: String,
    boot_ms: u64,
    /// Holds the control socket and the serial console log; removed with the VM.
    dir: tempfile::TempDir,
}

impl MicroVm {
    pub fn boot(image: &Image, spec: &BootSpec) -> Result<MicroVm, VmError> {
        let start = Instant::now();
        let dir = tempfile::Builder::new()
            .prefix("abhed-vm-")
            .tempdir()
            .map_err(|e| VmError::Boot(format!("cannot create a private directory for the VM: {e}")))?;
        let sock = dir.path().join("agent.sock");
        let console = dir.path().join("console.log");
        // To a file, not a pipe: nobody reads a pipe during the session, and a full one would
        // block QEMU.
        let qemu_log = dir.path().join("qemu.log");
        let log = std::fs::File::create(&qemu_log)
            .map_err(|e| VmError::Boot(format!("cannot create {}: {e}", qemu_log.display())))?;
        let mut cmd = spec.qemu.command();
        cmd.args(qemu_args(image, spec, &sock, &console)).stdin(Stdio::null()).stdout(Stdio::null()).stderr(log);
        let mut child =
            cmd.spawn().map_err(|e| VmError::Boot(format!("cannot start {}: {e}", spec.qemu.binary.display())))?;
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
        let mut vm =
            MicroVm { child, stream, accel: spec.accel, shell: String::new(), kernel: String::new(), boot_ms: 0, dir };
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
        Ok(vm)
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

    /// Run one command and wait for it. The guest enforces `timeout_ms`; the host waits a while
    /// longer before it calls the VM dead.
    pub fn exec(
        &mut self,
        id: u64,
        command: &str,
        cwd: &Path,
        fallback: &Path,
        timeout_ms: u64,
    ) -> Result<ExecResult, VmError> {
        self.send(&Request::Exec {
            id,
            command: command.to_string(),
            cwd: cwd.to_string_lossy().into_owned(),
            fallback_cwd: fallback.to_string_lossy().into_owned(),
            timeout_ms,
        })?;
        match self.recv(Duration::from_millis(timeout_ms) + Duration::from_secs(20))? {
            Response::Exec(r) if r.id == id => Ok(r),
            Response::Failed { message, .. } => Err(VmError::Crashed(format!("the guest agent failed: {message}"))),
            other => Err(self.crashed(format!("unexpected reply {other:?}"))),
        }
    }

    /// Start a background job.
    pub fn spawn(&mut self, id: u64, command: &str, cwd: &Path, fallback: &Path) -> Result<SpawnResult, VmError> {
        self.send(&Request::Spawn {
            id,
            command: command.to_string(),
            cwd: cwd.to_string_lossy().into_owned(),
            fallback_cwd: fallback.to_string_lossy().into_owned(),
        })?;
        match self.recv(Duration::from_secs(30))? {
            Response::Spawned(r) if r.id == id => Ok(r),
            Response::Failed { message, .. } => Err(VmError::Crashed(format!("the guest agent failed: {message}"))),
            other => Err(self.crashed(format!("unexpected reply {other:?}"))),
        }
    }

    /// Whether QEMU is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    fn send(&mut self, req: &Request) -> Result<(), VmError> {
        write_frame(&mut self.stream, req).map_err(|e| self.crashed(format!("cannot write to the guest: {e}")))
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
        let status = match self.child.try_wait() {
            Ok(Some(s)) => format!(" (QEMU exited: {s})"),
            _ => String::new(),
        };
        let tail = self.console_tail();
        let _ = self.child.kill();
        let _ = self.child.wait();
        VmError::Crashed(format!("{what}{status}{tail}"))
    }

    /// The last lines the guest kernel printed, for a report.
    fn console_tail(&self) -> String {
        let text = std::fs::read_to_string(self.dir.path().join("console.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        let tail = &lines[lines.len().saturating_sub(5)..];
        if tail.is_empty() { String::new() } else { format!("; the guest console ended with: {}", tail.join(" | ")) }
    }
}

impl Drop for MicroVm {
    fn drop(&mut self) {
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

fn qemu_args(image: &Image, spec: &BootSpec, sock: &Path, console: &Path) -> Vec<String> {
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
        "-serial".into(),
        format!("file:{}", console.display()),
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
        let ro = if readonly { ",readonly=on" } else { "" };
        a.extend([
            "-fsdev".into(),
            format!("local,id={id},path={p},security_model=none{ro}"),
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
