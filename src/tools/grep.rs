//! grep (skeleton while under construction)

use serde_json::{Value, json};

use super::{Tool, ToolContext, ToolFailure, ToolResult};

pub struct Grep;

impl Tool for Grep {
    fn name(&self) -> &'static str {
        "grep"
    }
    fn description(&self) -> &'static str {
        "grep"
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
