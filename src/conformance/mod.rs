//! The conformance suite: what a model must show before it serves (seed 000 §10).
//!
//! Three parts, one report ([`report`]):
//! - the harness ([`harness`]): the tool-contract cases of `conformance/cases/`, calls made
//!   straight to the tools, no model (`cargo test` runs the same cases);
//! - the capability probe ([`probe`], `conformance/probe/`): small real tasks per tool, where
//!   the model must make a valid call with the right arguments;
//! - error recovery (`conformance/recovery/`): sessions whose last call failed by design; the
//!   model must recover from the error message within a few turns, once with our messages and
//!   once with bare ones, to measure whether the messages teach.
//!
//! The suite's files are built into the binary ([`suite`]).

pub mod gate;
pub mod harness;
pub mod probe;
pub mod report;
pub mod suite;
pub mod tree;

pub use harness::{Case, CaseReport, run_case};
pub use suite::Suite;

/// Every file of a case's workspace starts with this mtime (2026-01-01T00:00:00Z), so that
/// mtime ordering is deterministic.
pub const BASE_MTIME_SECS: u64 = 1_767_225_600;

/// The placeholder for the workspace root in calls and snapshots.
pub const WS: &str = "$WS";
/// The placeholder for the case's temporary directory (the workspace's parent) in snapshots.
pub const TMP: &str = "$TMP";
