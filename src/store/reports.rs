//! Conformance reports, kept per model (`abhed conformance` writes them, the gate in `abhed run`
//! reads the latest). Every probe is kept: the history shows how a model's results moved.

use anyhow::{Context as _, Result};
use rusqlite::{OptionalExtension, params};
use serde_json::Value;

use super::{Store, now_rfc3339};

/// A report as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredReport {
    pub id: i64,
    pub model_key: String,
    pub created_at: String,
    pub suite_digest: String,
    pub report: Value,
}

impl Store {
    /// Keep `report` for `model_key`; returns its id.
    pub fn save_report(&self, model_key: &str, suite_digest: &str, report: &Value) -> Result<i64> {
        self.conn.execute(
            "INSERT INTO conformance_reports (model_key, created_at, suite_digest, report) VALUES (?1, ?2, ?3, ?4)",
            params![model_key, now_rfc3339(), suite_digest, serde_json::to_string(report)?],
        )?;
        Ok(self.conn.last_insert_rowid())
    }

    /// The newest report for `model_key`.
    pub fn latest_report(&self, model_key: &str) -> Result<Option<StoredReport>> {
        let row: Option<(i64, String, String, String)> = self
            .conn
            .query_row(
                "SELECT id, created_at, suite_digest, report FROM conformance_reports
                 WHERE model_key = ?1 ORDER BY id DESC LIMIT 1",
                params![model_key],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .optional()?;
        row.map(|(id, created_at, suite_digest, text)| {
            let report = serde_json::from_str(&text).with_context(|| format!("conformance report {id} is corrupt"))?;
            Ok(StoredReport { id, model_key: model_key.to_string(), created_at, suite_digest, report })
        })
        .transpose()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::store::Store;

    #[test]
    fn the_latest_report_wins() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("a.db")).unwrap();
        assert!(store.latest_report("sha256:x").unwrap().is_none());
        store.save_report("sha256:x", "d1", &json!({"n": 1})).unwrap();
        store.save_report("sha256:y", "d1", &json!({"n": 2})).unwrap();
        store.save_report("sha256:x", "d2", &json!({"n": 3})).unwrap();
        let r = store.latest_report("sha256:x").unwrap().unwrap();
        assert_eq!((r.suite_digest.as_str(), r.report["n"].as_i64()), ("d2", Some(3)));
    }
}
