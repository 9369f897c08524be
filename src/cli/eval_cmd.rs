//! `abhed eval`: the task suite (docs/EVAL.md) on a model; the report is stored under it.

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;

use abhed::agent::Op;
use abhed::config::Config;
use abhed::conformance::Suite;
use abhed::conformance::report::ItemError;
use abhed::eval::peer::Peer;
use abhed::eval::report::{EVAL_REPORT_VERSION, EvalReport};
use abhed::eval::{self, Driver, Limits, Runner};
use abhed::model::{Model, ModelInfo};
use abhed::store::{ReportKind, Store};

use super::run_cmd::{self, BudgetArgs, ModelArgs};
use super::{Failure, exit};

#[derive(Args)]
pub struct EvalArgs {
    /// Only the tasks whose name contains one of these words (e.g. `fix-test rename`).
    filter: Vec<String>,
    #[command(flatten)]
    model: ModelArgs,
    /// The most model turns of a task that does not set its own.
    #[arg(long, value_name = "N")]
    max_turns: Option<u32>,
    /// The most wall time of a task that does not set its own, in seconds.
    #[arg(long = "task-timeout", value_name = "SECS")]
    task_timeout: Option<u64>,
    /// Print the report as one JSON object on stdout (progress still goes to stderr).
    #[arg(long)]
    json: bool,
    /// Print the model's last stored report instead of running the suite.
    #[arg(long)]
    show: bool,
    /// List the tasks and exit.
    #[arg(long, conflicts_with = "show")]
    list: bool,
    /// Where to make the workspace and the scratch store, kept afterwards for inspection
    /// (default: /tmp/abhed-eval-UID, the same path on every machine: it is in the prompts).
    #[arg(long, value_name = "DIR")]
    work_dir: Option<PathBuf>,
    /// Run the tasks through another agent instead of Abhed's loop, for a side-by-side figure:
    /// a bash command run on the host in each task's workspace, with the task in `$ABHED_TASK`
    /// and `--model`'s path in `$ABHED_MODEL`; its stdout is its answer (docs/EVAL.md).
    #[arg(long, value_name = "COMMAND", conflicts_with = "script")]
    peer: Option<String>,
    /// Print nothing on stderr while the suite runs.
    #[arg(long, short)]
    quiet: bool,
}

pub fn run(a: EvalArgs) -> Result<u8, Failure> {
    let cwd = super::workspace_dir(None, None)?;
    let config = Config::load(&cwd).map_err(|e| Failure::usage(format!("{e:#}")))?;
    run_cmd::say_config_warnings(&config);
    let suite = Suite::embedded_eval();
    let all = eval::tasks(&suite).map_err(|e| Failure::internal(&e))?;
    let tasks: Vec<_> =
        all.iter().filter(|t| a.filter.is_empty() || a.filter.iter().any(|f| t.name.contains(f.as_str()))).collect();
    if a.list {
        let mut text = String::new();
        for t in &all {
            text.push_str(&format!("{:<40} {}\n", t.name, t.spec.description));
        }
        super::print_stdout(&text)?;
        return Ok(exit::OK);
    }
    let progress = |line: &str| {
        if !a.quiet {
            eprintln!("{line}");
        }
    };
    let plan = run_cmd::plan(cwd, None, config.clone(), &a.model, &BudgetArgs::default(), Op::Continue)?;
    let store = Store::open(&plan.store_path).map_err(|e| Failure::internal(&e))?;
    let (model_key, name, _) = run_cmd::model_identity(&plan.spec, &store)?;
    // A peer's report is stored apart from the model's own.
    let key = match &a.peer {
        Some(command) => format!("peer:{command}@{model_key}"),
        None => model_key.clone(),
    };

    if a.show {
        let stored = store
            .latest_report_of(ReportKind::Eval, &key)
            .map_err(|e| Failure::internal(&e))?
            .ok_or_else(|| Failure::usage(format!("{name} has no eval report on record; run `abhed eval` on it")))?;
        let report: EvalReport = serde_json::from_value(stored.report).map_err(|e| {
            Failure::usage(format!(
                "the stored report of {} cannot be read by this abhed ({e}); run again",
                stored.created_at
            ))
        })?;
        return print(&report, a.json);
    }
    if tasks.is_empty() {
        return Err(Failure::usage(format!("no task matches {}; `abhed eval --list` shows them", a.filter.join(", "))));
    }

    let (work, _lock) =
        super::conformance_cmd::work_dir(a.work_dir.as_deref(), &plan.config, "eval", &["ws", "eval.db"])?;
    let defaults = Limits::from_config(&plan.config);
    let limits = Limits {
        max_turns: a.max_turns.unwrap_or(defaults.max_turns),
        max_wall_s: a.task_timeout.unwrap_or(defaults.max_wall_s),
        max_reply_tokens: a.model.max_reply_tokens.unwrap_or(defaults.max_reply_tokens),
    };
    let started_at = abhed::store::now_rfc3339();
    let t0 = Instant::now();
    let run_all = |driver: Driver<'_>| -> Result<EvalReport, Failure> {
        let mut runner = Runner::new(&suite, driver, &plan.config, limits, &work).map_err(|e| Failure::internal(&e))?;
        let info = runner.model_info();
        let mut report = EvalReport {
            v: EVAL_REPORT_VERSION,
            key: key.clone(),
            protocol: info.protocol.clone(),
            model: info,
            abhed_version: env!("CARGO_PKG_VERSION").to_string(),
            suite_digest: suite.digest(),
            started_at: started_at.clone(),
            wall_ms: 0,
            limits,
            filter: a.filter.clone(),
            tasks: Vec::new(),
            errors: Vec::new(),
        };
        let total = tasks.len();
        for (i, task) in tasks.iter().enumerate() {
            let label = format!("[{:>2}/{total}] {}", i + 1, task.name);
            match runner.run(task) {
                Ok(r) => {
                    progress(&format!(
                        "{label}: {} ({} turns, {:.0} s, {})",
                        if r.passed { "pass".to_string() } else { format!("FAIL: {}", r.why) },
                        r.turns,
                        r.wall_ms as f64 / 1000.0,
                        r.stop
                    ));
                    report.tasks.push(r);
                }
                Err(e) => {
                    progress(&format!("{label}: ERROR (ours, not the model's): {e:#}"));
                    report.errors.push(ItemError { name: task.name.clone(), error: format!("{e:#}") });
                }
            }
        }
        Ok(report)
    };
    let mut report = match &a.peer {
        // The peer talks to its own server; the model is named for the record, not loaded.
        Some(command) => {
            let gguf = match &plan.spec {
                run_cmd::ModelSpec::Llama(p) => Some(p.path.clone()),
                _ => None,
            };
            let info = ModelInfo {
                adapter: "peer".to_string(),
                name: match &gguf {
                    Some(p) => p.file_name().map_or(name.clone(), |f| f.to_string_lossy().into_owned()),
                    None => name.clone(),
                },
                location: command.clone(),
                sha256: model_key.strip_prefix("sha256:").map(str::to_string),
                n_ctx: None,
                template: None,
                threads: None,
                protocol: "peer".to_string(),
            };
            run_all(Driver::Peer(Peer { command: command.clone(), model: gguf }, info))?
        }
        None => {
            progress("loading the model ...");
            run_cmd::with_model(&plan.spec, &store, |_| {}, |model: &mut dyn Model| run_all(Driver::Loop(model)))?
        }
    };
    report.wall_ms = t0.elapsed().as_millis() as u64;
    store
        .save_report_of(ReportKind::Eval, &key, &report.suite_digest, &report.to_json())
        .map_err(|e| Failure::internal(&e))?;
    print(&report, a.json)
}

fn print(report: &EvalReport, json: bool) -> Result<u8, Failure> {
    if json {
        super::print_stdout(&format!("{}\n", serde_json::to_string_pretty(&report.to_json()).unwrap_or_default()))?;
    } else {
        super::print_stdout(&report.render())?;
    }
    Ok(if report.errors.is_empty() { exit::OK } else { exit::INTERNAL })
}
