//! The model's own tool-call format: the conversation rendered by the GGUF's own chat template
//! (Jinja, with its `tools` variable, as llama-server's `--jinja` renders it), and each reply
//! constrained to that family's call syntax or a plain-text final answer.
//!
//! Small models act far more readily in the format they were trained on, but unconstrained they
//! drop the tags, invent tool names and repeat calls; the grammar keeps the act well-formed.
//! The rest of Abhed speaks the JSON-turn protocol ([`super::protocol`]): the adapter renders
//! stored turns into the native form and hands native replies back as JSON turns, so the loop,
//! the store and the events do not change with the protocol.
//!
//! Families: Hermes (`<tool_call>{"name": ..., "arguments": ...}</tool_call>`: Qwen2.5, Hermes
//! 2/3). A template of another family, or one without `tools`, keeps the JSON-turn protocol.

use anyhow::{Context as _, Result, anyhow, bail};
use minijinja::{Environment, Error, ErrorKind, Value as JValue};
use serde_json::{Value, json};

use super::{Message, Role};

/// The protocol names ModelInfo and the reports carry.
pub const NATIVE_HERMES: &str = "native-hermes";

/// Whether `protocol` (a ModelInfo's) is a model's own tool-call format.
pub fn is_native(protocol: &str) -> bool {
    protocol.starts_with("native")
}

/// A tool-call syntax family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// `<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>`, results in `tool` messages.
    Hermes,
}

impl Family {
    /// The family whose calls `template` renders, if it takes `tools` and is one we know.
    pub fn detect(template: &str) -> Option<Family> {
        (template.contains("tools") && template.contains("<tool_call>")).then_some(Family::Hermes)
    }

    pub fn protocol(self) -> &'static str {
        match self {
            Family::Hermes => NATIVE_HERMES,
        }
    }
}

/// Which turns a grammar allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Only {
    Either,
    Answer,
    Call,
}

/// What a final answer that gives up begins with (the native answer is plain text).
pub const GAVE_UP_PREFIX: &str = "GAVE UP:";

const OPEN: &str = "<tool_call>\n";
const CLOSE: &str = "\n</tool_call>";

/// A compiled chat template and the family of its calls.
pub struct Native {
    family: Family,
    env: Environment<'static>,
    bos: String,
    eos: String,
}

impl Native {
    pub fn new(family: Family, template: &str, bos: &str, eos: &str) -> Result<Native> {
        let mut env = Environment::new();
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        // As transformers' `tojson`: Python's separators, no ASCII or HTML escaping (minijinja's
        // own escapes `<` and `>`, which the model never saw).
        env.add_filter("tojson", |v: JValue| -> Result<String, Error> {
            let value = serde_json::to_value(&v).map_err(|e| Error::new(ErrorKind::InvalidOperation, e.to_string()))?;
            Ok(python_json(&value))
        });
        env.add_function("raise_exception", |msg: String| -> Result<String, Error> {
            Err(Error::new(ErrorKind::InvalidOperation, msg))
        });
        env.add_template_owned("chat", template.to_string()).context("the GGUF's chat template is not valid Jinja")?;
        Ok(Native { family, env, bos: bos.to_string(), eos: eos.to_string() })
    }

    pub fn family(&self) -> Family {
        self.family
    }

    /// The conversation as the template renders it. The system message's shared part stays the
    /// system message (with the tools the template adds after it, so the whole block is the same
    /// in every workspace); its workspace part opens the first user message.
    pub fn render(&self, messages: &[Message], functions: &[Value], add_generation_prompt: bool) -> Result<String> {
        let mut out: Vec<Value> = Vec::new();
        let mut rest = messages;
        let mut workspace = String::new();
        if let Some(first) = messages.first().filter(|m| m.role == Role::System) {
            let cut = first.shared_prefix.filter(|&n| n <= first.content.len()).unwrap_or(first.content.len());
            let (shared, tail) = first.content.split_at(cut);
            out.push(json!({"role": "system", "content": shared.trim_end()}));
            workspace = tail.trim().to_string();
            rest = &messages[1..];
        }
        let mut last_was_call = false;
        for m in rest {
            match m.role {
                Role::Assistant => {
                    let (msg, call) = assistant_message(&m.content);
                    out.push(msg);
                    last_was_call = call;
                }
                Role::User if last_was_call => {
                    out.push(json!({"role": "tool", "content": strip_result_header(&m.content)}));
                    last_was_call = false;
                }
                Role::User | Role::System => {
                    let mut content = m.content.clone();
                    if !workspace.is_empty() {
                        content = format!("{}\n\n{content}", std::mem::take(&mut workspace));
                    }
                    out.push(json!({"role": m.role.as_str(), "content": content}));
                    last_was_call = false;
                }
            }
        }
        let tmpl = self.env.get_template("chat")?;
        let text = tmpl
            .render(minijinja::context! {
                messages => out,
                tools => functions,
                add_generation_prompt => add_generation_prompt,
                bos_token => self.bos.as_str(),
                eos_token => self.eos.as_str(),
            })
            .map_err(|e| anyhow!("the chat template failed to render the conversation: {e:#}"))?;
        Ok(text)
    }

    /// The GBNF of a reply: one call in the family's syntax, or a plain-text answer; with
    /// `only`, just the one or the other. `call` is the GBNF of the call object (llama.cpp's
    /// converter's output for the native call schema).
    pub fn grammar(&self, call: &str, only: Only) -> Result<String> {
        let mut renamed = String::new();
        let mut found = false;
        for line in call.lines() {
            if let Some(rest) = line.strip_prefix("root ::=") {
                renamed.push_str(&format!("call-object ::={rest}\n"));
                found = true;
            } else {
                renamed.push_str(line);
                renamed.push('\n');
            }
        }
        if !found {
            bail!("the call grammar has no root rule");
        }
        // An answer is text that opens with neither `<` nor `{` nor `[`: a small model that
        // means to call a tool but leaves out the tags writes a bare JSON object, and that must
        // come out as a call, not as a final answer holding JSON.
        let answer = "answer ::= [^<{\\[ \\t\\n] [^\\x00]*\n";
        let call_rule = format!("call ::= {} call-object {}\n", gbnf_literal(OPEN), gbnf_literal(CLOSE));
        let root = match only {
            Only::Answer => "root ::= answer\n".to_string(),
            Only::Call => format!("root ::= call\n{call_rule}"),
            Only::Either => format!("root ::= call | answer\n{call_rule}"),
        };
        Ok(format!("{root}{answer}{renamed}"))
    }

    /// A native reply as a JSON turn: `{"tool", "arguments"}` or `{"answer", "status"}`. A call
    /// that does not parse (a reply cut off at the token limit) is returned as it is, for the
    /// loop to report as an invalid turn.
    pub fn to_turn(&self, reply: &str) -> String {
        let text = reply.trim();
        if let Some(body) = text.strip_prefix(OPEN.trim_end()) {
            let body = body.trim().strip_suffix(CLOSE.trim_start()).unwrap_or(body).trim();
            return match serde_json::from_str::<Value>(body) {
                Ok(v) if v.get("name").is_some_and(Value::is_string) => {
                    json!({"tool": v["name"], "arguments": v.get("arguments").cloned().unwrap_or(json!({}))})
                        .to_string()
                }
                _ => reply.to_string(),
            };
        }
        if let Some(call) = bare_call(text) {
            return call;
        }
        let (answer, status) = match strip_prefix_ci(text, GAVE_UP_PREFIX) {
            Some(rest) => (rest.trim(), "gave_up"),
            None => (text, "done"),
        };
        json!({"answer": answer, "status": status}).to_string()
    }
}

/// A call written without its tags, as a JSON turn: the reply opens with a JSON object that
/// names a tool, after nothing but stray characters or a code fence (the answer grammar keeps
/// out a leading `{`, and a small model then writes `>{` or a json fence). Whatever follows
/// the object is dropped: small models go on to write more calls one turn cannot make.
pub fn bare_call(text: &str) -> Option<String> {
    let text = text.trim_start();
    let start = text.find('{')?;
    let head = text[..start].trim_start_matches(|c: char| c == '>' || c == '`' || c.is_whitespace());
    if !head.strip_prefix("json").unwrap_or(head).trim().is_empty() {
        return None;
    }
    let rest = &text[start..];
    let v: Value = serde_json::Deserializer::from_str(rest).into_iter::<Value>().next()?.ok()?;
    let name = v.get("name")?.as_str()?;
    let arguments = v.get("arguments").cloned().unwrap_or(json!({}));
    (arguments.is_object() && !name.is_empty()).then(|| json!({"tool": name, "arguments": arguments}).to_string())
}

/// A stored JSON turn as the template's assistant message; `true` when it is a call.
fn assistant_message(content: &str) -> (Value, bool) {
    let parsed: Option<Value> = serde_json::from_str(content.trim()).ok();
    match parsed {
        Some(v) if v.get("tool").is_some_and(Value::is_string) => {
            let call = json!({"type": "function", "function": {"name": v["tool"], "arguments": v.get("arguments").cloned().unwrap_or(json!({}))}});
            (json!({"role": "assistant", "content": "", "tool_calls": [call]}), true)
        }
        Some(v) if v.get("answer").is_some() => {
            let text = v["answer"].as_str().map_or_else(|| v["answer"].to_string(), str::to_string);
            let text = if v.get("status").and_then(Value::as_str) == Some("gave_up") {
                format!("{GAVE_UP_PREFIX} {text}")
            } else {
                text
            };
            (json!({"role": "assistant", "content": text}), false)
        }
        _ => (json!({"role": "assistant", "content": content}), false),
    }
}

/// A tool result without the `[result of TOOL]` line the JSON protocol puts first: the `tool`
/// role already says it.
fn strip_result_header(content: &str) -> &str {
    match content.strip_prefix("[result of ") {
        Some(rest) => rest.split_once("]\n").map_or(content, |(_, body)| body),
        None => content,
    }
}

fn strip_prefix_ci<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix).then(|| &text[prefix.len()..])
}

/// A GBNF string literal.
fn gbnf_literal(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// JSON as Python's `json.dumps(v, ensure_ascii=False)` writes it: `", "` and `": "`.
pub fn python_json(v: &Value) -> String {
    let mut out = String::new();
    write_python_json(v, &mut out);
    out
}

fn write_python_json(v: &Value, out: &mut String) {
    match v {
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_python_json(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push_str(": ");
                write_python_json(item, out);
            }
            out.push('}');
        }
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Qwen2.5-Coder-Instruct's own template, as its GGUF carries it.
    const QWEN: &str = include_str!("testdata/qwen2.5-coder.jinja");

    fn native() -> Native {
        Native::new(Family::detect(QWEN).unwrap(), QWEN, "", "<|im_end|>").unwrap()
    }

    #[test]
    fn a_conversation_renders_in_the_native_shape() {
        let system = "shared rules\n# The workspace\nThe workspace is /w.";
        let messages = [
            Message::new(Role::System, system).with_shared_prefix(system.find("\n# The workspace").unwrap()),
            Message::new(Role::User, "fix a.py"),
            Message::new(Role::Assistant, r#"{"tool": "read", "arguments": {"path": "/w/a.py"}}"#),
            Message::new(Role::User, "[result of read]\n1\tprint(1)"),
        ];
        let tools = [json!({"type": "function", "function": {"name": "read", "description": "Read <n>"}})];
        let text = native().render(&messages, &tools, true).unwrap();
        assert_eq!(
            text,
            // What transformers' apply_chat_template gives for this conversation.
            "<|im_start|>system\nshared rules\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"read\", \"description\": \"Read <n>\"}}\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n<|im_start|>user\n# The workspace\nThe workspace is /w.\n\nfix a.py<|im_end|>\n<|im_start|>assistant\n<tool_call>\n{\"name\": \"read\", \"arguments\": {\"path\": \"/w/a.py\"}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n1\tprint(1)\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
        );
    }

    #[test]
    fn replies_become_json_turns() {
        let n = native();
        let call = n.to_turn("<tool_call>\n{\"name\": \"read\", \"arguments\": {\"path\": \"/w/a\"}}\n</tool_call>");
        assert_eq!(call, r#"{"tool":"read","arguments":{"path":"/w/a"}}"#);
        assert_eq!(n.to_turn("It is in a.py."), r#"{"answer":"It is in a.py.","status":"done"}"#);
        assert_eq!(n.to_turn("GAVE UP: no network."), r#"{"answer":"no network.","status":"gave_up"}"#);
        // Cut off inside the call: left as it is, for the loop to report.
        assert_eq!(n.to_turn("<tool_call>\n{\"name\": \"re"), "<tool_call>\n{\"name\": \"re");
        // A call without its tags, as the 0.5B model writes one when the answer grammar keeps
        // out a leading brace, followed by more it cannot make in one turn.
        let bare = ">{\"name\": \"read\", \"arguments\": {\"path\": \"/w/a\"}}\n{:name: \"glob\"";
        assert_eq!(n.to_turn(bare), r#"{"tool":"read","arguments":{"path":"/w/a"}}"#);
        assert_eq!(bare_call("The file defines {\"name\": \"x\"} late in the text"), None);
        let fenced = "```json\n{\"name\": \"edit\", \"arguments\": {\"path\": \"/w/a\"}}\n```";
        assert_eq!(bare_call(fenced).as_deref(), Some(r#"{"tool":"edit","arguments":{"path":"/w/a"}}"#));
        assert_eq!(bare_call(">{\"name\": \"read\", \"arguments\": {\"path\""), None);
    }

    #[test]
    fn the_grammar_wraps_the_call_object() {
        let g = native().grammar("root ::= \"{\" space \"}\"\nspace ::= \" \"?\n", Only::Either).unwrap();
        assert!(
            g.starts_with("root ::= call | answer\ncall ::= \"<tool_call>\\n\" call-object \"\\n</tool_call>\"\n"),
            "{g}"
        );
        assert!(g.contains("call-object ::= \"{\" space \"}\"\n"), "{g}");
        let a = native().grammar("root ::= \"{\"\n", Only::Answer).unwrap();
        assert!(a.starts_with("root ::= answer\n"), "{a}");
        let c = native().grammar("root ::= \"{\"\n", Only::Call).unwrap();
        assert!(c.starts_with("root ::= call\ncall ::= "), "{c}");
    }
}
