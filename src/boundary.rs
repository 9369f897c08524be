//! The host boundary as places: which folders may be a workspace, and which files no tool may
//! write.
//!
//! The workspace (and every extra root) is shared read-write with the microVM, so whatever it
//! holds, code in the VM can change. Abhed's own files must therefore never be inside it: the
//! user config chooses the QEMU the host starts, the data folder holds the session store (and
//! the key of its chain), and the binary, the QEMU, the VM image and the model file are run or
//! parsed on the host. [`check_workspace`] refuses such a workspace, and a system directory
//! (`/etc`, `/`, `$HOME`, ...) unless the operator allowed those; [`Boundary::guarding`] is what
//! the write/edit gate asks, whatever the approval policy and the roots say.
//!
//! The set is computed once per config load ([`Boundary::of_host`]); the CLI adds the model it
//! resolved from its flags ([`Boundary::protect`]).

use std::fmt;
use std::path::{Component, Path, PathBuf};

use crate::config::Config;

/// One protected file or folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Protected {
    /// What it is, in a phrase: "the user config".
    pub what: String,
    /// Why nothing in the VM or in a tool call may change it.
    pub why: String,
    /// How the operator moves it out of the way, when a workspace holds it.
    pub fix: String,
    /// As configured, made lexically clean.
    pub path: PathBuf,
    /// With its symlinks resolved (for a path that does not exist yet: its nearest existing
    /// ancestor resolved, the rest appended).
    pub real: PathBuf,
    /// A folder whose inside counts too: a workspace inside it is refused as well (Abhed looks
    /// up files by name there, so a workspace in it could plant one).
    pub inside: bool,
}

/// The protected set of this host and config.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Boundary {
    items: Vec<Protected>,
    /// Folders a VM may not even read (the data folder: the store and its key).
    secrets: Vec<PathBuf>,
}

/// Abhed's data folder: the session store's (`$ABHED_HOME`, else `$XDG_DATA_HOME/abhed`, else
/// `~/.local/share/abhed`), which also holds the prompt cache and the KVM probe record.
pub fn data_dir() -> Option<PathBuf> {
    crate::store::Store::default_path().ok().and_then(|p| p.parent().map(Path::to_path_buf))
}

impl Boundary {
    /// Abhed's own files on this host, for `config` loaded from `user_config` (if any).
    pub fn of_host(config: &Config, user_config: Option<&Path>) -> Boundary {
        let mut b = Boundary::default();
        let settings = "abhed reads its settings from it: the QEMU it starts (sandbox.qemu), the folders tools may touch (extra_roots), the approval policy";
        if let Some(p) = user_config {
            b.protect(p, "the user config", settings, "or point ABHED_CONFIG at a file outside it", false);
        }
        if let Some(p) = crate::config::default_user_config_path()
            && Some(p.as_path()) != user_config
        {
            b.protect(&p, "the default user config location", settings, "or set XDG_CONFIG_HOME elsewhere", false);
        }
        if let Some(d) = data_dir() {
            b.protect(
                &d,
                "Abhed's data folder",
                "it holds the session store and the key of its hash chain (abhed.db), the prompt cache (prompt-cache/) and the KVM probe record (kvm-probe.json), and its models/ and vm/ are searched first for the model and the VM image",
                "or set ABHED_HOME to a folder outside it",
                true,
            );
            b.secrets.push(resolve(&d));
        }
        if let Ok(exe) = std::env::current_exe() {
            b.protect(&exe, "the abhed binary", "the host runs it", "or install abhed elsewhere", false);
            if let Some(prefix) = exe.parent().and_then(Path::parent) {
                let share = prefix.join("share/abhed");
                if share.is_dir() {
                    b.protect(
                        &share,
                        "the install's share folder",
                        "abhed takes its model and VM image from it",
                        "or install abhed elsewhere",
                        true,
                    );
                }
            }
        }
        if let Ok(q) = crate::sandbox::find_qemu(config.sandbox.qemu.as_deref()) {
            if q.bundled {
                if let Some(root) = q.binary.parent().and_then(Path::parent) {
                    b.protect(root, "the bundle's QEMU", "the host runs it, with its libraries", "or move it", false);
                }
            } else {
                b.protect(
                    &q.binary,
                    "the QEMU in use",
                    "the host runs it",
                    "or set sandbox.qemu to one outside it",
                    false,
                );
            }
        }
        let image = match &config.sandbox.image_dir {
            Some(d) => Some(d.clone()),
            None => crate::layout::search_dirs("vm").into_iter().find(|d| d.join("manifest.json").is_file()),
        };
        if let Some(d) = image {
            b.protect(
                &d,
                "the VM image in use",
                "the host boots its kernel and initramfs",
                "or set sandbox.image_dir to one outside it",
                false,
            );
        }
        let model = std::env::var_os("ABHED_MODEL").filter(|v| !v.is_empty()).map(PathBuf::from);
        if let Ok(p) = crate::model::locate::model_path(model.as_deref().or(config.model.path.as_deref())) {
            b.protect_model(&p);
        }
        b
    }

    /// Add the model file a run uses (a flag may name another than the config's).
    pub fn protect_model(&mut self, path: &Path) {
        self.protect(
            path,
            "the model file in use",
            "llama.cpp parses it on the host",
            "or move the model file out of it (--model, model.path)",
            false,
        );
    }

    /// Add `path` to the set.
    pub fn protect(&mut self, path: &Path, what: &str, why: &str, fix: &str, inside: bool) {
        let path = absolute(path);
        let real = resolve(&path);
        if self.items.iter().any(|i| i.real == real) {
            return;
        }
        self.items.push(Protected {
            what: what.to_string(),
            why: why.to_string(),
            fix: fix.to_string(),
            path,
            real,
            inside,
        });
    }

    pub fn items(&self) -> &[Protected] {
        &self.items
    }

    /// The protected file or folder `path` is, or lies in. Both spellings of each are compared,
    /// as configured and resolved, so a symlink on either side leads nowhere new.
    pub fn guarding(&self, path: &Path) -> Option<&Protected> {
        let p = lexical(path);
        self.items.iter().find(|i| p.starts_with(&i.path) || p.starts_with(&i.real))
    }

    /// Whether `root` holds `item`, or (for a folder whose inside counts) lies in it.
    fn conflict(&self, root: &Path) -> Option<(&Protected, bool)> {
        self.items.iter().find_map(|i| {
            if i.real.starts_with(root) || i.path.starts_with(root) {
                Some((i, true))
            } else if i.inside && (root.starts_with(&i.real) || root.starts_with(&i.path)) {
                Some((i, false))
            } else {
                None
            }
        })
    }
}

/// Why a folder cannot be a workspace (or an extra root, or a host folder the VM reads).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A system directory, and the operator has not allowed those.
    System { role: Role, dir: PathBuf, what: &'static str },
    /// It holds one of Abhed's own files, or lies in one of its folders.
    Holds { role: Role, dir: PathBuf, item: Box<Protected>, contains: bool },
    /// A folder the VM reads holds the data folder.
    Secret { dir: PathBuf, secret: PathBuf },
}

/// Which of the shared folders a refusal is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Workspace,
    ExtraRoot,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = |role: Role, dir: &Path| -> (String, &'static str) {
            match role {
                Role::Workspace => (
                    format!("workspace {}", dir.display()),
                    "The workspace is shared read-write with the VM that bash runs in",
                ),
                Role::ExtraRoot => (
                    format!("extra root {} (workspace.extra_roots in the user config)", dir.display()),
                    "Every extra root is shared read-write with the VM that bash runs in, and tools may write in it",
                ),
            }
        };
        match self {
            Refusal::System { role, dir, what } => {
                let (name, shared) = name(*role, dir);
                write!(
                    f,
                    "refusing {name}: it is a system directory ({what}). {shared}. Choose a project folder instead ({}). If you mean it, allow system directories in the user config ({}): [workspace] allow_system_dirs = true",
                    match role {
                        Role::Workspace => "--workspace DIR, or run abhed from that folder",
                        Role::ExtraRoot => "a narrower folder in workspace.extra_roots",
                    },
                    crate::config::user_config_display()
                )
            }
            Refusal::Holds { role, dir, item, contains } => {
                let (name, shared) = name(*role, dir);
                let relation = if *contains { "contains" } else { "lies inside" };
                let place = if item.real == item.path {
                    item.path.display().to_string()
                } else {
                    format!("{} (resolved: {})", item.path.display(), item.real.display())
                };
                let (change, choose) = if *contains {
                    ("change it", "Choose a subfolder that does not hold it as the workspace")
                } else {
                    ("add files to it", "Choose a folder outside it as the workspace")
                };
                write!(
                    f,
                    "refusing {name}: it {relation} {} {place}. {shared}, so code there could {change}, and {}. {choose}, {}.",
                    item.what, item.why, item.fix
                )
            }
            Refusal::Secret { dir, secret } => write!(
                f,
                "refusing sandbox.host_readonly folder {}: it holds Abhed's data folder {} (the session store and the key of its hash chain), and the VM may read every host_readonly folder. Name narrower folders in sandbox.host_readonly, or set ABHED_HOME outside them",
                dir.display(),
                secret.display()
            ),
        }
    }
}

impl std::error::Error for Refusal {}

/// The one check of a workspace, used by every command that opens one (`doctor` reports it).
/// `ws` is the workspace as chosen; its symlinks are resolved here. Extra roots that do not
/// exist grant nothing and are skipped, as the path confinement skips them.
pub fn check_workspace(ws: &Path, config: &Config) -> Result<(), Refusal> {
    let boundary = &config.boundary;
    let allow_system = config.workspace.allow_system_dirs;
    let mut roots = vec![(Role::Workspace, resolve(&absolute(ws)))];
    roots.extend(
        config.workspace.extra_roots.iter().filter_map(|r| r.canonicalize().ok()).map(|r| (Role::ExtraRoot, r)),
    );
    let home = home_dir();
    for (role, dir) in roots {
        if !allow_system && let Some(what) = system_dir(&dir, home.as_deref()) {
            return Err(Refusal::System { role, dir, what });
        }
        if let Some((item, contains)) = boundary.conflict(&dir) {
            return Err(Refusal::Holds { role, dir, item: Box::new(item.clone()), contains });
        }
    }
    for dir in config.sandbox.host_readonly.iter().filter_map(|d| d.canonicalize().ok()) {
        if let Some(secret) = boundary.secrets.iter().find(|s| s.starts_with(&dir)) {
            return Err(Refusal::Secret { dir, secret: secret.clone() });
        }
    }
    Ok(())
}

/// Directories refused as themselves only: a project may well live inside them.
const SYSTEM_EXACT: &[(&str, &str)] = &[
    ("/", "the root of the host's file system"),
    ("/home", "it holds every user's home folder"),
    ("/root", "root's home folder"),
    ("/tmp", "every user and program of the host shares it; make a folder inside it"),
    ("/var", "the host's variable state"),
    ("/var/tmp", "every user and program of the host shares it; make a folder inside it"),
    ("/var/lib", "the host's services keep their state in it"),
    ("/mnt", "a mount point of the host"),
    ("/media", "a mount point of the host"),
    ("/opt", "the host's add-on software"),
    ("/srv", "the host's served data"),
    ("/snap", "the host's snap packages"),
    ("/nix", "the host's Nix store"),
];

/// Directories refused with everything inside them.
const SYSTEM_TREES: &[(&str, &str)] = &[
    ("/etc", "the host's configuration"),
    ("/usr", "the host's programs and libraries"),
    ("/bin", "the host's programs"),
    ("/sbin", "the host's programs"),
    ("/lib", "the host's libraries"),
    ("/lib32", "the host's libraries"),
    ("/lib64", "the host's libraries"),
    ("/libx32", "the host's libraries"),
    ("/boot", "the host's kernel and boot loader"),
    ("/dev", "the host's devices"),
    ("/proc", "the host's processes"),
    ("/sys", "the host's kernel state"),
    ("/run", "the host's running services"),
    ("/var/log", "the host's logs"),
    ("/var/spool", "the host's queues (cron, mail, printing)"),
    ("/var/mail", "the host's mailboxes"),
    ("/var/cache", "the host's caches"),
    ("/var/backups", "the host's backups"),
    ("/var/lib/dpkg", "the package manager's state and scripts"),
    ("/var/lib/apt", "the package manager's state"),
    ("/var/lib/systemd", "the init system's state"),
];

/// What system directory `dir` (resolved) is, if it is one. Both the listed spelling and its
/// resolved form count (`/lib` is `/usr/lib` on a merged-/usr host).
pub fn system_dir(dir: &Path, home: Option<&Path>) -> Option<&'static str> {
    let both = |s: &str| {
        let p = PathBuf::from(s);
        let r = p.canonicalize().unwrap_or_else(|_| p.clone());
        [p, r]
    };
    for (d, what) in SYSTEM_TREES {
        if both(d).iter().any(|p| dir.starts_with(p)) {
            return Some(what);
        }
    }
    for (d, what) in SYSTEM_EXACT {
        if both(d).iter().any(|p| dir == p) {
            return Some(what);
        }
    }
    const HOME: &str = "a home folder: it holds the shell's start-up files (.bashrc, .profile), ~/.ssh and ~/.config, which the host runs or trusts";
    if home.is_some_and(|h| dir == h) {
        return Some(HOME);
    }
    // Another user's home: a direct child of /home.
    if both("/home").iter().any(|h| dir.parent() == Some(h.as_path())) {
        return Some(HOME);
    }
    None
}

fn home_dir() -> Option<PathBuf> {
    std::env::var_os("HOME").filter(|v| !v.is_empty()).map(|h| resolve(&absolute(Path::new(&h))))
}

/// `path` made absolute (against the current directory) and lexically clean.
fn absolute(path: &Path) -> PathBuf {
    if path.is_absolute() {
        lexical(path)
    } else {
        std::env::current_dir().map(|d| lexical(&d.join(path))).unwrap_or_else(|_| lexical(path))
    }
}

/// Drop `.`, apply `..`, collapse separators, without touching the file system.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                if out.parent().is_some() {
                    out.pop();
                }
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// `path` (absolute, clean) with its symlinks resolved; for a path that does not exist yet, the
/// nearest existing ancestor resolved and the rest appended.
pub fn resolve(path: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut at = path.to_path_buf();
    loop {
        if let Ok(real) = at.canonicalize() {
            return rest.iter().rev().fold(real, |acc, name: &std::ffi::OsString| acc.join(name));
        }
        match (at.parent(), at.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                at = parent.to_path_buf();
            }
            _ => return path.to_path_buf(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_directories() {
        let home = Path::new("/home/me");
        for d in [
            "/",
            "/etc",
            "/etc/ssh",
            "/usr",
            "/usr/local/bin",
            "/tmp",
            "/var",
            "/boot",
            "/home",
            "/home/other",
            "/root",
        ] {
            assert!(system_dir(Path::new(d), Some(home)).is_some(), "{d}");
        }
        assert!(system_dir(home, Some(home)).is_some());
        for d in ["/tmp/x", "/home/me/proj", "/var/lib/jenkins/workspace/job", "/srv/git/repo", "/mnt/data/p"] {
            assert_eq!(system_dir(Path::new(d), Some(home)), None, "{d}");
        }
    }

    #[test]
    fn resolves_paths_that_do_not_exist_yet() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().canonicalize().unwrap();
        std::os::unix::fs::symlink(&real, dir.path().join("link")).unwrap();
        assert_eq!(resolve(&dir.path().join("link/a/b.toml")), real.join("a/b.toml"));
        assert_eq!(lexical(Path::new("/a/./b/../c//d")), PathBuf::from("/a/c/d"));
        assert_eq!(lexical(Path::new("/../etc")), PathBuf::from("/etc"));
    }

    #[test]
    fn a_protected_folder_guards_its_inside_in_both_spellings() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().canonicalize().unwrap();
        std::fs::create_dir(real.join("data")).unwrap();
        std::os::unix::fs::symlink(real.join("data"), real.join("alias")).unwrap();
        let mut b = Boundary::default();
        b.protect(&real.join("alias"), "the data", "why", "fix", true);
        assert!(b.guarding(&real.join("data/abhed.db")).is_some());
        assert!(b.guarding(&real.join("alias/x/../abhed.db")).is_some());
        assert!(b.guarding(&real.join("datax")).is_none());
        assert_eq!(b.conflict(&real).map(|(_, c)| c), Some(true));
        assert_eq!(b.conflict(&real.join("data/sub")).map(|(_, c)| c), Some(false));
        assert!(b.conflict(&real.join("other")).is_none());
    }
}
