//! The model layer. For now it holds the shape of a call as a model emits it; the llama.cpp,
//! OpenAI-compatible and scripted adapters arrive with the agent loop.

use serde::{Deserialize, Serialize};

/// One tool call exactly as a model emits it: a tool name and the raw JSON text of its
/// arguments. The text stays raw so that a malformed call is recorded as the model wrote it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    pub name: String,
    pub arguments: String,
}
