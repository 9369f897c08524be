//! The workspace checkpoints around a call that may change it ([`crate::undo`]), recorded in
//! the call's observation, and the question a bash call's deletions put to the operator: one
//! call that deletes more files than `approval.max_deletions`, or any file git tracks, keeps
//! its changes only when the operator says so; else they are undone at once and the model is
//! told. (The exec check cannot see a deletion done by a program's own code, `python3 -c
//! 'shutil.rmtree(...)'`; the checkpoint sees its result.)

use std::collections::HashSet;
use std::time::Instant;

use serde_json::{Value, json};

use crate::approval::gate;
use crate::tools::{ToolContext, ToolFailure, ToolOutput};
use crate::undo::{self, Before, Change, Entry, Objects, Report};

/// The checkpoint taken before a call: `None` for a tool that changes nothing.
pub(super) struct Pending {
    before: Option<Result<Option<Before>, String>>,
    ms: u64,
}

/// Read the workspace before `tool` runs, when it may change it.
pub(super) fn before(ctx: &ToolContext<'_>, tool: &str) -> Pending {
    let start = Instant::now();
    let before = undo::may_change(tool).then(|| undo::before_call(ctx));
    Pending { before, ms: start.elapsed().as_millis() as u64 }
}

/// After the call: the fields its observation event gains (`workspace_changes`,
/// `checkpoint_ms`, `checkpoint_error`, `deletions_undone`), and, for a bash call whose
/// deletions were not confirmed, its changes undone and the result told so.
pub(super) fn after(
    ctx: &ToolContext<'_>,
    tool: &str,
    arguments: &Value,
    pending: Pending,
    result: &mut Result<ToolOutput, ToolFailure>,
) -> Result<Option<Value>, ToolFailure> {
    let Some(before) = pending.before else { return Ok(None) };
    let start = Instant::now();
    let mut fields = json!({});
    match before {
        Ok(None) => return Ok(None),
        Err(e) => fields["checkpoint_error"] = json!(e),
        Ok(Some(before)) => match undo::after_call(ctx, &before) {
            Ok(Some(recorded)) => {
                if tool == "bash" {
                    let command = arguments["command"].as_str().unwrap_or_default();
                    if let Some(undone) = deletions(ctx, command, &recorded.changes, &before, result)? {
                        fields["deletions_undone"] = undone;
                    }
                }
                fields["workspace_changes"] = recorded.record;
            }
            Ok(None) => {}
            Err(e) => fields["checkpoint_error"] = json!(e),
        },
    }
    fields["checkpoint_ms"] = json!(pending.ms + start.elapsed().as_millis() as u64);
    Ok(Some(fields))
}

/// Ask about a bash call's deletions when they need it; undo the call's changes when they are
/// not kept, and tell the model. The record of what the undo did, when it ran.
fn deletions(
    ctx: &ToolContext<'_>,
    command: &str,
    changes: &[Change],
    before: &Before,
    result: &mut Result<ToolOutput, ToolFailure>,
) -> Result<Option<Value>, ToolFailure> {
    let deleted: Vec<String> = changes
        .iter()
        .filter(|c| matches!(c.before, Some(Entry::File { .. } | Entry::Symlink { .. })) && c.after.is_none())
        .map(|c| c.path.clone())
        .collect();
    if deleted.is_empty() {
        return Ok(None);
    }
    // Read only now that something was deleted: the index may be megabytes, and most calls
    // delete nothing. An index that cannot be read: every deleted file counts as tracked.
    let tracked: Vec<String> = match before.tracked(ctx) {
        Some(t) => {
            let t: HashSet<String> = t.into_iter().collect();
            deleted.iter().filter(|p| t.contains(*p)).cloned().collect()
        }
        None => deleted.clone(),
    };
    if gate::keep_deletions(ctx, command, &deleted, &tracked)? {
        return Ok(None);
    }
    let objects = Objects::beside(ctx.session.store_path());
    let mut report = Report::default();
    undo::undo_changes(ctx.workspace, &objects, changes, false, &mut report);
    let max = gate::max_deletions(ctx);
    let mut note = format!(
        "[abhed: this command deleted {}{}; one call may delete at most {max} files, and no file git tracks, unless the operator confirms it, and it was not confirmed. So everything the command changed in the workspace was undone: {} put back, {} removed.",
        crate::tools::plural(deleted.len() as u64, "file", "files"),
        if tracked.is_empty() { String::new() } else { format!(", {} of them tracked by git", tracked.len()) },
        report.restored.len(),
        report.removed.len(),
    );
    let left: Vec<&String> = report.conflicts.iter().chain(&report.failed).map(|(p, _)| p).collect();
    if !left.is_empty() {
        note.push_str(&format!(
            " Not undone (changed again while it ran, or unreachable): {}.",
            left.iter().take(10).map(|p| p.as_str()).collect::<Vec<_>>().join(", ")
        ));
    }
    note.push_str(
        " Delete fewer files in one call, leave tracked files to the operator, or ask the operator to do it.]",
    );
    match result {
        Ok(out) => {
            out.text.push_str(&format!("\n{note}"));
            out.fell_short = true;
            out.mutated = !left.is_empty();
        }
        Err(ToolFailure::Model(e)) => {
            e.message.push_str(&format!("\n{note}"));
            e.mutated = !left.is_empty();
        }
        Err(ToolFailure::Internal(_)) => {}
    }
    Ok(Some(json!({
        "restored": report.restored.len(),
        "removed": report.removed.len(),
        "not_undone": left,
    })))
}
