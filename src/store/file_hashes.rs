//! A cache of model files' sha256, keyed by path, size and mtime, so a multi-gigabyte GGUF is
//! hashed once. The hash names the model in the conformance gate, so each row is sealed: a row
//! changed outside abhed is a cache miss (the file is hashed again), never a name to trust.

use std::path::Path;

use anyhow::Result;
use rusqlite::{OptionalExtension, params};

use super::Store;
use super::key::Key;

fn fields(path: &str, size: i64, mtime_ns: i64, sha256: &str) -> [Vec<u8>; 4] {
    [
        path.as_bytes().to_vec(),
        size.to_string().into_bytes(),
        mtime_ns.to_string().into_bytes(),
        sha256.as_bytes().to_vec(),
    ]
}

fn seal(key: &Key, f: &[Vec<u8>; 4]) -> String {
    key.seal("file_hash", &[&f[0], &f[1], &f[2], &f[3]])
}

impl Store {
    /// The sha256 remembered for a file with this size and mtime, if any (and if its row holds).
    pub fn file_hash(&self, path: &Path, size: u64, mtime_ns: i64) -> Result<Option<String>> {
        let p = path.display().to_string();
        let row: Option<(String, String)> = self
            .conn
            .query_row(
                "SELECT sha256, mac FROM file_hashes WHERE path = ?1 AND size = ?2 AND mtime_ns = ?3",
                params![p, size as i64, mtime_ns],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        let Some((sha256, mac)) = row else { return Ok(None) };
        let key = self.key()?;
        let f = fields(&p, size as i64, mtime_ns, &sha256);
        Ok(key.check("file_hash", &[&f[0], &f[1], &f[2], &f[3]], &mac).then_some(sha256))
    }

    pub fn record_file_hash(&self, path: &Path, size: u64, mtime_ns: i64, sha256: &str) -> Result<()> {
        let p = path.display().to_string();
        let mac = seal(self.key()?, &fields(&p, size as i64, mtime_ns, sha256));
        self.conn.execute(
            "INSERT OR REPLACE INTO file_hashes (path, size, mtime_ns, sha256, mac) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![p, size as i64, mtime_ns, sha256, mac],
        )?;
        Ok(())
    }
}

/// Seal every row as it stands (the migration to a keyed store).
pub(super) fn reseal_all(conn: &rusqlite::Connection, key: &Key) -> Result<()> {
    let rows: Vec<(String, i64, i64, String)> = conn
        .prepare("SELECT path, size, mtime_ns, sha256 FROM file_hashes")?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
        .collect::<Result<_, _>>()?;
    for (path, size, mtime_ns, sha256) in rows {
        let mac = seal(key, &fields(&path, size, mtime_ns, &sha256));
        conn.execute("UPDATE file_hashes SET mac = ?1 WHERE path = ?2", params![mac, path])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::store::Store;

    #[test]
    fn an_edited_row_is_a_cache_miss() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("a.db")).unwrap();
        let p = dir.path().join("m.gguf");
        store.record_file_hash(&p, 10, 5, "aa").unwrap();
        assert_eq!(store.file_hash(&p, 10, 5).unwrap().as_deref(), Some("aa"));
        store.conn.execute("UPDATE file_hashes SET sha256 = 'bb'", []).unwrap();
        assert_eq!(store.file_hash(&p, 10, 5).unwrap(), None);
    }
}
