//! The events a run emits. The CLI renders them (for people, or as JSON lines with `--json`),
//! the store persists them, and the tests assert on them: one stream for all three.
//!
//! The JSON form is versioned ([`EVENT_VERSION`]); docs/EVENTS.md is its schema.

use serde::Serialize;
use serde_json::Value;

use crate::model::{ModelInfo, Usage};

/// The version of the event schema. Bumped only on an incompatible change.
pub const EVENT_VERSION: u32 = 1;

/// Why a run stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model gave its final answer.
    Done,
    /// The model answered that the task cannot be done.
    GaveUp,
    /// The turn budget is spent.
    MaxTurns,
    /// The token budget (evaluated + generated) is spent.
    MaxTokens,
    /// The wall-time budget is spent.
    WallTime,
    /// The conversation no longer fits the context window.
    ContextFull,
    /// Ctrl-C (or the operator's cancel).
    Interrupted,
    /// The model could not be used (an endpoint that does not answer, say).
    ModelError,
    /// A fault of ours.
    InternalError,
}

impl StopReason {
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Done => "done",
            StopReason::GaveUp => "gave_up",
            StopReason::MaxTurns => "max_turns",
            StopReason::MaxTokens => "max_tokens",
            StopReason::WallTime => "wall_time",
            StopReason::ContextFull => "context_full",
            StopReason::Interrupted => "interrupted",
            StopReason::ModelError => "model_error",
            StopReason::InternalError => "internal_error",
        }
    }

    /// A budget ran out: the work may be incomplete but nothing failed.
    pub fn is_budget(self) -> bool {
        matches!(self, StopReason::MaxTurns | StopReason::MaxTokens | StopReason::WallTime | StopReason::ContextFull)
    }

    /// Whether a session that stopped this way can be resumed without a new task.
    pub fn resumable(self) -> bool {
        !matches!(self, StopReason::Done | StopReason::GaveUp)
    }
}

/// What the model's turn was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnKind {
    Call,
    Answer,
    /// Not a valid turn (a reply cut off at the token cap, or an endpoint's free text); the
    /// model is told why and tries again.
    Invalid,
}

/// The budgets of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Budgets {
    pub max_turns: u32,
    /// Tokens evaluated plus generated, over the run.
    pub max_tokens: u64,
    pub max_wall_ms: Option<u64>,
    /// The most tokens one reply may have.
    pub max_reply_tokens: u32,
}

/// The context check made before the first turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Preflight {
    pub n_ctx: Option<u32>,
    /// System prompt (with the tool schemas) plus the task, as the model sees them.
    pub prompt_tokens: Option<u32>,
    pub reply_tokens: u32,
    /// What must be left for the work itself (tool results and turns).
    pub working_budget: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// The model is loading; `fraction` goes from 0 to 1. Not persisted.
    Loading {
        fraction: f32,
    },
    /// The session the run works in. Not persisted (the session row is the record).
    Session {
        session: String,
        workspace: String,
        resumed: bool,
    },
    RunStart {
        seq: i64,
        model: ModelInfo,
        budgets: Budgets,
        preflight: Preflight,
        prompt_sha256: String,
        /// Settings the workspace's `abhed.toml` (a repository) tried and that were ignored
        /// because they would widen what the run may do; absent when there are none.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        config_warnings: Vec<String>,
    },
    Task {
        seq: i64,
        text: String,
    },
    ModelTurn {
        seq: i64,
        turn: u32,
        kind: TurnKind,
        raw: String,
        usage: Usage,
        cut_off: bool,
        /// For an invalid turn: what the model is told.
        #[serde(skip_serializing_if = "Option::is_none")]
        feedback: Option<String>,
        /// Only a final answer was allowed: the model had repeated one call `repeat_limit` times.
        answer_only: bool,
        /// A call the loop made for the model (`run.given_calls`), and why; such a turn has no
        /// tokens and `turn` 0. Stored with `given: true`.
        #[serde(skip_serializing_if = "Option::is_none")]
        given_why: Option<String>,
    },
    /// A piece of the reply being written (interactive mode only). Not persisted: the
    /// `model_turn` that follows holds the whole reply.
    Token {
        text: String,
    },
    /// A tool call, committed before it runs.
    ToolCall {
        seq: i64,
        tool: String,
        arguments: Value,
    },
    /// An approval decision on the call (bash, write, edit): the stored `approval` event's
    /// payload, flattened (tool, subject, decision, by, answer, policy_decision, commands,
    /// reasons).
    Approval {
        seq: i64,
        #[serde(flatten)]
        record: Value,
    },
    /// Older turns were summarised to make room: removed_messages, kept_messages,
    /// tokens_before, tokens_after, summary, summary_by (model | mechanical), plan_version, todos.
    Compaction {
        seq: i64,
        #[serde(flatten)]
        record: Value,
    },
    /// The todo list after a todo call changed or confirmed it: [{content, status}].
    Todo {
        seq: i64,
        todos: Value,
    },
    /// Its result. `interrupted`: the result was lost to a crash and is reported as such.
    ToolResult {
        seq: i64,
        action_seq: Option<i64>,
        tool: String,
        ok: bool,
        output: String,
        error_code: Option<String>,
        mutated: bool,
        duration_ms: u64,
        interrupted: bool,
    },
    /// An event of a subagent started by the `task` call `action_seq`: `index` is its place in
    /// the call, `session` its own session (whose parent is this one).
    Subagent {
        action_seq: i64,
        index: u32,
        session: String,
        description: String,
        agent_type: String,
        event: Box<Event>,
    },
    RunEnd {
        seq: i64,
        /// The hash of this run_end event as stored: the head of the session's chain when the
        /// run ended. Kept outside the store, it proves later that nothing was cut from the log.
        head: String,
        reason: StopReason,
        message: String,
        answer: Option<String>,
        turns: u32,
        tokens: u64,
        wall_ms: u64,
    },
}

impl Event {
    /// The event as one JSON line's value, with the schema version.
    pub fn to_json(&self) -> Value {
        let mut v = serde_json::to_value(self).unwrap_or(Value::Null);
        if let Value::Object(m) = &mut v {
            m.insert("v".into(), Value::from(EVENT_VERSION));
        }
        v
    }
}
