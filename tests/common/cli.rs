//! The CLI-layer test helper: a temporary workspace and `ABHED_HOME`, and the `abhed` binary
//! run in them exactly as a person or a script runs it.

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};

use serde_json::Value;

pub struct Env {
    _tmp: tempfile::TempDir,
    pub home: PathBuf,
    /// The workspace root, canonical.
    pub ws: PathBuf,
}

impl Env {
    pub fn new() -> Env {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        let ws = tmp.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        // `ABHED_CONFIG` names this file, so it must exist (a named config that cannot be read
        // is an error); empty, it is no user config. Tests write their settings into it.
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(home.join("no-config.toml"), "").unwrap();
        let ws = ws.canonicalize().unwrap();
        Env { _tmp: tmp, home, ws }
    }

    /// The absolute path of `rel` in the workspace, as the model would write it.
    pub fn path(&self, rel: &str) -> String {
        self.ws.join(rel).display().to_string()
    }

    /// A file beside the workspace (scripts, configs), with `text`.
    pub fn file(&self, name: &str, text: &str) -> PathBuf {
        let p = self.ws.parent().unwrap().join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    /// The command, ready to run in the workspace with this env's home and no user config.
    pub fn command(&self, args: &[&str]) -> Command {
        self.command_under(&[], args)
    }

    /// The command run by `wrapper` (`strace -f ...`, say): `wrapper... abhed args...`.
    pub fn command_under(&self, wrapper: &[&str], args: &[&str]) -> Command {
        let bin = env!("CARGO_BIN_EXE_abhed");
        let mut c = match wrapper.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(bin);
                c
            }
            None => Command::new(bin),
        };
        c.args(args)
            .env("ABHED_HOME", &self.home)
            .env("ABHED_CONFIG", self.home.join("no-config.toml"))
            // The conformance gate is tested on its own (tests/conformance_cli.rs); the other
            // tests drive scripted or tiny models that have no passing report.
            .env("ABHED_ALLOW_UNQUALIFIED_MODEL", "1")
            .env_remove("ABHED_MODEL")
            .env_remove("ABHED_LOG")
            .current_dir(&self.ws)
            .stdin(Stdio::null());
        c
    }

    pub fn cmd(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    /// Started, with stdout and stderr piped.
    pub fn spawn(&self, args: &[&str]) -> Child {
        self.command(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
    }

    /// `abhed tool NAME ARGS --format json [extra]`, parsed.
    pub fn json(&self, name: &str, args: &str, extra: &[&str]) -> (i32, Value) {
        let mut argv = vec!["tool", name, args, "--format", "json"];
        argv.extend_from_slice(extra);
        let out = self.cmd(&argv);
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!("not JSON ({e}): {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
        });
        (out.status.code().unwrap(), v)
    }
}

/// Every line of `out` as JSON.
pub fn json_lines(out: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}")))
        .collect()
}
