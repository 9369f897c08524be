//! The suite's files, from the binary or from a checkout. `build.rs` embeds the folder
//! `conformance/` in the binary, so `abhed conformance` runs exactly the files `cargo test`
//! reads from disk.

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
        let files = embedded::FILES
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

    /// The suite in a folder (a checkout's `conformance/`).
    pub fn load(root: &Path) -> Result<Suite> {
        let files =
            tree::snapshot(root).with_context(|| format!("cannot read the conformance suite {}", root.display()))?;
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
        let mut items = Vec::new();
        for (path, _) in self.files.range(format!("{part}/")..).take_while(|(k, _)| k.starts_with(&format!("{part}/")))
        {
            let rest = &path[part.len() + 1..];
            let parts: Vec<&str> = rest.split('/').collect();
            if parts.len() != 3 || parts[2] != file {
                continue;
            }
            let text = self.text(path).with_context(|| format!("{part}/{rest} is not UTF-8 text"))?;
            let spec: T = toml::from_str(text).with_context(|| format!("invalid {part}/{rest}"))?;
            items.push(Item {
                name: format!("{}/{}", parts[0], parts[1]),
                spec,
                prefix: format!("{part}/{}/{}", parts[0], parts[1]),
            });
        }
        Ok(items)
    }
}
