//! Per-session working memory the model keeps through tools: the plan, the todo list, plan
//! mode. One JSON value per key, replaced whole on each update; the event log keeps every
//! version.
//!
//! The session's seal covers all its state rows together (`seal.rs`): removing the plan-mode row
//! would otherwise switch plan mode off, so a per-row seal would not do.

use anyhow::{Context as _, Result, bail};
use rusqlite::{OptionalExtension, TransactionBehavior, params};
use serde_json::Value;

use super::{Session, now_rfc3339, seal, snapshot};

impl Session<'_> {
    /// The session's current value under `key` (`plan`, `todos`), if one was ever set. State
    /// that does not match the session's seal is an error: the store was changed outside abhed.
    pub fn state(&self, key: &str) -> Result<Option<Value>> {
        snapshot(self.conn(), || self.state_now(key))
    }

    fn state_now(&self, key: &str) -> Result<Option<Value>> {
        if !seal::session_ok(self.conn(), self.store.key()?, self.id())? {
            bail!(
                "the state of session {} (plan, todo list, plan mode) does not match its seal: the session store {} was changed outside abhed, so it is not trusted. `abhed sessions verify {}`",
                self.id(),
                self.store.path.display(),
                self.id()
            );
        }
        let text: Option<String> = self
            .conn()
            .query_row(
                "SELECT value FROM session_state WHERE session_id = ?1 AND key = ?2",
                params![self.id(), key],
                |r| r.get(0),
            )
            .optional()?;
        text.map(|t| serde_json::from_str(&t).with_context(|| format!("the session's {key} is corrupt"))).transpose()
    }

    pub fn set_state(&self, key: &str, value: &Value) -> Result<()> {
        let seal_key = self.store.key()?;
        let tx = rusqlite::Transaction::new_unchecked(self.conn(), TransactionBehavior::Immediate)?;
        // Only a state that still matches its seal is carried forward under a new one.
        if !seal::session_ok(&tx, seal_key, self.id())? {
            bail!(
                "the state of session {} does not match its seal: the session store {} was changed outside abhed; not sealing it anew",
                self.id(),
                self.store.path.display()
            );
        }
        tx.execute(
            "INSERT INTO session_state (session_id, key, value, updated_at) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (session_id, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
            params![self.id(), key, serde_json::to_string(value)?, now_rfc3339()],
        )?;
        seal::reseal_session(&tx, seal_key, self.id())?;
        tx.commit()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::store::Store;

    #[test]
    fn state_is_per_session_and_replaced_whole() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("a.db")).unwrap();
        let a = store.create_session(dir.path()).unwrap();
        let b = store.create_session(dir.path()).unwrap();
        assert_eq!(a.state("todos").unwrap(), None);
        a.set_state("todos", &json!([1])).unwrap();
        a.set_state("todos", &json!([2])).unwrap();
        assert_eq!(a.state("todos").unwrap(), Some(json!([2])));
        assert_eq!(b.state("todos").unwrap(), None);
    }

    #[test]
    fn state_changed_outside_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("a.db")).unwrap();
        let a = store.create_session(dir.path()).unwrap();
        a.set_state("plan_mode", &json!({"on": true})).unwrap();
        a.set_state("todos", &json!([1])).unwrap();
        // Removing the plan-mode row (to switch plan mode off) breaks the seal on every key.
        a.conn().execute("DELETE FROM session_state WHERE key = 'plan_mode'", []).unwrap();
        assert!(a.state("plan_mode").is_err());
        assert!(a.state("todos").is_err());
        assert!(a.set_state("todos", &json!([2])).is_err());
        assert!(store.open_session(a.id()).is_err());
    }
}
