//! `abhed conformance`: the harness, the capability probe and the error-recovery scenarios,
//! one report, stored under the model for the gate.

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;

use abhed::agent::Op;
use abhed::config::Config;
use abhed::conformance::probe::{self, Part, RunLimits, Runner, Variant};
use abhed::conformance::report::{ContextCheck, HarnessResult, ItemError, REPORT_VERSION, Report};
use abhed::conformance::{Suite, harness};
use abhed::model::{Message, Model, Role};
use abhed::store::Store;

use super::run_cmd::{self, BudgetArgs, ModelArgs};
use super::{Failure, exit};

#[derive(Args)]
pub struct ConformanceArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Print the report as one JSON object on stdout (progress still goes to stderr).
    #[arg(long)]
    json: bool,
    /// Run only the tool-contract cases: no model, nothing stored.
    #[arg(long, conflicts_with = "show")]
    harness_only: bool,
    /// Print the model's stored report instead of probing it again.
    #[arg(long)]
    show: bool,
    /// Where to make the probe's workspace and scratch store, kept afterwards for inspection
    /// (default: a temporary folder, removed at the end).
    #[arg(long, value_name = "DIR")]
    work_dir: Option<PathBuf>,
    /// Print nothing on stderr while the suite runs.
    #[arg(long, short)]
    quiet: bool,
}

pub fn run(a: ConformanceArgs) -> Result<u8, Failure> {
    let cwd = super::workspace_dir(None, None)?;
    let config = Config::load(&cwd).map_err(|e| Failure::usage(format!("{e:#}")))?;
    let th = config.conformance.clone();
    let suite = Suite::embedded();
    let progress = |line: &str| {
        if !a.quiet {
            eprintln!("{line}");
        }
    };

    if a.show {
        let plan = run_cmd::plan(cwd, None, config, &a.model, &BudgetArgs::default(), Op::Continue)?;
        let store = Store::open(&plan.store_path).map_err(|e| Failure::internal(&e))?;
        let (key, name, probe) = run_cmd::model_identity(&plan.spec, &store)?;
        let stored = store.latest_report(&key).map_err(|e| Failure::internal(&e))?.ok_or_else(|| {
            Failure::usage(format!("{name} has no conformance report on record; probe it with: {probe}"))
        })?;
        let report: Report = serde_json::from_value(stored.report).map_err(|e| {
            Failure::usage(format!(
                "the stored report of {} cannot be read by this abhed ({e}); probe again",
                stored.created_at
            ))
        })?;
        return print_report(&report, &th, a.json);
    }

    let started_at = abhed::store::now_rfc3339();
    let t0 = Instant::now();
    let harness = run_harness(&suite, &progress)?;
    if a.harness_only {
        let ok = harness.passed == harness.cases && harness.cases > 0;
        if a.json {
            super::print_stdout(&format!("{}\n", serde_json::to_string_pretty(&harness).unwrap_or_default()))?;
        } else {
            let mut text = format!("harness: {} of {} tool-contract cases pass\n", harness.passed, harness.cases);
            for f in &harness.failed {
                text.push_str(&format!("  FAIL {f}\n"));
            }
            super::print_stdout(&text)?;
        }
        return Ok(if ok { exit::OK } else { exit::TOOL_ERROR });
    }

    let mc = &config.model;
    let run_reply = a.model.max_reply_tokens.unwrap_or(mc.max_reply_tokens);
    let needed = config.run.working_budget;
    let limits = RunLimits {
        max_reply_tokens: a.model.max_reply_tokens.unwrap_or(RunLimits::default().max_reply_tokens),
        ..RunLimits::default()
    };
    let plan = run_cmd::plan(cwd, None, config.clone(), &a.model, &BudgetArgs::default(), Op::Continue)?;
    let store = Store::open(&plan.store_path).map_err(|e| Failure::internal(&e))?;
    let (key, _, _) = run_cmd::model_identity(&plan.spec, &store)?;
    let tmp;
    let work = match &a.work_dir {
        Some(d) => {
            std::fs::create_dir_all(d).map_err(|e| Failure::usage(format!("cannot create {}: {e}", d.display())))?;
            d.clone()
        }
        None => {
            tmp = tempfile::tempdir().map_err(|e| Failure::internal(&e.into()))?;
            tmp.path().to_path_buf()
        }
    };
    progress("loading the model ...");
    let report = run_cmd::with_model(
        &plan.spec,
        &store,
        |_| {},
        |model: &mut dyn Model| {
            let mut runner = Runner::new(&suite, model, &config, limits, &work).map_err(|e| Failure::internal(&e))?;
            let system = [Message::new(Role::System, runner.system_prompt())];
            let prompt_tokens = runner.count_tokens(&system).map_err(|e| Failure::internal(&e.into()))?;
            let info = runner.model_info();
            let context = ContextCheck::new(info.n_ctx, prompt_tokens, run_reply, needed);
            let mut report = Report {
                v: REPORT_VERSION,
                key: key.clone(),
                model: info,
                abhed_version: env!("CARGO_PKG_VERSION").to_string(),
                suite_digest: suite.digest(),
                started_at: started_at.clone(),
                wall_ms: 0,
                limits,
                context,
                harness: harness.clone(),
                probe: Vec::new(),
                recovery: Vec::new(),
                errors: Vec::new(),
            };
            let probe_tasks = probe::tasks(&suite, Part::Probe).map_err(|e| Failure::internal(&e))?;
            let recovery = probe::tasks(&suite, Part::Recovery).map_err(|e| Failure::internal(&e))?;
            let mut runs: Vec<(&probe::Task, Part, Option<Variant>)> =
                probe_tasks.iter().map(|t| (t, Part::Probe, None)).collect();
            for t in &recovery {
                runs.push((t, Part::Recovery, Some(Variant::Instructive)));
                runs.push((t, Part::Recovery, Some(Variant::Bare)));
            }
            let total = runs.len();
            for (i, (task, part, variant)) in runs.into_iter().enumerate() {
                let label = format!(
                    "[{:>2}/{total}] {} {}{}",
                    i + 1,
                    part.dir(),
                    task.name,
                    match variant {
                        Some(Variant::Bare) => " (bare error)",
                        Some(Variant::Instructive) => " (our error)",
                        None => "",
                    }
                );
                match runner.run(task, part, variant) {
                    Ok(r) => {
                        progress(&format!(
                            "{label}: {} ({} turn{}, {:.1} s)",
                            if r.passed { "pass".to_string() } else { format!("FAIL: {}", r.why) },
                            r.turns,
                            if r.turns == 1 { "" } else { "s" },
                            r.wall_ms as f64 / 1000.0
                        ));
                        match part {
                            Part::Probe => report.probe.push(r),
                            Part::Recovery => report.recovery.push(r),
                        }
                    }
                    Err(e) => {
                        progress(&format!("{label}: ERROR (ours, not the model's): {e:#}"));
                        report
                            .errors
                            .push(ItemError { name: format!("{}/{}", part.dir(), task.name), error: format!("{e:#}") });
                    }
                }
            }
            Ok(report)
        },
    )?;
    let mut report = report;
    report.wall_ms = t0.elapsed().as_millis() as u64;
    store.save_report(&key, &report.suite_digest, &report.to_json(&th)).map_err(|e| Failure::internal(&e))?;
    print_report(&report, &th, a.json)
}

fn print_report(report: &Report, th: &abhed::config::ConformanceConfig, json: bool) -> Result<u8, Failure> {
    if json {
        super::print_stdout(&format!("{}\n", serde_json::to_string_pretty(&report.to_json(th)).unwrap_or_default()))?;
    } else {
        super::print_stdout(&report.render(th))?;
    }
    Ok(if report.verdict(th).pass { exit::OK } else { exit::TOOL_ERROR })
}

/// Every tool-contract case, from the suite built into this binary.
fn run_harness(suite: &Suite, progress: &dyn Fn(&str)) -> Result<HarnessResult, Failure> {
    let t0 = Instant::now();
    let cases = harness::cases(suite).map_err(|e| Failure::internal(&e))?;
    progress(&format!("harness: {} tool-contract cases ...", cases.len()));
    let mut result = HarnessResult { cases: cases.len() as u32, ..HarnessResult::default() };
    for case in &cases {
        match harness::run_case(suite, case, false) {
            Ok(r) if r.failures.is_empty() => result.passed += 1,
            Ok(r) => {
                let first = r.failures.first().map(|f| f.lines().next().unwrap_or_default()).unwrap_or_default();
                result.failed.push(format!("{}: {first}", case.name));
            }
            Err(e) => result.failed.push(format!("{}: could not run: {e:#}", case.name)),
        }
    }
    result.wall_ms = t0.elapsed().as_millis() as u64;
    progress(&format!("harness: {} of {} pass ({:.1} s)", result.passed, result.cases, result.wall_ms as f64 / 1000.0));
    Ok(result)
}
