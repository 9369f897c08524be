//! Which QEMU boots the microVM, and how it is started.
//!
//! An installed bundle carries its own QEMU (`qemu/` beside `bin/`): the binary, every shared
//! library it loads, the glibc dynamic loader they were built with, the TCG accelerator module
//! and the one firmware file a microvm boot reads. It is started through that loader with
//! `--library-path`, so a host needs neither QEMU nor any of its libraries. Otherwise QEMU is
//! the configured one or the first on `PATH`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::SandboxError;

const NAME: &str = "qemu-system-x86_64";
/// The loader's name in the bundle's `qemu/lib/`, as glibc names it on x86-64.
const LOADER: &str = "ld-linux-x86-64.so.2";

/// A QEMU to start: `program` with `pre_args` before QEMU's own arguments, and `env`.
#[derive(Debug, Clone, PartialEq)]
pub struct Qemu {
    /// The QEMU binary itself (for messages, `--version` and the KVM probe's key).
    pub binary: PathBuf,
    /// Whether this is the bundle's own QEMU.
    pub bundled: bool,
    program: PathBuf,
    pre_args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
}

impl Qemu {
    /// A QEMU binary the host's loader can start.
    pub fn system(binary: PathBuf) -> Qemu {
        Qemu { program: binary.clone(), binary, bundled: false, pre_args: Vec::new(), env: Vec::new() }
    }

    /// The bundle's QEMU under `root` (`root/bin/NAME`, `root/lib/` with the loader, the
    /// modules in `root/lib/modules`, firmware in `root/share`), if it is there.
    pub fn bundled(root: &Path) -> Option<Qemu> {
        let binary = root.join("bin").join(NAME);
        let lib = root.join("lib");
        let loader = lib.join(LOADER);
        if !binary.is_file() || !loader.is_file() {
            return None;
        }
        let mut pre_args: Vec<OsString> = vec!["--library-path".into(), lib.clone().into()];
        // QEMU looks for its firmware and modules relative to its own executable, which is the
        // loader when started this way; name both outright.
        pre_args.extend(["--argv0".into(), NAME.into(), binary.clone().into(), "-L".into(), root.join("share").into()]);
        let env = vec![("QEMU_MODULE_DIR".into(), lib.join("modules").into())];
        Some(Qemu { binary, bundled: true, program: loader, pre_args, env })
    }

    /// A command that starts this QEMU; add QEMU's arguments to it.
    pub fn command(&self) -> Command {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.pre_args).envs(self.env.iter().map(|(k, v)| (k, v)));
        cmd
    }

    /// The first line of `--version`, or "" when it does not start.
    pub fn version(&self) -> String {
        self.command()
            .arg("--version")
            .output()
            .ok()
            .and_then(|o| String::from_utf8_lossy(&o.stdout).lines().next().map(str::to_string))
            .unwrap_or_default()
    }
}

/// The QEMU to use: the configured one, else the bundle's (`../qemu` from abhed's own folder),
/// else `qemu-system-x86_64` beside abhed or on `PATH`.
pub fn find_qemu(configured: Option<&Path>) -> Result<Qemu, SandboxError> {
    if let Some(p) = configured {
        return if p.is_file() {
            Ok(Qemu::system(p.to_path_buf()))
        } else {
            Err(SandboxError::Unavailable(format!(
                "sandbox.qemu is set to {}, which does not exist. Fix the path in the user config, or remove it to use the bundle's QEMU or {NAME} from PATH",
                p.display()
            )))
        };
    }
    let bin = std::env::current_exe().ok().and_then(|e| e.parent().map(Path::to_path_buf));
    if let Some(q) = bin.as_deref().and_then(Path::parent).and_then(|prefix| Qemu::bundled(&prefix.join("qemu"))) {
        return Ok(q);
    }
    let beside = bin.map(|d| d.join(NAME));
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).map(|d| d.join(NAME)).collect::<Vec<_>>())
        .unwrap_or_default();
    beside.into_iter().chain(on_path).find(|p| p.is_file()).map(Qemu::system).ok_or_else(|| {
        SandboxError::Unavailable(format!(
            "{NAME} is not installed, and bash runs only inside the microVM, never on the host. Install abhed from its bundle (which carries QEMU), or QEMU with `sudo apt-get install qemu-system-x86` (or set sandbox.qemu in the user config)"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bundled_qemu_starts_through_its_own_loader_with_its_own_libraries() {
        let root = tempfile::tempdir().unwrap();
        assert_eq!(Qemu::bundled(root.path()), None, "an empty folder is not a bundle's QEMU");
        std::fs::create_dir_all(root.path().join("bin")).unwrap();
        std::fs::create_dir_all(root.path().join("lib")).unwrap();
        std::fs::write(root.path().join("bin").join(NAME), "").unwrap();
        std::fs::write(root.path().join("lib").join(LOADER), "").unwrap();
        let q = Qemu::bundled(root.path()).unwrap();
        assert!(q.bundled);
        let cmd = q.command();
        assert_eq!(Path::new(cmd.get_program()), root.path().join("lib").join(LOADER));
        let args: Vec<_> = cmd.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
        let r = root.path().display();
        assert_eq!(
            args,
            [
                "--library-path".to_string(),
                format!("{r}/lib"),
                "--argv0".into(),
                NAME.into(),
                format!("{r}/bin/{NAME}"),
                "-L".into(),
                format!("{r}/share")
            ]
        );
        let env: Vec<_> = cmd.get_envs().collect();
        assert_eq!(env, [(std::ffi::OsStr::new("QEMU_MODULE_DIR"), Some(root.path().join("lib/modules").as_os_str()))]);
    }
}
