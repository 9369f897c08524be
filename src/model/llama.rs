//! llama.cpp in-process, through `llama-cpp-2`.
//!
//! - The chat template is the GGUF's own (or a built-in one the operator names).
//! - Every reply is constrained by a GBNF grammar made from the turn schema by llama.cpp's own
//!   JSON-schema converter, so a turn always parses into one schema-valid call or an answer.
//!   The grammar is checked lazily: a token is sampled from the raw logits first and only
//!   when the grammar rejects it does the full pass over the vocabulary run (see [`sample`]).
//! - The KV cache is reused across turns: only the tokens after the longest common prefix of
//!   the cache and the new prompt are evaluated. The system prompt's state is saved on disk,
//!   keyed by the model's sha256 and the prompt, so a new session skips that prefill.
//!
//! The model and its context are split ([`LlamaEngine`] and [`LlamaSession`]) because the
//! context borrows the model.

mod bench;
mod parallel;

use std::hash::{Hash, Hasher};
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Instant;

use anyhow::{Context as _, Result, anyhow, bail};
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::{KvCacheType, LlamaContextParams};
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaChatTemplate, LlamaModel};
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use llama_cpp_2::token::data::LlamaTokenData;
use llama_cpp_2::token::data_array::LlamaTokenDataArray;
use sha2::{Digest, Sha256};

use super::native::{Family, Native, Only};
use super::{Message, Model, ModelError, ModelInfo, Reply, TurnRequest, TurnSchema, Usage};
use crate::config::ModelConfig;

/// How to load and run a GGUF.
#[derive(Debug, Clone)]
pub struct LlamaParams {
    pub path: PathBuf,
    /// The `[model]` settings, flags already applied (context, batch, threads, KV type, chat
    /// template, temperature, seed); the endpoint keys are not used here.
    pub settings: ModelConfig,
    /// Where the system prompt's state is saved; `None` disables the cache.
    pub prompt_cache_dir: Option<PathBuf>,
}

impl LlamaParams {
    pub fn new(path: PathBuf) -> Self {
        LlamaParams { path, settings: ModelConfig::default(), prompt_cache_dir: None }
    }
}

/// The largest default context: enough for real work, small enough for a laptop's memory.
const DEFAULT_MAX_CTX: u32 = 8192;

fn backend() -> Result<&'static LlamaBackend> {
    static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            // llama.cpp's own logs go to tracing; they are shown only when a subscriber asks.
            llama_cpp_2::send_logs_to_tracing(llama_cpp_2::LogOptions::default());
            LlamaBackend::init().map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| anyhow!("cannot initialise llama.cpp: {e}"))
}

/// The cores without their hyper-threads, which llama.cpp's matrix kernels do not gain from.
pub fn physical_cores() -> u32 {
    let avail = std::thread::available_parallelism().map(|n| n.get() as u32).unwrap_or(1);
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let mut cores = std::collections::HashSet::new();
    let mut phys = "";
    for line in cpuinfo.lines() {
        let mut kv = line.splitn(2, ':').map(str::trim);
        match (kv.next(), kv.next()) {
            (Some("physical id"), Some(v)) => phys = v,
            (Some("core id"), Some(v)) => {
                cores.insert(format!("{phys}/{v}"));
            }
            _ => {}
        }
    }
    let n = cores.len() as u32;
    if n == 0 { avail } else { n.min(avail) }
}

fn kv_type(name: &str) -> Result<KvCacheType> {
    Ok(match name {
        "f16" => KvCacheType::F16,
        "f32" => KvCacheType::F32,
        "q8_0" => KvCacheType::Q8_0,
        "q4_0" => KvCacheType::Q4_0,
        other => bail!("model.kv_type {other:?} is not one of f16, q8_0, q4_0, f32"),
    })
}

/// A loaded GGUF.
pub struct LlamaEngine {
    model: LlamaModel,
    params: LlamaParams,
    sha256: String,
    template: LlamaChatTemplate,
    template_name: String,
    /// The model's own tool-call format, when that is the protocol.
    native: Option<Native>,
}

impl LlamaEngine {
    /// Load the model; `progress` gets the fraction loaded.
    pub fn load(params: LlamaParams, sha256: String, mut progress: impl FnMut(f32) + 'static) -> Result<Self> {
        super::locate::check_gguf(&params.path)?;
        kv_type(&params.settings.kv_type)?;
        let backend = backend()?;
        let mparams = LlamaModelParams::default().with_progress_callback(move |p| {
            progress(p);
            true
        });
        let model = LlamaModel::load_from_file(backend, &params.path, &mparams).map_err(|e| {
            anyhow!(
                "llama.cpp could not load {} ({e}): the file is truncated or corrupt, or its architecture is newer than this build. Check its sha256 against its source, or fetch the default model again with `bash models/fetch.sh`; ABHED_LOG=llama_cpp_2=info shows llama.cpp's own account.",
                params.path.display()
            )
        })?;
        let (template, template_name) = match &params.settings.chat_template {
            Some(name) => (
                LlamaChatTemplate::new(name).map_err(|e| anyhow!("invalid chat template name {name:?}: {e}"))?,
                name.clone(),
            ),
            None => (
                model.chat_template(None).map_err(|_| {
                    anyhow!(
                        "{} has no chat template in its metadata. Name a built-in one with --chat-template (or model.chat_template in the config): chatml, llama3, mistral-v7, gemma, phi3, ...",
                        params.path.display()
                    )
                })?,
                "gguf".to_string(),
            ),
        };
        // llama.cpp applies templates it recognises; find out now, not at the first turn.
        let probe = [chat_message("system", "s")?, chat_message("user", "u")?];
        model.apply_chat_template(&template, &probe, true).map_err(|e| {
            anyhow!(
                "llama.cpp does not know the chat template of {} ({e}). Name a built-in template the model was trained with: --chat-template chatml (or llama3, mistral-v7, gemma, phi3, ...), or model.chat_template in the config.",
                params.path.display()
            )
        })?;
        let native = native_protocol(&model, &params, &template, &template_name)?;
        Ok(LlamaEngine { model, params, sha256, template, template_name, native })
    }

    /// The chat template applied to `messages`, tokenized.
    fn render(&self, messages: &[Message], add_assistant: bool) -> Result<Vec<LlamaToken>> {
        if let Some(native) = &self.native {
            let text = native.render(messages, &self.functions(), add_assistant)?;
            return Ok(self.model.vocab().tokenize(text.as_bytes(), true, true));
        }
        let chat = messages.iter().map(|m| chat_message(m.role.as_str(), &m.content)).collect::<Result<Vec<_>>>()?;
        let text = self
            .model
            .apply_chat_template(&self.template, &chat, add_assistant)
            .map_err(|e| anyhow!("cannot apply the chat template: {e}"))?;
        Ok(self.model.vocab().tokenize(text.as_bytes(), true, true))
    }

    /// A turn's prompt, tokenized, checked to leave room for its reply in `n_ctx`.
    fn turn_prompt(&self, req: &TurnRequest<'_>, n_ctx: u32) -> Result<Vec<LlamaToken>, ModelError> {
        let prompt = self.render(req.messages, true)?;
        if prompt.is_empty() {
            return Err(ModelError::Fault(anyhow!("the chat template rendered an empty prompt")));
        }
        let needed = prompt.len() as u32 + req.max_tokens;
        if needed > n_ctx {
            return Err(ModelError::ContextFull { needed, prompt: prompt.len() as u32, reply: req.max_tokens, n_ctx });
        }
        Ok(prompt)
    }

    fn info(&self, n_ctx: u32, threads: u32) -> ModelInfo {
        let p = &self.params;
        ModelInfo {
            adapter: "llama".into(),
            name: p.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
            location: p.path.display().to_string(),
            sha256: Some(self.sha256.clone()),
            n_ctx: Some(n_ctx),
            template: Some(self.template_name.clone()),
            threads: Some(threads),
            protocol: self.native.as_ref().map_or(super::JSON_TURN, |n| n.family().protocol()).into(),
        }
    }

    /// The tools as the chat template's `tools` variable takes them.
    fn functions(&self) -> Vec<serde_json::Value> {
        static FUNCTIONS: OnceLock<Vec<serde_json::Value>> = OnceLock::new();
        FUNCTIONS.get_or_init(|| TurnSchema::new(&crate::tools::Registry::native()).functions().to_vec()).clone()
    }

    /// A generated reply as the loop reads it: a JSON turn (a native reply is converted).
    pub(crate) fn reply_text(&self, raw: String) -> String {
        match &self.native {
            Some(n) => n.to_turn(&raw),
            None => raw,
        }
    }

    /// Whether a reply so far is a whole call written without its tags
    /// ([`native::bare_call`](crate::model::native::bare_call)): generation can stop there,
    /// since what a small model writes next is more calls one turn cannot make.
    pub(crate) fn bare_call_done(&self, reply: &[u8]) -> bool {
        self.native.is_some() && std::str::from_utf8(reply).is_ok_and(|t| crate::model::native::bare_call(t).is_some())
    }

    /// Whether pieces of special tokens are part of a reply's text (a native call's tags are
    /// special tokens in some vocabularies).
    pub(crate) fn special_pieces(&self) -> bool {
        self.native.is_some()
    }

    /// Context parameters for `n_ctx` tokens in all, split over `n_seq` sequences.
    fn context_params(&self, n_ctx: u32, n_seq: u32, threads: u32) -> Result<LlamaContextParams> {
        let p = &self.params;
        let kv = kv_type(&p.settings.kv_type)?;
        Ok(LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(n_ctx))
            .with_n_seq_max(n_seq)
            // A cache per sequence: each attends over its own cells, not over all of them.
            .with_kv_unified(false)
            .with_n_batch(p.settings.n_batch)
            .with_n_ubatch(p.settings.n_batch)
            .with_n_threads(threads as i32)
            .with_n_threads_batch(threads as i32)
            .with_type_k(kv)
            .with_type_v(kv))
    }

    /// A context for one conversation.
    pub fn session(&self, schema: &TurnSchema) -> Result<LlamaSession<'_>> {
        let p = &self.params;
        let n_ctx = p.settings.n_ctx.unwrap_or_else(|| self.model.n_ctx_train().min(DEFAULT_MAX_CTX));
        let threads = p.settings.n_threads.unwrap_or_else(physical_cores).max(1);
        let cparams = self.context_params(n_ctx, 1, threads)?;
        let ctx = self.model.new_context(backend()?, cparams).map_err(|e| {
            anyhow!("llama.cpp could not create a context of {n_ctx} tokens ({e}); lower --ctx or model.n_ctx")
        })?;
        let native_call = |schema: &serde_json::Value| {
            llama_cpp_2::json_schema_to_grammar(&serde_json::to_string(schema)?)
                .map_err(|e| anyhow!("llama.cpp could not turn the call schema into a grammar: {e}"))
        };
        let mut grammars = match &self.native {
            Some(n) => {
                let call = native_call(schema.native_call_schema())?;
                Grammars {
                    either: self.check_grammar(n.grammar(&call, Only::Either)?)?,
                    answer: self.check_grammar(n.grammar(&call, Only::Answer)?)?,
                    call: self.check_grammar(n.grammar(&call, Only::Call)?)?,
                    tools: Vec::new(),
                }
            }
            None => Grammars {
                either: self.grammar(schema.json_schema())?,
                answer: self.grammar(schema.answer_schema())?,
                call: self.grammar(schema.call_schema())?,
                tools: Vec::new(),
            },
        };
        for name in schema.tools() {
            let Some((call, native)) = schema.tool_call_schemas(name) else { continue };
            let gbnf = match &self.native {
                Some(n) => self.check_grammar(n.grammar(&native_call(native)?, Only::Call)?)?,
                None => self.grammar(call)?,
            };
            grammars.tools.push((name.clone(), gbnf));
        }
        Ok(LlamaSession {
            engine: self,
            ctx,
            n_ctx,
            threads,
            grammars,
            cached: Vec::new(),
            prompt_cache_used: false,
            shared: None,
            pool: None,
        })
    }

    /// A JSON schema as GBNF, by llama.cpp's own converter, parsed once now so that a bad
    /// grammar is a start-up error, not a first-turn one.
    fn grammar(&self, schema: &serde_json::Value) -> Result<String> {
        let gbnf = llama_cpp_2::json_schema_to_grammar(&serde_json::to_string(schema)?)
            .map_err(|e| anyhow!("llama.cpp could not turn the turn schema into a grammar: {e}"))?;
        self.check_grammar(gbnf)
    }

    fn check_grammar(&self, gbnf: String) -> Result<String> {
        LlamaSampler::grammar(&self.model, &gbnf, "root")
            .map_err(|e| anyhow!("llama.cpp rejected the generated grammar: {e}"))?;
        Ok(gbnf)
    }
}

/// The model's own tool-call format, if the protocol setting and the chat template call for it:
/// `auto` takes it where the GGUF's own template renders calls of a family Abhed knows,
/// `native` requires it, `json` never takes it.
fn native_protocol(
    model: &LlamaModel,
    params: &LlamaParams,
    template: &LlamaChatTemplate,
    template_name: &str,
) -> Result<Option<Native>> {
    let setting = params.settings.protocol.as_str();
    if !matches!(setting, "auto" | "native" | "json") {
        bail!("model.protocol (--protocol) is {setting:?}; it must be auto, native or json");
    }
    let source = template.to_str().unwrap_or_default();
    let family = (template_name == "gguf").then(|| Family::detect(source)).flatten();
    let family = match (setting, family) {
        ("json", _) | ("auto", None) => return Ok(None),
        (_, None) => bail!(
            "{} has no chat template with tool calls of a family Abhed knows (Hermes/Qwen2.5 `<tool_call>`), so --protocol native cannot be used; use --protocol json",
            params.path.display()
        ),
        (_, Some(f)) => f,
    };
    let vocab = model.vocab();
    let piece = |t| {
        let mut b = Vec::new();
        vocab.token_to_piece_into(t, &mut b, true, None);
        String::from_utf8_lossy(&b).into_owned()
    };
    Native::new(family, source, &piece(vocab.bos()), &piece(vocab.eos()))
        .map(Some)
        .with_context(|| format!("the chat template of {}", params.path.display()))
}

/// The GBNF grammars of a turn.
pub(crate) struct Grammars {
    /// A call or the final answer.
    either: String,
    /// Only the final answer (the repeat guard, compaction).
    answer: String,
    /// Only a call (a task's first turn).
    call: String,
    /// Only a call of one tool (`TurnRequest::only_tool`), per tool.
    tools: Vec<(String, String)>,
}

impl Grammars {
    pub(crate) fn pick(&self, answer_only: bool, call_only: bool, only_tool: Option<&str>) -> &str {
        match (answer_only, call_only) {
            (true, _) => &self.answer,
            (false, true) => only_tool
                .and_then(|t| self.tools.iter().find(|(name, _)| name == t))
                .map_or(&self.call, |(_, gbnf)| gbnf),
            (false, false) => &self.either,
        }
    }
}

fn chat_message(role: &str, content: &str) -> Result<LlamaChatMessage> {
    // A NUL cannot cross into C; tools never emit one, but a file name might hold anything.
    LlamaChatMessage::new(role.to_string(), content.replace('\0', "\\0"))
        .map_err(|e| anyhow!("cannot pass a message to llama.cpp: {e}"))
}

/// One conversation's context and its KV cache.
pub struct LlamaSession<'m> {
    engine: &'m LlamaEngine,
    ctx: LlamaContext<'m>,
    n_ctx: u32,
    threads: u32,
    grammars: Grammars,
    /// The tokens whose state is in the KV cache, in order from position 0.
    cached: Vec<LlamaToken>,
    /// Whether the disk cache of the system prompt was tried (once per session).
    prompt_cache_used: bool,
    /// The last system message's shared tokens, keyed by a hash of the message: every turn
    /// asks for them, and the message changes only when the session does.
    shared: Option<(u64, Vec<LlamaToken>)>,
    /// The context subagents run in, made at the first `task` call.
    pool: Option<parallel::Pool<'m>>,
}

impl LlamaSession<'_> {
    /// The CPU threads the context runs on.
    pub fn threads(&self) -> u32 {
        self.threads
    }

    /// The most subagent sequences one decode has carried so far (0 before the first `task`).
    pub fn subagent_batch_width(&self) -> usize {
        self.pool.as_ref().map_or(0, |p| p.widest)
    }

    /// Whether `reply` is a complete turn under the turn grammar, fed through it token by token
    /// as generation would feed it. For tests and diagnostics of the grammar itself.
    pub fn grammar_accepts(&self, reply: &str) -> Result<bool> {
        self.accepts(&self.grammars.either, reply)
    }

    /// Whether the grammar of a turn held to a call of `tool` (`TurnRequest::only_tool`) admits
    /// `reply`.
    pub fn tool_grammar_accepts(&self, tool: &str, reply: &str) -> Result<bool> {
        self.accepts(self.grammars.pick(false, true, Some(tool)), reply)
    }

    fn accepts(&self, gbnf: &str, reply: &str) -> Result<bool> {
        let model = &self.engine.model;
        let vocab = model.vocab();
        let mut sampler = TurnSampler::new(model, gbnf, 0.0, 0)?;
        for token in vocab.tokenize(reply.as_bytes(), false, false) {
            if !sampler.accepts(token) {
                return Ok(false);
            }
            sampler.accept(token);
        }
        // Complete: the grammar now allows the end of generation.
        Ok(sampler.accepts(vocab.eos()))
    }

    /// The chat template applied to `messages`, tokenized.
    fn tokenize(&self, messages: &[Message], add_assistant: bool) -> Result<Vec<LlamaToken>> {
        self.engine.render(messages, add_assistant)
    }

    /// Evaluate `tokens` at positions `start..`, keeping the logits of the last one.
    fn decode(&mut self, start: usize, tokens: &[LlamaToken], cancel: &dyn Fn() -> bool) -> Result<(), ModelError> {
        let n_batch = self.engine.params.settings.n_batch.max(1) as usize;
        let mut batch = LlamaBatch::new(n_batch, 1);
        for (ci, chunk) in tokens.chunks(n_batch).enumerate() {
            if cancel() {
                return Err(ModelError::Cancelled);
            }
            batch.clear();
            let last_chunk = (ci + 1) * n_batch >= tokens.len();
            for (i, t) in chunk.iter().enumerate() {
                let pos = (start + ci * n_batch + i) as i32;
                batch.add(*t, pos, &[0], last_chunk && i + 1 == chunk.len()).map_err(|e| anyhow!("batch: {e}"))?;
            }
            self.ctx.decode(&mut batch).map_err(|e| anyhow!("llama.cpp decode failed: {e}"))?;
            self.cached.extend_from_slice(chunk);
        }
        Ok(())
    }

    /// Drop the cache after position `keep`.
    fn truncate_cache(&mut self, keep: usize) -> Result<()> {
        if keep < self.cached.len() {
            if self.ctx.kv_cache_seq_rm(0, Some(keep as u32), None).is_err() {
                // Some architectures (recurrent ones) cannot drop a tail: start over.
                self.ctx.clear_kv_cache();
                self.cached.clear();
                return Ok(());
            }
            self.cached.truncate(keep);
        }
        Ok(())
    }

    /// The tokens of the system message's shared part (`Message::shared_prefix`): those the
    /// whole message and its shared text alone begin with, so the template's closing tokens and
    /// a token that could merge across the boundary are left out. The whole message's tokens
    /// when it has no shared part.
    fn shared_tokens(&mut self, system: &Message) -> Result<Vec<LlamaToken>, ModelError> {
        let key = {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            (&system.content, system.shared_prefix).hash(&mut h);
            h.finish()
        };
        if let Some((k, tokens)) = &self.shared
            && *k == key
        {
            return Ok(tokens.clone());
        }
        let whole = self.tokenize(std::slice::from_ref(system), false)?;
        let tokens =
            match system.shared_prefix.filter(|&n| n < system.content.len()).and_then(|n| system.content.get(..n)) {
                Some(shared) => {
                    let part = self.tokenize(&[Message::new(system.role, shared)], false)?;
                    let n = whole.iter().zip(&part).take_while(|(a, b)| a == b).count();
                    whole[..n].to_vec()
                }
                None => whole,
            };
        self.shared = Some((key, tokens.clone()));
        Ok(tokens)
    }

    fn prompt_cache_file(&self, system: &[LlamaToken]) -> Option<PathBuf> {
        let dir = self.engine.params.prompt_cache_dir.as_ref()?;
        let mut h = Sha256::new();
        for t in system {
            h.update(t.0.to_le_bytes());
        }
        h.update(
            format!("{}|{}|{}", self.n_ctx, self.engine.params.settings.kv_type, env!("CARGO_PKG_VERSION")).as_bytes(),
        );
        let key: String = h.finalize()[..8].iter().map(|b| format!("{b:02x}")).collect();
        let model = self.engine.sha256.get(..16).unwrap_or(&self.engine.sha256);
        Some(dir.join(format!("{model}-{key}.kv")))
    }

    /// Whether the cache lacks the system prompt's shared part that `prompt` begins with, so
    /// that the saved state should be loaded. Not only at a session's first turn: compaction
    /// decodes its own prompt in this context, and the eval runs task after task in one
    /// session, so the next turn found its cache holding the summary's prompt and evaluated
    /// the whole system prompt again (50 s for the 1.5B model on 2 cores, after every
    /// compaction). A system message without a shared part (the summary's own) is tried once.
    fn needs_system_prompt(&mut self, messages: &[Message], prompt: &[LlamaToken]) -> Result<bool, ModelError> {
        let Some(first) = messages.first().filter(|m| m.role == super::Role::System) else { return Ok(false) };
        if first.shared_prefix.is_none() {
            return Ok(!self.prompt_cache_used && self.cached.is_empty());
        }
        let shared = self.shared_tokens(first)?.len();
        let common = self.cached.iter().zip(prompt).take_while(|(a, b)| a == b).count();
        Ok(common < shared)
    }

    /// Fill the cache with the system prompt's shared part from disk, or evaluate it and save
    /// it there. Returns the tokens evaluated (0 when the state came from disk).
    fn warm_system_prompt(&mut self, messages: &[Message], cancel: &dyn Fn() -> bool) -> Result<u32, ModelError> {
        self.prompt_cache_used = true;
        let Some(first) = messages.first().filter(|m| m.role == super::Role::System) else { return Ok(0) };
        let system = self.shared_tokens(first)?;
        let Some(file) = self.prompt_cache_file(&system) else { return Ok(0) };
        if file.is_file()
            && let Ok(tokens) = self.ctx.state_load_file(&file, self.n_ctx as usize)
        {
            if tokens == system {
                self.cached = tokens;
                return Ok(0);
            }
            self.ctx.clear_kv_cache();
            self.cached.clear();
        }
        self.truncate_cache(0)?;
        self.decode(0, &system, cancel)?;
        // Best effort: a read-only home only costs the next session its prefill.
        if let Some(dir) = file.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let tmp = file.with_extension(format!("tmp{}", std::process::id()));
        if self.ctx.state_save_file(&tmp, &self.cached).is_ok() {
            let _ = std::fs::rename(&tmp, &file);
        } else {
            let _ = std::fs::remove_file(&tmp);
        }
        Ok(system.len() as u32)
    }
}

impl Model for LlamaSession<'_> {
    fn describe(&self) -> ModelInfo {
        self.engine.info(self.n_ctx, self.threads)
    }

    fn run_parallel<'s>(&mut self, jobs: Vec<super::Job<'s>>) -> Result<(), ModelError> {
        if self.pool.is_none() {
            self.pool = Some(parallel::Pool::new(self.engine, self.n_ctx, self.threads)?);
        }
        let Some(pool) = self.pool.as_mut() else { return Ok(()) };
        pool.run(&self.grammars, jobs)
    }

    fn n_ctx(&self) -> Option<u32> {
        Some(self.n_ctx)
    }

    fn count_tokens(&self, messages: &[Message]) -> Result<Option<u32>, ModelError> {
        Ok(Some(self.tokenize(messages, true)?.len() as u32))
    }

    fn complete(&mut self, req: &TurnRequest<'_>) -> Result<Reply, ModelError> {
        let stop = || req.should_stop();
        let prompt = self.engine.turn_prompt(req, self.n_ctx)?;
        let t0 = Instant::now();
        let mut evaluated = 0;
        if self.needs_system_prompt(req.messages, &prompt)? {
            evaluated += self.warm_system_prompt(req.messages, &stop)?;
        }
        // The longest common prefix; at least one token is evaluated, for its logits.
        let mut keep = self.cached.iter().zip(&prompt).take_while(|(a, b)| a == b).count();
        if keep == prompt.len() {
            keep -= 1;
        }
        self.truncate_cache(keep)?;
        let keep = self.cached.len();
        self.decode(keep, &prompt[keep..], &stop)?;
        // Tokens evaluated for the system prompt and then dropped (it did not prefix this prompt)
        // were spent too, but are not part of this prompt's accounting.
        let evaluated = (evaluated.min(keep as u32) + (prompt.len() - keep) as u32).min(prompt.len() as u32);
        let prompt_ms = t0.elapsed().as_millis() as u64;

        let t1 = Instant::now();
        let generated = self.generate(req, &stop)?;
        let usage = Usage {
            prompt_tokens: prompt.len() as u32,
            cached_tokens: prompt.len() as u32 - evaluated,
            evaluated_tokens: evaluated,
            generated_tokens: generated.tokens,
            prompt_ms,
            generate_ms: t1.elapsed().as_millis() as u64,
            grammar_resamples: generated.resamples,
        };
        Ok(Reply { text: generated.text, usage, cut_off: generated.cut_off })
    }
}

struct Generated {
    text: String,
    tokens: u32,
    resamples: u32,
    cut_off: bool,
}

impl LlamaSession<'_> {
    fn generate(&mut self, req: &TurnRequest<'_>, stop: &dyn Fn() -> bool) -> Result<Generated, ModelError> {
        let model = &self.engine.model;
        let p = &self.engine.params;
        let gbnf = self.grammars.pick(req.answer_only, req.call_only, req.only_tool);
        let (temperature, seed) = req.decoding(p.settings.temperature, p.settings.seed);
        let mut sampler = TurnSampler::new(model, gbnf, temperature, seed)?;
        let vocab = model.vocab();
        let mut bytes = Vec::new();
        let mut streamed = 0;
        let mut out = Generated { text: String::new(), tokens: 0, resamples: 0, cut_off: false };
        let mut batch = LlamaBatch::new(1, 1);
        loop {
            if stop() {
                return Err(ModelError::Cancelled);
            }
            let (token, resampled) = sampler.next(&self.ctx, -1, vocab.eos());
            out.resamples += u32::from(resampled);
            if vocab.is_eog(token) {
                break;
            }
            sampler.accept(token);
            out.tokens += 1;
            let before = bytes.len();
            vocab.token_to_piece_into(token, &mut bytes, self.engine.special_pieces(), None);
            if let Some(tell) = req.on_token {
                // Only whole characters: a token can end inside one.
                let fresh = &bytes[streamed..];
                let whole = match std::str::from_utf8(fresh) {
                    Ok(s) => s,
                    Err(e) => std::str::from_utf8(&fresh[..e.valid_up_to()]).unwrap_or_default(),
                };
                if !whole.is_empty() {
                    tell(whole);
                    streamed += whole.len();
                }
            }
            if bytes[before..].contains(&b'}') && self.engine.bare_call_done(&bytes) {
                break;
            }
            // A reply that has fallen into a loop, or pastes read's output, ends now rather than
            // at `max_tokens`; the loop reads it as cut off and says why (`repeat`).
            let looping = out.tokens.is_multiple_of(LOOP_CHECK_EVERY) && {
                let text = String::from_utf8_lossy(&bytes);
                super::repeat::looping_block(&text).is_some() || super::repeat::stop_at_pasted_header(&text)
            };
            if out.tokens >= req.max_tokens || looping {
                out.cut_off = true;
                break;
            }
            batch.clear();
            batch.add(token, self.cached.len() as i32, &[0], true).map_err(|e| anyhow!("batch: {e}"))?;
            self.ctx.decode(&mut batch).map_err(|e| anyhow!("llama.cpp decode failed: {e}"))?;
            self.cached.push(token);
        }
        out.text = self.engine.reply_text(String::from_utf8_lossy(&bytes).into_owned());
        Ok(out)
    }
}

/// Every how many generated tokens a reply is checked for a loop.
const LOOP_CHECK_EVERY: u32 = 8;

/// How many of the best candidates the grammar checks before it checks them all.
const TOP_K_CHECK: usize = 64;

/// Picks each token of a turn under the turn grammar, cheaply.
///
/// The grammar pass over a whole vocabulary costs milliseconds a token, so it is the last
/// resort: the model's own pick is checked first (one token through the grammar); for greedy
/// decoding, when the grammar rejects it, the best 64 candidates are checked next, and the
/// highest one the grammar accepts is exactly what the full pass would pick (every other token
/// has a lower logit); only when none of them fits does the full pass run. With a temperature,
/// a rejected pick is resampled after the full pass (llama.cpp's `common_sampler` does the same).
pub(crate) struct TurnSampler {
    grammar: LlamaSampler,
    /// `None`: greedy.
    chain: Option<LlamaSampler>,
}

impl TurnSampler {
    pub(crate) fn new(model: &LlamaModel, gbnf: &str, temperature: f32, seed: u32) -> Result<Self> {
        let grammar = LlamaSampler::grammar(model, gbnf, "root")
            .map_err(|e| anyhow!("llama.cpp rejected the generated grammar: {e}"))?;
        let chain = (temperature > 0.0)
            .then(|| LlamaSampler::chain_simple([LlamaSampler::temp(temperature), LlamaSampler::dist(seed)]));
        Ok(TurnSampler { grammar, chain })
    }

    fn accepts(&mut self, token: LlamaToken) -> bool {
        let mut one = LlamaTokenDataArray::new(vec![LlamaTokenData::new(token, 1.0, 0.0)], false);
        one.apply_sampler(&mut self.grammar);
        one.data.first().is_some_and(|d| d.logit().is_finite())
    }

    /// The next token from the logits of the batch's token `idx` (-1: the last), and whether
    /// the grammar had to correct the model's own pick.
    pub(crate) fn next(&mut self, ctx: &LlamaContext<'_>, idx: i32, eos: LlamaToken) -> (LlamaToken, bool) {
        let Some(chain) = self.chain.as_mut() else { return self.next_greedy(ctx, idx, eos) };
        let mut cands = LlamaTokenDataArray::from_iter(ctx.candidates_ith(idx), false);
        cands.apply_sampler(chain);
        if let Some(token) = cands.selected_token()
            && self.accepts(token)
        {
            return (token, false);
        }
        let mut cands = LlamaTokenDataArray::from_iter(ctx.candidates_ith(idx), false);
        cands.apply_sampler(&mut self.grammar);
        if let Some(chain) = self.chain.as_mut() {
            cands.apply_sampler(chain);
        }
        // The grammar always allows some token (an end-of-generation one once it is complete).
        (cands.selected_token().unwrap_or(eos), true)
    }

    fn next_greedy(&mut self, ctx: &LlamaContext<'_>, idx: i32, eos: LlamaToken) -> (LlamaToken, bool) {
        let logits = ctx.get_logits_ith(idx);
        let best = logits.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map(|(i, _)| i).unwrap_or(0);
        if self.accepts(LlamaToken(best as i32)) {
            return (LlamaToken(best as i32), false);
        }
        let mut order: Vec<usize> = (0..logits.len()).collect();
        let k = TOP_K_CHECK.min(order.len());
        if k < order.len() {
            order.select_nth_unstable_by(k, |a, b| logits[*b].total_cmp(&logits[*a]));
            order.truncate(k);
        }
        order.sort_unstable_by(|a, b| logits[*b].total_cmp(&logits[*a]));
        let top: Vec<LlamaTokenData> =
            order.iter().map(|&i| LlamaTokenData::new(LlamaToken(i as i32), logits[i], 0.0)).collect();
        let mut cands = LlamaTokenDataArray::new(top, true);
        cands.apply_sampler(&mut self.grammar);
        if let Some(d) = cands.data.iter().find(|d| d.logit().is_finite()) {
            return (d.id(), true);
        }
        let mut cands = LlamaTokenDataArray::from_iter(ctx.candidates_ith(idx), false);
        cands.apply_sampler(&mut self.grammar);
        let best = cands.data.iter().filter(|d| d.logit().is_finite()).max_by(|a, b| a.logit().total_cmp(&b.logit()));
        (best.map(LlamaTokenData::id).unwrap_or(eos), true)
    }

    pub(crate) fn accept(&mut self, token: LlamaToken) {
        self.grammar.accept(token);
        if let Some(chain) = self.chain.as_mut() {
            chain.accept(token);
        }
    }
}
