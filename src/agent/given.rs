//! The calls a new task plainly asks for, made for the model before its first turn
//! (`run.given_calls`): reading the files it names, and running the command it says fails.
//!
//! "Set the cache TTL in config/app.toml", "node test.js is failing; fix lib/duration.js": a
//! task that names a file is about that file, and one that says a command fails is answered
//! first by running it. In the suite's transcripts (2026-12-07) the 1.5B model's first call on
//! such a task was often a write of the file unread (refused as `not_read`) or a grep of a path
//! it guessed; told that `python3 main.py` fails, it edited main.py without running it, and ran
//! it only when a note sent its give-up back. Each such turn costs a small model on 2 cores
//! some 10–30 s. The loop makes these calls itself, as given calls on record (a `model_turn`
//! with `given: true`, then the call's action and observation, through the dispatch and its
//! approvals like any call), so the log, a resumed session and the model all see them as calls
//! like any other — as a file mentioned with `@` is attached in peer agents.
//!
//! Only what is cheap and certainly meant: a word of the task that is the path of a regular
//! text file in the workspace (relative, or absolute under it), not a symlink, small enough to
//! read whole, at most [`MAX_FILES`] of them in the order the task names them; and the first
//! command the task names as its check (`steer::named_commands`), when the task says that it
//! fails.

use std::path::{Path, PathBuf};

use crate::sandbox::Workspace;
use crate::sandbox::confined::Meta;
use crate::store::Session;
use crate::tools::fsutil;

/// At most this many files are read for a task.
pub const MAX_FILES: usize = 3;
/// A file over this many bytes is left for the model to read (with `offset`/`limit` if it
/// needs to): whole, it would cost more prompt time than the turn it saves.
pub const MAX_FILE_BYTES: u64 = 8 * 1024;
/// All the files read for one task, together.
pub const MAX_TOTAL_BYTES: u64 = 12 * 1024;

/// Why a given read is on record (`model_turn.given_why`).
pub const READ_WHY: &str = "the task names this file";
/// Why a given command is on record.
pub const RUN_WHY: &str = "the task says this command fails";
/// A given command's time limit: a check that fails does so in seconds; a command that would
/// run on (a server) is the model's to run in the background.
pub const RUN_TIMEOUT_MS: u64 = 60_000;

/// The command to run for a task that says it fails ("python3 main.py fails", "`gcc -Wall -o
/// stats stats.c` fails", "bash report.sh stops with a syntax error"): the first one it names.
pub fn failing_command(task: &str) -> Option<String> {
    const FAILS: &[&str] =
        &["fail", "fails", "failed", "failing", "error", "errors", "broken", "breaks", "crash", "crashes", "crashed"];
    let says_fails =
        task.split(|c: char| !c.is_alphanumeric()).any(|w| FAILS.contains(&w.to_ascii_lowercase().as_str()));
    if !says_fails {
        return None;
    }
    super::steer::named_commands(task).into_iter().next()
}

/// The absolute paths (as the model would give them) of the files `task` names that are worth
/// reading for it, in the order named. Files this session has already read, unchanged since,
/// are left out (a chat's next message naming the same file).
pub fn files(task: &str, ws: &Workspace, session: &Session<'_>) -> Vec<String> {
    let mut out: Vec<(String, PathBuf)> = Vec::new();
    let mut total = 0;
    for word in words(task) {
        if out.len() == MAX_FILES {
            break;
        }
        let raw = if Path::new(word).is_absolute() {
            PathBuf::from(word)
        } else {
            ws.root().join(word.trim_start_matches("./"))
        };
        let Ok(resolved) = ws.resolve("path", &raw.display().to_string()) else { continue };
        if out.iter().any(|(_, real)| *real == resolved.real) {
            continue;
        }
        let Some(meta) = small_text(ws, &resolved.real) else { continue };
        if total + meta.len > MAX_TOTAL_BYTES || read_unchanged(session, &resolved.real, &meta) {
            continue;
        }
        total += meta.len;
        out.push((resolved.shown.display().to_string(), resolved.real));
    }
    out.into_iter().map(|(shown, _)| shown).collect()
}

/// The words of a task that may be paths: split at spaces, quotes and brackets, the sentence's
/// punctuation and a `:LINE` suffix taken off. A word counts if it has a `/` or a `.` in it, or
/// begins with a capital (`Makefile`, `Dockerfile`); `..` anywhere, a URL or an option does not.
fn words(task: &str) -> impl Iterator<Item = &str> {
    task.split(|c: char| c.is_whitespace() || "`\"'()[]{}<>,;=|".contains(c))
        .map(|w| w.split(':').next().unwrap_or_default().trim_end_matches(['.', '!', '?']))
        .filter(|w| {
            w.len() >= 2
                && !w.starts_with('-')
                && !w.contains("..")
                && w.chars().all(|c| c.is_ascii_alphanumeric() || "._-/+@~".contains(c))
                && (w.contains('/') || w.contains('.') || w.starts_with(|c: char| c.is_ascii_uppercase()))
        })
}

/// The metadata of `real` if it is a regular text file of at most [`MAX_FILE_BYTES`], opened
/// from the workspace's own handles (no symlink followed, whatever the guest swaps in meanwhile).
fn small_text(ws: &Workspace, real: &Path) -> Option<Meta> {
    let (dir, name) = ws.open_parent(real).ok()?;
    let (mut file, meta) = dir.open_file(&name).ok()?;
    if meta.len == 0 || meta.len > MAX_FILE_BYTES {
        return None;
    }
    let head = fsutil::read_head(&mut file).ok()?;
    fsutil::sniff_binary(&head).is_none().then_some(meta)
}

/// Whether this session's last read of `real` saw the whole of the file as it is now (`meta`,
/// from the open above: same size and modification time; the read tool itself checks the
/// content before any edit).
fn read_unchanged(session: &Session<'_>, real: &Path, meta: &Meta) -> bool {
    let Ok(Some(rec)) = session.last_read(real) else { return false };
    rec.size == meta.len
        && rec.mtime_ns == meta.mtime_ns
        && rec.lines_seen.first().is_some_and(|&(from, to)| from == 1 && to >= rec.total_lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_a_task_says_fails_is_run_and_only_that() {
        let cases = [
            ("python3 main.py fails; fix it.", Some("python3 main.py")),
            ("`gcc -Wall -o stats stats.c` fails. Fix stats.c", Some("gcc -Wall -o stats stats.c")),
            ("bash report.sh stops with a syntax error. Fix report.sh.", Some("bash report.sh")),
            ("node test.js is failing. Fix the bug in lib/duration.js", Some("node test.js")),
            ("python3 -m unittest fails in this repo.", Some("python3 -m unittest")),
            ("python3 main.py and python3 test_pricing.py must still work.", None),
            ("Write a bash script that counts errors.", None),
            ("Deploy this app over ssh; it fails often.", None),
        ];
        for (task, want) in cases {
            assert_eq!(failing_command(task).as_deref(), want, "{task}");
        }
    }

    #[test]
    fn words_are_paths_as_tasks_name_them() {
        let task = "Set the cache TTL in config/app.toml. Then run `node test.js`; see src/a.py:12, \
                    the Makefile and README.md! Not ../etc/passwd, https://x.io/a.js, --x.y or e.g the end.";
        let got: Vec<&str> = words(task).collect();
        // Capitalised words are only looked up (a stat each): the file must exist to be read.
        assert_eq!(
            got,
            ["Set", "TTL", "config/app.toml", "Then", "test.js", "src/a.py", "Makefile", "README.md", "Not", "e.g"]
        );
    }
}
