//! A suite's files, from the binary or from a checkout. `build.rs` embeds the folders
//! `conformance/` and `eval/` in the binary, so `abhed conformance` and `abhed eval` run exactly
//! the files `cargo test` reads from disk.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use serde::de::DeserializeOwned;
use sha2::{Digest, Sha256};

use super::tree::{self, Entry, Tree};

/// One embedded file or symlink.
pub enum Embedded {
    File(&'static [u8]),
    Symlink(&'static str),
}

mod embedded {
    use super::Embedded;
    include!(concat!(env!("OUT_DIR"), "/conformance_files.rs"));
}

mod embedded_eval {
    use super::Embedded;
    include!(concat!(env!("OUT_DIR"), "/eval_files.rs"));
}

/// The folder `conformance/`: every file and symlink by its path relative to the folder.
#[derive(Debug, Clone)]
pub struct Suite {
    files: Tree,
    /// Where the files came from, when a folder on disk (bless mode writes back there).
    disk: Option<PathBuf>,
}

/// One item of a part of the suite: `<part>/<group>/<item>/`, holding `<part>`'s toml file.
#[derive(Debug, Clone)]
pub struct Item<T> {
    /// `group/item`, e.g. `edit/008_tabs_vs_spaces`.
    pub name: String,
    pub spec: T,
    /// The item's folder, relative to the suite root.
    pub prefix: String,
}

impl Suite {
    /// The suite this binary was built with.
    pub fn embedded() -> Suite {
        Suite::from_embedded(embedded::FILES)
    }

    /// The task suite (`eval/`, docs/EVAL.md) this binary was built with.
    pub fn embedded_eval() -> Suite {
        Suite::from_embedded(embedded_eval::FILES)
    }

    fn from_embedded(files: &'static [(&'static str, Embedded)]) -> Suite {
        let files = files
            .iter()
            .map(|(path, e)| {
                let entry = match e {
                    Embedded::File(bytes) => Entry::File(bytes.to_vec()),
                    Embedded::Symlink(target) => Entry::Symlink((*target).to_string()),
                };
                ((*path).to_string(), entry)
            })
            .collect();
        Suite { files, disk: None }
    }

    /// The suite in a folder (a checkout's `conformance/` or `eval/`).
    pub fn load(root: &Path) -> Result<Suite> {
        let files = tree::snapshot(root).with_context(|| format!("cannot read the suite {}", root.display()))?;
        Ok(Suite { files, disk: Some(root.to_path_buf()) })
    }

    /// The folder on disk the suite was read from.
    pub fn disk(&self) -> Option<&Path> {
        self.disk.as_deref()
    }

    /// A fingerprint of every file: two builds with the same digest run the same suite.
    pub fn digest(&self) -> String {
        let mut h = Sha256::new();
        for (path, entry) in &self.files {
            h.update(path.as_bytes());
            h.update([0]);
            match entry {
                Entry::File(bytes) => {
                    h.update(b"f");
                    h.update((bytes.len() as u64).to_le_bytes());
                    h.update(bytes);
                }
                Entry::Symlink(target) => {
                    h.update(b"l");
                    h.update(target.as_bytes());
                    h.update([0]);
                }
            }
        }
        crate::tools::fsutil::hex(&h.finalize())
    }

    /// The text of one file, if it exists.
    pub fn text(&self, path: &str) -> Option<&str> {
        match self.files.get(path)? {
            Entry::File(bytes) => std::str::from_utf8(bytes).ok(),
            Entry::Symlink(_) => None,
        }
    }

    /// The tree under `dir/` (paths relative to it); `None` when there is nothing there.
    pub fn subtree(&self, dir: &str) -> Option<Tree> {
        let prefix = format!("{dir}/");
        let t: Tree = self
            .files
            .range(prefix.clone()..)
            .take_while(|(k, _)| k.starts_with(&prefix))
            .map(|(k, v)| (k[prefix.len()..].to_string(), v.clone()))
            .collect();
        (!t.is_empty()).then_some(t)
    }

    /// Every item of `part` (`part/<group>/<item>/<file>`), parsed, sorted by name.
    pub fn items<T: DeserializeOwned>(&self, part: &str, file: &str) -> Result<Vec<Item<T>>> {
        self.items_at(part, file, 2)
    }

    /// Every item of a flat part (`part/<item>/<file>`, the task suite's `tasks/`).
    pub fn flat_items<T: DeserializeOwned>(&self, part: &str, file: &str) -> Result<Vec<Item<T>>> {
        self.items_at(part, file, 1)
    }

    /// The items `depth` folders below `part`, named by those folders joined with `/`.
    fn items_at<T: DeserializeOwned>(&self, part: &str, file: &str, depth: usize) -> Result<Vec<Item<T>>> {
        let mut items = Vec::new();
        let under = format!("{part}/");
        for (path, _) in self.files.range(under.clone()..).take_while(|(k, _)| k.starts_with(&under)) {
            let rest = &path[under.len()..];
            let parts: Vec<&str> = rest.split('/').collect();
            if parts.len() != depth + 1 || parts[depth] != file {
                continue;
            }
            let text = self.text(path).with_context(|| format!("{part}/{rest} is not UTF-8 text"))?;
            let spec: T = toml::from_str(text).with_context(|| format!("invalid {part}/{rest}"))?;
            let name = parts[..depth].join("/");
            items.push(Item { prefix: format!("{part}/{name}"), name, spec });
        }
        Ok(items)
    }
}
