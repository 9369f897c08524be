//! An answer that holds a new text of a file instead of changing it. Small models read a file
//! and answer "Here's the updated Dockerfile:" with the right text in a code block; told that
//! text changes no file, the 1.5B model then made an edit of its own that was wrong (it added a
//! second FROM line above the first). The lines where the answer's text differs from what read
//! showed are exactly the edits the model meant: the note lists them, so the next call can be
//! one of them.

use similar::{Algorithm, DiffOp, capture_diff_slices};

/// The most changes a note lists; an answer that differs more is a different file, or a
/// rewrite better done with write.
const MAX_HUNKS: usize = 5;
/// The most lines (not counting blank ones) a listed deletion may have.
const MAX_DELETED_LINES: usize = 3;
/// The least share of an answer block's lines that must be lines of the file read.
const MIN_OVERLAP: f64 = 0.5;
/// The least lines a block needs: a one-line snippet says nothing about a file.
const MIN_BLOCK_LINES: usize = 2;

/// What read showed of one file: its shown path, the number of the first line shown, and the
/// lines' text.
#[derive(Debug, Clone)]
pub struct Seen {
    pub path: String,
    pub first: usize,
    pub lines: Vec<String>,
}

impl Seen {
    /// From read's output: the header, then `N\tTEXT` lines (notes after them are skipped).
    pub fn from_read(path: &str, output: &str) -> Option<Seen> {
        let mut first = None;
        let mut lines = Vec::new();
        for line in output.lines().skip(1) {
            let Some((n, text)) = line.split_once('\t') else { continue };
            let Ok(n) = n.trim_start().parse::<usize>() else { continue };
            first.get_or_insert(n);
            lines.push(text.to_string());
        }
        Some(Seen { path: path.to_string(), first: first?, lines })
    }
}

impl Seen {
    /// Keep up with a call that changed the file: edit's replacements (`arguments` as the call
    /// gave them), or write's whole content. Only a file read whole can follow an edit.
    pub fn follow(&mut self, tool: &str, arguments: &serde_json::Value) {
        let text = |v: &serde_json::Value, k: &str| v.get(k).and_then(serde_json::Value::as_str).map(str::to_string);
        if tool == "write" {
            if let Some(content) = text(arguments, "content") {
                self.first = 1;
                self.lines = content.lines().map(str::to_string).collect();
            }
            return;
        }
        if self.first != 1 {
            return;
        }
        let mut members: Vec<&serde_json::Value> = vec![arguments];
        if let Some(edits) = arguments.get("edits").and_then(serde_json::Value::as_array) {
            members.extend(edits);
        }
        let mut joined = self.lines.join("\n");
        for m in members {
            let (Some(old), Some(new)) = (text(m, "old_string"), text(m, "new_string")) else { continue };
            if old.is_empty() {
                continue;
            }
            let all = m.get("replace_all").and_then(serde_json::Value::as_bool).unwrap_or(false);
            joined = if all { joined.replace(&old, &new) } else { joined.replacen(&old, &new, 1) };
        }
        self.lines = joined.split('\n').map(str::to_string).collect();
    }
}

/// One change, as edit takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The file's line where `old` starts.
    pub line: usize,
    pub old: String,
    pub new: String,
}

/// The file among `seen` that a code block of `answer` is a new text of, and the changes that
/// turn what read showed into it, when there are a few. `deletions`: lines the block leaves
/// out are changes too (the task asks to delete something); else a block that drops a few
/// lines is read as shortened. Restating a file it had just edited, the 1.5B model left out
/// two lines of deploy/staging.env, and the note made of that answer had them deleted (the
/// suite, 2026-12-07).
pub fn rewritten<'s>(answer: &str, seen: &'s [Seen], deletions: bool) -> Option<(&'s Seen, Vec<Change>)> {
    let mut best: Option<(f64, &Seen, Vec<Change>)> = None;
    for block in code_blocks(answer) {
        if block.iter().filter(|l| !l.trim().is_empty()).count() < MIN_BLOCK_LINES {
            continue;
        }
        for file in seen {
            let Some((overlap, changes)) = changes(file, &block, deletions) else { continue };
            if best.as_ref().is_none_or(|(o, ..)| overlap > *o) {
                best = Some((overlap, file, changes));
            }
        }
    }
    best.map(|(_, file, changes)| (file, changes))
}

/// The fenced code blocks of `text`, as lines, without the fence lines. A fence indented
/// (a block inside a list item: "1. Add the function:" then the block under it) takes that
/// indentation off its lines, as Markdown does; else every line would differ from the file.
pub(super) fn code_blocks(text: &str) -> Vec<Vec<&str>> {
    let mut blocks = Vec::new();
    let mut open: Option<(usize, Vec<&str>)> = None;
    for line in text.lines() {
        let indent = line.len() - line.trim_start_matches(' ').len();
        if line.trim_start().starts_with("```") {
            match open.take() {
                Some((_, block)) => blocks.push(block),
                None => open = Some((indent, Vec::new())),
            }
        } else if let Some((fence, block)) = open.as_mut() {
            block.push(line[indent.min(*fence)..].trim_end());
        }
    }
    blocks
}

/// Whether a code block of `answer` is a part of a file among `seen` as it is now, line for
/// line: an answer that shows what was done.
pub fn restates(answer: &str, seen: &[Seen]) -> bool {
    code_blocks(answer).iter().any(|block| {
        block.iter().filter(|l| !l.trim().is_empty()).count() >= MIN_BLOCK_LINES
            && seen.iter().any(|file| diff(file, block, false).is_some_and(|(_, changes)| changes.is_empty()))
    })
}

/// How much of `block` is lines of `file`, and the changes from the part of the file that the
/// block covers to the block, when there are a few.
fn changes(file: &Seen, block: &[&str], deletions: bool) -> Option<(f64, Vec<Change>)> {
    let (overlap, out) = diff(file, block, deletions)?;
    // Nothing differs: the answer restates the file. Too much differs: not a few edits.
    (!out.is_empty() && out.len() <= MAX_HUNKS).then_some((overlap, out))
}

/// How much of `block` is lines of `file`, and the changes from the part of the file that the
/// block covers (a block may show only the changed function) to the block.
fn diff(file: &Seen, mut block: &[&str], deletions: bool) -> Option<(f64, Vec<Change>)> {
    let lines: Vec<&str> = file.lines.iter().map(|l| l.trim_end()).collect();
    // A first line that names the file (`// src/money.js`) labels the block; the file does not
    // have it, and adding it is not what the answer meant.
    let name = file.path.rsplit('/').next().unwrap_or_default();
    if let Some((head, rest)) = block.split_first()
        && !name.is_empty()
        && head.contains(name)
        && !lines.contains(&head.trim_end())
    {
        block = rest;
    }
    // A changed line is still the file's line: `FROM python:3.12-slim` for `FROM python:3.9-slim`.
    let found = |l: &str| !l.trim().is_empty() && lines.iter().any(|x| like(x, l));
    // Only lines with a word or a number say which file a block is: a block of tool calls
    // written as JSON shared its `{` and `}` lines with config/app.json, and was made into an
    // edit that replaced the file's settings with the calls (the suite, 2026-12-07).
    let content = block.iter().filter(|l| says_something(l)).count();
    if content < MIN_BLOCK_LINES {
        return None;
    }
    let overlap = block.iter().filter(|l| says_something(l) && found(l)).count() as f64 / content as f64;
    if overlap < MIN_OVERLAP {
        return None;
    }
    // The span of the file the block covers: its lines found in the file's order, each at the
    // first place after the one before it, the same line before a line changed a little. (The
    // last line's last look-alike anywhere was the span's end: `ttl_seconds = 600`, ending a
    // block of the `[cache]` table, reached to the `[sessions]` table's `ttl_seconds = 86400`,
    // and the edit made of the answer deleted the four lines between; the suite, 2026-12-07.)
    let mut span: Option<(usize, usize)> = None;
    for l in block.iter().filter(|l| found(l)) {
        let from = span.map_or(0, |(_, at)| at + 1);
        let rest = &lines[from.min(lines.len())..];
        let at = rest.iter().position(|x| *x == l.trim_end()).or_else(|| rest.iter().position(|x| like(x, l)));
        if let Some(at) = at {
            span = Some((span.map_or(from + at, |(s, _)| s), from + at));
        }
    }
    let (start, end) = span?;
    // Blank lines are left out of the comparison: a model rewriting a file drops and adds
    // them, and an edit of "\n" alone matches everywhere.
    let r: Vec<usize> = (start..=end).filter(|&i| !lines[i].trim().is_empty()).collect();
    let b: Vec<usize> = (0..block.len()).filter(|&i| !block[i].trim().is_empty()).collect();
    let r_text: Vec<&str> = r.iter().map(|&i| lines[i]).collect();
    let b_text: Vec<&str> = b.iter().map(|&i| block[i]).collect();
    let text = lines.join("\n");
    let mut out = Vec::new();
    for op in capture_diff_slices(Algorithm::Myers, &r_text, &b_text) {
        let (o, n) = (op.old_range(), op.new_range());
        // The block's lines of this change, with the blank lines before them that follow the
        // block's previous non-blank line (an added function keeps its blank line above).
        let from = if n.start > 0 { b[n.start - 1] + 1 } else { b.first().copied().unwrap_or(0) };
        let added = |upto: usize| block[from..=upto].join("\n");
        let (a, z, new) = match op {
            DiffOp::Equal { .. } => continue,
            DiffOp::Replace { .. } => {
                (r[o.start], r[o.end - 1], added(b[n.end - 1]).trim_start_matches('\n').to_string())
            }
            // A long run of the file missing from the block is a part the answer did not show
            // (the 1.5B model showed one deployment of two), not one to delete.
            DiffOp::Delete { .. } if o.len() > MAX_DELETED_LINES || !deletions => continue,
            DiffOp::Delete { .. } => (r[o.start], r[o.end - 1], String::new()),
            // Inserted after the file's line before it, or above its first line.
            DiffOp::Insert { .. } if o.start > 0 => {
                let anchor = r[o.start - 1];
                (anchor, anchor, format!("{}\n{}", lines[anchor], added(b[n.end - 1])))
            }
            DiffOp::Insert { .. } => {
                let anchor = r.first().copied().unwrap_or(start);
                (anchor, anchor, format!("{}\n{}", added(b[n.end - 1]), lines[anchor]))
            }
        };
        let delete = matches!(op, DiffOp::Delete { .. });
        out.push(unique(&lines, &text, a, z, new, delete, file.first));
    }
    Some((overlap, out))
}

/// The change of lines `a..=z` of the file to `new`, its `old_string` grown upwards by whole
/// lines until it occurs once in `text` (edit refuses an ambiguous one). A deletion takes the
/// lines' line break with it.
fn unique(lines: &[&str], text: &str, mut a: usize, z: usize, mut new: String, delete: bool, first: usize) -> Change {
    let end = if delete { "\n" } else { "" };
    let mut old = format!("{}{end}", lines[a..=z].join("\n"));
    while a > 0 && text.matches(old.as_str()).count() > 1 {
        a -= 1;
        old = format!("{}\n{old}", lines[a]);
        new = format!("{}\n{new}", lines[a]);
    }
    Change { line: first + a, old, new }
}

/// Whether a line has a letter or a digit: not a bracket, a fence of punctuation or blank.
fn says_something(line: &str) -> bool {
    line.chars().any(char::is_alphanumeric)
}

/// Whether `b` is line `a`, or `a` changed a little (a version, a name): lines this short are
/// only the same when equal.
fn like(a: &str, b: &str) -> bool {
    a == b || (a.trim().len() >= 8 && strsim::normalized_levenshtein(a.trim(), b.trim()) >= 0.75)
}

/// The changes as the note lists them: edit's arguments, JSON-quoted so that tabs and
/// newlines are exact.
pub fn render(changes: &[Change]) -> String {
    let q = |s: &str| serde_json::to_string(s).unwrap_or_default();
    changes
        .iter()
        .map(|c| format!("- at line {}: \"old_string\": {}, \"new_string\": {}", c.line, q(&c.old), q(&c.new)))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(text: &str) -> Seen {
        let numbered: String = text.lines().enumerate().map(|(i, l)| format!("{}\t{l}\n", i + 1)).collect();
        Seen::from_read("/ws/Dockerfile", &format!("[read /ws/Dockerfile · sha256 abc · 3 lines · full]\n{numbered}"))
            .unwrap()
    }

    const DOCKERFILE: &str =
        "# Build stage.\nFROM python:3.9-slim AS build\nWORKDIR /src\nCOPY . .\nFROM python:3.9-slim\nCMD [\"app\"]\n";

    #[test]
    fn an_updated_file_in_an_answer_gives_the_lines_that_differ() {
        let file = seen(DOCKERFILE);
        let answer =
            format!("Here's the updated Dockerfile:\n\n```dockerfile\n{}```\nDone.", DOCKERFILE.replace("3.9", "3.12"));
        let (which, changes) = rewritten(&answer, std::slice::from_ref(&file), false).unwrap();
        assert_eq!(which.path, "/ws/Dockerfile");
        assert_eq!(
            changes,
            [
                Change {
                    line: 2,
                    old: "FROM python:3.9-slim AS build".into(),
                    new: "FROM python:3.12-slim AS build".into()
                },
                // Grown by a line: alone it is also part of line 2, and edit would refuse it.
                Change {
                    line: 4,
                    old: "COPY . .\nFROM python:3.9-slim".into(),
                    new: "COPY . .\nFROM python:3.12-slim".into()
                },
            ]
        );
        assert_eq!(
            render(&changes[..1]),
            "- at line 2: \"old_string\": \"FROM python:3.9-slim AS build\", \"new_string\": \"FROM python:3.12-slim AS build\""
        );
    }

    #[test]
    fn the_file_as_the_calls_left_it_is_what_an_answer_is_compared_with() {
        let mut file = seen(DOCKERFILE);
        let answer = format!("```\n{}```", DOCKERFILE.replace("3.9", "3.12"));
        let args = serde_json::json!({"old_string": "FROM python:3.9-slim AS build", "new_string": "FROM python:3.12-slim AS build"});
        file.follow("edit", &args);
        let (_, changes) = rewritten(&answer, std::slice::from_ref(&file), false).unwrap();
        // After the first edit, line 5 alone is unique.
        assert_eq!(
            changes,
            [Change { line: 5, old: "FROM python:3.9-slim".into(), new: "FROM python:3.12-slim".into() }]
        );
        file.follow("write", &serde_json::json!({"content": DOCKERFILE.replace("3.9", "3.12")}));
        assert!(rewritten(&answer, std::slice::from_ref(&file), false).is_none());
    }

    #[test]
    fn a_small_file_whose_every_line_changed_a_little_is_still_that_file() {
        let file = seen("FROM python:3.9-slim AS build\nWORKDIR /src\nFROM python:3.9-slim\n");
        let answer = "```\nFROM python:3.12-slim AS build\nWORKDIR /src\nFROM python:3.12-slim\n```";
        let (_, changes) = rewritten(answer, std::slice::from_ref(&file), false).unwrap();
        assert_eq!(changes.iter().map(|c| c.line).collect::<Vec<_>>(), [1, 2]);
    }

    #[test]
    fn deleted_and_added_lines_become_edits_of_whole_lines() {
        let go = "package report\n\nimport (\n\t\"bytes\"\n\t\"fmt\"\n\t\"os\"\n)\n";
        let file = seen(go);
        let answer = "```go\npackage report\n\nimport (\n\t\"fmt\"\n)\n```";
        let (_, changes) = rewritten(answer, std::slice::from_ref(&file), true).unwrap();
        assert_eq!(
            changes,
            [
                Change { line: 4, old: "\t\"bytes\"\n".into(), new: String::new() },
                Change { line: 6, old: "\t\"os\"\n".into(), new: String::new() },
            ]
        );
        // A snippet of the part that changed: the rest of the file is not deleted.
        let answer = "```go\nimport (\n\t\"bytes\"\n\t\"fmt\"\n\t\"io\"\n\t\"os\"\n)\n```";
        let (_, changes) = rewritten(answer, std::slice::from_ref(&file), false).unwrap();
        assert_eq!(changes, [Change { line: 5, old: "\t\"fmt\"".into(), new: "\t\"fmt\"\n\t\"io\"".into() }]);
    }

    #[test]
    fn blank_lines_are_not_changes_and_an_old_string_is_made_unique() {
        let py = "import re\n\n\ndef a(x):\n    return x\n\n\ndef b(x):\n    return x\n";
        let file = seen(py);
        // Blank lines dropped, and a function added after the last line, which occurs twice.
        let answer = "```python\nimport re\n\ndef a(x):\n    return x\n\ndef b(x):\n    return x\n\n\ndef c(x):\n    return x\n```";
        let (_, changes) = rewritten(answer, std::slice::from_ref(&file), false).unwrap();
        assert_eq!(
            changes,
            [Change {
                line: 8,
                old: "def b(x):\n    return x".into(),
                new: "def b(x):\n    return x\n\n\ndef c(x):\n    return x".into()
            }]
        );
    }

    #[test]
    fn a_long_part_the_answer_leaves_out_is_not_a_deletion() {
        let yaml = "kind: Deployment\nmetadata:\n  name: api\nspec:\n  replicas: 2\n---\nkind: Deployment\nmetadata:\n  name: worker\nspec:\n  replicas: 1\n";
        let file = seen(yaml);
        let answer = "```yaml\nkind: Deployment\nmetadata:\n  name: worker\nspec:\n  replicas: 4\n```";
        let (_, changes) = rewritten(answer, std::slice::from_ref(&file), false).unwrap();
        assert_eq!(changes, [Change { line: 11, old: "  replicas: 1".into(), new: "  replicas: 4".into() }]);
    }

    #[test]
    fn a_block_that_ends_inside_the_file_deletes_nothing_after_it() {
        let toml = "[cache]\ndir = \"/var/cache/imgproxy\"\nttl_seconds = 300\n\n[sessions]\n# Admin UI sessions.\nttl_seconds = 86400\n";
        let file = seen(toml);
        let answer =
            "Here's the updated content:\n\n```toml\n[cache]\ndir = \"/var/cache/imgproxy\"\nttl_seconds = 600\n```";
        let (_, changes) = rewritten(answer, std::slice::from_ref(&file), false).unwrap();
        assert_eq!(changes, [Change { line: 3, old: "ttl_seconds = 300".into(), new: "ttl_seconds = 600".into() }]);
    }

    #[test]
    fn lines_a_restated_file_leaves_out_are_deleted_only_when_deletions_are_asked_for() {
        // Found in an eval run: deploy/staging.env restated after an edit, two lines dropped.
        let env = "APP_ENV=staging\nDATABASE_HOST=db-staging-2.internal\nREDIS_URL=redis://cache:6379/0\nLOG_LEVEL=info\nDEBUG=false\nSENTRY_ENVIRONMENT=staging\n";
        let file = seen(env);
        let files = std::slice::from_ref(&file);
        let answer = "```\nAPP_ENV=staging\nDATABASE_HOST=db-staging-2.internal\nDEBUG=false\n```";
        assert!(rewritten(answer, files, false).is_none());
        assert!(restates(answer, files));
        let (_, changes) = rewritten(answer, files, true).unwrap();
        assert_eq!(
            changes,
            [Change { line: 3, old: "REDIS_URL=redis://cache:6379/0\nLOG_LEVEL=info\n".into(), new: String::new() }]
        );
    }

    #[test]
    fn a_block_of_calls_written_as_json_is_not_a_json_file() {
        // Found in an eval run: the answer's block of read/edit calls shared only its `{` and
        // `}` lines with config/app.json, and became an edit that replaced the settings.
        let json = "{\n  \"name\": \"orders-api\",\n  \"features\": {\n    \"bulk_import\": true\n  },\n  \"logging\": {\n    \"level\": \"info\"\n  }\n}\n";
        let file = seen(json);
        let answer = "```json\n{\n  \"name\": \"read\", \"arguments\": {\"path\": \"/ws/config/app.json\"}}\n}\n\n{\n  \"name\": \"edit\", \"arguments\": {\n    \"old_string\": \"features\"\n  }\n}\n```";
        assert!(rewritten(answer, std::slice::from_ref(&file), true).is_none());
    }

    #[test]
    fn a_block_in_a_list_item_is_dedented_and_its_file_name_label_left_out() {
        let js = "'use strict';\n\nfunction f(x) {\n  return x;\n}\n\nmodule.exports = { f };\n";
        let file = Seen { path: "/ws/src/money.js".into(), ..seen(js) };
        let files = std::slice::from_ref(&file);
        let indented = |body: &str| body.lines().map(|l| format!("   {l}\n")).collect::<String>();
        // Found in an eval run: the file restated, unchanged, under a list item, with a label.
        let answer = format!("1. **Add it:**\n\n   ```javascript\n   // src/money.js\n{}   ```\n", indented(js));
        assert!(rewritten(&answer, files, false).is_none());
        // The same with a change: only the change is listed, without the indentation.
        let changed = js.replace("return x;", "return x * 2;");
        let answer = format!("1. **Add it:**\n\n   ```javascript\n   // src/money.js\n{}   ```\n", indented(&changed));
        let (_, changes) = rewritten(&answer, files, false).unwrap();
        assert_eq!(changes, [Change { line: 4, old: "  return x;".into(), new: "  return x * 2;".into() }]);
    }

    #[test]
    fn an_answer_that_is_not_a_new_text_of_a_file_read_gives_nothing() {
        let file = seen(DOCKERFILE);
        let files = std::slice::from_ref(&file);
        // The file restated, unchanged.
        assert!(rewritten(&format!("```\n{DOCKERFILE}```"), files, false).is_none());
        // Another text, a one-line snippet, no code block.
        assert!(rewritten("```sh\ndocker build -t app .\ndocker run app\n```", files, false).is_none());
        assert!(rewritten("```\nFROM python:3.12-slim\n```", files, false).is_none());
        assert!(rewritten("Change FROM python:3.9-slim to FROM python:3.12-slim.", files, false).is_none());
    }
}
