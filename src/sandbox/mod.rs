//! The sandbox layer: where a tool may act. File tools are confined to the workspace roots
//! ([`Workspace`]); bash runs in the session microVM ([`SessionSandbox`]), never on the host.

pub mod image;
mod paths;
mod session;
mod tsc;
pub mod vm;

pub use paths::{PathError, Resolved, Workspace};
pub use session::{
    BACKEND, KVM_PROBE_DEADLINE, KvmProbe, SandboxError, SessionSandbox, VmFacts, find_qemu, recorded_probe, try_kvm,
};
