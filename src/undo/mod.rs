//! Checkpoints of the workspace around every call that may change it, so that `abhed undo`
//! puts back what a session's calls did: write's and edit's changes, and bash's, which run in
//! the microVM on the shared workspace and which no peer's checkpoint covers.
//!
//! Before such a call the workspace is read ([`tree::scan`]): each file's content is kept once,
//! by its sha256, beside the session store ([`Objects`]), and a file whose size, mode, mtime
//! and inode are as the last scan saw them is not read again. After the call it is read again,
//! and the paths that differ are the call's changes, recorded in its observation event
//! (`workspace_changes`), so the log says what each call did to the tree and an undo needs
//! nothing else. The last scan is kept in the session's sealed state, so the next call reads
//! only what changed.
//!
//! What a checkpoint does not keep is listed, never silently dropped: folders a build makes
//! again (`node_modules`, `target`, `dist`, `__pycache__`), a file over a quarter of
//! `sandbox.checkpoint_mib`, content past that budget in one scan, names that are not UTF-8,
//! FIFOs, sockets and devices.

pub mod git_index;
pub mod objects;
pub mod restore;
pub mod tree;

use serde_json::{Value, json};

pub use objects::Objects;
pub use restore::{Report, undo_changes};
pub use tree::{Change, Entry, Limits, Tree};

use crate::tools::ToolContext;

/// The session state key of the last scan.
const STATE_KEY: &str = "checkpoint";
/// Paths a call's record lists of what the checkpoint left out.
const MAX_SKIPPED_LISTED: usize = 20;

/// The tree before a call, when checkpoints are on and the scan could be saved.
pub struct Before {
    tree: Tree,
    /// What the scan left out, and why.
    skipped: tree::Skipped,
}

fn limits(ctx: &ToolContext<'_>) -> Option<Limits> {
    let mib = ctx.config.sandbox.checkpoint_mib;
    (mib > 0).then(|| Limits { max_file_bytes: mib * 1024 * 1024 / 4, max_new_bytes: mib * 1024 * 1024 })
}

/// Read the workspace before a call that may change it. `None` when checkpoints are off, or
/// the session's last scan cannot be had (the reason is in the call's record then).
pub fn before_call(ctx: &ToolContext<'_>) -> Result<Option<Before>, String> {
    let Some(limits) = limits(ctx) else { return Ok(None) };
    let prev: Tree = match ctx.session.state(STATE_KEY) {
        Ok(Some(v)) => serde_json::from_value(v).unwrap_or_default(),
        Ok(None) => Tree::new(),
        Err(e) => return Err(format!("{e:#}")),
    };
    let objects = Objects::beside(ctx.session.store_path());
    let (tree, skipped) = tree::scan(ctx.workspace, &prev, &objects, limits);
    Ok(Some(Before { tree, skipped }))
}

/// What a call changed, and its record for the observation event.
pub struct Recorded {
    pub changes: Vec<Change>,
    pub record: Value,
}

impl Before {
    /// The files git tracked before the call (absolute paths), from the index of every
    /// repository in the workspace (each `.git/index` the scan kept: a workspace may hold
    /// several); `None` when an index is there but cannot be read (too big to keep, or a
    /// format this does not read).
    pub fn tracked(&self, ctx: &ToolContext<'_>) -> Option<Vec<String>> {
        let objects = Objects::beside(ctx.session.store_path());
        let mut out = Vec::new();
        for (path, entry) in &self.tree {
            let Some(top) = path.strip_suffix("/.git/index") else { continue };
            let Entry::File { sha, .. } = entry else { continue };
            let bytes = objects.get(sha.as_ref()?).ok()?;
            out.extend(git_index::tracked(&bytes)?.into_iter().map(|p| format!("{top}/{p}")));
        }
        Some(out)
    }
}

/// Read the workspace again after the call, save the scan for the next one, and give what the
/// call changed, when it changed anything.
pub fn after_call(ctx: &ToolContext<'_>, before: &Before) -> Result<Option<Recorded>, String> {
    let Some(limits) = limits(ctx) else { return Ok(None) };
    let objects = Objects::beside(ctx.session.store_path());
    let (after, _) = tree::scan(ctx.workspace, &before.tree, &objects, limits);
    let changes = tree::diff(&before.tree, &after);
    let saved = serde_json::to_value(&after).map_err(|e| e.to_string())?;
    ctx.session.set_state(STATE_KEY, &saved).map_err(|e| format!("{e:#}"))?;
    if changes.is_empty() {
        return Ok(None);
    }
    let mut record = json!({ "changes": &changes });
    // What the call changed whose earlier content was not kept: an undo cannot put it back.
    let not_kept: Vec<Value> = changes
        .iter()
        .filter(|c| matches!(c.before, Some(Entry::File { sha: None, .. })))
        .take(MAX_SKIPPED_LISTED)
        .map(|c| {
            let why = before.skipped.iter().find(|(p, _)| *p == c.path).map_or("not kept", |(_, w)| w.as_str());
            json!({"path": c.path, "why": why})
        })
        .collect();
    if !not_kept.is_empty() {
        record["not_kept"] = json!(not_kept);
    }
    Ok(Some(Recorded { changes, record }))
}

/// The tools whose calls may change the workspace.
pub fn may_change(tool: &str) -> bool {
    matches!(tool, "write" | "edit" | "bash")
}
