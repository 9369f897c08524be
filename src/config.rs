//! Configuration: built-in defaults, then the user config (`$XDG_CONFIG_HOME/abhed/config.toml`
//! or `$ABHED_CONFIG`), then the workspace's `abhed.toml`. Flags win over all of them.
//!
//! Settings that widen what tools may touch (`workspace.extra_roots`) are honoured only from
//! the user config: a repository must not be able to grant itself access outside itself.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};
use serde::Deserialize;

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
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

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WorkspaceConfig {
    /// Directories outside the workspace that tools may also touch.
    pub extra_roots: Vec<PathBuf>,
    /// Gitignore-style patterns glob and grep skip, on top of `.gitignore` and the built-in
    /// list (node_modules, .git, target, dist, __pycache__).
    pub ignore: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
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

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WriteConfig {
    /// Let write (and edit creating a file) create missing parent directories.
    pub create_parent_dirs: bool,
    /// Permission bits of new files, as an octal string ("0644").
    pub file_mode: String,
}

impl Default for WriteConfig {
    fn default() -> Self {
        WriteConfig { create_parent_dirs: false, file_mode: "0644".to_string() }
    }
}

impl WriteConfig {
    /// The mode of new files as bits. Validated at load, so this cannot fail afterwards.
    pub fn mode(&self) -> u32 {
        parse_mode(&self.file_mode).unwrap_or(0o644)
    }
}

/// The model and how to run it. Flags override each key.
#[derive(Debug, Clone, PartialEq, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
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
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig { max_turns: 30, max_tokens: 500_000, max_wall_s: 1800, working_budget: 2048, repeat_limit: 3 }
    }
}

/// Subagents (the `task` tool).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
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
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
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
        }
    }
}

fn parse_mode(s: &str) -> Option<u32> {
    u32::from_str_radix(s.trim_start_matches("0o"), 8).ok().filter(|m| *m <= 0o7777)
}

/// Where the user config lives.
pub fn user_config_path() -> Option<PathBuf> {
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    env("ABHED_CONFIG")
        .or_else(|| env("XDG_CONFIG_HOME").map(|d| d.join("abhed/config.toml")))
        .or_else(|| env("HOME").map(|d| d.join(".config/abhed/config.toml")))
}

impl Config {
    /// Load the user config and the workspace's `abhed.toml`, the latter overriding key by key.
    pub fn load(workspace: &Path) -> Result<Config> {
        let user = match user_config_path() {
            Some(p) if p.exists() => Some((read_table(&p)?, p)),
            _ => None,
        };
        let ws_path = workspace.join("abhed.toml");
        let ws = if ws_path.exists() { Some(read_table(&ws_path)?) } else { None };
        Self::layered(user, ws, &ws_path)
    }

    fn layered(user: Option<(toml::Table, PathBuf)>, ws: Option<toml::Table>, ws_path: &Path) -> Result<Config> {
        let mut merged = toml::Table::new();
        let mut origin = ws_path.to_path_buf();
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
        if let Some((user, path)) = user {
            from_table(user.clone(), &path)?;
            merged = user;
            origin = path;
        }
        if let Some(ws) = ws {
            // Keys that widen access or send data somewhere: a repository must not set them
            // for itself (an endpoint would carry its files off the machine).
            let guarded = [
                ("workspace", "extra_roots"),
                ("model", "endpoint"),
                ("model", "api_key_env"),
                ("model", "path"),
                // The programs and files the sandbox is built from, and what of the host it sees.
                ("sandbox", "qemu"),
                ("sandbox", "image_dir"),
                ("sandbox", "share_host_usr"),
                ("sandbox", "host_readonly"),
            ];
            if ws.contains_key("conformance") {
                bail!(
                    "{}: `[conformance]` (the model gate) is only honoured in the user config ({}), so that a repository cannot lower the bar for the model that works on it; move it there",
                    ws_path.display(),
                    user_config_path()
                        .map(|p| p.display().to_string())
                        .unwrap_or_else(|| "~/.config/abhed/config.toml".into())
                );
            }
            if let Some((table, key)) = guarded.iter().find(|(t, k)| ws.get(*t).and_then(|v| v.get(*k)).is_some()) {
                bail!(
                    "{}: `{table}.{key}` is only honoured in the user config ({}) or on the command line, so that a repository cannot widen its own access or choose where its files are sent; move it there",
                    ws_path.display(),
                    user_config_path()
                        .map(|p| p.display().to_string())
                        .unwrap_or_else(|| "~/.config/abhed/config.toml".into())
                );
            }
            from_table(ws.clone(), ws_path)?;
            overlay(&mut merged, ws);
            origin = ws_path.to_path_buf();
        }
        let mut cfg = from_table(merged, &origin)?;
        cfg.approval = approval;
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

fn read_table(path: &Path) -> Result<toml::Table> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read config {}", path.display()))?;
    text.parse::<toml::Table>().with_context(|| format!("invalid config {}", path.display()))
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
    if !(1..=1024 * 1024).contains(&cfg.sandbox.disk_quota_mib) {
        bail!(
            "invalid config {}: sandbox.disk_quota_mib is {}; it must be 1 to 1048576 (MiB one bash call may add to the workspace's disk; default 2048)",
            path.display(),
            cfg.sandbox.disk_quota_mib
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
    fn workspace_cannot_widen_roots() {
        let ws: toml::Table = "[workspace]\nextra_roots = [\"/\"]".parse().unwrap();
        assert!(Config::layered(None, Some(ws), Path::new("/w/abhed.toml")).is_err());
    }

    #[test]
    fn workspace_cannot_choose_an_endpoint() {
        let ws: toml::Table = "[model]\nendpoint = \"http://10.0.0.9:8080\"".parse().unwrap();
        let e = Config::layered(None, Some(ws), Path::new("/w/abhed.toml")).unwrap_err().to_string();
        assert!(e.contains("`model.endpoint` is only honoured in the user config"), "{e}");
        let ws: toml::Table = "[model]\nn_ctx = 4096".parse().unwrap();
        assert_eq!(Config::layered(None, Some(ws), Path::new("/w/abhed.toml")).unwrap().model.n_ctx, Some(4096));
    }

    #[test]
    fn workspace_cannot_lower_the_gate() {
        let ws: toml::Table = "[conformance]\nmin_pass_rate = 0.0".parse().unwrap();
        let e = Config::layered(None, Some(ws), Path::new("/w/abhed.toml")).unwrap_err().to_string();
        assert!(e.contains("`[conformance]` (the model gate) is only honoured in the user config"), "{e}");
        let user: toml::Table = "[conformance]\nmin_pass_rate = 0.5".parse().unwrap();
        let cfg = Config::layered(Some((user, PathBuf::from("/u.toml"))), None, Path::new("/w/abhed.toml")).unwrap();
        assert_eq!(cfg.conformance.min_pass_rate, 0.5);
        let user: toml::Table = "[conformance]\nmin_pass_rate = 80".parse().unwrap();
        assert!(Config::layered(Some((user, PathBuf::from("/u.toml"))), None, Path::new("/w/abhed.toml")).is_err());
    }

    #[test]
    fn workspace_overrides_key_by_key() {
        let user: toml::Table = "[write]\nfile_mode = \"0600\"\n[workspace]\nignore = [\"*.log\"]".parse().unwrap();
        let ws: toml::Table = "[write]\ncreate_parent_dirs = true\n[workspace]\nignore = [\"*.tmp\"]".parse().unwrap();
        let cfg =
            Config::layered(Some((user, PathBuf::from("/u.toml"))), Some(ws), Path::new("/w/abhed.toml")).unwrap();
        assert_eq!(cfg.write.mode(), 0o600);
        assert!(cfg.write.create_parent_dirs);
        assert_eq!(cfg.workspace.ignore, vec!["*.log", "*.tmp"]);
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
