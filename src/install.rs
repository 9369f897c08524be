//! An abhed installed from the air-gapped bundle (`bundle/install.sh`): the folder above the
//! binary's `bin/` holds `VERSION` and `SHA256SUMS`, which lists every installed file.
//! `abhed doctor` checks the install against that list.

use std::path::{Path, PathBuf};

/// An install whose files all match its `SHA256SUMS`.
#[derive(Debug, Clone, PartialEq)]
pub struct Install {
    pub root: PathBuf,
    pub version: String,
    pub files: usize,
}

/// The install the running binary belongs to, if it came from a bundle.
pub fn current_root() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let root = exe.parent()?.parent()?;
    (root.join("SHA256SUMS").is_file() && root.join("VERSION").is_file()).then(|| root.to_path_buf())
}

/// Check every file `root/SHA256SUMS` lists. The error names each missing or changed file and
/// says how to repair the install.
pub fn verify(root: &Path) -> Result<Install, String> {
    let sums = root.join("SHA256SUMS");
    let text = std::fs::read_to_string(&sums).map_err(|e| format!("cannot read {}: {e}", sums.display()))?;
    let version = std::fs::read_to_string(root.join("VERSION")).map(|v| v.trim().to_string()).unwrap_or_default();
    let mut problems = Vec::new();
    let mut files = 0;
    for (n, line) in text.lines().enumerate() {
        let Some((want, name)) = line.split_once("  ").filter(|(h, _)| h.len() == 64) else {
            problems.push(format!("line {} of SHA256SUMS is not `SHA256  PATH`", n + 1));
            continue;
        };
        files += 1;
        let path = root.join(name);
        match crate::tools::fsutil::sha256_file(&path) {
            Ok(got) if got == want => {}
            Ok(_) => problems.push(format!("{name} is changed or damaged (its sha256 differs)")),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => problems.push(format!("{name} is missing")),
            Err(e) => problems.push(format!("{name} cannot be read: {e}")),
        }
    }
    if problems.is_empty() {
        Ok(Install { root: root.to_path_buf(), version, files })
    } else {
        Err(format!(
            "{} of {files} installed files do not match {}: {}. Run install.sh from the bundle folder again; it replaces a damaged install",
            problems.len(),
            sums.display(),
            problems.join("; ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn install(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let mut sums = String::new();
        for (name, body) in files {
            let p = dir.path().join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, body).unwrap();
            sums.push_str(&format!("{}  {name}\n", crate::tools::fsutil::sha256_file(&p).unwrap()));
        }
        std::fs::write(dir.path().join("SHA256SUMS"), sums).unwrap();
        std::fs::write(dir.path().join("VERSION"), "9.9.9\n").unwrap();
        dir
    }

    #[test]
    fn an_intact_install_verifies() {
        let dir = install(&[("bin/abhed", "binary"), ("share/abhed/models/m.gguf", "weights")]);
        let got = verify(dir.path()).unwrap();
        assert_eq!((got.version.as_str(), got.files), ("9.9.9", 2));
    }

    #[test]
    fn a_changed_and_a_missing_file_are_both_named() {
        let dir = install(&[("bin/abhed", "binary"), ("share/abhed/models/m.gguf", "weights"), ("qemu/lib/x.so", "x")]);
        std::fs::write(dir.path().join("bin/abhed"), "tampered").unwrap();
        std::fs::remove_file(dir.path().join("share/abhed/models/m.gguf")).unwrap();
        let e = verify(dir.path()).unwrap_err();
        assert!(e.starts_with("2 of 3 installed files do not match"), "{e}");
        assert!(
            e.contains("bin/abhed is changed or damaged (its sha256 differs); share/abhed/models/m.gguf is missing"),
            "{e}"
        );
        assert!(e.ends_with("Run install.sh from the bundle folder again; it replaces a damaged install"), "{e}");
    }
}
