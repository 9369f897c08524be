//! Read-tracking: what each session has read of each file, so that `write` and `edit` can
//! refuse to touch content the model never saw, or saw in an older version.
//!
//! Each row is sealed with the store's key (session, path and every field): a row inserted or
//! changed outside abhed would let a write through, so it is an error, not a read. A removed row
//! is safe (the model must read the file again), and so is an older row put back (its hash no
//! longer matches the file, so the read is stale), so a per-row seal is enough.

use std::path::Path;

use anyhow::{Result, bail};
use rusqlite::{Connection, OptionalExtension, params};

use super::key::Key;
use super::{Session, now_rfc3339};

/// What a session last saw of one file (keyed by its real, symlink-resolved path).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadRecord {
    pub sha256: String,
    pub size: u64,
    pub mtime_ns: i64,
    pub total_lines: u64,
    /// Inclusive 1-based line ranges seen of this version, merged and sorted.
    pub lines_seen: Vec<(u64, u64)>,
}

/// One row's columns, as text, in the order its seal covers them.
struct Row {
    sha256: String,
    size: i64,
    mtime_ns: i64,
    total_lines: i64,
    lines_seen: String,
    read_at: String,
}

/// The columns `sha256, size, mtime_ns, total_lines, lines_seen, read_at` of a query, from
/// column `at` on.
fn row_at(r: &rusqlite::Row<'_>, at: usize) -> rusqlite::Result<Row> {
    Ok(Row {
        sha256: r.get(at)?,
        size: r.get(at + 1)?,
        mtime_ns: r.get(at + 2)?,
        total_lines: r.get(at + 3)?,
        lines_seen: r.get(at + 4)?,
        read_at: r.get(at + 5)?,
    })
}

fn seal(key: &Key, session: &str, path: &str, r: &Row) -> String {
    key.seal("read", &fields(session, path, r).iter().map(Vec::as_slice).collect::<Vec<_>>())
}

fn fields(session: &str, path: &str, r: &Row) -> [Vec<u8>; 8] {
    [
        session.as_bytes().to_vec(),
        path.as_bytes().to_vec(),
        r.sha256.as_bytes().to_vec(),
        r.size.to_string().into_bytes(),
        r.mtime_ns.to_string().into_bytes(),
        r.total_lines.to_string().into_bytes(),
        r.lines_seen.as_bytes().to_vec(),
        r.read_at.as_bytes().to_vec(),
    ]
}

impl Session<'_> {
    /// The last recorded read of `path`, if any. A row that does not match its seal is an
    /// error: the store was changed outside abhed.
    pub fn last_read(&self, path: &Path) -> Result<Option<ReadRecord>> {
        let p = path.display().to_string();
        let row = self
            .conn()
            .query_row(
                "SELECT sha256, size, mtime_ns, total_lines, lines_seen, read_at, mac FROM reads WHERE session_id = ?1 AND path = ?2",
                params![self.id(), p],
                |r| Ok((row_at(r, 0)?, r.get::<_, String>(6)?)),
            )
            .optional()?;
        let Some((row, mac)) = row else { return Ok(None) };
        let key = self.store.key()?;
        if !key.check("read", &fields(self.id(), &p, &row).iter().map(Vec::as_slice).collect::<Vec<_>>(), &mac) {
            bail!(
                "the record of what session {} read of {p} does not match its seal: the session store {} was changed outside abhed, so it is not trusted. `abhed sessions verify {}`",
                self.id(),
                self.store.path.display(),
                self.id()
            );
        }
        let lines_seen: Vec<(u64, u64)> = serde_json::from_str(&row.lines_seen)?;
        Ok(Some(ReadRecord {
            sha256: row.sha256,
            size: row.size as u64,
            mtime_ns: row.mtime_ns,
            total_lines: row.total_lines as u64,
            lines_seen,
        }))
    }

    /// Record that the model saw `rec.lines_seen` of the version `rec.sha256` of `path`.
    /// Ranges seen of the same version accumulate; a new version starts afresh.
    pub fn record_read(&self, path: &Path, rec: &ReadRecord) -> Result<()> {
        let key = self.store.key()?;
        let mut seen = rec.lines_seen.clone();
        if let Some(prev) = self.last_read(path)?
            && prev.sha256 == rec.sha256
        {
            seen.extend(prev.lines_seen);
        }
        let seen = merge_ranges(seen);
        let p = path.display().to_string();
        let row = Row {
            sha256: rec.sha256.clone(),
            size: rec.size as i64,
            mtime_ns: rec.mtime_ns,
            total_lines: rec.total_lines as i64,
            lines_seen: serde_json::to_string(&seen)?,
            read_at: now_rfc3339(),
        };
        let mac = seal(key, self.id(), &p, &row);
        self.conn().execute(
            "INSERT INTO reads (session_id, path, sha256, size, mtime_ns, total_lines, lines_seen, read_at, mac)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
             ON CONFLICT (session_id, path) DO UPDATE SET sha256 = ?3, size = ?4, mtime_ns = ?5,
                 total_lines = ?6, lines_seen = ?7, read_at = ?8, mac = ?9",
            params![
                self.id(),
                p,
                row.sha256,
                row.size,
                row.mtime_ns,
                row.total_lines,
                row.lines_seen,
                row.read_at,
                mac
            ],
        )?;
        Ok(())
    }
}

/// Seal every row as it stands (the migration to a keyed store).
pub(super) fn reseal_all(conn: &Connection, key: &Key) -> Result<()> {
    let rows: Vec<(String, String, Row)> = conn
        .prepare("SELECT session_id, path, sha256, size, mtime_ns, total_lines, lines_seen, read_at FROM reads")?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, row_at(r, 2)?)))?
        .collect::<Result<_, _>>()?;
    for (session, path, row) in rows {
        let mac = seal(key, &session, &path, &row);
        conn.execute("UPDATE reads SET mac = ?1 WHERE session_id = ?2 AND path = ?3", params![mac, session, path])?;
    }
    Ok(())
}

fn merge_ranges(mut ranges: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    ranges.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
    for (a, b) in ranges {
        match out.last_mut() {
            Some(last) if a <= last.1.saturating_add(1) => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    #[test]
    fn ranges_merge() {
        assert_eq!(merge_ranges(vec![(5, 9), (1, 3), (4, 4), (20, 30)]), vec![(1, 9), (20, 30)]);
    }

    #[test]
    fn reads_accumulate_per_version() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.db")).unwrap();
        let s = store.create_session(dir.path()).unwrap();
        let p = dir.path().join("f");
        let rec = |sha: &str, r| ReadRecord {
            sha256: sha.into(),
            size: 1,
            mtime_ns: 0,
            total_lines: 100,
            lines_seen: vec![r],
        };
        s.record_read(&p, &rec("a", (1, 10))).unwrap();
        s.record_read(&p, &rec("a", (11, 20))).unwrap();
        assert_eq!(s.last_read(&p).unwrap().unwrap().lines_seen, vec![(1, 20)]);
        s.record_read(&p, &rec("b", (50, 60))).unwrap();
        assert_eq!(s.last_read(&p).unwrap().unwrap().lines_seen, vec![(50, 60)]);
    }

    #[test]
    fn a_forged_read_is_an_error_not_a_read() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.db")).unwrap();
        let s = store.create_session(dir.path()).unwrap();
        let p = dir.path().join("f");
        let rec = ReadRecord { sha256: "a".into(), size: 1, mtime_ns: 0, total_lines: 10, lines_seen: vec![(1, 2)] };
        s.record_read(&p, &rec).unwrap();
        // Widening what was seen (so a whole-file write would pass) is caught...
        s.conn().execute("UPDATE reads SET lines_seen = '[[1,10]]'", []).unwrap();
        let e = format!("{:#}", s.last_read(&p).unwrap_err());
        assert!(e.contains("does not match its seal") && e.contains("s.db"), "{e}");
        // ... and so is a row copied in for another file.
        let q = dir.path().join("g");
        s.conn()
            .execute("INSERT INTO reads SELECT session_id, ?1, sha256, size, mtime_ns, total_lines, lines_seen, read_at, mac FROM reads", [q.display().to_string()])
            .unwrap();
        assert!(s.last_read(&q).is_err());
    }
}
