//! The task suite's report: one row per task and the totals, stored per model.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::runner::Limits;
use crate::conformance::report::ItemError;
use crate::model::ModelInfo;

/// Bumped when the stored shape changes.
pub const EVAL_REPORT_VERSION: u32 = 1;

/// What came of one task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskResult {
    pub name: String,
    pub tags: Vec<String>,
    pub passed: bool,
    /// Why it did not pass (empty when it did).
    pub why: String,
    /// How the run ended (a stop reason).
    pub stop: String,
    pub turns: u32,
    /// Turns that were not a valid turn (cut off, or not in the protocol's shape).
    pub invalid_turns: u32,
    pub calls: u32,
    pub failed_calls: u32,
    pub tokens: u64,
    pub wall_ms: u64,
    /// The final answer, cut at 400 characters.
    pub answer: String,
    /// The end of the check's output, when it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub check_output: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalReport {
    pub v: u32,
    /// The model's key in the store (as for conformance reports).
    pub key: String,
    pub model: ModelInfo,
    /// How the model's turns were asked for and read.
    pub protocol: String,
    pub abhed_version: String,
    pub suite_digest: String,
    pub started_at: String,
    pub wall_ms: u64,
    pub limits: Limits,
    /// The task filter, when not every task ran.
    pub filter: Vec<String>,
    pub tasks: Vec<TaskResult>,
    /// Tasks that could not run, by our fault or the suite's.
    pub errors: Vec<ItemError>,
}

/// The sums over the tasks.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Totals {
    pub tasks: u32,
    pub passed: u32,
    pub turns: u32,
    pub tokens: u64,
    pub wall_ms: u64,
    /// Tasks passed per hour of wall time.
    pub passed_per_hour: f64,
}

impl EvalReport {
    pub fn totals(&self) -> Totals {
        let wall_ms: u64 = self.tasks.iter().map(|t| t.wall_ms).sum();
        let passed = self.tasks.iter().filter(|t| t.passed).count() as u32;
        Totals {
            tasks: (self.tasks.len() + self.errors.len()) as u32,
            passed,
            turns: self.tasks.iter().map(|t| t.turns).sum(),
            tokens: self.tasks.iter().map(|t| t.tokens).sum(),
            wall_ms,
            passed_per_hour: if wall_ms == 0 { 0.0 } else { f64::from(passed) * 3_600_000.0 / wall_ms as f64 },
        }
    }

    /// The stored and `--json` form: the report with its totals.
    pub fn to_json(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(self).unwrap_or_default();
        if let Some(o) = v.as_object_mut() {
            o.insert("totals".into(), serde_json::to_value(self.totals()).unwrap_or_default());
        }
        v
    }

    /// The report as the operator reads it.
    pub fn render(&self) -> String {
        let t = self.totals();
        let mut s = String::new();
        let _ = writeln!(
            s,
            "eval: {} ({}), protocol {}, {} threads, n_ctx {}",
            self.model.name,
            self.model.location,
            self.protocol,
            self.model.threads.map_or("?".into(), |n| n.to_string()),
            self.model.n_ctx.map_or("?".into(), |n| n.to_string())
        );
        let _ =
            writeln!(s, "{:<40} {:<6} {:>5} {:>8} {:>8}  stop / why", "task", "result", "turns", "tokens", "wall s");
        for r in &self.tasks {
            let _ = writeln!(
                s,
                "{:<40} {:<6} {:>5} {:>8} {:>8.1}  {}{}",
                r.name,
                if r.passed { "pass" } else { "FAIL" },
                r.turns,
                r.tokens,
                r.wall_ms as f64 / 1000.0,
                r.stop,
                if r.why.is_empty() { String::new() } else { format!(": {}", r.why) }
            );
        }
        for e in &self.errors {
            let _ = writeln!(s, "{:<40} ERROR  (ours, not the model's) {}", e.name, e.error);
        }
        let _ = writeln!(
            s,
            "\npassed {} of {} ({:.0}%), {} turns, {} tokens, {:.1} min, {:.1} tasks passed per hour",
            t.passed,
            t.tasks,
            if t.tasks == 0 { 0.0 } else { f64::from(t.passed) * 100.0 / f64::from(t.tasks) },
            t.turns,
            t.tokens,
            t.wall_ms as f64 / 60_000.0,
            t.passed_per_hour
        );
        s
    }
}
