//! What the loop does so that a small model works instead of stopping early: which turns must
//! be a tool call, and which final answers are sent back once with a note. Each rule came from
//! the task suite's transcripts (docs/EVAL.md, "What the loop does for small models").

use std::collections::HashSet;

use super::dispatch::CallOutcome;
use crate::config::RunConfig;

/// The state of one run.
#[derive(Debug)]
pub struct Steer {
    act_after_error: u32,
    checks: bool,
    /// The next turn must be a tool call.
    must_act: bool,
    /// Calls in a row that failed or fell short.
    failed_in_row: u32,
    calls: u32,
    /// A call of the run may have changed something.
    changed: bool,
    /// A call of the run failed or fell short.
    fell_short: bool,
    sent_back_unchanged: bool,
    sent_back_give_up: bool,
    resample_repeats: u32,
    /// The calls (tool, arguments) made since the last one that may have changed something:
    /// made again, each would give the same result.
    unchanged_since: HashSet<(String, String)>,
}

impl Steer {
    /// `new_task`: the run starts on a task (not a resumed run's continuation). `top_level`: not
    /// a subagent, whose answer is its parent's to judge.
    pub fn new(config: &RunConfig, new_task: bool, top_level: bool) -> Steer {
        Steer {
            act_after_error: config.act_after_error,
            checks: config.check_answers && top_level,
            must_act: new_task && config.first_turn_acts,
            failed_in_row: 0,
            calls: 0,
            changed: false,
            fell_short: false,
            sent_back_unchanged: false,
            sent_back_give_up: false,
            resample_repeats: config.resample_repeats,
            unchanged_since: HashSet::new(),
        }
    }

    /// Only a tool call is allowed this turn (`run.first_turn_acts`, `run.act_after_error`).
    pub fn call_only(&self) -> bool {
        self.must_act
    }

    /// Whether a call would repeat one made since the last change (its result cannot differ).
    pub fn repeats(&self, tool: &str, arguments: &str) -> bool {
        self.unchanged_since.contains(&(tool.to_string(), super::history::normalize_args(arguments)))
    }

    /// How many times a turn whose call repeats is asked for again (`run.resample_repeats`).
    pub fn resample_tries(&self) -> u32 {
        self.resample_repeats
    }

    /// The run continues a session whose last call failed: the next turn must be a call.
    pub fn resume_after_error(&mut self) {
        self.failed_in_row = 1;
        self.fell_short = true;
        self.must_act = self.act_after_error > 1;
    }

    /// Note a call and its outcome.
    pub fn after_call(&mut self, tool: &str, arguments: &str, outcome: &CallOutcome) {
        if outcome.mutated() {
            self.unchanged_since.clear();
        } else {
            self.unchanged_since.insert((tool.to_string(), super::history::normalize_args(arguments)));
        }
        self.calls += 1;
        self.changed |= outcome.mutated();
        self.fell_short |= outcome.fell_short();
        self.failed_in_row = if outcome.fell_short() { self.failed_in_row + 1 } else { 0 };
        self.must_act = self.failed_in_row > 0 && self.failed_in_row < self.act_after_error;
    }

    /// The note to send a final answer back with, instead of ending the run (`run.check_answers`),
    /// or `None` when the answer stands. `changes_blocked`: plan mode, where "done" with nothing
    /// changed is what the operator asked for.
    pub fn send_back(
        &mut self,
        task: Option<&str>,
        answer: &str,
        gave_up: bool,
        changes_blocked: bool,
    ) -> Option<String> {
        if !self.checks {
            return None;
        }
        if gave_up {
            // Giving up after calls that all worked: nothing shows that the task cannot be done.
            if self.calls == 0 || self.fell_short || self.sent_back_give_up {
                return None;
            }
            self.sent_back_give_up = true;
            self.must_act = true;
            return Some(UNFOUNDED_GIVE_UP.to_string());
        }
        let asks = task.is_some_and(asks_for_change);
        if self.changed || self.sent_back_unchanged || changes_blocked || !(asks || claims_change(answer)) {
            return None;
        }
        self.sent_back_unchanged = true;
        // Told that nothing changed, both Qwen models gave up, or wrote the same file into
        // another answer; a task that asks for a change gets a call next. A question whose
        // answer merely claims a change may be answered again.
        self.must_act = asks;
        Some(if asks { UNCHANGED_ACT } else { UNCHANGED }.to_string())
    }
}

/// Small models report the change they meant to make. The next answer stands.
const UNCHANGED: &str = "[note] Your answer says the work is done, but no call in this task changed anything: nothing was written or edited, and no command was run. Text in your answer changes no file. If the task asks for a change, make it now with a tool call (edit, write or bash). If it only asked a question, give your answer again.";

/// The same, for a task that asks for a change: the next turn must be a call.
const UNCHANGED_ACT: &str = "[note] The task asks for a change, but no call in this task changed anything: nothing was written or edited, and no command was run. Text in your answer changes no file. Make the change now with a tool call: edit to change part of a file you have read, write for a whole file, bash to run a command.";

/// Small models give up after one successful read, quoting a tool's description. The next turn
/// must be a call.
const UNFOUNDED_GIVE_UP: &str = "[note] You gave up, but every call you made worked: nothing so far shows that the task cannot be done. Make the next call the task needs.";

/// Whether a task asks for a change: one of the verbs people use for one, as a word.
pub fn asks_for_change(task: &str) -> bool {
    // Not "make": "make sure", "make a list" ask for no change.
    const VERBS: &[&str] = &[
        "add",
        "bump",
        "change",
        "convert",
        "create",
        "delete",
        "drop",
        "edit",
        "fix",
        "implement",
        "insert",
        "move",
        "put",
        "refactor",
        "remove",
        "rename",
        "replace",
        "rewrite",
        "set",
        "update",
        "write",
    ];
    has_word(task, VERBS)
}

/// Whether an answer says a change was made.
pub fn claims_change(answer: &str) -> bool {
    const CLAIMS: &[&str] = &[
        "added",
        "changed",
        "corrected",
        "created",
        "deleted",
        "edited",
        "fixed",
        "modified",
        "moved",
        "removed",
        "renamed",
        "replaced",
        "rewrote",
        "updated",
        "wrote",
        "written",
    ];
    has_word(answer, CLAIMS)
}

fn has_word(text: &str, words: &[&str]) -> bool {
    text.split(|c: char| !c.is_ascii_alphabetic()).any(|w| words.iter().any(|v| w.eq_ignore_ascii_case(v)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn change_words_are_whole_words() {
        assert!(asks_for_change("Set the cache TTL in config/app.toml to 10 minutes."));
        assert!(asks_for_change("python3 main.py fails; fix it."));
        assert!(!asks_for_change("Which file defines the function normalize_sku? Give me its path."));
        assert!(!asks_for_change("Where is MAX_UPLOAD_RETRIES defined (see settings.py)?"));
        assert!(!asks_for_change("make a list"));
        assert!(claims_change("I Fixed the off-by-one."));
        assert!(!claims_change("It is defined in catalog/sku.py, line 4."));
        assert!(!claims_change("The prefixed name"));
    }
}
