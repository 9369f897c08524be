//! The event log's hash chain: appending, reading back with the chain checked, and `verify`.
//!
//! An event's hash is `HMAC-SHA256(key, F("event") F(prev_hash) F(session) F(seq) F(kind) F(ts)
//! F(payload))`, where `F(x)` is x's length in bytes as 8 bytes big-endian followed by x, `seq` is
//! written in decimal, and the first event's `prev_hash` is 64 zeros. Events written before the
//! store had a key (schema 4 and older) keep their unkeyed hash,
//! `sha256(prev_hash "\n" session "\n" seq "\n" kind "\n" ts "\n" payload "\n")`, up to the
//! session's anchor (see `seal.rs`). docs/EVENTS.md says what a verified chain proves.

use anyhow::{Context as _, Result};
use rusqlite::{OptionalExtension, TransactionBehavior, params};
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest as _, Sha256};

use super::key::{Key, hex};
use super::seal::{self, Anchor, AnchorForged};
use super::{EventKind, Session, StoredEvent, explain, now_rfc3339, snapshot};

/// The `prev_hash` of a session's first event.
pub(super) const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The hash of an event written before the store had a key.
fn unkeyed_hash(prev: &str, session: &str, seq: i64, kind: &str, ts: &str, payload: &str) -> String {
    let mut h = Sha256::new();
    for part in [prev, session, &seq.to_string(), kind, ts, payload] {
        h.update(part.as_bytes());
        h.update(b"\n");
    }
    hex(&h.finalize())
}

fn event_fields<'a>(prev: &'a str, session: &'a str, seq: &'a str, row: &'a Row) -> [&'a [u8]; 6] {
    [
        prev.as_bytes(),
        session.as_bytes(),
        seq.as_bytes(),
        row.kind.as_bytes(),
        row.ts.as_bytes(),
        row.payload.as_bytes(),
    ]
}

/// One event row as stored.
struct Row {
    seq: i64,
    kind: String,
    ts: String,
    payload: String,
    prev_hash: String,
    hash: String,
}

/// The last event of a session's log: where the chain ends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Head {
    pub seq: i64,
    pub hash: String,
}

/// What `verify` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Every event, the session's record and its sealed head check out under the key.
    Intact,
    /// Evidence of a change made without the key: at event `seq` (0: the session's own record),
    /// and why.
    Broken { seq: i64, why: String },
    /// The chain could not be checked: the key is missing, damaged, or not this store's.
    Unverifiable { why: String },
}

/// The result of checking one session's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainCheck {
    pub events: i64,
    /// The last event, as stored (whatever the verdict).
    pub head: Option<Head>,
    /// Events up to this anchor were written before the store had a key: chained, unkeyed.
    pub unkeyed: Option<Anchor>,
    pub verdict: Verdict,
}

impl ChainCheck {
    pub fn intact(&self) -> bool {
        self.verdict == Verdict::Intact
    }
}

impl Session<'_> {
    /// Append an event and commit it before returning.
    pub fn append(&self, kind: EventKind, payload: &Value) -> Result<StoredEvent> {
        self.append_inner(kind, payload).map_err(|e| explain(&self.store.path, e))
    }

    fn append_inner(&self, kind: EventKind, payload: &Value) -> Result<StoredEvent> {
        let key = self.store.key()?;
        let payload_text = serde_json::to_string(payload)?;
        let ts = now_rfc3339();
        let conn = self.conn();
        // IMMEDIATE takes the write lock up front, so two processes appending to one session
        // cannot both read the same last sequence number.
        let tx = rusqlite::Transaction::new_unchecked(conn, TransactionBehavior::Immediate)?;
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
        let row =
            Row { seq, kind: kind.as_str().to_string(), ts, payload: payload_text, prev_hash, hash: String::new() };
        let seq_text = seq.to_string();
        let hash = key.seal("event", &event_fields(&row.prev_hash, &self.id, &seq_text, &row));
        tx.execute(
            "INSERT INTO events (session_id, seq, kind, ts, payload, prev_hash, hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![self.id, seq, row.kind, row.ts, row.payload, row.prev_hash, hash],
        )?;
        seal::seal_head(&tx, key, &self.id, seq, &hash)?;
        tx.commit().context("cannot commit an event")?;
        Ok(StoredEvent {
            session: self.id.clone(),
            seq,
            kind: row.kind,
            ts: row.ts,
            payload: payload.clone(),
            prev_hash: row.prev_hash,
            hash,
        })
    }

    /// Every event of the session, in order, each checked against the chain: a log changed
    /// without the key is an error, never history to act on (resume rebuilds the conversation
    /// and the operator's "always" answers from it).
    pub fn events(&self) -> Result<Vec<StoredEvent>> {
        self.events_between(0, i64::MAX)
    }

    /// The events with `after < seq < before`, in order, checked as [`Session::events`] does.
    pub fn events_between(&self, after: i64, before: i64) -> Result<Vec<StoredEvent>> {
        self.checked_events(after, before).map_err(|e| explain(&self.store.path, e))
    }

    fn checked_events(&self, after: i64, before: i64) -> Result<Vec<StoredEvent>> {
        snapshot(self.conn(), || self.checked_events_now(after, before))
    }

    fn checked_events_now(&self, after: i64, before: i64) -> Result<Vec<StoredEvent>> {
        let key = self.store.key()?;
        let anchor = seal::anchor(self.conn(), key, &self.id).map_err(|AnchorForged(seq)| self.tampered(seq))?;
        // The event before the range too, to check the first one's link.
        let rows = self.rows(if after > 0 { after } else { 1 }, before)?;
        let mut prev = (after.max(0), if after > 0 { None } else { Some(GENESIS.to_string()) });
        let mut out = Vec::new();
        for row in rows {
            if row.seq == after {
                prev = (row.seq, Some(row.hash.clone()));
                continue;
            }
            let linked = prev.1.as_deref().is_none_or(|p| p == row.prev_hash);
            if row.seq != prev.0 + 1 || !linked || !self.row_ok(key, anchor.as_ref(), &row) {
                return Err(self.tampered(row.seq));
            }
            prev = (row.seq, Some(row.hash.clone()));
            out.push(self.stored(row)?);
        }
        if after == 0 && before == i64::MAX {
            let (sealed_seq, mac) = seal::head(self.conn(), &self.id)?;
            let last = out.last().map_or((0, GENESIS), |e| (e.seq, e.hash.as_str()));
            if !seal::head_ok(key, &self.id, last.0, last.1, &mac) {
                return Err(self.tampered(sealed_seq.max(last.0)));
            }
        }
        Ok(out)
    }

    /// Every event as stored, unchecked: for export and display, which must show a damaged log.
    pub fn raw_events(&self) -> Result<Vec<StoredEvent>> {
        self.rows(1, i64::MAX)?.into_iter().map(|r| self.stored(r)).collect()
    }

    /// How many events the session has.
    pub fn event_count(&self) -> Result<i64> {
        Ok(self.conn().query_row("SELECT COUNT(*) FROM events WHERE session_id = ?1", [&self.id], |r| r.get(0))?)
    }

    /// The last event as stored.
    pub fn head(&self) -> Result<Option<Head>> {
        Ok(self
            .conn()
            .query_row(
                "SELECT seq, hash FROM events WHERE session_id = ?1 ORDER BY seq DESC LIMIT 1",
                [&self.id],
                |r| Ok(Head { seq: r.get(0)?, hash: r.get(1)? }),
            )
            .optional()?)
    }

    /// The sequence number of the event whose hash is `hash`, if the log has one.
    pub fn seq_of_hash(&self, hash: &str) -> Result<Option<i64>> {
        Ok(self
            .conn()
            .query_row(
                "SELECT seq FROM events WHERE session_id = ?1 AND hash = ?2",
                params![self.id, hash.to_ascii_lowercase()],
                |r| r.get(0),
            )
            .optional()?)
    }

    /// Check the whole log: every event's hash under the key (or, before the session's anchor,
    /// the unkeyed formula), every link, no gap, the session's record, and the sealed head.
    /// `Err` only when the store cannot be read; a failed check is a [`Verdict`].
    pub fn verify(&self) -> Result<ChainCheck> {
        snapshot(self.conn(), || self.verify_now())
    }

    fn verify_now(&self) -> Result<ChainCheck> {
        let events = self.event_count()?;
        let head = self.head()?;
        let mut check = ChainCheck { events, head, unkeyed: None, verdict: Verdict::Intact };
        let key = match self.store.key() {
            Ok(k) => k,
            Err(e) => {
                check.verdict = Verdict::Unverifiable { why: format!("{e:#}") };
                return Ok(check);
            }
        };
        check.verdict = self
            .find_break(key, &mut check.unkeyed)?
            .map_or(Verdict::Intact, |(seq, why)| Verdict::Broken { seq, why });
        Ok(check)
    }

    /// The first break in the log, if any.
    fn find_break(&self, key: &Key, unkeyed: &mut Option<Anchor>) -> Result<Option<(i64, String)>> {
        if !seal::session_ok(self.conn(), key, &self.id)? {
            return Ok(Some((
                0,
                "the session's own record (its workspace, parent, plan, todo list or plan mode) was changed without the store's key".into(),
            )));
        }
        let anchor = match seal::anchor(self.conn(), key, &self.id) {
            Ok(a) => a,
            Err(AnchorForged(seq)) => {
                return Ok(Some((
                    seq,
                    "the record of where the keyed events begin was changed without the store's key".into(),
                )));
            }
        };
        *unkeyed = anchor.clone();
        let mut prev = (0, GENESIS.to_string());
        for row in self.rows(1, i64::MAX)? {
            let seq = row.seq;
            if seq != prev.0 + 1 {
                let why = format!("the log jumps from event {} to event {seq}: events were removed", prev.0);
                return Ok(Some((prev.0 + 1, why)));
            }
            if row.prev_hash != prev.1 {
                let why = format!(
                    "its prev_hash is not the hash of event {}: an event before it was changed, removed or inserted",
                    prev.0
                );
                return Ok(Some((seq, why)));
            }
            if !self.row_ok(key, anchor.as_ref(), &row) {
                let why = match &anchor {
                    Some(a) if seq <= a.seq => {
                        "its hash does not match its content (an event from before the store had a key, checked with the unkeyed formula)"
                    }
                    _ => {
                        "its hash is not the keyed hash of its content: it was changed, or written without the store's key"
                    }
                };
                return Ok(Some((seq, why.into())));
            }
            if let Some(a) = &anchor
                && seq == a.seq
                && row.hash != a.hash
            {
                return Ok(Some((
                    seq,
                    "it is not the event pinned as the last unkeyed one when the store got its key".into(),
                )));
            }
            prev = (seq, row.hash);
        }
        if let Some(a) = &anchor
            && a.seq > prev.0
        {
            return Ok(Some((
                prev.0 + 1,
                format!(
                    "events after {} were removed: the log reached event {} when the store got its key",
                    prev.0, a.seq
                ),
            )));
        }
        let (sealed_seq, mac) = seal::head(self.conn(), &self.id)?;
        if !seal::head_ok(key, &self.id, prev.0, &prev.1, &mac) {
            let why = if sealed_seq > prev.0 {
                format!(
                    "events after {} were removed from the end: the store sealed event {sealed_seq} as the last",
                    prev.0
                )
            } else {
                format!(
                    "the last event is {} but the store sealed event {sealed_seq} as the last: the end of the log was changed without the key",
                    prev.0
                )
            };
            return Ok(Some((prev.0.min(sealed_seq) + 1, why)));
        }
        Ok(None)
    }

    /// Check the hash chain. Returns the sequence number of the first event that does not
    /// verify (0: the session's own record), `None` when the whole log is intact, and `Err` when
    /// it cannot be checked (no key, or not this store's).
    pub fn verify_chain(&self) -> Result<Option<i64>> {
        match self.verify()?.verdict {
            Verdict::Intact => Ok(None),
            Verdict::Broken { seq, .. } => Ok(Some(seq)),
            Verdict::Unverifiable { why } => Err(anyhow::anyhow!(why)),
        }
    }

    fn row_ok(&self, key: &Key, anchor: Option<&Anchor>, row: &Row) -> bool {
        if anchor.is_some_and(|a| row.seq <= a.seq) {
            return unkeyed_hash(&row.prev_hash, &self.id, row.seq, &row.kind, &row.ts, &row.payload) == row.hash;
        }
        let seq = row.seq.to_string();
        key.check("event", &event_fields(&row.prev_hash, &self.id, &seq, row), &row.hash)
    }

    fn rows(&self, from: i64, before: i64) -> Result<Vec<Row>> {
        let mut stmt = self.conn().prepare(
            "SELECT seq, kind, ts, payload, prev_hash, hash FROM events WHERE session_id = ?1 AND seq >= ?2 AND seq < ?3 ORDER BY seq",
        )?;
        let rows = stmt.query_map(params![&self.id, from, before], |r| {
            Ok(Row {
                seq: r.get(0)?,
                kind: r.get(1)?,
                ts: r.get(2)?,
                payload: r.get(3)?,
                prev_hash: r.get(4)?,
                hash: r.get(5)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn stored(&self, row: Row) -> Result<StoredEvent> {
        let payload = serde_json::from_str(&row.payload).with_context(|| {
            format!("event {} of session {} in {} has a corrupt payload", row.seq, self.id, self.store.path.display())
        })?;
        Ok(StoredEvent {
            session: self.id.clone(),
            seq: row.seq,
            kind: row.kind,
            ts: row.ts,
            payload,
            prev_hash: row.prev_hash,
            hash: row.hash,
        })
    }

    fn tampered(&self, seq: i64) -> anyhow::Error {
        let at = if seq == 0 { "its own record".to_string() } else { format!("event {seq}") };
        anyhow::anyhow!(
            "the log of session {} in {} does not verify at {at}: it was changed outside abhed, so it is not acted on. `abhed sessions verify {}` says more",
            self.id,
            self.store.path.display(),
            self.id
        )
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::store::{EventKind, Store, Verdict};

    #[test]
    fn a_reader_never_sees_half_an_append() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("s.db");
        let store = Store::open(&db).unwrap();
        let id = store.create_session(dir.path()).unwrap().id().to_string();
        let writer = {
            let (db, id) = (db.clone(), id.clone());
            std::thread::spawn(move || {
                let store = Store::open(&db).unwrap();
                let s = store.open_session(&id).unwrap().unwrap();
                for i in 0..300 {
                    s.append(EventKind::Action, &json!({"i": i})).unwrap();
                }
            })
        };
        let s = store.open_session(&id).unwrap().unwrap();
        let mut checks = 0;
        while !writer.is_finished() || checks == 0 {
            s.events().unwrap();
            assert_eq!(s.verify().unwrap().verdict, Verdict::Intact);
            checks += 1;
        }
        writer.join().unwrap();
        assert_eq!(s.events().unwrap().len(), 300);
    }
}
