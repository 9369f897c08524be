//! `abhed bench --subagents N`: N subagent turns decoded at once, as parallel sequences of one
//! context (what the task tool does), against the same N turns one after another on the same
//! code path. Each turn is a subagent's own prompt (its system prompt and a task), its answer
//! generated under the answer grammar; the prompts are evaluated once before the timing, so
//! what is timed is generation. Aggregate generation tokens/s = all tokens generated / wall time.

use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::json;

use abhed::agent::prompt;
use abhed::model::llama::{LlamaEngine, LlamaParams};
use abhed::model::{Cancel, Job, Message, Model, Reply, Role, TurnRequest, TurnSchema, locate};
use abhed::tools::Registry;
use abhed::tools::task::Profile;

use super::{Failure, exit, print_stdout};

const TOPICS: [&str; 8] = [
    "how a compiler turns source code into machine code",
    "how a version control system stores the history of a project",
    "how an operating system schedules processes on a CPU",
    "how a database keeps data safe when the power fails",
    "how a web browser draws a page on the screen",
    "how a package manager resolves dependencies",
    "how a garbage collector finds memory to free",
    "how a network packet finds its way to another computer",
];

pub fn run(
    model: Option<&Path>,
    threads: Option<u32>,
    n: u32,
    n_gen: u32,
    reps: u32,
    json: bool,
) -> Result<u8, Failure> {
    let setup = |e: anyhow::Error| Failure::usage(format!("{e:#}"));
    let path = locate::model_path(model).map_err(setup)?;
    let mut p = LlamaParams::new(path.clone());
    p.settings.n_threads = threads;
    p.settings.n_ctx = Some(4096);
    p.settings.parallel = n;
    let engine = LlamaEngine::load(p, String::new(), |_| {}).map_err(setup)?;
    let registry = Registry::only(Profile::Explore.tools());
    let mut session = engine.session(&TurnSchema::new(&registry)).map_err(setup)?;
    let ws = std::env::current_dir().unwrap_or_else(|_| "/".into());
    let system = prompt::subagent_prompt(&registry, &ws, Profile::Explore, false);
    let conversations: Vec<Vec<Message>> = (0..n as usize)
        .map(|i| {
            vec![
                Message::new(Role::System, system.clone()),
                Message::new(Role::User, format!("Explain in detail, in a long answer, {}.", TOPICS[i % TOPICS.len()])),
            ]
        })
        .collect();
    let err = |e: anyhow::Error| Failure::internal(&e);
    // The prompts into the cache (and a first reply each), untimed.
    turns(&mut session, &conversations, n_gen, true).map_err(err)?;
    let mut together = Vec::new();
    let mut in_turn = Vec::new();
    let mut same = 0;
    for r in 0..reps.max(1) {
        // Alternate which goes first, so neither always runs on a warmer machine.
        let (a, b) = if r % 2 == 0 {
            let a = turns(&mut session, &conversations, n_gen, true).map_err(err)?;
            (a, turns(&mut session, &conversations, n_gen, false).map_err(err)?)
        } else {
            let b = turns(&mut session, &conversations, n_gen, false).map_err(err)?;
            (turns(&mut session, &conversations, n_gen, true).map_err(err)?, b)
        };
        same += a.1.iter().zip(&b.1).filter(|(x, y)| x.text == y.text).count();
        together.push(a);
        in_turn.push(b);
    }
    let rate = |runs: &[(Duration, Vec<Reply>)]| {
        let tokens: u32 = runs.iter().flat_map(|(_, r)| r).map(|r| r.usage.generated_tokens).sum();
        let secs: f64 = runs.iter().map(|(d, _)| d.as_secs_f64()).sum();
        (tokens, secs, f64::from(tokens) / secs.max(1e-9))
    };
    let (t_tok, t_s, t_rate) = rate(&together);
    let (s_tok, s_s, s_rate) = rate(&in_turn);
    let ratio = t_rate / s_rate.max(1e-9);
    let replies = n * reps.max(1);
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let threads = session.threads();
    if json {
        let v = json!({
            "model": path.display().to_string(), "threads": threads, "subagents": n, "n_gen": n_gen, "reps": reps,
            "concurrent": {"tokens": t_tok, "seconds": t_s, "tps": t_rate},
            "sequential": {"tokens": s_tok, "seconds": s_s, "tps": s_rate},
            "speedup": ratio, "same_replies": same, "replies": replies,
            "first_replies": {
                "concurrent": together[0].1.iter().map(|r| r.text.clone()).collect::<Vec<_>>(),
                "sequential": in_turn[0].1.iter().map(|r| r.text.clone()).collect::<Vec<_>>(),
            },
        });
        print_stdout(&format!("{v}\n"))?;
    } else {
        print_stdout(&format!(
            "model {name}, {threads} threads, {n} subagents, up to {n_gen} tokens each, {reps} reps\n\
             | mode | tokens generated | wall s | aggregate t/s |\n|---|---:|---:|---:|\n\
             | {n} at once (one context, {n} sequences) | {t_tok} | {t_s:.2} | {t_rate:.2} |\n\
             | one after another | {s_tok} | {s_s:.2} | {s_rate:.2} |\n\
             speedup {ratio:.2}x; {same} of {replies} replies identical in both modes\n"
        ))?;
    }
    Ok(exit::OK)
}

/// One turn of each conversation, all at once or one after another; the wall time and replies.
fn turns(
    model: &mut dyn Model,
    conversations: &[Vec<Message>],
    n_gen: u32,
    at_once: bool,
) -> anyhow::Result<(Duration, Vec<Reply>)> {
    let replies: Vec<Mutex<Option<anyhow::Result<Reply>>>> = conversations.iter().map(|_| Mutex::new(None)).collect();
    let job = |i: usize| -> Job<'_> {
        let (messages, slot) = (&conversations[i], &replies[i]);
        Box::new(move |m: &mut dyn Model| {
            let cancel = Cancel::new();
            let req = TurnRequest { answer_only: true, ..TurnRequest::new(messages, n_gen, &cancel) };
            let r = m.complete(&req).map_err(|e| anyhow::anyhow!("{e}"));
            if let Ok(mut s) = slot.lock() {
                *s = Some(r);
            }
        })
    };
    let t = Instant::now();
    if at_once {
        model.run_parallel((0..conversations.len()).map(job).collect())?;
    } else {
        for i in 0..conversations.len() {
            model.run_parallel(vec![job(i)])?;
        }
    }
    let wall = t.elapsed();
    let replies = replies
        .into_iter()
        .map(|m| m.into_inner().ok().flatten().unwrap_or_else(|| Err(anyhow::anyhow!("a turn gave no reply"))))
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok((wall, replies))
}
