//! `abhed tool NAME 'ARGS_JSON'`: one tool call on the same path the agent loop uses.

use std::io::Read as _;
use std::path::PathBuf;

use clap::{Args, ValueEnum};
use serde_json::json;

use abhed::agent;
use abhed::approval::gate::Approvals;
use abhed::config::Config;
use abhed::model::ToolCall;
use abhed::sandbox::{SessionSandbox, VmLifetime, Workspace};
use abhed::store::Store;
use abhed::tools::{ErrorCode, Registry, ToolContext};

use super::{Failure, exit, print_stdout, workspace_dir};

#[derive(Args)]
pub struct ToolArgs {
    /// The tool to call (see --list).
    #[arg(required_unless_present = "list")]
    name: Option<String>,
    /// The call's arguments as a JSON object; `-` reads them from stdin.
    #[arg(value_name = "ARGS_JSON")]
    args: Option<String>,
    /// The workspace root (default: the session's workspace, else the current directory).
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// Continue an existing session (its read-tracking applies). Default: a new session.
    #[arg(long, value_name = "ID")]
    session: Option<String>,
    /// `text`: exactly what the model sees. `json`: a stable envelope.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Print every tool's definition (name, description, input_schema) as the model sees it.
    #[arg(long, conflicts_with_all = ["name", "args", "session"])]
    list: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Text,
    Json,
}

/// The version of the `--format json` envelope. Bumped only on an incompatible change.
const ENVELOPE_VERSION: u32 = 1;

/// A failure before the call ran, with the `error.code` its JSON envelope gives it.
struct Refusal {
    failure: Failure,
    code: &'static str,
    /// The text the envelope's `output` holds (the model's view for an unknown tool).
    output: Option<String>,
    session: Option<String>,
}

impl From<Failure> for Refusal {
    fn from(failure: Failure) -> Self {
        let code = if failure.code == exit::INTERNAL { "internal" } else { "usage" };
        Refusal { failure, code, output: None, session: None }
    }
}

pub fn run(a: ToolArgs) -> Result<u8, Failure> {
    let json_format = matches!(a.format, Format::Json);
    let tool = a.name.clone().unwrap_or_default();
    match call(a) {
        Ok(code) => Ok(code),
        // Under --format json every outcome is one envelope on stdout, failures included; the
        // message still goes to stderr for a person watching.
        Err(r) if json_format => {
            let message = r.failure.message.clone();
            let envelope = json!({
                "format_version": ENVELOPE_VERSION,
                "tool": tool,
                "ok": false,
                "output": r.output.unwrap_or_else(|| message.clone()),
                "error": { "code": r.code, "message": message },
                "mutated": false,
                "truncated": false,
                "session": r.session,
                "path": null,
                "sha256": null,
                "action_seq": null,
                "observation_seq": null,
                "duration_ms": null,
            });
            print_stdout(&format!("{envelope}\n"))?;
            Err(r.failure)
        }
        Err(r) => Err(r.failure),
    }
}

fn call(a: ToolArgs) -> Result<u8, Refusal> {
    let registry = Registry::native();
    if a.list {
        let defs = serde_json::to_string_pretty(&registry.definitions()).map_err(|e| Failure::internal(&e.into()))?;
        print_stdout(&format!("{defs}\n"))?;
        return Ok(exit::OK);
    }
    let name = a.name.unwrap_or_default();
    if registry.get(&name).is_none() {
        let e = agent::dispatch::unknown_tool(&name, &registry.names());
        return Err(Refusal {
            failure: Failure::usage(e.message.clone()),
            code: "unknown_tool",
            output: Some(e.render()),
            session: None,
        });
    }
    let raw_args = match a.args.as_deref() {
        None => {
            return Err(Failure::usage(format!(
                "give the arguments of `{name}` as a JSON object, e.g. abhed tool {name} '{{...}}' (abhed tool --list shows the schemas)"
            ))
            .into());
        }
        Some("-") => {
            let mut s = String::new();
            std::io::stdin()
                .read_to_string(&mut s)
                .map_err(|e| Failure::usage(format!("cannot read the arguments from stdin: {e}")))?;
            s
        }
        Some(s) => s.to_string(),
    };

    let store_path = Store::default_path().map_err(|e| Failure::internal(&e))?;
    let store = Store::open(&store_path).map_err(|e| Failure::internal(&e))?;
    let existing = match &a.session {
        Some(id) => Some(store.open_session(id).map_err(|e| Failure::internal(&e))?.ok_or_else(|| Refusal {
            failure: Failure::usage(format!(
                "no session `{id}` in {}; omit --session to start a new one",
                store.path().display()
            )),
            code: "unknown_session",
            output: None,
            session: Some(id.clone()),
        })?),
        None => None,
    };
    // From here on a failure of a named session belongs to it: the envelope names it.
    let named = existing.as_ref().map(|s| s.id().to_string());
    let in_named = |f: Failure| Refusal { session: named.clone(), ..Refusal::from(f) };
    let ws_dir =
        workspace_dir(a.workspace, existing.as_ref().map(|s| s.workspace().to_path_buf())).map_err(in_named)?;
    // A session's read-tracking and events belong to one workspace.
    if let Some(s) = &existing
        && ws_dir != s.workspace()
    {
        return Err(in_named(Failure::usage(format!(
            "session `{}` belongs to workspace {}, not {}; omit --workspace to use the session's, or omit --session to start a new session",
            s.id(),
            s.workspace().display(),
            ws_dir.display()
        ))));
    }
    let config = Config::load(&ws_dir).map_err(|e| in_named(Failure::usage(format!("{e:#}"))))?;
    // Before a session is made for it: a refused workspace leaves nothing behind.
    abhed::boundary::check_workspace(&ws_dir, &config).map_err(|e| in_named(Failure::usage(e.to_string())))?;
    let session = match existing {
        Some(s) => s,
        None => store.create_session(&ws_dir).map_err(|e| Failure::internal(&e))?,
    };
    let sid = session.id().to_string();
    let in_session = |f: Failure| Refusal { session: Some(sid.clone()), ..Refusal::from(f) };
    let workspace = Workspace::new(&ws_dir, &config.workspace.extra_roots)
        .map_err(|e| in_session(Failure::usage(format!("cannot use workspace {}: {e}", ws_dir.display()))))?;
    let (approvals, warnings) = Approvals::from_config(&config, super::approve::TtyApprover::for_this_process())
        .map_err(|e| in_session(Failure::usage(format!("{e:#}"))))?;
    for w in config.warnings.iter().chain(&warnings) {
        eprintln!("abhed: {w}");
    }
    approvals.restore(&session).map_err(|e| in_session(Failure::internal(&e)))?;
    let sandbox = SessionSandbox::new(&config.sandbox, &workspace);
    // The VM, and a background job in it, ends with this process.
    sandbox.set_lifetime(VmLifetime::OneCall);
    // Seed 000 §7: the working directory persists between the session's calls.
    if a.session.is_some()
        && let Some(cwd) = abhed::tools::bash::last_cwd(&session)
    {
        sandbox.set_cwd(cwd);
    }
    let ctx = ToolContext {
        workspace: &workspace,
        config: &config,
        session: &session,
        sandbox: &sandbox,
        approvals: &approvals,
        delegate: None,
        output_budget: None,
    };

    let call = ToolCall { name, arguments: raw_args };
    let outcome = agent::execute(&registry, &ctx, &call).map_err(|e| in_session(Failure::internal(&e)))?;

    match a.format {
        Format::Text => {
            let mut text = outcome.text();
            if !text.ends_with('\n') {
                text.push('\n');
            }
            print_stdout(&text)?;
            // The id is how a second call shares this session's reads; stderr keeps stdout exact.
            eprintln!("session: {}", session.id());
        }
        Format::Json => {
            let (output, error, truncated, file) = match &outcome.result {
                Ok(o) => (o.text.clone(), None, o.truncated, o.file.clone()),
                Err(e) => (e.render(), Some(json!({ "code": e.code, "message": e.message })), false, e.file.clone()),
            };
            let envelope = json!({
                "format_version": ENVELOPE_VERSION,
                "tool": outcome.tool,
                "ok": outcome.ok(),
                "output": output,
                "error": error,
                "mutated": outcome.mutated(),
                "truncated": truncated,
                "session": session.id(),
                "path": file.as_ref().map(|f| f.path.clone()),
                "sha256": file.as_ref().map(|f| f.sha256.clone()),
                "action_seq": outcome.action_seq,
                "observation_seq": outcome.observation_seq,
                "duration_ms": outcome.duration_ms,
            });
            print_stdout(&format!("{envelope}\n"))?;
        }
    }
    Ok(match &outcome.result {
        Ok(_) => exit::OK,
        Err(e) if e.code == ErrorCode::ApprovalDenied => exit::APPROVAL_DENIED,
        Err(_) => exit::TOOL_ERROR,
    })
}
