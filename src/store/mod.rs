//! The session store: one SQLite database (WAL) holding sessions, their append-only event log
//! and their read-tracking state.
//!
//! Every event carries the hash of the one before it, so the log is tamper-evident: the hash
//! of event `n` is `sha256(prev_hash "\n" session "\n" seq "\n" kind "\n" ts "\n" payload)`, and
//! the first event's `prev_hash` is 64 zeros.

mod reads;
mod reports;
mod state;

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, Result, bail};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

pub use reads::ReadRecord;
pub use reports::StoredReport;

/// The schema version this build writes (`PRAGMA user_version`).
const SCHEMA_VERSION: i64 = 4;

const SCHEMA: &str = "
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
";

const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The kinds of event in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// A run began: the model, its identity, the budgets.
    RunStart,
    /// The operator's task (or a follow-up on resume).
    Task,
    /// One model turn: the raw reply, what it parsed to, the token accounting.
    ModelTurn,
    /// A tool call, committed before the tool runs.
    Action,
    /// The result of a tool call, committed after it ran.
    Observation,
    /// A run ended, with its stop reason.
    RunEnd,
    /// An approval decision on a tool call: by the policy or the operator, allowed or denied.
    Approval,
    /// Older turns were replaced, in the prompt, by a summary (the log keeps them).
    Compaction,
}

impl EventKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::RunStart => "run_start",
            EventKind::Task => "task",
            EventKind::ModelTurn => "model_turn",
            EventKind::Action => "action",
            EventKind::Observation => "observation",
            EventKind::RunEnd => "run_end",
            EventKind::Approval => "approval",
            EventKind::Compaction => "compaction",
        }
    }
}

/// One line of `abhed sessions list`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionSummary {
    pub id: String,
    pub created_at: String,
    pub workspace: String,
    pub events: i64,
    /// The first task's text.
    pub task: Option<String>,
    /// The last run's stop reason; `None` when no run ended (still running, or killed).
    pub stop_reason: Option<String>,
    /// For a subagent's session: the session that spawned it.
    pub parent: Option<String>,
}

/// An event as committed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoredEvent {
    pub session: String,
    pub seq: i64,
    pub kind: String,
    pub ts: String,
    pub payload: Value,
    pub prev_hash: String,
    pub hash: String,
}

pub struct Store {
    conn: Connection,
    path: PathBuf,
}

impl Store {
    /// Where the database lives: `$ABHED_HOME/abhed.db`, else `$XDG_DATA_HOME/abhed/abhed.db`,
    /// else `~/.local/share/abhed/abhed.db`.
    pub fn default_path() -> Result<PathBuf> {
        let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
        let dir = if let Some(home) = env("ABHED_HOME") {
            home
        } else if let Some(xdg) = env("XDG_DATA_HOME") {
            xdg.join("abhed")
        } else if let Some(home) = env("HOME") {
            home.join(".local/share/abhed")
        } else {
            bail!("cannot place the session store: set ABHED_HOME (or XDG_DATA_HOME or HOME)");
        };
        Ok(dir.join("abhed.db"))
    }

    /// Open (creating if needed) the store at `path`.
    pub fn open(path: &Path) -> Result<Store> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create the store directory {}", dir.display()))?;
        }
        let conn =
            Connection::open(path).with_context(|| format!("cannot open the session store {}", path.display()))?;
        // Several `abhed` processes may share one session: wait for the lock instead of failing.
        conn.busy_timeout(std::time::Duration::from_secs(10))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        // An action must survive a crash of the machine, not just of the process.
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
        if version > SCHEMA_VERSION {
            bail!(
                "the session store {} was written by a newer abhed (schema {version}, this build knows {SCHEMA_VERSION}); use that version or point ABHED_HOME elsewhere",
                path.display()
            );
        }
        conn.execute_batch(SCHEMA)
            .with_context(|| format!("cannot initialise the session store {}", path.display()))?;
        conn.pragma_update(None, "user_version", SCHEMA_VERSION)?;
        Ok(Store { conn, path: path.to_path_buf() })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Start a new session for `workspace`.
    pub fn create_session(&self, workspace: &Path) -> Result<Session<'_>> {
        self.insert_session(workspace, None)
    }

    /// Start the session of a subagent spawned by session `parent`.
    pub fn create_child_session(&self, workspace: &Path, parent: &str) -> Result<Session<'_>> {
        self.insert_session(workspace, Some(parent))
    }

    fn insert_session(&self, workspace: &Path, parent: Option<&str>) -> Result<Session<'_>> {
        let id = new_session_id();
        self.conn
            .execute(
                "INSERT INTO sessions (id, created_at, workspace, parent_id) VALUES (?1, ?2, ?3, ?4)",
                params![id, now_rfc3339(), workspace.display().to_string(), parent],
            )
            .context("cannot create a session")?;
        Ok(Session { store: self, id, workspace: workspace.to_path_buf() })
    }

    /// Every session, newest first.
    pub fn sessions(&self) -> Result<Vec<SessionSummary>> {
        let mut stmt = self.conn.prepare(
            "SELECT s.id, s.created_at, s.workspace,
                    (SELECT COUNT(*) FROM events e WHERE e.session_id = s.id),
                    (SELECT payload FROM events e WHERE e.session_id = s.id AND e.kind = 'task' ORDER BY seq LIMIT 1),
                    (SELECT payload FROM events e WHERE e.session_id = s.id ORDER BY seq DESC LIMIT 1),
                    s.parent_id
             FROM sessions s ORDER BY s.created_at DESC, s.id DESC",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, i64>(3)?,
                r.get::<_, Option<String>>(4)?,
                r.get::<_, Option<String>>(5)?,
                r.get::<_, Option<String>>(6)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (id, created_at, workspace, events, task, last, parent) = row?;
            let field = |text: Option<String>, key: &str| {
                text.and_then(|t| serde_json::from_str::<Value>(&t).ok())
                    .and_then(|v| v.get(key).and_then(Value::as_str).map(str::to_string))
            };
            out.push(SessionSummary {
                id,
                created_at,
                workspace,
                events,
                task: field(task, "text"),
                stop_reason: field(last, "reason"),
                parent,
            });
        }
        Ok(out)
    }

    /// The sha256 remembered for a file with this size and mtime, if any.
    pub fn file_hash(&self, path: &Path, size: u64, mtime_ns: i64) -> Result<Option<String>> {
        Ok(self
            .conn
            .query_row(
                "SELECT sha256 FROM file_hashes WHERE path = ?1 AND size = ?2 AND mtime_ns = ?3",
                params![path.display().to_string(), size as i64, mtime_ns],
                |r| r.get(0),
            )
            .optional()?)
    }

    pub fn record_file_hash(&self, path: &Path, size: u64, mtime_ns: i64, sha256: &str) -> Result<()> {
        self.conn.execute(
            "INSERT OR REPLACE INTO file_hashes (path, size, mtime_ns, sha256) VALUES (?1, ?2, ?3, ?4)",
            params![path.display().to_string(), size as i64, mtime_ns, sha256],
        )?;
        Ok(())
    }

    /// An existing session, or `None` when there is no session with that id.
    pub fn open_session(&self, id: &str) -> Result<Option<Session<'_>>> {
        let ws: Option<String> =
            self.conn.query_row("SELECT workspace FROM sessions WHERE id = ?1", [id], |r| r.get(0)).optional()?;
        Ok(ws.map(|w| Session { store: self, id: id.to_string(), workspace: PathBuf::from(w) }))
    }
}

/// One session: its events and its state.
pub struct Session<'a> {
    store: &'a Store,
    id: String,
    workspace: PathBuf,
}

impl Session<'_> {
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The workspace the session was created for.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// Append an event and commit it before returning.
    pub fn append(&self, kind: EventKind, payload: &Value) -> Result<StoredEvent> {
        let payload_text = serde_json::to_string(payload)?;
        let ts = now_rfc3339();
        // IMMEDIATE takes the write lock up front, so two processes appending to one session
        // cannot both read the same last sequence number.
        let tx = rusqlite::Transaction::new_unchecked(&self.store.conn, TransactionBehavior::Immediate)?;
        let last: Option<(i64, String)> = tx
            .query_row(
                "SELECT seq, hash FROM events WHERE session_id = ?1 ORDER BY seq DESC LIMIT 1",
                [&self.id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        let (seq, prev_hash) = match last {
            Some((s, h)) => (s + 1, h),
            None => (1, GENESIS.to_string()),
        };
        let hash = chain_hash(&prev_hash, &self.id, seq, kind.as_str(), &ts, &payload_text);
        tx.execute(
            "INSERT INTO events (session_id, seq, kind, ts, payload, prev_hash, hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![self.id, seq, kind.as_str(), ts, payload_text, prev_hash, hash],
        )?;
        tx.commit().context("cannot commit an event to the session store")?;
        Ok(StoredEvent {
            session: self.id.clone(),
            seq,
            kind: kind.as_str().to_string(),
            ts,
            payload: payload.clone(),
            prev_hash,
            hash,
        })
    }

    /// Every event of the session, in order.
    pub fn events(&self) -> Result<Vec<StoredEvent>> {
        self.events_between(0, i64::MAX)
    }

    /// The events with `after < seq < before`, in order.
    pub fn events_between(&self, after: i64, before: i64) -> Result<Vec<StoredEvent>> {
        let mut stmt = self.store.conn.prepare(
            "SELECT seq, kind, ts, payload, prev_hash, hash FROM events WHERE session_id = ?1 AND seq > ?2 AND seq < ?3 ORDER BY seq",
        )?;
        let rows = stmt.query_map(rusqlite::params![&self.id, after, before], |r| {
            Ok((r.get::<_, i64>(0)?, r.get(1)?, r.get(2)?, r.get::<_, String>(3)?, r.get(4)?, r.get(5)?))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (seq, kind, ts, payload, prev_hash, hash) = row?;
            let payload =
                serde_json::from_str(&payload).with_context(|| format!("event {seq} has a corrupt payload"))?;
            out.push(StoredEvent { session: self.id.clone(), seq, kind, ts, payload, prev_hash, hash });
        }
        Ok(out)
    }

    /// How many events the session has.
    pub fn event_count(&self) -> Result<i64> {
        Ok(self.store.conn.query_row("SELECT COUNT(*) FROM events WHERE session_id = ?1", [&self.id], |r| r.get(0))?)
    }

    /// Check the hash chain. Returns the sequence number of the first event that does not
    /// verify, or `None` when the whole log is intact.
    pub fn verify_chain(&self) -> Result<Option<i64>> {
        let mut stmt = self
            .store
            .conn
            .prepare("SELECT seq, kind, ts, payload, prev_hash, hash FROM events WHERE session_id = ?1 ORDER BY seq")?;
        let mut rows = stmt.query([&self.id])?;
        let mut prev = GENESIS.to_string();
        while let Some(r) = rows.next()? {
            let (seq, kind, ts, payload, prev_hash, hash): (i64, String, String, String, String, String) =
                (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?);
            if prev_hash != prev || chain_hash(&prev, &self.id, seq, &kind, &ts, &payload) != hash {
                return Ok(Some(seq));
            }
            prev = hash;
        }
        Ok(None)
    }

    /// The store file this session lives in (a subagent's thread opens its own connection).
    pub fn store_path(&self) -> &Path {
        self.store.path()
    }

    pub(crate) fn conn(&self) -> &Connection {
        &self.store.conn
    }
}

fn chain_hash(prev: &str, session: &str, seq: i64, kind: &str, ts: &str, payload: &str) -> String {
    let mut h = Sha256::new();
    for part in [prev, session, &seq.to_string(), kind, ts, payload] {
        h.update(part.as_bytes());
        h.update(b"\n");
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// Now as RFC 3339 UTC with milliseconds.
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

/// `YYYYMMDD-HHMMSS-xxxxxxxx`: sortable by creation time, unique across processes.
fn new_session_id() -> String {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let mut h = Sha256::new();
    h.update(now.as_nanos().to_le_bytes());
    h.update(std::process::id().to_le_bytes());
    // Stack address: differs between threads creating sessions in the same nanosecond.
    let local = 0u8;
    h.update((&local as *const u8 as usize).to_le_bytes());
    let tag: String = h.finalize()[..4].iter().map(|b| format!("{b:02x}")).collect();
    let stamp = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    // 2026-12-02T13:22:15Z -> 20261202-132215
    let digits: String = stamp.chars().filter(char::is_ascii_digit).collect();
    format!("{}-{}-{tag}", &digits[..8], &digits[8..14])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_chain_and_verify() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.db")).unwrap();
        let s = store.create_session(dir.path()).unwrap();
        let a = s.append(EventKind::Action, &serde_json::json!({"tool": "read"})).unwrap();
        let b = s.append(EventKind::Observation, &serde_json::json!({"ok": true})).unwrap();
        assert_eq!((a.seq, b.seq), (1, 2));
        assert_eq!(b.prev_hash, a.hash);
        assert_eq!(s.verify_chain().unwrap(), None);
        store.conn.execute("UPDATE events SET payload = '{\"ok\":false}' WHERE seq = 2", []).unwrap();
        assert_eq!(s.verify_chain().unwrap(), Some(2));
    }

    #[test]
    fn session_ids_are_unique_and_shaped() {
        let a = new_session_id();
        let b = new_session_id();
        assert_ne!(a, b);
        assert_eq!(a.len(), "20261202-132215-3fa9c2d1".len(), "{a}");
    }
}
