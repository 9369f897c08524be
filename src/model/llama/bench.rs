//! Throughput of the in-process model, measured the way `llama-bench` measures it, so the two
//! can be compared side by side (docs/BENCHMARKS.md): prompt processing of N tokens in batches,
//! and generation of N tokens one at a time; plus generation with sampling, raw and under the
//! turn grammar, to price the grammar.

use std::time::{Duration, Instant};

use anyhow::{Result, anyhow};
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::token::LlamaToken;

use super::LlamaSession;
use crate::model::{Cancel, Message, TurnRequest};

/// A token stream that does not depend on any tokenizer: what llama-bench feeds too.
fn tokens(n: u32, n_vocab: i32) -> Vec<LlamaToken> {
    // A fixed LCG: the same "random" tokens every run.
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..n)
        .map(|_| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            LlamaToken((x >> 33) as i32 % n_vocab.max(1))
        })
        .collect()
}

impl LlamaSession<'_> {
    fn reset(&mut self) {
        self.ctx.clear_kv_cache();
        self.cached.clear();
    }

    /// llama-bench's `pp`: evaluate `n` tokens from an empty cache, `n_batch` at a time.
    pub fn bench_prompt(&mut self, n: u32) -> Result<Duration> {
        self.reset();
        let toks = tokens(n, self.engine.model.n_vocab());
        let t = Instant::now();
        self.decode(0, &toks, &|| false).map_err(|e| anyhow!("{e}"))?;
        Ok(t.elapsed())
    }

    /// llama-bench's `tg`: decode `n` tokens one at a time, no sampling.
    pub fn bench_decode(&mut self, n: u32) -> Result<Duration> {
        self.reset();
        let toks = tokens(n + 1, self.engine.model.n_vocab());
        self.decode(0, &toks[..1], &|| false).map_err(|e| anyhow!("{e}"))?;
        let mut batch = LlamaBatch::new(1, 1);
        let t = Instant::now();
        for (i, tok) in toks[1..].iter().enumerate() {
            batch.clear();
            batch.add(*tok, (i + 1) as i32, &[0], true)?;
            self.ctx.decode(&mut batch)?;
        }
        Ok(t.elapsed())
    }

    /// Generation from the prompt `messages`, up to `n` tokens. With `grammar`, it is the
    /// turn's own generation ([`LlamaSession::generate`], greedy, under the turn grammar, ending
    /// when the turn is complete); without, greedy picks on the raw logits, an end-of-generation
    /// token decoded like any other, so the count is always `n`. Returns the tokens generated,
    /// the time, and the tokens the grammar had to correct.
    pub fn bench_generate(&mut self, messages: &[Message], n: u32, grammar: bool) -> Result<(u32, Duration, u32)> {
        self.reset();
        let prompt = self.tokenize(messages, true)?;
        self.decode(0, &prompt, &|| false).map_err(|e| anyhow!("{e}"))?;
        let t = Instant::now();
        if grammar {
            let cancel = Cancel::new();
            let req = TurnRequest::new(messages, n, &cancel);
            let out = self.generate(&req, &|| false).map_err(|e| anyhow!("{e}"))?;
            return Ok((out.tokens, t.elapsed(), out.resamples));
        }
        let mut batch = LlamaBatch::new(1, 1);
        for _ in 0..n {
            // Greedy on the raw logits: the cheapest pick there is.
            let logits = self.ctx.get_logits_ith(-1);
            let best = logits.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map(|(i, _)| i).unwrap_or(0);
            let token = LlamaToken(best as i32);
            batch.clear();
            batch.add(token, self.cached.len() as i32, &[0], true)?;
            self.ctx.decode(&mut batch)?;
            self.cached.push(token);
        }
        Ok((n, t.elapsed(), 0))
    }
}
