//! The session store: one SQLite database (WAL) holding sessions, their append-only event log
//! and their state (read-tracking, plan and todo list), conformance reports and a cache of model
//! file hashes.
//!
//! The store has a key (`key.rs`: a 0600 file beside the database) that chains the event log
//! (`chain.rs`: HMAC-SHA256, so a log changed without the key does not verify) and seals the
//! rows that decide something (`seal.rs`). The schema and its migrations are in `migrate.rs`.

mod chain;
mod file_hashes;
mod key;
mod migrate;
mod reads;
mod reports;
mod seal;
mod state;

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, Result, anyhow, bail};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

pub use chain::{ChainCheck, Head, Verdict};
pub use key::key_path;
pub use reads::ReadRecord;
pub use reports::{ReportKind, StoredReport};
pub use seal::Anchor;

use key::Key;

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
    /// The operator undid calls' changes to the workspace (`abhed undo`).
    Undo,
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
            EventKind::Undo => "undo",
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
    key: KeyState,
}

/// The store's key as found when it was opened. A store whose key cannot be used can still be
/// listed and exported, but nothing in it is verified, trusted or added to.
enum KeyState {
    Ready(Key),
    Unusable(String),
}

impl Store {
    /// Where the database lives: `$ABHED_HOME/abhed.db`, else `$XDG_DATA_HOME/abhed/abhed.db`,
    /// else `~/.local/share/abhed/abhed.db`. Its key is beside it ([`key_path`]).
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

    /// Open (creating if needed) the store at `path`, migrating an older one. A new store, or
    /// one written before stores had keys, gets its key here.
    pub fn open(path: &Path) -> Result<Store> {
        Store::open_inner(path).map_err(|e| explain(path, e))
    }

    fn open_inner(path: &Path) -> Result<Store> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create the store directory {}", dir.display()))?;
        }
        let mut conn = Connection::open(path)?;
        // Several `abhed` processes may share one session: wait for the lock instead of failing.
        conn.busy_timeout(std::time::Duration::from_secs(10))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        // An action must survive a crash of the machine, not just of the process.
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
        if version > migrate::SCHEMA_VERSION {
            bail!(
                "the session store {} was written by a newer abhed (schema {version}, this build knows {}); use that version or point ABHED_HOME elsewhere",
                path.display(),
                migrate::SCHEMA_VERSION
            );
        }
        let kp = key_path(path);
        if version < migrate::SCHEMA_VERSION {
            let key = match Key::load(&kp)? {
                Some(k) => k,
                None => Key::create(&kp)?,
            };
            migrate::upgrade(&mut conn, &key)?;
        }
        let key = key_state(&conn, path, &kp)?;
        Ok(Store { conn, path: path.to_path_buf(), key })
    }

    /// The store's key, or why it cannot be used.
    fn key(&self) -> Result<&Key> {
        match &self.key {
            KeyState::Ready(k) => Ok(k),
            KeyState::Unusable(why) => Err(anyhow!("{why}")),
        }
    }

    /// When the store got its key (the migration to schema 5, or its creation).
    pub fn keyed_at(&self) -> Result<Option<String>> {
        Ok(self.conn.query_row("SELECT value FROM store_meta WHERE name = 'keyed_at'", [], |r| r.get(0)).optional()?)
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
        let key = self.key()?;
        let id = new_session_id();
        let tx = rusqlite::Transaction::new_unchecked(&self.conn, TransactionBehavior::Immediate)?;
        tx.execute(
            "INSERT INTO sessions (id, created_at, workspace, parent_id) VALUES (?1, ?2, ?3, ?4)",
            params![id, now_rfc3339(), workspace.display().to_string(), parent],
        )?;
        seal::reseal_session(&tx, key, &id)?;
        seal::seal_head(&tx, key, &id, 0, chain::GENESIS)?;
        tx.commit().map_err(|e| explain(&self.path, e.into())).context("cannot create a session")?;
        Ok(Session { store: self, id, workspace: workspace.to_path_buf() })
    }

    /// Every session, newest first.
    pub fn sessions(&self) -> Result<Vec<SessionSummary>> {
        self.sessions_inner().map_err(|e| explain(&self.path, e))
    }

    fn sessions_inner(&self) -> Result<Vec<SessionSummary>> {
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

    /// An existing session, or `None` when there is no session with that id. Its record (the
    /// workspace, the parent, its plan and todo state) must match its seal: a session changed
    /// outside abhed is an error, never a session to work in.
    pub fn open_session(&self, id: &str) -> Result<Option<Session<'_>>> {
        let Some(s) = self.session_unchecked(id)? else { return Ok(None) };
        if !seal::session_ok(&self.conn, self.key()?, id)? {
            bail!(
                "session {id} in {} does not verify: its record (workspace, parent, plan, todo list or plan mode) was changed outside abhed, so it is not used. `abhed sessions verify {id}` says more",
                self.path.display()
            );
        }
        Ok(Some(s))
    }

    /// An existing session, unchecked: for `sessions verify`, `show` and `export`, which must
    /// report on a damaged one.
    pub fn session_unchecked(&self, id: &str) -> Result<Option<Session<'_>>> {
        let ws: Option<String> = self
            .conn
            .query_row("SELECT workspace FROM sessions WHERE id = ?1", [id], |r| r.get(0))
            .optional()
            .map_err(|e| explain(&self.path, e.into()))?;
        Ok(ws.map(|w| Session { store: self, id: id.to_string(), workspace: PathBuf::from(w) }))
    }
}

/// The key state of an opened store: its recorded key id against the key file.
fn key_state(conn: &Connection, db: &Path, kp: &Path) -> Result<KeyState> {
    let recorded: Option<String> =
        conn.query_row("SELECT value FROM store_meta WHERE name = 'key_id'", [], |r| r.get(0)).optional()?;
    let (db, kp_shown) = (db.display(), kp.display());
    let advice = format!(
        "Restore the key file from where you keep a copy; or move {db} aside (with its -wal and -shm files) and abhed starts a new store"
    );
    Ok(match (recorded, Key::load(kp)) {
        (_, Err(e)) => KeyState::Unusable(format!("{e:#}")),
        (None, _) => KeyState::Unusable(format!(
            "the session store {db} does not record which key sealed it (its store_meta table was changed outside abhed), so nothing in it can be verified. Move {db} aside to start a new store"
        )),
        (Some(id), Ok(None)) => KeyState::Unusable(format!(
            "the key of the session store {db} is missing: {kp_shown} (key {id}) does not exist, so nothing in the store can be verified or added to. {advice}"
        )),
        (Some(id), Ok(Some(k))) if k.id != id => KeyState::Unusable(format!(
            "{kp_shown} is not the key of the session store {db}: the store was sealed with key {id}, the file holds key {}, so nothing in the store can be verified or added to. {advice}",
            k.id
        )),
        (Some(_), Ok(Some(k))) => KeyState::Ready(k),
    })
}

/// An error from the store, with the file named; a file that is not a SQLite database, or a
/// damaged one, says what to do.
fn explain(path: &Path, err: anyhow::Error) -> anyhow::Error {
    let corrupt = err.chain().any(|e| {
        matches!(
            e.downcast_ref::<rusqlite::Error>(),
            Some(rusqlite::Error::SqliteFailure(f, _))
                if matches!(f.code, rusqlite::ErrorCode::NotADatabase | rusqlite::ErrorCode::DatabaseCorrupt)
        )
    });
    let p = path.display();
    if corrupt {
        anyhow!(
            "the session store {p} is not a SQLite database or is damaged ({err:#}). Move it aside (`mv {p} {p}.damaged`, and its -wal and -shm files if present) and abhed starts a new store there; what can be saved of the old one: `sqlite3 {p}.damaged .recover`"
        )
    } else if format!("{err:#}").contains(&p.to_string()) {
        err
    } else {
        err.context(format!("cannot use the session store {p}"))
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

    /// The store file this session lives in (a subagent's thread opens its own connection).
    pub fn store_path(&self) -> &Path {
        self.store.path()
    }

    pub(crate) fn conn(&self) -> &Connection {
        &self.store.conn
    }
}

/// Run `f` on one snapshot of the database: checks that read several tables (events and the
/// sealed head, a session and its state) must not see half of another process's append. Inside
/// an open transaction `f` already has one.
pub(crate) fn snapshot<T>(conn: &Connection, f: impl FnOnce() -> Result<T>) -> Result<T> {
    if !conn.is_autocommit() {
        return f();
    }
    let tx = rusqlite::Transaction::new_unchecked(conn, TransactionBehavior::Deferred)?;
    let out = f();
    // Nothing was written: ending the read transaction is all that is left.
    drop(tx);
    out
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
