//! The conformance report: what each part found, the rates derived from it, and the verdict
//! under the operator's thresholds. Stored whole (JSON) in the session store, keyed by the
//! model; the verdict is worked out again from the stored rates whenever the gate asks, so
//! a change of thresholds needs no new probe.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::probe::{RunLimits, TaskResult, Variant};
use crate::config::ConformanceConfig;
use crate::model::ModelInfo;

/// The version of the report's JSON shape.
pub const REPORT_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub v: u32,
    /// What the report is stored under: `sha256:<hex>` for a GGUF, `endpoint:<url>#<model>`,
    /// `script:<sha256>` for a scripted model.
    pub key: String,
    pub model: ModelInfo,
    pub abhed_version: String,
    /// The suite's fingerprint ([`super::Suite::digest`]).
    pub suite_digest: String,
    pub started_at: String,
    pub wall_ms: u64,
    pub limits: RunLimits,
    pub context: ContextCheck,
    pub harness: HarnessResult,
    pub probe: Vec<TaskResult>,
    pub recovery: Vec<TaskResult>,
    /// Items that could not run: a fault of ours or of the suite, never the model's doing.
    pub errors: Vec<ItemError>,
}

/// The context preflight: what the model's window leaves for the work.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextCheck {
    pub n_ctx: Option<u32>,
    /// The system prompt with the nine tools' schemas.
    pub prompt_tokens: Option<u32>,
    /// One reply, as runs are configured (`model.max_reply_tokens`).
    pub reply_tokens: u32,
    /// What is left for tasks, tool results and turns: n_ctx - prompt - reply.
    pub working_budget_left: Option<i64>,
    /// What a run's preflight requires (`run.working_budget`).
    pub working_budget_needed: u32,
}

impl ContextCheck {
    pub fn new(n_ctx: Option<u32>, prompt_tokens: Option<u32>, reply_tokens: u32, needed: u32) -> Self {
        let left = n_ctx.zip(prompt_tokens).map(|(n, p)| i64::from(n) - i64::from(p) - i64::from(reply_tokens));
        ContextCheck { n_ctx, prompt_tokens, reply_tokens, working_budget_left: left, working_budget_needed: needed }
    }
    /// `None` when the model cannot count tokens.
    pub fn fits(&self) -> Option<bool> {
        self.working_budget_left.map(|l| l >= i64::from(self.working_budget_needed))
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HarnessResult {
    pub cases: u32,
    pub passed: u32,
    /// `name: first failure` of each case that failed.
    pub failed: Vec<String>,
    pub wall_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ItemError {
    pub name: String,
    pub error: String,
}

/// One tool's line of the probe.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolSummary {
    pub tool: String,
    pub tasks: u32,
    pub passed: u32,
    pub pass_rate: f64,
    /// Calls of this tool the model made in the probe, and how many the tool accepted.
    pub calls: u32,
    pub valid_calls: u32,
    pub call_validity: Option<f64>,
}

/// One recovery scenario's line: instances recovered, with our messages and with bare ones.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScenarioSummary {
    pub scenario: String,
    pub instructive: Rate,
    pub bare: Rate,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Rate {
    pub runs: u32,
    pub passed: u32,
    pub rate: Option<f64>,
}

impl Rate {
    fn add(&mut self, passed: bool) {
        self.runs += 1;
        self.passed += u32::from(passed);
        self.rate = Some(f64::from(self.passed) / f64::from(self.runs));
    }
}

/// The headline figures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Totals {
    pub probe: Rate,
    /// Valid calls over all probe turns that were meant as calls (calls plus invalid turns).
    pub call_validity: Option<f64>,
    pub calls: u32,
    pub valid_calls: u32,
    pub invalid_turns: u32,
    pub recovery_instructive: Rate,
    pub recovery_bare: Rate,
}

/// Whether the model may serve, and every reason it may not.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    pub pass: bool,
    pub reasons: Vec<String>,
}

impl Report {
    pub fn tools(&self) -> Vec<ToolSummary> {
        let mut by: BTreeMap<&str, ToolSummary> = BTreeMap::new();
        for r in &self.probe {
            let s = by.entry(r.group.as_str()).or_insert_with(|| empty_tool(&r.group));
            s.tasks += 1;
            s.passed += u32::from(r.passed);
        }
        for r in &self.probe {
            for c in &r.calls {
                let s = by.entry(c.tool.as_str()).or_insert_with(|| empty_tool(&c.tool));
                s.calls += 1;
                s.valid_calls += u32::from(c.valid);
            }
        }
        by.into_values()
            .map(|mut s| {
                s.pass_rate = if s.tasks == 0 { 0.0 } else { f64::from(s.passed) / f64::from(s.tasks) };
                s.call_validity = (s.calls > 0).then(|| f64::from(s.valid_calls) / f64::from(s.calls));
                s
            })
            .collect()
    }

    pub fn scenarios(&self) -> Vec<ScenarioSummary> {
        let mut by: BTreeMap<&str, ScenarioSummary> = BTreeMap::new();
        for r in &self.recovery {
            let s = by.entry(r.group.as_str()).or_insert_with(|| ScenarioSummary {
                scenario: r.group.clone(),
                instructive: Rate::default(),
                bare: Rate::default(),
            });
            match r.variant {
                Some(Variant::Bare) => s.bare.add(r.passed),
                _ => s.instructive.add(r.passed),
            }
        }
        by.into_values().collect()
    }

    pub fn totals(&self) -> Totals {
        let mut t = Totals::default();
        for r in &self.probe {
            t.probe.add(r.passed);
            t.invalid_turns += r.invalid_turns;
            t.calls += r.calls.len() as u32;
            t.valid_calls += r.calls.iter().filter(|c| c.valid).count() as u32;
        }
        let meant = t.calls + t.invalid_turns;
        t.call_validity = (meant > 0).then(|| f64::from(t.valid_calls) / f64::from(meant));
        for r in &self.recovery {
            match r.variant {
                Some(Variant::Bare) => t.recovery_bare.add(r.passed),
                _ => t.recovery_instructive.add(r.passed),
            }
        }
        t
    }

    /// Whether the model may serve under `th`.
    pub fn verdict(&self, th: &ConformanceConfig) -> Verdict {
        let mut reasons = Vec::new();
        if !self.errors.is_empty() {
            reasons
                .push(format!("{} items could not run (see errors), so the report is incomplete", self.errors.len()));
        }
        if self.harness.cases == 0 || self.harness.passed < self.harness.cases {
            reasons.push(format!(
                "harness: {} of {} tool-contract cases pass; this build's tools are broken",
                self.harness.passed, self.harness.cases
            ));
        }
        let t = self.totals();
        if self.probe.is_empty() {
            reasons.push("the capability probe did not run".into());
        } else {
            let rate = t.probe.rate.unwrap_or(0.0);
            if rate < th.min_pass_rate {
                reasons.push(format!("probe: pass rate {} < min_pass_rate {}", pct(rate), pct(th.min_pass_rate)));
            }
            for s in self.tools().iter().filter(|s| s.tasks > 0 && s.pass_rate < th.min_tool_pass_rate) {
                reasons.push(format!(
                    "probe: {} passed {} of {} tasks ({} < min_tool_pass_rate {})",
                    s.tool,
                    s.passed,
                    s.tasks,
                    pct(s.pass_rate),
                    pct(th.min_tool_pass_rate)
                ));
            }
            let validity = t.call_validity.unwrap_or(0.0);
            if validity < th.min_call_validity {
                reasons.push(format!(
                    "probe: call validity {} < min_call_validity {}",
                    pct(validity),
                    pct(th.min_call_validity)
                ));
            }
        }
        match t.recovery_instructive.rate {
            None => reasons.push("error recovery did not run".into()),
            Some(r) if r < th.min_recovery_rate => {
                reasons.push(format!("recovery: {} < min_recovery_rate {}", pct(r), pct(th.min_recovery_rate)))
            }
            Some(_) => {}
        }
        if self.context.fits() == Some(false) {
            reasons.push(format!(
                "context: {} tokens left for the work, run.working_budget needs {}; raise the context (--ctx)",
                self.context.working_budget_left.unwrap_or(0),
                self.context.working_budget_needed
            ));
        }
        Verdict { pass: reasons.is_empty(), reasons }
    }

    /// The report as stored and as `--json` prints it: the results, the summaries derived
    /// from them, and the verdict under `th`.
    pub fn to_json(&self, th: &ConformanceConfig) -> Value {
        let mut v = serde_json::to_value(self).unwrap_or(Value::Null);
        if let Value::Object(m) = &mut v {
            m.insert("tools".into(), serde_json::to_value(self.tools()).unwrap_or(Value::Null));
            m.insert("scenarios".into(), serde_json::to_value(self.scenarios()).unwrap_or(Value::Null));
            m.insert("totals".into(), serde_json::to_value(self.totals()).unwrap_or(Value::Null));
            m.insert("thresholds".into(), serde_json::to_value(th).unwrap_or(Value::Null));
            m.insert("verdict".into(), serde_json::to_value(self.verdict(th)).unwrap_or(Value::Null));
        }
        v
    }

    /// The report for people.
    pub fn render(&self, th: &ConformanceConfig) -> String {
        let mut o = String::new();
        let sha =
            self.model.sha256.as_deref().map(|s| format!(" (sha256 {})", &s[..s.len().min(16)])).unwrap_or_default();
        let _ = writeln!(o, "abhed conformance: {} [{}]{sha}", self.model.name, self.model.adapter);
        let _ = writeln!(
            o,
            "abhed {}, suite {}, {}, {}",
            self.abhed_version,
            &self.suite_digest[..self.suite_digest.len().min(12)],
            self.started_at,
            duration(self.wall_ms)
        );
        let c = &self.context;
        let n = |v: Option<u32>| v.map_or("?".to_string(), |v| v.to_string());
        let _ = writeln!(
            o,
            "\ncontext   n_ctx {}; system prompt with the tool schemas {} tokens; one reply {}; left for the work {} (run.working_budget needs {}){}",
            n(c.n_ctx),
            n(c.prompt_tokens),
            c.reply_tokens,
            c.working_budget_left.map_or("?".to_string(), |v| v.to_string()),
            c.working_budget_needed,
            match c.fits() {
                Some(true) => ": fits",
                Some(false) => ": TOO SMALL",
                None => "",
            }
        );
        let h = &self.harness;
        let _ =
            writeln!(o, "\nharness   {} of {} tool-contract cases pass ({})", h.passed, h.cases, duration(h.wall_ms));
        for f in &h.failed {
            let _ = writeln!(o, "          FAIL {f}");
        }
        if !self.probe.is_empty() {
            let _ =
                writeln!(o, "\nprobe     {:<8} {:>6} {:>7} {:>6} {:>6}", "tool", "tasks", "passed", "calls", "valid");
            for s in self.tools() {
                let _ = writeln!(
                    o,
                    "          {:<8} {:>6} {:>7} {:>6} {:>6}",
                    s.tool, s.tasks, s.passed, s.calls, s.valid_calls
                );
            }
            let t = self.totals();
            let _ = writeln!(
                o,
                "          {:<8} {:>6} {:>7} {:>6} {:>6}   pass rate {}, call validity {} ({} turns were not valid JSON)",
                "all",
                t.probe.runs,
                t.probe.passed,
                t.calls,
                t.valid_calls,
                pct(t.probe.rate.unwrap_or(0.0)),
                t.call_validity.map_or("-".into(), pct),
                t.invalid_turns
            );
        }
        if !self.recovery.is_empty() {
            let _ = writeln!(o, "\nrecovery  {:<22} {:>12} {:>8}", "scenario", "our errors", "bare");
            for s in self.scenarios() {
                let _ = writeln!(o, "          {:<22} {:>12} {:>8}", s.scenario, frac(s.instructive), frac(s.bare));
            }
            let t = self.totals();
            let _ = writeln!(
                o,
                "          {:<22} {:>12} {:>8}   recovered: {} with our messages, {} with bare ones",
                "all",
                frac(t.recovery_instructive),
                frac(t.recovery_bare),
                t.recovery_instructive.rate.map_or("-".into(), pct),
                t.recovery_bare.rate.map_or("-".into(), pct)
            );
        }
        let failed: Vec<&TaskResult> = self.probe.iter().chain(&self.recovery).filter(|r| !r.passed).collect();
        if !failed.is_empty() {
            let _ = writeln!(o, "\nnot passed");
            for r in failed {
                let variant = match r.variant {
                    Some(Variant::Bare) => " (bare)",
                    Some(Variant::Instructive) => " (ours)",
                    None => "",
                };
                let _ = writeln!(o, "          {} {}{}: {}", r.part.dir(), r.name, variant, clip(&r.why, 160));
            }
        }
        for e in &self.errors {
            let _ = writeln!(o, "\nERROR     {}: {}", e.name, e.error);
        }
        let v = self.verdict(th);
        if v.pass {
            let _ = writeln!(o, "\nverdict   PASS: the model may serve");
        } else {
            let _ = writeln!(o, "\nverdict   FAIL: `abhed run` refuses this model");
            for r in &v.reasons {
                let _ = writeln!(o, "          - {r}");
            }
        }
        o
    }
}

fn empty_tool(tool: &str) -> ToolSummary {
    ToolSummary {
        tool: tool.to_string(),
        tasks: 0,
        passed: 0,
        pass_rate: 0.0,
        calls: 0,
        valid_calls: 0,
        call_validity: None,
    }
}

/// At most `n` characters, for a table line (the JSON keeps the whole text).
fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n { s.to_string() } else { format!("{}…", s.chars().take(n).collect::<String>()) }
}

fn pct(v: f64) -> String {
    format!("{:.0}%", v * 100.0)
}

fn frac(r: Rate) -> String {
    format!("{}/{}", r.passed, r.runs)
}

fn duration(ms: u64) -> String {
    let s = ms / 1000;
    if s >= 60 { format!("{}m{:02}s", s / 60, s % 60) } else { format!("{:.1}s", ms as f64 / 1000.0) }
}
