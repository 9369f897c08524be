//! The openai adapter end to end against a real OpenAI-compatible server: llama.cpp's own
//! llama-server (built from the pinned sdist by tests/support/build-llama-tools.sh) serving the
//! small model (SmolLM2-135M) on loopback.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::cli::{Env, json_lines};

/// The server process, stopped when the test ends however it ends.
struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn server_binary() -> PathBuf {
    let p = std::env::var_os("ABHED_LLAMA_SERVER")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/llama-tools/bin/llama-server"));
    assert!(p.is_file(), "{} is missing: build it once with `bash tests/support/build-llama-tools.sh`", p.display());
    p
}

fn start_server() -> Server {
    let model = abhed::model::locate::small_model_path().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let child = Command::new(server_binary())
        .args(["-m", model.to_str().unwrap(), "--host", "127.0.0.1", "--port", &port.to_string()])
        .args(["-c", "4096", "-t", "2", "-np", "1"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let server = Server { child, port };
    let start = Instant::now();
    loop {
        // Listening and the model loaded: /health answers 200 (503 while loading).
        if health(port) {
            return server;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "llama-server did not come up on port {port}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn health(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else { return false };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").is_err() {
        return false;
    }
    let mut head = [0u8; 12];
    s.read_exact(&mut head).is_ok() && head.ends_with(b"200")
}

#[test]
fn a_run_through_llama_server_parses_executes_and_records() {
    let server = start_server();
    let env = Env::new();
    std::fs::write(env.ws.join("notes.txt"), "alpha\nbeta\n").unwrap();
    let url = format!("http://127.0.0.1:{}", server.port);
    let task = format!("Read the file {} and tell me its first line.", env.path("notes.txt"));
    let out = env.cmd(&["run", &task, "--endpoint", &url, "--json", "--max-turns", "3", "--max-reply-tokens", "128"]);
    let code = out.status.code().unwrap();
    assert!([0, 1, 4].contains(&code), "exit {code}: {}", String::from_utf8_lossy(&out.stderr));
    let events = json_lines(&out.stdout);
    let start = events.iter().find(|e| e["type"] == "run_start").unwrap();
    assert_eq!(start["model"]["adapter"], "openai");
    assert_eq!(start["model"]["n_ctx"], 4096, "the server's context, read from /props");
    let turns: Vec<_> = events.iter().filter(|e| e["type"] == "model_turn").collect();
    assert!(!turns.is_empty());
    for t in &turns {
        // response_format carries the turn schema; the server enforces it with a grammar.
        if t["cut_off"] == false {
            assert_ne!(t["kind"], "invalid", "{}", t["raw"]);
        }
        if t.get("given_why").is_some() {
            // A given read (the task names the file) is the loop's own turn: no server call.
            assert_eq!(t["usage"]["prompt_tokens"], 0, "{t}");
            continue;
        }
        assert!(t["usage"]["prompt_tokens"].as_u64().unwrap() > 0, "usage comes from the server: {}", t["usage"]);
    }
    assert!(turns.iter().any(|t| t.get("given_why").is_none()), "the server answered at least one turn");
    let calls = events.iter().filter(|e| e["type"] == "tool_call").count();
    let results = events.iter().filter(|e| e["type"] == "tool_result").count();
    assert_eq!(calls, results);
    let id = events[0]["session"].as_str().unwrap();
    assert_eq!(env.cmd(&["sessions", "verify", id]).status.code(), Some(0));
}
