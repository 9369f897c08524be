//! glob (skeleton while under construction)

use serde_json::{Value, json};

use super::{Tool, ToolContext, ToolFailure, ToolResult};

pub struct Glob;

impl Tool for Glob {
    fn name(&self) -> &'static str {
        "glob"
    }
    fn description(&self) -> &'static str {
        "glob"
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object", "properties": {}, "required": []})
    }
    fn mutates(&self) -> bool {
        false
    }
    fn run(&self, _ctx: &ToolContext<'_>, _args: Value) -> ToolResult {
        Err(ToolFailure::Internal(anyhow::anyhow!("under construction")))
    }
}

/// Directories skipped everywhere, whatever .gitignore says.
pub const BUILTIN_IGNORED: [&str; 5] = ["node_modules", ".git", "target", "dist", "__pycache__"];

pub fn is_builtin_ignored(name: &std::ffi::OsStr) -> bool {
    BUILTIN_IGNORED.iter().any(|d| name == *d)
}
