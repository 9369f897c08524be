//! `abhed bench`: the in-process model's throughput on this machine, measured as `llama-bench`
//! measures it (so the two compare side by side), and the cost of the turn grammar.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use serde_json::json;

use abhed::agent::prompt;
use abhed::model::llama::{LlamaEngine, LlamaParams};
use abhed::model::{Message, Role, TurnSchema, locate};
use abhed::tools::Registry;

use super::{Failure, exit, print_stdout};

#[derive(Args)]
pub struct BenchArgs {
    /// A GGUF file (default: the default model).
    #[arg(long, value_name = "PATH")]
    model: Option<PathBuf>,
    /// CPU threads (default: the physical cores).
    #[arg(long, value_name = "N")]
    threads: Option<u32>,
    /// Prompt tokens to process (llama-bench -p).
    #[arg(short = 'p', long, default_value_t = 512)]
    n_prompt: u32,
    /// Tokens to generate (llama-bench -n).
    #[arg(short = 'n', long, default_value_t = 128)]
    n_gen: u32,
    /// Repetitions of each test (llama-bench -r).
    #[arg(short = 'r', long, default_value_t = 5)]
    reps: u32,
    /// Tokens per batch while processing a prompt (llama-bench -b/-ub).
    #[arg(long, default_value_t = 512)]
    batch: u32,
    /// One JSON object instead of the table.
    #[arg(long)]
    json: bool,
    /// Measure the sandbox instead of the model: microVM boot to a first command, and the
    /// round trip of `true` and `echo hi`, against host `bash -c true`.
    #[arg(long)]
    sandbox: bool,
    /// Measure the time to compact a conversation that fills the window (--ctx, default 8192).
    #[arg(long)]
    compaction: bool,
    /// Measure N subagents decoding at once (one context, N sequences) against the same N one
    /// after another: aggregate generation tokens/s (-n tokens each, -r reps).
    #[arg(long, value_name = "N")]
    subagents: Option<u32>,
    /// With --compaction: the context window.
    #[arg(long, value_name = "N", default_value_t = 8192)]
    ctx: u32,
    /// With --sandbox: boots to time.
    #[arg(long, default_value_t = 5)]
    boots: u32,
    /// With --sandbox: calls of each command to time.
    #[arg(long, default_value_t = 100)]
    calls: u32,
}

/// Mean and standard deviation of tokens per second over the repetitions.
fn rate(samples: &[(u32, Duration)]) -> (f64, f64) {
    let r: Vec<f64> = samples.iter().map(|(n, d)| f64::from(*n) / d.as_secs_f64().max(1e-9)).collect();
    let mean = r.iter().sum::<f64>() / r.len().max(1) as f64;
    let var = r.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (r.len().max(2) - 1) as f64;
    (mean, var.sqrt())
}

pub fn run(a: BenchArgs) -> Result<u8, Failure> {
    if a.sandbox {
        return super::bench_sandbox::run(a.boots.max(1), a.calls.max(1), a.json);
    }
    if let Some(n) = a.subagents {
        return super::bench_subagents::run(a.model.as_deref(), a.threads, n.clamp(1, 8), a.n_gen, a.reps, a.json);
    }
    if a.compaction {
        return super::bench_compact::run(a.model.as_deref(), a.threads, a.ctx, a.json);
    }
    let setup = |e: anyhow::Error| Failure::usage(format!("{e:#}"));
    let path = locate::model_path(a.model.as_deref()).map_err(setup)?;
    let mut p = LlamaParams::new(path.clone());
    p.settings.n_threads = a.threads;
    p.settings.n_batch = a.batch;
    p.settings.n_ctx = Some((a.n_prompt + a.n_gen + 2048).max(4096));
    let engine = LlamaEngine::load(p, String::new(), |_| {}).map_err(setup)?;
    let registry = Registry::native();
    let mut s = engine.session(&TurnSchema::new(&registry)).map_err(setup)?;
    let err = |e: anyhow::Error| Failure::internal(&e);
    let reps = a.reps.max(1);

    // One warm-up of each, as llama-bench does.
    s.bench_prompt(a.n_prompt).map_err(err)?;
    s.bench_decode(8).map_err(err)?;
    let mut pp = Vec::new();
    let mut tg = Vec::new();
    for _ in 0..reps {
        pp.push((a.n_prompt, s.bench_prompt(a.n_prompt).map_err(err)?));
        tg.push((a.n_gen, s.bench_decode(a.n_gen).map_err(err)?));
    }
    let ws = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let messages = [
        Message::new(Role::System, prompt::system_prompt(&registry, &ws)),
        Message::new(
            Role::User,
            "Explain in detail, in a long answer, what a coding agent does and how it uses its tools.",
        ),
    ];
    let mut raw = Vec::new();
    let mut constrained = Vec::new();
    let mut resamples = 0;
    for _ in 0..reps {
        let (n, d, _) = s.bench_generate(&messages, a.n_gen, false).map_err(err)?;
        raw.push((n, d));
        let (n, d, r) = s.bench_generate(&messages, a.n_gen, true).map_err(err)?;
        constrained.push((n, d));
        resamples += r;
    }
    let (pp_m, pp_s) = rate(&pp);
    let (tg_m, tg_s) = rate(&tg);
    let (raw_m, raw_s) = rate(&raw);
    let (gr_m, gr_s) = rate(&constrained);
    let gr_tokens: u32 = constrained.iter().map(|(n, _)| n).sum();
    let threads = s.threads();
    if a.json {
        let v = json!({
            "model": path.display().to_string(), "threads": threads, "n_batch": a.batch, "reps": reps,
            "pp": {"tokens": a.n_prompt, "tps": pp_m, "sd": pp_s},
            "tg": {"tokens": a.n_gen, "tps": tg_m, "sd": tg_s},
            "generate_raw": {"tps": raw_m, "sd": raw_s},
            "generate_grammar": {"tps": gr_m, "sd": gr_s, "tokens": gr_tokens, "resamples": resamples},
        });
        print_stdout(&format!("{v}\n"))?;
    } else {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        print_stdout(&format!(
            "model {name}, {threads} threads, batch {}, {reps} reps\n\
             | test | t/s |\n|---|---:|\n\
             | pp{} | {pp_m:.2} ± {pp_s:.2} |\n\
             | tg{} | {tg_m:.2} ± {tg_s:.2} |\n\
             | generate, sampled, no grammar | {raw_m:.2} ± {raw_s:.2} |\n\
             | generate, sampled, turn grammar | {gr_m:.2} ± {gr_s:.2} ({gr_tokens} tokens, {resamples} corrected by the grammar) |\n",
            a.batch, a.n_prompt, a.n_gen
        ))?;
    }
    Ok(exit::OK)
}
