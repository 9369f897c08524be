//! Conformance reports, kept per model (`abhed conformance` writes them, the gate in `abhed run`
//! reads the latest). Every probe is kept: the history shows how a model's results moved. The
//! task suite's reports (`abhed eval`) are kept the same way, in their own chain.
//!
//! A forged passing report would let an unqualified model serve, so the reports form a chain
//! under the store's key: each row's seal covers its fields and the seal of the row before it.
//! Reading the latest checks the whole chain (a few rows per model), so an edited, inserted or
//! removed report is an error. Removing the newest reports of a model is not caught: the gate
//! then reads an older, genuine report (docs/EVENTS.md).

use anyhow::{Context as _, Result, bail};
use rusqlite::{Connection, TransactionBehavior, params};
use serde_json::Value;

use super::key::Key;
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

/// One row: id, model_key, created_at, suite_digest, report (text), mac.
type Row = (i64, String, String, String, String, String);

/// Which reports: each kind is its own table and its own chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportKind {
    Conformance,
    Eval,
}

impl ReportKind {
    fn table(self) -> &'static str {
        match self {
            ReportKind::Conformance => "conformance_reports",
            ReportKind::Eval => "eval_reports",
        }
    }
    /// The seal's domain.
    fn domain(self) -> &'static str {
        match self {
            ReportKind::Conformance => "report",
            ReportKind::Eval => "eval_report",
        }
    }
    fn what(self) -> &'static str {
        match self {
            ReportKind::Conformance => "conformance report",
            ReportKind::Eval => "eval report",
        }
    }
    fn command(self) -> &'static str {
        match self {
            ReportKind::Conformance => "abhed conformance",
            ReportKind::Eval => "abhed eval",
        }
    }
}

fn seal(key: &Key, kind: ReportKind, r: &Row, prev: &str) -> String {
    let id = r.0.to_string();
    key.seal(
        kind.domain(),
        &[id.as_bytes(), r.1.as_bytes(), r.2.as_bytes(), r.3.as_bytes(), r.4.as_bytes(), prev.as_bytes()],
    )
}

fn rows(conn: &Connection, kind: ReportKind) -> Result<Vec<Row>> {
    Ok(conn
        .prepare(&format!(
            "SELECT id, model_key, created_at, suite_digest, report, mac FROM {} ORDER BY id",
            kind.table()
        ))?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?)))?
        .collect::<Result<_, _>>()?)
}

impl Store {
    /// Keep the conformance `report` for `model_key`; returns its id.
    pub fn save_report(&self, model_key: &str, suite_digest: &str, report: &Value) -> Result<i64> {
        self.save_report_of(ReportKind::Conformance, model_key, suite_digest, report)
    }

    /// The newest conformance report for `model_key`, after checking the chain of all reports.
    pub fn latest_report(&self, model_key: &str) -> Result<Option<StoredReport>> {
        self.latest_report_of(ReportKind::Conformance, model_key)
    }

    /// Keep a report of `kind` for `model_key`; returns its id.
    pub fn save_report_of(&self, kind: ReportKind, model_key: &str, suite_digest: &str, report: &Value) -> Result<i64> {
        let key = self.key()?;
        let table = kind.table();
        let tx = rusqlite::Transaction::new_unchecked(&self.conn, TransactionBehavior::Immediate)?;
        let prev: String = tx
            .query_row(&format!("SELECT mac FROM {table} ORDER BY id DESC LIMIT 1"), [], |r| r.get(0))
            .or_else(|e| if e == rusqlite::Error::QueryReturnedNoRows { Ok(String::new()) } else { Err(e) })?;
        let row: Row = (
            0,
            model_key.to_string(),
            now_rfc3339(),
            suite_digest.to_string(),
            serde_json::to_string(report)?,
            String::new(),
        );
        tx.execute(
            &format!(
                "INSERT INTO {table} (model_key, created_at, suite_digest, report, mac) VALUES (?1, ?2, ?3, ?4, '')"
            ),
            params![row.1, row.2, row.3, row.4],
        )?;
        let id = tx.last_insert_rowid();
        let mac = seal(key, kind, &(id, row.1, row.2, row.3, row.4, row.5), &prev);
        tx.execute(&format!("UPDATE {table} SET mac = ?1 WHERE id = ?2"), params![mac, id])?;
        tx.commit()?;
        Ok(id)
    }

    /// The newest report of `kind` for `model_key`, after checking the chain of all of them.
    pub fn latest_report_of(&self, kind: ReportKind, model_key: &str) -> Result<Option<StoredReport>> {
        let key = self.key()?;
        let mut prev = String::new();
        let mut latest = None;
        for row in rows(&self.conn, kind)? {
            if !key.check(
                kind.domain(),
                &[
                    row.0.to_string().as_bytes(),
                    row.1.as_bytes(),
                    row.2.as_bytes(),
                    row.3.as_bytes(),
                    row.4.as_bytes(),
                    prev.as_bytes(),
                ],
                &row.5,
            ) {
                bail!(
                    "{} {} in the session store {} does not match its seal (it, or one before it, was changed, added or removed outside abhed), so no report there is trusted. Move the store aside and run `{}` again",
                    kind.what(),
                    row.0,
                    self.path.display(),
                    kind.command()
                );
            }
            prev = row.5.clone();
            if row.1 == model_key {
                latest = Some(row);
            }
        }
        latest
            .map(|(id, model_key, created_at, suite_digest, text, _)| {
                let report = serde_json::from_str(&text).with_context(|| format!("{} {id} is corrupt", kind.what()))?;
                Ok(StoredReport { id, model_key, created_at, suite_digest, report })
            })
            .transpose()
    }
}

/// Chain every report as it stands, oldest first (the migration to a keyed store).
pub(super) fn rechain_all(conn: &Connection, key: &Key) -> Result<()> {
    let mut prev = String::new();
    for row in rows(conn, ReportKind::Conformance)? {
        let mac = seal(key, ReportKind::Conformance, &row, &prev);
        conn.execute("UPDATE conformance_reports SET mac = ?1 WHERE id = ?2", params![mac, row.0])?;
        prev = mac;
    }
    Ok(())
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

    #[test]
    fn a_forged_or_removed_report_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("a.db")).unwrap();
        store.save_report("sha256:x", "d1", &json!({"pass": false})).unwrap();
        store.save_report("sha256:y", "d1", &json!({"pass": true})).unwrap();
        store.conn.execute("UPDATE conformance_reports SET report = '{\"pass\":true}' WHERE id = 1", []).unwrap();
        assert!(store.latest_report("sha256:x").is_err());
        // Put it back, then remove the first row: the second's link to it breaks.
        store.conn.execute("UPDATE conformance_reports SET report = '{\"pass\":false}' WHERE id = 1", []).unwrap();
        assert!(store.latest_report("sha256:x").is_ok());
        store.conn.execute("DELETE FROM conformance_reports WHERE id = 1", []).unwrap();
        let e = format!("{:#}", store.latest_report("sha256:y").unwrap_err());
        assert!(e.contains("report 2") && e.contains("a.db"), "{e}");
    }
}
