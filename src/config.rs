//! Configuration: built-in defaults, then the user config (`$XDG_CONFIG_HOME/abhed/config.toml`
//! or `$ABHED_CONFIG`), then the workspace's `abhed.toml`. Flags win over all of them.
//!
//! The workspace's `abhed.toml` belongs to a repository the operator may not trust, so it may
//! only narrow: every key is classified (`config/narrow.rs`) as a limit a repository may lower, a
//! reserve it may raise, a switch it may turn off, a mode it may take bits from, a list it may
//! add to, or a key only the user config sets (the model, the sandbox's programs, anything that
//! widens access). A repository value that would widen is ignored and reported in
//! [`Config::warnings`]; a repository's harmless `abhed.toml` still works.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};
use serde::{Deserialize, Serialize};

use crate::boundary::Boundary;

mod narrow;

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub workspace: WorkspaceConfig,
    pub read: ReadConfig,
    pub write: WriteConfig,
    pub model: ModelConfig,
    pub run: RunConfig,
    pub sandbox: SandboxConfig,
    pub task: TaskConfig,
    pub conformance: ConformanceConfig,
    /// The `[approval]` tables as written, kept apart: the policy layers them itself, because a
    /// workspace may tighten the user's policy but not loosen it.
    #[serde(skip)]
    pub approval: ApprovalSources,
    /// What the workspace's `abhed.toml` tried to set and was ignored, one sentence each, for the
    /// operator (the CLI prints them; a run records them in its `run_start` event).
    #[serde(skip)]
    pub warnings: Vec<String>,
    /// Abhed's own files on this host, which no workspace may hold and no tool may write
    /// (filled by [`Config::load`]; empty in a config built otherwise).
    #[serde(skip)]
    pub boundary: Boundary,
}

/// Where the approval policy comes from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ApprovalSources {
    pub user: Option<(toml::Table, PathBuf)>,
    pub workspace: Option<(toml::Table, PathBuf)>,
}

fn take_approval(table: &mut toml::Table, path: &Path) -> Result<Option<(toml::Table, PathBuf)>> {
    match table.remove("approval") {
        None => Ok(None),
        Some(toml::Value::Table(t)) => Ok(Some((t, path.to_path_buf()))),
        Some(_) => bail!("invalid config {}: `approval` must be a table ([approval])", path.display()),
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct WorkspaceConfig {
    /// Directories outside the workspace that tools may also touch.
    pub extra_roots: Vec<PathBuf>,
    /// Gitignore-style patterns glob and grep skip, on top of `.gitignore` and the built-in
    /// list (node_modules, .git, target, dist, __pycache__): the user config's, then the
    /// repository's.
    pub ignore: Vec<String>,
    /// The patterns of `ignore` that came from the workspace's `abhed.toml` (the repository),
    /// so that messages can say whose a pattern is.
    #[serde(skip)]
    pub repository_ignore: Vec<String>,
    /// Let a system directory (`/`, `/etc`, `/usr`, `/tmp` itself, a home folder, ...) be a
    /// workspace or an extra root. User config only.
    pub allow_system_dirs: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReadConfig {
    /// A file larger than this is read only by range (offset/limit).
    pub max_file_bytes: u64,
    /// The most characters one read returns; lines past it are left for the next read.
    pub max_output_chars: usize,
}

impl Default for ReadConfig {
    fn default() -> Self {
        ReadConfig { max_file_bytes: 10 * 1024 * 1024, max_output_chars: 100_000 }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct WriteConfig {
    /// Let write (and edit creating a file) create missing parent directories.
    pub create_parent_dirs: bool,
    /// Permission bits of new files, as an octal string ("0644").
    pub file_mode: String,
    /// Let `file_mode` carry the setuid, setgid or sticky bit. Both keys must be in the user
    /// config: one mistyped digit must not make every file the model writes a setuid program.
    pub allow_special_bits: bool,
}

impl Default for WriteConfig {
    fn default() -> Self {
        WriteConfig { create_parent_dirs: false, file_mode: "0644".to_string(), allow_special_bits: false }
    }
}

impl WriteConfig {
    /// The mode of new files as bits. Validated at load, so this cannot fail afterwards.
    pub fn mode(&self) -> u32 {
        parse_mode(&self.file_mode).unwrap_or(0o644)
    }
}

/// The model and how to run it. Flags override each key.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModelConfig {
    /// A GGUF file; default: the default model found beside the binary or in a checkout.
    pub path: Option<PathBuf>,
    /// Context window in tokens; default the model's training context, at most 8192.
    pub n_ctx: Option<u32>,
    pub n_batch: u32,
    /// Default: the physical cores.
    pub n_threads: Option<u32>,
    /// KV cache type: f16, q8_0, q4_0, f32.
    pub kv_type: String,
    /// A built-in chat template (chatml, llama3, ...) for a model whose own llama.cpp does not know.
    pub chat_template: Option<String>,
    /// How turns are asked for: `auto` (the model's own tool-call format when its chat template
    /// has one Abhed knows, else JSON turns), `native`, or `json`.
    pub protocol: String,
    /// 0 is greedy decoding.
    pub temperature: f32,
    pub seed: u32,
    /// The most tokens one reply may have.
    pub max_reply_tokens: u32,
    /// Save the system prompt's evaluated state on disk, so a new session skips its prefill.
    pub prompt_cache: bool,
    /// Subagents decoding at once, as sequences of one context (each with the parent's context
    /// window, so the KV cache of that context is this many times the parent's).
    pub parallel: u32,
    /// An OpenAI-compatible endpoint (`http://host:port`); when set, it is used instead of a GGUF.
    pub endpoint: Option<String>,
    pub endpoint_model: String,
    /// The environment variable holding the endpoint's API key, if it needs one.
    pub api_key_env: Option<String>,
    pub connect_timeout_s: u64,
    pub turn_timeout_s: u64,
}

impl Default for ModelConfig {
    fn default() -> Self {
        ModelConfig {
            path: None,
            n_ctx: None,
            n_batch: 512,
            n_threads: None,
            kv_type: "f16".into(),
            chat_template: None,
            protocol: "auto".into(),
            temperature: 0.0,
            seed: 0,
            max_reply_tokens: 1024,
            prompt_cache: true,
            parallel: 4,
            endpoint: None,
            endpoint_model: "default".into(),
            api_key_env: None,
            connect_timeout_s: 5,
            turn_timeout_s: 300,
        }
    }
}

/// The budgets of one run. Flags override each key.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct RunConfig {
    pub max_turns: u32,
    /// Tokens evaluated plus generated over the run.
    pub max_tokens: u64,
    /// Wall time of the run in seconds; 0 is no limit.
    pub max_wall_s: u64,
    /// Tokens the preflight requires to be left for the work after the prompt and one reply.
    pub working_budget: u32,
    /// After this many identical calls in a row the next turn may only be the final answer
    /// (0: never).
    pub repeat_limit: u32,
    /// A task's first turn must be a tool call (where the adapter has a grammar): small models
    /// otherwise answer at once, without looking at the workspace.
    pub first_turn_acts: bool,
    /// After a call that failed or found nothing, the next turn must be a call too, until this
    /// many calls in a row have (0: off): small models otherwise give up on the first error,
    /// echoing it.
    pub act_after_error: u32,
    /// Answers sent back once, with a note saying why: "done" to a task that asks for a change
    /// (or claiming one) when no call of the run changed anything, and giving up when every
    /// call of the run worked.
    pub check_answers: bool,
    /// A reply that repeats a call made since the last change (the same tool and arguments,
    /// whose result cannot have changed) is asked for again, up to this many times, decoded
    /// with some randomness (a fixed seed per try), before it is run (0: off). Under greedy
    /// decoding small models otherwise make the same failing call again and again.
    pub resample_repeats: u32,
    /// On a task that asks for a change, until a call of the run wrote a file (or ran a command
    /// the task does not name), a final answer is set aside and the turn asked for again as a
    /// call, up to this many times a run (0: off). Small models answer with the change they
    /// mean, or give up, after one read; sent back with a note they repeat the same answer.
    pub act_until_change: u32,
    /// Before the model's first turn on a new task, the loop reads the files the task names,
    /// as given calls on record (`agent::given`): a small model's first move on such a task
    /// was to write the file unread, or grep for a path it guessed.
    pub given_calls: bool,
    /// With `given_calls`, also run the command the task says fails before the first turn. Off:
    /// on the suite the 1.5B model, given the compiler's errors, made narrow wrong edits where
    /// it had passed by rewriting the file (docs/EVAL.md, 2026-12-07).
    pub given_check: bool,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            max_turns: 30,
            max_tokens: 500_000,
            max_wall_s: 1800,
            working_budget: 2048,
            repeat_limit: 3,
            first_turn_acts: true,
            act_after_error: 3,
            check_answers: true,
            resample_repeats: 2,
            act_until_change: 3,
            given_calls: true,
            given_check: false,
        }
    }
}

/// Subagents (the `task` tool).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct TaskConfig {
    /// Subagents that may run at once in a session (beyond `model.parallel` they wait for a
    /// sequence of the model).
    pub max_concurrent: u32,
    /// A subagent's turn budget when the call gives no `max_turns` (and the most it may give).
    pub max_turns: u32,
    /// The most tokens of a subagent's summary the parent sees; the rest is cut with a note.
    pub summary_tokens: u32,
    /// Whether a subagent may spawn subagents of its own.
    pub nested: bool,
}

impl Default for TaskConfig {
    fn default() -> Self {
        TaskConfig { max_concurrent: 20, max_turns: 20, summary_tokens: 2000, nested: false }
    }
}

/// The conformance gate: what a model's stored report must show before `abhed run` uses it.
/// Honoured only from the user config: a repository must not lower the bar for itself.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConformanceConfig {
    /// Refuse a model without a passing report (the `--allow-unqualified-model` flag overrides
    /// it for one run).
    pub require: bool,
    /// The capability probe's pass rate over all tasks.
    pub min_pass_rate: f64,
    /// Each tool's pass rate in the probe.
    pub min_tool_pass_rate: f64,
    /// Calls the tools accepted, over all calls and invalid turns of the probe.
    pub min_call_validity: f64,
    /// Error-recovery scenarios recovered (with abhed's own error messages).
    pub min_recovery_rate: f64,
}

impl Default for ConformanceConfig {
    fn default() -> Self {
        ConformanceConfig {
            require: true,
            min_pass_rate: 0.8,
            min_tool_pass_rate: 0.5,
            min_call_validity: 0.9,
            min_recovery_rate: 0.5,
        }
    }
}

/// Where bash runs: the session microVM.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct SandboxConfig {
    /// `auto` (KVM when a timed boot probe succeeds, else TCG), `kvm` or `tcg`.
    pub accel: String,
    pub memory_mib: u32,
    pub cpus: u32,
    /// Share the host's /usr read-only, so the guest has the host's toolchains (git, cargo,
    /// python, ...). Without it the guest has only busybox and bash.
    pub share_host_usr: bool,
    /// More host folders the guest sees read-only at the same path (a toolchain: `~/.cargo`,
    /// `~/.rustup`, `/opt/go`); each one's `bin` goes on the guest's PATH.
    pub host_readonly: Vec<PathBuf>,
    /// The qemu-system-x86_64 to run; default: beside abhed, else on PATH.
    pub qemu: Option<PathBuf>,
    /// The folder holding vmlinux, initramfs.img and manifest.json; default: searched for.
    pub image_dir: Option<PathBuf>,
    /// Seconds a boot may take before it counts as failed.
    pub boot_timeout_s: u64,
    /// The most one bash call may add to the disk the workspace is on, in MiB: past it the
    /// command and the background jobs are stopped (see docs/SANDBOX.md).
    pub disk_quota_mib: u64,
    /// How the workspace is shared: `mapped` (the guest's modes, owners and symlinks are kept
    /// in extended attributes, so it cannot make a setuid file or a symlink on the host) or
    /// `passthrough` (they reach the host as they are).
    pub share_mode: String,
    /// The most MiB of new content one checkpoint keeps so that `abhed undo` can put back what
    /// a call changed (one file at most a quarter of it); 0 turns checkpoints off.
    pub checkpoint_mib: u64,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig {
            accel: "auto".into(),
            memory_mib: 1024,
            cpus: 1,
            share_host_usr: true,
            host_readonly: Vec::new(),
            qemu: None,
            image_dir: None,
            boot_timeout_s: 30,
            disk_quota_mib: 2048,
            share_mode: "mapped".into(),
            checkpoint_mib: 512,
        }
    }
}

pub(crate) fn parse_mode(s: &str) -> Option<u32> {
    u32::from_str_radix(s.trim_start_matches("0o"), 8).ok().filter(|m| *m <= 0o7777)
}

/// The setuid, setgid and sticky bits.
const SPECIAL_BITS: u32 = 0o7000;

/// The most bytes of a workspace's `abhed.toml` that are read.
const MAX_WORKSPACE_CONFIG_BYTES: u64 = 1 << 20;

/// Where the user config lives: `$ABHED_CONFIG`, else the default location.
pub fn user_config_path() -> Option<PathBuf> {
    named_config().or_else(default_user_config_path)
}

/// The file `$ABHED_CONFIG` names, if it is set.
fn named_config() -> Option<PathBuf> {
    std::env::var_os("ABHED_CONFIG").filter(|v| !v.is_empty()).map(PathBuf::from)
}

/// The default location: `$XDG_CONFIG_HOME/abhed/config.toml`, else `~/.config/abhed/config.toml`.
pub fn default_user_config_path() -> Option<PathBuf> {
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    env("XDG_CONFIG_HOME")
        .map(|d| d.join("abhed/config.toml"))
        .or_else(|| env("HOME").map(|d| d.join(".config/abhed/config.toml")))
}

/// The user config's path, for messages that send the operator there.
pub fn user_config_display() -> String {
    user_config_path().map(|p| p.display().to_string()).unwrap_or_else(|| "~/.config/abhed/config.toml".into())
}

impl Config {
    /// The config a measurement runs under (the conformance probe, the task suite): the built-in
    /// defaults, so that results compare across machines, except how the model runs and what
    /// the sandbox is built from, which are this config's (the loop's `run.first_turn_acts`
    /// among them, so that it can be measured both ways).
    pub fn for_measurement(&self) -> Config {
        let mut c = Config {
            model: self.model.clone(),
            sandbox: self.sandbox.clone(),
            boundary: self.boundary.clone(),
            ..Config::default()
        };
        c.run.first_turn_acts = self.run.first_turn_acts;
        c.run.act_after_error = self.run.act_after_error;
        c.run.check_answers = self.run.check_answers;
        c.run.resample_repeats = self.run.resample_repeats;
        c.run.act_until_change = self.run.act_until_change;
        c.run.given_calls = self.run.given_calls;
        c.run.given_check = self.run.given_check;
        c
    }

    /// Load the user config and the workspace's `abhed.toml`, the latter narrowing key by key,
    /// and compute the host's protected set ([`Config::boundary`]).
    ///
    /// A config the operator named (`$ABHED_CONFIG`) must be readable: a typo must not run with
    /// the defaults. The default location may be absent. (`ABHED_CONFIG=/dev/null`: no user
    /// config at all.)
    pub fn load(workspace: &Path) -> Result<Config> {
        let named = named_config();
        let user_path = named.clone().or_else(default_user_config_path);
        let user = match &user_path {
            Some(p) if named.is_some() => {
                let text = std::fs::read_to_string(p).map_err(|e| {
                    anyhow::anyhow!(
                        "ABHED_CONFIG names {}, which cannot be read ({e}). Fix the path, or unset ABHED_CONFIG to use {}; ABHED_CONFIG=/dev/null runs with no user config",
                        p.display(),
                        default_user_config_path()
                            .map(|d| d.display().to_string())
                            .unwrap_or_else(|| "~/.config/abhed/config.toml".into())
                    )
                })?;
                Some((parse_table(&text, p)?, p.clone()))
            }
            // Anything there (a dangling link too) is the operator's config, and must read.
            Some(p) if std::fs::symlink_metadata(p).is_ok() => {
                let text = std::fs::read_to_string(p).with_context(|| format!("cannot read config {}", p.display()))?;
                Some((parse_table(&text, p)?, p.clone()))
            }
            _ => None,
        };
        let ws_path = workspace.join("abhed.toml");
        let ws = if std::fs::symlink_metadata(&ws_path).is_ok() { Some(read_workspace_table(&ws_path)?) } else { None };
        let mut cfg = Self::layered(user, ws, &ws_path)?;
        cfg.boundary = Boundary::of_host(&cfg, user_path.as_deref());
        Ok(cfg)
    }

    fn layered(user: Option<(toml::Table, PathBuf)>, ws: Option<toml::Table>, ws_path: &Path) -> Result<Config> {
        let mut approval = ApprovalSources::default();
        let user = match user {
            Some((mut t, p)) => {
                approval.user = take_approval(&mut t, &p)?;
                Some((t, p))
            }
            None => None,
        };
        let ws = match ws {
            Some(mut t) => {
                approval.workspace = take_approval(&mut t, ws_path)?;
                Some(t)
            }
            None => None,
        };
        let (mut merged, user_cfg, mut origin) = match user {
            Some((t, p)) => {
                let cfg = from_table(t.clone(), &p)?;
                if parse_mode(&cfg.write.file_mode).is_some_and(|m| m & SPECIAL_BITS != 0)
                    && !cfg.write.allow_special_bits
                {
                    bail!(
                        "invalid config {}: write.file_mode {:?} sets the setuid, setgid or sticky bit, so every file write or edit creates would carry it. If that is meant, add write.allow_special_bits = true beside it; otherwise use a mode like \"0644\"",
                        p.display(),
                        cfg.write.file_mode
                    );
                }
                (t, cfg, p)
            }
            None => (toml::Table::new(), Config::default(), ws_path.to_path_buf()),
        };
        let mut warnings = Vec::new();
        let mut repository_ignore = Vec::new();
        if let Some(ws) = ws {
            // A broken file is an error whoever wrote it; a widening one is only ignored.
            from_table(ws.clone(), ws_path)?;
            let user_values = serde_json::to_value(&user_cfg).context("cannot compare the config's layers")?;
            let narrowed = narrow::narrow(&user_values, ws, ws_path);
            warnings = narrowed.warnings;
            repository_ignore = narrowed.ignore;
            overlay(&mut merged, narrowed.accepted);
            origin = ws_path.to_path_buf();
        }
        let mut cfg = from_table(merged, &origin)?;
        cfg.approval = approval;
        cfg.warnings = warnings;
        cfg.workspace.repository_ignore = repository_ignore;
        Ok(cfg)
    }
}

/// Deep-merge `top` over `base`: tables merge key by key, anything else replaces. Lists
/// replace too, except `workspace.ignore`, which accumulates.
fn overlay(base: &mut toml::Table, top: toml::Table) {
    for (k, v) in top {
        match (base.get_mut(&k), v) {
            (Some(toml::Value::Table(b)), toml::Value::Table(t)) => overlay(b, t),
            (Some(toml::Value::Array(b)), toml::Value::Array(t)) if k == "ignore" => b.extend(t),
            (_, v) => {
                base.insert(k, v);
            }
        }
    }
}

fn parse_table(text: &str, path: &Path) -> Result<toml::Table> {
    text.parse::<toml::Table>().with_context(|| format!("invalid config {}", path.display()))
}

/// A repository's `abhed.toml`: a regular file of bounded size (a FIFO or `/dev/zero` under
/// that name must not hang or fill the host).
fn read_workspace_table(path: &Path) -> Result<toml::Table> {
    use std::io::Read as _;

    use crate::sandbox::confined::{DirHandle, FsError};
    // From the workspace's own handle, as the file tools read (src/sandbox/confined.rs): never
    // through a symlink (one could lead out, or be swapped in by the guest), never a FIFO (it
    // would hang), regular files only, bounded.
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        bail!("cannot read config {}", path.display())
    };
    let handle = DirHandle::open_root(dir).with_context(|| format!("cannot read config {}", path.display()))?;
    let (file, meta) = match handle.open_file(name) {
        Ok(f) => f,
        Err(FsError::NotRegular { kind, .. }) => bail!(
            "{} is {}; abhed reads a workspace's abhed.toml only as a regular file. Remove it or replace it with a file",
            path.display(),
            kind.describe()
        ),
        Err(FsError::Changed { .. }) => bail!(
            "{} is a symlink; abhed reads a workspace's abhed.toml only as a regular file in the workspace (a link could lead outside it). Replace the link with the file",
            path.display()
        ),
        Err(e) => return Err(anyhow::anyhow!("cannot read config {}: {e}", path.display())),
    };
    if meta.len > MAX_WORKSPACE_CONFIG_BYTES {
        bail!(
            "{} is {} bytes; abhed reads a workspace's abhed.toml of at most {MAX_WORKSPACE_CONFIG_BYTES} bytes",
            path.display(),
            meta.len
        );
    }
    let mut text = String::new();
    file.take(MAX_WORKSPACE_CONFIG_BYTES)
        .read_to_string(&mut text)
        .with_context(|| format!("cannot read config {}", path.display()))?;
    parse_table(&text, path)
}

fn from_table(table: toml::Table, path: &Path) -> Result<Config> {
    let cfg: Config =
        toml::Value::Table(table).try_into().with_context(|| format!("invalid config {}", path.display()))?;
    if !["auto", "kvm", "tcg"].contains(&cfg.sandbox.accel.as_str()) {
        bail!(
            "invalid config {}: sandbox.accel {:?} must be \"auto\", \"kvm\" or \"tcg\"",
            path.display(),
            cfg.sandbox.accel
        );
    }
    if cfg.sandbox.memory_mib < 128 || cfg.sandbox.cpus == 0 {
        bail!("invalid config {}: sandbox.memory_mib must be at least 128 and sandbox.cpus at least 1", path.display());
    }
    if !["mapped", "passthrough"].contains(&cfg.sandbox.share_mode.as_str()) {
        bail!(
            "invalid config {}: sandbox.share_mode {:?} must be \"mapped\" or \"passthrough\"",
            path.display(),
            cfg.sandbox.share_mode
        );
    }
    if !(1..=1024 * 1024).contains(&cfg.sandbox.disk_quota_mib) {
        bail!(
            "invalid config {}: sandbox.disk_quota_mib is {}; it must be 1 to 1048576 (MiB one bash call may add to the workspace's disk; default 2048)",
            path.display(),
            cfg.sandbox.disk_quota_mib
        );
    }
    if cfg.sandbox.checkpoint_mib > 1024 * 1024 {
        bail!(
            "invalid config {}: sandbox.checkpoint_mib is {}; it must be 0 to 1048576 (MiB of new content one checkpoint keeps for `abhed undo`; 0 turns checkpoints off; default 512)",
            path.display(),
            cfg.sandbox.checkpoint_mib
        );
    }
    if !(1..=64).contains(&cfg.model.parallel) || !(1..=256).contains(&cfg.task.max_concurrent) {
        bail!("invalid config {}: model.parallel must be 1 to 64 and task.max_concurrent 1 to 256", path.display());
    }
    if cfg.task.max_turns == 0 || cfg.task.summary_tokens < 100 {
        bail!(
            "invalid config {}: task.max_turns must be at least 1 and task.summary_tokens at least 100",
            path.display()
        );
    }
    let c = &cfg.conformance;
    for (name, v) in [
        ("min_pass_rate", c.min_pass_rate),
        ("min_tool_pass_rate", c.min_tool_pass_rate),
        ("min_call_validity", c.min_call_validity),
        ("min_recovery_rate", c.min_recovery_rate),
    ] {
        if !(0.0..=1.0).contains(&v) {
            bail!("invalid config {}: conformance.{name} is {v}; it is a rate from 0 to 1", path.display());
        }
    }
    if parse_mode(&cfg.write.file_mode).is_none() {
        bail!(
            "invalid config {}: write.file_mode {:?} is not an octal mode like \"0644\"",
            path.display(),
            cfg.write.file_mode
        );
    }
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> toml::Table {
        text.parse().unwrap()
    }

    /// The config of `user` (if any) narrowed by the repository's `ws`.
    fn layers(user: Option<&str>, ws: &str) -> Config {
        Config::layered(user.map(|u| (table(u), PathBuf::from("/u.toml"))), Some(table(ws)), Path::new("/w/abhed.toml"))
            .unwrap()
    }

    #[test]
    fn the_disk_quota_defaults_to_2_gib_and_must_be_positive() {
        assert_eq!(Config::default().sandbox.disk_quota_mib, 2048);
        let user: toml::Table = "[sandbox]\ndisk_quota_mib = 0".parse().unwrap();
        let err = Config::layered(Some((user, "/u.toml".into())), None, Path::new("/w/abhed.toml")).unwrap_err();
        assert!(format!("{err:#}").contains("sandbox.disk_quota_mib is 0; it must be 1 to 1048576"), "{err:#}");
        let user: toml::Table = "[sandbox]\ndisk_quota_mib = 512".parse().unwrap();
        let cfg = Config::layered(Some((user, "/u.toml".into())), None, Path::new("/w/abhed.toml")).unwrap();
        assert_eq!(cfg.sandbox.disk_quota_mib, 512);
    }

    #[test]
    fn a_repository_cannot_widen_roots_or_choose_an_endpoint() {
        let cfg = layers(None, "[workspace]\nextra_roots = [\"/\"]\n[model]\nendpoint = \"http://10.0.0.9:8080\"");
        assert!(cfg.workspace.extra_roots.is_empty());
        assert_eq!(cfg.model.endpoint, None);
        assert_eq!(cfg.warnings.len(), 2, "{:?}", cfg.warnings);
        // Tables come in name order: [model] before [workspace].
        assert!(cfg.warnings[1].starts_with("ignored `workspace.extra_roots = [\"/\"]` in /w/abhed.toml: only the user config sets it (a repository cannot widen its own access); the value [] stays."), "{}", cfg.warnings[1]);
        assert!(cfg.warnings[0].contains("`model.endpoint = \"http://10.0.0.9:8080\"`"), "{}", cfg.warnings[0]);
        assert!(cfg.warnings[0].contains("carry the workspace's files off the machine"), "{}", cfg.warnings[0]);
        // A smaller context narrows; it is taken silently.
        let cfg = layers(None, "[model]\nn_ctx = 4096");
        assert_eq!((cfg.model.n_ctx, cfg.warnings.len()), (Some(4096), 0));
        let cfg = layers(None, "[model]\nn_ctx = 65536");
        assert_eq!((cfg.model.n_ctx, cfg.warnings.len()), (None, 1));
    }

    #[test]
    fn a_repository_cannot_lower_the_gate() {
        let cfg =
            layers(Some("[conformance]\nmin_pass_rate = 0.5"), "[conformance]\nmin_pass_rate = 0.0\nrequire = false");
        assert_eq!((cfg.conformance.min_pass_rate, cfg.conformance.require), (0.5, true));
        assert!(cfg.warnings.iter().all(|w| w.contains("cannot lower the bar")), "{:?}", cfg.warnings);
        let user = table("[conformance]\nmin_pass_rate = 80");
        assert!(Config::layered(Some((user, PathBuf::from("/u.toml"))), None, Path::new("/w/abhed.toml")).is_err());
    }

    /// Issue 15 item 5: each key the attack set is refused, and the user's value stays.
    #[test]
    fn the_widening_keys_of_the_attack_are_ignored_and_reported() {
        let cfg = layers(
            None,
            "[read]\nmax_output_chars = 100000000\n[write]\ncreate_parent_dirs = true\nfile_mode = \"0777\"\n[sandbox]\nmemory_mib = 16000\ncpus = 2\n[run]\nmax_wall_s = 0",
        );
        let d = Config::default();
        assert_eq!(cfg.read.max_output_chars, d.read.max_output_chars);
        assert!(!cfg.write.create_parent_dirs);
        assert_eq!(cfg.write.mode(), 0o644);
        assert_eq!((cfg.sandbox.memory_mib, cfg.sandbox.cpus), (1024, 1));
        assert_eq!(cfg.run.max_wall_s, 1800);
        let keys: Vec<&str> = cfg.warnings.iter().map(|w| w.split(" = ").next().unwrap()).collect();
        assert_eq!(
            keys,
            [
                "ignored `read.max_output_chars",
                "ignored `run.max_wall_s",
                "ignored `sandbox.cpus",
                "ignored `sandbox.memory_mib",
                "ignored `write.create_parent_dirs",
                "ignored `write.file_mode",
            ]
        );
        assert!(cfg.warnings[1].contains("may only tighten this budget (0 means no limit); the value 1800 stays"));
        assert!(cfg.warnings[0].contains("Set it in the user config ("), "{}", cfg.warnings[0]);
        // Setuid, setgid and sticky bits never come from a repository, even with the user's leave.
        let cfg =
            layers(Some("[write]\nfile_mode = \"4755\"\nallow_special_bits = true"), "[write]\nfile_mode = \"6755\"");
        assert_eq!(cfg.write.mode(), 0o4755);
        assert!(cfg.warnings[0].contains("never set the setuid, setgid or sticky bit"), "{:?}", cfg.warnings);
        let cfg =
            layers(Some("[write]\nfile_mode = \"4755\"\nallow_special_bits = true"), "[write]\nfile_mode = \"2755\"");
        assert_eq!((cfg.write.mode(), cfg.warnings.len()), (0o4755, 1));
    }

    #[test]
    fn a_repository_may_narrow() {
        let cfg = layers(
            Some("[write]\ncreate_parent_dirs = true\nfile_mode = \"0664\"\n[run]\nmax_wall_s = 0"),
            "[read]\nmax_output_chars = 5000\n[write]\ncreate_parent_dirs = false\nfile_mode = \"0640\"\n[sandbox]\nmemory_mib = 512\nshare_host_usr = false\n[run]\nmax_wall_s = 60\nworking_budget = 4096\nrepeat_limit = 2\n[task]\nnested = false\nmax_turns = 5\n[model]\nmax_reply_tokens = 256\nprompt_cache = false",
        );
        assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
        assert_eq!(cfg.read.max_output_chars, 5000);
        assert!(!cfg.write.create_parent_dirs);
        assert_eq!(cfg.write.mode(), 0o640);
        assert_eq!((cfg.sandbox.memory_mib, cfg.sandbox.share_host_usr), (512, false));
        assert_eq!((cfg.run.max_wall_s, cfg.run.working_budget, cfg.run.repeat_limit), (60, 4096, 2));
        assert_eq!((cfg.task.max_turns, cfg.model.max_reply_tokens, cfg.model.prompt_cache), (5, 256, false));
        // Widening the other way round: a lower reserve, no repeat guard, nested subagents.
        let cfg = layers(
            None,
            "[run]\nworking_budget = 10\nrepeat_limit = 0\n[task]\nnested = true\n[sandbox]\naccel = \"tcg\"",
        );
        assert_eq!((cfg.run.working_budget, cfg.run.repeat_limit, cfg.task.nested), (2048, 3, false));
        assert_eq!((cfg.sandbox.accel.as_str(), cfg.warnings.len()), ("auto", 4));
        // The same value as the user's changes nothing and is not reported.
        let cfg = layers(Some("[sandbox]\naccel = \"tcg\""), "[sandbox]\naccel = \"tcg\"");
        assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
    }

    #[test]
    fn ignore_patterns_say_whose_they_are() {
        let cfg = layers(Some("[workspace]\nignore = [\"*.log\"]"), "[workspace]\nignore = [\"*.tmp\"]");
        assert_eq!(cfg.workspace.ignore, vec!["*.log", "*.tmp"]);
        assert_eq!(cfg.workspace.repository_ignore, vec!["*.tmp"]);
    }

    #[test]
    fn special_bits_need_the_users_explicit_leave() {
        let user =
            |t: &str| Config::layered(Some((table(t), PathBuf::from("/u.toml"))), None, Path::new("/w/abhed.toml"));
        let e = user("[write]\nfile_mode = \"4755\"").unwrap_err().to_string();
        assert!(e.contains("sets the setuid, setgid or sticky bit") && e.contains("allow_special_bits = true"), "{e}");
        assert_eq!(user("[write]\nfile_mode = \"4755\"\nallow_special_bits = true").unwrap().write.mode(), 0o4755);
        // From a repository, the leave itself is refused.
        let cfg = layers(None, "[write]\nallow_special_bits = true\nfile_mode = \"4644\"");
        assert_eq!((cfg.write.allow_special_bits, cfg.write.mode(), cfg.warnings.len()), (false, 0o644, 2));
    }

    /// Every key of every table has a rule (a new key must be classified, not default to
    /// whatever a repository says). `[approval]` is layered by the policy.
    #[test]
    fn every_key_is_classified() {
        let all = serde_json::to_value(Config::default()).unwrap();
        let mut seen = 0;
        for (table, keys) in all.as_object().unwrap() {
            for key in keys.as_object().unwrap().keys() {
                assert!(
                    narrow::RULES.iter().any(|(t, k, _)| t == table && k == key),
                    "{table}.{key} has no rule in config/narrow.rs"
                );
                seen += 1;
            }
        }
        assert_eq!(seen, narrow::RULES.len(), "a rule names a key that does not exist");
    }

    #[test]
    fn a_repository_config_must_be_a_small_regular_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("abhed.toml");
        std::os::unix::fs::symlink("/dev/zero", &p).unwrap();
        let e = read_workspace_table(&p).unwrap_err().to_string();
        assert!(e.contains("is a symlink; abhed reads a workspace's abhed.toml only as a regular file"), "{e}");
        std::fs::remove_file(&p).unwrap();
        // A FIFO is refused before it is opened (opening one would wait for a writer).
        assert!(std::process::Command::new("mkfifo").arg(&p).status().unwrap().success());
        let e = read_workspace_table(&p).unwrap_err().to_string();
        assert!(
            e.contains("is a FIFO (named pipe); abhed reads a workspace's abhed.toml only as a regular file"),
            "{e}"
        );
        std::fs::remove_file(&p).unwrap();
        std::fs::write(&p, "#".repeat(2 << 20)).unwrap();
        assert!(read_workspace_table(&p).is_err());
        std::fs::write(&p, "[read]\nmax_output_chars = 10\n").unwrap();
        assert!(read_workspace_table(&p).is_ok());
    }

    #[test]
    fn unknown_keys_are_rejected() {
        assert!(toml::from_str::<Config>("[write]\ncreate_parents = true").is_err());
    }

    #[test]
    fn modes_parse() {
        assert_eq!(parse_mode("0644"), Some(0o644));
        assert_eq!(parse_mode("0o600"), Some(0o600));
        assert_eq!(parse_mode("999"), None);
    }
}
