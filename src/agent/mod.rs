//! The agent layer: the loop ([`run`]) that drives a model over the tools, and the single path
//! ([`dispatch`]) by which a tool call becomes an observation, with both ends on record.

mod answer_diff;
mod checkpoint;
pub mod compact;
pub mod dispatch;
pub mod events;
mod failing;
mod given;
pub mod history;
mod named_tool;
mod places;
pub mod prompt;
pub mod run;
pub mod steer;
pub mod subagent;

pub use dispatch::{CallOutcome, execute, execute_with};
pub use events::{Budgets, Event, StopReason};
pub use run::{Agent, Op, RunOutcome, RunSetup};
