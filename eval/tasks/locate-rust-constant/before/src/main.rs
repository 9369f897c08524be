mod client;
mod config;
mod net;

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 || args[1] != "sync" {
        eprintln!("usage: stashd sync LOCAL_DIR REMOTE_URL");
        return ExitCode::from(2);
    }
    let cfg = config::Config::from_env();
    let client = client::Client::new(&args[3], cfg);
    match client.sync_dir(std::path::Path::new(&args[2])) {
        Ok(n) => {
            println!("synced {n} files");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("stashd: {e}");
            ExitCode::FAILURE
        }
    }
}
