//! The VM image built by `bundle/vm-image.sh`: `vmlinux`, `initramfs.img`, and `manifest.json`
//! with their sha256 sums. An image is used only when both files match their manifest.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::Deserialize;

/// The command that builds the image, for messages.
pub const BUILD_COMMAND: &str = "bash bundle/vm-image.sh";

#[derive(Debug, Clone)]
pub struct Image {
    pub dir: PathBuf,
    pub kernel: PathBuf,
    pub initramfs: PathBuf,
    pub manifest: Manifest,
}

#[derive(Debug, Clone, Deserialize, serde::Serialize)]
pub struct Manifest {
    pub kernel_release: String,
    pub packages: Vec<Package>,
    pub guest_agent_sha256: String,
    pub files: HashMap<String, String>,
}

#[derive(Debug, Clone, Deserialize, serde::Serialize)]
pub struct Package {
    pub name: String,
    pub version: String,
    pub sha256: String,
}

impl Image {
    /// The image in `dir` when given, else in the first of `search` that has a manifest.
    /// The error says every folder tried and how to build an image.
    pub fn locate(dir: Option<&Path>, search: &[PathBuf]) -> Result<Image, String> {
        let candidates: Vec<PathBuf> = match dir {
            Some(d) => vec![d.to_path_buf()],
            None => search.to_vec(),
        };
        let Some(found) = candidates.iter().find(|d| d.join("manifest.json").is_file()) else {
            let tried: Vec<String> = candidates.iter().map(|d| d.display().to_string()).collect();
            return Err(format!(
                "no VM image (manifest.json, vmlinux, initramfs.img) in {}. Build one with `{BUILD_COMMAND}` in the abhed checkout, or install the bundle",
                tried.join(", ")
            ));
        };
        Image::open(found)
    }

    /// Open the image in `dir` and check both files against the manifest (once per process for
    /// an unchanged file).
    pub fn open(dir: &Path) -> Result<Image, String> {
        let manifest_path = dir.join("manifest.json");
        let text = std::fs::read_to_string(&manifest_path)
            .map_err(|e| format!("cannot read {}: {e}", manifest_path.display()))?;
        let manifest: Manifest = serde_json::from_str(&text).map_err(|e| {
            format!("{} is not a valid image manifest ({e}); rebuild with `{BUILD_COMMAND}`", manifest_path.display())
        })?;
        let image = Image {
            dir: dir.to_path_buf(),
            kernel: dir.join("vmlinux"),
            initramfs: dir.join("initramfs.img"),
            manifest,
        };
        for (name, path) in [("vmlinux", &image.kernel), ("initramfs.img", &image.initramfs)] {
            let want = image.manifest.files.get(name).ok_or_else(|| {
                format!("{} lists no sha256 for {name}; rebuild with `{BUILD_COMMAND}`", manifest_path.display())
            })?;
            let got = sha256_once(path)?;
            if &got != want {
                return Err(format!(
                    "{} does not match its manifest (sha256 {got}, expected {want}): the image is damaged or was tampered with. Rebuild it with `{BUILD_COMMAND}` or reinstall the bundle",
                    path.display()
                ));
            }
        }
        Ok(image)
    }
}

/// sha256 of `path`, remembered for the process by (path, size, mtime): a session boots its VM
/// again after a crash, and the kernel is 60 MB.
fn sha256_once(path: &Path) -> Result<String, String> {
    type Key = (PathBuf, u64, std::time::SystemTime);
    static SEEN: Mutex<Vec<(Key, String)>> = Mutex::new(Vec::new());
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let key: Key = (path.to_path_buf(), meta.len(), meta.modified().unwrap_or(std::time::UNIX_EPOCH));
    if let Ok(seen) = SEEN.lock()
        && let Some((_, sum)) = seen.iter().find(|(k, _)| *k == key)
    {
        return Ok(sum.clone());
    }
    let sum = crate::tools::fsutil::sha256_file(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if let Ok(mut seen) = SEEN.lock() {
        seen.push((key, sum.clone()));
    }
    Ok(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_image(dir: &Path, kernel: &[u8]) {
        std::fs::write(dir.join("vmlinux"), kernel).unwrap();
        std::fs::write(dir.join("initramfs.img"), b"initramfs").unwrap();
        let sum = crate::tools::fsutil::sha256_hex;
        let manifest = serde_json::json!({
            "kernel_release": "test",
            "packages": [],
            "guest_agent_sha256": "",
            "files": { "vmlinux": sum(b"kernel"), "initramfs.img": sum(b"initramfs") },
        });
        std::fs::write(dir.join("manifest.json"), manifest.to_string()).unwrap();
    }

    #[test]
    fn a_matching_image_opens_and_a_tampered_one_is_refused() {
        let ok = tempfile::tempdir().unwrap();
        fake_image(ok.path(), b"kernel");
        assert!(Image::open(ok.path()).is_ok());

        let bad = tempfile::tempdir().unwrap();
        fake_image(bad.path(), b"kernel!");
        let e = Image::open(bad.path()).unwrap_err();
        assert!(e.contains("does not match its manifest") && e.contains(BUILD_COMMAND), "{e}");
    }

    #[test]
    fn a_missing_image_names_the_folders_and_the_fix() {
        let e = Image::locate(None, &[PathBuf::from("/nonexistent/a"), PathBuf::from("/nonexistent/b")]).unwrap_err();
        assert!(e.contains("/nonexistent/a, /nonexistent/b") && e.contains(BUILD_COMMAND), "{e}");
    }
}
