//! edit (skeleton while under construction)

use serde_json::{Value, json};

use super::{Tool, ToolContext, ToolFailure, ToolResult};

pub struct Edit;

impl Tool for Edit {
    fn name(&self) -> &'static str {
        "edit"
    }
    fn description(&self) -> &'static str {
        "edit"
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
