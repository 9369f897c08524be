//! The paths a git index tracks, read from the index file's bytes (`.git/index`, versions 2 to
//! 4, as gitformat-index(5) lays them out), without running git: a repository's config can make
//! git run programs, and this runs on the host.

/// The tracked paths, relative to the repository's top; `None` when the bytes are not an index
/// this reads (then every deletion is treated as of a tracked file by the caller's choice).
pub fn tracked(bytes: &[u8]) -> Option<Vec<String>> {
    let be32 = |at: usize| -> Option<u32> { Some(u32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?)) };
    if bytes.get(..4)? != b"DIRC" {
        return None;
    }
    let version = be32(4)?;
    if !(2..=4).contains(&version) {
        return None;
    }
    let count = be32(8)? as usize;
    let mut at = 12;
    let mut out: Vec<String> = Vec::with_capacity(count.min(1 << 16));
    let mut prev = Vec::new();
    for _ in 0..count {
        let start = at;
        // ctime, mtime (8 each), dev, ino, mode, uid, gid, size (4 each), the object id (20).
        at += 62;
        let flags = u16::from_be_bytes(bytes.get(at - 2..at)?.try_into().ok()?);
        if version >= 3 && flags & 0x4000 != 0 {
            at += 2;
        }
        let name = if version == 4 {
            // How many bytes of the previous name to drop, as a varint, then the rest of the name.
            let (strip, used) = varint(bytes.get(at..)?)?;
            at += used;
            let end = at + bytes.get(at..)?.iter().position(|&b| b == 0)?;
            let keep = prev.len().checked_sub(strip)?;
            let mut name = prev[..keep].to_vec();
            name.extend_from_slice(&bytes[at..end]);
            at = end + 1;
            name
        } else {
            let end = at + bytes.get(at..)?.iter().position(|&b| b == 0)?;
            let name = bytes[at..end].to_vec();
            // NUL-padded so that the entry is a multiple of 8 bytes long.
            at = start + (end - start + 8) / 8 * 8;
            name
        };
        out.push(String::from_utf8_lossy(&name).into_owned());
        prev = name;
    }
    Some(out)
}

/// Git's offset varint (gitformat-index(5), version 4).
fn varint(bytes: &[u8]) -> Option<(usize, usize)> {
    let mut i = 0;
    let mut c = *bytes.first()?;
    let mut value = usize::from(c & 0x7f);
    while c & 0x80 != 0 {
        i += 1;
        c = *bytes.get(i)?;
        value = value.checked_add(1)?.checked_shl(7)? | usize::from(c & 0x7f);
    }
    Some((value, i + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An index as git writes it, built by hand: version 2, two entries.
    fn v2(names: &[&str]) -> Vec<u8> {
        let mut b = b"DIRC".to_vec();
        b.extend(2u32.to_be_bytes());
        b.extend((names.len() as u32).to_be_bytes());
        for n in names {
            let start = b.len();
            b.extend([0u8; 60]);
            b.extend((n.len() as u16).to_be_bytes());
            b.extend(n.as_bytes());
            b.push(0);
            while !(b.len() - start).is_multiple_of(8) {
                b.push(0);
            }
        }
        b
    }

    #[test]
    fn names_are_read_from_a_version_2_index() {
        assert_eq!(tracked(&v2(&["README.md", "src/main.rs"])).unwrap(), ["README.md", "src/main.rs"]);
        // Names whose entry ends exactly on an 8-byte boundary still get their NUL (and 7 more).
        assert_eq!(tracked(&v2(&["ab", "abcdefghij"])).unwrap(), ["ab", "abcdefghij"]);
        assert!(tracked(b"not an index").is_none());
        let mut cut = v2(&["README.md"]);
        cut.truncate(40);
        assert!(tracked(&cut).is_none());
    }

    #[test]
    fn a_real_index_of_git_is_read() {
        // Written by git itself when it is here (CI installs it); skipped where it is not.
        let dir = tempfile::tempdir().unwrap();
        let git = |args: &[&str]| std::process::Command::new("git").args(args).current_dir(dir.path()).output();
        if git(&["init", "-q"]).is_err() {
            return;
        }
        std::fs::create_dir(dir.path().join("src")).unwrap();
        for f in ["a.txt", "src/lib.rs", "src/main.rs"] {
            std::fs::write(dir.path().join(f), f).unwrap();
        }
        git(&["add", "."]).unwrap();
        let index = std::fs::read(dir.path().join(".git/index")).unwrap();
        assert_eq!(tracked(&index).unwrap(), ["a.txt", "src/lib.rs", "src/main.rs"]);
        // Version 4 (prefix-compressed names).
        git(&["update-index", "--index-version", "4"]).unwrap();
        let index = std::fs::read(dir.path().join(".git/index")).unwrap();
        assert_eq!(&index[4..8], &4u32.to_be_bytes());
        assert_eq!(tracked(&index).unwrap(), ["a.txt", "src/lib.rs", "src/main.rs"]);
    }
}
