//! The conversation as the model sees it, rebuilt from a session's event log (for resume), and
//! the texts the loop adds to it (tool results, invalid-turn feedback, lost results).

use serde_json::Value;

use super::events::{StopReason, TurnKind};
use crate::model::{Message, Role};
use crate::store::StoredEvent;

/// A call whose result was lost: the process died after the action (or the model's turn) was
/// recorded and before the observation was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lost {
    pub tool: String,
    /// `None` when the process died between the model's turn and the action's record: the call
    /// never started.
    pub action_seq: Option<i64>,
}

/// What a session's log says, for the model.
#[derive(Debug, Default)]
pub struct Rebuilt {
    /// Every message after the system prompt.
    pub messages: Vec<Message>,
    /// How the last run ended; `None` when it never recorded its end (killed).
    pub last_stop: Option<StopReason>,
    /// Calls whose results were lost, in order.
    pub lost: Vec<Lost>,
    /// The last task's text: a run that continues the session works on it still.
    pub task: Option<String>,
}

/// The tool result as the model receives it. `repeats` counts the identical calls made just
/// before this one: small models loop on a call, and the note names the loop (seed 003: failure
/// evidence is not permission to repeat).
pub fn result_message(tool: &str, output: &str, repeats: u32) -> String {
    let mut text = format!("[result of {tool}]\n{output}");
    if repeats > 0 {
        text.push_str(&format!(
            "\n[note: you made this exact call {} times in a row; its result will not change. Use the result above: give your answer, or make a different call.]",
            repeats + 1
        ));
    }
    text
}

/// The record of an edit made from an answer's text of a file (`steer::answer_edit`), kept
/// in the model turn's payload as `from_answer`.
pub fn from_answer_record(call: &crate::model::ToolCall) -> Value {
    let arguments = serde_json::from_str::<Value>(&call.arguments).unwrap_or(Value::Null);
    serde_json::json!({"name": call.name, "arguments": arguments})
}

/// What the model is told before the result of an edit made from its answer.
pub fn from_answer_note(record: &Value) -> String {
    format!(
        "[note] Text in an answer changes no file, so your answer's new text of the file was made into this call, and it was run: {record}. If the result below is what the task needs, give your final answer; else make the next call."
    )
}

/// Said after a result when the next turn may only be the final answer (the repeat guard).
pub fn answer_now(task: Option<&str>) -> String {
    match task {
        Some(t) => {
            format!("\n[Your next reply must be your final answer to the task, from the results above. The task: {t}]")
        }
        None => "\n[Your next reply must be your final answer to the task, from the results above.]".to_string(),
    }
}

/// Counts consecutive identical calls (same tool, same arguments).
#[derive(Debug, Default)]
pub struct RepeatCounter {
    last: Option<(String, String)>,
    repeats: u32,
}

impl RepeatCounter {
    /// Note a call; returns how many identical calls came right before it.
    pub fn observe(&mut self, tool: &str, arguments: &str) -> u32 {
        let key = (tool.to_string(), normalize_args(arguments));
        if self.last.as_ref() == Some(&key) {
            self.repeats += 1;
        } else {
            self.last = Some(key);
            self.repeats = 0;
        }
        self.repeats
    }
}

/// Arguments compared as JSON values, so spacing and key order do not hide a repeat.
pub(crate) fn normalize_args(raw: &str) -> String {
    match serde_json::from_str::<Value>(raw) {
        Ok(Value::Object(m)) => {
            let sorted: std::collections::BTreeMap<_, _> = m.into_iter().collect();
            serde_json::to_string(&sorted).unwrap_or_default()
        }
        Ok(v) => v.to_string(),
        Err(_) => raw.to_string(),
    }
}

/// What the model is told after a turn that did not parse.
pub fn invalid_feedback(why: &str) -> String {
    format!("[invalid reply] {why}")
}

/// What the model is told about a call whose result was lost.
pub fn interrupted_text(lost: &Lost) -> String {
    match lost.action_seq {
        Some(_) => format!(
            "Error [interrupted]: this {} call was recorded but its result was not: the run stopped (killed or crashed) while it ran. It was not run again. It may or may not have taken effect: check (read the file, glob, or grep) before repeating it.",
            lost.tool
        ),
        None => format!(
            "Error [interrupted]: the run stopped before this {} call started; it was not run. Make the call again if it is still needed.",
            lost.tool
        ),
    }
}

/// Rebuild the conversation from stored events.
pub fn rebuild(events: &[StoredEvent]) -> Rebuilt {
    let mut out = Rebuilt::default();
    // The call the last model turn asked for, until its observation arrives.
    let mut pending: Option<Lost> = None;
    let mut repeats = RepeatCounter::default();
    let mut last_repeats = 0;
    // The note that goes before the next observation (an edit made from an answer).
    let mut note_next: Option<String> = None;
    let str_of = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
    for ev in events {
        let p = &ev.payload;
        match ev.kind.as_str() {
            "task" => {
                out.messages.push(Message::new(Role::User, str_of(p, "text")));
                out.task = Some(str_of(p, "text"));
            }
            "model_turn" => {
                flush(&mut out, pending.take());
                out.messages.push(Message::new(Role::Assistant, str_of(p, "raw")));
                let kind: Option<TurnKind> = p.get("kind").and_then(|k| serde_json::from_value(k.clone()).ok());
                match kind {
                    Some(TurnKind::Invalid) => {
                        out.messages.push(Message::new(Role::User, invalid_feedback(&str_of(p, "feedback"))));
                    }
                    // An answer the loop sent back, or a call it held back unrun (`steer`):
                    // its note follows it.
                    Some(TurnKind::Answer | TurnKind::Call) if !str_of(p, "feedback").is_empty() => {
                        out.messages.push(Message::new(Role::User, str_of(p, "feedback")));
                    }
                    Some(TurnKind::Call) if p.get("from_answer").is_some() => {
                        let record = &p["from_answer"];
                        note_next = Some(from_answer_note(record));
                        pending = Some(Lost { tool: str_of(record, "name"), action_seq: None });
                    }
                    Some(TurnKind::Call) => {
                        let tool = serde_json::from_str::<Value>(&str_of(p, "raw"))
                            .ok()
                            .and_then(|v| v.get("tool").and_then(Value::as_str).map(str::to_string))
                            .unwrap_or_else(|| "tool".into());
                        pending = Some(Lost { tool, action_seq: None });
                    }
                    _ => {}
                }
            }
            "action" => {
                let tool = str_of(p, "tool");
                let args = p.get("arguments").map(Value::to_string).unwrap_or_else(|| str_of(p, "arguments_raw"));
                last_repeats = repeats.observe(&tool, &args);
                pending = Some(Lost { tool, action_seq: Some(ev.seq) });
            }
            "observation" => {
                pending = None;
                let output = p
                    .get("output")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .or_else(|| {
                        p.get("internal_error").and_then(Value::as_str).map(|e| format!("Error [internal]: {e}"))
                    })
                    .unwrap_or_default();
                let repeated = if p.get("interrupted").is_some() { 0 } else { last_repeats };
                let mut message = result_message(&str_of(p, "tool"), &output, repeated);
                if let Some(note) = note_next.take() {
                    message = format!("{note}\n{message}");
                }
                out.messages.push(Message::new(Role::User, message));
            }
            "run_start" => out.last_stop = None,
            "run_end" => {
                out.last_stop = p.get("reason").and_then(|r| serde_json::from_value(r.clone()).ok());
            }
            _ => {}
        }
    }
    // A call still pending at the end of the log lost its result; one pending mid-log (a model
    // turn followed by another) is flushed above.
    if let Some(l) = pending {
        out.lost.push(l);
    }
    out
}

/// A pending call superseded by a later turn without an observation: report it lost too, so the
/// conversation alternates as the model expects.
fn flush(out: &mut Rebuilt, pending: Option<Lost>) {
    if let Some(l) = pending {
        out.messages.push(Message::new(Role::User, result_message(&l.tool, &interrupted_text(&l), 0)));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn ev(seq: i64, kind: &str, payload: Value) -> StoredEvent {
        StoredEvent {
            session: "s".into(),
            seq,
            kind: kind.into(),
            ts: String::new(),
            payload,
            prev_hash: String::new(),
            hash: String::new(),
        }
    }

    #[test]
    fn an_action_without_observation_is_lost_not_rerun() {
        let raw = r#"{"tool": "write", "arguments": {"path": "/w/a", "content": "x"}}"#;
        let events = vec![
            ev(1, "run_start", json!({})),
            ev(2, "task", json!({"text": "do it"})),
            ev(3, "model_turn", json!({"kind": "call", "raw": raw})),
            ev(4, "action", json!({"tool": "write", "arguments": {}})),
        ];
        let r = rebuild(&events);
        assert_eq!(r.lost, vec![Lost { tool: "write".into(), action_seq: Some(4) }]);
        assert_eq!(r.last_stop, None);
        assert_eq!(r.messages.len(), 2);
        assert_eq!(r.messages[1].content, raw);
    }

    #[test]
    fn a_complete_log_rebuilds_in_order() {
        let events = vec![
            ev(1, "run_start", json!({})),
            ev(2, "task", json!({"text": "t"})),
            ev(3, "model_turn", json!({"kind": "call", "raw": "{\"tool\":\"glob\"}"})),
            ev(4, "action", json!({"tool": "glob"})),
            ev(5, "observation", json!({"tool": "glob", "output": "/w/a"})),
            ev(6, "model_turn", json!({"kind": "invalid", "raw": "hm", "feedback": "not JSON"})),
            ev(7, "run_end", json!({"reason": "max_turns"})),
        ];
        let r = rebuild(&events);
        let texts: Vec<&str> = r.messages.iter().map(|m| m.content.as_str()).collect();
        assert_eq!(texts, ["t", "{\"tool\":\"glob\"}", "[result of glob]\n/w/a", "hm", "[invalid reply] not JSON"]);
        assert_eq!(r.last_stop, Some(StopReason::MaxTurns));
        assert!(r.lost.is_empty());
        assert_eq!(r.task.as_deref(), Some("t"));
    }

    #[test]
    fn answer_now_restates_the_task() {
        assert_eq!(
            answer_now(Some("list the files")),
            "\n[Your next reply must be your final answer to the task, from the results above. The task: list the files]"
        );
    }

    #[test]
    fn repeats_are_counted_whatever_the_spacing() {
        let mut c = RepeatCounter::default();
        assert_eq!(c.observe("read", r#"{"path": "/a", "limit": 5}"#), 0);
        assert_eq!(c.observe("read", r#"{"limit":5,"path":"/a"}"#), 1);
        assert_eq!(c.observe("read", r#"{"path":"/a"}"#), 0);
        let text = result_message("read", "x", 2);
        assert!(text.ends_with("you made this exact call 3 times in a row; its result will not change. Use the result above: give your answer, or make a different call.]"), "{text}");
    }
}
