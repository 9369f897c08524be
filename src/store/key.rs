//! The store's key: 32 random bytes in a file beside the database (`abhed.db` → `abhed.key`),
//! mode 0600, that keys every hash and seal in the store (HMAC-SHA256). Without it nobody can
//! recompute a valid chain, so an edited log cannot be passed off as intact. The workspace and
//! the guest never see the data directory, so they cannot read it.
//!
//! The key is created once, when a store is first opened (or first migrated to a keyed schema):
//! written to a private temporary file created exclusively with mode 0600, then hard-linked into
//! place, so it is never readable by others and a concurrent opener never sees half a key.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read as _, Write as _};
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, Result, bail};
use hmac::{Hmac, Mac as _};
use sha2::{Digest as _, Sha256};

type HmacSha256 = Hmac<Sha256>;

const KEY_BYTES: usize = 32;

/// The secret that keys the store's chain and seals.
pub(crate) struct Key {
    bytes: [u8; KEY_BYTES],
    /// A fingerprint that names the key without revealing it (the store records it, so a store
    /// opened beside another store's key knows it is the wrong one).
    pub id: String,
}

/// Where the key of the store at `db` lives: beside it, with the extension `key`.
pub fn key_path(db: &Path) -> PathBuf {
    db.with_extension("key")
}

impl Key {
    fn from_bytes(bytes: [u8; KEY_BYTES]) -> Key {
        let mut h = Sha256::new();
        h.update(b"abhed store key id\n");
        h.update(bytes);
        let id = hex(&h.finalize()[..8]);
        Key { bytes, id }
    }

    /// The key at `path`, or `None` when there is no file there.
    pub fn load(path: &Path) -> Result<Option<Key>> {
        let meta = match std::fs::symlink_metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("cannot read the store key {}", path.display())),
        };
        if !meta.file_type().is_file() {
            bail!(
                "the store key {} is not a regular file (a symlink or something else): abhed keeps its key as a plain file of its own. Move it aside and restore the key file",
                path.display()
            );
        }
        if meta.mode() & 0o077 != 0 {
            bail!(
                "the store key {} may be read or changed by other users (mode {:04o}): only you may have it. Run `chmod 600 {}` (on a filesystem without Unix permissions, keep the store on one that has them: ABHED_HOME)",
                path.display(),
                meta.mode() & 0o7777,
                path.display()
            );
        }
        // A key being written by a concurrent first open (only where hard links are not
        // available, see `create`) is complete within moments.
        for attempt in 0.. {
            let mut text = String::new();
            File::open(path)
                .and_then(|mut f| f.read_to_string(&mut text))
                .with_context(|| format!("cannot read the store key {}", path.display()))?;
            match parse(&text) {
                Some(bytes) => return Ok(Some(Key::from_bytes(bytes))),
                None if text.len() < 2 * KEY_BYTES && attempt < 50 => std::thread::sleep(Duration::from_millis(20)),
                None => bail!(
                    "the store key {} is damaged (it must hold 64 hex digits): restore it from where you keep a copy",
                    path.display()
                ),
            }
        }
        unreachable!("the loop returns")
    }

    /// Make a new key at `path`, or load the one a concurrent open made first.
    pub fn create(path: &Path) -> Result<Key> {
        let mut bytes = [0u8; KEY_BYTES];
        File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut bytes))
            .context("cannot read /dev/urandom to make the store key")?;
        let text = format!("{}\n", hex(&bytes));
        let dir = path.parent().unwrap_or(Path::new("."));
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_nanos();
        let tmp = dir.join(format!(".abhed-key-{}-{nanos}.tmp", std::process::id()));
        write_private(&tmp, &text)?;
        let linked = std::fs::hard_link(&tmp, path);
        let _ = std::fs::remove_file(&tmp);
        match linked {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                return Key::load(path)?.context("the store key vanished while it was being made");
            }
            // No hard links here (vfat, some FUSE filesystems): create the file itself
            // exclusively; a concurrent reader waits for its content (see `load`).
            Err(_) => match write_private(path, &text) {
                Ok(()) => {}
                Err(e) if e.downcast_ref::<std::io::Error>().is_some_and(|e| e.kind() == ErrorKind::AlreadyExists) => {
                    return Key::load(path)?.context("the store key vanished while it was being made");
                }
                Err(e) => return Err(e),
            },
        }
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(Key::from_bytes(bytes))
    }

    fn mac(&self, domain: &str, fields: &[&[u8]]) -> HmacSha256 {
        // Any key length is valid for HMAC, so this cannot fail.
        let mut m = <HmacSha256 as hmac::Mac>::new_from_slice(&self.bytes).unwrap_or_else(|_| unreachable!());
        for part in std::iter::once(domain.as_bytes()).chain(fields.iter().copied()) {
            // Each field length-prefixed: no two different field lists give the same input.
            m.update(&(part.len() as u64).to_be_bytes());
            m.update(part);
        }
        m
    }

    /// HMAC-SHA256 over `domain` and `fields`, each as its length in 8 bytes (big-endian) and
    /// then its bytes; lowercase hex.
    pub fn seal(&self, domain: &str, fields: &[&[u8]]) -> String {
        hex(&self.mac(domain, fields).finalize().into_bytes())
    }

    /// Whether `expected` (hex) is the seal of `fields`, compared in constant time.
    pub fn check(&self, domain: &str, fields: &[&[u8]], expected: &str) -> bool {
        match unhex(expected) {
            Some(tag) => self.mac(domain, fields).verify_slice(&tag).is_ok(),
            None => false,
        }
    }
}

fn write_private(path: &Path, text: &str) -> Result<()> {
    // O_CREAT|O_EXCL with mode 0600: the file is never, even for an instant, readable by others
    // (the umask can only take bits away).
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot create the store key {}", path.display()))?;
    f.write_all(text.as_bytes())
        .and_then(|()| f.sync_all())
        .with_context(|| format!("cannot write the store key {}", path.display()))
}

fn parse(text: &str) -> Option<[u8; KEY_BYTES]> {
    unhex(text.trim_end_matches('\n'))?.try_into().ok()
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok()).collect()
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    #[test]
    fn a_new_key_is_0600_and_loads_back() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("abhed.key");
        let k = Key::create(&p).unwrap();
        assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600);
        let again = Key::load(&p).unwrap().unwrap();
        assert_eq!((again.id.len(), again.id.as_str()), (16, k.id.as_str()));
        // A second create finds the first key instead of replacing it.
        assert_eq!(Key::create(&p).unwrap().id, k.id);
        // No temporary file is left.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_key_others_can_read_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("abhed.key");
        Key::create(&p).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = format!("{:#}", Key::load(&p).err().unwrap());
        assert!(e.contains("mode 0644") && e.contains("chmod 600"), "{e}");
    }

    #[test]
    fn seals_are_length_prefixed_and_keyed() {
        let dir = tempfile::tempdir().unwrap();
        let a = Key::create(&dir.path().join("a.key")).unwrap();
        let b = Key::create(&dir.path().join("b.key")).unwrap();
        let s = a.seal("t", &[b"ab", b"c"]);
        assert!(a.check("t", &[b"ab", b"c"], &s));
        assert!(!a.check("t", &[b"a", b"bc"], &s));
        assert!(!a.check("u", &[b"ab", b"c"], &s));
        assert!(!b.check("t", &[b"ab", b"c"], &s));
        assert!(!a.check("t", &[b"ab", b"c"], "zz"));
    }
}
