use std::io;

fn main() {
    let config = load_config();
    println!("{}", config.name);
}

fn load_config() -> Config {
    Config { name: String::from("demo") }
}
