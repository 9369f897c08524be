sed -i 's/\bItemStore\b/Inventory/g' src/store.rs src/loader.rs src/report.rs src/main.rs
