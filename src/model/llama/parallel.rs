//! Subagents on one model: several conversations decode as parallel sequences of one llama.cpp
//! context, in one batch per step (continuous batching, as llama.cpp's own server does).
//!
//! Each subagent runs its loop on a thread of its own and reaches the model through a
//! [`SeqClient`]; the thread that owns the context (the parent's) runs the scheduler: it takes
//! each turn request into a free sequence slot, evaluates the new part of every prompt and one
//! generated token of every reply in the same `llama_decode`, and hands each reply back when it
//! ends. A slot keeps its KV cache between turns, so a subagent whose next turn gets the slot it
//! had evaluates only what is new. With more subagents than slots, the rest wait for a slot.

use std::collections::VecDeque;
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::time::Instant;

use anyhow::anyhow;
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::token::LlamaToken;

use super::{Grammars, LlamaEngine, TurnSampler, backend};
use crate::model::{Cancel, Job, Message, Model, ModelError, ModelInfo, Reply, TurnRequest, Usage};

/// The context of the subagents and its sequence slots.
pub(super) struct Pool<'m> {
    engine: &'m LlamaEngine,
    ctx: LlamaContext<'m>,
    slots: Vec<Slot>,
    /// The context window of each sequence.
    n_ctx_seq: u32,
    threads: u32,
    /// Counts scheduling steps, for least-recently-used slot choice.
    tick: u64,
    /// The most sequences one decode has carried: the proof that turns ran together.
    pub(super) widest: usize,
}

#[derive(Default)]
struct Slot {
    /// The tokens whose state is in this sequence's KV cache, from position 0.
    cached: Vec<LlamaToken>,
    /// The job whose conversation the cache holds.
    job: Option<usize>,
    busy: bool,
    used_at: u64,
}

/// One turn asked of the scheduler.
struct Request {
    job: usize,
    prompt: Vec<LlamaToken>,
    max_tokens: u32,
    answer_only: bool,
    call_only: bool,
    only_tool: Option<String>,
    cancel: Cancel,
    deadline: Option<Instant>,
    reply: Sender<Result<Reply, ModelError>>,
}

impl Request {
    fn should_stop(&self) -> bool {
        self.cancel.is_cancelled() || self.deadline.is_some_and(|d| Instant::now() >= d)
    }
}

/// A turn in progress in a slot.
struct Active {
    req: Request,
    slot: usize,
    /// Prompt tokens already in the cache; the prompt is evaluated from here.
    next_prompt: usize,
    /// Of the prompt, tokens that were cached before this turn.
    reused: usize,
    /// The last token sampled, still to be evaluated.
    pending: Option<LlamaToken>,
    sampler: TurnSampler,
    bytes: Vec<u8>,
    generated: u32,
    resamples: u32,
    started: Instant,
    prompt_done: Option<Instant>,
    /// Where this sequence's logits are in the current batch.
    logits_at: Option<i32>,
}

impl<'m> Pool<'m> {
    /// A context of `slots` sequences of `n_ctx_seq` tokens each.
    pub(super) fn new(engine: &'m LlamaEngine, n_ctx_seq: u32, threads: u32) -> Result<Self, ModelError> {
        let n_slots = engine.params.settings.parallel.max(1);
        let cparams = engine.context_params(n_ctx_seq * n_slots, n_slots, threads)?;
        let ctx = engine.model.new_context(backend()?, cparams).map_err(|e| {
            anyhow!(
                "llama.cpp could not create the subagents' context of {n_slots} sequences of {n_ctx_seq} tokens ({e}); lower model.parallel or the context (--ctx, model.n_ctx)"
            )
        })?;
        let slots = (0..n_slots).map(|_| Slot::default()).collect();
        Ok(Pool { engine, ctx, slots, n_ctx_seq, threads, tick: 0, widest: 0 })
    }

    /// Run `jobs` on threads of their own while this thread schedules their turns; return when
    /// all have ended. A scheduler failure fails the turns in flight (their jobs see a fault)
    /// and is returned once every job has ended.
    pub(super) fn run(&mut self, grammars: &Grammars, jobs: Vec<Job<'_>>) -> Result<(), ModelError> {
        let (tx, rx) = mpsc::channel();
        let engine = self.engine;
        let (n_ctx, threads) = (self.n_ctx_seq, self.threads);
        std::thread::scope(|s| {
            for (job_id, job) in jobs.into_iter().enumerate() {
                let mut client = SeqClient { engine, tx: tx.clone(), job: job_id, n_ctx, threads };
                s.spawn(move || job(&mut client));
            }
            drop(tx);
            let result = self.schedule(grammars, &rx);
            // After a failure, the jobs still running get a fault on their next turn.
            drop(rx);
            result
        })
    }

    fn schedule(&mut self, grammars: &Grammars, rx: &Receiver<Request>) -> Result<(), ModelError> {
        let n_batch = self.engine.params.settings.n_batch.max(1) as usize;
        let mut batch = LlamaBatch::new(n_batch, 1);
        let mut waiting: VecDeque<Request> = VecDeque::new();
        let mut active: Vec<Active> = Vec::new();
        let mut open = true;
        loop {
            if active.is_empty() && waiting.is_empty() {
                if !open {
                    return Ok(());
                }
                match rx.recv() {
                    Ok(r) => waiting.push_back(r),
                    Err(_) => return Ok(()),
                }
            }
            while open {
                match rx.try_recv() {
                    Ok(r) => waiting.push_back(r),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => open = false,
                }
            }
            self.tick += 1;
            while let Some(slot) = waiting.front().and_then(|r| self.pick_slot(r)) {
                let Some(req) = waiting.pop_front() else { break };
                let gbnf = grammars.pick(req.answer_only, req.call_only, req.only_tool.as_deref());
                active.push(self.start(slot, req, gbnf)?);
            }
            waiting.retain(|r| {
                let stop = r.should_stop();
                if stop {
                    let _ = r.reply.send(Err(ModelError::Cancelled));
                }
                !stop
            });
            active.retain(|a| {
                let stop = a.req.should_stop();
                if stop {
                    let _ = a.req.reply.send(Err(ModelError::Cancelled));
                    self.slots[a.slot].busy = false;
                }
                !stop
            });
            if active.is_empty() {
                continue;
            }
            if let Err(e) = self.step(&mut batch, n_batch, &mut active) {
                for a in active.drain(..) {
                    let _ = a.req.reply.send(Err(ModelError::Fault(anyhow!("{e}"))));
                    self.slots[a.slot] = Slot::default();
                }
                self.ctx.clear_kv_cache();
                return Err(e);
            }
            let vocab = self.engine.model.vocab();
            let mut i = 0;
            while i < active.len() {
                let Some(at) = active[i].logits_at.take() else {
                    i += 1;
                    continue;
                };
                let a = &mut active[i];
                a.prompt_done.get_or_insert_with(Instant::now);
                let (token, resampled) = a.sampler.next(&self.ctx, at, vocab.eos());
                a.resamples += u32::from(resampled);
                let mut cut_off = false;
                let ended = vocab.is_eog(token) || {
                    a.sampler.accept(token);
                    a.generated += 1;
                    vocab.token_to_piece_into(token, &mut a.bytes, self.engine.special_pieces(), None);
                    cut_off = a.generated >= a.req.max_tokens;
                    cut_off
                };
                if ended {
                    let a = active.swap_remove(i);
                    self.slots[a.slot].busy = false;
                    self.slots[a.slot].used_at = self.tick;
                    let to = a.req.reply.clone();
                    let mut reply = a.reply(cut_off);
                    reply.text = self.engine.reply_text(reply.text);
                    let _ = to.send(Ok(reply));
                } else {
                    a.pending = Some(token);
                    i += 1;
                }
            }
        }
    }

    /// The slot for a turn: the free one whose cache shares the longest prefix with the prompt
    /// (its own conversation, or the system prompt for a new subagent); on a tie, the one that
    /// held this subagent, then the one used longest ago.
    fn pick_slot(&self, req: &Request) -> Option<usize> {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| !s.busy)
            .max_by_key(|(_, s)| {
                (common_prefix(&s.cached, &req.prompt), s.job == Some(req.job), std::cmp::Reverse(s.used_at))
            })
            .map(|(i, _)| i)
    }

    /// Take `req` into `slot`: keep the cache's common prefix with the prompt, drop the rest.
    fn start(&mut self, slot: usize, req: Request, gbnf: &str) -> Result<Active, ModelError> {
        let s = &mut self.slots[slot];
        // The same tokens at the same positions have the same state, whoever's they were. At
        // least one token is evaluated, for its logits.
        let mut keep = common_prefix(&s.cached, &req.prompt).min(req.prompt.len().saturating_sub(1));
        if keep < s.cached.len() && self.ctx.kv_cache_seq_rm(slot as i32, Some(keep as u32), None).is_err() {
            // A model that cannot drop a tail of its cache (a recurrent one) starts the sequence over.
            self.ctx.kv_cache_seq_rm(slot as i32, None, None).map_err(|e| anyhow!("cannot clear a sequence: {e}"))?;
            keep = 0;
        }
        s.cached.truncate(keep);
        s.job = Some(req.job);
        s.busy = true;
        let p = &self.engine.params.settings;
        let sampler = TurnSampler::new(&self.engine.model, gbnf, p.temperature, p.seed)?;
        Ok(Active {
            req,
            slot,
            next_prompt: keep,
            reused: keep,
            pending: None,
            sampler,
            bytes: Vec::new(),
            generated: 0,
            resamples: 0,
            started: Instant::now(),
            prompt_done: None,
            logits_at: None,
        })
    }

    /// One decode: the pending token of every reply being generated, then as much of the
    /// prompts being evaluated as the batch holds.
    fn step(&mut self, batch: &mut LlamaBatch<'_>, n_batch: usize, active: &mut [Active]) -> Result<(), ModelError> {
        batch.clear();
        let mut n = 0usize;
        // Sequences with tokens in this batch.
        let mut seqs = 0;
        for a in active.iter_mut() {
            if let Some(token) = a.pending.take() {
                let cached = &mut self.slots[a.slot].cached;
                batch.add(token, cached.len() as i32, &[a.slot as i32], true).map_err(|e| anyhow!("batch: {e}"))?;
                cached.push(token);
                a.logits_at = Some(n as i32);
                n += 1;
                seqs += 1;
            }
        }
        for a in active.iter_mut() {
            let prompt = &a.req.prompt;
            if a.next_prompt >= prompt.len() || n >= n_batch {
                continue;
            }
            let take = (prompt.len() - a.next_prompt).min(n_batch - n);
            seqs += 1;
            let cached = &mut self.slots[a.slot].cached;
            for (k, t) in prompt[a.next_prompt..a.next_prompt + take].iter().enumerate() {
                let last = a.next_prompt + k + 1 == prompt.len();
                batch.add(*t, cached.len() as i32, &[a.slot as i32], last).map_err(|e| anyhow!("batch: {e}"))?;
                cached.push(*t);
                if last {
                    a.logits_at = Some(n as i32);
                }
                n += 1;
            }
            a.next_prompt += take;
        }
        self.widest = self.widest.max(seqs);
        self.ctx.decode(batch).map_err(|e| ModelError::Fault(anyhow!("llama.cpp decode failed: {e}")))
    }
}

fn common_prefix(a: &[LlamaToken], b: &[LlamaToken]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

impl Active {
    fn reply(self, cut_off: bool) -> Reply {
        let prompt_done = self.prompt_done.unwrap_or(self.started);
        let prompt = self.req.prompt.len() as u32;
        let usage = Usage {
            prompt_tokens: prompt,
            cached_tokens: self.reused as u32,
            evaluated_tokens: prompt - self.reused as u32,
            generated_tokens: self.generated,
            prompt_ms: prompt_done.duration_since(self.started).as_millis() as u64,
            generate_ms: prompt_done.elapsed().as_millis() as u64,
            grammar_resamples: self.resamples,
        };
        Reply { text: String::from_utf8_lossy(&self.bytes).into_owned(), usage, cut_off }
    }
}

/// A subagent's handle on the model: its turns go to the scheduler.
struct SeqClient<'m> {
    engine: &'m LlamaEngine,
    tx: Sender<Request>,
    job: usize,
    n_ctx: u32,
    threads: u32,
}

impl Model for SeqClient<'_> {
    fn describe(&self) -> ModelInfo {
        self.engine.info(self.n_ctx, self.threads)
    }

    fn n_ctx(&self) -> Option<u32> {
        Some(self.n_ctx)
    }

    fn count_tokens(&self, messages: &[Message]) -> Result<Option<u32>, ModelError> {
        Ok(Some(self.engine.render(messages, true)?.len() as u32))
    }

    fn complete(&mut self, req: &TurnRequest<'_>) -> Result<Reply, ModelError> {
        let prompt = self.engine.turn_prompt(req, self.n_ctx)?;
        let (reply, rx) = mpsc::channel();
        let request = Request {
            job: self.job,
            prompt,
            max_tokens: req.max_tokens,
            answer_only: req.answer_only,
            call_only: req.call_only,
            only_tool: req.only_tool.map(str::to_string),
            cancel: req.cancel.clone(),
            deadline: req.deadline,
            reply,
        };
        self.tx.send(request).map_err(|_| ModelError::Fault(anyhow!("the subagents' scheduler has stopped")))?;
        rx.recv().map_err(|_| ModelError::Fault(anyhow!("the subagents' scheduler has stopped")))?
    }

    // A subagent's own subagents (nested spawning, when enabled) take its slot in turn.
    fn run_parallel<'s>(&mut self, jobs: Vec<Job<'s>>) -> Result<(), ModelError> {
        crate::model::run_in_turn(self, jobs)
    }
}
