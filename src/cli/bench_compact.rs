//! `abhed bench --compaction`: the time to compact a conversation that fills the context window
//! (8192 tokens by default) on the local model: the summary's generation plus the evaluation of
//! what it summarises. The conversation is real work: read calls on this checkout's own sources
//! and their results, as the read tool renders them.

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::json;

use abhed::agent::{compact, prompt};
use abhed::model::llama::{LlamaEngine, LlamaParams};
use abhed::model::{Cancel, Message, Model, Role, TurnSchema, locate};
use abhed::store::Store;
use abhed::tools::Registry;

use super::{Failure, exit, print_stdout};

pub fn run(model: Option<&Path>, threads: Option<u32>, n_ctx: u32, json_out: bool) -> Result<u8, Failure> {
    let setup = |e: anyhow::Error| Failure::usage(format!("{e:#}"));
    let internal = |e: anyhow::Error| Failure::internal(&e);
    let path = locate::model_path(model).map_err(setup)?;
    let mut p = LlamaParams::new(path.clone());
    p.settings.n_threads = threads;
    p.settings.n_ctx = Some(n_ctx);
    let engine = LlamaEngine::load(p, String::new(), |_| {}).map_err(setup)?;
    let registry = Registry::native();
    let schema = TurnSchema::new(&registry);
    let mut s = engine.session(&schema).map_err(setup)?;

    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut messages = vec![
        Message::new(Role::System, prompt::system_prompt(&registry, &root)),
        Message::new(Role::User, "Find where the bash tool caps its output, and explain it."),
    ];
    // Fill the conversation to just past the compaction threshold with read calls and results.
    let target = (f64::from(n_ctx) * compact::THRESHOLD) as u32;
    let mut sources = source_files(&root.join("src"));
    sources.sort();
    for file in sources {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        let numbered: String = text.lines().take(40).enumerate().map(|(i, l)| format!("{}\t{l}\n", i + 1)).collect();
        let call = json!({"tool": "read", "arguments": {"path": file, "limit": 40}}).to_string();
        messages.push(Message::new(Role::Assistant, call));
        messages.push(Message::new(Role::User, format!("[read {}]\n{numbered}", file.display())));
        let used = s.count_tokens(&messages).map_err(|e| internal(e.into()))?.unwrap_or(0);
        if used + compact::SUMMARY_TOKENS > target {
            break;
        }
    }
    let before = s.count_tokens(&messages).map_err(|e| internal(e.into()))?.unwrap_or(0);

    let dir = tempfile::tempdir().map_err(|e| internal(e.into()))?;
    let store = Store::open(&dir.path().join("bench.db")).map_err(internal)?;
    let session = store.create_session(&root).map_err(internal)?;
    let start = Instant::now();
    let result = compact::compact(&mut s, &schema, &session, &messages, &Cancel::new(), None, None)
        .map_err(|e| internal(e.into()))?
        .ok_or_else(|| Failure::internal(&anyhow::anyhow!("nothing to compact")))?;
    let ms = start.elapsed().as_millis();
    let r = &result.record;
    if json_out {
        let v = json!({
            "model": path.display().to_string(), "n_ctx": n_ctx, "messages": messages.len(),
            "tokens_before": before, "compaction_ms": ms, "record": r,
            "summary_prompt_tokens": result.usage.prompt_tokens, "summary_generated_tokens": result.usage.generated_tokens,
        });
        print_stdout(&format!("{v}\n"))?;
    } else {
        print_stdout(&format!(
            "compaction on {} (n_ctx {n_ctx}, {} threads)\n  conversation: {} messages, {before} tokens ({:.0}% of the window)\n  compaction:   {ms} ms (summary prompt {} tokens, {} generated; summary: {})\n  after:        {} messages, {} tokens\n",
            path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
            s.threads(),
            messages.len(),
            f64::from(before) * 100.0 / f64::from(n_ctx),
            result.usage.prompt_tokens,
            result.usage.generated_tokens,
            r["summary_by"].as_str().unwrap_or_default(),
            r["kept_messages"],
            r["tokens_after"],
        ))?;
    }
    Ok(exit::OK)
}

fn source_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(source_files(&p));
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
    out
}
