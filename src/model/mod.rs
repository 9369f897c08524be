//! The model layer: what a model is asked (a conversation) and what it answers (one turn),
//! behind one trait with three adapters:
//!
//! - [`llama`]: llama.cpp in-process (the default), grammar-constrained, KV cache reused;
//! - [`openai`]: an OpenAI-compatible chat endpoint on the local network;
//! - [`scripted`]: replays a file of turns, for deterministic loop tests only.
//!
//! The turn protocol (one JSON object: a tool call or a final answer) lives in [`protocol`].

pub mod llama;
pub mod locate;
pub mod native;
pub mod openai;
pub mod protocol;
pub mod repeat;
pub mod scripted;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::{Deserialize, Serialize};

pub use protocol::{Turn, TurnSchema};

/// One tool call exactly as a model emits it: a tool name and the raw JSON text of its
/// arguments. The text stays raw so that a malformed call is recorded as the model wrote it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    pub name: String,
    pub arguments: String,
}

/// Who said a message. Tool results go to the model as `user` messages with a header: every
/// chat template knows `user`, few agree on a tool role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    System,
    User,
    Assistant,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    pub content: String,
    /// Bytes at the start of `content` that are the same in every session (the system prompt
    /// before its workspace part): an adapter that saves evaluated state saves that much, so
    /// one saved state serves every workspace. A hint for caching only; never stored.
    #[serde(skip)]
    pub shared_prefix: Option<usize>,
}

impl Message {
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        Message { role, content: content.into(), shared_prefix: None }
    }

    /// This message, with its first `len` bytes marked as the same in every session.
    pub fn with_shared_prefix(mut self, len: usize) -> Self {
        self.shared_prefix = Some(len);
        self
    }
}

/// What one turn is asked: the whole conversation so far (the first message is the system
/// prompt). Adapters that keep state (the KV cache) work out for themselves what is new.
pub struct TurnRequest<'a> {
    pub messages: &'a [Message],
    /// The most tokens the reply may have.
    pub max_tokens: u32,
    /// Set by Ctrl-C; an adapter checks it, and the deadline, between tokens.
    pub cancel: &'a Cancel,
    /// The wall-time budget's end.
    pub deadline: Option<std::time::Instant>,
    /// Only a final answer is allowed this turn: the loop's repeat guard, after the model made
    /// the same call too many times in a row. Adapters with a grammar enforce it.
    pub answer_only: bool,
    /// Only a tool call is allowed this turn: a task's first turn (`run.first_turn_acts`), or
    /// the turn after a failed call (`run.act_after_error`).
    /// Adapters with a grammar enforce it; `answer_only` wins when both are set.
    pub call_only: bool,
    /// Only a call of this tool is allowed this turn (with `call_only`): the task names the
    /// tool to use, and no call of it has worked yet. Adapters with a grammar enforce it.
    pub only_tool: Option<&'a str>,
    /// 0: decode as configured. n > 0: the n-th try again of a turn whose reply repeated a
    /// call (`run.resample_repeats`): decode with at least [`VARY_TEMPERATURE`] and a seed
    /// that depends on n, so that the reply can differ and a run stays reproducible.
    pub vary: u32,
    /// Told each piece of the reply as it is generated (interactive mode streams them), where
    /// the adapter generates token by token.
    pub on_token: Option<&'a dyn Fn(&str)>,
}

/// The temperature of a turn asked for again (`TurnRequest::vary`).
pub const VARY_TEMPERATURE: f32 = 0.7;

impl<'a> TurnRequest<'a> {
    /// A plain turn: either a call or an answer, no deadline, decoded as configured, not streamed.
    pub fn new(messages: &'a [Message], max_tokens: u32, cancel: &'a Cancel) -> TurnRequest<'a> {
        TurnRequest {
            messages,
            max_tokens,
            cancel,
            deadline: None,
            answer_only: false,
            call_only: false,
            only_tool: None,
            vary: 0,
            on_token: None,
        }
    }

    /// The temperature and seed to decode this turn with, given the configured ones.
    pub fn decoding(&self, temperature: f32, seed: u32) -> (f32, u32) {
        if self.vary == 0 {
            (temperature, seed)
        } else {
            (temperature.max(VARY_TEMPERATURE), seed.wrapping_add(self.vary))
        }
    }

    /// Whether the adapter should stop now (Ctrl-C, or the wall-time budget is spent).
    pub fn should_stop(&self) -> bool {
        self.cancel.is_cancelled() || self.deadline.is_some_and(|d| std::time::Instant::now() >= d)
    }
}

/// Token and time accounting of one turn.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens in the prompt of this turn.
    pub prompt_tokens: u32,
    /// Of those, tokens whose state was already in the cache (not evaluated again).
    pub cached_tokens: u32,
    /// Of those, tokens evaluated this turn (`prompt_tokens - cached_tokens`).
    pub evaluated_tokens: u32,
    /// Tokens the model generated.
    pub generated_tokens: u32,
    /// Time spent evaluating the prompt, and generating.
    pub prompt_ms: u64,
    pub generate_ms: u64,
    /// Tokens the grammar had to correct: the model's own pick was rejected and the best
    /// allowed token taken instead.
    pub grammar_resamples: u32,
}

/// The raw reply of one turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub text: String,
    pub usage: Usage,
    /// The reply hit `max_tokens` before it was complete, or was stopped in a loop
    /// ([`repeat::looping_block`]).
    pub cut_off: bool,
}

/// Why a turn produced no reply.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The conversation no longer fits the context window. Not a bug: the run ends with the
    /// budget stop reason `context_full`.
    #[error(
        "the conversation needs {needed} tokens (prompt {prompt} + {reply} for the reply) but the context window holds {n_ctx}"
    )]
    ContextFull { needed: u32, prompt: u32, reply: u32, n_ctx: u32 },
    /// The run was cancelled (Ctrl-C or the wall-time budget) while the model worked.
    #[error("cancelled while the model was working")]
    Cancelled,
    /// A remote endpoint did not answer, or answered with an error.
    #[error("{0}")]
    Endpoint(String),
    /// Anything else: a fault, reported and recorded, never shown to the model as its mistake.
    #[error(transparent)]
    Fault(#[from] anyhow::Error),
}

/// A model the loop can drive.
pub trait Model {
    /// What the model is, for the run's record: adapter, name, location, sha256, context.
    fn describe(&self) -> ModelInfo;
    /// The context window in tokens, where the adapter knows it.
    fn n_ctx(&self) -> Option<u32>;
    /// Tokens `messages` take as a prompt, where the adapter can count them.
    fn count_tokens(&self, messages: &[Message]) -> Result<Option<u32>, ModelError>;
    /// One assistant turn.
    fn complete(&mut self, req: &TurnRequest<'_>) -> Result<Reply, ModelError>;
    /// Run `jobs` (subagents), each on a fresh conversation through the model it is handed,
    /// and return when all have ended. The llama adapter runs them at once, as parallel
    /// sequences of one context; the others run them one after another ([`run_in_turn`]).
    fn run_parallel<'s>(&mut self, jobs: Vec<Job<'s>>) -> Result<(), ModelError>;
}

/// One conversation run by [`Model::run_parallel`]: it gets a model of its own for its turns.
pub type Job<'s> = Box<dyn FnOnce(&mut dyn Model) + Send + 's>;

/// [`Model::run_parallel`] for an adapter without a state of its own per conversation: each job
/// in turn, on the same model.
pub fn run_in_turn(model: &mut dyn Model, jobs: Vec<Job<'_>>) -> Result<(), ModelError> {
    for job in jobs {
        job(model);
    }
    Ok(())
}

/// Facts about a model, for the record and for people.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelInfo {
    /// `llama`, `openai` or `scripted`.
    pub adapter: String,
    pub name: String,
    /// The GGUF's path, the endpoint URL, or the script's path.
    pub location: String,
    /// The GGUF's sha256 (the key of conformance results), when there is a file.
    pub sha256: Option<String>,
    pub n_ctx: Option<u32>,
    /// The chat template in use: `gguf` (the model's own) or the name of a built-in one.
    pub template: Option<String>,
    pub threads: Option<u32>,
    /// How turns are asked for and read: `json-turn` (one JSON object per turn, under a
    /// grammar where the adapter has one).
    #[serde(default = "json_turn")]
    pub protocol: String,
}

fn json_turn() -> String {
    JSON_TURN.to_string()
}

/// The protocol of one JSON object per turn (docs/ARCHITECTURE.md).
pub const JSON_TURN: &str = "json-turn";

/// A cancellation flag shared by the loop, the adapter and the Ctrl-C handler. A child flag
/// (a group of subagents) is also cancelled by its parent's, but cancelling it leaves the parent
/// running.
#[derive(Debug, Clone, Default)]
pub struct Cancel {
    flag: Arc<AtomicBool>,
    parent: Option<Box<Cancel>>,
}

impl Cancel {
    pub fn new() -> Self {
        Cancel::default()
    }
    /// A flag that is cancelled with this one, or on its own.
    pub fn child(&self) -> Cancel {
        Cancel { flag: Arc::default(), parent: Some(Box::new(self.clone())) }
    }
    pub fn cancel(&self) {
        self.flag.store(true, Ordering::SeqCst);
    }
    pub fn is_cancelled(&self) -> bool {
        self.flag.load(Ordering::SeqCst) || self.parent.as_ref().is_some_and(|p| p.is_cancelled())
    }
    /// The flag itself, for a signal handler.
    pub fn flag(&self) -> Arc<AtomicBool> {
        self.flag.clone()
    }
    /// Clear this flag (not its parent's): interactive mode stops a turn on Ctrl-C, then goes on.
    pub fn reset(&self) {
        self.flag.store(false, Ordering::SeqCst);
    }
}
