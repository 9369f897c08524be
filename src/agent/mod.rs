//! The agent layer: it turns a model's tool call into an observation, with both ends on
//! record. The loop (model turns, budgets, compaction, subagents) is built on [`dispatch`].

pub mod dispatch;

pub use dispatch::{CallOutcome, execute};
