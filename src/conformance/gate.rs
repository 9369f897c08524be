//! The gate: a model serves (`abhed run`, `chat`, `sessions resume`) only with a passing
//! conformance report on record, made by this suite, under the operator's thresholds.

use anyhow::Result;

use super::Suite;
use super::report::Report;
use crate::config::ConformanceConfig;
use crate::store::Store;

/// The environment variable that, set to `1`, does what `--allow-unqualified-model` does.
pub const ALLOW_ENV: &str = "ABHED_ALLOW_UNQUALIFIED_MODEL";

/// What the gate decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The model has a passing report (or the gate is off): why, for the record.
    Pass(String),
    /// The model may not serve: the message for the operator.
    Refuse(String),
}

/// Decide for the model stored under `key`. `name` is how the operator knows the model and
/// `probe` the command that probes it, both for the message.
pub fn check(store: &Store, key: &str, name: &str, probe: &str, th: &ConformanceConfig) -> Result<Decision> {
    if !th.require {
        return Ok(Decision::Pass("conformance.require is off in the user config".into()));
    }
    let how = format!(
        "Probe it (a few minutes on a small model; the report says what it can and cannot do):\n    {probe}\nor, to run it anyway and accept that it may misuse the tools, pass --allow-unqualified-model (or set {ALLOW_ENV}=1)."
    );
    let Some(stored) = store.latest_report(key)? else {
        return Ok(Decision::Refuse(format!("{name} has no conformance report on record, so it may not serve. {how}")));
    };
    let report: Report = match serde_json::from_value(stored.report.clone()) {
        Ok(r) => r,
        Err(_) => {
            return Ok(Decision::Refuse(format!(
                "{name}'s conformance report of {} was written by another version of abhed and cannot be read. {how}",
                stored.created_at
            )));
        }
    };
    if stored.suite_digest != Suite::embedded().digest() {
        return Ok(Decision::Refuse(format!(
            "{name}'s conformance report of {} was made with another suite (abhed {}); this build's tools or tests differ, so it no longer counts. {how}",
            stored.created_at, report.abhed_version
        )));
    }
    let verdict = report.verdict(th);
    if verdict.pass {
        let t = report.totals();
        return Ok(Decision::Pass(format!(
            "conformance report of {}: probe {}/{}, recovery {}/{}",
            stored.created_at, t.probe.passed, t.probe.runs, t.recovery_instructive.passed, t.recovery_instructive.runs
        )));
    }
    Ok(Decision::Refuse(format!(
        "{name} failed its conformance probe of {}:\n  - {}\n`abhed conformance --show` with the same model flags prints the whole report; the thresholds are [conformance] in the user config. {how}",
        stored.created_at,
        verdict.reasons.join("\n  - ")
    )))
}
