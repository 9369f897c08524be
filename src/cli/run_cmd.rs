//! `abhed run "TASK"` and `abhed sessions resume ID`: a run on a model, one-shot and
//! non-interactive. The loop runs on its own thread (it owns the model and the store); this
//! thread sends it the operation and renders the events it sends back.

use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Duration;

use clap::Args;

use abhed::agent::{Agent, Budgets, Event, Op, RunSetup, StopReason};
use abhed::approval::gate::{Answer, Approvals};
use abhed::config::Config;
use abhed::model::llama::{LlamaEngine, LlamaParams};
use abhed::model::openai::{OpenAi, OpenAiParams};
use abhed::model::scripted::Scripted;
use abhed::model::{Cancel, Model, TurnSchema, locate};
use abhed::sandbox::{SessionSandbox, Workspace};
use abhed::store::Store;
use abhed::tools::{Registry, ToolContext};

use super::render::Renderer;
use super::{Failure, exit};

/// Which model to use and how; each flag overrides the config's `[model]` key.
#[derive(Args, Clone, Default)]
pub struct ModelArgs {
    /// A GGUF file (default: the default model, found beside the binary or in a checkout).
    #[arg(long, value_name = "PATH")]
    pub model: Option<PathBuf>,
    /// An OpenAI-compatible endpoint (llama-server, vLLM, Ollama) instead of a GGUF.
    #[arg(long, value_name = "URL", conflicts_with = "model")]
    pub endpoint: Option<String>,
    /// The model name sent to the endpoint.
    #[arg(long, value_name = "NAME", requires = "endpoint")]
    pub endpoint_model: Option<String>,
    /// Replay a file of model turns (for testing the loop; never a real model).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["model", "endpoint"])]
    pub script: Option<PathBuf>,
    /// Context window in tokens.
    #[arg(long = "ctx", value_name = "N")]
    pub n_ctx: Option<u32>,
    /// CPU threads (default: the physical cores).
    #[arg(long, value_name = "N")]
    pub threads: Option<u32>,
    /// A built-in chat template (chatml, llama3, ...) for a model whose own is not known.
    #[arg(long, value_name = "NAME")]
    pub chat_template: Option<String>,
    /// The most tokens one reply may have.
    #[arg(long, value_name = "N")]
    pub max_reply_tokens: Option<u32>,
    /// How turns are asked for: auto (the model's own tool-call format where Abhed knows it),
    /// native, or json (one JSON object per turn).
    #[arg(long, value_name = "auto|native|json")]
    pub protocol: Option<String>,
    /// Do not use (or write) the saved system-prompt state.
    #[arg(long)]
    pub no_prompt_cache: bool,
}

/// The run's budgets; each flag overrides the config's `[run]` key.
#[derive(Args, Clone, Default)]
pub struct BudgetArgs {
    /// The most model turns.
    #[arg(long, value_name = "N")]
    pub max_turns: Option<u32>,
    /// The most tokens evaluated plus generated.
    #[arg(long, value_name = "N")]
    pub max_tokens: Option<u64>,
    /// The most wall time, in seconds (0: no limit).
    #[arg(long = "timeout", value_name = "SECS")]
    pub max_wall_s: Option<u64>,
}

#[derive(Args)]
pub struct RunArgs {
    /// What to do, in plain words.
    pub task: String,
    /// The workspace root (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Print every event as a JSON line on stdout (schema: docs/EVENTS.md).
    #[arg(long)]
    pub json: bool,
    /// Plan mode: the model explores and writes a plan; nothing may change until the operator
    /// accepts it (on a terminal when it is written, else with `sessions resume ID --accept-plan`).
    #[arg(long)]
    pub plan: bool,
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub budgets: BudgetArgs,
    #[command(flatten)]
    pub gate: GateArgs,
}

/// What a run does to plan mode before it starts.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum PlanMode {
    Keep,
    Start,
    Accept,
}

/// The model a run uses, resolved from flags and config.
pub(super) enum ModelSpec {
    Llama(LlamaParams),
    OpenAi(OpenAiParams),
    Scripted(PathBuf),
}

/// What the loop thread needs to start.
pub(super) struct Plan {
    pub(super) store_path: PathBuf,
    pub(super) workspace: PathBuf,
    /// A session to resume; `None` starts one.
    pub(super) session: Option<String>,
    pub(super) config: Config,
    pub(super) spec: ModelSpec,
    pub(super) budgets: Budgets,
    pub(super) op: Op,
    pub(super) plan_mode: PlanMode,
    /// Stream the model's replies as `token` events (interactive mode).
    pub(super) stream: bool,
}

pub fn run(a: RunArgs) -> Result<u8, Failure> {
    let json = a.json;
    json_error(json, run_inner(a))
}

fn run_inner(a: RunArgs) -> Result<u8, Failure> {
    let ws = super::workspace_dir(a.workspace, None)?;
    let config = Config::load(&ws).map_err(|e| Failure::usage(format!("{e:#}")))?;
    say_config_warnings(&config);
    let task = if a.plan {
        format!(
            "{}\n\n(Plan mode: explore with read, glob and grep, then write your plan with the plan tool. Nothing may change until the operator accepts the plan.)",
            a.task
        )
    } else {
        a.task
    };
    let mut plan = plan(ws, None, config, &a.model, &a.budgets, Op::Task(task))?;
    check_workspace(&plan)?;
    gate(&plan, &a.gate)?;
    if a.plan {
        plan.plan_mode = PlanMode::Start;
    }
    execute(plan, a.json)
}

/// With `--json`, a failure that ends the command before or outside the run (bad flags or
/// config, no model, a fault) is also one JSON line on stdout, so that a script reading the
/// stream always gets a last line: `{"v":1,"type":"error","exit":CODE,"message":...}`.
fn json_error(json: bool, result: Result<u8, Failure>) -> Result<u8, Failure> {
    if let (true, Err(f)) = (json, &result) {
        let line = serde_json::json!({"v": abhed::agent::events::EVENT_VERSION, "type": "error", "exit": f.code, "message": f.message});
        super::print_stdout(&format!("{line}\n"))?;
    }
    result
}

#[derive(Args)]
pub struct ResumeArgs {
    /// The session's id (`abhed sessions list` shows them).
    id: String,
    /// A follow-up task (required when the session finished).
    task: Option<String>,
    /// Print every event as a JSON line on stdout.
    #[arg(long)]
    json: bool,
    /// Accept the plan the session wrote in plan mode, and have the model carry it out.
    #[arg(long)]
    accept_plan: bool,
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    budgets: BudgetArgs,
    #[command(flatten)]
    gate: GateArgs,
}

/// Resume a session (in its own workspace) with an optional follow-up task.
pub fn resume(r: ResumeArgs) -> Result<u8, Failure> {
    let json = r.json;
    json_error(json, resume_inner(r))
}

fn resume_inner(r: ResumeArgs) -> Result<u8, Failure> {
    let ResumeArgs { id: session, task, json, accept_plan, model, budgets, gate: gate_args } = r;
    let store_path = Store::default_path().map_err(|e| Failure::internal(&e))?;
    let store = Store::open(&store_path).map_err(|e| Failure::internal(&e))?;
    let s = store.open_session(&session).map_err(|e| Failure::internal(&e))?.ok_or_else(|| {
        Failure::usage(format!("no session `{session}` in {}; `abhed sessions list` shows them", store_path.display()))
    })?;
    let events = s.events().map_err(|e| Failure::internal(&e))?;
    let last = abhed::agent::history::rebuild(&events).last_stop;
    let task = if accept_plan {
        let in_plan_mode = abhed::tools::plan::plan_mode(&s).map_err(|e| Failure::internal(&e))?;
        let current = abhed::tools::plan::current(&s).map_err(|e| Failure::internal(&e))?;
        match (in_plan_mode, current) {
            (true, Some(p)) => Some(task.unwrap_or_else(|| {
                format!("The operator accepted your plan (version {}). Carry it out now, and keep the todo list up to date.", p.version)
            })),
            (true, None) => {
                return Err(Failure::usage(format!(
                    "session `{session}` is in plan mode but has no plan yet; resume it without --accept-plan so the model can write one"
                )));
            }
            (false, _) => {
                return Err(Failure::usage(format!("session `{session}` is not in plan mode; there is no plan waiting to be accepted")));
            }
        }
    } else {
        task
    };
    if task.is_none() && last.is_some_and(|r| !r.resumable()) {
        return Err(Failure::usage(format!(
            "session `{session}` already finished ({}); give a follow-up task: abhed sessions resume {session} \"TASK\"",
            last.map(StopReason::as_str).unwrap_or_default()
        )));
    }
    let ws = s.workspace().to_path_buf();
    drop(s);
    drop(store);
    let config = Config::load(&ws).map_err(|e| Failure::usage(format!("{e:#}")))?;
    say_config_warnings(&config);
    let op = task.map(Op::Task).unwrap_or(Op::Continue);
    let mut plan = plan(ws, Some(session), config, &model, &budgets, op)?;
    check_workspace(&plan)?;
    gate(&plan, &gate_args)?;
    if accept_plan {
        plan.plan_mode = PlanMode::Accept;
    }
    execute(plan, json)
}

/// Say what the workspace's `abhed.toml` tried and was refused.
pub(super) fn say_config_warnings(config: &Config) {
    for w in &config.warnings {
        eprintln!("abhed: {w}");
    }
}

/// Refuse a workspace (or extra root) that is a system directory or holds Abhed's own files,
/// the model this run uses among them (`abhed::boundary::check_workspace`).
pub(super) fn check_workspace(plan: &Plan) -> Result<(), Failure> {
    abhed::boundary::check_workspace(&plan.workspace, &plan.config).map_err(|e| Failure::usage(e.to_string()))
}

pub(super) fn plan(
    workspace: PathBuf,
    session: Option<String>,
    mut config: Config,
    m: &ModelArgs,
    b: &BudgetArgs,
    op: Op,
) -> Result<Plan, Failure> {
    let store_path = Store::default_path().map_err(|e| Failure::internal(&e))?;
    let mc = &config.model;
    let endpoint = m.endpoint.clone().or_else(|| if m.model.is_some() { None } else { mc.endpoint.clone() });
    let spec = if let Some(script) = &m.script {
        ModelSpec::Scripted(script.clone())
    } else if let Some(endpoint) = endpoint {
        let api_key = match &mc.api_key_env {
            Some(var) => Some(std::env::var(var).map_err(|_| {
                Failure::usage(format!("model.api_key_env names ${var}, which is not set; set it or remove the key"))
            })?),
            None => None,
        };
        ModelSpec::OpenAi(OpenAiParams {
            endpoint,
            model: m.endpoint_model.clone().unwrap_or_else(|| mc.endpoint_model.clone()),
            api_key,
            connect_timeout: Duration::from_secs(mc.connect_timeout_s),
            turn_timeout: Duration::from_secs(mc.turn_timeout_s),
            temperature: mc.temperature,
            n_ctx: m.n_ctx.or(mc.n_ctx),
        })
    } else {
        let explicit = m
            .model
            .clone()
            .or_else(|| std::env::var_os("ABHED_MODEL").filter(|v| !v.is_empty()).map(PathBuf::from))
            .or_else(|| mc.path.clone());
        let path = locate::model_path(explicit.as_deref()).map_err(|e| Failure::usage(format!("{e:#}")))?;
        config.boundary.protect_model(&path);
        let mut settings = mc.clone();
        settings.n_ctx = m.n_ctx.or(mc.n_ctx);
        settings.n_threads = m.threads.or(mc.n_threads);
        settings.chat_template = m.chat_template.clone().or_else(|| mc.chat_template.clone());
        settings.protocol = m.protocol.clone().unwrap_or_else(|| mc.protocol.clone());
        let prompt_cache_dir = (mc.prompt_cache && !m.no_prompt_cache)
            .then(|| store_path.parent().map(|d| d.join("prompt-cache")))
            .flatten();
        let p = LlamaParams { path, settings, prompt_cache_dir };
        ModelSpec::Llama(p)
    };
    let rc = &config.run;
    let wall = b.max_wall_s.unwrap_or(rc.max_wall_s);
    let budgets = Budgets {
        max_turns: b.max_turns.unwrap_or(rc.max_turns),
        max_tokens: b.max_tokens.unwrap_or(rc.max_tokens),
        max_wall_ms: (wall > 0).then_some(wall * 1000),
        max_reply_tokens: m.max_reply_tokens.unwrap_or(mc.max_reply_tokens),
    };
    if budgets.max_turns == 0 || budgets.max_reply_tokens == 0 {
        return Err(Failure::usage("--max-turns and --max-reply-tokens must be at least 1"));
    }
    Ok(Plan { store_path, workspace, session, config, spec, budgets, op, plan_mode: PlanMode::Keep, stream: false })
}

/// Run the plan on the loop thread and render its events here.
fn execute(plan: Plan, json: bool) -> Result<u8, Failure> {
    let cancel = Cancel::new();
    let flag = cancel.flag();
    // First Ctrl-C: stop at the next safe point (events are committed as they happen, so the
    // session stays resumable). A second one: leave at once.
    let _ = ctrlc::set_handler(move || {
        if flag.swap(true, std::sync::atomic::Ordering::SeqCst) {
            std::process::exit(i32::from(exit::INTERRUPTED));
        }
    });
    let (op_tx, op_rx) = mpsc::channel();
    let (ev_tx, ev_rx) = mpsc::channel();
    let _ = op_tx.send(plan.op.clone());
    drop(op_tx);
    let worker = std::thread::Builder::new()
        .name("abhed-loop".into())
        .spawn(move || drive(plan, cancel, op_rx, ev_tx))
        .map_err(|e| Failure::internal(&e.into()))?;
    let mut renderer = Renderer::new(json);
    let mut last_end = None;
    for ev in ev_rx {
        if let Event::RunEnd { reason, .. } = &ev {
            last_end = Some(*reason);
        }
        renderer.render(&ev)?;
    }
    renderer.finish();
    let result =
        worker.join().map_err(|_| Failure { code: exit::INTERNAL, message: "the loop thread panicked".into() })?;
    result?;
    Ok(match last_end {
        Some(r) => exit_code(r),
        None => exit::INTERNAL,
    })
}

pub fn exit_code(r: StopReason) -> u8 {
    match r {
        StopReason::Done => exit::OK,
        StopReason::GaveUp => exit::GAVE_UP,
        StopReason::Interrupted => exit::INTERRUPTED,
        StopReason::ModelError | StopReason::InternalError => exit::INTERNAL,
        r if r.is_budget() => exit::BUDGET,
        _ => exit::INTERNAL,
    }
}

/// The loop thread: load the model, open the session, serve the operation.
pub(super) fn drive(
    plan: Plan,
    cancel: Cancel,
    ops: mpsc::Receiver<Op>,
    events: mpsc::Sender<Event>,
) -> Result<(), Failure> {
    let store = Store::open(&plan.store_path).map_err(|e| Failure::internal(&e))?;
    let registry = Registry::native();
    let tx = events.clone();
    with_model(
        &plan.spec,
        &store,
        move |f| drop(tx.send(Event::Loading { fraction: f })),
        |model| serve(&plan, &store, &registry, model, cancel, ops, events),
    )
}

/// Load the model `spec` names and hand it to `f`.
pub(super) fn with_model<R>(
    spec: &ModelSpec,
    store: &Store,
    on_loading: impl FnMut(f32) + 'static,
    f: impl FnOnce(&mut dyn Model) -> Result<R, Failure>,
) -> Result<R, Failure> {
    let schema = TurnSchema::new(&Registry::native());
    let setup_err = |e: anyhow::Error| Failure::usage(format!("{e:#}"));
    match spec {
        ModelSpec::Llama(p) => {
            let sha = locate::sha256_cached(store, &p.path).map_err(setup_err)?;
            let engine = LlamaEngine::load(p.clone(), sha, on_loading).map_err(setup_err)?;
            let mut model = engine.session(&schema).map_err(setup_err)?;
            f(&mut model)
        }
        ModelSpec::OpenAi(p) => f(&mut OpenAi::new(p.clone(), &schema)),
        ModelSpec::Scripted(path) => f(&mut Scripted::load(path).map_err(setup_err)?),
    }
}

/// What the model is stored under in the conformance records, how the operator knows it, and
/// the command that probes it.
pub(super) fn model_identity(spec: &ModelSpec, store: &Store) -> Result<(String, String, String), Failure> {
    let setup_err = |e: anyhow::Error| Failure::usage(format!("{e:#}"));
    Ok(match spec {
        ModelSpec::Llama(p) => {
            let sha = locate::sha256_cached(store, &p.path).map_err(setup_err)?;
            let shown = p.path.display();
            (format!("sha256:{sha}"), format!("model {shown}"), format!("abhed conformance --model {shown}"))
        }
        ModelSpec::OpenAi(p) => (
            format!("endpoint:{}#{}", p.endpoint, p.model),
            format!("model `{}` at {}", p.model, p.endpoint),
            format!("abhed conformance --endpoint {} --endpoint-model {}", p.endpoint, p.model),
        ),
        ModelSpec::Scripted(path) => {
            let sha = abhed::tools::fsutil::sha256_file(path)
                .map_err(|e| Failure::usage(format!("cannot read script {}: {e}", path.display())))?;
            let shown = path.display();
            (format!("script:{sha}"), format!("script {shown}"), format!("abhed conformance --script {shown}"))
        }
    })
}

/// The operator's answer to the gate, from the flag or the environment.
#[derive(Args, Clone, Default)]
pub struct GateArgs {
    /// Run even though the model has no passing conformance report on record (see
    /// `abhed conformance`), accepting that it may misuse the tools. Also: ABHED_ALLOW_UNQUALIFIED_MODEL=1.
    #[arg(long)]
    pub allow_unqualified_model: bool,
}

/// Refuse a model without a passing conformance report, unless the operator allows it.
pub(super) fn gate(plan: &Plan, g: &GateArgs) -> Result<(), Failure> {
    let allowed = g.allow_unqualified_model
        || std::env::var(abhed::conformance::gate::ALLOW_ENV).is_ok_and(|v| !v.is_empty() && v != "0");
    if allowed {
        return Ok(());
    }
    let store = Store::open(&plan.store_path).map_err(|e| Failure::internal(&e))?;
    let (key, name, probe) = model_identity(&plan.spec, &store)?;
    match abhed::conformance::gate::check(&store, &key, &name, &probe, &plan.config.conformance)
        .map_err(|e| Failure::internal(&e))?
    {
        abhed::conformance::gate::Decision::Pass(_) => Ok(()),
        abhed::conformance::gate::Decision::Refuse(msg) => Err(Failure::usage(msg)),
    }
}

fn serve(
    plan: &Plan,
    store: &Store,
    registry: &Registry,
    model: &mut dyn Model,
    cancel: Cancel,
    ops: mpsc::Receiver<Op>,
    events: mpsc::Sender<Event>,
) -> Result<(), Failure> {
    // Checked by every command before it gets here; again where the workspace is opened.
    check_workspace(plan)?;
    let session = match &plan.session {
        Some(id) => store
            .open_session(id)
            .map_err(|e| Failure::internal(&e))?
            .ok_or_else(|| Failure::usage(format!("no session `{id}`")))?,
        None => store.create_session(&plan.workspace).map_err(|e| Failure::internal(&e))?,
    };
    let workspace = Workspace::new(&plan.workspace, &plan.config.workspace.extra_roots)
        .map_err(|e| Failure::usage(format!("cannot use workspace {}: {e}", plan.workspace.display())))?;
    let (approvals, warnings) = Approvals::from_config(&plan.config, super::approve::TtyApprover::for_this_process())
        .map_err(|e| Failure::usage(format!("{e:#}")))?;
    for w in &warnings {
        eprintln!("abhed: {w}");
    }
    // What the repository's abhed.toml tried and was refused (the config's warnings were said
    // when it was loaded): kept in the run's `run_start` event.
    let mut config = plan.config.clone();
    config.warnings.extend(warnings);
    approvals.restore(&session).map_err(|e| Failure::internal(&e))?;
    match plan.plan_mode {
        PlanMode::Keep => {}
        PlanMode::Start => abhed::tools::plan::set_plan_mode(&session, true).map_err(|e| Failure::internal(&e))?,
        PlanMode::Accept => {
            // The operator's acceptance, on record like any approval.
            let version = abhed::tools::plan::current(&session).ok().flatten().map_or(0, |p| p.version);
            abhed::approval::gate::record_plan_answer(&session, version, Some(Answer::Once), Some("--accept-plan"))
                .map_err(|e| Failure::internal(&e))?;
            abhed::tools::plan::set_plan_mode(&session, false).map_err(|e| Failure::internal(&e))?;
        }
    }
    let sandbox = SessionSandbox::new(&plan.config.sandbox, &workspace);
    // A resumed session's shell starts where it was last: the working directory persists.
    if let Some(cwd) = plan.session.as_ref().and_then(|_| abhed::tools::bash::last_cwd(&session)) {
        sandbox.set_cwd(cwd);
    }
    let setup = RunSetup {
        registry,
        tools: ToolContext {
            workspace: &workspace,
            config: &config,
            session: &session,
            sandbox: &sandbox,
            approvals: &approvals,
            delegate: None,
            output_budget: None,
        },
        budgets: plan.budgets,
        working_budget: plan.config.run.working_budget,
        repeat_limit: plan.config.run.repeat_limit,
        cancel,
        subagent: None,
        stream_tokens: plan.stream,
    };
    let mut agent = Agent::new(model, setup, events).map_err(|e| Failure::internal(&e))?;
    agent.serve(ops).map_err(|e| Failure::internal(&e))
}
