use crate::store::ItemStore;

/// One line per item with fewer than `threshold` left.
pub fn low_stock(store: &ItemStore, threshold: u32) -> Vec<String> {
    store
        .items()
        .filter(|(_, n)| *n < threshold)
        .map(|(name, n)| format!("{name}: {n} left"))
        .collect()
}

pub fn summary(store: &ItemStore) -> String {
    let total: u32 = store.items().map(|(_, n)| n).sum();
    format!("{} kinds, {} items", store.items().count(), total)
}
