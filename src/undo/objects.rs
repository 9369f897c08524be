//! The contents a checkpoint keeps, one file per content, named by its sha256, beside the
//! session store. Written once (a temp file renamed into place), read back only after its hash
//! is checked again, so a changed object is refused, not restored.

use std::fs::File;
use std::io::{self, Read as _, Write as _};
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};
use sha2::{Digest as _, Sha256};

use crate::tools::fsutil::hex;

/// The object folder of the store at `store_path`: `<store folder>/undo/objects`.
#[derive(Debug, Clone)]
pub struct Objects {
    dir: PathBuf,
}

impl Objects {
    pub fn beside(store_path: &Path) -> Objects {
        let base = store_path.parent().unwrap_or(Path::new("."));
        Objects { dir: base.join("undo").join("objects") }
    }

    fn path(&self, sha: &str) -> PathBuf {
        self.dir.join(&sha[..2.min(sha.len())]).join(sha)
    }

    /// Keep what `file` holds (at most `limit` bytes are read; more is an error the caller
    /// treats as "not kept"), and give its sha256.
    pub fn put(&self, file: &mut File, limit: u64) -> Result<String> {
        std::fs::create_dir_all(&self.dir).with_context(|| format!("cannot create {}", self.dir.display()))?;
        let mut tmp = tempfile::NamedTempFile::new_in(&self.dir)
            .with_context(|| format!("cannot write in {}", self.dir.display()))?;
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; 64 * 1024];
        let mut total = 0u64;
        loop {
            let n = match file.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e).context("cannot read the file to keep"),
            };
            total += n as u64;
            if total > limit {
                bail!("larger than {limit} bytes");
            }
            hasher.update(&buf[..n]);
            tmp.write_all(&buf[..n]).context("cannot write the kept copy")?;
        }
        let sha = hex(&hasher.finalize());
        let dest = self.path(&sha);
        if dest.exists() {
            return Ok(sha);
        }
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
        }
        tmp.as_file().sync_all().ok();
        tmp.persist(&dest).map_err(|e| e.error).with_context(|| format!("cannot keep {}", dest.display()))?;
        Ok(sha)
    }

    /// The content kept under `sha`, checked against it.
    pub fn get(&self, sha: &str) -> Result<Vec<u8>> {
        let path = self.path(sha);
        let bytes = std::fs::read(&path).with_context(|| format!("the kept copy {} cannot be read", path.display()))?;
        if hex(&Sha256::digest(&bytes)) != sha {
            bail!(
                "the kept copy {} was changed since it was kept (its sha256 differs), so it is not restored",
                path.display()
            );
        }
        Ok(bytes)
    }

    /// Whether content with this sha256 is kept.
    pub fn has(&self, sha: &str) -> bool {
        self.path(sha).is_file()
    }
}
