//! The schema and its migrations, one step per version (`PRAGMA user_version`).
//!
//! To change the schema: bump [`SCHEMA_VERSION`], append a [`Step`] to [`STEPS`] that takes a
//! store of the version before to that version (new tables with `CREATE TABLE`, new columns with
//! `ALTER TABLE ... ADD COLUMN`), and, if its rows matter to a decision, seal them as `seal.rs`
//! does. Steps run in one transaction that re-reads the version first, so two processes opening
//! an old store at once migrate it once, and a failed step leaves it as it was.

use anyhow::{Context as _, Result};
use rusqlite::{Connection, Transaction, TransactionBehavior};

use super::key::Key;
use super::{now_rfc3339, seal};

/// The schema version this build writes.
pub(super) const SCHEMA_VERSION: i64 = 6;

/// One migration: from `version - 1` (or, for the first step, anything older) to `version`.
struct Step {
    version: i64,
    run: fn(&Transaction<'_>, &Key, i64) -> Result<()>,
}

const STEPS: &[Step] =
    &[Step { version: 4, run: base }, Step { version: 5, run: keyed }, Step { version: 6, run: eval_reports }];

/// Bring the store to [`SCHEMA_VERSION`]. `key` seals what a step must seal.
pub(super) fn upgrade(conn: &mut Connection, key: &Key) -> Result<()> {
    let tx = Transaction::new(conn, TransactionBehavior::Immediate)?;
    let from: i64 = tx.pragma_query_value(None, "user_version", |r| r.get(0))?;
    for step in STEPS.iter().filter(|s| s.version > from) {
        (step.run)(&tx, key, from).with_context(|| format!("migrating the store to schema {}", step.version))?;
    }
    tx.pragma_update(None, "user_version", SCHEMA_VERSION)?;
    tx.commit()?;
    Ok(())
}

/// Schemas 1 to 4 only ever added tables, so one idempotent script creates what is missing.
fn base(tx: &Transaction<'_>, _: &Key, _: i64) -> Result<()> {
    tx.execute_batch(
        "
CREATE TABLE IF NOT EXISTS sessions (
    id          TEXT PRIMARY KEY,
    created_at  TEXT NOT NULL,
    workspace   TEXT NOT NULL,
    parent_id   TEXT REFERENCES sessions(id)
);
CREATE TABLE IF NOT EXISTS events (
    session_id  TEXT NOT NULL REFERENCES sessions(id),
    seq         INTEGER NOT NULL,
    kind        TEXT NOT NULL,
    ts          TEXT NOT NULL,
    payload     TEXT NOT NULL,
    prev_hash   TEXT NOT NULL,
    hash        TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
);
CREATE TABLE IF NOT EXISTS reads (
    session_id  TEXT NOT NULL REFERENCES sessions(id),
    path        TEXT NOT NULL,
    sha256      TEXT NOT NULL,
    size        INTEGER NOT NULL,
    mtime_ns    INTEGER NOT NULL,
    total_lines INTEGER NOT NULL,
    lines_seen  TEXT NOT NULL,
    read_at     TEXT NOT NULL,
    PRIMARY KEY (session_id, path)
);
CREATE TABLE IF NOT EXISTS session_state (
    session_id  TEXT NOT NULL REFERENCES sessions(id),
    key         TEXT NOT NULL,
    value       TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    PRIMARY KEY (session_id, key)
);
CREATE TABLE IF NOT EXISTS conformance_reports (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    model_key    TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    suite_digest TEXT NOT NULL,
    report       TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS conformance_reports_by_model ON conformance_reports (model_key, id);
CREATE TABLE IF NOT EXISTS file_hashes (
    path        TEXT NOT NULL,
    size        INTEGER NOT NULL,
    mtime_ns    INTEGER NOT NULL,
    sha256      TEXT NOT NULL,
    PRIMARY KEY (path)
);
",
    )?;
    Ok(())
}

/// Schema 5: the store's key. New events are chained with HMAC-SHA256; the rows that decide
/// something (sessions with their plan/todo state and the head of their log, reads,
/// conformance reports, the model hash cache) carry a seal.
///
/// Events written before are not re-hashed: re-keying would vouch for whatever the log held at
/// the upgrade, forged or not, and would change hashes an operator may have recorded. Instead
/// each session's last unkeyed event is pinned by a sealed anchor; `verify` checks the events up
/// to it with the old formula and reports them as unkeyed (proven unchanged since the upgrade,
/// not since they were written), and everything after with the key.
fn keyed(tx: &Transaction<'_>, key: &Key, from: i64) -> Result<()> {
    tx.execute_batch(
        "
CREATE TABLE store_meta (
    name   TEXT PRIMARY KEY,
    value  TEXT NOT NULL
);
CREATE TABLE chain_anchors (
    session_id  TEXT PRIMARY KEY REFERENCES sessions(id),
    seq         INTEGER NOT NULL,
    hash        TEXT NOT NULL,
    keyed_at    TEXT NOT NULL,
    mac         TEXT NOT NULL
);
ALTER TABLE sessions ADD COLUMN seal TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN head_seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN head_mac TEXT NOT NULL DEFAULT '';
ALTER TABLE reads ADD COLUMN mac TEXT NOT NULL DEFAULT '';
ALTER TABLE conformance_reports ADD COLUMN mac TEXT NOT NULL DEFAULT '';
ALTER TABLE file_hashes ADD COLUMN mac TEXT NOT NULL DEFAULT '';
",
    )?;
    let keyed_at = now_rfc3339();
    for (name, value) in [("key_id", key.id.clone()), ("keyed_at", keyed_at.clone()), ("keyed_from", from.to_string())]
    {
        tx.execute("INSERT INTO store_meta (name, value) VALUES (?1, ?2)", [name, &value])?;
    }
    if from == 0 {
        return Ok(()); // a new store: nothing to seal
    }
    let sessions: Vec<String> =
        tx.prepare("SELECT id FROM sessions")?.query_map([], |r| r.get(0))?.collect::<Result<_, _>>()?;
    for id in &sessions {
        seal::anchor_legacy(tx, key, id, &keyed_at)?;
        seal::reseal_session(tx, key, id)?;
    }
    super::reads::reseal_all(tx, key)?;
    super::file_hashes::reseal_all(tx, key)?;
    super::reports::rechain_all(tx, key)?;
    Ok(())
}

/// Schema 6: the task suite's reports (`abhed eval`), chained like the conformance reports.
fn eval_reports(tx: &Transaction<'_>, _: &Key, _: i64) -> Result<()> {
    tx.execute_batch(
        "
CREATE TABLE eval_reports (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    model_key    TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    suite_digest TEXT NOT NULL,
    report       TEXT NOT NULL,
    mac          TEXT NOT NULL DEFAULT ''
);
CREATE INDEX eval_reports_by_model ON eval_reports (model_key, id);
",
    )?;
    Ok(())
}
