//! The sandbox layer: where a tool may act. Today that is the confinement of file paths to the
//! workspace roots; the session microVM for `bash` joins it later.

mod paths;

pub use paths::{PathError, Resolved, Workspace};
