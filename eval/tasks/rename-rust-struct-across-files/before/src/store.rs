use std::collections::BTreeMap;

/// Stock levels, by item name.
#[derive(Debug, Default, Clone)]
pub struct ItemStore {
    counts: BTreeMap<String, u32>,
}

#[derive(Debug, PartialEq)]
pub enum StoreError {
    NotEnough { item: String, have: u32, want: u32 },
}

impl ItemStore {
    pub fn new() -> Self {
        ItemStore::default()
    }

    pub fn add(&mut self, item: &str, n: u32) {
        *self.counts.entry(item.to_string()).or_insert(0) += n;
    }

    pub fn take(&mut self, item: &str, n: u32) -> Result<(), StoreError> {
        let have = self.count(item);
        if have < n {
            return Err(StoreError::NotEnough { item: item.to_string(), have, want: n });
        }
        self.counts.insert(item.to_string(), have - n);
        Ok(())
    }

    pub fn count(&self, item: &str) -> u32 {
        self.counts.get(item).copied().unwrap_or(0)
    }

    pub fn items(&self) -> impl Iterator<Item = (&str, u32)> {
        self.counts.iter().map(|(k, v)| (k.as_str(), *v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn take_more_than_there_is() {
        let mut s = ItemStore::new();
        s.add("bolt", 2);
        assert!(s.take("bolt", 3).is_err());
        assert_eq!(s.count("bolt"), 2);
    }
}
