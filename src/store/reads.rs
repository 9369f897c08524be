//! Read-tracking: what each session has read of each file, so that `write` and `edit` can
//! refuse to touch content the model never saw, or saw in an older version.

use std::path::Path;

use anyhow::Result;
use rusqlite::{OptionalExtension, params};

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

impl Session<'_> {
    /// The last recorded read of `path`, if any.
    pub fn last_read(&self, path: &Path) -> Result<Option<ReadRecord>> {
        let row = self
            .conn()
            .query_row(
                "SELECT sha256, size, mtime_ns, total_lines, lines_seen FROM reads WHERE session_id = ?1 AND path = ?2",
                params![self.id(), path.display().to_string()],
                |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, i64>(1)?,
                        r.get::<_, i64>(2)?,
                        r.get::<_, i64>(3)?,
                        r.get::<_, String>(4)?,
                    ))
                },
            )
            .optional()?;
        let Some((sha256, size, mtime_ns, total_lines, seen)) = row else { return Ok(None) };
        let lines_seen: Vec<(u64, u64)> = serde_json::from_str(&seen)?;
        Ok(Some(ReadRecord { sha256, size: size as u64, mtime_ns, total_lines: total_lines as u64, lines_seen }))
    }

    /// Record that the model saw `rec.lines_seen` of the version `rec.sha256` of `path`.
    /// Ranges seen of the same version accumulate; a new version starts afresh.
    pub fn record_read(&self, path: &Path, rec: &ReadRecord) -> Result<()> {
        let mut seen = rec.lines_seen.clone();
        if let Some(prev) = self.last_read(path)?
            && prev.sha256 == rec.sha256
        {
            seen.extend(prev.lines_seen);
        }
        let seen = merge_ranges(seen);
        self.conn().execute(
            "INSERT INTO reads (session_id, path, sha256, size, mtime_ns, total_lines, lines_seen, read_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
             ON CONFLICT (session_id, path) DO UPDATE SET sha256 = ?3, size = ?4, mtime_ns = ?5,
                 total_lines = ?6, lines_seen = ?7, read_at = ?8",
            params![
                self.id(),
                path.display().to_string(),
                rec.sha256,
                rec.size as i64,
                rec.mtime_ns,
                rec.total_lines as i64,
                serde_json::to_string(&seen)?,
                now_rfc3339()
            ],
        )?;
        Ok(())
    }
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
}
