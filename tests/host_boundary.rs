//! The host boundary under a path race: while the file tools and the instruction-file reader
//! run, a loop swaps a workspace directory with a symlink to a host directory outside the
//! workspace, from the host (`renameat2(RENAME_EXCHANGE)`) and from inside the microVM (a bash
//! job renaming in a loop). Nothing outside may be read or touched, every reported success must
//! be true, and no call may end in an internal error.
//!
//! `ABHED_RACE_ATTEMPTS` sets the calls per tool (default 200, as CI runs it; the benchmark run
//! in docs/BENCHMARKS.md uses 10,000).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use abhed::agent::execute;
use abhed::agent::prompt::system_prompt;
use abhed::approval::gate::{Answer, Approvals, Approver, Question};
use abhed::config::Config;
use abhed::model::ToolCall;
use abhed::sandbox::{SessionSandbox, Workspace};
use abhed::store::{Session, Store};
use abhed::tools::{Registry, ToolContext};

const OUTSIDE_TEXT: &str = "OUTSIDE-SECRET";
const OUTSIDE_INSTRUCTIONS: &str = "OUTSIDE-INSTRUCTIONS";

fn attempts() -> usize {
    std::env::var("ABHED_RACE_ATTEMPTS").ok().and_then(|v| v.parse().ok()).unwrap_or(200)
}

/// The operator says yes to everything: the policy is not what is tested here.
struct Yes;

impl Approver for Yes {
    fn ask(&self, _: &Question<'_>) -> Option<Answer> {
        Some(Answer::Once)
    }
}

/// A workspace with a directory `d` and a symlink `lnk` to a host directory outside, swapped
/// by someone; and that outside directory, holding look-alikes of the files inside.
struct Field {
    _tmp: tempfile::TempDir,
    ws: PathBuf,
    outside: PathBuf,
    /// The outside directory's files and contents, as they must stay.
    outside_before: BTreeMap<PathBuf, Vec<u8>>,
    workspace: Workspace,
    config: Config,
    sandbox: SessionSandbox,
    store: Store,
    registry: Registry,
}

impl Field {
    fn new() -> Field {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let ws = root.join("ws");
        let outside = root.join("outside");
        for d in [&ws, &outside, &ws.join("d")] {
            std::fs::create_dir(d).unwrap();
        }
        // Look-alikes: whatever the tools are asked about inside exists outside too, so a call
        // steered outside would find something to read or overwrite.
        for name in ["secret.txt", "e.txt", "only_outside.txt"] {
            std::fs::write(outside.join(name), format!("{OUTSIDE_TEXT} {name}\n")).unwrap();
        }
        std::fs::write(outside.join("ABHED.md"), format!("{OUTSIDE_INSTRUCTIONS}\n")).unwrap();
        std::fs::write(ws.join("d/secret.txt"), "inside secret\n").unwrap();
        std::fs::write(ws.join("d/e.txt"), "n=0\n").unwrap();
        std::fs::write(ws.join("ABHED.md"), "Inside instructions.\n").unwrap();
        std::os::unix::fs::symlink(&outside, ws.join("lnk")).unwrap();
        std::os::unix::fs::symlink(outside.join("ABHED.md"), ws.join("ABHED.lnk")).unwrap();
        let outside_before = snapshot(&outside);

        let workspace = Workspace::new(&ws, &[]).unwrap();
        let mut config = Config::default();
        config.sandbox.accel = std::env::var("ABHED_TEST_ACCEL").unwrap_or_else(|_| "tcg".into());
        config.sandbox.boot_timeout_s = 120;
        let sandbox = SessionSandbox::new(&config.sandbox, &workspace);
        let store = Store::open(&root.join("abhed.db")).unwrap();
        Field {
            _tmp: tmp,
            ws,
            outside,
            outside_before,
            workspace,
            config,
            sandbox,
            store,
            registry: Registry::native(),
        }
    }

    fn call(&self, session: &Session<'_>, approvals: &Approvals, tool: &str, args: Value) -> Call {
        self.tools().call(session, approvals, tool, args)
    }

    /// What a call needs, apart from the store (a connection stays on its thread).
    fn tools(&self) -> Tools<'_> {
        Tools { workspace: &self.workspace, config: &self.config, sandbox: &self.sandbox, registry: &self.registry }
    }

    fn path(&self, rel: &str) -> String {
        self.ws.join(rel).display().to_string()
    }

    /// The one of `d` and `lnk` that is the real directory now.
    fn real_dir(&self) -> PathBuf {
        ["d", "lnk"].iter().map(|n| self.ws.join(n)).find(|p| std::fs::symlink_metadata(p).unwrap().is_dir()).unwrap()
    }
}

#[derive(Clone, Copy)]
struct Tools<'a> {
    workspace: &'a Workspace,
    config: &'a Config,
    sandbox: &'a SessionSandbox,
    registry: &'a Registry,
}

impl Tools<'_> {
    fn call(&self, session: &Session<'_>, approvals: &Approvals, tool: &str, args: Value) -> Call {
        let ctx = ToolContext {
            workspace: self.workspace,
            config: self.config,
            session,
            sandbox: self.sandbox,
            approvals,
            delegate: None,
            output_budget: None,
        };
        let call = ToolCall { name: tool.to_string(), arguments: args.to_string() };
        match execute(self.registry, &ctx, &call) {
            Ok(o) => match o.result {
                Ok(out) => Call::Ok(out.text),
                Err(e) => Call::Err(e.code.to_string(), e.render(), e.mutated),
            },
            Err(fault) => Call::Internal(format!("{fault:#}")),
        }
    }
}

enum Call {
    Ok(String),
    Err(String, String, bool),
    Internal(String),
}

/// Every file under `dir` and its content.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        let meta = std::fs::symlink_metadata(&p).unwrap();
        if meta.is_dir() {
            out.extend(snapshot(&p));
        } else {
            out.insert(p.clone(), std::fs::read(&p).unwrap_or_default());
        }
    }
    out
}

/// What the race did, per tool: outcome counts, and the violations found.
#[derive(Default)]
struct Tally {
    outcomes: BTreeMap<String, BTreeMap<String, usize>>,
    violations: Vec<String>,
}

impl Tally {
    fn count(&mut self, tool: &str, outcome: &str) {
        *self.outcomes.entry(tool.to_string()).or_default().entry(outcome.to_string()).or_default() += 1;
    }

    fn record(&mut self, tool: &str, call: &Call) {
        match call {
            Call::Ok(text) => {
                self.count(tool, "ok");
                if text.contains(OUTSIDE_TEXT) || text.contains("only_outside") {
                    self.violations.push(format!("{tool} returned what is outside: {text}"));
                }
            }
            Call::Err(code, text, _) => {
                self.count(tool, code);
                if text.contains(OUTSIDE_TEXT) {
                    self.violations.push(format!("{tool}'s error shows what is outside: {text}"));
                }
            }
            Call::Internal(e) => {
                self.count(tool, "INTERNAL");
                self.violations.push(format!("{tool} ended in an internal error: {e}"));
            }
        }
    }
}

/// What the calls reported done, to check once the swapping stopped.
#[derive(Default)]
struct Claims {
    written: Vec<usize>,
    failed_writes: Vec<usize>,
    edits: u64,
}

/// Run every file tool `n` times against the swapping field.
fn hammer(f: &Field, n: usize) -> (Tally, Claims) {
    let session = f.store.create_session(&f.ws).unwrap();
    let (approvals, _) = Approvals::from_config(&f.config, Box::new(Yes)).unwrap();
    let mut t = Tally::default();
    let mut written = Vec::new();
    let mut failed_writes = Vec::new();
    let mut edits = 0u64;
    for i in 0..n {
        let read = f.call(&session, &approvals, "read", json!({"path": f.path("d/secret.txt")}));
        t.record("read", &read);

        let content = format!("write-{i}\n");
        let w = f.call(
            &session,
            &approvals,
            "write",
            json!({"path": f.path(&format!("d/new_{i}.txt")), "content": content}),
        );
        match &w {
            Call::Ok(_) => written.push(i),
            Call::Err(_, _, false) => failed_writes.push(i),
            _ => {}
        }
        t.record("write", &w);

        // read, then edit n=K to n=K+1: the final count must equal the edits reported done.
        if let Call::Ok(text) = f.call(&session, &approvals, "read", json!({"path": f.path("d/e.txt")}))
            && let Some(k) = text.lines().find_map(|l| l.split_once("\tn=").map(|(_, k)| k.to_string()))
            && let Ok(k) = k.trim().parse::<u64>()
        {
            let e = f.call(
                &session,
                &approvals,
                "edit",
                json!({"path": f.path("d/e.txt"), "old_string": format!("n={k}"), "new_string": format!("n={}", k + 1)}),
            );
            if matches!(e, Call::Ok(_)) {
                edits += 1;
            }
            t.record("edit", &e);
        }

        t.record("glob", &f.call(&session, &approvals, "glob", json!({"pattern": "**/*", "path": f.path("d")})));
        t.record(
            "grep",
            &f.call(&session, &approvals, "grep", json!({"pattern": "OUTSIDE-SECR[E]T", "path": f.path("")})),
        );
        t.record(
            "grep",
            &f.call(
                &session,
                &approvals,
                "grep",
                json!({"pattern": "secret", "path": f.path("d/secret.txt"), "output_mode": "content"}),
            ),
        );

        let prompt = system_prompt(&f.registry, &f.ws);
        t.count("instructions", "read");
        if prompt.contains(OUTSIDE_INSTRUCTIONS) {
            t.violations.push("the system prompt holds the outside ABHED.md".into());
        }
    }
    (t, Claims { written, failed_writes, edits })
}

/// Once the swapping stopped: outside unchanged, every reported write there, no failed one,
/// the edit count right, no temp file anywhere.
fn check_after(f: &Field, claims: &Claims) -> Vec<String> {
    let Claims { written, failed_writes: failed, edits } = claims;
    let mut v = Vec::new();
    let now = snapshot(&f.outside);
    if now != f.outside_before {
        let changed: Vec<_> = now.keys().filter(|k| f.outside_before.get(*k) != now.get(*k)).collect();
        v.push(format!("the outside directory changed: {changed:?}"));
    }
    let dir = f.real_dir();
    for i in written {
        let p = dir.join(format!("new_{i}.txt"));
        match std::fs::read_to_string(&p) {
            Ok(c) if c == format!("write-{i}\n") => {}
            other => v.push(format!("write {i} was reported done, but {} holds {other:?}", p.display())),
        }
    }
    for i in failed {
        if dir.join(format!("new_{i}.txt")).exists() {
            v.push(format!("write {i} failed saying nothing changed, but its file exists"));
        }
    }
    let e = std::fs::read_to_string(dir.join("e.txt")).unwrap();
    if e != format!("n={edits}\n") {
        v.push(format!("{edits} edits were reported done, but e.txt holds {e:?}"));
    }
    for root in [&f.ws, &f.outside] {
        for p in snapshot(root).keys() {
            if p.file_name().is_some_and(|n| n.to_string_lossy().starts_with(".abhed-")) {
                v.push(format!("a temp file was left: {}", p.display()));
            }
        }
    }
    v
}

fn report(who: &str, t: &Tally) {
    eprintln!("race ({who}): {} calls per tool", attempts());
    for (tool, outcomes) in &t.outcomes {
        eprintln!("  {tool:<12} {outcomes:?}");
    }
    assert!(
        t.violations.is_empty(),
        "{} violations, first: {:#?}",
        t.violations.len(),
        &t.violations[..t.violations.len().min(5)]
    );
}

/// Exchange two directory entries atomically, as fast as the host allows, until told to stop.
fn host_swapper(ws: PathBuf, stop: Arc<AtomicBool>, swaps: Arc<AtomicU64>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let cwd = rustix::fs::CWD;
        let pairs = [(ws.join("d"), ws.join("lnk")), (ws.join("ABHED.md"), ws.join("ABHED.lnk"))];
        while !stop.load(Ordering::Relaxed) {
            for (a, b) in &pairs {
                rustix::fs::renameat_with(cwd, a, cwd, b, rustix::fs::RenameFlags::EXCHANGE).unwrap();
                swaps.fetch_add(1, Ordering::Relaxed);
            }
        }
    })
}

#[test]
fn a_race_driven_from_the_host_never_leads_the_tools_outside() {
    let f = Field::new();
    let stop = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(AtomicU64::new(0));
    let swapper = host_swapper(f.ws.clone(), Arc::clone(&stop), Arc::clone(&swaps));
    let (mut t, claims) = hammer(&f, attempts());
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    t.violations.extend(check_after(&f, &claims));
    eprintln!("host swapper: {} exchanges", swaps.load(Ordering::Relaxed));
    // The race must really have been run: both outcomes seen.
    let reads = &t.outcomes["read"];
    assert!(reads.get("ok").copied().unwrap_or(0) > 0, "{reads:?}");
    assert!(reads.len() > 1, "the swap never hit a read: {reads:?}");
    report("host", &t);
}

#[test]
fn a_race_driven_from_inside_the_vm_never_leads_the_tools_outside() {
    let f = Field::new();
    let session = f.store.create_session(&f.ws).unwrap();
    let (approvals, _) = Approvals::from_config(&f.config, Box::new(Yes)).unwrap();
    // The guest renames as a process in the VM would, through the shared folder: it cannot
    // exchange atomically (busybox mv), so there are moments with neither name. Each round
    // swaps twice, so between rounds the names are as they began; `.stop` ends it there.
    let round = "mv d x; mv lnk d; mv x lnk; mv d x; mv lnk d; mv x lnk; \
                 mv ABHED.md y; mv ABHED.lnk ABHED.md; mv y ABHED.lnk; mv ABHED.md y; mv ABHED.lnk ABHED.md; mv y ABHED.lnk";
    let command =
        format!("cd {} && (while [ ! -e .stop ]; do {round}; done; touch .stopped) > /dev/null 2>&1", f.ws.display());
    match f.call(
        &session,
        &approvals,
        "bash",
        json!({"command": command, "description": "swap in a loop", "background": true}),
    ) {
        Call::Ok(_) => {}
        Call::Err(code, text, _) => panic!("the swapper did not start: {code}: {text}"),
        Call::Internal(e) => panic!("the swapper did not start: {e}"),
    }
    // Wait until the loop runs (TCG is slow to start a shell).
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while std::fs::symlink_metadata(f.ws.join("d")).is_ok_and(|m| m.is_dir()) {
        assert!(std::time::Instant::now() < deadline, "the guest's swapper never swapped");
        std::thread::sleep(Duration::from_millis(5));
    }
    let (mut t, claims) = hammer(&f, attempts());
    std::fs::write(f.ws.join(".stop"), "").unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !f.ws.join(".stopped").exists() {
        assert!(std::time::Instant::now() < deadline, "the guest's swapper did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
    t.violations.extend(check_after(&f, &claims));
    let swapped: usize = t
        .outcomes
        .values()
        .flat_map(|o| o.iter())
        .filter(|(k, _)| k.as_str() != "ok" && k.as_str() != "read")
        .map(|(_, n)| n)
        .sum();
    eprintln!("guest swapper: {swapped} calls met a swap");
    report("guest", &t);
}

/// Issue 15, item 8: two edits of one file at once in one session. Each reported success must
/// be in the file; the loser of a race is told (stale_read), never silently overwritten.
#[test]
fn concurrent_edits_of_one_file_lose_no_update() {
    let f = Field::new();
    let session_id = f.store.create_session(&f.ws).unwrap().id().to_string();
    let file = f.ws.join("d/two.txt");
    std::fs::write(&file, "a=0\nb=0\n").unwrap();
    let rounds = 25;
    let barrier = std::sync::Barrier::new(2);
    let done: Vec<u64> = std::thread::scope(|s| {
        let workers: Vec<_> = ["a", "b"]
            .into_iter()
            .map(|key| {
                let (tools, barrier, session_id) = (f.tools(), &barrier, &session_id);
                let (db, config, two) = (f.ws.parent().unwrap().join("abhed.db"), &f.config, f.path("d/two.txt"));
                s.spawn(move || {
                    // Its own connection to the same session, as a second `abhed tool --session`.
                    let store = Store::open(&db).unwrap();
                    let session = store.open_session(session_id).unwrap().unwrap();
                    let (approvals, _) = Approvals::from_config(config, Box::new(Yes)).unwrap();
                    let mut done = 0u64;
                    for _ in 0..rounds {
                        let Call::Ok(text) = tools.call(&session, &approvals, "read", json!({"path": two})) else {
                            panic!("read failed")
                        };
                        let k: u64 = text
                            .lines()
                            .find_map(|l| l.split_once(&format!("\t{key}=")).map(|(_, k)| k.to_string()))
                            .unwrap()
                            .parse()
                            .unwrap();
                        barrier.wait();
                        let old = format!("{key}={k}");
                        let new = format!("{key}={}", k + 1);
                        match tools.call(
                            &session,
                            &approvals,
                            "edit",
                            json!({"path": two, "old_string": old, "new_string": new}),
                        ) {
                            Call::Ok(_) => done += 1,
                            Call::Err(code, text, mutated) => {
                                assert_eq!(code, "stale_read", "{text}");
                                assert!(!mutated);
                            }
                            Call::Internal(e) => panic!("internal error: {e}"),
                        }
                        barrier.wait();
                    }
                    done
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let text = std::fs::read_to_string(&file).unwrap();
    assert_eq!(text, format!("a={}\nb={}\n", done[0], done[1]), "every reported edit is in the file");
    eprintln!("{rounds} rounds: {} and {} edits done", done[0], done[1]);
}

/// Issue 15, item 12: a temp file that a killed abhed left is removed by the next start. The
/// kill is simulated exactly: the journal of a process that no longer holds its lock, and its
/// temp file, as `kill -9` in the middle of a write leaves them.
#[test]
fn the_next_start_removes_the_temp_files_a_killed_abhed_left() {
    let env = common::cli::Env::new();
    let journal = env.home.join("tmp-journal");
    std::fs::create_dir_all(&journal).unwrap();
    let left = env.ws.join(".abhed-4000000-0-1f.tmp");
    std::fs::write(&left, "half a file").unwrap();
    let bystander = env.ws.join(".abhed-notes.tmp");
    std::fs::write(&bystander, "not ours").unwrap();
    let list: Vec<u8> = [left.as_os_str(), bystander.as_os_str()]
        .iter()
        .flat_map(|p| p.as_encoded_bytes().iter().copied().chain([0]))
        .collect();
    std::fs::write(journal.join("4000000.list"), list).unwrap();
    std::fs::write(journal.join("4000000.lock"), "").unwrap();
    std::fs::write(env.ws.join("a.txt"), "a\n").unwrap();
    let out = env.cmd(&["tool", "read", &format!("{{\"path\": \"{}\"}}", env.path("a.txt"))]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!left.exists(), "the left temp file is removed");
    assert!(bystander.exists(), "a file not named as ours (pid and counter) is not: {}", bystander.display());
    assert!(!journal.join("4000000.list").exists());
}
