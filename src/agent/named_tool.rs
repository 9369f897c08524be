//! The tool a task tells the agent to use ("Use the todo tool to …", "Use edit to change …",
//! "Run the script …"). Until a call of it works, a turn that must be a call is held to that
//! tool by the grammar (`Steer::only_tool`).
//!
//! Why: in the conformance probe of 2026-12-07 the 1.5B model, told "use the todo tool to mark
//! … done", wrote a file named `todo`; told "Run the script check.sh with sh", it read the script
//! instead; in both, the grammar let it pick any tool. An operator who names the tool has chosen
//! it, so the loop keeps the model to that choice until it has made that call once.

use std::sync::LazyLock;

use regex::Regex;

/// The tool names a task may name, each with the words that name it.
const NAMES: &[(&str, &str)] = &[
    ("read", "read"),
    ("write", "write"),
    ("edit", "edit"),
    ("glob", "glob"),
    ("grep", "grep"),
    ("bash", "bash"),
    ("task", r"task|sub-?agent"),
    ("plan", "plan"),
    ("todo", r"todo(?:\s+list)?"),
];

/// "use the todo tool", "use edit to", "using grep", "with the task tool", "with your todo
/// list", "use a subagent". A bare tool name must be followed by what ends the instruction
/// ("to", "with", punctuation, the end), so that "use plan B" or "use read access" name none.
static EXPLICIT: LazyLock<Vec<(&'static str, Regex)>> = LazyLock::new(|| {
    NAMES
        .iter()
        .filter_map(|(tool, words)| {
            let pattern = format!(
                r"(?i)\b(?:use|using|with|call)\s+(?:the\s+|your\s+|a\s+)?(?:{words})(?:\s+tool\b|\b(?:\s+(?:to|with|for|on|and|in)\b|\s*[(),.:;]|\s*$))"
            );
            Regex::new(&pattern).ok().map(|r| (*tool, r))
        })
        .collect()
});

/// A task whose first word (after "Please") is "Run" or "Execute" asks for a command first.
static RUN_FIRST: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?i)^\s*(?:please\s*,?\s+)?(?:run|execute)\s+\S").ok());

/// The tool the task names first, if it is offered (`offered`).
pub fn named_tool(task: &str, offered: &[&'static str]) -> Option<&'static str> {
    let first = EXPLICIT
        .iter()
        .filter_map(|(tool, re)| re.find(task).map(|m| (m.start(), *tool)))
        .min_by_key(|(start, _)| *start)
        .map(|(_, tool)| tool)
        .or_else(|| RUN_FIRST.as_ref().is_some_and(|r| r.is_match(task)).then_some("bash"))?;
    offered.iter().copied().find(|t| *t == first)
}

#[cfg(test)]
mod tests {
    use super::named_tool;

    const ALL: &[&str] = &["read", "write", "edit", "glob", "grep", "bash", "task", "plan", "todo"];

    #[test]
    fn an_instruction_that_names_a_tool() {
        let cases = [
            ("Use the todo tool to write a todo list of three items.", Some("todo")),
            (
                "The first todo item is finished and you start the second: use the todo tool to mark \"run the tests\" done",
                Some("todo"),
            ),
            ("You have read /w/app.py. Use edit to change the line DEBUG = True to DEBUG = False.", Some("edit")),
            ("Use the task tool with agent_type \"explore\" to have a subagent list the test files.", Some("task")),
            ("Use a subagent to find every TODO comment in the src/ tree. Then write them to TODO.md", Some("task")),
            ("Make these changes, and keep track of the steps with your todo list: 1. …", Some("todo")),
            ("Find where MAX is set (use grep).", Some("grep")),
            ("Using glob, list the Go files.", Some("glob")),
            ("Run the script /w/check.sh with sh and tell me its last line of output.", Some("bash")),
            ("Please run `cargo test` and fix what fails.", Some("bash")),
            // The first one named is the first call to make.
            ("Use grep to find the handler, then use edit to rename it.", Some("grep")),
        ];
        for (task, want) in cases {
            assert_eq!(named_tool(task, ALL), want, "{task}");
        }
    }

    #[test]
    fn prose_that_names_no_tool() {
        let cases = [
            "You have read /w/greet.js. Rename the function hello to greet where it is defined.",
            "Read /w/Cargo.toml and tell me the name of the package.",
            "We use plan B when the build breaks: document it in README.md.",
            "Write a Python script that reads data.csv, then run it.",
            "Fix the test so that it runs with the new API.",
            "The task is to edit the config so DEBUG is off.",
            "Use read access checks in auth.py: add a function can_read(user).",
        ];
        for task in cases {
            assert_eq!(named_tool(task, ALL), None, "{task}");
        }
    }

    #[test]
    fn a_tool_that_is_not_offered_is_not_asked_for() {
        // An explore subagent has no bash, write or edit.
        assert_eq!(named_tool("Run the tests and report what fails.", &["read", "glob", "grep"]), None);
        assert_eq!(named_tool("Use grep to find it.", &["read", "glob", "grep"]), Some("grep"));
    }
}
