//! The policy file: its TOML shape, rule patterns, and how a workspace policy layers on the user's.

use std::path::{Component, Path};

use globset::{GlobBuilder, GlobMatcher};
use serde::{Deserialize, Serialize};

/// What happens to a command that matches no rule.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Allowed (destructive commands still need confirmation).
    #[default]
    Auto,
    /// Needs an operator's confirmation.
    Ask,
}

impl HostCode {
    pub(crate) fn name(self) -> &'static str {
        match self {
            HostCode::Allow => "allow",
            HostCode::Ask => "ask",
            HostCode::Deny => "deny",
        }
    }
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Auto => "auto",
            Mode::Ask => "ask",
        }
    }
}

/// The inside of the `[approval]` table.
///
/// ```toml
/// mode = "auto"
/// allow = ["cargo test*"]
/// ask = ["git commit*"]
/// deny = ["curl*"]
/// [paths]
/// deny = ["/etc/**"]
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyConfig {
    /// `None` when the file does not say; the effective default is [`Mode::Auto`].
    #[serde(default)]
    pub mode: Option<Mode>,
    /// Command patterns: `*` matches any text, everything else is literal; the whole command must match.
    #[serde(default)]
    pub allow: Vec<String>,
    #[serde(default)]
    pub ask: Vec<String>,
    #[serde(default)]
    pub deny: Vec<String>,
    #[serde(default)]
    pub paths: PathRulesConfig,
    /// A bash call that deletes more files than this (or any file git tracks) asks first; with
    /// no answer its changes are undone. `None` when the file does not say; the default is
    /// [`DEFAULT_MAX_DELETIONS`]. A workspace policy may only lower it.
    #[serde(default)]
    pub max_deletions: Option<u32>,
}

/// Files one bash call may delete without asking (tracked files aside).
pub const DEFAULT_MAX_DELETIONS: u32 = 20;

/// Path patterns for the write and edit tools (globs on absolute paths; `**` crosses directories, `*`
/// does not; a pattern without `/` matches a file name anywhere, gitignore-style).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PathRulesConfig {
    #[serde(default)]
    pub allow: Vec<String>,
    #[serde(default)]
    pub ask: Vec<String>,
    #[serde(default)]
    pub deny: Vec<String>,
    /// Files the host itself runs ([`HOST_CODE`]: git hooks and config, `.envrc`, editor tasks).
    /// `None` when the file does not say; the effective default is [`HostCode::Ask`].
    #[serde(default)]
    pub host_code: Option<HostCode>,
}

/// What happens to a write of a file the host runs. Ordered from least to most restrictive.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HostCode {
    /// Written like any other file (user config only).
    Allow,
    /// Needs an operator's confirmation, unless a (user) `paths.allow` rule names the path.
    #[default]
    Ask,
    /// Refused.
    Deny,
}

/// Files and folders that programs on the host run or obey, with what runs them. Written from
/// the VM's side of the boundary (by the model, or by a repository's instructions), they are
/// code the host runs later, outside the VM: a git hook runs at the operator's next commit.
pub const HOST_CODE: &[(&str, &str)] = &[
    ("**/.git", "git follows a `.git` file to its repository, whose hooks and config run on the host"),
    (
        "**/.git/**",
        "git runs hooks on the host, and its config can name programs too (core.hooksPath, core.fsmonitor, core.sshCommand, aliases)",
    ),
    ("**/.husky/**", "git runs hooks from .husky/ on the host once core.hooksPath points there, as husky sets it"),
    ("**/.pre-commit-config.yaml", "pre-commit runs the commands it lists on the host at every commit"),
    ("**/.envrc", "direnv runs .envrc in the host's shell when someone enters the folder"),
    ("**/.vscode/**", "VS Code runs its tasks and applies its settings (terminal, interpreter paths) on the host"),
    ("**/*.code-workspace", "VS Code runs the tasks and applies the settings of a workspace file on the host"),
    ("**/.idea/**", "JetBrains IDEs run the run configurations and tasks it holds on the host"),
    ("**/.devcontainer/**", "a dev container's initializeCommand runs on the host"),
    ("**/.devcontainer.json", "a dev container's initializeCommand runs on the host"),
    ("**/.exrc", "vim and neovim run it on the host when 'exrc' is set"),
    ("**/.nvimrc", "vim and neovim run it on the host when 'exrc' is set"),
    ("**/.nvim.lua", "neovim runs it on the host when 'exrc' is set"),
    ("**/.dir-locals.el", "Emacs evaluates its eval: forms on the host"),
];

/// A policy that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("invalid approval policy: {0}")]
    Toml(#[from] toml::de::Error),
    #[error("invalid pattern `{pattern}` in the approval policy's {list} list: {reason}")]
    Pattern { list: &'static str, pattern: String, reason: String },
}

impl PolicyConfig {
    /// Parses the inside of the `[approval]` table from TOML text.
    pub fn from_toml_str(text: &str) -> Result<Self, PolicyError> {
        Ok(toml::from_str(text)?)
    }

    /// Converts an already parsed `[approval]` table.
    pub fn from_table(table: toml::Table) -> Result<Self, PolicyError> {
        Ok(table.try_into()?)
    }
}

/// Merges the user's policy with a workspace's. The workspace may only make things stricter; what it
/// tried to loosen is dropped and reported in the returned warnings.
pub(crate) fn layer(user: Option<PolicyConfig>, workspace: Option<PolicyConfig>) -> (PolicyConfig, Vec<String>) {
    let mut merged = user.unwrap_or_default();
    let mut warnings = Vec::new();
    let Some(ws) = workspace else { return (merged, warnings) };
    const MOVE: &str =
        "a workspace policy may only add ask and deny rules; move it to your user configuration to use it";
    for pattern in &ws.allow {
        warnings.push(format!("ignored the workspace approval policy's allow rule `{pattern}`: {MOVE}"));
    }
    for pattern in &ws.paths.allow {
        warnings.push(format!("ignored the workspace approval policy's paths allow rule `{pattern}`: {MOVE}"));
    }
    match ws.mode {
        Some(Mode::Ask) => merged.mode = Some(Mode::Ask),
        Some(Mode::Auto) if merged.mode == Some(Mode::Ask) => {
            warnings.push(format!("ignored the workspace approval policy's `mode = \"auto\"`: {MOVE}"));
        }
        _ => {}
    }
    if let Some(theirs) = ws.paths.host_code {
        let ours = merged.paths.host_code.unwrap_or_default();
        if theirs >= ours {
            merged.paths.host_code = Some(theirs);
        } else {
            warnings.push(format!(
                "ignored the workspace approval policy's `paths.host_code = \"{}\"`: a workspace policy may only make it stricter; set it in your user configuration to use it",
                theirs.name()
            ));
        }
    }
    if let Some(theirs) = ws.max_deletions {
        let ours = merged.max_deletions.unwrap_or(DEFAULT_MAX_DELETIONS);
        if theirs <= ours {
            merged.max_deletions = Some(theirs);
        } else {
            warnings.push(format!(
                "ignored the workspace approval policy's `max_deletions = {theirs}`: a workspace policy may only lower it; set it in your user configuration to use it"
            ));
        }
    }
    merged.ask.extend(ws.ask);
    merged.deny.extend(ws.deny);
    merged.paths.ask.extend(ws.paths.ask);
    merged.paths.deny.extend(ws.paths.deny);
    (merged, warnings)
}

/// A command pattern, split at its `*`s.
#[derive(Debug, Clone)]
pub(crate) struct CommandRule {
    pub pattern: String,
}

/// Runs of whitespace become one space, so `git  status` and `git status` are the same text.
pub(crate) fn squash_spaces(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

impl CommandRule {
    fn new(list: &'static str, raw: &str) -> Result<Self, PolicyError> {
        let pattern = squash_spaces(raw);
        if pattern.is_empty() {
            return Err(PolicyError::Pattern { list, pattern: raw.to_string(), reason: "it is empty".to_string() });
        }
        Ok(CommandRule { pattern })
    }

    /// Whole-text match; `*` matches any characters, including spaces and `/`. The guest's
    /// exec check matches its rules with the same function, so a rule means the same there.
    pub(crate) fn matches(&self, text: &str) -> bool {
        abhed_guest::policy::pattern_matches(&self.pattern, &squash_spaces(text))
    }
}

/// A path pattern.
#[derive(Debug, Clone)]
pub(crate) struct PathRule {
    pub pattern: String,
    matcher: GlobMatcher,
}

impl PathRule {
    fn new(list: &'static str, raw: &str) -> Result<Self, PolicyError> {
        let error = |reason: String| PolicyError::Pattern { list, pattern: raw.to_string(), reason };
        let trimmed = raw.trim();
        if trimmed.is_empty() {
            return Err(error("it is empty".to_string()));
        }
        // gitignore-style: a bare name matches at any depth; a trailing slash means everything inside.
        let mut glob = if trimmed.contains('/') { trimmed.to_string() } else { format!("**/{trimmed}") };
        if glob.ends_with('/') {
            glob.push_str("**");
        }
        let matcher = GlobBuilder::new(&glob).literal_separator(true).build().map_err(|e| error(e.to_string()))?;
        Ok(PathRule { pattern: raw.to_string(), matcher: matcher.compile_matcher() })
    }

    pub(crate) fn matches(&self, path: &str) -> bool {
        self.matcher.is_match(path)
    }
}

/// Compiled rules (no `Default`: the host-code rules are always compiled in).
#[derive(Debug, Clone)]
pub(crate) struct Rules {
    pub mode: Mode,
    pub allow: Vec<CommandRule>,
    pub ask: Vec<CommandRule>,
    pub deny: Vec<CommandRule>,
    pub path_allow: Vec<PathRule>,
    pub path_ask: Vec<PathRule>,
    pub path_deny: Vec<PathRule>,
    pub host_code: HostCode,
    /// [`HOST_CODE`] compiled, each with what runs it.
    host_code_rules: Vec<(PathRule, &'static str)>,
}

impl Rules {
    pub(crate) fn compile(config: &PolicyConfig) -> Result<Self, PolicyError> {
        let commands = |list: &'static str, raw: &[String]| -> Result<Vec<CommandRule>, PolicyError> {
            raw.iter().map(|p| CommandRule::new(list, p)).collect()
        };
        let paths = |list: &'static str, raw: &[String]| -> Result<Vec<PathRule>, PolicyError> {
            raw.iter().map(|p| PathRule::new(list, p)).collect()
        };
        Ok(Rules {
            mode: config.mode.unwrap_or_default(),
            allow: commands("allow", &config.allow)?,
            ask: commands("ask", &config.ask)?,
            deny: commands("deny", &config.deny)?,
            path_allow: paths("paths allow", &config.paths.allow)?,
            path_ask: paths("paths ask", &config.paths.ask)?,
            path_deny: paths("paths deny", &config.paths.deny)?,
            host_code: config.paths.host_code.unwrap_or_default(),
            host_code_rules: HOST_CODE
                .iter()
                .map(|(p, why)| PathRule::new("host code", p).map(|r| (r, *why)))
                .collect::<Result<_, _>>()?,
        })
    }

    /// The host-code class a (normalized) path is in, and what runs it.
    pub(crate) fn host_code_match(&self, path: &str) -> Option<(&PathRule, &'static str)> {
        self.host_code_rules.iter().find(|(r, _)| r.matches(path)).map(|(r, why)| (r, *why))
    }

    pub(crate) fn mode_name(&self) -> &'static str {
        self.mode.name()
    }
}

/// The first rule matching any of `texts`.
pub(crate) fn first_match<'r>(rules: &'r [CommandRule], texts: &[&str]) -> Option<&'r CommandRule> {
    rules.iter().find(|r| texts.iter().any(|t| r.matches(t)))
}

/// Resolves `.` and `..` without touching the file system, so `/work/../etc/x` meets the `/etc/**` rule.
pub(crate) fn normalize_path(path: &Path) -> String {
    let mut parts: Vec<String> = Vec::new();
    let absolute = path.is_absolute();
    for component in path.components() {
        match component {
            Component::Normal(p) => parts.push(p.to_string_lossy().into_owned()),
            Component::ParentDir => {
                if parts.pop().is_none() && !absolute {
                    parts.push("..".to_string());
                }
            }
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
    let joined = parts.join("/");
    if absolute { format!("/{joined}") } else { joined }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(p: &str) -> CommandRule {
        CommandRule::new("allow", p).unwrap()
    }

    #[test]
    fn star_matches_anything() {
        assert!(rule("cargo test*").matches("cargo test"));
        assert!(rule("cargo test*").matches("cargo test --release -- a/b c"));
        assert!(rule("git *push*").matches("git -C x push --force"));
        assert!(rule("*").matches(""));
        assert!(rule("a*b*c").matches("abc"));
        assert!(!rule("a*b*c").matches("acb"));
        assert!(!rule("ab*ba").matches("aba"));
    }

    #[test]
    fn whole_text_must_match() {
        assert!(rule("git status").matches("git status"));
        assert!(rule("git  status ").matches("git status"));
        assert!(!rule("git status").matches("git status -s"));
        assert!(!rule("git status").matches("xgit status"));
    }

    #[test]
    fn parses_the_approval_table() {
        let config = PolicyConfig::from_toml_str(
            "mode = \"ask\"\nallow = [\"ls*\"]\ndeny = [\"curl*\"]\n[paths]\ndeny = [\"/etc/**\"]\n",
        )
        .unwrap();
        assert_eq!(config.mode, Some(Mode::Ask));
        assert_eq!(config.paths.deny, ["/etc/**"]);
        let table: toml::Table = "allow = [\"x\"]".parse().unwrap();
        assert_eq!(PolicyConfig::from_table(table).unwrap().allow, ["x"]);
    }

    #[test]
    fn unknown_keys_are_errors() {
        let err = PolicyConfig::from_toml_str("alow = []").unwrap_err();
        assert!(err.to_string().contains("alow"), "{err}");
        assert!(PolicyConfig::from_toml_str("[paths]\nwrite = []").is_err());
        assert!(PolicyConfig::from_toml_str("mode = \"yolo\"").is_err());
    }

    #[test]
    fn invalid_patterns_name_the_pattern() {
        let config = PolicyConfig {
            paths: PathRulesConfig { deny: vec!["/etc/[".into()], ..Default::default() },
            ..Default::default()
        };
        let err = Rules::compile(&config).unwrap_err();
        assert!(err.to_string().contains("`/etc/[`"), "{err}");
        let empty = PolicyConfig { deny: vec!["  ".into()], ..Default::default() };
        assert!(Rules::compile(&empty).is_err());
    }

    #[test]
    fn path_patterns() {
        let r = |p: &str| PathRule::new("deny", p).unwrap();
        assert!(r("/etc/**").matches("/etc/passwd"));
        assert!(r("/etc/**").matches("/etc/ssh/sshd_config"));
        assert!(!r("/etc/**").matches("/etcetera/x"));
        assert!(r("*.pem").matches("/work/keys/a.pem"));
        assert!(r("/work/secrets/").matches("/work/secrets/a/b"));
        assert!(!r("/work/*.txt").matches("/work/a/b.txt"));
    }

    #[test]
    fn normalizes_paths() {
        assert_eq!(normalize_path(Path::new("/work/../etc/./passwd")), "/etc/passwd");
        assert_eq!(normalize_path(Path::new("/../../etc")), "/etc");
        assert_eq!(normalize_path(Path::new("a/../../b")), "../b");
    }

    #[test]
    fn workspace_cannot_loosen() {
        let user = PolicyConfig { mode: Some(Mode::Ask), allow: vec!["ls*".into()], ..Default::default() };
        let ws = PolicyConfig {
            mode: Some(Mode::Auto),
            allow: vec!["rm*".into()],
            deny: vec!["curl*".into()],
            ..Default::default()
        };
        let (merged, warnings) = layer(Some(user), Some(ws));
        assert_eq!(merged.mode, Some(Mode::Ask));
        assert_eq!(merged.allow, ["ls*"]);
        assert_eq!(merged.deny, ["curl*"]);
        assert_eq!(warnings.len(), 2);
        assert!(warnings[0].contains("`rm*`") && warnings[0].contains("user configuration"));
    }

    fn check(policy: &str, path: &str) -> crate::approval::Verdict {
        let config = PolicyConfig::from_toml_str(policy).unwrap();
        crate::approval::Policy::new(&config).unwrap().check_path(Path::new(path))
    }

    #[test]
    fn files_the_host_runs_ask_by_default_and_say_why() {
        use crate::approval::{Decision, ReasonKind};
        for (path, why) in [
            ("/ws/.git/hooks/pre-commit", "git runs hooks on the host"),
            ("/ws/.git/config", "core.hooksPath"),
            ("/ws/.git", "follows a `.git` file"),
            ("/ws/vendor/lib/.git/hooks/post-checkout", "git runs hooks on the host"),
            ("/ws/x/../.git/hooks/a", "git runs hooks on the host"),
            ("/ws/.husky/pre-commit", "husky"),
            ("/ws/.pre-commit-config.yaml", "pre-commit runs"),
            ("/ws/.envrc", "direnv runs .envrc"),
            ("/ws/.vscode/tasks.json", "VS Code"),
            ("/ws/app.code-workspace", "VS Code"),
            ("/ws/.idea/workspace.xml", "JetBrains"),
            ("/ws/.devcontainer/devcontainer.json", "initializeCommand"),
            ("/ws/.exrc", "exrc"),
            ("/ws/.dir-locals.el", "Emacs"),
        ] {
            let v = check("", path);
            assert_eq!(v.decision, Decision::Ask, "{path}");
            assert!(matches!(v.reasons[0].kind, ReasonKind::HostCode(_)), "{path}");
            assert!(v.message().contains(why), "{path}: {}", v.message());
            assert!(v.message().contains("so it needs an operator's confirmation"), "{}", v.message());
        }
        for path in ["/ws/src/git.rs", "/ws/.gitignore", "/ws/.github/workflows/ci.yml", "/ws/docs/.vscode.md"] {
            assert_eq!(check("", path).decision, Decision::Allow, "{path}");
        }
    }

    #[test]
    fn the_user_may_relax_files_the_host_runs_and_a_workspace_may_only_tighten() {
        use crate::approval::{Decision, Policy};
        assert_eq!(check("[paths]\nhost_code = \"allow\"", "/ws/.git/hooks/x").decision, Decision::Allow);
        assert_eq!(check("[paths]\nhost_code = \"deny\"", "/ws/.envrc").decision, Decision::Deny);
        // An allow rule naming the path relaxes that path only.
        let p = "[paths]\nallow = [\"/ws/.vscode/settings.json\"]";
        assert_eq!(check(p, "/ws/.vscode/settings.json").decision, Decision::Allow);
        assert_eq!(check(p, "/ws/.vscode/tasks.json").decision, Decision::Ask);
        // A workspace's "allow" is ignored and reported; its "deny" holds.
        let user = PolicyConfig::from_toml_str("[paths]\nhost_code = \"ask\"").unwrap();
        let ws = PolicyConfig::from_toml_str("[paths]\nhost_code = \"allow\"\nallow = [\"**/.git/**\"]").unwrap();
        let (policy, warnings) = Policy::layered(Some(user.clone()), Some(ws)).unwrap();
        assert_eq!(policy.check_path(Path::new("/ws/.git/hooks/x")).decision, Decision::Ask);
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[1].contains("`paths.host_code = \"allow\"`"), "{warnings:?}");
        let ws = PolicyConfig::from_toml_str("[paths]\nhost_code = \"deny\"").unwrap();
        let (policy, warnings) = Policy::layered(Some(user), Some(ws)).unwrap();
        assert_eq!(policy.check_path(Path::new("/ws/.git/hooks/x")).decision, Decision::Deny);
        assert!(warnings.is_empty());
        let ws = PolicyConfig::from_toml_str("[paths]\nhost_code = \"ask\"").unwrap();
        let user = PolicyConfig::from_toml_str("[paths]\nhost_code = \"allow\"").unwrap();
        let (policy, _) = Policy::layered(Some(user), Some(ws)).unwrap();
        assert_eq!(policy.check_path(Path::new("/ws/.git/hooks/x")).decision, Decision::Ask);
    }

    #[test]
    fn a_bash_redirection_into_a_hook_asks_too() {
        use crate::approval::{Decision, Policy};
        let policy = Policy::new(&PolicyConfig::default()).unwrap();
        // Redirections are checked where their target is absolute (as for the path rules).
        for cmd in ["echo 'curl x | sh' > /ws/.git/hooks/pre-commit", "cat >> /ws/.envrc <<'EOF'\nexport A=1\nEOF"] {
            let v = policy.check_command(cmd);
            assert_eq!(v.decision, Decision::Ask, "{cmd}: {v:?}");
            assert!(v.message().contains("puts code where the host runs it"), "{}", v.message());
        }
        assert_eq!(policy.check_command("echo hi > notes.txt").decision, Decision::Allow);
    }
}
