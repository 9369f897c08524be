//! One session's sandbox: the microVM booted at the session's first bash call and shut down with
//! the session, the working directory that persists between calls, and the choice of
//! accelerator. A VM that dies is reported once and replaced by a fresh one at the next call.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use abhed_guest::policy::ExecPolicy;
use abhed_guest::{ExecResult, SpawnResult};
use serde::{Deserialize, Serialize};

use super::Workspace;
use super::image::Image;
use super::qemu::{Qemu, find_qemu};
use super::vm::{Accel, BootSpec, DiskTrips, MicroVm, ShareMode, VmError, keeps_xattrs};
use crate::config::SandboxConfig;

/// The name every bash observation reports as its backend.
pub const BACKEND: &str = "microvm";

/// Why a command did not run (or did not finish) in the sandbox.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// Something the sandbox needs is missing; the message names it and the fix.
    #[error("{0}")]
    Unavailable(String),
    #[error(transparent)]
    Vm(#[from] VmError),
}

/// Facts about the VM that ran a command, for the observation's metadata.
#[derive(Debug, Clone, Serialize)]
pub struct VmFacts {
    pub backend: &'static str,
    pub accel: &'static str,
    pub kernel: String,
    pub shell: String,
    /// This call booted the VM, taking `boot_ms`.
    pub booted: bool,
    pub boot_ms: u64,
}

/// How long the session's VM, and so a background job, lives: what the model is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VmLifetime {
    /// Until the abhed process that holds the session ends: the run, chat or resume.
    Run,
    /// `abhed tool`: the process exits right after its one call.
    OneCall,
}

/// One request's answer from the session's VM, with what the observation reports beside it.
#[derive(Debug)]
pub struct Ran<T> {
    pub reply: T,
    pub facts: VmFacts,
    /// The working directory the request ran in.
    pub cwd: PathBuf,
    /// What the disk watchdog saw.
    pub disk: DiskTrips,
    /// Something the model should know from before this call (the last VM was killed).
    pub note: Option<String>,
}

pub struct SessionSandbox {
    cfg: SandboxConfig,
    roots: Vec<PathBuf>,
    home: PathBuf,
    state: Mutex<State>,
    lifetime: Mutex<VmLifetime>,
}

struct State {
    vm: Option<MicroVm>,
    cwd: PathBuf,
    next_id: u64,
    /// Why the last VM ended, for the next call to say.
    note: Option<String>,
}

impl SessionSandbox {
    pub fn new(cfg: &SandboxConfig, workspace: &Workspace) -> SessionSandbox {
        SessionSandbox {
            cfg: cfg.clone(),
            roots: workspace.roots().map(Path::to_path_buf).collect(),
            home: workspace.root().to_path_buf(),
            state: Mutex::new(State { vm: None, cwd: workspace.root().to_path_buf(), next_id: 1, note: None }),
            lifetime: Mutex::new(VmLifetime::Run),
        }
    }

    /// Say how long this session's VM lives (`abhed tool` sets [`VmLifetime::OneCall`]).
    pub fn set_lifetime(&self, lifetime: VmLifetime) {
        if let Ok(mut l) = self.lifetime.lock() {
            *l = lifetime;
        }
    }

    pub fn lifetime(&self) -> VmLifetime {
        self.lifetime.lock().map(|l| *l).unwrap_or(VmLifetime::Run)
    }

    /// The working directory the next command starts in.
    pub fn cwd(&self) -> PathBuf {
        self.state.lock().map(|s| s.cwd.clone()).unwrap_or_else(|_| self.home.clone())
    }

    /// Start from `cwd` (a resumed session's last directory).
    pub fn set_cwd(&self, cwd: PathBuf) {
        if let Ok(mut s) = self.state.lock() {
            s.cwd = cwd;
        }
    }

    /// Run `command` in a fresh shell in the session's working directory, and move the working
    /// directory to where the shell ended.
    pub fn exec(&self, command: &str, timeout_ms: u64, policy: &ExecPolicy) -> Result<Ran<ExecResult>, SandboxError> {
        self.on_vm(
            |vm, id, cwd, home| vm.exec(id, command, cwd, home, timeout_ms, policy),
            |r| (r.cwd_reset, r.cwd.as_deref()),
        )
    }

    /// Start `command` detached in the session's working directory, as a job with a fresh id
    /// (one no other VM of this session has used, so its handle cannot name another job).
    pub fn spawn(&self, command: &str, policy: &ExecPolicy) -> Result<Ran<SpawnResult>, SandboxError> {
        let job = job_id();
        self.on_vm(|vm, id, cwd, home| vm.spawn(id, &job, command, cwd, home, policy), |r| (r.cwd_reset, None))
    }

    /// One request to the session's VM (booted first if need be) with the next id and the
    /// working directory; `moved` tells from the reply whether the directory was reset to the
    /// workspace root, and where the shell ended. Returns the reply, the VM's facts and the
    /// directory the request ran in. A VM that fails is dropped: the next call boots a fresh one.
    fn on_vm<T>(
        &self,
        request: impl FnOnce(&mut MicroVm, u64, &Path, &Path) -> Result<T, VmError>,
        moved: impl FnOnce(&T) -> (bool, Option<&str>),
    ) -> Result<Ran<T>, SandboxError> {
        let mut st =
            self.state.lock().map_err(|_| SandboxError::Unavailable("the sandbox state is poisoned".into()))?;
        let booted = self.ensure_vm(&mut st)?;
        let id = st.next_id;
        st.next_id += 1;
        let cwd = st.cwd.clone();
        let Some(machine) = st.vm.as_mut() else { return Err(SandboxError::Unavailable("no VM".into())) };
        let facts = facts(machine, booted);
        match request(machine, id, &cwd, &self.home) {
            Ok(reply) => {
                let disk = machine.disk_trips().clone();
                let (reset, ended_in) = moved(&reply);
                if reset {
                    st.cwd = self.home.clone();
                }
                if let Some(c) = ended_in {
                    st.cwd = PathBuf::from(c);
                }
                Ok(Ran { reply, facts, cwd, disk, note: st.note.take() })
            }
            Err(e) => {
                if e.vm_lost() {
                    st.vm = None;
                }
                Err(e.into())
            }
        }
    }

    /// Boot the VM unless one is running. `Ok(true)` when this call booted it.
    fn ensure_vm(&self, st: &mut State) -> Result<bool, SandboxError> {
        if let Some(vm) = st.vm.as_mut() {
            if vm.alive() {
                return Ok(false);
            }
            if let Some(note) = vm.end_note() {
                st.note = Some(note);
            }
            st.vm = None;
        }
        st.vm = Some(self.boot()?);
        Ok(true)
    }

    fn boot(&self) -> Result<MicroVm, SandboxError> {
        let qemu = find_qemu(self.cfg.qemu.as_deref())?;
        let image = Image::locate(self.cfg.image_dir.as_deref(), &crate::layout::search_dirs("vm")).map_err(|e| {
            SandboxError::Unavailable(format!("{e}. bash runs only inside the microVM, never on the host"))
        })?;
        let mut spec = BootSpec::from_config(&self.cfg, qemu, self.roots.clone());
        if spec.share_mode == ShareMode::Mapped {
            check_mapped_share(&spec.shares)?;
        }
        match self.cfg.accel.as_str() {
            "tcg" => Ok(MicroVm::boot(&image, &spec)?),
            "kvm" => {
                spec.accel = Accel::Kvm;
                Ok(MicroVm::boot(&image, &spec)?)
            }
            _ => boot_auto(&image, spec),
        }
    }
}

/// The mapped share keeps the guest's modes and symlinks in extended attributes: on a
/// filesystem without them the guest could write nothing. Fail closed, and say what to do.
fn check_mapped_share(shares: &[PathBuf]) -> Result<(), SandboxError> {
    for dir in shares {
        if let Ok(false) = keeps_xattrs(dir) {
            return Err(SandboxError::Unavailable(format!(
                "{} is on a filesystem that does not keep extended attributes (user.*), which the sandbox's share uses so that code in the VM cannot make a setuid program, a device or a symlink on the host. Use a workspace on a filesystem that keeps them (ext4, xfs, btrfs; tmpfs from Linux 6.6), or let the guest's modes and symlinks reach the host with `sandbox.share_mode = \"passthrough\"` in the user config (then run abhed as an ordinary user, never as root)",
                dir.display()
            )));
        }
    }
    Ok(())
}

fn facts(vm: &MicroVm, booted: bool) -> VmFacts {
    VmFacts {
        backend: BACKEND,
        accel: vm.accel().as_str(),
        kernel: vm.kernel().to_string(),
        shell: vm.shell().to_string(),
        booted,
        boot_ms: vm.boot_ms(),
    }
}

impl BootSpec {
    /// A TCG boot as the config says, sharing `shares` read-write and the host's toolchains
    /// read-only.
    pub fn from_config(cfg: &SandboxConfig, qemu: Qemu, shares: Vec<PathBuf>) -> BootSpec {
        BootSpec {
            qemu,
            memory_mib: cfg.memory_mib,
            cpus: cfg.cpus,
            shares,
            readonly: host_readonly(cfg),
            accel: Accel::Tcg,
            deadline: Duration::from_secs(cfg.boot_timeout_s),
            disk_quota: Some(cfg.disk_quota_mib.saturating_mul(1024 * 1024)),
            share_mode: ShareMode::from_config(&cfg.share_mode),
        }
    }
}

/// What of the host the guest sees read-only: /usr with /etc/alternatives (where Debian's
/// `cc`, `java`, ... links point) when `share_host_usr` is on, and `sandbox.host_readonly`.
fn host_readonly(cfg: &SandboxConfig) -> Vec<PathBuf> {
    let mut v = Vec::new();
    if cfg.share_host_usr {
        v.push(PathBuf::from("/usr"));
        if Path::new("/etc/alternatives").is_dir() {
            v.push(PathBuf::from("/etc/alternatives"));
        }
    }
    v.extend(cfg.host_readonly.iter().filter(|p| p.is_dir()).cloned());
    v
}

/// A job id: 8 hex digits from the kernel's random source, so that two VMs of one session
/// (a crash, a second `abhed tool`) never reuse one.
fn job_id() -> String {
    use std::io::Read as _;
    let mut b = [0u8; 4];
    let random = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut b));
    if random.is_err() {
        // Without it, the clock's nanoseconds and our pid still differ from VM to VM.
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        b = (t.subsec_nanos() ^ std::process::id().rotate_left(16)).to_be_bytes();
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// What a KVM boot probe found, remembered beside the session store so that a host whose KVM
/// does not work pays for the probe once, not at every session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KvmProbe {
    /// The host kernel, QEMU and guest kernel the probe ran with; another key probes again.
    pub key: String,
    pub works: bool,
    pub detail: String,
}

fn probe_path() -> Option<PathBuf> {
    crate::store::Store::default_path().ok().and_then(|p| p.parent().map(|d| d.join("kvm-probe.json")))
}

fn probe_key(image: &Image, qemu: &Qemu) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let guest = image.manifest.files.get("vmlinux").cloned().unwrap_or_default();
    format!("{}|{}|{guest}", host.trim(), qemu.binary.display())
}

/// The probe on record for this host, QEMU and image, if any.
pub fn recorded_probe(image: &Image, qemu: &Qemu) -> Option<KvmProbe> {
    let text = std::fs::read_to_string(probe_path()?).ok()?;
    let p: KvmProbe = serde_json::from_str(&text).ok()?;
    (p.key == probe_key(image, qemu)).then_some(p)
}

fn record_probe(p: &KvmProbe) {
    if let Some(path) = probe_path() {
        let _ = std::fs::create_dir_all(path.parent().unwrap_or(Path::new("/")));
        let _ = std::fs::write(path, serde_json::to_string_pretty(p).unwrap_or_default());
    }
}

/// KVM is used when a boot under it reaches a ready agent within a short deadline, never because
/// /dev/kvm merely exists: on nested or paravirtualised hosts it can exist and not work.
pub const KVM_PROBE_DEADLINE: Duration = Duration::from_secs(3);

/// Boot under KVM if a probe says it works, else TCG. Returns the first VM that came up.
fn boot_auto(image: &Image, mut spec: BootSpec) -> Result<MicroVm, SandboxError> {
    let key = probe_key(image, &spec.qemu);
    let recorded = recorded_probe(image, &spec.qemu);
    if recorded.as_ref().is_none_or(|p| p.works) {
        match try_kvm(image, &spec) {
            Ok(vm) => {
                record_probe(&KvmProbe { key, works: true, detail: format!("booted in {} ms", vm.boot_ms()) });
                return Ok(vm);
            }
            Err(detail) => {
                tracing::info!("KVM probe failed, using TCG: {detail}");
                record_probe(&KvmProbe { key, works: false, detail });
            }
        }
    }
    spec.accel = Accel::Tcg;
    Ok(MicroVm::boot(image, &spec)?)
}

/// One timed boot under KVM.
pub fn try_kvm(image: &Image, spec: &BootSpec) -> Result<MicroVm, String> {
    if let Err(e) = std::fs::OpenOptions::new().read(true).write(true).open("/dev/kvm") {
        return Err(format!("/dev/kvm cannot be opened: {e}"));
    }
    let kvm = BootSpec { accel: Accel::Kvm, deadline: KVM_PROBE_DEADLINE, ..spec.clone() };
    MicroVm::boot(image, &kvm).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_share_on_a_filesystem_without_xattrs_fails_closed_and_says_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        assert!(keeps_xattrs(dir.path()).unwrap(), "the test's own temp dir should keep them");
        assert!(check_mapped_share(&[dir.path().to_path_buf()]).is_ok());
        // procfs keeps no user xattrs (EOPNOTSUPP): the stand-in for an old tmpfs or an NFS mount.
        assert!(!keeps_xattrs(Path::new("/proc")).unwrap());
        let Err(SandboxError::Unavailable(msg)) = check_mapped_share(&[PathBuf::from("/proc")]) else {
            panic!("not refused")
        };
        assert!(msg.contains("sandbox.share_mode = \"passthrough\""), "{msg}");
    }
}
