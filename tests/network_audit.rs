//! The runtime network audit: `abhed run` on the local model, with bash in the microVM, traced
//! with `strace -f -e trace=%network` (abhed, QEMU and every other child). With no remote model
//! endpoint configured, no socket beyond AF_UNIX (or loopback) may be opened or addressed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::cli::{Env, json_lines};

/// Every traced syscall that names a socket family other than AF_UNIX, unless it is a loopback
/// address.
fn violations(trace: &str) -> Vec<String> {
    let mut bad = Vec::new();
    for line in trace.lines() {
        let call = line.split_once(' ').map_or(line, |(_, c)| c).trim_start();
        let families: Vec<&str> = call
            .match_indices("AF_")
            .map(|(i, _)| {
                let rest = &call[i..];
                &rest[..rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len())]
            })
            .collect();
        for f in families {
            let loopback = (f == "AF_INET" && call.contains("inet_addr(\"127."))
                || (f == "AF_INET6" && call.contains("inet_pton(AF_INET6, \"::1\""));
            if f != "AF_UNIX" && f != "AF_LOCAL" && !loopback {
                bad.push(line.to_string());
            }
        }
    }
    bad
}

fn traced(env: &Env, args: &[&str]) -> (std::process::Output, String) {
    let trace = env.ws.parent().unwrap().join(format!("net-{}.trace", args[0]));
    let t = trace.to_str().unwrap();
    let out = env
        .command_under(&["strace", "-f", "-qq", "-o", t, "-e", "trace=%network,execve"], args)
        .output()
        .unwrap_or_else(|e| panic!("cannot start strace ({e}); install it: apt-get install strace"));
    (out, std::fs::read_to_string(&trace).unwrap_or_default())
}

#[test]
fn a_local_run_opens_no_socket_but_unix_ones() {
    let env = Env::new();
    std::fs::write(env.ws.join("VERSION.toml"), "version = \"2.4.1\"\n").unwrap();
    let model = abhed::model::locate::small_model_path().unwrap().display().to_string();

    // A real task on the real model; the model may or may not call bash.
    let task = "Use the bash tool to run: cat VERSION.toml. Then answer with the version it prints.";
    let (out, run_trace) =
        traced(&env, &["run", task, "--json", "--model", &model, "--max-turns", "3", "--max-reply-tokens", "96"]);
    let events = json_lines(&out.stdout);
    assert_eq!(events.last().unwrap()["type"], "run_end", "{}", String::from_utf8_lossy(&out.stderr));
    // One bash call, certainly, so that QEMU and the guest agent are in the trace.
    let (out, bash_trace) =
        traced(&env, &["tool", "bash", r#"{"command": "cat VERSION.toml", "description": "show it"}"#]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("2.4.1"), "{}", String::from_utf8_lossy(&out.stderr));

    for trace in [&run_trace, &bash_trace] {
        // The exec of abhed itself is always there: strace did trace.
        assert!(trace.contains("execve("), "strace traced nothing: {trace}");
        let bad = violations(trace);
        assert!(bad.is_empty(), "sockets beyond AF_UNIX/loopback:\n{}", bad.join("\n"));
    }
    // The trace did see the VM's control socket (so it followed the children).
    assert!(bash_trace.contains("sa_family=AF_UNIX") && bash_trace.contains("agent.sock"), "{bash_trace}");
}

#[test]
fn the_audit_flags_an_internet_socket_and_passes_loopback() {
    let trace = r#"12 socket(AF_UNIX, SOCK_STREAM|SOCK_CLOEXEC, 0) = 7
12 connect(7, {sa_family=AF_UNIX, sun_path="/tmp/x/agent.sock"}, 34) = 0
13 socket(AF_INET, SOCK_STREAM, IPPROTO_TCP) = 8
13 connect(8, {sa_family=AF_INET, sin_port=htons(8080), sin_addr=inet_addr("127.0.0.1")}, 16) = 0
14 connect(9, {sa_family=AF_INET, sin_port=htons(443), sin_addr=inet_addr("93.184.216.34")}, 16) = -1
15 socket(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE) = 4"#;
    let bad = violations(trace);
    assert_eq!(bad.len(), 3, "{bad:?}");
    assert!(bad[0].starts_with("13 socket(AF_INET"));
    assert!(bad[1].contains("93.184.216.34"));
    assert!(bad[2].contains("AF_NETLINK"));
}
