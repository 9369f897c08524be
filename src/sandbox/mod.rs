//! The sandbox layer: where a tool may act. File tools are confined to the workspace roots
//! ([`Workspace`]); bash runs in the session microVM ([`SessionSandbox`]), never on the host.

pub mod confined;
mod diskguard;
pub mod image;
mod lifeline;
mod paths;
mod qemu;
mod session;
mod tsc;
pub mod vm;

pub use diskguard::Trip as DiskTrip;
pub use lifeline::DIR_PREFIX as VM_DIR_PREFIX;
pub use paths::{PathError, Resolved, Workspace, normalize};
pub use qemu::{Qemu, find_qemu};
pub use session::{
    BACKEND, KVM_PROBE_DEADLINE, KvmProbe, Ran, SandboxError, SessionSandbox, VmFacts, VmLifetime, recorded_probe,
    try_kvm,
};
