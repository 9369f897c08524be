//! Where an installed or checked-out abhed keeps its data files (the default model, the VM
//! image): the same list of folders for each, so an install and a source checkout behave alike.

use std::path::PathBuf;

/// The folders `sub` (`models`, `vm`) is looked for in, in order: `$ABHED_HOME/SUB`, beside the
/// binary, an install's `share/abhed/SUB`, a cargo build's checkout, and this source tree
/// (except in a shipped binary).
pub fn search_dirs(sub: &str) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(home) = std::env::var_os("ABHED_HOME").filter(|v| !v.is_empty()) {
        dirs.push(PathBuf::from(home).join(sub));
    }
    if let Ok(exe) = std::env::current_exe()
        && let Some(bin) = exe.parent()
    {
        dirs.push(bin.join(sub));
        // An install (`prefix/bin/abhed`, `prefix/share/abhed/SUB`) and a cargo build
        // (`repo/target/release/abhed`, `repo/SUB`).
        if let Some(prefix) = bin.parent() {
            dirs.push(prefix.join("share/abhed").join(sub));
            dirs.push(prefix.join(sub));
            if let Some(repo) = prefix.parent() {
                dirs.push(repo.join(sub));
            }
        }
    }
    // A shipped binary (`bundle/static.sh` sets ABHED_SHIPPED) must not look in the build
    // machine's source tree.
    if option_env!("ABHED_SHIPPED").is_none() {
        dirs.push(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(sub));
    }
    let mut seen = std::collections::HashSet::new();
    dirs.retain(|d| seen.insert(d.clone()));
    dirs
}
