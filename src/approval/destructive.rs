//! Patterns of commands that destroy data or disrupt the machine. They need an operator's confirmation
//! in every mode, whatever the allow rules say.
//!
//! Each check looks at one simple command after wrappers were removed, so `sudo rm -rf /` reaches
//! here as `rm -rf /`.

use super::parse::{Redirect, Word};

/// Why a command is destructive, phrased to follow the command (`rm -rf x` *deletes a directory tree...*),
/// and what the model may do instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Destructive {
    pub why: String,
    pub instead: &'static str,
}

fn found(why: impl Into<String>, instead: &'static str) -> Option<Destructive> {
    Some(Destructive { why: why.into(), instead })
}

const ASK_OPERATOR: &str = "Ask the operator to run it.";
const RM_INSTEAD: &str = "Delete specific files with `rm FILE`, or ask the operator to run it.";
const TREE_INSTEAD: &str = "Change specific files or a project directory instead, or ask the operator to run it.";

/// The last path component: `/usr/bin/rm` is `rm`.
pub(crate) fn basename(text: &str) -> &str {
    text.rsplit('/').next().unwrap_or(text)
}

/// The letters of a short-option cluster (`-rf` → `rf`); `None` for long options, `-` and `--`.
pub(crate) fn short_cluster(text: &str) -> Option<&str> {
    let rest = text.strip_prefix('-')?;
    if rest.is_empty() || rest.starts_with('-') { None } else { Some(rest) }
}

/// Whether `words` has the long option `long` or a short cluster containing `short`.
fn has_flag(words: &[Word], short: &[char], long: &[&str]) -> bool {
    words.iter().any(|w| {
        long.iter().any(|l| w.text == *l || w.text.strip_prefix(l).is_some_and(|r| r.starts_with('=')))
            || short_cluster(&w.text).is_some_and(|c| c.contains(short))
    })
}

/// Splits `git [global options] SUBCOMMAND ARGS` into the subcommand, its arguments and the `-c` values.
pub(crate) fn git_split(args: &[Word]) -> Option<(&str, &[Word], Vec<&str>)> {
    let mut configs = Vec::new();
    let mut i = 0;
    while let Some(w) = args.get(i) {
        let t = w.text.as_str();
        if matches!(t, "-C" | "-c" | "--git-dir" | "--work-tree" | "--namespace" | "--config-env" | "--super-prefix") {
            if t == "-c" {
                configs.push(args.get(i + 1).map_or("", |v| v.text.as_str()));
            }
            i += 2;
        } else if t.starts_with('-') {
            i += 1;
        } else {
            return Some((t, &args[i + 1..], configs));
        }
    }
    None
}

/// Positional arguments (not options); everything after `--` counts as positional.
fn positionals(words: &[Word]) -> Vec<&str> {
    let mut out = Vec::new();
    let mut done = false;
    for w in words {
        if !done && w.text == "--" {
            done = true;
        } else if done || !w.text.starts_with('-') || w.text == "-" {
            out.push(w.text.as_str());
        }
    }
    out
}

const SYSTEM_DIRS: &[&str] = &[
    "bin", "boot", "dev", "etc", "home", "lib", "lib32", "lib64", "opt", "proc", "root", "sbin", "srv", "sys", "usr",
    "var",
];

/// The target with `/*` and trailing slashes removed, so `/usr/`, `/usr/*` and `/usr` compare equal.
fn target_core(t: &str) -> &str {
    let t = t.strip_suffix("/*").unwrap_or(t);
    let trimmed = t.trim_end_matches('/');
    if trimmed.is_empty() && !t.is_empty() { "/" } else { trimmed }
}

/// `/`, a top-level system directory, or the home directory.
fn is_system_or_home(t: &str) -> bool {
    let core = target_core(t);
    if t == "/*" || matches!(core, "/" | "~" | "$HOME" | "${HOME}") {
        return true;
    }
    core.strip_prefix('/').is_some_and(|d| SYSTEM_DIRS.contains(&d))
}

/// Also the current or parent directory, or everything in it.
fn is_broad(t: &str) -> bool {
    is_system_or_home(t) || matches!(target_core(t), "." | ".." | "*" | ".*")
}

/// Writing there overwrites a disk, a partition or kernel memory.
pub(crate) fn is_raw_device(t: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "/dev/sd",
        "/dev/nvme",
        "/dev/vd",
        "/dev/hd",
        "/dev/xvd",
        "/dev/mmcblk",
        "/dev/disk/",
        "/dev/mapper/",
        "/dev/dm-",
        "/dev/md",
        "/dev/loop",
    ];
    PREFIXES.iter().any(|p| t.starts_with(p)) || matches!(t, "/dev/mem" | "/dev/kmem" | "/dev/port")
}

/// A redirect that writes to a raw device.
pub(crate) fn check_redirect(r: &Redirect) -> Option<Destructive> {
    if r.writes && is_raw_device(&r.target.text) {
        return found(
            format!("writes directly to the device `{}`, destroying what is on it", r.target.text),
            "Write to a regular file, or ask the operator to run it.",
        );
    }
    None
}

/// Checks one simple command (words after unwrapping, name first).
pub(crate) fn check(words: &[Word]) -> Option<Destructive> {
    let name = basename(&words.first()?.text);
    let args = &words[1..];
    match name {
        "rm" => rm(args),
        "dd" => dd(args),
        "mkfs" | "mke2fs" | "mkswap" | "mkntfs" | "mkdosfs" | "wipefs" | "shred" | "fdisk" | "cfdisk" | "sfdisk"
        | "gdisk" | "parted" | "sgdisk" | "blkdiscard" => disk(name, args),
        _ if name.starts_with("mkfs.") => disk(name, args),
        "git" => git(args),
        "chmod" | "chown" | "chgrp" => ownership(name, args),
        "find" => find(args),
        "truncate" => truncate(args),
        "tee" | "cp" => {
            let target = if name == "cp" { positionals(args).last().copied() } else { None };
            let hit = match target {
                Some(t) => is_raw_device(t),
                None => name == "tee" && positionals(args).iter().any(|t| is_raw_device(t)),
            };
            if hit {
                return found("writes directly to a disk device, destroying what is on it", ASK_OPERATOR);
            }
            None
        }
        "mv" => {
            let into_null = positionals(args).last() == Some(&"/dev/null")
                || args.iter().any(|w| w.text == "--target-directory=/dev/null")
                || args.windows(2).any(|p| p[0].text == "-t" && p[1].text == "/dev/null");
            if into_null {
                return found("moves files onto `/dev/null`, destroying them", RM_INSTEAD);
            }
            None
        }
        "shutdown" | "reboot" | "halt" | "poweroff" => {
            if has_flag(args, &['c'], &["--help", "--cancel"]) {
                return None;
            }
            found("shuts down or restarts the machine", ASK_OPERATOR)
        }
        "init" | "telinit" if positionals(args).iter().any(|a| matches!(*a, "0" | "6")) => {
            found("shuts down or restarts the machine", ASK_OPERATOR)
        }
        "systemctl"
            if positionals(args).iter().any(|a| {
                matches!(*a, "poweroff" | "reboot" | "halt" | "kexec" | "soft-reboot" | "rescue" | "emergency")
            }) =>
        {
            found("shuts down or restarts the machine", ASK_OPERATOR)
        }
        "kill" => kill(args),
        "killall" | "killall5" | "pkill" => found(
            "kills every process whose name matches",
            "Kill a specific process with `kill PID`, or ask the operator to run it.",
        ),
        "crontab" if has_flag(args, &['r'], &["--remove"]) => found(
            "deletes the user's crontab",
            "Save it with `crontab -l > FILE` and edit that, or ask the operator to run it.",
        ),
        "rsync" => {
            let deletes = args.iter().any(|w| w.text.starts_with("--delete"));
            let dry_run = has_flag(args, &['n'], &["--dry-run"]);
            if deletes && !dry_run {
                return found(
                    "deletes files at the destination that are not in the source",
                    "Run it without `--delete`, or with `--dry-run` first, or ask the operator to run it.",
                );
            }
            None
        }
        _ => None,
    }
}

fn rm(args: &[Word]) -> Option<Destructive> {
    let (mut recursive, mut force, mut no_preserve_root) = (false, false, false);
    let mut targets = Vec::new();
    let mut options_done = false;
    for w in args {
        let t = w.text.as_str();
        if !options_done && t == "--" {
            options_done = true;
        } else if !options_done && t.starts_with("--") {
            recursive |= t == "--recursive";
            force |= t == "--force";
            no_preserve_root |= t == "--no-preserve-root";
        } else if let Some(cluster) = short_cluster(t).filter(|_| !options_done) {
            recursive |= cluster.contains(['r', 'R']);
            force |= cluster.contains('f');
        } else {
            targets.push(t);
        }
    }
    if no_preserve_root {
        return found("deletes files with the root-directory safeguard turned off (`--no-preserve-root`)", RM_INSTEAD);
    }
    if recursive && let Some(t) = targets.iter().find(|t| is_broad(t)) {
        return found(format!("deletes `{t}` and everything under it"), RM_INSTEAD);
    }
    if recursive && force {
        return found("deletes a directory tree without asking", RM_INSTEAD);
    }
    None
}

fn dd(args: &[Word]) -> Option<Destructive> {
    let target = args.iter().find_map(|w| w.text.strip_prefix("of="))?;
    if target == "/dev/null" {
        return None;
    }
    found(format!("writes raw data over `{target}`"), "Copy files with `cp`, or ask the operator to run it.")
}

fn disk(name: &str, args: &[Word]) -> Option<Destructive> {
    if has_flag(args, &[], &["--help", "--version"]) {
        return None;
    }
    // The listing modes of these tools only read.
    let read_only = match name {
        "fdisk" => has_flag(args, &['l'], &["--list"]),
        "sfdisk" => has_flag(args, &['l', 'd', 's'], &["--list", "--dump", "--show-size"]),
        "parted" => has_flag(args, &['l'], &["--list"]),
        "sgdisk" => has_flag(args, &['p'], &["--print"]),
        "wipefs" => !has_flag(args, &['a', 'o'], &["--all", "--offset"]),
        _ => false,
    };
    if read_only {
        return None;
    }
    if name == "shred" {
        return found("overwrites files so they cannot be recovered", RM_INSTEAD);
    }
    found("formats or rewrites a disk, a partition or its table", ASK_OPERATOR)
}

fn git(args: &[Word]) -> Option<Destructive> {
    let (sub, rest, _) = git_split(args)?;
    let pos = positionals(rest);
    let whole_tree = |p: &&str| matches!(*p, "." | "./" | ":/" | "*" | ":/*" | ":/.");
    match sub {
        "push" => {
            if has_flag(rest, &['f'], &["--force", "--force-with-lease", "--force-if-includes"])
                || pos.iter().skip(1).any(|r| r.len() > 1 && r.starts_with('+'))
            {
                return found(
                    "overwrites history on the remote (a forced push)",
                    "Push without force (`git push origin BRANCH`), or ask the operator to run it.",
                );
            }
            if has_flag(rest, &['d'], &["--delete", "--mirror", "--prune"])
                || pos.iter().skip(1).any(|r| r.len() > 1 && r.starts_with(':'))
            {
                return found(
                    "deletes branches or tags on the remote",
                    "Push without deleting anything, or ask the operator to run it.",
                );
            }
            None
        }
        "reset" if rest.iter().any(|w| w.text == "--hard") => found(
            "discards all uncommitted changes",
            "Set changes aside with `git stash`, use `git reset --soft` or `--mixed`, or ask the operator to run it.",
        ),
        "clean" if has_flag(rest, &['f'], &["--force"]) && !has_flag(rest, &['n'], &["--dry-run"]) => found(
            "deletes untracked files permanently",
            "Run `git clean -n` to see what it would delete, delete specific files, or ask the operator to run it.",
        ),
        "checkout" if pos.iter().any(whole_tree) => found(
            "discards all uncommitted changes in the working tree",
            "Restore specific files with `git checkout -- FILE`, or ask the operator to run it.",
        ),
        "checkout" | "switch" if has_flag(rest, &['f'], &["--force", "--discard-changes"]) => found(
            "discards uncommitted changes while switching branches",
            "Commit or stash the changes first, or ask the operator to run it.",
        ),
        "restore" if pos.iter().any(whole_tree) => {
            let staged_only = has_flag(rest, &['S'], &["--staged"]) && !has_flag(rest, &['W'], &["--worktree"]);
            if staged_only {
                return None;
            }
            found(
                "discards all uncommitted changes in the working tree",
                "Restore specific files with `git restore FILE`, or ask the operator to run it.",
            )
        }
        "branch" => {
            let force_delete = has_flag(rest, &['D'], &[])
                || (has_flag(rest, &['d'], &["--delete"]) && has_flag(rest, &['f'], &["--force"]));
            if force_delete {
                return found(
                    "deletes a branch even if it is not merged",
                    "Use `git branch -d BRANCH`, which refuses unmerged branches, or ask the operator to run it.",
                );
            }
            None
        }
        "stash" if matches!(pos.first(), Some(&"drop" | &"clear")) => {
            found("deletes stashed changes permanently", "Leave the stash alone, or ask the operator to run it.")
        }
        "filter-branch" | "filter-repo" => found("rewrites the repository's whole history", ASK_OPERATOR),
        "reflog" if matches!(pos.first(), Some(&"expire" | &"delete")) => {
            found("deletes reflog entries that recovering lost commits depends on", ASK_OPERATOR)
        }
        "gc" if rest.iter().any(|w| matches!(w.text.as_str(), "--prune=now" | "--prune=all")) => {
            found("deletes unreachable commits immediately, so they cannot be recovered", ASK_OPERATOR)
        }
        _ => None,
    }
}

fn ownership(name: &str, args: &[Word]) -> Option<Destructive> {
    let recursive =
        args.iter().any(|w| w.text == "--recursive" || short_cluster(&w.text).is_some_and(|c| c.contains('R')));
    if !recursive {
        return None;
    }
    let target = positionals(args).into_iter().find(|t| is_system_or_home(t))?;
    let what = if name == "chmod" { "permissions" } else { "ownership" };
    found(format!("changes the {what} of everything under `{target}`"), TREE_INSTEAD)
}

fn find(args: &[Word]) -> Option<Destructive> {
    let deletes = args.iter().any(|w| w.text == "-delete")
        || args.windows(2).any(|p| {
            matches!(p[0].text.as_str(), "-exec" | "-execdir" | "-ok" | "-okdir")
                && matches!(basename(&p[1].text), "rm" | "rmdir" | "unlink" | "shred")
        });
    if deletes {
        return found(
            "deletes every file the search matches",
            "Run the `find` without the delete action to list the files, then delete specific ones, or ask the operator to run it.",
        );
    }
    None
}

fn truncate(args: &[Word]) -> Option<Destructive> {
    let zero = args.iter().any(|w| matches!(w.text.as_str(), "-s0" | "--size=0"))
        || args.windows(2).any(|p| matches!(p[0].text.as_str(), "-s" | "--size") && p[1].text == "0");
    if zero {
        return found("empties files", "Edit the file with the edit tool, or ask the operator to run it.");
    }
    None
}

fn kill(args: &[Word]) -> Option<Destructive> {
    let texts: Vec<&str> = args.iter().map(|w| w.text.as_str()).collect();
    // `kill -1` alone is read as "pid -1" by some kills and is never what an agent means.
    if texts == ["-1"] {
        return found("sends a signal to every process it may signal", ASK_OPERATOR);
    }
    let mut i = 0;
    match texts.first() {
        Some(&"-s" | &"-n") => i = 2,
        Some(t) if t.starts_with('-') && *t != "--" && !matches!(*t, "-l" | "-L") => i = 1,
        _ => {}
    }
    if texts.get(i) == Some(&"--") {
        i += 1;
    }
    let pids = texts.get(i..).unwrap_or_default();
    if pids.contains(&"-1") {
        return found("sends a signal to every process it may signal", ASK_OPERATOR);
    }
    if pids.contains(&"1") {
        return found("signals init (process 1)", ASK_OPERATOR);
    }
    None
}

/// An argument that begins with an expansion may turn into an option at run time (`rm $F /` with `F=-rf`).
/// Only checked for commands whose options decide whether they destroy something.
pub(crate) fn dynamic_option(words: &[Word]) -> Option<&str> {
    let name = basename(&words.first()?.text);
    let args: &[Word] = match name {
        "rm" => &words[1..],
        "git" => match git_split(&words[1..]) {
            Some(("push" | "clean" | "reset", rest, _)) => rest,
            _ => return None,
        },
        _ => return None,
    };
    args.iter().take_while(|w| w.text != "--").find(|w| w.starts_dynamic).map(|w| w.text.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<Word> {
        s.split_whitespace().map(Word::literal).collect()
    }

    fn is_destructive(s: &str) -> bool {
        check(&words(s)).is_some()
    }

    #[test]
    fn rm_flag_spellings() {
        for cmd in
            ["rm -rf x", "rm -fr x", "rm -r -f x", "rm -R -f x", "rm --recursive --force x", "rm -rfv x", "rm x -rf"]
        {
            assert!(is_destructive(cmd), "{cmd}");
        }
    }

    #[test]
    fn rm_recursive_on_broad_targets() {
        for cmd in [
            "rm -r /",
            "rm -r /*",
            "rm -r ~",
            "rm -r ~/",
            "rm -r $HOME",
            "rm -r .",
            "rm -r ..",
            "rm -r *",
            "rm -r /usr/",
        ] {
            assert!(is_destructive(cmd), "{cmd}");
        }
        assert!(is_destructive("rm --no-preserve-root x"));
    }

    #[test]
    fn plain_rm_is_not_destructive() {
        for cmd in ["rm file", "rm -r build", "rm -f a b", "rm -- -rf", "rm -r ./build"] {
            assert!(!is_destructive(cmd), "{cmd}");
        }
    }

    #[test]
    fn git_patterns() {
        for cmd in [
            "git push --force origin main",
            "git push -f",
            "git push --force-with-lease",
            "git push --mirror",
            "git push origin --delete x",
            "git push origin +main",
            "git push origin :old",
            "git -C repo push -fu origin main",
            "git reset --hard HEAD~1",
            "git clean -fdx",
            "git checkout -- .",
            "git checkout .",
            "git restore .",
            "git branch -D x",
            "git branch --delete --force x",
            "git stash drop",
            "git stash clear",
            "git filter-branch --tree-filter x",
            "git filter-repo --path x",
            "git reflog expire --all",
            "git gc --prune=now",
        ] {
            assert!(is_destructive(cmd), "{cmd}");
        }
        for cmd in [
            "git push origin main",
            "git push",
            "git reset HEAD~1",
            "git clean -n",
            "git clean -fn",
            "git checkout main",
            "git checkout -- src/a.rs",
            "git restore --staged .",
            "git branch -d x",
            "git stash",
            "git stash pop",
            "git gc",
        ] {
            assert!(!is_destructive(cmd), "{cmd}");
        }
    }

    #[test]
    fn disk_and_system_patterns() {
        for cmd in [
            "dd if=/dev/zero of=/dev/sda",
            "mkfs.ext4 /dev/sda1",
            "mkfs -t ext4 /dev/sdb",
            "mkswap /dev/sdb2",
            "wipefs -a /dev/sda",
            "shred secret",
            "fdisk /dev/sda",
            "sgdisk -Z /dev/sda",
            "blkdiscard /dev/nvme0n1",
            "chmod -R 777 /",
            "chown -R me ~",
            "find . -delete",
            "find . -name x -exec rm -rf {} ;",
            "truncate -s 0 log",
            "mv x /dev/null",
            "shutdown -h now",
            "reboot",
            "init 0",
            "systemctl reboot",
            "kill -9 -1",
            "kill -1",
            "kill -- -1",
            "killall node",
            "pkill -f server",
            "crontab -r",
            "rsync -a --delete src/ dst/",
            "tee /dev/sda",
        ] {
            assert!(is_destructive(cmd), "{cmd}");
        }
        for cmd in [
            "dd if=a of=/dev/null",
            "fdisk -l",
            "wipefs /dev/sda",
            "chmod -R 755 build",
            "chmod -rwx file",
            "find . -name x",
            "truncate -s 10M f",
            "mv a b",
            "kill 1234",
            "kill -9 1234",
            "kill -1 1234",
            "rsync -an --delete a b",
            "systemctl status x",
            "shutdown -c",
        ] {
            assert!(!is_destructive(cmd), "{cmd}");
        }
    }

    #[test]
    fn dynamic_options() {
        let mut w = words("rm x /");
        w[1].starts_dynamic = true;
        assert_eq!(dynamic_option(&w), Some("x"));
        assert_eq!(dynamic_option(&words("rm a b")), None);
        assert_eq!(dynamic_option(&words("ls a")), None);
    }

    #[test]
    fn raw_device_redirects() {
        let r = |t: &str, writes| Redirect { op: ">".into(), target: Word::literal(t), writes };
        assert!(check_redirect(&r("/dev/sda", true)).is_some());
        assert!(check_redirect(&r("/dev/nvme0n1", true)).is_some());
        assert!(check_redirect(&r("/dev/null", true)).is_none());
        assert!(check_redirect(&r("/dev/sda", false)).is_none());
    }
}
