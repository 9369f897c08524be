//! todo: the model's checklist (seed 000 §9). Each call writes the whole list; it is kept in
//! the session and shown back numbered, so the model (and the operator, live) sees where the
//! work stands. Exactly one item is in progress while any is unfinished.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{ErrorCode, Tool, ToolContext, ToolError, ToolFailure, ToolOutput, ToolResult, parse_args};

/// The session-state key the list is kept under.
pub const STATE_KEY: &str = "todos";
pub const MAX_ITEMS: usize = 50;
pub const MAX_ITEM_CHARS: usize = 500;

pub struct Todo;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Pending,
    InProgress,
    Done,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Item {
    pub content: String,
    pub status: Status,
}

#[derive(Debug, Deserialize)]
struct Args {
    todos: Vec<Item>,
}

impl Tool for Todo {
    fn name(&self) -> &'static str {
        "todo"
    }

    fn description(&self) -> &'static str {
        "Write your checklist for the task: the whole list each time, every item with its status (pending, in_progress, done). Use it on any task of more than two steps, and update it as you go: mark an item in_progress when you start it and done when it is finished. Exactly one item is in_progress while any item is unfinished. The list is kept for the session and shown back to you."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "todos": {
                    "type": "array",
                    "description": "The complete list, in order.",
                    "items": {
                        "type": "object",
                        "properties": {
                            "content": {"type": "string", "description": "What to do, in a few words."},
                            "status": {"type": "string", "enum": ["pending", "in_progress", "done"]}
                        },
                        "required": ["content", "status"],
                        "additionalProperties": false
                    }
                }
            },
            "required": ["todos"],
            "additionalProperties": false
        })
    }

    fn mutates(&self) -> bool {
        false
    }

    fn run(&self, ctx: &ToolContext<'_>, args: Value) -> ToolResult {
        let args: Args = parse_args("todo", args)?;
        let items = validate(args.todos)?;
        let previous: Option<Vec<Item>> =
            ctx.session.state(STATE_KEY).map_err(ToolFailure::Internal)?.and_then(|v| serde_json::from_value(v).ok());
        let value = serde_json::to_value(&items).map_err(|e| ToolFailure::Internal(e.into()))?;
        let text = if previous.as_ref() == Some(&items) {
            format!("Unchanged: the todo list already is exactly this.\n{}", render(&items))
        } else {
            ctx.session.set_state(STATE_KEY, &value).map_err(ToolFailure::Internal)?;
            let done = items.iter().filter(|i| i.status == Status::Done).count();
            format!("Todo list saved ({done} of {} done).\n{}", items.len(), render(&items))
        };
        Ok(ToolOutput { meta: Some(json!({ "todos": value })), ..ToolOutput::new(text) })
    }
}

fn validate(items: Vec<Item>) -> Result<Vec<Item>, ToolError> {
    let bad = |msg: String| ToolError::new(ErrorCode::InvalidArguments, msg);
    if items.len() > MAX_ITEMS {
        return Err(bad(format!(
            "the list has {} items; at most {MAX_ITEMS} are kept. Merge small steps into larger ones.",
            items.len()
        )));
    }
    let mut out = Vec::with_capacity(items.len());
    for (n, mut item) in items.into_iter().enumerate() {
        item.content = item.content.trim().to_string();
        if item.content.is_empty() {
            return Err(bad(format!("item {} has no content. Say what the step is, e.g. \"Run the tests\".", n + 1)));
        }
        if item.content.chars().count() > MAX_ITEM_CHARS {
            return Err(bad(format!(
                "item {} is longer than {MAX_ITEM_CHARS} characters. Keep each item to a short line; put details in the plan.",
                n + 1
            )));
        }
        out.push(item);
    }
    let in_progress: Vec<usize> =
        out.iter().enumerate().filter(|(_, i)| i.status == Status::InProgress).map(|(n, _)| n + 1).collect();
    let unfinished = out.iter().any(|i| i.status != Status::Done);
    if in_progress.len() > 1 {
        let list: Vec<String> = in_progress.iter().map(|n| n.to_string()).collect();
        return Err(bad(format!(
            "items {} are all in_progress, but exactly one item may be in_progress at a time. Keep in_progress on the one you are working on now and set the others to pending (or done if they are finished).",
            list.join(", ")
        )));
    }
    if unfinished && in_progress.is_empty() {
        return Err(bad(
            "no item is in_progress, but some are not done. Mark the one you are working on now as in_progress (exactly one).".to_string(),
        ));
    }
    Ok(out)
}

/// The list as the model and the operator see it: `[x]` done, `[>]` in progress, `[ ]` pending.
pub fn render(items: &[Item]) -> String {
    if items.is_empty() {
        return "(the list is empty)".to_string();
    }
    items
        .iter()
        .enumerate()
        .map(|(n, i)| {
            let mark = match i.status {
                Status::Done => "[x]",
                Status::InProgress => "[>]",
                Status::Pending => "[ ]",
            };
            format!("{mark} {}. {}", n + 1, i.content)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(c: &str, s: Status) -> Item {
        Item { content: c.into(), status: s }
    }

    #[test]
    fn exactly_one_in_progress_while_work_remains() {
        assert!(validate(vec![item("a", Status::InProgress), item("b", Status::Pending)]).is_ok());
        assert!(validate(vec![item("a", Status::Done), item("b", Status::Done)]).is_ok());
        assert!(validate(vec![]).is_ok());
        let two = validate(vec![item("a", Status::InProgress), item("b", Status::InProgress)]).unwrap_err();
        assert!(two.message.starts_with("items 1, 2 are all in_progress"), "{}", two.message);
        let none = validate(vec![item("a", Status::Pending)]).unwrap_err();
        assert!(none.message.starts_with("no item is in_progress"), "{}", none.message);
    }

    #[test]
    fn the_list_renders_with_marks() {
        let text =
            render(&[item("read", Status::Done), item("fix", Status::InProgress), item("test", Status::Pending)]);
        assert_eq!(text, "[x] 1. read\n[>] 2. fix\n[ ] 3. test");
    }
}
