use crate::store::ItemStore;

/// Reads `name count` lines into a store. Blank lines and lines starting with '#' are skipped.
pub fn load(text: &str) -> Result<ItemStore, String> {
    let mut store = ItemStore::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, n) = line
            .split_once(' ')
            .ok_or_else(|| format!("line {}: expected `name count`", i + 1))?;
        let n: u32 = n.trim().parse().map_err(|e| format!("line {}: {e}", i + 1))?;
        store.add(name, n);
    }
    Ok(store)
}
