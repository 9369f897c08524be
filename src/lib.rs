//! Abhed: an offline coding agent. A local model drives nine native tools; every call is an
//! event persisted before and after it runs.
//!
//! Layers (see docs/ARCHITECTURE.md): `agent` runs the loop and dispatches tool calls, `tools`
//! holds one file per tool, `model` the adapters, `sandbox` the confinement of paths and bash's
//! microVM, `approval` the per-command policy, `store` the SQLite event log and session state.
//! Library code never prints; only the binary's `cli` module does.
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod agent;
pub mod approval;
pub mod boundary;
pub mod config;
pub mod conformance;
pub mod cpu;
pub mod eval;
pub mod install;
pub mod layout;
pub mod model;
pub mod sandbox;
pub mod store;
pub mod tools;
pub mod undo;
