//! Context compaction: before the conversation outgrows the context window, its older turns are
//! summarised by the model and replaced, in the prompt only, by that summary plus the plan and
//! the todo list verbatim. The event log keeps every turn.
//!
//! What stays: the system prompt, the task, and the latest turns (from an assistant message on,
//! so roles keep alternating). What goes: the turns between them.

use serde_json::{Value, json};

use crate::model::{Cancel, Message, Model, ModelError, Role, Turn, TurnRequest, TurnSchema, Usage};
use crate::store::Session;
use crate::tools::{plan, todo};

/// Compact when the prompt plus one reply would take more than this share of the window.
pub const THRESHOLD: f64 = 0.8;
/// Turns kept verbatim at the end: the last assistant/user pairs.
const KEEP_TAIL_MESSAGES: usize = 4;
/// The most tokens the summary may have.
pub const SUMMARY_TOKENS: u32 = 512;
/// A summary shorter than this is not one (the default 135M model once summarised 6k tokens
/// of work as "a"): the mechanical summary is used instead.
const MIN_SUMMARY_CHARS: usize = 40;
/// The most characters of one message put in front of the summariser.
const MAX_CHARS_PER_MESSAGE: usize = 1_500;

/// Where the compacted part of the task message begins; what comes before it is the task.
const MARKER: &str = "\n\n# Earlier work, compacted\n";

const SUMMARISER: &str = "You summarise the earlier part of a coding agent's work so that the agent can continue without it. Write what was done, what was found (file paths, names, values, errors and their fixes), and what remains. Be specific and brief. Reply with one JSON object: {\"answer\": \"THE SUMMARY\", \"status\": \"done\"}.";

/// How fast the model has been on this machine, from its latest turns: the summary is made by
/// the model only where it can be done in time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pace {
    pub prompt_ms_per_token: f64,
    pub generate_ms_per_token: f64,
}

impl Pace {
    /// The time a turn of `prompt` tokens and `reply` tokens takes at this pace.
    fn estimate(&self, prompt: u32, reply: u32) -> std::time::Duration {
        let ms = f64::from(prompt) * self.prompt_ms_per_token + f64::from(reply) * self.generate_ms_per_token;
        std::time::Duration::from_millis(ms as u64)
    }
}

/// Whether the conversation should be compacted before the next turn: `Some((prompt tokens,
/// n_ctx))` when it should.
pub fn needed(model: &dyn Model, messages: &[Message], reply_tokens: u32) -> Result<Option<(u32, u32)>, ModelError> {
    let (Some(n_ctx), Some(prompt)) = (model.n_ctx(), model.count_tokens(messages)?) else { return Ok(None) };
    let limit = (f64::from(n_ctx) * THRESHOLD) as u32;
    Ok((prompt + reply_tokens > limit).then_some((prompt, n_ctx)))
}

/// The result of one compaction.
pub struct Compacted {
    pub messages: Vec<Message>,
    /// What the `compaction` event records.
    pub record: Value,
    pub usage: Usage,
}

/// Compact `messages`. `Ok(None)` when there is nothing old enough to drop.
pub fn compact(
    model: &mut dyn Model,
    schema: &TurnSchema,
    session: &Session<'_>,
    messages: &[Message],
    cancel: &Cancel,
    deadline: Option<std::time::Instant>,
    pace: Option<Pace>,
) -> Result<Option<Compacted>, ModelError> {
    // [system, task, (assistant, user)*]: keep the head two and a tail that starts with an
    // assistant message.
    if messages.len() < 2 + KEEP_TAIL_MESSAGES + 2 {
        return Ok(None);
    }
    let mut tail_start = messages.len().saturating_sub(KEEP_TAIL_MESSAGES);
    while tail_start > 2 && messages[tail_start].role != Role::Assistant {
        tail_start -= 1;
    }
    if tail_start <= 2 {
        return Ok(None);
    }
    let middle = &messages[2..tail_start];
    let tokens_before = model.count_tokens(messages)?.unwrap_or(0);

    // A second compaction folds the first one's summary into the new one.
    let (task, previous) = match messages[1].content.split_once(MARKER) {
        Some((task, rest)) => (task.to_string(), Some(rest.to_string())),
        None => (messages[1].content.clone(), None),
    };
    let (summary, usage, by_model) = summarise(model, schema, previous.as_deref(), middle, cancel, deadline, pace)?;
    let plan_doc = plan::current(session).map_err(ModelError::Fault)?;
    let todos: Option<Vec<todo::Item>> =
        session.state(todo::STATE_KEY).map_err(ModelError::Fault)?.and_then(|v| serde_json::from_value(v).ok());

    let mut head = task;
    head.push_str(MARKER);
    head.push_str(&format!(
        "Earlier messages were replaced by this summary to make room in the context window:\n{}\n",
        summary.trim()
    ));
    if let Some(p) = &plan_doc {
        head.push_str(&format!("\n# Your plan (version {}), as you wrote it\n{}\n", p.version, plan::render(p)));
    }
    if let Some(items) = &todos {
        head.push_str(&format!("\n# Your todo list, as you wrote it\n{}\n", todo::render(items)));
    }
    let mut out = vec![messages[0].clone(), Message::new(Role::User, head)];
    out.extend_from_slice(&messages[tail_start..]);
    let tokens_after = model.count_tokens(&out)?.unwrap_or(0);
    let record = json!({
        "removed_messages": middle.len(),
        "kept_messages": out.len(),
        "tokens_before": tokens_before,
        "tokens_after": tokens_after,
        "summary": summary,
        "summary_by": if by_model { "model" } else { "mechanical" },
        "plan_version": plan_doc.map(|p| p.version),
        "todos": todos.map(|t| t.len()),
    });
    Ok(Some(Compacted { messages: out, record, usage }))
}

/// The model's summary of `middle`; when its reply is unusable, or would take more than half of
/// the time left at the model's `pace`, a mechanical one (the calls and the first line of each
/// result), said to be so. On 2 cores the 1.5B model takes some 100 s to read and summarise 5k
/// tokens: three of the suite's 300-second tasks ran out of time while compacting (2026-12-06).
fn summarise(
    model: &mut dyn Model,
    schema: &TurnSchema,
    previous: Option<&str>,
    middle: &[Message],
    cancel: &Cancel,
    deadline: Option<std::time::Instant>,
    pace: Option<Pace>,
) -> Result<(String, Usage, bool), ModelError> {
    let steps = |head: &str| {
        let mut text = previous.map(|p| format!("{p}\n")).unwrap_or_default();
        text.push_str(&mechanical(head, middle));
        text
    };
    let n_ctx = model.n_ctx().unwrap_or(u32::MAX);
    let mut per_message = MAX_CHARS_PER_MESSAGE;
    // Shrink each message's share until the summariser's prompt fits.
    let request = loop {
        let mut transcript = transcript(middle, per_message);
        if let Some(p) = previous {
            let p: String = p.chars().take(per_message * 2).collect();
            transcript = format!("[summary of what came before]\n{p}\n{transcript}");
        }
        let msgs = vec![
            Message::new(Role::System, SUMMARISER),
            Message::new(Role::User, format!("The earlier work:\n\n{transcript}\n\nSummarise it.")),
        ];
        let size = model.count_tokens(&msgs)?.unwrap_or(0);
        if size + SUMMARY_TOKENS < n_ctx || per_message < 100 {
            break (msgs, size);
        }
        per_message /= 2;
    };
    let (request, size) = request;
    if let (Some(deadline), Some(pace)) = (deadline, pace) {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if pace.estimate(size, SUMMARY_TOKENS) > left / 2 {
            return Ok((steps(NO_TIME), Usage::default(), false));
        }
    }
    let req = TurnRequest { deadline, answer_only: true, ..TurnRequest::new(&request, SUMMARY_TOKENS, cancel) };
    let reply = model.complete(&req)?;
    match schema.parse(&reply.text) {
        Ok(Turn::Answer { text, .. }) if text.trim().chars().count() >= MIN_SUMMARY_CHARS && !reply.cut_off => {
            Ok((text, reply.usage, true))
        }
        _ => Ok((steps(UNUSABLE), reply.usage, false)),
    }
}

/// The messages as plain text, each cut to `limit` characters.
fn transcript(middle: &[Message], limit: usize) -> String {
    middle
        .iter()
        .map(|m| {
            let who = if m.role == Role::Assistant { "agent" } else { "result" };
            let text: String = m.content.chars().take(limit).collect();
            let more = if m.content.chars().count() > limit { " [...]" } else { "" };
            format!("[{who}] {text}{more}")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// What a mechanical summary begins with: why it is one.
const UNUSABLE: &str = "(the model's summary was unusable; this is a list of the earlier steps)";
const NO_TIME: &str = "(a list of the earlier steps: a summary by the model would have taken more of the time left)";

/// A summary without the model: `head`, then each call and the first line of what came back.
fn mechanical(head: &str, middle: &[Message]) -> String {
    let first_line = |m: &Message| -> String {
        let line = m.content.lines().next().unwrap_or_default();
        let cut: String = line.chars().take(STEP_CHARS).collect();
        if cut.len() < line.len() { format!("{cut}...") } else { cut }
    };
    // One entry per step (a call and what it got); the same step repeated is one entry with a
    // count, so a model stuck in a loop does not fill the summary with copies of it.
    let mut steps: Vec<(String, usize)> = Vec::new();
    for m in middle {
        let part = if m.role == Role::Assistant {
            format!("- called: {}", first_line(m))
        } else {
            format!("\n  got: {}", first_line(m))
        };
        match steps.last_mut() {
            Some((step, _)) if m.role != Role::Assistant => step.push_str(&part),
            _ => steps.push((part, 1)),
        }
    }
    let mut merged: Vec<(String, usize)> = Vec::new();
    for (step, n) in steps {
        match merged.last_mut() {
            Some((last, count)) if *last == step => *count += n,
            _ => merged.push((step, n)),
        }
    }
    let lines: Vec<String> = merged
        .into_iter()
        .map(|(step, n)| if n > 1 { format!("{step}\n  ({n} times in a row)") } else { step })
        .collect();
    // Never longer than half of what it replaces: the oldest steps go first.
    let budget = middle.iter().map(|m| m.content.len()).sum::<usize>() / 2;
    let mut kept: Vec<&String> = Vec::new();
    let mut size = head.len();
    for line in lines.iter().rev() {
        if size + line.len() + 1 > budget && !kept.is_empty() {
            break;
        }
        size += line.len() + 1;
        kept.push(line);
    }
    let omitted = lines.len() - kept.len();
    let mut out = vec![head.to_string()];
    if omitted > 0 {
        out.push(format!("({omitted} earlier steps left out)"));
    }
    out.extend(kept.into_iter().rev().cloned());
    out.join("\n")
}

/// The most characters of a message's first line a mechanical summary keeps.
const STEP_CHARS: usize = 120;

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: five identical cut-off replies and their feedback made a "summary" as long
    /// as the messages it replaced, so compaction freed nothing (seen on the default model).
    #[test]
    fn a_mechanical_summary_collapses_repeats_and_is_shorter_than_what_it_replaces() {
        let feedback = "[invalid reply] your reply was cut off at 6 tokens before it was complete, so nothing was run. Make one shorter call: a long file can be written with write and then extended with edit.";
        let mut middle = Vec::new();
        for _ in 0..5 {
            middle.push(Message::new(Role::Assistant, "{"));
            middle.push(Message::new(Role::User, feedback));
        }
        let s = mechanical(UNUSABLE, &middle);
        let input: usize = middle.iter().map(|m| m.content.len()).sum();
        assert!(s.len() <= input / 2, "{} of {input}: {s}", s.len());
        assert!(s.contains("- called: {\n  got: [invalid reply] your reply was cut off"), "{s}");
        assert!(s.contains("(5 times in a row)"), "{s}");
    }

    /// A summary the model could not make in half the time left is not asked of it: the
    /// script has no turn, so a call to the model would fail the test.
    #[test]
    fn no_summary_is_asked_of_a_model_too_slow_for_the_time_left() {
        let mut model = crate::model::scripted::Scripted::parse(std::path::Path::new("t.script"), "").unwrap();
        let schema = TurnSchema::new(&crate::tools::Registry::native());
        let middle = vec![Message::new(Role::Assistant, "read a"), Message::new(Role::User, "x".repeat(4000))];
        let deadline = Some(std::time::Instant::now() + std::time::Duration::from_secs(60));
        let slow = Pace { prompt_ms_per_token: 20.0, generate_ms_per_token: 50.0 };
        let (text, usage, by_model) =
            summarise(&mut model, &schema, None, &middle, &Cancel::new(), deadline, Some(slow)).unwrap();
        assert!(!by_model && text.starts_with(NO_TIME), "{text}");
        assert_eq!(usage, Usage::default());
        // With time enough, the model is asked (and this script's missing turn says so).
        let fast = Pace { prompt_ms_per_token: 0.1, generate_ms_per_token: 0.1 };
        assert!(summarise(&mut model, &schema, None, &middle, &Cancel::new(), deadline, Some(fast)).is_err());
    }

    #[test]
    fn a_mechanical_summary_keeps_the_latest_steps_when_it_must_drop_some() {
        let middle: Vec<Message> = (0..40)
            .flat_map(|i| {
                [Message::new(Role::Assistant, format!("read {i}")), Message::new(Role::User, format!("result {i}"))]
            })
            .collect();
        let s = mechanical(UNUSABLE, &middle);
        assert!(s.contains("earlier steps left out"), "{s}");
        assert!(s.ends_with("- called: read 39\n  got: result 39"), "{s}");
    }
}
