//! The agent loop, as a queue pair: operations in ([`Op`]), events out ([`Event`]).
//!
//! One run: the task is recorded, then turn after turn the model replies with one tool call
//! (executed through [`dispatch::execute_with`], so the action is on record before the tool
//! runs) or with its final answer. A tool error is an observation for the model; a fault of
//! ours ends the run with `internal_error`. Budgets for turns, tokens and wall time each have
//! their own stop reason.

use std::sync::Arc;
use std::sync::atomic::AtomicU32;
use std::sync::mpsc::{Receiver, Sender};
use std::time::{Duration, Instant};

use anyhow::Result;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::compact;
use super::dispatch;
use super::events::{Budgets, Event, Preflight, StopReason, TurnKind};
use super::given;
use super::history;
use super::prompt;
use super::steer::Steer;
use super::subagent::{self, Allowance, Link, Subagents};
use crate::model::{Cancel, Message, Model, ModelError, Role, ToolCall, Turn, TurnRequest, TurnSchema};
use crate::store::EventKind;
use crate::tools::{Registry, ToolContext};

/// What the loop is asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Work on a task (a new one, or a follow-up in a resumed session).
    Task(String),
    /// Continue a resumed session where it stopped, without a new task.
    Continue,
}

/// The fixed parts of a run.
pub struct RunSetup<'a> {
    pub registry: &'a Registry,
    pub tools: ToolContext<'a>,
    pub budgets: Budgets,
    /// Tokens that must remain for the work after the prompt and one reply (the preflight).
    pub working_budget: u32,
    /// After this many identical calls in a row, the next turn may only be the final answer
    /// (0: never).
    pub repeat_limit: u32,
    pub cancel: Cancel,
    /// Set for a subagent: its parent, and the budget it shares with its siblings.
    pub subagent: Option<Link<'a>>,
    /// Send the reply's pieces as `token` events while the model writes it (interactive mode).
    pub stream_tokens: bool,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOutcome {
    pub reason: StopReason,
    pub message: String,
    pub answer: Option<String>,
    pub turns: u32,
    /// Tokens evaluated and generated, with those of the run's subagents.
    pub tokens: u64,
}

pub struct Agent<'a, 'm> {
    model: &'m mut dyn Model,
    setup: RunSetup<'a>,
    schema: TurnSchema,
    messages: Vec<Message>,
    events: Sender<Event>,
    repeats: history::RepeatCounter,
    /// The task of the current run, restated when the model must answer.
    current_task: Option<String>,
    /// How fast the model has been (`compact::Pace`), from its latest turns.
    pace: Option<compact::Pace>,
    /// Subagents running in the session (the parent's count, for a subagent).
    running: Arc<AtomicU32>,
}

impl<'a, 'm> Agent<'a, 'm> {
    /// An agent for the session in `setup.tools`. A session with events is resumed: its
    /// conversation is rebuilt from the log, and an action that has no observation (the process
    /// died while the tool ran) is recorded and told to the model as interrupted, never re-run.
    pub fn new(model: &'m mut dyn Model, setup: RunSetup<'a>, events: Sender<Event>) -> Result<Self> {
        let schema = TurnSchema::new(setup.registry);
        let native = crate::model::native::is_native(&model.describe().protocol);
        let system = match &setup.subagent {
            Some(link) => prompt::subagent_prompt(setup.registry, setup.tools.workspace.root(), link.profile, native),
            None => prompt::system_prompt_for(setup.registry, setup.tools.workspace.root(), native),
        };
        let stored = setup.tools.session.events()?;
        let resumed = !stored.is_empty();
        let running = setup.subagent.as_ref().map(|l| l.running.clone()).unwrap_or_default();
        let mut agent = Agent {
            model,
            setup,
            schema,
            messages: vec![Message::new(Role::System, system.clone()).with_shared_prefix(prompt::stable_len(&system))],
            events,
            repeats: history::RepeatCounter::default(),
            current_task: None,
            pace: None,
            running,
        };
        agent.emit(Event::Session {
            session: agent.setup.tools.session.id().to_string(),
            workspace: agent.setup.tools.session.workspace().display().to_string(),
            resumed,
        });
        if resumed {
            let rebuilt = history::rebuild(&stored);
            // A continued run is judged against the task it continues (`steer`): without it,
            // the recovery scenarios' answers that claimed an unmade change stood.
            agent.current_task = rebuilt.task;
            agent.messages.extend(rebuilt.messages);
            for lost in rebuilt.lost {
                agent.record_interrupted(lost)?;
            }
        }
        Ok(agent)
    }

    /// Serve operations until the sender hangs up.
    pub fn serve(&mut self, ops: Receiver<Op>) -> Result<()> {
        for op in ops {
            match op {
                Op::Task(t) => self.run(Some(t))?,
                Op::Continue => self.run(None)?,
            };
        }
        Ok(())
    }

    fn emit(&self, e: Event) {
        let e = match &self.setup.subagent {
            Some(link) => subagent::wrap(link, self.setup.tools.session.id(), e),
            None => e,
        };
        // A renderer that went away (the pipe closed) must not stop the work being recorded.
        let _ = self.events.send(e);
    }

    /// Count tokens spent by this run, against the pool it shares with its siblings too.
    fn charge(&self, counters: &mut Counters, tokens: u64) {
        counters.tokens += tokens;
        if let Some(link) = &self.setup.subagent {
            link.pool.charge(tokens);
        }
    }

    /// Keep the model's pace from a turn's usage: enough tokens to time, and timed at all (the
    /// scripted model and some endpoints report no times).
    fn note_pace(&mut self, u: &crate::model::Usage) {
        let per = |ms: u64, n: u32, min: u32| (n >= min && ms > 0).then(|| ms as f64 / f64::from(n));
        let prompt = per(u.prompt_ms, u.evaluated_tokens, 32).or(self.pace.map(|p| p.prompt_ms_per_token));
        let generate = per(u.generate_ms, u.generated_tokens, 8).or(self.pace.map(|p| p.generate_ms_per_token));
        if let (Some(prompt_ms_per_token), Some(generate_ms_per_token)) = (prompt, generate) {
            self.pace = Some(compact::Pace { prompt_ms_per_token, generate_ms_per_token });
        }
    }

    /// The turn of `req` asked for again, decoded with `vary` (see [`TurnRequest::vary`]) and
    /// as a call only where `call_only`; charged to `counters`. `None` where the model gave no
    /// reply (Ctrl-C, the deadline, a fault).
    fn ask_again(
        &mut self,
        counters: &mut Counters,
        a: Again,
        vary: u32,
        call_only: bool,
    ) -> Option<crate::model::Reply> {
        let req = TurnRequest {
            messages: &self.messages,
            max_tokens: a.max_tokens,
            cancel: &self.setup.cancel,
            deadline: a.deadline,
            answer_only: a.answer_only,
            call_only,
            only_tool: if call_only { a.only_tool } else { None },
            vary,
            on_token: None,
        };
        let other = self.model.complete(&req).ok()?;
        self.charge(counters, u64::from(other.usage.evaluated_tokens) + u64::from(other.usage.generated_tokens));
        Some(other)
    }

    /// Characters of tool output the context window can take after this turn's messages and one
    /// reply, with room to spare for the result's framing; `None` when the model cannot count.
    fn output_budget(&self, reply_tokens: u32) -> Option<usize> {
        let n_ctx = self.model.n_ctx()?;
        let used = self.model.count_tokens(&self.messages).ok().flatten()?;
        let room = n_ctx.saturating_sub(used + reply_tokens + OUTPUT_MARGIN_TOKENS);
        // Code runs about 3-4 characters a token; 3 keeps the cut on the safe side.
        Some((room as usize * 3).max(MIN_OUTPUT_CHARS))
    }

    /// Whether this subagent must stop because its siblings and it spent their budget.
    fn pool_dry(&self) -> Option<String> {
        let pool = self.setup.subagent.as_ref()?.pool;
        pool.exhausted().then(|| pool.limit_message())
    }

    fn record(&self, kind: EventKind, payload: Value) -> Result<i64> {
        Ok(self.setup.tools.session.append(kind, &payload)?.seq)
    }

    /// One run. `Err` only when the store itself fails; every other ending is an outcome.
    pub fn run(&mut self, task: Option<String>) -> Result<RunOutcome> {
        let start = Instant::now();
        let budgets = self.setup.budgets;
        let deadline = budgets.max_wall_ms.map(|ms| start + Duration::from_millis(ms));
        let mut counters = Counters::default();
        // Set when the model made the same call `repeat_limit` times in a row.
        let mut answer_only = false;
        // Which turns must be a call, which answers are sent back (see `steer`).
        let mut steer = Steer::new(
            &self.setup.tools.config.run,
            task.is_some(),
            self.setup.subagent.is_none(),
            self.setup.registry.names(),
        );
        // A run that continues after a call that failed (a resumed session, the conformance
        // recovery scenarios) is held to `run.act_after_error` as the turn after it would be.
        if task.is_none() {
            // One read of the log for both questions about what came before.
            let events = self.setup.tools.session.events()?;
            if last_call_failed(&events) {
                steer.resume_after_error();
            }
            if changed_before(&events) {
                steer.continues_after_change();
            }
        }

        let prompt_sha256 = sha_hex(&self.messages[0].content);
        if let Some(text) = &task {
            self.messages.push(Message::new(Role::User, text.clone()));
            self.current_task = Some(text.clone());
        }
        let preflight = Preflight {
            n_ctx: self.model.n_ctx(),
            prompt_tokens: match self.model.count_tokens(&self.messages) {
                Ok(n) => n,
                Err(e) => {
                    return self.finish(
                        StopReason::InternalError,
                        format!("cannot count the prompt's tokens: {e}"),
                        None,
                        &counters,
                        start,
                    );
                }
            },
            reply_tokens: budgets.max_reply_tokens,
            working_budget: self.setup.working_budget,
        };
        let info = self.model.describe();
        let mut payload =
            json!({ "model": info, "budgets": budgets, "preflight": preflight, "prompt_sha256": prompt_sha256 });
        if let Some(link) = &self.setup.subagent {
            payload["parent"] = subagent::parent_record(link);
        }
        // Said once per top-level run; a subagent works under the same config.
        let config_warnings =
            if self.setup.subagent.is_none() { self.setup.tools.config.warnings.clone() } else { Vec::new() };
        if !config_warnings.is_empty() {
            payload["config_warnings"] = json!(config_warnings);
        }
        let seq = self.record(EventKind::RunStart, payload)?;
        self.emit(Event::RunStart { seq, model: info, budgets, preflight, prompt_sha256, config_warnings });
        let given = match &task {
            Some(text) if self.setup.subagent.is_none() && self.setup.tools.config.run.given_calls => {
                self.given_calls(text)
            }
            _ => Vec::new(),
        };
        if let Some(text) = task {
            let seq = self.record(EventKind::Task, json!({ "text": text }))?;
            self.emit(Event::Task { seq, text });
        }
        if let (Some(n_ctx), Some(prompt)) = (preflight.n_ctx, preflight.prompt_tokens) {
            let need = prompt + preflight.reply_tokens + preflight.working_budget;
            if need > n_ctx {
                let msg = format!(
                    "the context window is too small for this task: the system prompt with the tool schemas and the task take {prompt} tokens, one reply needs {} and the working budget is {}: {need} > n_ctx {n_ctx}. Raise the context (--ctx, model.n_ctx), shorten ABHED.md/AGENTS.md or the task, or lower model.max_reply_tokens / run.working_budget. Nothing was run.",
                    preflight.reply_tokens, preflight.working_budget
                );
                return self.finish(StopReason::ContextFull, msg, None, &counters, start);
            }
        }
        for (call, why) in given {
            if let Err(fault) = self.give(call, why, &mut steer) {
                return self.finish(StopReason::InternalError, format!("{fault:#}"), None, &counters, start);
            }
        }

        // Replies cut off in a row: the next is decoded with some randomness, as a repeated
        // call is asked for again, since greedy decoding after the cut-off note wrote the same
        // reply again (the 1.5B model, add-function-python-with-test).
        let mut cut_in_row = 0;
        loop {
            if let Some(msg) = self.pool_dry() {
                return self.finish(StopReason::MaxTokens, msg, None, &counters, start);
            }
            if self.setup.cancel.is_cancelled() {
                return self.finish(StopReason::Interrupted, "interrupted (Ctrl-C)".into(), None, &counters, start);
            }
            if counters.turns >= budgets.max_turns {
                let msg = format!("the turn budget is spent ({} turns) before a final answer", budgets.max_turns);
                return self.finish(StopReason::MaxTurns, msg, None, &counters, start);
            }
            if counters.tokens >= budgets.max_tokens {
                let msg = format!("the token budget is spent ({} of {} tokens)", counters.tokens, budgets.max_tokens);
                return self.finish(StopReason::MaxTokens, msg, None, &counters, start);
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return self.finish(StopReason::WallTime, wall_msg(budgets), None, &counters, start);
            }
            // Make room before the window fills: older turns give way to a summary.
            match compact::needed(&*self.model, &self.messages, budgets.max_reply_tokens) {
                Ok(Some(_)) => {
                    if let Err(stop) = self.compact(&mut counters, deadline) {
                        let (reason, msg) = stop;
                        return self.finish(reason, msg, None, &counters, start);
                    }
                }
                Ok(None) => {}
                Err(e) => {
                    return self.finish(
                        StopReason::InternalError,
                        format!("cannot count tokens: {e}"),
                        None,
                        &counters,
                        start,
                    );
                }
            }
            let events = self.events.clone();
            let tell = move |piece: &str| drop(events.send(Event::Token { text: piece.to_string() }));
            let call_only = steer.call_only() && !answer_only;
            let only_tool = steer.only_tool(self.current_task.as_deref());
            let req = TurnRequest {
                messages: &self.messages,
                max_tokens: budgets.max_reply_tokens,
                cancel: &self.setup.cancel,
                deadline,
                answer_only,
                call_only,
                only_tool: if call_only { only_tool } else { None },
                vary: cut_in_row,
                on_token: self.setup.stream_tokens.then_some(&tell as &dyn Fn(&str)),
            };
            let reply = match self.model.complete(&req) {
                Ok(r) => r,
                Err(ModelError::Cancelled) if self.pool_dry().is_some() => {
                    let msg = self.pool_dry().unwrap_or_default();
                    return self.finish(StopReason::MaxTokens, msg, None, &counters, start);
                }
                Err(ModelError::Cancelled) if self.setup.cancel.is_cancelled() => {
                    return self.finish(
                        StopReason::Interrupted,
                        "interrupted (Ctrl-C) while the model was working".into(),
                        None,
                        &counters,
                        start,
                    );
                }
                Err(ModelError::Cancelled) => {
                    return self.finish(StopReason::WallTime, wall_msg(budgets), None, &counters, start);
                }
                Err(e @ ModelError::ContextFull { .. }) => {
                    // The count before the turn can miss (an adapter that cannot count): compact
                    // now, and try the turn again if anything was dropped.
                    let before = self.messages.len();
                    if let Err((reason, msg)) = self.compact(&mut counters, deadline) {
                        return self.finish(reason, msg, None, &counters, start);
                    }
                    if self.messages.len() < before {
                        continue;
                    }
                    let msg = format!(
                        "{e} after {} turns, and there are no older turns left to compact. Raise the context (--ctx, model.n_ctx) and resume the session",
                        counters.turns
                    );
                    return self.finish(StopReason::ContextFull, msg, None, &counters, start);
                }
                Err(ModelError::Endpoint(msg)) => {
                    return self.finish(StopReason::ModelError, msg, None, &counters, start);
                }
                Err(ModelError::Fault(e)) => {
                    return self.finish(
                        StopReason::InternalError,
                        format!("the model failed: {e:#}"),
                        None,
                        &counters,
                        start,
                    );
                }
            };
            counters.turns += 1;
            self.note_pace(&reply.usage);
            self.charge(
                &mut counters,
                u64::from(reply.usage.evaluated_tokens) + u64::from(reply.usage.generated_tokens),
            );

            let mut reply = reply;
            cut_in_row = if reply.cut_off { cut_in_row + 1 } else { 0 };
            let mut parsed = self.parse_reply(&reply, answer_only);
            // A call that repeats one made since the last change, or an answer already sent
            // back, is asked for again with some randomness before it counts
            // (`run.resample_repeats`); the replies set aside are kept in the turn's record.
            let mut set_aside = Vec::new();
            let mut call_only = call_only;
            // What a turn asked for again is asked with: the turn's own request but for `vary`.
            let again = Again { max_tokens: budgets.max_reply_tokens, deadline, answer_only, only_tool };
            let mut tries = 0;
            while let Ok(turn) = &parsed
                && !answer_only
                && steer.repeats(turn)
                && tries < steer.resample_tries()
            {
                tries += 1;
                // A try that fails (Ctrl-C, the deadline, a fault) leaves the reply there is to
                // stand; the next turn's request meets the same condition and reports it.
                let Some(other) = self.ask_again(&mut counters, again, tries, call_only) else { break };
                let other_parsed = self.parse_reply(&other, answer_only);
                let fresh = other_parsed.as_ref().is_ok_and(|t| !steer.repeats(t));
                if fresh {
                    set_aside.push(std::mem::replace(&mut reply, other).text);
                    parsed = other_parsed;
                    break;
                }
                set_aside.push(other.text);
            }
            // A store that cannot say counts as plan mode: no answer is sent back for it.
            let blocked = || crate::tools::plan::plan_mode(self.setup.tools.session).unwrap_or(true);
            // An answer that holds a file's new text becomes the edit it means (`steer`).
            let mut from_answer = None;
            if let Ok(Turn::Answer { text, gave_up }) = &parsed
                && !answer_only
                && let Some((_, arguments)) = steer.answer_edit(self.current_task.as_deref(), text, *gave_up, blocked())
            {
                let call = ToolCall { name: "edit".into(), arguments };
                from_answer = Some(history::from_answer_record(&call));
                parsed = Ok(Turn::Call(call));
            }
            // Else, on a task that asks for a change and before anything was written, the answer
            // is set aside and the turn asked for again as a call (`run.act_until_change`).
            if let Ok(Turn::Answer { .. }) = &parsed
                && from_answer.is_none()
                && !answer_only
                && steer.answer_becomes_call(self.current_task.as_deref(), blocked())
            {
                for vary in 0..2 {
                    let Some(other) = self.ask_again(&mut counters, again, vary, true) else { break };
                    let other_parsed = self.parse_reply(&other, answer_only);
                    if matches!(other_parsed, Ok(Turn::Answer { .. })) {
                        // An adapter that cannot hold a reply to a call (a server that ignores
                        // it, the scripted model): the first answer stands, and is judged.
                        set_aside.push(other.text);
                        break;
                    }
                    // A call made since the last change would meet the same result: once more.
                    let repeats = other_parsed.as_ref().is_ok_and(|t| steer.repeats(t));
                    set_aside.push(std::mem::replace(&mut reply, other).text);
                    parsed = other_parsed;
                    call_only = true;
                    if !repeats {
                        break;
                    }
                }
            }
            // A call the steer would hold back with a note, or an answer that only repeats what
            // Abhed said, is asked for again before the note: the 1.5B model gives a note's own
            // words as its final answer (`steer::hold_call`, `steer::echoes`).
            for vary in 1..=2 {
                let notes = match &parsed {
                    Ok(Turn::Call(c)) if from_answer.is_none() => {
                        let creates = self.creates_file(&c.name, &c.arguments);
                        steer.holds(self.current_task.as_deref(), &c.name, &c.arguments, creates).is_some()
                    }
                    Ok(Turn::Answer { text, .. }) if !answer_only => steer.echoes(text),
                    _ => false,
                };
                if !notes {
                    break;
                }
                let as_call = matches!(parsed, Ok(Turn::Call(_)));
                let Some(other) = self.ask_again(&mut counters, again, vary, call_only || as_call) else { break };
                let other_parsed = self.parse_reply(&other, answer_only);
                set_aside.push(std::mem::replace(&mut reply, other).text);
                parsed = other_parsed;
                call_only |= as_call;
            }
            let (kind, feedback) = match &parsed {
                Ok(Turn::Call(_)) if from_answer.is_some() => (TurnKind::Call, None),
                Ok(Turn::Call(c)) => {
                    let creates = self.creates_file(&c.name, &c.arguments);
                    (TurnKind::Call, steer.hold_call(self.current_task.as_deref(), &c.name, &c.arguments, creates))
                }
                Ok(Turn::Answer { text, gave_up }) => {
                    (TurnKind::Answer, steer.send_back(self.current_task.as_deref(), text, *gave_up, blocked()))
                }
                Err(why) => (TurnKind::Invalid, Some(why.clone())),
            };
            let mut payload = json!({
                "turn": counters.turns, "kind": kind, "raw": reply.text, "usage": reply.usage,
                "cut_off": reply.cut_off, "feedback": feedback, "answer_only": answer_only,
                "call_only": call_only,
            });
            if !set_aside.is_empty() {
                payload["set_aside"] = json!(set_aside);
            }
            if call_only && let Some(tool) = only_tool {
                payload["only_tool"] = json!(tool);
            }
            if let Some(record) = &from_answer {
                payload["from_answer"] = record.clone();
            }
            let seq = self.record(EventKind::ModelTurn, payload)?;
            self.emit(Event::ModelTurn {
                seq,
                turn: counters.turns,
                kind,
                raw: reply.text.clone(),
                usage: reply.usage,
                cut_off: reply.cut_off,
                feedback: feedback.clone(),
                answer_only,
                given_why: None,
            });
            // The guard holds until the model answers: a reply that was cut off or refused
            // leaves the next turn answer-only too.
            answer_only = answer_only && kind == TurnKind::Invalid;
            self.messages.push(Message::new(Role::Assistant, reply.text));

            match parsed {
                Err(why) => self.messages.push(Message::new(Role::User, history::invalid_feedback(&why))),
                // An answer sent back, or a call held back unrun (`steer`): the note follows it.
                Ok(_) if feedback.is_some() => {
                    self.messages.push(Message::new(Role::User, feedback.unwrap_or_default()));
                }
                Ok(Turn::Answer { text, gave_up }) => {
                    let (reason, msg) = if gave_up {
                        (StopReason::GaveUp, "the model gave up on the task".to_string())
                    } else {
                        (StopReason::Done, "the model gave its final answer".to_string())
                    };
                    return self.finish(reason, msg, Some(text), &counters, start);
                }
                Ok(Turn::Call(call)) => {
                    let repeated = self.repeats.observe(&call.name, &call.arguments);
                    answer_only = self.setup.repeat_limit > 0 && repeated + 1 >= self.setup.repeat_limit;
                    // What the window can still take: a result that would not fit is cut by the
                    // tool (with how to get the rest) rather than ending the run as context_full.
                    let output_budget = self.output_budget(budgets.max_reply_tokens);
                    let limit = budgets.max_tokens;
                    let mut tokens_left = limit.saturating_sub(counters.tokens);
                    if let Some(link) = &self.setup.subagent {
                        tokens_left = tokens_left.min(link.pool.limit().saturating_sub(link.pool.used()));
                    }
                    let left = Allowance {
                        budgets,
                        tokens_left,
                        deadline,
                        cancel: self.setup.cancel.clone(),
                        running: self.running.clone(),
                    };
                    let delegate = Subagents::new(&mut *self.model, self.events.clone(), left);
                    let ctx = ToolContext { delegate: Some(&delegate), output_budget, ..self.setup.tools };
                    let (events, wrap) = (self.events.clone(), self.setup.subagent.as_ref());
                    let session = self.setup.tools.session.id();
                    let on_action = |seq: i64, tool: &str, arguments: &Value| {
                        delegate.set_action(seq);
                        let e = Event::ToolCall { seq, tool: tool.to_string(), arguments: arguments.clone() };
                        let _ = events.send(match wrap {
                            Some(link) => subagent::wrap(link, session, e),
                            None => e,
                        });
                    };
                    let result = dispatch::execute_with(self.setup.registry, &ctx, &call, on_action);
                    let spent = delegate.spent();
                    drop(delegate);
                    self.charge(&mut counters, spent);
                    let outcome = match result {
                        Ok(o) => o,
                        Err(fault) => {
                            return self.finish(
                                StopReason::InternalError,
                                format!("{fault:#}"),
                                None,
                                &counters,
                                start,
                            );
                        }
                    };
                    steer.after_call(self.current_task.as_deref(), &call.name, &call.arguments, &outcome);
                    let text = self.emit_outcome(&outcome);
                    let mut message = history::result_message(&outcome.tool, &text, repeated);
                    if let Some(record) = &from_answer {
                        message = format!("{}\n{message}", history::from_answer_note(record));
                    }
                    if answer_only {
                        message.push_str(&history::answer_now(self.current_task.as_deref()));
                    }
                    self.messages.push(Message::new(Role::User, message));
                }
            }
        }
    }

    /// The events of a call that ran: the approval decisions it met (recorded between its
    /// action and its observation), its result, and the checklist if it changed. Returns the
    /// text the model sees.
    fn emit_outcome(&self, outcome: &dispatch::CallOutcome) -> String {
        let between = self.setup.tools.session.events_between(outcome.action_seq, outcome.observation_seq);
        for ev in between.iter().flatten().filter(|e| e.kind == EventKind::Approval.as_str()) {
            self.emit(Event::Approval { seq: ev.seq, record: ev.payload.clone() });
        }
        let text = outcome.text();
        self.emit(Event::ToolResult {
            seq: outcome.observation_seq,
            action_seq: Some(outcome.action_seq),
            tool: outcome.tool.clone(),
            ok: outcome.ok(),
            output: text.clone(),
            error_code: outcome.result.as_ref().err().map(|e| e.code.to_string()),
            mutated: outcome.mutated(),
            duration_ms: outcome.duration_ms,
            interrupted: false,
        });
        // The checklist, live: the operator follows progress without the transcript.
        if let Ok(out) = &outcome.result
            && let Some(todos) = out.meta.as_ref().and_then(|m| m.get("todos"))
        {
            self.emit(Event::Todo { seq: outcome.observation_seq, todos: todos.clone() });
        }
        text
    }

    /// The calls a new task plainly asks for (`given`): reads of the files it names, then (with
    /// `run.given_check`) the command it says fails, where bash is offered and the session is
    /// not in plan mode.
    fn given_calls(&self, task: &str) -> Vec<(ToolCall, &'static str)> {
        let tools = &self.setup.tools;
        let mut calls: Vec<(ToolCall, &'static str)> = given::files(task, tools.workspace, tools.session)
            .into_iter()
            .map(|path| {
                (ToolCall { name: "read".into(), arguments: json!({ "path": path }).to_string() }, given::READ_WHY)
            })
            .collect();
        let plan_mode = crate::tools::plan::plan_mode(tools.session).unwrap_or(true);
        if tools.config.run.given_check
            && self.setup.registry.names().contains(&"bash")
            && !plan_mode
            && let Some(command) = given::failing_command(task)
        {
            // bash's `description` is required. Plain, as the model writes its own: the 1.5B
            // model gave "Run the command the task says fails, to see its error" back as the
            // reason it gave up (the suite, 2026-12-07).
            let arguments = json!({
                "command": command,
                "description": format!("Run {command}"),
                "timeout_ms": given::RUN_TIMEOUT_MS,
            })
            .to_string();
            calls.push((ToolCall { name: "bash".into(), arguments }, given::RUN_WHY));
        }
        calls
    }

    /// Make `call` for the model, as a call it is given: the turn is on record as a
    /// `model_turn` with `given: true` and `given_why` (no tokens, not counted as a turn), the
    /// call goes through the dispatch and its approvals like any call, and the conversation
    /// holds both as if the model had made it.
    fn give(&mut self, call: ToolCall, why: &str, steer: &mut Steer) -> Result<()> {
        let raw = format!("{{\"tool\": \"{}\", \"arguments\": {}}}", call.name, call.arguments);
        let seq =
            self.record(EventKind::ModelTurn, json!({ "kind": "call", "raw": raw, "given": true, "given_why": why }))?;
        self.emit(Event::ModelTurn {
            seq,
            turn: 0,
            kind: TurnKind::Call,
            raw: raw.clone(),
            usage: crate::model::Usage::default(),
            cut_off: false,
            feedback: None,
            answer_only: false,
            given_why: Some(why.to_string()),
        });
        let ctx =
            ToolContext { output_budget: self.output_budget(self.setup.budgets.max_reply_tokens), ..self.setup.tools };
        let events = self.events.clone();
        let outcome = dispatch::execute_with(self.setup.registry, &ctx, &call, |seq, tool, arguments| {
            let _ = events.send(Event::ToolCall { seq, tool: tool.to_string(), arguments: arguments.clone() });
        })?;
        steer.after_call(self.current_task.as_deref(), &call.name, &call.arguments, &outcome);
        let repeated = self.repeats.observe(&call.name, &call.arguments);
        let text = self.emit_outcome(&outcome);
        self.messages.push(Message::new(Role::Assistant, raw));
        self.messages.push(Message::new(Role::User, history::result_message(&call.name, &text, repeated)));
        Ok(())
    }

    /// Whether a call would create a file: a write or an edit of a path that does not exist (a
    /// hint for `steer`, not a check: the tool itself decides).
    fn creates_file(&self, tool: &str, arguments: &str) -> bool {
        if !matches!(tool, "write" | "edit") {
            return false;
        }
        let path = serde_json::from_str::<Value>(arguments)
            .ok()
            .and_then(|a| a.get("path").and_then(Value::as_str).map(str::to_string));
        path.and_then(|p| self.setup.tools.workspace.resolve("path", &p).ok())
            .is_some_and(|r| std::fs::symlink_metadata(&r.real).is_err())
    }

    /// A reply as the turn it is, or why it is none (fed back to the model).
    fn parse_reply(&self, reply: &crate::model::Reply, answer_only: bool) -> Result<Turn, String> {
        if reply.cut_off
            && let Some(block) = crate::model::repeat::looping_block(&reply.text)
        {
            let shown: String = block.chars().take(200).collect();
            Err(format!(
                "your reply repeated this over and over, so it was stopped after {} tokens and nothing was run:\n{shown}\nMake one short call instead. To add code to a file, edit it: old_string one line you read in it (its last line, say), new_string that line followed by the new code.",
                reply.usage.generated_tokens
            ))
        } else if reply.cut_off
            && let Some(header) = crate::model::repeat::pasted_read_header(&reply.text)
        {
            Err(format!(
                "your reply copied read's output ({header} and the numbered lines after it), so it was stopped after {} tokens and nothing was run. That header and the `N\\t` line numbers are not part of the file. To change a few lines, use edit: old_string and new_string copied from the file's lines without their numbers; to write a whole file, give only its text.",
                reply.usage.generated_tokens
            ))
        } else if reply.cut_off {
            Err(format!(
                // No example content here: a 1.5B model wrote "the first part of the file",
                // then the second, ... fifteen times over.
                "your reply was cut off at {} tokens before it was complete, so nothing was run. Make one shorter call: a long file can be written with write and then extended with edit.",
                self.setup.budgets.max_reply_tokens
            ))
        } else {
            match self.schema.parse(&reply.text) {
                // Only an adapter without a grammar can get here (a server that ignores
                // response_format): the call is refused, as the grammar would have.
                Ok(Turn::Call(c)) if answer_only => Err(format!(
                    "you called {} again after making the same call {} times in a row; this reply had to be your final answer: {{\"answer\": TEXT, \"status\": \"done\"}} (or \"gave_up\").",
                    c.name, self.setup.repeat_limit
                )),
                other => other,
            }
        }
    }

    /// Compact the conversation (see [`compact`]); an `Err` is how the run must stop.
    fn compact(&mut self, counters: &mut Counters, deadline: Option<Instant>) -> Result<(), (StopReason, String)> {
        let result = compact::compact(
            &mut *self.model,
            &self.schema,
            self.setup.tools.session,
            &self.messages,
            &self.setup.cancel,
            deadline,
            self.pace,
        );
        match result {
            Ok(None) => Ok(()),
            Ok(Some(c)) => {
                self.charge(counters, u64::from(c.usage.evaluated_tokens) + u64::from(c.usage.generated_tokens));
                let seq = self
                    .record(EventKind::Compaction, c.record.clone())
                    .map_err(|e| (StopReason::InternalError, format!("cannot record the compaction: {e:#}")))?;
                self.messages = c.messages;
                self.emit(Event::Compaction { seq, record: c.record });
                Ok(())
            }
            Err(ModelError::Cancelled) if self.setup.cancel.is_cancelled() => {
                Err((StopReason::Interrupted, "interrupted (Ctrl-C) while compacting".into()))
            }
            Err(ModelError::Cancelled) => {
                Err((StopReason::WallTime, "the wall-time budget ran out while compacting".into()))
            }
            Err(ModelError::Endpoint(msg)) => Err((StopReason::ModelError, msg)),
            Err(e) => Err((StopReason::InternalError, format!("compaction failed: {e}"))),
        }
    }

    fn finish(
        &mut self,
        reason: StopReason,
        message: String,
        answer: Option<String>,
        c: &Counters,
        start: Instant,
    ) -> Result<RunOutcome> {
        let wall_ms = start.elapsed().as_millis() as u64;
        let payload = json!({
            "reason": reason, "message": message, "answer": answer,
            "turns": c.turns, "tokens": c.tokens, "wall_ms": wall_ms,
        });
        // The run_end event's own hash is the chain's head: an operator who keeps it elsewhere can
        // later prove the log was not cut short (`abhed sessions verify ID --head HASH`).
        let ev = self.setup.tools.session.append(EventKind::RunEnd, &payload)?;
        self.emit(Event::RunEnd {
            seq: ev.seq,
            head: ev.hash,
            reason,
            message: message.clone(),
            answer: answer.clone(),
            turns: c.turns,
            tokens: c.tokens,
            wall_ms,
        });
        Ok(RunOutcome { reason, message, answer, turns: c.turns, tokens: c.tokens })
    }

    /// Record the loss of a call's result and tell the model.
    fn record_interrupted(&mut self, lost: history::Lost) -> Result<()> {
        let output = history::interrupted_text(&lost);
        let payload = json!({
            "action_seq": lost.action_seq, "tool": lost.tool, "ok": false, "output": output,
            "error": {"code": "interrupted", "message": output}, "mutated": Value::Null,
            "truncated": false, "interrupted": true, "duration_ms": 0,
        });
        let seq = self.record(EventKind::Observation, payload)?;
        self.emit(Event::ToolResult {
            seq,
            action_seq: lost.action_seq,
            tool: lost.tool.clone(),
            ok: false,
            output: output.clone(),
            error_code: Some("interrupted".into()),
            mutated: false,
            duration_ms: 0,
            interrupted: true,
        });
        self.messages.push(Message::new(Role::User, history::result_message(&lost.tool, &output, 0)));
        Ok(())
    }
}

/// Tokens kept free beyond a tool result's own (its header, the next turn's framing).
const OUTPUT_MARGIN_TOKENS: u32 = 256;
/// A result is never cut below this: the model needs something to go on, and compaction makes
/// room before the next turn.
const MIN_OUTPUT_CHARS: usize = 2_000;

/// A turn's request as it is asked for again (`Agent::ask_again`).
#[derive(Clone, Copy)]
struct Again {
    max_tokens: u32,
    deadline: Option<Instant>,
    answer_only: bool,
    /// The tool a turn asked for as a call is held to (`Steer::only_tool`).
    only_tool: Option<&'static str>,
}

#[derive(Default)]
struct Counters {
    turns: u32,
    tokens: u64,
}

/// Whether a call of the session so far may have changed something: an observation that says
/// so, or one whose result was lost.
fn changed_before(events: &[crate::store::StoredEvent]) -> bool {
    events.iter().filter(|e| e.kind == EventKind::Observation.as_str()).any(|e| {
        e.payload.get("mutated").and_then(Value::as_bool).unwrap_or(false) || e.payload.get("interrupted").is_some()
    })
}

/// Whether the session's last event of its conversation is a failed call's observation.
fn last_call_failed(events: &[crate::store::StoredEvent]) -> bool {
    let last = events
        .iter()
        .rev()
        .find(|e| [EventKind::Observation, EventKind::ModelTurn, EventKind::Task].iter().any(|k| e.kind == k.as_str()));
    last.is_some_and(|e| e.kind == EventKind::Observation.as_str() && e.payload["ok"] == json!(false))
}

fn wall_msg(b: Budgets) -> String {
    format!("the wall-time budget is spent ({} s)", b.max_wall_ms.unwrap_or(0) / 1000)
}

fn sha_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}
