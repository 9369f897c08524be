//! Another agent run on the suite (`abhed eval --peer CMD`), so Abhed's figures stand beside
//! those of an agent people already use, on the same tasks, the same checks in the same
//! microVM, the same model behind a llama-server (docs/EVAL.md, "Side by side with a peer").
//!
//! The peer is the operator's own command, run on the host with bash in the task's workspace:
//! it is not sandboxed, as it would not be when the operator runs it by hand. It reads the task
//! from `ABHED_TASK`; what it prints on stdout is its final answer (a wrapper prints only the
//! model's own words, or its console would match the answer regexes with the task's words).

use std::fs::File;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use rustix::process::{Pid, Signal, kill_process_group};

/// How often a running peer is polled for its end.
const POLL: Duration = Duration::from_millis(200);
/// How much of the peer's stderr the report keeps when it fails.
const STDERR_CHARS: usize = 600;

/// The peer's command line and what it is told about the model.
#[derive(Debug, Clone)]
pub struct Peer {
    pub command: String,
    /// The GGUF the peer's server was started with, passed on as `ABHED_MODEL`.
    pub model: Option<std::path::PathBuf>,
}

/// How one peer run ended.
#[derive(Debug)]
pub struct PeerRun {
    /// `done` (exit 0), `wall_time` (killed at the task's limit) or `exit_N` / `signal_N`.
    pub stop: String,
    /// Its stdout.
    pub answer: String,
    /// The end of its stderr.
    pub stderr_tail: String,
}

impl Peer {
    /// Run the peer on `task` in `ws`, killed with its whole process group after `limit`.
    pub fn run(&self, ws: &Path, task: &str, limit: Duration) -> Result<PeerRun> {
        let out = tempfile::tempfile().context("cannot make a file for the peer's stdout")?;
        let err = tempfile::tempfile().context("cannot make a file for the peer's stderr")?;
        let mut cmd = Command::new("bash");
        cmd.arg("-c")
            .arg(&self.command)
            .current_dir(ws)
            .env("ABHED_TASK", task)
            .env("ABHED_TASK_TIMEOUT_S", limit.as_secs().to_string())
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(err.try_clone()?);
        if let Some(m) = &self.model {
            cmd.env("ABHED_MODEL", m);
        }
        // Its own group, so a timeout kills what it started too (a server, a subshell).
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let mut child = cmd.spawn().with_context(|| format!("cannot start the peer `{}`", self.command))?;
        let pid = Pid::from_child(&child);
        let start = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait()? {
                break Some(s);
            }
            if start.elapsed() >= limit {
                break None;
            }
            std::thread::sleep(POLL);
        };
        // Also after a normal exit: whatever it left running must not outlive the task.
        let _ = kill_process_group(pid, Signal::KILL);
        if status.is_none() {
            child.wait()?;
        }
        let stop = match status {
            None => "wall_time".to_string(),
            Some(s) if s.success() => "done".to_string(),
            Some(s) => match (s.code(), std::os::unix::process::ExitStatusExt::signal(&s)) {
                (Some(c), _) => format!("exit_{c}"),
                (None, sig) => format!("signal_{}", sig.unwrap_or_default()),
            },
        };
        Ok(PeerRun { stop, answer: read_all(out)?, stderr_tail: tail(&read_all(err)?, STDERR_CHARS) })
    }
}

fn read_all(mut f: File) -> Result<String> {
    use std::io::{Read as _, Seek as _};
    f.rewind()?;
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

fn tail(s: &str, n: usize) -> String {
    let chars: Vec<char> = s.trim_end().chars().collect();
    chars[chars.len().saturating_sub(n)..].iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(command: &str) -> Peer {
        Peer { command: command.to_string(), model: None }
    }

    #[test]
    fn the_peer_reads_the_task_and_its_stdout_is_the_answer() -> Result<()> {
        let ws = tempfile::tempdir()?;
        let r = peer(r#"printf '%s' "$ABHED_TASK" > asked; echo 'the answer'; echo noise >&2"#).run(
            ws.path(),
            "rename foo",
            Duration::from_secs(20),
        )?;
        assert_eq!(r.stop, "done");
        assert_eq!(r.answer, "the answer\n");
        assert_eq!(r.stderr_tail, "noise");
        assert_eq!(std::fs::read_to_string(ws.path().join("asked"))?, "rename foo");
        Ok(())
    }

    #[test]
    fn a_peer_past_its_limit_is_killed_with_what_it_started() -> Result<()> {
        let ws = tempfile::tempdir()?;
        let start = Instant::now();
        // The background sleep would keep a pipe open forever if only bash were killed.
        let r = peer("(sleep 30; touch late) & sleep 30").run(ws.path(), "t", Duration::from_secs(1))?;
        assert_eq!(r.stop, "wall_time");
        assert!(start.elapsed() < Duration::from_secs(10), "{:?}", start.elapsed());
        std::thread::sleep(Duration::from_millis(300));
        assert!(!ws.path().join("late").exists());
        Ok(())
    }

    #[test]
    fn a_failing_peer_says_how_it_ended() -> Result<()> {
        let ws = tempfile::tempdir()?;
        let r = peer("echo broke >&2; exit 3").run(ws.path(), "t", Duration::from_secs(20))?;
        assert_eq!(r.stop, "exit_3");
        assert_eq!(r.stderr_tail, "broke");
        Ok(())
    }
}
