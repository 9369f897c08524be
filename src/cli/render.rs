//! Rendering a run's events: for people (progress on stderr, the final answer on stdout), or as
//! JSON lines on stdout (`--json`).

use std::io::Write as _;

use indicatif::{ProgressBar, ProgressStyle};
use serde_json::Value;

use abhed::agent::events::TurnKind;
use abhed::agent::{Event, StopReason};

use super::{Failure, print_stdout};

pub struct Renderer {
    json: bool,
    bar: Option<ProgressBar>,
    /// A streamed reply is on the current stderr line.
    streaming: bool,
}

/// The most characters of a tool result shown on one progress line.
const PREVIEW_CHARS: usize = 160;

impl Renderer {
    pub fn new(json: bool) -> Self {
        Renderer { json, bar: None, streaming: false }
    }

    pub fn render(&mut self, ev: &Event) -> Result<(), Failure> {
        if let Event::Loading { fraction } = ev {
            // Loading progress is for people; the JSON stream starts with the session.
            if !self.json {
                let bar = self.bar.get_or_insert_with(|| {
                    let b = ProgressBar::with_draw_target(Some(1000), indicatif::ProgressDrawTarget::stderr());
                    if let Ok(style) = ProgressStyle::with_template("loading model {bar:30} {percent:>3}%") {
                        b.set_style(style);
                    }
                    b
                });
                bar.set_position((fraction * 1000.0) as u64);
            }
            return Ok(());
        }
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
        if self.json {
            return print_stdout(&format!("{}\n", ev.to_json()));
        }
        self.human(ev)
    }

    pub fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }

    fn human(&mut self, ev: &Event) -> Result<(), Failure> {
        if let Event::Token { text } = ev {
            let mut e = std::io::stderr();
            if !self.streaming {
                let _ = write!(e, "  ");
                self.streaming = true;
            }
            let _ = write!(e, "{}", text.replace('\n', "\n  "));
            let _ = e.flush();
            return Ok(());
        }
        if std::mem::take(&mut self.streaming) {
            err("");
        }
        match ev {
            Event::Token { .. } => {}
            Event::Loading { .. } => {}
            Event::Session { session, workspace, resumed } => {
                let how = if *resumed { "resumed" } else { "new" };
                err(&format!("session {session} ({how}) in {workspace}"));
            }
            Event::RunStart { model, preflight, .. } => {
                let mut facts = vec![model.adapter.clone()];
                if let Some(n) = model.n_ctx {
                    facts.push(format!("n_ctx {n}"));
                }
                if let Some(t) = model.threads {
                    facts.push(format!("{t} threads"));
                }
                if let Some(p) = preflight.prompt_tokens {
                    facts.push(format!("prompt {p} tokens"));
                }
                err(&format!("model {} ({})", model.name, facts.join(", ")));
            }
            Event::Task { .. } => {}
            // The call itself is shown by its tool_call line.
            Event::ModelTurn { given_why: Some(why), .. } => err(&format!("[given] {why}")),
            Event::ModelTurn { turn, kind, usage, feedback, raw, .. } => {
                let speed = if usage.generate_ms > 0 {
                    format!(", {:.1} tok/s", f64::from(usage.generated_tokens) * 1000.0 / usage.generate_ms as f64)
                } else {
                    String::new()
                };
                let stats = format!(
                    "{} new prompt tokens ({} cached), {} generated{speed}",
                    usage.evaluated_tokens, usage.cached_tokens, usage.generated_tokens
                );
                match kind {
                    TurnKind::Invalid => err(&format!(
                        "[{turn}] invalid reply ({stats}): {}\n      reply was: {}",
                        feedback.as_deref().unwrap_or_default(),
                        preview(raw)
                    )),
                    TurnKind::Answer if feedback.is_some() => err(&format!(
                        "[{turn}] answer sent back ({stats}): {}\n      answer was: {}",
                        preview(feedback.as_deref().unwrap_or_default()),
                        preview(raw)
                    )),
                    _ => err(&format!("[{turn}] {stats}")),
                }
            }
            Event::ToolCall { .. } | Event::ToolResult { .. } => {
                err(&format!("  {}", tool_line(ev).unwrap_or_default()));
            }
            Event::Approval { record, .. } => {
                // Only what stopped or needed someone; a policy allow is routine.
                if record["decision"] != "allowed" || record["by"] != "policy" {
                    let by = record["by"].as_str().unwrap_or_default().replace('_', " ");
                    let decision = record["decision"].as_str().unwrap_or_default();
                    err(&format!(
                        "  !! approval {decision} ({by}): {}",
                        preview(record["subject"].as_str().unwrap_or_default())
                    ));
                }
            }
            Event::Compaction { record, .. } => {
                err(&format!(
                    "  ~~ compacted: {} older messages summarised ({} -> {} tokens; summary: {})",
                    record["removed_messages"],
                    record["tokens_before"],
                    record["tokens_after"],
                    record["summary_by"].as_str().unwrap_or_default()
                ));
            }
            Event::Todo { todos, .. } => {
                if let Ok(items) = serde_json::from_value::<Vec<abhed::tools::todo::Item>>(todos.clone()) {
                    for line in abhed::tools::todo::render(&items).lines() {
                        err(&format!("     {line}"));
                    }
                }
            }
            Event::Subagent { index, description, agent_type, event, .. } => {
                if let Some(line) = subagent_line(event) {
                    err(&format!("    [{} {agent_type}: {}] {line}", index + 1, preview(description)));
                }
            }
            Event::RunEnd { reason, message, answer, turns, tokens, wall_ms, head, .. } => {
                // The chain's head, for an operator to keep elsewhere (`sessions verify --head`).
                err(&format!("log head: {head}"));
                let summary = format!("{} turns, {tokens} tokens, {:.1} s", turns, *wall_ms as f64 / 1000.0);
                match reason {
                    StopReason::Done | StopReason::GaveUp => {
                        err(&format!("{} ({summary})", reason.as_str().replace('_', " ")));
                        let mut text = answer.clone().unwrap_or_default();
                        if !text.ends_with('\n') {
                            text.push('\n');
                        }
                        print_stdout(&text)?;
                    }
                    _ => err(&format!("stopped: {}: {message} ({summary})", reason.as_str())),
                }
            }
        }
        Ok(())
    }
}

/// What a person sees of a subagent's event: its calls, their results and its end. Its
/// answer goes to its parent, never to stdout.
fn subagent_line(ev: &Event) -> Option<String> {
    Some(match ev {
        Event::Session { session, .. } => format!("started, session {session}"),
        Event::ToolCall { .. } | Event::ToolResult { .. } => tool_line(ev)?,
        Event::ModelTurn { kind: TurnKind::Invalid, feedback, .. } => {
            format!("invalid reply: {}", preview(feedback.as_deref().unwrap_or_default()))
        }
        Event::RunEnd { reason, message, turns, tokens, .. } => {
            format!("{}: {message} ({turns} turns, {tokens} tokens)", reason.as_str().replace('_', " "))
        }
        Event::Subagent { event, .. } => subagent_line(event)?,
        _ => return None,
    })
}

/// A tool call (`-> tool {args}`) or its result (`<- ok: ...`) on one line, for the run's own
/// progress and a subagent's alike.
fn tool_line(ev: &Event) -> Option<String> {
    Some(match ev {
        Event::ToolCall { tool, arguments, .. } => format!("-> {tool} {}", preview(&compact(arguments))),
        Event::ToolResult { ok, output, error_code, interrupted, .. } => {
            let head = if *interrupted {
                "interrupted".to_string()
            } else if *ok {
                "ok".to_string()
            } else {
                format!("error {}", error_code.as_deref().unwrap_or_default())
            };
            format!("<- {head}: {}", preview(output))
        }
        _ => return None,
    })
}

fn compact(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// One line, at most [`PREVIEW_CHARS`].
fn preview(text: &str) -> String {
    let one: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one.chars().count() > PREVIEW_CHARS {
        format!("{}...", one.chars().take(PREVIEW_CHARS).collect::<String>())
    } else {
        one
    }
}

fn err(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}
