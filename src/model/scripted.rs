//! A model that replays a file of turns: for deterministic tests of the loop (budgets, stop
//! reasons, interrupted actions, resume) and of the gate. Never what makes a feature work.
//!
//! The file holds one reply per line, as the model would write it (blank lines and lines
//! starting with `//` are skipped). Directives, each on a line of its own:
//!
//! - `#sleep MS`: the next reply takes MS milliseconds (it notices Ctrl-C and the deadline);
//! - `#fault TEXT`: the next turn fails as an internal fault with TEXT;
//! - `#context-full`: the next turn fails as if the context window were full;
//! - `#n-ctx N`: the model reports a context window of N tokens (for the preflight);
//! - `#expect-prompt TEXT` / `#reject-prompt TEXT`: the next reply's prompt must (must not)
//!   contain TEXT (`\n` for a newline), else the turn fails as a fault;
//! - `#retry REPLY`: the reply when the loop asks for a turn again (`TurnRequest::vary`, after
//!   a repeated call). Without one, a turn asked again gets the previous reply again, as a
//!   deterministic model would give; a `#retry` where no turn is asked again is a fault.
//!
//! A reply "costs" one token per four bytes, so token budgets can be tested; one longer than
//! the turn's `max_tokens` is cut off there, as a model's would be.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, anyhow};

use super::{Message, Model, ModelError, ModelInfo, Reply, TurnRequest, Usage};

#[derive(Debug, Clone)]
enum Step {
    Reply { text: String, sleep_ms: u64, expect: Vec<String>, reject: Vec<String>, retry: bool },
    Fault(String),
    ContextFull,
}

pub struct Scripted {
    path: PathBuf,
    steps: Vec<Step>,
    next: usize,
    n_ctx: Option<u32>,
    /// The last reply given, for a turn asked again without a `#retry` line.
    last: Option<String>,
}

impl Scripted {
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read script {}", path.display()))?;
        Self::parse(path, &text)
    }

    pub fn parse(path: &Path, text: &str) -> Result<Self> {
        let mut steps = Vec::new();
        let mut sleep_ms = 0;
        let mut n_ctx = None;
        let mut expect = Vec::new();
        let mut reject = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with("//") {
                continue;
            }
            if let Some(ms) = line.strip_prefix("#sleep ") {
                sleep_ms = ms
                    .trim()
                    .parse()
                    .with_context(|| format!("{}:{}: #sleep takes milliseconds", path.display(), n + 1))?;
            } else if let Some(msg) = line.strip_prefix("#fault") {
                steps.push(Step::Fault(msg.trim().to_string()));
            } else if let Some(v) = line.strip_prefix("#n-ctx ") {
                n_ctx = Some(
                    v.trim().parse().with_context(|| format!("{}:{}: #n-ctx takes a number", path.display(), n + 1))?,
                );
            } else if let Some(text) = line.strip_prefix("#expect-prompt ") {
                // The prompt of the next reply must contain this text (tests of what the model
                // is shown, e.g. after compaction).
                expect.push(text.replace("\\n", "\n"));
            } else if let Some(text) = line.strip_prefix("#reject-prompt ") {
                // ... and must not (a subagent's fresh context holds none of its parent's turns).
                reject.push(text.replace("\\n", "\n"));
            } else if line == "#context-full" {
                steps.push(Step::ContextFull);
            } else if line.starts_with('#') && !line.starts_with("#retry ") {
                return Err(anyhow!("{}:{}: unknown directive {line}", path.display(), n + 1));
            } else {
                let (text, retry) = line.strip_prefix("#retry ").map_or((line, false), |t| (t, true));
                steps.push(Step::Reply {
                    text: text.to_string(),
                    sleep_ms,
                    expect: std::mem::take(&mut expect),
                    reject: std::mem::take(&mut reject),
                    retry,
                });
                sleep_ms = 0;
            }
        }
        Ok(Scripted { path: path.to_path_buf(), steps, next: 0, n_ctx, last: None })
    }
}

fn tokens(text: &str) -> u32 {
    text.len().div_ceil(4) as u32
}

/// `text` as far as `max_tokens` reach, and whether that cut it.
fn cut(text: &str, max_tokens: u32) -> (String, bool) {
    let mut end = text.len().min(max_tokens as usize * 4);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (text[..end].to_string(), end < text.len())
}

impl Model for Scripted {
    fn describe(&self) -> ModelInfo {
        ModelInfo {
            adapter: "scripted".into(),
            name: self.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
            location: self.path.display().to_string(),
            protocol: super::JSON_TURN.into(),
            ..ModelInfo::default()
        }
    }

    fn n_ctx(&self) -> Option<u32> {
        self.n_ctx
    }

    fn count_tokens(&self, messages: &[Message]) -> Result<Option<u32>, ModelError> {
        Ok(Some(messages.iter().map(|m| tokens(&m.content)).sum()))
    }

    // In turn, so a script lists each subagent's turns after the parent's task call.
    fn run_parallel<'s>(&mut self, jobs: Vec<super::Job<'s>>) -> Result<(), ModelError> {
        super::run_in_turn(self, jobs)
    }

    fn complete(&mut self, req: &TurnRequest<'_>) -> Result<Reply, ModelError> {
        let retry_next = matches!(self.steps.get(self.next), Some(Step::Reply { retry: true, .. }));
        match (req.vary > 0, retry_next, &self.last) {
            (true, false, Some(last)) => {
                let (text, cut_off) = cut(last, req.max_tokens);
                let usage = Usage { generated_tokens: tokens(&text), ..Usage::default() };
                return Ok(Reply { text, usage, cut_off });
            }
            (false, true, _) => {
                return Err(ModelError::Fault(anyhow!(
                    "the script {} has a #retry at turn {} where the turn was not asked again",
                    self.path.display(),
                    self.next + 1
                )));
            }
            _ => {}
        }
        let step = self.steps.get(self.next).cloned().ok_or_else(|| {
            anyhow!("the script {} has no turn {} (it has {})", self.path.display(), self.next + 1, self.steps.len())
        })?;
        self.next += 1;
        match step {
            Step::Fault(msg) => Err(ModelError::Fault(anyhow!("scripted fault: {msg}"))),
            Step::ContextFull => Err(ModelError::ContextFull { needed: 2, prompt: 1, reply: 1, n_ctx: 1 }),
            Step::Reply { text, sleep_ms, expect, reject, .. } => {
                let prompt_text: String =
                    req.messages.iter().map(|m| m.content.as_str()).collect::<Vec<_>>().join("\n");
                if let Some(missing) = expect.iter().find(|e| !prompt_text.contains(e.as_str())) {
                    return Err(ModelError::Fault(anyhow!(
                        "scripted turn {}: the prompt does not contain {missing:?}",
                        self.next
                    )));
                }
                if let Some(found) = reject.iter().find(|r| prompt_text.contains(r.as_str())) {
                    return Err(ModelError::Fault(anyhow!(
                        "scripted turn {}: the prompt contains {found:?}",
                        self.next
                    )));
                }
                let start = Instant::now();
                while start.elapsed() < Duration::from_millis(sleep_ms) {
                    if req.should_stop() {
                        return Err(ModelError::Cancelled);
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                if let Some(tell) = req.on_token {
                    tell(&text);
                }
                let (text, cut_off) = cut(&text, req.max_tokens);
                let prompt = self.count_tokens(req.messages)?.unwrap_or(0);
                let usage = Usage {
                    prompt_tokens: prompt,
                    evaluated_tokens: prompt,
                    generated_tokens: tokens(&text),
                    generate_ms: start.elapsed().as_millis() as u64,
                    ..Usage::default()
                };
                self.last = Some(text.clone());
                Ok(Reply { text, usage, cut_off })
            }
        }
    }
}
