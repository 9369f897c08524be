//! What the loop does so that a small model works instead of stopping early: which turns must
//! be a tool call, and which final answers are sent back once with a note. Each rule came from
//! the task suite's transcripts (docs/EVAL.md, "What the loop does for small models").

use std::collections::HashSet;

use super::answer_diff::{self, Seen};
use super::dispatch::CallOutcome;
use super::failing::Failing;
use super::places::Places;
use crate::config::RunConfig;
use crate::model::Turn;

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
    sent_back_unchecked: bool,
    sent_back_unrun: bool,
    sent_back_call_text: bool,
    /// Answers sent back with the edits their text of a file means.
    sent_back_diff: u32,
    /// Answers whose text of a file was made into an edit (`answer_edit`).
    applied_answers: u32,
    /// A bash call was made (whatever it ran, however it ended).
    ran_bash: bool,
    /// An edit or write held back on a task that asks a question.
    held_change: bool,
    /// bash is offered: a command the task names can be run.
    can_run: bool,
    /// The tools offered, as a call written as text may name them.
    tools: Vec<&'static str>,
    /// The last call that may have changed something was bash (a check, or the change itself).
    ran_since_change: bool,
    resample_repeats: u32,
    /// The calls (tool, arguments) made, and the answers given, since the last call that may
    /// have changed something: made again, each would meet the same result.
    unchanged_since: HashSet<(String, String)>,
    /// What read showed of each file, the last read of each.
    seen: Vec<Seen>,
    /// Paths a call of the run was told do not exist.
    missing: HashSet<String>,
    /// `run.act_until_change`: answers that may be set aside for a call, and how many were.
    act_until_change: u32,
    replaced: u32,
    /// A call of the run wrote a file, or ran a command the task does not name.
    wrote: bool,
    /// What Abhed itself said to the model this run (notes, the first line of each tool error
    /// and of the results of write, edit, plan and todo): an answer made of these words
    /// echoes them.
    said: Vec<String>,
    sent_back_echo: bool,
    /// The last run of a command the task names, when it failed and nothing changed since.
    failing: Option<Failing>,
    sent_back_failing: u32,
    sent_back_how_to: bool,
    sent_back_no_path: bool,
    /// Where the run's greps found things, for a question about where something is.
    places: Places,
    /// A call of the tool the task names worked (`only_tool`).
    named_tool_worked: bool,
}

/// The key under which answers are kept among `unchanged_since`'s calls (no tool has it).
const ANSWER: &str = "";

impl Steer {
    /// `new_task`: the run starts on a task (not a resumed run's continuation). `top_level`: not
    /// a subagent, whose answer is its parent's to judge.
    /// `tools`: the names of the tools offered.
    pub fn new(config: &RunConfig, new_task: bool, top_level: bool, tools: Vec<&'static str>) -> Steer {
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
            sent_back_unchecked: false,
            sent_back_unrun: false,
            sent_back_call_text: false,
            sent_back_diff: 0,
            applied_answers: 0,
            ran_bash: false,
            held_change: false,
            can_run: tools.contains(&"bash"),
            tools,
            ran_since_change: false,
            resample_repeats: config.resample_repeats,
            unchanged_since: HashSet::new(),
            seen: Vec::new(),
            missing: HashSet::new(),
            act_until_change: config.act_until_change,
            replaced: 0,
            wrote: false,
            said: Vec::new(),
            sent_back_echo: false,
            failing: None,
            sent_back_failing: 0,
            sent_back_how_to: false,
            sent_back_no_path: false,
            places: Places::default(),
            named_tool_worked: false,
        }
    }

    /// Only a tool call is allowed this turn (`run.first_turn_acts`, `run.act_after_error`).
    pub fn call_only(&self) -> bool {
        self.must_act
    }

    /// The one tool a turn that must be a call may call: the tool the task tells the agent to
    /// use (`named_tool`), until a call of it has worked.
    pub fn only_tool(&self, task: Option<&str>) -> Option<&'static str> {
        if self.named_tool_worked {
            return None;
        }
        task.and_then(|t| super::named_tool::named_tool(t, &self.tools))
    }

    /// Whether a turn repeats a call made, or an answer given, since the last change: the call's
    /// result cannot differ, and the answer was sent back or would have ended the run.
    pub fn repeats(&self, turn: &Turn) -> bool {
        self.unchanged_since.contains(&key(turn))
    }

    /// How many times a turn that repeats is asked for again (`run.resample_repeats`).
    pub fn resample_tries(&self) -> u32 {
        self.resample_repeats
    }

    /// The run continues a session in which a call may have changed something (or whose
    /// result was lost): "done" is not "nothing changed".
    pub fn continues_after_change(&mut self) {
        self.changed = true;
    }

    /// The run continues a session whose last call failed: the next turn must be a call.
    pub fn resume_after_error(&mut self) {
        self.failed_in_row = 1;
        self.fell_short = true;
        self.must_act = self.act_after_error > 1;
    }

    /// Note a call and its outcome, on `task` (the run's).
    pub fn after_call(&mut self, task: Option<&str>, tool: &str, arguments: &str, outcome: &CallOutcome) {
        let command = (tool == "bash").then(|| arg_of(arguments, "command")).flatten();
        // The command the task names, if this call ran it: a check, not the change asked for.
        let check = command
            .as_deref()
            .and_then(|c| task.map(named_commands).unwrap_or_default().into_iter().find(|n| c.contains(n.as_str())));
        if outcome.mutated() {
            let looks_only = check.is_some() || command.as_deref().is_some_and(looks_read_only);
            self.wrote |= !looks_only;
        }
        match (&check, &outcome.result) {
            (Some(named), Ok(out)) if out.fell_short => self.failing = Failing::from_output(named, &out.text),
            (Some(_), _) => self.failing = None,
            // A look (`cat main.py`) changes nothing the check depends on.
            (None, _) if outcome.mutated() && !command.as_deref().is_some_and(looks_read_only) => self.failing = None,
            (None, _) => {}
        }
        match &outcome.result {
            Err(e) => self.said.push(e.message.lines().next().unwrap_or_default().to_string()),
            // Their first line is what the tool says it did; the rest is the model's own plan
            // or list, or the file's lines. "The file was overwritten with the read's header
            // line and every line with read's line number ..." was the 1.5B model's give-up
            // after write's note said so; "Plan saved (version 1)." an answer.
            Ok(out) if matches!(tool, "plan" | "todo" | "write" | "edit") => {
                self.said.push(out.text.lines().next().unwrap_or_default().to_string());
            }
            Ok(_) => {}
        }
        if outcome.mutated() {
            self.unchanged_since.clear();
            self.ran_since_change = tool == "bash";
        } else {
            self.unchanged_since.insert((tool.to_string(), super::history::normalize_args(arguments)));
        }
        if tool == "grep"
            && let Some(pattern) = arg_of(arguments, "pattern")
        {
            match &outcome.result {
                Ok(out) => self.places.note_grep(&pattern, &out.text),
                Err(e) => self.places.note_grep(&pattern, &e.message),
            }
        }
        if tool == "read"
            && let Ok(out) = &outcome.result
            && let Some(file) = &out.file
            && let Some(seen) = Seen::from_read(&file.path, &out.text)
        {
            self.seen.retain(|s| s.path != seen.path);
            self.seen.push(seen);
        }
        if matches!(tool, "edit" | "write")
            && outcome.ok()
            && let Ok(args) = serde_json::from_str::<serde_json::Value>(arguments)
            && let Some(path) = args.get("path").and_then(serde_json::Value::as_str)
        {
            match self.seen.iter_mut().find(|s| s.path == path) {
                Some(seen) => seen.follow(tool, &args),
                None if tool == "write" => {
                    let mut seen = Seen { path: path.to_string(), first: 1, lines: Vec::new() };
                    seen.follow(tool, &args);
                    self.seen.push(seen);
                }
                None => {}
            }
        }
        if let Err(e) = &outcome.result
            && e.code == crate::tools::ErrorCode::NotFound
            && let Some(path) = path_of(arguments)
        {
            self.missing.insert(path);
        }
        self.named_tool_worked |= outcome.ok() && self.only_tool(task) == Some(tool);
        self.calls += 1;
        self.ran_bash |= tool == "bash";
        self.changed |= outcome.mutated();
        self.fell_short |= outcome.fell_short();
        self.failed_in_row = if outcome.fell_short() { self.failed_in_row + 1 } else { 0 };
        self.must_act = self.failed_in_row > 0 && self.failed_in_row < self.act_after_error;
    }

    /// The note to send a call back with, unrun, or `None` to run it. Held back once each:
    /// - an edit or write on a task that asks a question (a `?`, and no word asking for a
    ///   change): in three of the four locate tasks of the 2026-12-06 run, the 1.5B model grepped
    ///   a file it guessed, was told that the file does not exist, and created it, with code it
    ///   made up;
    /// - a call that would create a file (`creates`) that a call of the run was told does not
    ///   exist, on a task that asks for no change: told that `src/utils.py` does not exist and
    ///   that `src/util.py` does, the same model wrote a `src/utils.py` of its own, in 4 of 4
    ///   conformance runs of "read it and list its functions". (Not any new file: "The operator
    ///   accepted your plan. Carry it out now" names no change, and its writes must run.)
    ///
    /// Before the note, the run asks for the turn again (`holds`): the 1.5B model gave the
    /// note's own words as its final answer in three of four questions where it was sent.
    pub fn hold_call(&mut self, task: Option<&str>, tool: &str, arguments: &str, creates: bool) -> Option<String> {
        let question = self.holds(task, tool, arguments, creates)?;
        let path = path_of(arguments).unwrap_or_default();
        self.held_change = true;
        self.must_act = true;
        let note = if question {
            format!(
                "[note] The task asks a question, not for a change, so this {tool} of {path} was not run and nothing changed. Answer from what the workspace holds: to find where something is, grep for it with no path (the whole workspace), then read the file it names."
            )
        } else {
            format!(
                "[note] {path} does not exist, and the task does not ask for a new file, so this {tool} was not run and nothing changed. Work with the files that exist: where a tool said a path does not exist and named one that does, use that one; else find it with glob or grep. (If the task does need this new file, make the call again.)"
            )
        };
        self.said.push(note.clone());
        Some(note)
    }

    /// Whether `hold_call` would hold this call back: `Some(true)` on a question.
    pub fn holds(&self, task: Option<&str>, tool: &str, arguments: &str, creates: bool) -> Option<bool> {
        let no_change = task.is_some_and(|t| !asks_for_change(t));
        let question = no_change && task.is_some_and(|t| t.contains('?'));
        if !self.checks || self.held_change || !no_change || !matches!(tool, "edit" | "write") {
            return None;
        }
        let missing_file = creates && path_of(arguments).is_some_and(|p| self.missing.contains(&p));
        (question || missing_file).then_some(question)
    }

    /// Whether an answer only repeats what Abhed said, and has not been sent back for it yet:
    /// the run asks for the turn again first, then sends it back with the task (`judge`).
    pub fn echoes(&self, answer: &str) -> bool {
        self.checks && !self.sent_back_echo && echoes(answer, &self.said)
    }

    /// The edit that an answer's new text of a file means, as edit's arguments, to be made for
    /// the model instead of ending the run: on a task that asks for a change, before any call
    /// of the run changed anything, an answer that holds a file read in the run with a few
    /// lines changed (`answer_diff`). "Here's the updated Dockerfile:" with the right text was
    /// the 1.5B model's answer in 6 of the suite's first 16 tasks and in 3 of 16 conformance
    /// recoveries (2026-12-06); sent back with the edits listed, it made them in 2 of 6. A
    /// second answer may be made into an edit when the first edit failed.
    pub fn answer_edit(
        &mut self,
        task: Option<&str>,
        answer: &str,
        gave_up: bool,
        changes_blocked: bool,
    ) -> Option<(String, String)> {
        let asks = task.is_some_and(asks_for_change);
        if !self.checks || gave_up || changes_blocked || !asks || self.changed || self.applied_answers >= MAX_APPLIED {
            return None;
        }
        let (file, changes) = answer_diff::rewritten(answer, &self.seen, task.is_some_and(asks_to_delete))?;
        self.applied_answers += 1;
        let pair = |c: &answer_diff::Change| serde_json::json!({"old_string": c.old, "new_string": c.new});
        let args = match changes.as_slice() {
            [one] => serde_json::json!({"path": file.path, "old_string": one.old, "new_string": one.new}),
            many => serde_json::json!({"path": file.path, "edits": many.iter().map(pair).collect::<Vec<_>>()}),
        };
        Some((file.path.clone(), args.to_string()))
    }

    /// Whether a final answer is to be set aside and the turn asked for again as a tool call
    /// (`run.act_until_change`): on a task that asks for a change, before any call of the run
    /// wrote a file or ran a command the task does not name, at most that many times a run.
    /// In the 2026-12-06 suite run the 1.5B model ended 13 of 41 tasks giving up after reads
    /// that worked ("not readable due to a permission issue") and answered with the change it
    /// meant in several more; a note sending the answer back was followed by the same answer,
    /// word for word (docs/EVAL.md). Asked for a call instead, it has no answer to repeat.
    pub fn answer_becomes_call(&mut self, task: Option<&str>, changes_blocked: bool) -> bool {
        let asks = task.is_some_and(asks_for_change);
        if !self.checks || changes_blocked || !asks || self.wrote || self.replaced >= self.act_until_change {
            return false;
        }
        self.replaced += 1;
        true
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
        let note = self.judge(task, answer, gave_up, changes_blocked)?;
        // The lines the where-note quotes are the workspace's, and the answer may well be them.
        let own = if note.starts_with(FOUND_HERE) { note.lines().next().unwrap_or_default() } else { &note };
        self.said.push(own.to_string());
        // An answer sent back with "make a call" is not to be given again before something
        // changes; one that may stand (a question's answer) may.
        if self.must_act {
            self.unchanged_since.insert((ANSWER.to_string(), answer.trim().to_string()));
        }
        Some(note)
    }

    fn judge(&mut self, task: Option<&str>, answer: &str, gave_up: bool, changes_blocked: bool) -> Option<String> {
        if !self.checks {
            return None;
        }
        let named = || task.map(named_commands).unwrap_or_default();
        if let Some(task) = task
            && self.echoes(answer)
        {
            // "To find where something is, grep for it with no path (the whole workspace), then
            // read the file it names.": the 1.5B model's final answer to three of the suite's
            // four questions about where something is, after a note that said it; "Plan saved
            // (version 1).", "The prompt is a path, not a task." (2026-12-06). The task, quoted,
            // is the last thing it reads.
            self.sent_back_echo = true;
            self.must_act = false;
            return Some(format!(
                "[note] Your answer repeats what a tool or note said; it does not answer the task. The task: {}",
                task.trim()
            ));
        }
        if let Some(failing) = &self.failing
            && task.is_some_and(asks_for_change)
            && !changes_blocked
            && self.sent_back_failing < if gave_up { 1 } else { MAX_FAILING_NOTES }
        {
            // The check the task names failed when last run, and nothing changed since: the
            // output the model just read says the work is not done (`failing`).
            self.sent_back_failing += 1;
            self.sent_back_give_up |= gave_up;
            self.must_act = true;
            return Some(failing.note(gave_up));
        }
        if let Some(task) = task
            && !self.sent_back_no_path
            && asks_where(task)
            && !names_a_path(answer)
        {
            // "Where is MAX_UPLOAD_RETRIES defined, and what is its value?" was answered "The
            // value of MAX_UPLOAD_RETRIES is 12.", with the grep line that named the file just
            // above it, and again after a note that asked for the file (2026-12-07): the note
            // quotes the lines (`places`). A give-up is sent back only with lines to quote.
            // The last line is parroted ("..., and the task asks about the value of X", the value
            // left out); "Give your answer again, with the file's path and line in it." was
            // answered with the first answer again, word for word (one run each, 2026-12-07).
            let quoted = self.places.of(task);
            if !quoted.is_empty() {
                self.sent_back_no_path = true;
                return Some(format!(
                    "{FOUND_HERE}\n{}\nAnswer again: the file's path and line, and what the task asks about it.",
                    quoted.join("\n")
                ));
            }
            if !gave_up {
                self.sent_back_no_path = true;
                return Some(NO_PATH.to_string());
            }
        }
        if gave_up && self.can_run && !self.ran_bash && !self.sent_back_unrun {
            // "python3 main.py fails; fix it": the 1.5B model read main.py and gave up, twice,
            // saying the file could not be read; the command's error would have named the fault.
            let commands = named();
            if !commands.is_empty() {
                // It stands for the general give-up note too: one send-back per give-up.
                self.sent_back_unrun = true;
                self.sent_back_give_up = true;
                self.must_act = true;
                return Some(format!(
                    "[note] You gave up without running {}, which the task names. Run it with bash now: its output shows what fails and where.",
                    list(&commands)
                ));
            }
        }
        if gave_up {
            // Giving up after a change, without running the check since: "node report.js
            // fails" was given its error, edited once, and given up on (the suite, 2026-12-07).
            if let Some(note) = self.unchecked(&named()) {
                return Some(note);
            }
            // Giving up after calls that all worked: nothing shows that the task cannot be done.
            if self.calls == 0 || self.fell_short || self.sent_back_give_up {
                return None;
            }
            self.sent_back_give_up = true;
            self.must_act = true;
            return Some(UNFOUNDED_GIVE_UP.to_string());
        }
        if !self.sent_back_call_text
            && let Some((name, call)) = call_as_text(answer, &self.tools)
        {
            // "To add the key, you can use the edit function. Here's the command: ```json
            // {"name": "edit", ...}```": the 1.5B model wrote its call into its answer in 4 of
            // the first 17 tasks.
            self.sent_back_call_text = true;
            self.must_act = true;
            return Some(format!(
                "[note] Your answer holds a call to {name} written as text, so it was not run and nothing changed. Make the call itself now, not inside an answer: {call}"
            ));
        }
        let asks = task.is_some_and(asks_for_change);
        if asks
            && self.changed
            && self.sent_back_diff < MAX_DIFF_NOTES
            && let Some((file, changes)) = answer_diff::rewritten(answer, &self.seen, task.is_some_and(asks_to_delete))
        {
            // The 1.5B model made the first of two edits the note listed, then gave the same
            // answer again.
            self.sent_back_diff += 1;
            self.must_act = true;
            return Some(format!(
                "[note] Your answer holds a text of {path} that still differs from the file as your calls left it. Where it differs, as edit's arguments:\n{}\nMake these changes now with edit on {path}, one call each; or, if the file is as it should be, answer without its text.",
                answer_diff::render(&changes),
                path = file.path,
            ));
        }
        if let Some(note) = self.unchecked(&named()) {
            return Some(note);
        }
        if asks
            && self.changed
            && !changes_blocked
            && !self.sent_back_how_to
            && tells_how(answer)
            && !answer_diff::restates(answer, &self.seen)
        {
            // "To rename the function ..., replace calc_total with compute_order_total in the
            // following files: invoice.py, main.py, orders.py": 8 of the 42 runs of the
            // 2026-12-07 suite ended on an answer telling the operator how to do the rest, after
            // a first change; 7 of them failed. (One whose text of the file is the file as the
            // calls left it describes what was done, and stands.)
            self.sent_back_how_to = true;
            self.must_act = true;
            return Some(HOW_TO.to_string());
        }
        if self.changed || self.sent_back_unchanged || changes_blocked || !(asks || claims_change(answer)) {
            return None;
        }
        self.sent_back_unchanged = true;
        // Told that nothing changed, both Qwen models gave up, or wrote the same file into
        // another answer; a task that asks for a change gets a call next. A question whose
        // answer merely claims a change may be answered again.
        self.must_act = asks;
        if asks
            && let Some((file, changes)) = answer_diff::rewritten(answer, &self.seen, task.is_some_and(asks_to_delete))
        {
            self.sent_back_diff += 1;
            return Some(format!(
                "[note] The task asks for a change, but no call in this task changed anything. Your answer holds a new text of {path}, and text in an answer changes no file. Where it differs from what read showed, as edit's arguments:\n{}\nMake these changes now with edit on {path}, one call each.",
                answer_diff::render(&changes),
                path = file.path,
            ));
        }
        Some(if asks { UNCHANGED_ACT } else { UNCHANGED }.to_string())
    }

    /// The note for an answer after a change when the command the task names has not run
    /// since (once a run): the 1.5B model edited one of the files a rename touches and answered
    /// "done"; the command would have shown the rest.
    fn unchecked(&mut self, commands: &[String]) -> Option<String> {
        if !self.changed || self.ran_since_change || self.sent_back_unchecked || !self.can_run || commands.is_empty() {
            return None;
        }
        self.sent_back_unchecked = true;
        self.must_act = true;
        Some(format!(
            "[note] You changed files, but have not run {} since, which the task names. Run it with bash now to check your change; then fix what it shows, or answer if it works.",
            list(commands)
        ))
    }
}

/// Small models report the change they meant to make. The next answer stands.
const UNCHANGED: &str = "[note] Your answer says the work is done, but no call in this task changed anything: nothing was written or edited, and no command was run. Text in your answer changes no file. If the task asks for a change, make it now with a tool call (edit, write or bash). If it only asked a question, give your answer again.";

/// The same, for a task that asks for a change: the next turn must be a call.
const UNCHANGED_ACT: &str = "[note] The task asks for a change, but no call in this task changed anything: nothing was written or edited, and no command was run. Text in your answer changes no file. Make the change now with a tool call: edit to change part of a file you have read, write for a whole file, bash to run a command.";

/// Small models give up after one successful read, quoting a tool's description. The next turn
/// must be a call.
const UNFOUNDED_GIVE_UP: &str = "[note] You gave up, but every call you made worked: nothing so far shows that the task cannot be done. Make the next call the task needs.";

/// An answer that tells the operator how to do the task, after a change. The next turn must
/// be a call.
const HOW_TO: &str = "[note] Your answer tells someone how to do the task, but nobody else will do it: the changes are yours to make, with tool calls. Make the call for the first step of it that is not done yet. If every step is done already, answer again with what you changed.";

/// The same, when the run's searches showed where: the lines follow. It may stand next.
const FOUND_HERE: &str =
    "[note] The task asks where something is, and your answer names no file. The run's searches found it here:";

/// An answer to a question about where something is that names no file. It may stand next.
const NO_PATH: &str = "[note] The task asks where something is, and your answer names no file. Answer again with the file's path (and the line, if you know it), as the tool results above show it.";

/// The most answers sent back because the check the task names still fails (`failing`); a
/// give-up is sent back once.
const MAX_FAILING_NOTES: u32 = 2;

/// The most answers made into edits in one run.
const MAX_APPLIED: u32 = 2;

/// The most answers sent back with the edits they mean: one when nothing changed, and
/// one more after the model made some of them.
const MAX_DIFF_NOTES: u32 = 2;

/// A call to one of `tools` written in a code block of an answer (`{"name": ..., "arguments":
/// {...}}`, or `"tool"` for the name), as its name and compact JSON.
/// Whether a bash command only looks (`cat`, `ls`, `grep` ... with no redirection, no
/// `-delete`/`-exec`): a look is not the change a task asks for.
fn looks_read_only(command: &str) -> bool {
    const LOOKS: &[&str] =
        &["cat", "ls", "head", "tail", "grep", "rg", "find", "wc", "file", "stat", "pwd", "tree", "diff", "nl"];
    let first = command.split_whitespace().next().unwrap_or_default();
    LOOKS.contains(&first) && !command.contains('>') && !command.contains("-delete") && !command.contains("-exec")
}

/// Whether `answer` is made of the words of one thing Abhed said (`said`): at least four
/// words, every one of them in it. A copied note, not an answer.
fn echoes(answer: &str, said: &[String]) -> bool {
    let words = |text: &str| -> Vec<String> {
        text.split(|c: char| !c.is_alphanumeric() && c != '_')
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect()
    };
    let answer = words(answer);
    if answer.len() < 4 || answer.len() > 40 {
        return false;
    }
    said.iter().any(|s| {
        let s: HashSet<String> = words(s).into_iter().collect();
        answer.iter().all(|w| s.contains(w))
    })
}

fn call_as_text(answer: &str, tools: &[&str]) -> Option<(String, String)> {
    answer_diff::code_blocks(answer).iter().find_map(|block| {
        let v: serde_json::Value = serde_json::from_str(&block.join("\n")).ok()?;
        let name = v.get("name").or_else(|| v.get("tool"))?.as_str()?;
        let args = v.get("arguments").filter(|a| a.is_object())?;
        // A call whose text is left out (`"content": "[...]"`) is not one to make: sent back
        // as "make the call itself now", it replaced a file with `[...]` (config-yaml-value,
        // 2026-12-07).
        if args.as_object()?.values().any(|a| a.as_str().is_some_and(crate::tools::write::is_placeholder)) {
            return None;
        }
        tools
            .contains(&name)
            .then(|| (name.to_string(), serde_json::json!({"name": name, "arguments": args}).to_string()))
    })
}

/// Commands as a note names them: `a` and `b`.
fn list(commands: &[String]) -> String {
    commands.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(" and ")
}

/// A turn's key among `unchanged_since`.
fn key(turn: &Turn) -> (String, String) {
    match turn {
        Turn::Call(c) => (c.name.clone(), super::history::normalize_args(&c.arguments)),
        Turn::Answer { text, .. } => (ANSWER.to_string(), text.trim().to_string()),
    }
}

/// The commands a task names as its check: "python3 main.py fails", "node test.js is failing",
/// "`gcc -Wall -o stats stats.c` fails", "python3 main.py and python3 test_pricing.py must still
/// work". A command starts with a program people run checks with and ends at the first word that
/// is prose, or at punctuation that ends a clause.
pub fn named_commands(task: &str) -> Vec<String> {
    const PROGRAMS: &[&str] = &[
        "bash", "cargo", "deno", "gcc", "g++", "go", "make", "node", "npm", "npx", "perl", "pytest", "python",
        "python3", "ruby", "sh", "yarn",
    ];
    // Words that end a command: what follows it in a sentence.
    const PROSE: &[&str] = &[
        "and", "as", "but", "does", "fail", "fails", "failed", "failing", "gives", "is", "must", "now", "prints",
        "returns", "runs", "should", "so", "still", "stops", "then", "to", "when", "with", "works",
    ];
    // Programs run by a subcommand, and the subcommands that check.
    const SUBCOMMANDS: &[(&str, &str)] = &[
        ("cargo", "build"),
        ("cargo", "check"),
        ("cargo", "run"),
        ("cargo", "test"),
        ("go", "build"),
        ("go", "run"),
        ("go", "test"),
        ("go", "vet"),
        ("make", "check"),
        ("make", "test"),
        ("npm", "run"),
        ("npm", "test"),
        ("yarn", "test"),
    ];
    let mut found: Vec<String> = Vec::new();
    for quoted in task.split('`').skip(1).step_by(2) {
        if quoted.split_whitespace().next().is_some_and(|w| PROGRAMS.contains(&w)) {
            found.push(quoted.trim().to_string());
        }
    }
    let words: Vec<&str> = task.split_whitespace().collect();
    let mut i = 0;
    while i < words.len() {
        if !PROGRAMS.contains(&words[i]) {
            i += 1;
            continue;
        }
        let program = words[i];
        let mut command = vec![program];
        i += 1;
        // "a bash script", "make sure": the program must be followed by what it runs.
        let next = words.get(i).map_or("", |w| w.trim_end_matches([';', ',', ':', '.', ')']));
        let runs = if SUBCOMMANDS.iter().any(|(p, _)| *p == program) {
            SUBCOMMANDS.iter().any(|(p, sub)| *p == program && *sub == next)
        } else {
            next.contains(['.', '/']) || next.starts_with('-')
        };
        if !runs {
            if program == "pytest" {
                found.push(program.to_string());
            }
            continue;
        }
        while i < words.len() {
            let word = words[i];
            let bare = word.trim_end_matches([';', ',', ':', '.', ')']);
            // A plain word is an argument only after an option or `run` ("-m unittest",
            // "npm run lint"); else it is the sentence going on ("cargo test too").
            let last = command.last().copied().unwrap_or("");
            let plain = bare.chars().all(|c| c.is_ascii_lowercase());
            let argument = !plain || (command.len() > 1 && (last.starts_with('-') || last == "run"));
            if PROSE.contains(&bare) || (command.len() > 1 && !argument) {
                break;
            }
            // "main.py." ends the sentence; "./stats" and "test.js" do not end with a dot.
            if bare.len() < word.len() || word.contains('`') {
                if !bare.is_empty() && !bare.contains('`') {
                    command.push(bare);
                }
                break;
            }
            command.push(word);
            i += 1;
        }
        let command = command.join(" ");
        if !found.contains(&command) && !task.contains(&format!("`{command}`")) {
            found.push(command);
        }
    }
    found
}

/// A call's `path` argument.
fn path_of(arguments: &str) -> Option<String> {
    arg_of(arguments, "path")
}

/// A call's string argument `key`.
fn arg_of(arguments: &str, key: &str) -> Option<String> {
    serde_json::from_str::<serde_json::Value>(arguments)
        .ok()
        .and_then(|a| a.get(key).and_then(serde_json::Value::as_str).map(str::to_string))
}

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
        "enable",
        "disable",
        "increase",
        "decrease",
        "upgrade",
        "downgrade",
    ];
    // Not "raise" or "lower": questions about code say them ("where is ValueError raised?").
    // Verbs that are nouns as often ("the entry point", "your turn"): only as a clause's first
    // word ("In staging.env, point the app at ... and turn debug mode off").
    const LEADING: &[&str] = &["point", "turn", "switch"];
    // A verb in capitals is an HTTP method or SQL ("Which file handles DELETE /api/projects/:id?").
    let lower: String =
        task.split_whitespace().filter(|w| w.chars().any(|c| c.is_ascii_lowercase())).collect::<Vec<_>>().join(" ");
    // "Make the loop run to 10 instead of 3" names what is to change without a verb for it.
    let instead = !task.contains('?') && lower.to_ascii_lowercase().contains("instead of");
    has_word(&lower, VERBS) || leads_a_clause(task, LEADING) || instead
}

/// Whether a task asks to take something out ("Remove the unused import", "delete the dead
/// function"): then lines an answer's text of a file leaves out may be meant as deletions.
fn asks_to_delete(task: &str) -> bool {
    has_word(task, &["delete", "remove", "drop", "strip"]) || task.to_lowercase().contains("get rid of")
}

/// Whether one of `words` starts `text` or a clause of it (after `,`, `;`, `.`, or "and").
fn leads_a_clause(text: &str, words: &[&str]) -> bool {
    let mut after_break = true;
    for w in text.split_whitespace() {
        let bare = w.trim_matches(|c: char| !c.is_ascii_alphabetic());
        if after_break && words.iter().any(|v| bare.eq_ignore_ascii_case(v)) {
            return true;
        }
        after_break = w.ends_with([',', ';', '.', ':']) || bare.eq_ignore_ascii_case("and");
    }
    false
}

/// Whether an answer tells someone how to do the work ("you need to edit the file", "follow
/// these steps", "run the following commands") instead of saying what was done.
fn tells_how(answer: &str) -> bool {
    const PHRASES: &[&str] = &[
        "you need to",
        "you will need to",
        "you would need to",
        "you should",
        "you can use",
        "you can run",
        "you can add",
        "you can change",
        "you can update",
        "you can modify",
        "follow these steps",
        "open the file",
        "in a text editor",
        "run the following",
        "here's how you can",
        "here is how you can",
    ];
    let lower = answer.to_lowercase();
    PHRASES.iter().any(|p| lower.contains(p))
}

/// Whether a task asks where something is: a question for a file or a place ("Where is X
/// defined?", "Which file handles ...?", "Give me its path"), not for a change.
fn asks_where(task: &str) -> bool {
    let lower = task.to_lowercase();
    let place = has_word(&lower, &["where"])
        || ["which file", "what file", "which files", "its path", "the path", "file path"]
            .iter()
            .any(|p| lower.contains(p));
    place && (task.contains('?') || lower.contains("give me")) && !asks_for_change(task)
}

/// Whether a text names a file: a word with a `/`, or a name with an extension (`backoff.rs`).
fn names_a_path(text: &str) -> bool {
    text.split(|c: char| c.is_whitespace() || "`'\"()[]<>,;*".contains(c)).any(|w| {
        let w = w.trim_end_matches(['.', ':', '!', '?']);
        let ext = w.rsplit_once('.');
        w.contains('/')
            || ext.is_some_and(|(name, ext)| {
                !name.is_empty()
                    && (1..=5).contains(&ext.len())
                    && ext.chars().all(|c| c.is_ascii_alphanumeric())
                    && ext.chars().any(|c| c.is_ascii_alphabetic())
            })
    })
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
        assert!(asks_for_change("In main.go, make the loop run to 10 instead of 3."));
        assert!(!asks_for_change("Why does main.go loop to 3 instead of 10?"));
        assert!(asks_for_change(
            "In deploy/staging.env, point the app at the new database host db-staging-2.internal and turn debug mode off."
        ));
        assert!(asks_for_change("Turn on gzip in nginx.conf."));
        assert!(!asks_for_change("Where is the entry point of this service?"));
        assert!(!asks_for_change("What does the switch in main.c do, at this point?"));
        assert!(claims_change("I Fixed the off-by-one."));
        assert!(!claims_change("It is defined in catalog/sku.py, line 4."));
        assert!(!claims_change("The prefixed name"));
    }

    const TOOLS: &[&str] = &["read", "edit", "bash"];

    #[test]
    fn a_question_about_where_wants_a_path() {
        assert!(asks_where("Where is MAX_UPLOAD_RETRIES defined, and what is its value?"));
        assert!(asks_where("Which file defines the function normalize_sku? Give me its path."));
        assert!(asks_where("Which file handles DELETE /api/projects/:id in this Express app?"));
        assert!(!asks_where("What does scripts/nightly_backup.sh do?"));
        assert!(!asks_where("Move the helper to where the other helpers are."));
        assert!(names_a_path("It is in src/net/backoff.rs, line 6."));
        assert!(names_a_path("`backoff.rs` defines it."));
        assert!(!names_a_path("The value of MAX_UPLOAD_RETRIES is 12."));
        assert!(!names_a_path("It is 1.5 seconds."));
    }

    #[test]
    fn an_http_method_in_capitals_asks_for_no_change() {
        assert!(!asks_for_change("Which file handles DELETE /api/projects/:id?"));
        assert!(asks_for_change("Delete the export_xml function."));
    }

    #[test]
    fn an_answer_made_of_a_notes_words_echoes_it() {
        let said = vec![
            "[note] The task asks a question, not for a change, so this write of /ws/a.ts was not run and nothing changed. Answer from what the workspace holds: to find where something is, grep for it with no path (the whole workspace), then read the file it names.".to_string(),
            "Plan saved (version 1).".to_string(),
        ];
        assert!(echoes(
            "To find where something is, grep for it with no path (the whole workspace), then read the file it names.",
            &said
        ));
        assert!(echoes("Plan saved (version 1).", &said));
        // An answer with a word of its own, or too short to tell, is an answer.
        assert!(!echoes("normalize_sku is defined in /ws/invoicer/catalog/sku.py.", &said));
        assert!(!echoes("Nothing changed.", &said));
        assert!(!echoes("Plan saved.", &said));
        assert!(!echoes("plan: write out.txt", &said), "the model's own plan is not a note");
    }

    #[test]
    fn a_look_is_not_a_change() {
        for c in ["cat main.py", "ls -la src", "grep -rn TODO src", "find . -name '*.py'"] {
            assert!(looks_read_only(c), "{c}");
        }
        for c in
            ["cat a > b", "find . -name '*.pyc' -delete", "sed -i s/a/b/ f", "python3 fix.py", "find . -exec rm {} +"]
        {
            assert!(!looks_read_only(c), "{c}");
        }
    }

    #[test]
    fn a_call_written_in_an_answer_is_found() {
        let answer = "You can use the edit function. Here's the command:\n\n```json\n{\n  \"name\": \"edit\",\n  \"arguments\": {\"path\": \"/ws/a.yaml\", \"old_string\": \"a: 1\", \"new_string\": \"a: 2\"}\n}\n```\nThis sets a.";
        let (name, call) = call_as_text(answer, TOOLS).unwrap();
        assert_eq!(name, "edit");
        assert_eq!(
            call,
            r#"{"name":"edit","arguments":{"path":"/ws/a.yaml","old_string":"a: 1","new_string":"a: 2"}}"#
        );
        // JSON that is not a call of ours, and a call outside a code block, are not.
        assert_eq!(call_as_text("```json\n{\"name\": \"deploy\", \"arguments\": {}}\n```", TOOLS), None);
        assert_eq!(call_as_text("```json\n{\"name\": \"edit\"}\n```", TOOLS), None);
        assert_eq!(call_as_text("{\"name\": \"edit\", \"arguments\": {}}", TOOLS), None);
    }

    #[test]
    fn commands_a_task_names() {
        let cases: &[(&str, &[&str])] = &[
            ("python3 main.py fails; fix it.", &["python3 main.py"]),
            ("node test.js is failing. Fix the bug in lib/duration.js; leave test.js as it is.", &["node test.js"]),
            ("`gcc -Wall -o stats stats.c` fails. Fix stats.c so that it compiles", &["gcc -Wall -o stats stats.c"]),
            ("python3 -m unittest fails in this repo.", &["python3 -m unittest"]),
            (
                "Rename it. python3 main.py and python3 test_pricing.py must still work.",
                &["python3 main.py", "python3 test_pricing.py"],
            ),
            ("go build fails with:\n  x.go:4:2: unused", &["go build"]),
            ("bash report.sh stops with a syntax error.", &["bash report.sh"]),
            ("Set the cache TTL in config/app.toml to 10 minutes.", &[]),
            ("Write a bash script scripts/count_errors.sh that prints one line", &[]),
            ("Run it with bash and save the output.", &[]),
            ("make sure the cache is used", &[]),
            ("Fix it so that pytest passes, and cargo test too.", &["pytest", "cargo test"]),
        ];
        for (task, want) in cases {
            assert_eq!(named_commands(task), *want, "{task}");
        }
    }
}
