//! task: spawn subagents, each with a fresh context, and get back their summaries (seed 000 §8).
//!
//! This file holds what the model sees (the schema, the profiles, the errors of a bad call) and
//! checks a call before anything starts. Running the subagents needs the model, which tools do
//! not hold: the agent loop lends a [`Delegate`] for that (`agent::subagent`).

use regex::Regex;
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::OnceLock;

use super::{ErrorCode, Tool, ToolContext, ToolError, ToolResult, parse_args};

pub struct Task;

/// What a subagent may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Profile {
    Explore,
    Test,
    Review,
    General,
}

impl Profile {
    pub fn as_str(self) -> &'static str {
        match self {
            Profile::Explore => "explore",
            Profile::Test => "test",
            Profile::Review => "review",
            Profile::General => "general",
        }
    }

    /// The tools a subagent of this profile is offered (`task` is added when nesting is on).
    pub fn tools(self) -> &'static [&'static str] {
        match self {
            Profile::Explore => &["read", "glob", "grep"],
            Profile::Test | Profile::Review => &["read", "glob", "grep", "bash"],
            Profile::General => &["read", "write", "edit", "glob", "grep", "todo", "bash"],
        }
    }

    /// What the subagent is told about its role.
    pub fn brief(self) -> &'static str {
        match self {
            Profile::Explore => {
                "You explore: find and read what the task asks about, and change nothing (your tools cannot)."
            }
            Profile::Test => {
                "You test: run the tests or commands the task names with bash, read the failures, and report what passed and what failed, with the exact errors. Do not fix code unless the task says so."
            }
            Profile::Review => {
                "You review: read the code or changes the task names, check them for bugs, missing cases and mistakes, and report each finding with its file and line. Do not change files."
            }
            Profile::General => "You do the task: read, change files and run commands as it needs.",
        }
    }
}

/// One subagent to run, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskSpec {
    pub prompt: String,
    pub description: String,
    pub profile: Profile,
    pub max_turns: u32,
}

/// Runs subagents for the task tool: lent by the agent loop, which holds the model.
pub trait Delegate {
    /// Run `specs` (at once where the model can) and return what the parent sees.
    fn run_tasks(&self, ctx: &ToolContext<'_>, specs: Vec<TaskSpec>) -> ToolResult;
}

#[derive(Debug, Deserialize)]
struct One {
    prompt: String,
    description: String,
    agent_type: Option<Profile>,
    max_turns: Option<u32>,
}

#[derive(Debug, Deserialize)]
struct Args {
    #[serde(flatten)]
    first: One,
    #[serde(default)]
    parallel: Vec<One>,
}

const AGENT_TYPES: [&str; 4] = ["explore", "test", "review", "general"];

fn one_schema() -> Value {
    json!({
        "prompt": {"type": "string", "description": "Complete, self-contained task. The subagent sees none of this conversation: give the absolute paths, the facts and the goal, and say what to report."},
        "description": {"type": "string", "description": "3-5 word label."},
        "agent_type": {"type": "string", "enum": AGENT_TYPES, "description": "Which subagent profile: explore (read-only: read, glob, grep) | test (read, glob, grep, bash; runs tests) | review (read, glob, grep, bash; checks code, changes nothing) | general (read, write, edit, glob, grep, todo, bash). Default general."},
        "max_turns": {"type": "integer", "minimum": 1}
    })
}

impl Tool for Task {
    fn name(&self) -> &'static str {
        "task"
    }

    // The seed's text, with its "Use when a task requires extensive exploration …" folded into
    // the first sentence: Qwen2.5-Coder-1.5B gave up with that sentence as its reason, word for
    // word, in 2 of 12 tasks (docs/EVAL.md).
    fn description(&self) -> &'static str {
        "Spawn a subagent with a fresh context to handle a self-contained subtask, one that needs extensive exploration whose intermediate detail you do not need. The subagent returns only a summary. The prompt must be self-contained: the subagent sees none of this conversation, so never write \"the file we discussed\" — name the file by its absolute path and state what it needs to know. To run several independent subtasks at the same time, list the others in `parallel`; all their summaries come back together."
    }

    fn input_schema(&self) -> Value {
        let mut props = one_schema();
        props["parallel"] = json!({
            "type": "array",
            "description": "More self-contained subtasks to run at the same time as this one, each with its own prompt, description, agent_type and max_turns.",
            "items": {"type": "object", "properties": one_schema(), "required": ["prompt", "description"]}
        });
        json!({
            "type": "object",
            "properties": props,
            "required": ["prompt", "description"],
            "additionalProperties": false
        })
    }

    // Its subagents can change files, each call under the same approvals as the parent's.
    fn mutates(&self) -> bool {
        false
    }

    fn run(&self, ctx: &ToolContext<'_>, args: Value) -> ToolResult {
        let args: Args = parse_args("task", args)?;
        let limit = ctx.config.task.max_turns;
        let specs = std::iter::once(args.first)
            .chain(args.parallel)
            .enumerate()
            .map(|(i, one)| check(i, one, limit))
            .collect::<Result<Vec<_>, _>>()?;
        let Some(delegate) = ctx.delegate else {
            return Err(ToolError::new(
                ErrorCode::TaskUnavailable,
                "task runs subagents on the model, so it works only inside an agent run (abhed run, abhed chat), not from `abhed tool`. No subagent was started.",
            )
            .into());
        };
        delegate.run_tasks(ctx, specs)
    }
}

fn check(index: usize, one: One, max_turns_limit: u32) -> Result<TaskSpec, ToolError> {
    let which = if index == 0 { String::new() } else { format!(" (parallel[{}])", index - 1) };
    let prompt = one.prompt.trim();
    if one.description.trim().is_empty() {
        return Err(ToolError::new(
            ErrorCode::InvalidArguments,
            format!(
                "`description`{which} is empty. Give a 3-5 word label for the subtask (e.g. \"Find the config loader\"); it is what the operator sees. No subagent was started."
            ),
        ));
    }
    if !prompt.contains(char::is_whitespace) && (prompt.starts_with('/') || prompt.contains('*')) {
        // Qwen2.5-Coder-1.5B gave `/ws/tests/*.ts` as the prompt of "have a subagent list the
        // test files", in every probe run, with the task itself as the description ("Find
        // which file under /ws/src defines MAX_RETRIES, and report what it found."): the two
        // swapped. Where the description reads as a whole task, the example is that swap;
        // else a prompt made of the path. It keeps the call's agent_type: made again from the
        // example alone, the call would lose the profile asked for.
        let description = one.description.trim();
        let words: Vec<&str> = description.split_whitespace().collect();
        // A description that would pass as a prompt (below) is taken for one.
        let swapped = words.len() >= 4 && leans_on_context(description).is_none();
        let mut example = if swapped {
            // The path's folder, before any pattern: a description that names it has the path.
            let base = prompt.split(['*', '?', '[', '{']).next().unwrap_or(prompt).trim_end_matches('/');
            let task = if !base.is_empty() && description.contains(base) {
                description.to_string()
            } else {
                format!("{} (in {prompt}).", description.trim_end_matches('.'))
            };
            serde_json::json!({"prompt": task, "description": words[..3].join(" ")})
        } else {
            serde_json::json!({
                "prompt": format!("List the files that match {prompt} (use glob) and report their paths."),
                "description": if description.is_empty() { "List the files" } else { description },
            })
        };
        if let Some(profile) = one.agent_type {
            example["agent_type"] = serde_json::json!(profile.as_str());
        }
        // Told of the prompt alone, the model fixed it and was then refused for max_turns: every
        // problem of the call is told at once. The prompt's comes last: told of max_turns last,
        // the model fixed that alone.
        let also = match one.max_turns {
            Some(n) if n == 0 || n > max_turns_limit => format!(
                " max_turns {n} is over the limit too: it must be 1 to {max_turns_limit} (task.max_turns), or left out for {max_turns_limit}, as in the example below."
            ),
            _ => String::new(),
        };
        let why = if swapped {
            " Your description reads as the task: make it the prompt, and give a 3-5 word label as the description"
        } else {
            " Say in words what it is to do, with the paths it needs, and what to report back"
        };
        return Err(ToolError::new(
            ErrorCode::NotSelfContained,
            format!(
                "the prompt{which} {prompt:?} is a path, not a task: the subagent is a model that reads the prompt as its instructions, and sees none of this conversation.{also}{why}, e.g. {example}. No subagent was started.",
            ),
        ));
    }
    if prompt.split_whitespace().count() < 4 {
        return Err(ToolError::new(
            ErrorCode::NotSelfContained,
            format!(
                "the prompt{which} {prompt:?} is too short to stand alone: the subagent sees none of this conversation. Write the whole subtask: the absolute paths, what to find or change, and what to report back. No subagent was started."
            ),
        ));
    }
    if let Some(phrase) = leans_on_context(prompt) {
        return Err(ToolError::new(
            ErrorCode::NotSelfContained,
            format!(
                "the prompt{which} leans on context the subagent does not have: \"{phrase}\". A subagent starts with a fresh context and sees none of this conversation. Rewrite the prompt so that it stands alone: name the files by absolute path, quote the facts, errors or code it needs, and say what to report back. No subagent was started."
            ),
        ));
    }
    let max_turns = one.max_turns.unwrap_or(max_turns_limit);
    if max_turns == 0 || max_turns > max_turns_limit {
        return Err(ToolError::new(
            ErrorCode::InvalidArguments,
            format!(
                "max_turns{which} is {max_turns}; it must be 1 to {max_turns_limit} (task.max_turns), or left out for {max_turns_limit}. No subagent was started."
            ),
        ));
    }
    Ok(TaskSpec {
        prompt: prompt.to_string(),
        description: one.description.trim().to_string(),
        profile: one.agent_type.unwrap_or(Profile::General),
        max_turns,
    })
}

/// The phrase of `prompt` that refers to the parent's conversation, if there is one.
pub fn leans_on_context(prompt: &str) -> Option<String> {
    // A constant pattern: the tests below fail if it ever stops compiling.
    static RE: OnceLock<Option<Regex>> = OnceLock::new();
    let re = RE.get_or_init(|| {
        let verbs = "discussed|mentioned|talked about|looked at|saw|found|read|opened|edited|changed|agreed on|agreed|decided";
        Regex::new(&format!(
            r"(?i)\b(?:(?:as|what|which|that)\s+(?:we|i)\s+(?:{verbs})|we\s+(?:just\s+|already\s+)?(?:{verbs})|(?:mentioned|discussed|shown|described|found)\s+(?:above|earlier|before|previously)|(?:the|that|this)\s+(?:same\s+)?(?:file|function|bug|error|issue|change|code|test|class|module)s?\s+(?:from\s+)?(?:above|earlier|before)|(?:our|the)\s+(?:previous|earlier|last)\s+(?:conversation|discussion|message|turn|step|result|output)|earlier\s+in\s+(?:this|the|our)\s+(?:conversation|session|chat)|(?:you|we)\s+already\s+(?:know|have\s+seen|saw|read))\b"
        ))
        .ok()
    });
    re.as_ref()?.find(prompt).map(|m| m.as_str().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts_that_lean_on_the_conversation_are_found() {
        for p in [
            "Fix the file we discussed",
            "Look at the bug from earlier and fix it",
            "Run the tests as I mentioned",
            "Check the function mentioned above for errors",
            "Summarise our previous conversation",
            "Use what we found in /src to write docs",
        ] {
            assert!(leans_on_context(p).is_some(), "{p}");
        }
    }

    #[test]
    fn self_contained_prompts_pass() {
        for p in [
            "Find where /work/app/src/config.rs parses the [model] table and report the function names with line numbers.",
            "Run `cargo test` in /work/app and report what you found: each failing test and its error.",
            "Read /ws/README.md and list the commands it documents above the Install section.",
        ] {
            assert_eq!(leans_on_context(p), None, "{p}");
        }
    }
}
