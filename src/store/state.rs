//! Per-session working memory the model keeps through tools: the plan and the todo list. One
//! JSON value per key, replaced whole on each update; the event log keeps every version.

use anyhow::{Context as _, Result};
use rusqlite::{OptionalExtension, params};
use serde_json::Value;

use super::{Session, now_rfc3339};

impl Session<'_> {
    /// The session's current value under `key` (`plan`, `todos`), if one was ever set.
    pub fn state(&self, key: &str) -> Result<Option<Value>> {
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
        self.conn().execute(
            "INSERT INTO session_state (session_id, key, value, updated_at) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (session_id, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
            params![self.id(), key, serde_json::to_string(value)?, now_rfc3339()],
        )?;
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
}
