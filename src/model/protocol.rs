//! The turn protocol: every assistant turn is exactly one JSON object, either a tool call
//!
//! ```json
//! {"tool": "read", "arguments": {"path": "/abs/file.rs"}}
//! ```
//!
//! or the final answer
//!
//! ```json
//! {"answer": "what was done or found", "status": "done"}
//! ```
//!
//! (`status` is `gave_up` when the task cannot be finished). The JSON schema of a turn is built
//! from the tools' own input schemas; the llama adapter turns it into a GBNF grammar, so a local
//! model's turn always parses, and an endpoint is sent it as `response_format`.

use serde_json::{Map, Value, json};

use super::ToolCall;
use crate::tools::Registry;

/// One parsed assistant turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Turn {
    Call(ToolCall),
    Answer { text: String, gave_up: bool },
}

/// The schema every turn must satisfy, for a given set of tools.
#[derive(Debug, Clone)]
pub struct TurnSchema {
    schema: Value,
    answer: Value,
    /// A turn that may only be a tool call.
    call: Value,
    tools: Vec<String>,
    /// Each tool's call alone, JSON-turn and native, for a turn held to one tool.
    tool_calls: Vec<(String, Value, Value)>,
    /// The JSON schema of a call in the model's own format: `{"name": ..., "arguments": ...}`.
    native_call: Value,
    /// The tools as a chat template's `tools` variable takes them (OpenAI's function shape).
    functions: Vec<Value>,
}

impl TurnSchema {
    pub fn new(registry: &Registry) -> Self {
        let mut variants: Vec<Value> = registry
            .iter()
            .map(|t| {
                json!({
                    "type": "object",
                    "properties": {
                        "tool": {"const": t.name()},
                        "arguments": closed(t.input_schema()),
                    },
                    "required": ["tool", "arguments"],
                    "additionalProperties": false,
                })
            })
            .collect();
        let answer = json!({
            "type": "object",
            "properties": {
                "answer": {"type": "string"},
                "status": {"enum": ["done", "gave_up"]},
            },
            "required": ["answer", "status"],
            "additionalProperties": false,
        });
        let call = json!({ "oneOf": variants.clone() });
        variants.push(answer.clone());
        let native_variants: Vec<Value> = registry
            .iter()
            .map(|t| {
                json!({
                    "type": "object",
                    "properties": {
                        "name": {"const": t.name()},
                        "arguments": closed(t.input_schema()),
                    },
                    "required": ["name", "arguments"],
                    "additionalProperties": false,
                })
            })
            .collect();
        let names = registry.names();
        let tool_calls = names
            .iter()
            .zip(variants.iter().zip(&native_variants))
            .map(|(name, (call, native))| (name.to_string(), call.clone(), native.clone()))
            .collect();
        let functions = registry
            .iter()
            .map(|t| {
                json!({
                    "type": "function",
                    "function": {"name": t.name(), "description": t.description(), "parameters": t.input_schema()},
                })
            })
            .collect();
        TurnSchema {
            schema: json!({ "oneOf": variants }),
            answer,
            call,
            tools: names.iter().map(|s| s.to_string()).collect(),
            tool_calls,
            native_call: json!({ "oneOf": native_variants }),
            functions,
        }
    }

    /// The JSON schema of one call in the model's own format (`{"name", "arguments"}`).
    pub fn native_call_schema(&self) -> &Value {
        &self.native_call
    }

    /// The tools in OpenAI's function shape, for a chat template's `tools`.
    pub fn functions(&self) -> &[Value] {
        &self.functions
    }

    /// The JSON schema of a turn.
    pub fn json_schema(&self) -> &Value {
        &self.schema
    }

    /// The JSON schema of a turn that may only be the final answer.
    pub fn answer_schema(&self) -> &Value {
        &self.answer
    }

    /// The JSON schema of a turn that may only be a tool call.
    pub fn call_schema(&self) -> &Value {
        &self.call
    }

    /// The names of the tools offered, in the prompt's order.
    pub fn tools(&self) -> &[String] {
        &self.tools
    }

    /// The JSON schema of a turn that may only be a call of `tool` (JSON turn), and of that
    /// call in the model's own format; `None` for a tool not offered.
    pub fn tool_call_schemas(&self, tool: &str) -> Option<(&Value, &Value)> {
        self.tool_calls.iter().find(|(name, _, _)| name == tool).map(|(_, call, native)| (call, native))
    }

    /// Parse a reply. The error is written for the model: it says what was wrong and shows the
    /// two shapes a turn may take.
    pub fn parse(&self, text: &str) -> Result<Turn, String> {
        let trimmed = strip_fence(text.trim());
        let value: Value = serde_json::from_str(trimmed).map_err(|e| {
            if trimmed.is_empty() {
                format!("your reply was empty. {}", self.shapes())
            } else {
                format!("your reply is not one JSON object ({e}). {}", self.shapes())
            }
        })?;
        let Some(obj) = value.as_object() else {
            return Err(format!("your reply is JSON but not an object. {}", self.shapes()));
        };
        if let Some(tool) = obj.get("tool") {
            let Some(name) = tool.as_str() else {
                return Err(format!("`tool` must be a tool name as a string. {}", self.shapes()));
            };
            let arguments = match obj.get("arguments") {
                None | Some(Value::Null) => "{}".to_string(),
                Some(v) => v.to_string(),
            };
            return Ok(Turn::Call(ToolCall { name: name.to_string(), arguments }));
        }
        if let Some(answer) = obj.get("answer") {
            let text = match answer {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            let gave_up = obj.get("status").and_then(Value::as_str) == Some("gave_up");
            return Ok(Turn::Answer { text, gave_up });
        }
        let keys: Vec<&str> = obj.keys().map(String::as_str).collect();
        Err(format!(
            "your reply has neither `tool` nor `answer` (it has: {}). {}",
            if keys.is_empty() { "no keys".to_string() } else { keys.join(", ") },
            self.shapes()
        ))
    }

    fn shapes(&self) -> String {
        format!(
            "Reply with exactly one JSON object: {{\"tool\": NAME, \"arguments\": {{...}}}} to call a tool ({}), or {{\"answer\": TEXT, \"status\": \"done\"}} when the task is finished (\"gave_up\" if it cannot be).",
            self.tools.join(", ")
        )
    }
}

/// A tool schema as the grammar sees it: no fields beyond the declared ones, at any depth.
fn closed(mut schema: Value) -> Value {
    if let Some(obj) = schema.as_object_mut() {
        if obj.get("type").and_then(Value::as_str) == Some("object") {
            obj.entry("additionalProperties").or_insert(Value::Bool(false));
        }
        if let Some(Value::Object(props)) = obj.get_mut("properties") {
            let closed_props: Map<String, Value> = std::mem::take(props)
                .into_iter()
                .map(|(k, v)| {
                    let v = closed(v);
                    (k.clone(), if k == "path" { absolute(v) } else { v })
                })
                .collect();
            *props = closed_props;
        }
        if let Some(items) = obj.get_mut("items") {
            *items = closed(items.take());
        }
    }
    schema
}

/// The pattern of a `path` argument: a leading `/`, then JSON string content. llama.cpp's
/// converter turns a pattern into grammar rules for the raw characters between the quotes, so
/// the pattern itself must keep out an unescaped `"` and a lone `\\`: with `^/.*$` a model wrote
/// `"/a/Cargo.toml\"},\"type\":...` as one "path" and the turn no longer parsed.
pub const PATH_PATTERN: &str = r#"^/([^"\\]|\\.)*$"#;

/// Every `path` argument is absolute (the contract's rule 5); the grammar makes a local model
/// write the leading `/` instead of learning it from a `relative_path` error.
fn absolute(mut schema: Value) -> Value {
    if let Some(obj) = schema.as_object_mut()
        && obj.get("type").and_then(Value::as_str) == Some("string")
    {
        obj.insert("pattern".into(), Value::String(PATH_PATTERN.into()));
    }
    schema
}

/// Models behind an endpoint sometimes wrap JSON in a Markdown fence; the grammar never does.
fn strip_fence(text: &str) -> &str {
    let Some(rest) = text.strip_prefix("```") else { return text };
    let rest = rest.strip_prefix("json").unwrap_or(rest);
    rest.strip_suffix("```").unwrap_or(rest).trim()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> TurnSchema {
        TurnSchema::new(&Registry::native())
    }

    #[test]
    fn parses_calls_and_answers() {
        let s = schema();
        let t = s.parse(r#"{"tool": "read", "arguments": {"path": "/a"}}"#).unwrap();
        assert_eq!(t, Turn::Call(ToolCall { name: "read".into(), arguments: r#"{"path":"/a"}"#.into() }));
        let t = s.parse("```json\n{\"answer\": \"hi\", \"status\": \"gave_up\"}\n```").unwrap();
        assert_eq!(t, Turn::Answer { text: "hi".into(), gave_up: true });
    }

    #[test]
    fn errors_teach_the_shape() {
        let e = schema().parse("I will read the file").unwrap_err();
        assert!(e.starts_with("your reply is not one JSON object"), "{e}");
        assert!(e.contains("{\"tool\": NAME"), "{e}");
        let e = schema().parse(r#"{"path": "/a"}"#).unwrap_err();
        assert!(e.contains("neither `tool` nor `answer` (it has: path)"), "{e}");
    }

    #[test]
    fn schema_closes_every_object() {
        let s = schema();
        let variants = s.json_schema()["oneOf"].as_array().unwrap();
        assert_eq!(variants.len(), Registry::native().names().len() + 1);
        assert_eq!(variants[0]["properties"]["arguments"]["additionalProperties"], false);
        assert_eq!(variants[0]["properties"]["arguments"]["properties"]["path"]["pattern"], PATH_PATTERN);
    }
}
