mod loader;
mod report;
mod store;

use std::io::Read;

use store::ItemStore;

fn main() {
    let mut text = String::new();
    std::io::stdin().read_to_string(&mut text).expect("read stdin");
    let store: ItemStore = match loader::load(&text) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("stockroom: {e}");
            std::process::exit(1);
        }
    };
    println!("{}", report::summary(&store));
    for line in report::low_stock(&store, 5) {
        println!("low: {line}");
    }
}
