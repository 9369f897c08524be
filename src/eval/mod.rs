//! The task suite (`abhed eval`, docs/EVAL.md): real coding tasks, run to their end by the real
//! loop on a model, with the real tools and bash in the real microVM, then checked.
//!
//! Each task is `eval/tasks/<slug>/` with `task.toml`, an optional `before/` tree and a
//! reference `solution.sh`. A run is graded on how it ended, its final answer, the tools it used
//! and a `check` script run in the microVM afterwards ([`Runner`]). [`report`] sums the runs.

pub mod peer;
pub mod report;
mod runner;

use anyhow::{Context as _, Result, bail};
use serde::{Deserialize, Serialize};

use crate::conformance::suite::{Item, Suite};

pub use runner::{Driver, Limits, Runner, lay_out, script};

/// `task.toml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskSpec {
    pub description: String,
    /// What the operator types, word for word.
    pub task: String,
    #[serde(default)]
    pub tags: Vec<String>,
    #[serde(default)]
    pub expect: Expect,
    /// Regexes the final answer must each match (case-insensitive).
    #[serde(default)]
    pub answer: Vec<String>,
    /// Regexes the final answer must not match (case-insensitive): the files that only use
    /// what a locate task asks for, so that an answer listing every file a search found fails.
    #[serde(default)]
    pub answer_not: Vec<String>,
    /// The reference solution's final answer (the suite's own test checks it against `answer`).
    pub solution_answer: String,
    /// Tools the run must have called successfully at least once.
    #[serde(default)]
    pub uses: Vec<String>,
    /// Shell run in the microVM in the workspace after the run: exit 0 is a pass.
    #[serde(default)]
    pub check: String,
    /// Shell run in the microVM in the workspace before the run.
    #[serde(default)]
    pub setup: String,
    pub max_turns: Option<u32>,
    pub max_wall_s: Option<u64>,
}

/// How a run must end.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Expect {
    /// The model finished with its final answer.
    #[default]
    Done,
    /// The model gave up: the task cannot be done here.
    GaveUp,
}

impl Expect {
    pub fn as_str(self) -> &'static str {
        match self {
            Expect::Done => "done",
            Expect::GaveUp => "gave_up",
        }
    }
}

pub type Task = Item<TaskSpec>;

/// The suite's part that holds the tasks.
const TASKS: &str = "tasks";

/// Every task of the suite, sorted by name, with its answer regexes checked.
pub fn tasks(suite: &Suite) -> Result<Vec<Task>> {
    let tasks: Vec<Task> = suite.flat_items(TASKS, "task.toml")?;
    for t in &tasks {
        for a in t.spec.answer.iter().chain(&t.spec.answer_not) {
            answer_regex(a).with_context(|| format!("{}: bad `answer` regex", t.name))?;
        }
        if t.spec.check.trim().is_empty() && t.spec.answer.is_empty() && t.spec.uses.is_empty() {
            bail!("{}: nothing is checked (no check, answer or uses)", t.name);
        }
        if suite.text(&format!("{}/solution.sh", t.prefix)).is_none() {
            bail!("{}: no solution.sh", t.name);
        }
    }
    Ok(tasks)
}

/// The reference solution's script.
pub fn solution<'s>(suite: &'s Suite, task: &Task) -> Option<&'s str> {
    suite.text(&format!("{}/solution.sh", task.prefix))
}

/// An `answer` regex as it is matched: case-insensitive.
pub fn answer_regex(re: &str) -> Result<regex::Regex, regex::Error> {
    regex::RegexBuilder::new(re).case_insensitive(true).build()
}

/// Why `answer` fails the task's answer regexes: the first `answer` regex it does not match,
/// or the first `answer_not` regex it does.
pub fn answer_miss(task: &TaskSpec, answer: &str) -> Option<String> {
    let matches = |re: &str| answer_regex(re).is_ok_and(|r| r.is_match(answer));
    if let Some(re) = task.answer.iter().find(|re| !matches(re)) {
        return Some(format!("the final answer does not match /{re}/"));
    }
    task.answer_not.iter().find(|re| matches(re)).map(|re| format!("the final answer names /{re}/, which it must not"))
}
