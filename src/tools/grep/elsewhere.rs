//! Where a search that found nothing in the place it looked would have found something: the
//! rest of the workspace, searched as a grep without `path` would search it.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use grep_regex::RegexMatcher;

use super::{ContentTop, GrepVisitor, Line, Mode, build_matcher, searcher_builder};
use crate::tools::walk::{self, Filters};
use crate::tools::{ToolContext, path_line, plural};

/// Where the pattern does match, when a search of one file or folder below the workspace's
/// root found nothing, or the path given does not exist (`searched` is None): small models grep
/// a file they guessed (`src/main.rs`, `Cargo.toml`), then give up or answer that nothing
/// defines it. The workspace is searched as a grep without `path` would (the same ignores), and
/// the first matching line of each file is shown, so the definition itself is often in front
/// of the model; nothing when the pattern matches nowhere either.
pub(super) fn elsewhere(
    ctx: &ToolContext<'_>,
    searched: Option<&Path>,
    matcher: &RegexMatcher,
    multiline: bool,
) -> Option<String> {
    /// The files shown; the rest are counted.
    const SHOWN: usize = 5;
    let root = ctx.workspace.root();
    if searched == Some(root) {
        return None;
    }
    let top = search_workspace(ctx, matcher, multiline)?;
    if top.total_files == 0 {
        return None;
    }
    let mut text = format!(
        "\nElsewhere in the workspace the pattern matches {} in {}; the first in each file:",
        plural(top.total_matches, "line", "lines"),
        plural(top.total_files as u64, "file", "files"),
    );
    for (path, hits) in top.files.iter().take(SHOWN) {
        if let Some(Line::Match(n, line)) = hits.lines.iter().find(|l| matches!(l, Line::Match(..))) {
            let _ = write!(text, "\n{}:{n}:{}", path_line(path), walk::clip(line));
        }
    }
    if top.total_files > SHOWN {
        let _ = write!(text, "\n(and {} more files)", top.total_files - SHOWN);
    }
    text.push_str("\nSearch there: path set to one of them, or left out for the whole workspace.");
    Some(text)
}

/// Where `text` occurs verbatim in the workspace's files other than `exclude` (a real path):
/// each file with the line its first occurrence starts on, in path order, and how many files
/// hold it in all. `None` when no other file does, or the search could not run.
pub(crate) fn literal(ctx: &ToolContext<'_>, text: &str, exclude: &Path) -> Option<(Vec<(PathBuf, u64)>, usize)> {
    let multiline = text.contains('\n');
    let escaped = regex::escape(text);
    let matcher = build_matcher(&escaped, &escaped, false, multiline).ok()?;
    let top = search_workspace(ctx, &matcher, multiline)?;
    let files: Vec<(PathBuf, u64)> = top
        .files
        .iter()
        .filter(|(path, _)| path.as_path() != exclude)
        .filter_map(|(path, hits)| {
            hits.lines.iter().find_map(|l| match l {
                Line::Match(n, _) => Some((path.clone(), *n)),
                _ => None,
            })
        })
        .collect();
    let total = top.total_files - usize::from(top.files.contains_key(exclude));
    (!files.is_empty()).then_some((files, total))
}

/// The whole workspace searched with `matcher`, as a grep without `path` (the same ignores).
fn search_workspace(ctx: &ToolContext<'_>, matcher: &RegexMatcher, multiline: bool) -> Option<ContentTop> {
    let searcher = searcher_builder(Mode::Content, 0, multiline);
    let operator = walk::operator_ignore(ctx).ok()?;
    let filters = Filters { include_hidden: false, operator, overrides: None, everything: false };
    let found = walk::run(ctx.workspace, ctx.workspace.root(), &filters, || {
        GrepVisitor::new(&searcher, matcher, Mode::Content)
    })
    .ok()?;
    let mut top = ContentTop::default();
    for v in found {
        top.merge(v.acc.content);
    }
    Some(top)
}
