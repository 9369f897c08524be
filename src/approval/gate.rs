//! Where the tools meet the policy: a bash command line or a write/edit path is checked, the
//! operator is asked when the policy says so and one is present, and every decision becomes an
//! `approval` event between the call's action and its observation.

use std::path::Path;
use std::sync::Mutex;

use serde_json::json;

use super::{Decision, Policy, PolicyConfig, Reason, ReasonKind, Verdict};
use crate::config::Config;
use crate::store::{EventKind, Session};
use crate::tools::{ErrorCode, ToolContext, ToolError, ToolFailure};

/// An operator's answer to an approval prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Answer {
    Once,
    /// Allow this exact command for the rest of the session.
    Always,
    Deny,
}

/// What the operator is asked.
#[derive(Debug)]
pub struct Question<'a> {
    pub tool: &'a str,
    /// The model's description of the call (bash's `description`, or the tool's action).
    pub description: &'a str,
    /// The command line or the path.
    pub subject: &'a str,
    pub reasons: &'a [Reason],
    /// Whether "always" may be offered: never for a destructive command.
    pub offer_always: bool,
}

/// Whoever answers approval prompts.
pub trait Approver: Send + Sync {
    /// The answer, or `None` when nobody can answer (no terminal: `abhed run` in a script).
    fn ask(&self, q: &Question<'_>) -> Option<Answer>;
}

/// Nobody is there to ask: what needs confirmation is denied.
pub struct NoOperator;

impl Approver for NoOperator {
    fn ask(&self, _: &Question<'_>) -> Option<Answer> {
        None
    }
}

/// The session's policy (which learns "always" answers) and its approver.
pub struct Approvals {
    policy: Mutex<Policy>,
    approver: Box<dyn Approver>,
}

impl Approvals {
    pub fn new(policy: Policy, approver: Box<dyn Approver>) -> Approvals {
        Approvals { policy: Mutex::new(policy), approver }
    }

    /// The policy of the config's `[approval]` tables (the user's, tightened by the
    /// workspace's), and the warnings about workspace settings that were ignored.
    pub fn from_config(config: &Config, approver: Box<dyn Approver>) -> anyhow::Result<(Approvals, Vec<String>)> {
        let load = |src: &Option<(toml::Table, std::path::PathBuf)>| -> anyhow::Result<Option<PolicyConfig>> {
            match src {
                None => Ok(None),
                Some((table, path)) => PolicyConfig::from_table(table.clone())
                    .map(Some)
                    .map_err(|e| anyhow::anyhow!("invalid [approval] in {}: {e}", path.display())),
            }
        };
        let (policy, warnings) = Policy::layered(load(&config.approval.user)?, load(&config.approval.workspace)?)
            .map_err(|e| anyhow::anyhow!("invalid approval policy: {e}"))?;
        Ok((Approvals::new(policy, approver), warnings))
    }

    /// Re-learn the "always" answers the operator gave earlier in `session` (they are in its
    /// approval events), so they hold across `abhed tool --session` calls and a resumed run.
    pub fn restore(&self, session: &Session<'_>) -> anyhow::Result<usize> {
        let mut n = 0;
        for ev in session.events()?.iter().filter(|e| e.kind == EventKind::Approval.as_str()) {
            let p = &ev.payload;
            if p["tool"] == "bash"
                && p["answer"] == "always"
                && p["decision"] == "allowed"
                && let Some(cmd) = p["subject"].as_str()
            {
                self.remember(cmd);
                n += 1;
            }
        }
        Ok(n)
    }

    fn check_command(&self, command: &str) -> Verdict {
        match self.policy.lock() {
            Ok(p) => p.check_command(command),
            Err(p) => p.into_inner().check_command(command),
        }
    }

    fn check_path(&self, path: &Path) -> Verdict {
        match self.policy.lock() {
            Ok(p) => p.check_path(path),
            Err(p) => p.into_inner().check_path(path),
        }
    }

    fn exec_policy(&self, verdict: &Verdict, confirmed: bool) -> abhed_guest::policy::ExecPolicy {
        match self.policy.lock() {
            Ok(p) => p.exec_policy(verdict, confirmed),
            Err(p) => p.into_inner().exec_policy(verdict, confirmed),
        }
    }

    fn remember(&self, command: &str) {
        if let Ok(mut p) = self.policy.lock() {
            p.remember(command);
        }
    }
}

/// Check a bash command line. `Ok` means run it, with the rules its execs are held to.
pub fn command(
    ctx: &ToolContext<'_>,
    description: &str,
    command: &str,
) -> Result<abhed_guest::policy::ExecPolicy, ToolFailure> {
    let verdict = ctx.approvals.check_command(command);
    if let Some(guidance) = &verdict.interactive {
        record(ctx, "bash", command, &verdict, "rejected", "interactive", None)?;
        return Err(ToolError::new(
            ErrorCode::InteractiveCommand,
            format!(
                "the command was not run: it needs a terminal, and bash has none (it would wait forever). {guidance}"
            ),
        )
        .into());
    }
    let by_operator = decide(ctx, "bash", description, command, &verdict, true)?;
    let remembered = verdict.reasons.iter().any(|r| r.kind == ReasonKind::Remembered);
    Ok(ctx.approvals.exec_policy(&verdict, by_operator || remembered))
}

/// Check a write or edit of a path, as the model named it (`shown`) and with its symlinks
/// resolved (`real`): a rule on either applies, so a link cannot lead around a rule. Abhed's own
/// files (the config's [`crate::boundary::Boundary`]) are refused first, whatever the policy,
/// the roots and the operator say.
pub fn path(ctx: &ToolContext<'_>, tool: &str, shown: &Path, real: &Path) -> Result<(), ToolFailure> {
    if let Some(item) = [shown, real].into_iter().find_map(|p| ctx.config.boundary.guarding(p)) {
        let subject = shown.display().to_string();
        let message = format!(
            "writing `{subject}` is refused: it is {} ({}), and {}. No tool may write it, whatever the approval policy and the workspace roots say. Leave it alone; if it must change, tell the operator.",
            item.what,
            item.path.display(),
            item.why
        );
        let verdict = Verdict {
            decision: Decision::Deny,
            reasons: vec![Reason {
                command: subject.clone(),
                kind: ReasonKind::Protected(item.path.display().to_string()),
                decision: Decision::Deny,
                message: message.clone(),
            }],
            commands: vec![subject.clone()],
            interactive: None,
        };
        record(ctx, tool, &subject, &verdict, "denied", "boundary", None)?;
        return Err(ToolError::new(
            ErrorCode::ApprovalDenied,
            format!("the {tool} call was not run ({subject}). {message}"),
        )
        .into());
    }
    let mut verdict = ctx.approvals.check_path(shown);
    if real != shown {
        let other = ctx.approvals.check_path(real);
        if other.decision > verdict.decision {
            verdict = other;
        }
    }
    let shown = shown.display().to_string();
    let description = format!("{tool} {shown}");
    decide(ctx, tool, &description, &shown, &verdict, false).map(|_| ())
}

fn decide(
    ctx: &ToolContext<'_>,
    tool: &str,
    description: &str,
    subject: &str,
    verdict: &Verdict,
    may_remember: bool,
) -> Result<bool, ToolFailure> {
    match verdict.decision {
        Decision::Allow => record(ctx, tool, subject, verdict, "allowed", "policy", None).map(|_| false),
        Decision::Deny => {
            record(ctx, tool, subject, verdict, "denied", "policy", None)?;
            Err(denied(tool, subject, verdict, "The approval policy denies it").into())
        }
        Decision::Ask => {
            let destructive = verdict.reasons.iter().any(|r| r.kind == ReasonKind::Destructive);
            let q = Question {
                tool,
                description,
                subject,
                reasons: &verdict.reasons,
                offer_always: may_remember && !destructive,
            };
            match ctx.approvals.approver.ask(&q) {
                Some(answer @ (Answer::Once | Answer::Always)) => {
                    if answer == Answer::Always && q.offer_always {
                        ctx.approvals.remember(subject);
                    }
                    record(ctx, tool, subject, verdict, "allowed", "operator", Some(answer)).map(|_| true)
                }
                Some(Answer::Deny) => {
                    record(ctx, tool, subject, verdict, "denied", "operator", Some(Answer::Deny))?;
                    Err(ToolError::new(
                        ErrorCode::ApprovalDenied,
                        format!(
                            "the operator declined this {tool} call ({subject}). Do not retry it as it is: choose another way to reach the goal, or finish and explain what you would have needed."
                        ),
                    )
                    .into())
                }
                None => {
                    record(ctx, tool, subject, verdict, "denied", "no_operator", None)?;
                    Err(denied(
                        tool,
                        subject,
                        verdict,
                        "Nobody can answer an approval prompt in this run (it has no terminal)",
                    )
                    .into())
                }
            }
        }
    }
}

/// After a bash call that deleted more files than the policy lets one call delete, or files
/// git tracks: ask the operator whether to keep what it did. `true`: keep. With nobody to ask,
/// or a "no", the caller undoes the call's changes. The answer is an approval event.
pub fn keep_deletions(
    ctx: &ToolContext<'_>,
    command: &str,
    deleted: &[String],
    tracked: &[String],
) -> Result<bool, ToolFailure> {
    let max = max_deletions(ctx);
    if deleted.len() <= max as usize && tracked.is_empty() {
        return Ok(true);
    }
    let listed: Vec<&str> = tracked.iter().chain(deleted).map(String::as_str).take(10).collect();
    let subject = format!(
        "`{command}` deleted {} ({} tracked by git), among them: {}",
        crate::tools::plural(deleted.len() as u64, "file", "files"),
        tracked.len(),
        listed.join(", ")
    );
    let q = Question {
        tool: "bash",
        description: "keep what this command deleted?",
        subject: &subject,
        reasons: &[],
        offer_always: false,
    };
    let answer = ctx.approvals.approver.ask(&q);
    let (decision, by) = match answer {
        Some(Answer::Once | Answer::Always) => ("allowed", "operator"),
        Some(Answer::Deny) => ("denied", "operator"),
        None => ("denied", "no_operator"),
    };
    let payload = json!({
        "tool": "bash", "subject": subject, "decision": decision, "by": by, "answer": answer,
        "deleted": deleted.len(), "tracked": tracked.len(), "max_deletions": max,
    });
    ctx.session
        .append(EventKind::Approval, &payload)
        .map_err(|e| ToolFailure::Internal(e.context("cannot record the approval decision")))?;
    Ok(decision == "allowed")
}

/// Files one bash call may delete without asking (`approval.max_deletions`).
pub fn max_deletions(ctx: &ToolContext<'_>) -> u32 {
    match ctx.approvals.policy.lock() {
        Ok(p) => p.max_deletions(),
        Err(p) => p.into_inner().max_deletions(),
    }
}

/// In plan mode, put the saved plan to the operator. `Some(true)`: accepted (plan mode ends),
/// `Some(false)`: declined, `None`: nobody can answer in this run. The answer is an event.
pub fn plan_acceptance(ctx: &ToolContext<'_>, rendered: &str, version: u32) -> Result<Option<bool>, ToolFailure> {
    let q = Question {
        tool: "plan",
        description: "accept this plan? (plan mode)",
        subject: rendered,
        reasons: &[],
        offer_always: false,
    };
    let answer = ctx.approvals.approver.ask(&q);
    record_plan_answer(ctx.session, version, answer, None).map_err(ToolFailure::Internal)?;
    Ok(answer.map(|a| a != Answer::Deny))
}

/// The operator's answer on plan `version` as an approval event; `via` names a way of answering
/// other than the prompt (`--accept-plan`).
pub fn record_plan_answer(
    session: &Session<'_>,
    version: u32,
    answer: Option<Answer>,
    via: Option<&str>,
) -> anyhow::Result<()> {
    let (decision, by) = match answer {
        Some(Answer::Once | Answer::Always) => ("allowed", "operator"),
        Some(Answer::Deny) => ("denied", "operator"),
        None => ("pending", "no_operator"),
    };
    let mut payload = json!({
        "tool": "plan", "subject": format!("plan version {version}"), "decision": decision, "by": by, "answer": answer,
    });
    if let Some(via) = via {
        payload["via"] = json!(via);
    }
    session
        .append(EventKind::Approval, &payload)
        .map(|_| ())
        .map_err(|e| e.context("cannot record the plan's approval"))
}

/// The model-facing refusal: what was refused, and the reasons that decided it (each says what
/// to do instead).
fn denied(tool: &str, subject: &str, verdict: &Verdict, why: &str) -> ToolError {
    ToolError::new(
        ErrorCode::ApprovalDenied,
        format!("the {tool} call was not run ({subject}). {why}:\n{}", verdict.message()),
    )
}

fn record(
    ctx: &ToolContext<'_>,
    tool: &str,
    subject: &str,
    verdict: &Verdict,
    decision: &str,
    by: &str,
    answer: Option<Answer>,
) -> Result<(), ToolFailure> {
    let payload = json!({
        "tool": tool,
        "subject": subject,
        "decision": decision,
        "by": by,
        "answer": answer,
        "policy_decision": verdict.decision,
        "commands": verdict.commands,
        "reasons": verdict.reasons,
    });
    ctx.session
        .append(EventKind::Approval, &payload)
        .map(|_| ())
        .map_err(|e| ToolFailure::Internal(e.context("cannot record the approval decision")))
}
