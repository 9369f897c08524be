//! SHA-256 of files, as lowercase hex (what `sha256sum` prints).

use std::path::Path;

use sha2::{Digest, Sha256};

/// The SHA-256 of a file's contents, read in 1 MiB chunks.
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut f = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    std::io::copy(&mut f, &mut h)?;
    Ok(hex(&h.finalize()))
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
