//! `abhed conformance`: the harness, the capability probe and the error-recovery scenarios,
//! one report, stored under the model for the gate.

use std::path::{Path, PathBuf};
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
    /// (default: /tmp/abhed-conformance-UID, the same path on every machine, because the path is
    /// in the prompts and a different one changes what a model writes).
    #[arg(long, value_name = "DIR")]
    work_dir: Option<PathBuf>,
    /// Print nothing on stderr while the suite runs.
    #[arg(long, short)]
    quiet: bool,
    /// Run only the probe tasks and recovery scenarios whose `PART/NAME` starts with PREFIX
    /// (`probe/edit`, `recovery/stale_read`; repeatable). For working on the loop: the report is
    /// printed but not stored, so it never decides whether a model may serve.
    #[arg(long, value_name = "PREFIX", conflicts_with_all = ["show", "harness_only"])]
    only: Vec<String>,
}

pub fn run(a: ConformanceArgs) -> Result<u8, Failure> {
    let cwd = super::workspace_dir(None, None)?;
    let config = Config::load(&cwd).map_err(|e| Failure::usage(format!("{e:#}")))?;
    for w in &config.warnings {
        eprintln!("abhed: {w}");
    }
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

    if a.harness_only {
        let harness = run_harness(&suite, &progress)?;
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

    // Setup errors (no model, bad flags, a busy work folder) before anything runs.
    let plan = run_cmd::plan(cwd, None, config.clone(), &a.model, &BudgetArgs::default(), Op::Continue)?;
    let store = Store::open(&plan.store_path).map_err(|e| Failure::internal(&e))?;
    let (key, _, _) = run_cmd::model_identity(&plan.spec, &store)?;
    let (work, _lock) = work_dir(a.work_dir.as_deref(), &plan.config, "conformance", &["ws", "probe.db"])?;
    let limits = RunLimits {
        max_reply_tokens: a.model.max_reply_tokens.unwrap_or(RunLimits::default().max_reply_tokens),
        ..RunLimits::default()
    };

    let started_at = abhed::store::now_rfc3339();
    let t0 = Instant::now();
    let harness = run_harness(&suite, &progress)?;
    progress("loading the model ...");
    let mut report = run_cmd::with_model(
        &plan.spec,
        &store,
        |_| {},
        |model: &mut dyn Model| {
            let mut runner = Runner::new(&suite, model, &config, limits, &work).map_err(|e| Failure::internal(&e))?;
            let system = [Message::new(Role::System, runner.system_prompt())];
            let prompt_tokens = runner.count_tokens(&system).map_err(|e| Failure::internal(&e.into()))?;
            let info = runner.model_info();
            // The context as runs will use it: one reply of the configured size, not the probe's.
            let context =
                ContextCheck::new(info.n_ctx, prompt_tokens, config.model.max_reply_tokens, config.run.working_budget);
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
            run_model_parts(&suite, &mut runner, &mut report, &a.only, &progress)?;
            Ok(report)
        },
    )?;
    report.wall_ms = t0.elapsed().as_millis() as u64;
    if !a.only.is_empty() {
        // A part of the suite is no verdict: shown, never stored as the model's report.
        progress("--only: a part of the suite ran; the report below is not stored");
        return print_report(&report, &th, a.json);
    }
    store.save_report(&key, &report.suite_digest, &report.to_json(&th)).map_err(|e| Failure::internal(&e))?;
    print_report(&report, &th, a.json)
}

/// The probe tasks, then each recovery scenario with our error and with the bare one.
fn run_model_parts(
    suite: &Suite,
    runner: &mut Runner<'_>,
    report: &mut Report,
    only: &[String],
    progress: &dyn Fn(&str),
) -> Result<(), Failure> {
    let probe_tasks = probe::tasks(suite, Part::Probe).map_err(|e| Failure::internal(&e))?;
    let recovery = probe::tasks(suite, Part::Recovery).map_err(|e| Failure::internal(&e))?;
    let mut runs: Vec<(&probe::Task, Part, Option<Variant>)> =
        probe_tasks.iter().map(|t| (t, Part::Probe, None)).collect();
    for t in &recovery {
        runs.push((t, Part::Recovery, Some(Variant::Instructive)));
        runs.push((t, Part::Recovery, Some(Variant::Bare)));
    }
    if !only.is_empty() {
        runs.retain(|(t, part, _)| {
            let id = format!("{}/{}", part.dir(), t.name);
            only.iter().any(|p| id.starts_with(p.as_str()))
        });
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
    Ok(())
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

/// The probe's (or the task suite's) folder, locked for this run, with `clear` (the workspace and
/// the scratch store of the last run) removed. The workspace path is part of the system prompt
/// and of every task, so by default it is one fixed path, `/tmp/abhed-NAME-UID`: two runs on a
/// model, here or on another machine, then show it the same text.
pub(super) fn work_dir(
    flag: Option<&std::path::Path>,
    config: &Config,
    name: &str,
    clear: &[&str],
) -> Result<(PathBuf, std::fs::File), Failure> {
    use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _};
    let uid = std::fs::metadata("/proc/self").map_err(|e| Failure::internal(&e.into()))?.uid();
    let dir = flag.map_or_else(|| PathBuf::from(format!("/tmp/abhed-{name}-{uid}")), Path::to_path_buf);
    // The folder becomes the probe's workspace (shared with the VM) and is cleared below: the
    // same check as any workspace, before anything in it is touched. The probe runs with the
    // built-in defaults, so only the sandbox's own settings of the user config apply.
    let mut probe = Config { sandbox: config.sandbox.clone(), boundary: config.boundary.clone(), ..Config::default() };
    probe.workspace.allow_system_dirs = config.workspace.allow_system_dirs;
    abhed::boundary::check_workspace(&dir, &probe).map_err(|e| Failure::usage(e.to_string()))?;
    match std::fs::symlink_metadata(&dir) {
        Err(_) => std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|e| Failure::usage(format!("cannot create {}: {e}", dir.display())))?,
        // /tmp is shared: the default folder must be a real folder of this user's.
        Ok(m) if flag.is_none() && (!m.is_dir() || m.uid() != uid) => {
            return Err(Failure::usage(format!(
                "{} exists but is not a folder of yours; remove it, or give --work-dir",
                dir.display()
            )));
        }
        Ok(m) if !m.is_dir() => return Err(Failure::usage(format!("{} is not a folder", dir.display()))),
        Ok(_) => {}
    }
    let lock_path = dir.join("lock");
    let lock = std::fs::File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| Failure::usage(format!("cannot open {}: {e}", lock_path.display())))?;
    if lock.try_lock().is_err() {
        return Err(Failure::usage(format!(
            "another abhed {name} is using {} (it holds {}); wait for it, or give --work-dir",
            dir.display(),
            lock_path.display()
        )));
    }
    // What an earlier run left: a fresh workspace and store for this one.
    for old in clear {
        for p in [dir.join(old), dir.join(format!("{old}-wal")), dir.join(format!("{old}-shm"))] {
            let _ = if p.is_dir() { std::fs::remove_dir_all(&p) } else { std::fs::remove_file(&p) };
        }
    }
    Ok((dir, lock))
}
