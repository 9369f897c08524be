//! Finding the model file, and its identity.
//!
//! A model named on the command line, in `$ABHED_MODEL` or in the config is used as given. Without
//! one, the default model's file name is looked for in a fixed list of folders (the bundle's
//! layout, a source checkout's `models/`), and the error lists every folder it tried.

use std::io::Read as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};

use crate::store::Store;

/// The default model: Qwen2.5-Coder-1.5B-Instruct Q4_K_M, fetched at setup by
/// `models/fetch.sh`. Chosen by the task suite: of the models here it finishes the most tasks
/// an hour on 2 cores (docs/EVAL.md).
pub const DEFAULT_MODEL_FILE: &str = "Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf";

/// The smallest model, SmolLM2-135M-Instruct Q4_1 (98 MB): what the tests and CI's probe run,
/// for speed. It drives the tools with well-formed calls but finishes almost no real task.
/// Fetched by `bash models/fetch.sh smollm2-135m`.
pub const SMALL_MODEL_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// Where the default model is looked for, in order.
pub fn default_dirs() -> Vec<PathBuf> {
    crate::layout::search_dirs("models")
}

/// The model file to load: `explicit` when given, else the default model found in
/// [`default_dirs`].
pub fn model_path(explicit: Option<&Path>) -> Result<PathBuf> {
    if let Some(p) = explicit {
        if !p.exists() {
            bail!(
                "model file {} does not exist; pass --model with the path of a .gguf file, or run without --model to use the default model ({DEFAULT_MODEL_FILE}, fetched by `bash models/fetch.sh`)",
                p.display()
            );
        }
        if p.is_dir() {
            bail!("model path {} is a directory; pass the .gguf file itself", p.display());
        }
        return Ok(p.to_path_buf());
    }
    find_default(&default_dirs())
}

/// The small model ([`SMALL_MODEL_FILE`]), looked for where the default is.
pub fn small_model_path() -> Result<PathBuf> {
    let dirs = default_dirs();
    find_in(&dirs, SMALL_MODEL_FILE).ok_or_else(|| {
        let tried: Vec<String> = dirs.iter().map(|d| format!("  {}", d.display())).collect();
        anyhow::anyhow!(
            "the small model {SMALL_MODEL_FILE} was not found. Looked in:\n{}\nFetch it once with `bash models/fetch.sh smollm2-135m`.",
            tried.join("\n")
        )
    })
}

fn find_in(dirs: &[PathBuf], file: &str) -> Option<PathBuf> {
    dirs.iter().map(|d| d.join(file)).find(|p| p.is_file())
}

fn find_default(dirs: &[PathBuf]) -> Result<PathBuf> {
    if let Some(p) = find_in(dirs, DEFAULT_MODEL_FILE) {
        return Ok(p);
    }
    let tried: Vec<String> = dirs.iter().map(|d| format!("  {}", d.display())).collect();
    // An install from the bundle had the model; install.sh restores what is missing.
    let fix = match crate::install::current_root() {
        Some(root) => format!(
            "This abhed was installed from its bundle ({}), which had the model: run install.sh from the bundle folder again to restore it",
            root.display()
        ),
        None => "Fetch it once with `bash models/fetch.sh` (from a checkout; it uses pip)".to_string(),
    };
    bail!(
        "no model given and the default model {DEFAULT_MODEL_FILE} was not found. Looked in:\n{}\n{fix}, or pass --model PATH to a .gguf file, or set ABHED_MODEL.",
        tried.join("\n")
    )
}

/// Check the file starts like a GGUF before handing it to llama.cpp, whose own failure says
/// only that loading failed.
pub fn check_gguf(path: &Path) -> Result<()> {
    let mut f = std::fs::File::open(path).with_context(|| format!("cannot open model file {}", path.display()))?;
    let mut magic = [0u8; 8];
    let n = f.read(&mut magic).with_context(|| format!("cannot read model file {}", path.display()))?;
    if n < 8 || &magic[..4] != b"GGUF" {
        let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        bail!(
            "{} is not a GGUF model file ({} bytes; a GGUF starts with the bytes \"GGUF\", this starts with {:?}). Check the path, or fetch the default model again with `bash models/fetch.sh`.",
            path.display(),
            size,
            String::from_utf8_lossy(&magic[..n.min(4)])
        );
    }
    let version = u32::from_le_bytes([magic[4], magic[5], magic[6], magic[7]]);
    if !(2..=3).contains(&version) {
        bail!(
            "{} is GGUF version {version}; this build of llama.cpp reads versions 2 and 3. Convert the model with a current llama.cpp, or use another file.",
            path.display()
        );
    }
    Ok(())
}

/// The sha256 of the model file, remembered in the store by (path, size, mtime) so that a
/// multi-gigabyte model is hashed once, not at every start.
pub fn sha256_cached(store: &Store, path: &Path) -> Result<String> {
    let real = path.canonicalize().with_context(|| format!("cannot resolve {}", path.display()))?;
    let meta = std::fs::metadata(&real).with_context(|| format!("cannot stat {}", real.display()))?;
    let mtime_ns = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0);
    if let Some(h) = store.file_hash(&real, meta.len(), mtime_ns)? {
        return Ok(h);
    }
    let hex = crate::tools::fsutil::sha256_file(&real).with_context(|| format!("cannot read {}", real.display()))?;
    store.record_file_hash(&real, meta.len(), mtime_ns, &hex)?;
    Ok(hex)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_explicit_path_is_checked_as_given() {
        let e = model_path(Some(Path::new("/nonexistent/m.gguf"))).unwrap_err().to_string();
        assert!(e.contains("/nonexistent/m.gguf does not exist"), "{e}");
    }

    #[test]
    fn a_missing_default_lists_every_folder_tried() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        let e = find_default(&[a.path().to_path_buf(), b.path().to_path_buf()]).unwrap_err().to_string();
        assert!(
            e.starts_with(
                "no model given and the default model Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf was not found. Looked in:\n"
            ),
            "{e}"
        );
        assert!(e.contains(&format!("  {}\n  {}\n", a.path().display(), b.path().display())), "{e}");
        assert!(e.contains("bash models/fetch.sh"), "{e}");
        std::fs::write(b.path().join(DEFAULT_MODEL_FILE), b"GGUF").unwrap();
        assert_eq!(
            find_default(&[a.path().to_path_buf(), b.path().to_path_buf()]).unwrap(),
            b.path().join(DEFAULT_MODEL_FILE)
        );
    }

    #[test]
    fn not_a_gguf_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m.gguf");
        std::fs::write(&p, b"<html>not found</html>").unwrap();
        let e = check_gguf(&p).unwrap_err().to_string();
        assert!(e.contains("is not a GGUF model file"), "{e}");
        std::fs::write(&p, b"GGUF\x03\0\0\0rest").unwrap();
        check_gguf(&p).unwrap();
    }

    #[test]
    fn hashes_are_remembered() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.db")).unwrap();
        let p = dir.path().join("m.gguf");
        std::fs::write(&p, b"abc").unwrap();
        let h = sha256_cached(&store, &p).unwrap();
        assert_eq!(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert_eq!(sha256_cached(&store, &p).unwrap(), h);
    }
}
