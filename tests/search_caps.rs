//! glob and grep over more files than their caps, through the dispatcher as the model calls
//! them: 1000 paths at most, the truncation note, `truncated: true`, newest first; grep's
//! content caps; parallel results identical from run to run.
// The helpers below are test code outside #[test] functions.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::fs::File;
use std::path::Path;
use std::time::{Duration, SystemTime};

use abhed::tools::ToolOutput;
use common::Harness;

const FILES: usize = 1100;

/// 1100 files `d{i/100}/f{i}.txt`, file i modified i seconds after a fixed base, each holding
/// two matching lines.
fn fixture() -> Harness {
    let h = Harness::new();
    let base = SystemTime::UNIX_EPOCH + Duration::from_secs(1_767_225_600);
    for i in 0..FILES {
        let dir = h.ws.join(format!("d{:02}", i / 100));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("f{i:04}.txt"));
        std::fs::write(&path, format!("needle {i}\nhay\nneedle again\n")).unwrap();
        File::options().write(true).open(&path).unwrap().set_modified(base + Duration::from_secs(i as u64)).unwrap();
    }
    h
}

/// One call in a fresh session; the tool must succeed.
fn call(h: &Harness, tool: &str, args: serde_json::Value) -> ToolOutput {
    match h.call(&h.session(), tool, args).result {
        Ok(out) => out,
        Err(e) => panic!("{tool} failed: {}", e.render()),
    }
}

fn file(ws: &Path, i: usize) -> String {
    ws.join(format!("d{:02}/f{i:04}.txt", i / 100)).display().to_string()
}

#[test]
fn glob_caps_at_1000_newest_first() {
    let fx = fixture();
    let out = call(&fx, "glob", serde_json::json!({"pattern": "**/*.txt"}));
    assert!(out.truncated);
    assert!(!out.mutated);
    let lines: Vec<&str> = out.text.lines().collect();
    assert_eq!(lines.len(), 1001, "1000 paths and the note");
    assert_eq!(lines[0], file(&fx.ws, FILES - 1), "newest first");
    assert_eq!(lines[999], file(&fx.ws, FILES - 1000));
    assert_eq!(
        lines[1000],
        "[truncated: showing 1000 of 1100 matches, newest first. Narrow the pattern or search a subdirectory with path.]"
    );
    // The same call gives the same text, whatever order the threads found the files in.
    assert_eq!(call(&fx, "glob", serde_json::json!({"pattern": "**/*.txt"})).text, out.text);
}

#[test]
fn grep_files_with_matches_caps_at_1000_newest_first() {
    let fx = fixture();
    let out = call(&fx, "grep", serde_json::json!({"pattern": "needle"}));
    assert!(out.truncated);
    let lines: Vec<&str> = out.text.lines().collect();
    assert_eq!(lines.len(), 1001);
    assert_eq!(lines[0], file(&fx.ws, FILES - 1));
    assert!(
        lines[1000].starts_with("[truncated: showing 1000 of 1100 files with matches, newest first."),
        "{}",
        lines[1000]
    );
    assert_eq!(call(&fx, "grep", serde_json::json!({"pattern": "needle"})).text, out.text);
}

#[test]
fn grep_count_caps_at_1000_by_path() {
    let fx = fixture();
    let out = call(&fx, "grep", serde_json::json!({"pattern": "needle", "output_mode": "count"}));
    assert!(out.truncated);
    let lines: Vec<&str> = out.text.lines().collect();
    assert_eq!(lines.len(), 1001);
    assert_eq!(lines[0], format!("{}:2", file(&fx.ws, 0)), "sorted by path");
    assert_eq!(lines[999], format!("{}:2", file(&fx.ws, 999)));
    assert!(
        lines[1000].starts_with("[truncated: showing 1000 of 1100 files with matches, sorted by path."),
        "{}",
        lines[1000]
    );
}

#[test]
fn grep_content_caps_at_100_matches_in_path_order() {
    let fx = fixture();
    let out = call(&fx, "grep", serde_json::json!({"pattern": "needle", "output_mode": "content"}));
    assert!(out.truncated);
    let lines: Vec<&str> = out.text.lines().collect();
    assert_eq!(lines.len(), 101, "{}", out.text);
    assert_eq!(lines[0], format!("{}:1:needle 0", file(&fx.ws, 0)));
    assert_eq!(lines[1], format!("{}:3:needle again", file(&fx.ws, 0)));
    assert_eq!(lines[99], format!("{}:3:needle again", file(&fx.ws, 49)));
    assert!(lines[100].starts_with("[truncated: showing 100 of 2200 matching lines in 1100 files"), "{}", lines[100]);
    assert_eq!(call(&fx, "grep", serde_json::json!({"pattern": "needle", "output_mode": "content"})).text, out.text);
}

#[test]
fn under_the_cap_nothing_is_truncated() {
    let fx = fixture();
    let out = call(&fx, "glob", serde_json::json!({"pattern": "d00/*.txt"}));
    assert!(!out.truncated);
    assert_eq!(out.text.lines().count(), 100);
    assert!(!out.text.contains("[truncated"));
}
