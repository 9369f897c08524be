//! The system prompt: who the model is, the turn protocol, the tools (their definitions exactly
//! as `abhed tool --list` prints them), and the workspace's own instructions.

use std::path::Path;

use crate::tools::Registry;
use crate::tools::task::Profile;

/// Project instruction files, in the order they are included.
pub const INSTRUCTION_FILES: [&str; 2] = ["ABHED.md", "AGENTS.md"];

/// The most characters of project instructions included; the rest is named, not sent.
pub const MAX_INSTRUCTION_CHARS: usize = 8_000;

/// The system prompt for a session in `workspace`.
pub fn system_prompt(registry: &Registry, workspace: &Path) -> String {
    let mut tools = String::new();
    for t in registry.iter() {
        let schema = serde_json::to_string(&t.input_schema()).unwrap_or_default();
        tools.push_str(&format!("\n## {}\n{}\narguments: {schema}\n", t.name(), t.description()));
    }
    let ws = workspace.display();
    let mut prompt = format!(
        "You are Abhed, a coding agent. You work on the files of the workspace {ws} on an offline machine.

# How to act
Reply with exactly one JSON object and nothing else. To call a tool, name it and give its arguments, e.g.
{{\"tool\": \"read\", \"arguments\": {{\"path\": \"{ws}/FILE\"}}}}
You then receive the tool's result and reply again. When the task is finished, give your final answer, in your own words, with facts from the tool results:
{{\"answer\": \"...\", \"status\": \"done\"}}
If the task cannot be done, say why in the answer, with \"status\": \"gave_up\".

# Rules
- Paths are absolute: start them with {ws}/.
- Read a file before you edit or overwrite it. edit needs old_string copied exactly from the file, with its indentation.
- A tool error says what failed and what to do instead: follow it, do not repeat the same call.
- Prefer grep and glob to find things; read only what you need.
- One tool call per reply.
- A task of one or two steps needs no plan: do it. When a task has several steps, keep a plan (plan) and a checklist (todo), and update the todo list as each step starts and ends: they are your memory of the task.

# Tools
{tools}"
    );
    for name in INSTRUCTION_FILES {
        let path = workspace.join(name);
        let Ok(text) = std::fs::read_to_string(&path) else { continue };
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        prompt.push_str(&format!("\n# Project instructions ({name})\n"));
        if text.chars().count() > MAX_INSTRUCTION_CHARS {
            let cut: String = text.chars().take(MAX_INSTRUCTION_CHARS).collect();
            prompt.push_str(&cut);
            prompt.push_str(&format!(
                "\n[{name} continues past {MAX_INSTRUCTION_CHARS} characters; read {} for the rest]\n",
                path.display()
            ));
        } else {
            prompt.push_str(text);
            prompt.push('\n');
        }
    }
    prompt
}

/// The system prompt of a subagent: the same rules and project instructions, its profile, and
/// what its final answer is for.
pub fn subagent_prompt(registry: &Registry, workspace: &Path, profile: Profile) -> String {
    let mut prompt = system_prompt(registry, workspace);
    prompt.push_str(&format!(
        "\n# You are a subagent\nAnother agent gave you the task below and sees only your final answer. {} Your final answer is your report: what you found or did, with absolute paths, line numbers and exact error messages, in at most about 1000 words.\n",
        profile.brief()
    ));
    prompt
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn includes_tools_and_project_instructions() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("AGENTS.md"), "Run `make check` before answering.\n").unwrap();
        let p = system_prompt(&Registry::native(), dir.path());
        assert!(p.contains("\n## read\n"), "{p}");
        assert!(p.contains("# Project instructions (AGENTS.md)\nRun `make check` before answering.\n"), "{p}");
        assert!(!p.contains("ABHED.md)"), "{p}");
    }

    #[test]
    fn long_instructions_are_cut_and_say_so() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ABHED.md"), "x".repeat(MAX_INSTRUCTION_CHARS + 10)).unwrap();
        let p = system_prompt(&Registry::native(), dir.path());
        assert!(p.contains("[ABHED.md continues past 8000 characters; read "), "{p}");
    }
}
