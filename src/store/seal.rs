//! Seals: HMAC-SHA256 tags, under the store's key, on the rows that decide something. A row
//! edited, inserted or (where a seal covers a set) removed without the key no longer matches its
//! seal. What each covers, and why, is in docs/EVENTS.md ("What `verify` proves").
//!
//! - a session's seal covers its row (id, created, workspace, parent) and all its state rows
//!   (plan, todos, plan mode): deleting the plan-mode row would otherwise let writes through;
//! - a session's head seal covers the sequence number and hash of its last event, so events cut
//!   from the end of the log are found (unless the whole store is put back as it was earlier:
//!   that needs the head recorded outside, see `run_end`);
//! - an anchor pins the last event written before the store had a key (schema 5 migration).

use anyhow::{Result, bail};
use rusqlite::{Connection, OptionalExtension, params};

use super::key::Key;

/// The fields a session's seal covers, or `None` when there is no such session.
fn session_fields(conn: &Connection, id: &str) -> Result<Option<Vec<String>>> {
    let row: Option<(String, String, Option<String>)> = conn
        .query_row("SELECT created_at, workspace, parent_id FROM sessions WHERE id = ?1", [id], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .optional()?;
    let Some((created_at, workspace, parent)) = row else { return Ok(None) };
    // A parent is a session id, never empty, so "" stands for none without ambiguity.
    let mut fields = vec![id.to_string(), created_at, workspace, parent.unwrap_or_default()];
    let mut stmt =
        conn.prepare("SELECT key, value, updated_at FROM session_state WHERE session_id = ?1 ORDER BY key")?;
    let rows =
        stmt.query_map([id], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?)))?;
    for row in rows {
        let (k, v, t) = row?;
        fields.extend([k, v, t]);
    }
    Ok(Some(fields))
}

fn as_bytes(fields: &[String]) -> Vec<&[u8]> {
    fields.iter().map(|f| f.as_bytes()).collect()
}

/// Seal session `id` as it stands (after its row or its state changed).
pub(super) fn reseal_session(conn: &Connection, key: &Key, id: &str) -> Result<()> {
    let Some(fields) = session_fields(conn, id)? else { bail!("no session `{id}` to seal") };
    let seal = key.seal("session", &as_bytes(&fields));
    conn.execute("UPDATE sessions SET seal = ?1 WHERE id = ?2", params![seal, id])?;
    Ok(())
}

/// Whether session `id`'s row and state are as last sealed.
pub(super) fn session_ok(conn: &Connection, key: &Key, id: &str) -> Result<bool> {
    super::snapshot(conn, || {
        let Some(fields) = session_fields(conn, id)? else { return Ok(false) };
        let seal: String = conn.query_row("SELECT seal FROM sessions WHERE id = ?1", [id], |r| r.get(0))?;
        Ok(key.check("session", &as_bytes(&fields), &seal))
    })
}

fn head_fields(id: &str, seq: i64, hash: &str) -> [Vec<u8>; 3] {
    [id.as_bytes().to_vec(), seq.to_string().into_bytes(), hash.as_bytes().to_vec()]
}

/// Record event `seq` (with `hash`) as session `id`'s last.
pub(super) fn seal_head(conn: &Connection, key: &Key, id: &str, seq: i64, hash: &str) -> Result<()> {
    let f = head_fields(id, seq, hash);
    let mac = key.seal("head", &[&f[0], &f[1], &f[2]]);
    conn.execute("UPDATE sessions SET head_seq = ?1, head_mac = ?2 WHERE id = ?3", params![seq, mac, id])?;
    Ok(())
}

/// Session `id`'s sealed head as stored: the sequence number it claims, and its seal.
pub(super) fn head(conn: &Connection, id: &str) -> Result<(i64, String)> {
    Ok(conn.query_row("SELECT head_seq, head_mac FROM sessions WHERE id = ?1", [id], |r| Ok((r.get(0)?, r.get(1)?)))?)
}

/// Whether `mac` seals `(seq, hash)` as session `id`'s head.
pub(super) fn head_ok(key: &Key, id: &str, seq: i64, hash: &str, mac: &str) -> bool {
    let f = head_fields(id, seq, hash);
    key.check("head", &[&f[0], &f[1], &f[2]], mac)
}

/// Where a session's unkeyed (pre-key) events end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Anchor {
    pub seq: i64,
    pub hash: String,
    /// When the store got its key (the migration).
    pub keyed_at: String,
}

fn anchor_fields(id: &str, a: &Anchor) -> [Vec<u8>; 4] {
    [id.as_bytes().to_vec(), a.seq.to_string().into_bytes(), a.hash.as_bytes().to_vec(), a.keyed_at.as_bytes().to_vec()]
}

/// At the migration to a keyed store: pin session `id`'s last event (if it has any) as the end
/// of its unkeyed events, and seal it as the head (an empty log's head is 0 and the genesis).
pub(super) fn anchor_legacy(conn: &Connection, key: &Key, id: &str, keyed_at: &str) -> Result<()> {
    let last: Option<(i64, String)> = conn
        .query_row("SELECT seq, hash FROM events WHERE session_id = ?1 ORDER BY seq DESC LIMIT 1", [id], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .optional()?;
    let Some((seq, hash)) = last else { return seal_head(conn, key, id, 0, super::chain::GENESIS) };
    let a = Anchor { seq, hash, keyed_at: keyed_at.to_string() };
    let f = anchor_fields(id, &a);
    let mac = key.seal("anchor", &[&f[0], &f[1], &f[2], &f[3]]);
    conn.execute(
        "INSERT INTO chain_anchors (session_id, seq, hash, keyed_at, mac) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![id, a.seq, a.hash, a.keyed_at, mac],
    )?;
    seal_head(conn, key, id, a.seq, &a.hash)
}

/// Session `id`'s anchor: `Ok(None)` when it has none (it began after the store was keyed),
/// `Err` when the anchor row does not match its seal.
pub(super) fn anchor(conn: &Connection, key: &Key, id: &str) -> Result<Option<Anchor>, AnchorForged> {
    let row: Option<(i64, String, String, String)> = conn
        .query_row("SELECT seq, hash, keyed_at, mac FROM chain_anchors WHERE session_id = ?1", [id], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })
        .optional()
        .map_err(|_| AnchorForged(0))?;
    let Some((seq, hash, keyed_at, mac)) = row else { return Ok(None) };
    let a = Anchor { seq, hash, keyed_at };
    let f = anchor_fields(id, &a);
    if key.check("anchor", &[&f[0], &f[1], &f[2], &f[3]], &mac) { Ok(Some(a)) } else { Err(AnchorForged(seq)) }
}

/// An anchor row that does not match its seal (at the sequence number it claims).
#[derive(Debug)]
pub(super) struct AnchorForged(pub i64);
