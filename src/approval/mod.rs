//! Approval of shell commands and file writes before the agent runs them.
//!
//! A command line is parsed with tree-sitter-bash into every *simple command* it would run (across
//! lists, pipelines, compound statements, substitutions, heredocs), wrappers such as `sudo`, `env`,
//! `timeout`, `bash -c` and `eval` are unwrapped, and each resulting command is judged:
//!
//! 1. a deny rule matches → [`Decision::Deny`];
//! 2. an ask rule matches → [`Decision::Ask`];
//! 3. it is destructive (`rm -rf`, `git push --force`, `mkfs`, ...) → Ask, whatever the allow rules say;
//! 4. it cannot be known before it runs (`$CMD x`, `eval "$X"`, unparsable text) → Ask;
//! 5. the shell builds code from strings as it runs (`${x@P}`, `$((x))`, `PS4=`, `printf -v`,
//!    `source`): in the mode `ask` → Ask; never allowed by an allow rule; in `auto` it runs, and
//!    the guest's exec check decides on every program it executes;
//! 6. an allow rule matches → Allow;
//! 7. the mode decides: `auto` → Allow, `ask` → Ask.
//!
//! The command line gets the most restrictive decision of its commands. Commands that need a terminal
//! (editors, pagers, REPLs) are reported separately in [`Verdict::interactive`].

mod analyze;
mod destructive;
mod evaluated;
pub mod gate;
mod interactive;
mod parse;
mod policy;
mod wrappers;

use std::collections::HashSet;
use std::path::Path;

use serde::Serialize;

pub use policy::{HOST_CODE, HostCode, Mode, PathRulesConfig, PolicyConfig, PolicyError};

use analyze::{Finding, Unit};
use policy::{Rules, first_match, normalize_path};

/// What to do with a command or a write. Ordered from least to most restrictive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Allow,
    Ask,
    Deny,
}

/// Which rule or finding produced a [`Reason`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", content = "pattern", rename_all = "snake_case")]
pub enum ReasonKind {
    /// Matched this deny pattern.
    DenyRule(String),
    /// Matched this ask pattern.
    AskRule(String),
    /// Matched this allow pattern.
    AllowRule(String),
    /// A destructive command; needs confirmation in every mode.
    Destructive,
    /// The command line is not valid shell.
    Unparsed,
    /// Part of the command is only known when it runs.
    Dynamic,
    /// The shell builds code from a string while the command runs (`${x@P}`, `$((x))`), and the
    /// mode is `ask`.
    Evaluated,
    /// No rule matched and the mode is `ask`.
    ModeAsk,
    /// No rule matched and the mode is `auto`.
    Default,
    /// The operator allowed this exact command line for the session.
    Remembered,
    /// A file the host runs (a git hook, `.envrc`, ...): this built-in pattern matched.
    HostCode(String),
    /// One of Abhed's own files (its config, data folder, binary, QEMU, VM image, model): this
    /// protected path. No policy or answer lets a tool write it.
    Protected(String),
}

/// Why one command got its decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Reason {
    /// The command (normalized) or path this is about.
    pub command: String,
    pub kind: ReasonKind,
    pub decision: Decision,
    /// Written for the model: what was refused, why, and what it may do instead.
    pub message: String,
}

/// The outcome of a check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verdict {
    /// The most restrictive decision over all commands; Allow when there are none.
    pub decision: Decision,
    /// Every reason, in the order the commands appear.
    pub reasons: Vec<Reason>,
    /// The normalized commands that were checked, wrapper layers included (`sudo rm x`, then `rm x`).
    pub commands: Vec<String>,
    /// Guidance when a command needs a terminal the tool does not have.
    pub interactive: Option<String>,
}

impl Verdict {
    fn from_reasons(reasons: Vec<Reason>, commands: Vec<String>, interactive: Option<String>) -> Self {
        let decision = reasons.iter().map(|r| r.decision).max().unwrap_or(Decision::Allow);
        Verdict { decision, reasons, commands, interactive }
    }

    /// The messages of the reasons that decided the verdict, one per line, for the model to read.
    pub fn message(&self) -> String {
        let lines: Vec<&str> =
            self.reasons.iter().filter(|r| r.decision == self.decision).map(|r| r.message.as_str()).collect();
        lines.join("\n")
    }
}

const NO_OPERATOR: &str = "so it needs an operator's confirmation, and no operator can confirm in this run.";

/// The approval policy. Cheap to clone; holds no parser (a parser is created per check).
#[derive(Debug, Clone)]
pub struct Policy {
    rules: Rules,
    remembered: HashSet<String>,
    max_deletions: u32,
}

impl Policy {
    /// Builds a policy from one configuration. Invalid patterns are errors naming the pattern.
    pub fn new(config: &PolicyConfig) -> Result<Self, PolicyError> {
        Ok(Policy {
            rules: Rules::compile(config)?,
            remembered: HashSet::new(),
            max_deletions: config.max_deletions.unwrap_or(policy::DEFAULT_MAX_DELETIONS),
        })
    }

    /// Files one bash call may delete without asking (tracked files aside).
    pub fn max_deletions(&self) -> u32 {
        self.max_deletions
    }

    /// Builds a policy from the user's configuration and a workspace's (which may come from an untrusted
    /// repository). The workspace may add ask and deny rules and switch to `mode = "ask"`; its allow rules
    /// and `mode = "auto"` are ignored and returned as warnings for the operator.
    pub fn layered(
        user: Option<PolicyConfig>,
        workspace: Option<PolicyConfig>,
    ) -> Result<(Self, Vec<String>), PolicyError> {
        let (merged, warnings) = policy::layer(user, workspace);
        Ok((Policy::new(&merged)?, warnings))
    }

    /// Allows this exact command line for the rest of the session (the operator said "always").
    /// Its destructive parts still ask, and deny rules still apply.
    pub fn remember(&mut self, exact_command: &str) {
        self.remembered.insert(exact_command.to_string());
    }

    /// Checks a shell command line.
    pub fn check_command(&self, cmd: &str) -> Verdict {
        let remembered = self.remembered.contains(cmd);
        let units = analyze::analyze(cmd);
        let mut reasons = Vec::new();
        let mut guidance: Vec<String> = Vec::new();
        for unit in &units {
            reasons.extend(self.judge(unit, remembered));
            if let Some(g) = &unit.interactive
                && !guidance.contains(g)
            {
                guidance.push(g.clone());
            }
        }
        let commands = units.into_iter().filter(|u| !u.construct).map(|u| u.text).collect();
        let interactive = if guidance.is_empty() { None } else { Some(guidance.join("\n")) };
        Verdict::from_reasons(reasons, commands, interactive)
    }

    /// The rules the guest applies to every program a command executes (`abhed_guest::policy`):
    /// the deny and ask patterns, and, when the operator confirmed this command line
    /// (`confirmed`), its commands as patterns (what is filled in at run time — a word with `$`,
    /// a substitution, find's `{}` — as `*`), so that what was confirmed runs and nothing else
    /// that needs confirmation does.
    pub fn exec_policy(&self, verdict: &Verdict, confirmed: bool) -> abhed_guest::policy::ExecPolicy {
        let patterns = |rules: &[policy::CommandRule]| rules.iter().map(|r| r.pattern.clone()).collect();
        let approved = if confirmed {
            verdict
                .commands
                .iter()
                .map(|c| {
                    let words: Vec<&str> =
                        c.split_whitespace().map(|w| if w.contains(['$', '`', '(', '{']) { "*" } else { w }).collect();
                    words.join(" ")
                })
                .collect()
        } else {
            Vec::new()
        };
        abhed_guest::policy::ExecPolicy {
            deny: patterns(&self.rules.deny),
            ask: patterns(&self.rules.ask),
            approved,
            own: false,
            unchecked: false,
        }
    }

    /// Checks a write to `path` (meant to be absolute; `.` and `..` are resolved lexically, links are not).
    /// Paths matching no rule are allowed in both modes: the mode is about commands. A file the
    /// host runs ([`HOST_CODE`]) asks (or is denied, per `paths.host_code`) unless an allow rule
    /// names it or the user config set `host_code = "allow"`.
    pub fn check_path(&self, path: &Path) -> Verdict {
        let p = normalize_path(path);
        let reason = if let Some(r) = self.rules.path_deny.iter().find(|r| r.matches(&p)) {
            path_deny(&p, &p, &r.pattern)
        } else if let Some(r) = self.rules.path_ask.iter().find(|r| r.matches(&p)) {
            path_ask(&p, &p, &r.pattern)
        } else if let Some(r) = self.host_code(&p, &p) {
            r
        } else if let Some(r) = self.rules.path_allow.iter().find(|r| r.matches(&p)) {
            let message = format!("writing `{p}` is allowed by the rule `{}`.", r.pattern);
            Reason {
                command: p.clone(),
                kind: ReasonKind::AllowRule(r.pattern.clone()),
                decision: Decision::Allow,
                message,
            }
        } else {
            let message = format!("writing `{p}` matches no path rule, so it is allowed.");
            Reason { command: p.clone(), kind: ReasonKind::Default, decision: Decision::Allow, message }
        };
        Verdict::from_reasons(vec![reason], vec![p], None)
    }

    /// The reasons for one unit: the deciding one, plus any path rule its redirections hit.
    fn judge(&self, unit: &Unit, remembered: bool) -> Vec<Reason> {
        let mut out = Vec::new();
        for target in &unit.write_targets {
            let p = normalize_path(Path::new(target));
            if let Some(r) = self.rules.path_deny.iter().find(|r| r.matches(&p)) {
                out.push(path_deny(&unit.text, &p, &r.pattern));
            } else if let Some(r) = self.rules.path_ask.iter().find(|r| r.matches(&p)).filter(|_| !remembered) {
                out.push(path_ask(&unit.text, &p, &r.pattern));
            } else if let Some(r) =
                self.host_code(&unit.text, &p).filter(|r| r.decision == Decision::Deny || !remembered)
            {
                out.push(r);
            }
        }
        out.extend(self.decide(unit, remembered));
        out
    }

    fn decide(&self, unit: &Unit, remembered: bool) -> Option<Reason> {
        let cmd = unit.text.as_str();
        let mut texts = vec![cmd];
        texts.extend(unit.alt_text.as_deref());
        let reason = |kind: ReasonKind, decision: Decision, message: String| {
            Some(Reason { command: cmd.to_string(), kind, decision, message })
        };
        if let Some(rule) = first_match(&self.rules.deny, &texts) {
            let message = format!(
                "`{cmd}` is denied by the rule `{}` in the approval policy. Do not retry it or a variant of it; find another way, or tell the operator what you need.",
                rule.pattern
            );
            return reason(ReasonKind::DenyRule(rule.pattern.clone()), Decision::Deny, message);
        }
        if !remembered && let Some(rule) = first_match(&self.rules.ask, &texts) {
            let message = format!(
                "`{cmd}` matches the ask rule `{}`, {NO_OPERATOR} Find another way, or ask the operator to run it.",
                rule.pattern
            );
            return reason(ReasonKind::AskRule(rule.pattern.clone()), Decision::Ask, message);
        }
        for finding in &unit.findings {
            if let Finding::Destructive(d) = finding {
                let message = format!("`{cmd}` {}, {NO_OPERATOR} {}", d.why, d.instead);
                return reason(ReasonKind::Destructive, Decision::Ask, message);
            }
        }
        if !remembered {
            for finding in &unit.findings {
                match finding {
                    Finding::Dynamic(what) => {
                        let message = format!(
                            "`{cmd}` {what}, so it cannot be checked in advance; it needs an operator's confirmation, and no operator can confirm in this run. Write the command out literally, without variables or substitutions in that place."
                        );
                        return reason(ReasonKind::Dynamic, Decision::Ask, message);
                    }
                    Finding::Unparsed(detail) => {
                        let message = format!(
                            "could not parse the command; {detail}. It needs an operator's confirmation, and no operator can confirm in this run. Check the quoting and syntax, or split it into simpler commands."
                        );
                        return reason(ReasonKind::Unparsed, Decision::Ask, message);
                    }
                    Finding::Evaluated(what) if self.rules.mode == policy::Mode::Ask => {
                        let message = format!(
                            "`{cmd}` {what}, so what the command runs cannot be checked in advance, and the approval mode is \"ask\": {NO_OPERATOR} Write it without that construct (plain commands with literal arguments), or ask the operator to run it."
                        );
                        return reason(ReasonKind::Evaluated, Decision::Ask, message);
                    }
                    Finding::Destructive(_) | Finding::Evaluated(_) => {}
                }
            }
        }
        if !unit.full {
            // Transparent wrappers are settled by the command they run, which is its own unit.
            return None;
        }
        if let Some(rule) = first_match(&self.rules.allow, &[cmd]) {
            let message = format!("`{cmd}` is allowed by the rule `{}`.", rule.pattern);
            return reason(ReasonKind::AllowRule(rule.pattern.clone()), Decision::Allow, message);
        }
        if remembered {
            let message = format!("`{cmd}` is part of a command line the operator allowed for this session.");
            return reason(ReasonKind::Remembered, Decision::Allow, message);
        }
        match self.rules.mode {
            policy::Mode::Auto => {
                let message = format!("`{cmd}` matches no rule, and the approval mode is \"auto\", so it is allowed.");
                reason(ReasonKind::Default, Decision::Allow, message)
            }
            policy::Mode::Ask => {
                let message = format!(
                    "`{cmd}` matches no allow rule and the approval mode is \"{}\", {NO_OPERATOR} Use a command the policy allows, or ask the operator to allow this one.",
                    self.rules.mode_name()
                );
                reason(ReasonKind::ModeAsk, Decision::Ask, message)
            }
        }
    }
}

impl Policy {
    /// The reason a write of `path` (normalized) is held back as code the host runs, if it is.
    fn host_code(&self, subject: &str, path: &str) -> Option<Reason> {
        let (rule, why) = self.rules.host_code_match(path)?;
        let kind = ReasonKind::HostCode(rule.pattern.clone());
        match self.rules.host_code {
            HostCode::Allow => None,
            HostCode::Deny => Some(Reason {
                command: subject.to_string(),
                kind,
                decision: Decision::Deny,
                message: format!(
                    "writing `{path}` puts code where the host runs it ({why}), and the approval policy refuses such files (paths.host_code = \"deny\"). Do not write it another way; tell the operator what it should hold."
                ),
            }),
            HostCode::Ask if self.rules.path_allow.iter().any(|r| r.matches(path)) => None,
            HostCode::Ask => Some(Reason {
                command: subject.to_string(),
                kind,
                decision: Decision::Ask,
                message: format!(
                    "writing `{path}` puts code where the host runs it ({why}), outside the VM, {NO_OPERATOR} Leave the file alone, or finish and tell the operator what it should hold."
                ),
            }),
        }
    }
}

fn path_deny(subject: &str, path: &str, pattern: &str) -> Reason {
    let message = format!(
        "writing `{path}` is denied by the rule `{pattern}` in the approval policy. Do not write it another way; tell the operator what you need."
    );
    Reason {
        command: subject.to_string(),
        kind: ReasonKind::DenyRule(pattern.to_string()),
        decision: Decision::Deny,
        message,
    }
}

fn path_ask(subject: &str, path: &str, pattern: &str) -> Reason {
    let message = format!(
        "writing `{path}` matches the ask rule `{pattern}`, {NO_OPERATOR} Leave the file alone, or ask the operator to change it."
    );
    Reason {
        command: subject.to_string(),
        kind: ReasonKind::AskRule(pattern.to_string()),
        decision: Decision::Ask,
        message,
    }
}

#[cfg(test)]
mod tests;
