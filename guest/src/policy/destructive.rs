//! Commands that destroy data or disrupt the machine. They need an operator's confirmation in
//! every mode, whatever the allow rules say.
//!
//! Each check looks at one command's words, name first, as [`super::normalise`] wrote them:
//! long options spelled out (`rm --recurs` is `rm --recursive`), git's global options and
//! aliases resolved. The host's first look at a command line and the guest's check of each
//! exec both call [`check`], so the list means the same in both places.

/// Why a command is destructive, phrased to follow the command (`rm -rf x` *deletes a directory
/// tree...*), and what the model may do instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destructive {
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
pub fn basename(text: &str) -> &str {
    text.rsplit('/').next().unwrap_or(text)
}

/// The letters of a short-option cluster (`-rf` → `rf`); `None` for long options, `-` and `--`.
pub fn short_cluster(text: &str) -> Option<&str> {
    let rest = text.strip_prefix('-')?;
    if rest.is_empty() || rest.starts_with('-') { None } else { Some(rest) }
}

/// Whether `words` has the long option `long` or a short cluster containing `short`, before `--`.
fn has_flag(words: &[&str], short: &[char], long: &[&str]) -> bool {
    words.iter().take_while(|w| **w != "--").any(|w| {
        long.iter().any(|l| *w == *l || w.strip_prefix(l).is_some_and(|r| r.starts_with('=')))
            || short_cluster(w).is_some_and(|c| c.contains(short))
    })
}

/// Splits `git [global options] SUBCOMMAND ARGS` into the subcommand, its arguments and the
/// `-c` values.
pub fn git_split<'a>(args: &'a [&'a str]) -> Option<(&'a str, &'a [&'a str], Vec<&'a str>)> {
    let mut configs = Vec::new();
    let mut i = 0;
    while let Some(t) = args.get(i).copied() {
        if matches!(t, "-C" | "-c" | "--git-dir" | "--work-tree" | "--namespace" | "--config-env" | "--super-prefix") {
            if t == "-c" {
                configs.push(args.get(i + 1).copied().unwrap_or(""));
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
fn positionals<'a>(words: &[&'a str]) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut done = false;
    for w in words {
        if !done && *w == "--" {
            done = true;
        } else if done || !w.starts_with('-') || *w == "-" {
            out.push(*w);
        }
    }
    out
}

const SYSTEM_DIRS: &[&str] = &[
    "bin", "boot", "dev", "etc", "home", "lib", "lib32", "lib64", "opt", "proc", "root", "sbin", "srv", "sys", "usr",
    "var",
];

/// `path` with `.` and `..` resolved lexically and repeated slashes folded: `/usr/../etc` is
/// `/etc`, `/./` is `/`. Relative paths stay relative (`./a/../b` is `b`, `..` stays `..`).
pub fn clean_path(path: &str) -> String {
    let absolute = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for c in path.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|p| *p != "..") {
                    parts.pop();
                } else if !absolute {
                    parts.push("..");
                }
            }
            other => parts.push(other),
        }
    }
    let joined = parts.join("/");
    match (absolute, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".to_string(),
        (false, false) => joined,
    }
}

/// The target with `/*` and trailing slashes removed and the path cleaned, so `/usr/`,
/// `/usr/*`, `/usr/../usr` and `/usr` compare equal.
fn target_core(t: &str) -> String {
    let t = t.strip_suffix("/*").unwrap_or(t);
    if matches!(t, "~" | "$HOME" | "${HOME}" | "*" | ".*") {
        return t.to_string();
    }
    clean_path(t)
}

/// `/`, a top-level system directory, or the home directory.
fn is_system_or_home(t: &str) -> bool {
    let core = target_core(t);
    if t == "/*" || matches!(core.as_str(), "/" | "~" | "$HOME" | "${HOME}") {
        return true;
    }
    core.strip_prefix('/').is_some_and(|d| SYSTEM_DIRS.contains(&d))
}

/// Also the current or parent directory, or everything in it.
fn is_broad(t: &str) -> bool {
    is_system_or_home(t) || matches!(target_core(t).as_str(), "." | ".." | "*" | ".*")
}

/// Writing there overwrites a disk, a partition or kernel memory.
pub fn is_raw_device(t: &str) -> bool {
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
    let t = clean_path(t);
    PREFIXES.iter().any(|p| t.starts_with(p)) || matches!(t.as_str(), "/dev/mem" | "/dev/kmem" | "/dev/port")
}

/// A number as the program would read it: `00` and `0` are zero, `-01` is minus one.
fn number(t: &str) -> Option<i64> {
    let (neg, digits) = match t.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let trimmed = digits.trim_start_matches('0');
    let v: i64 = if trimmed.is_empty() { 0 } else { trimmed.parse().ok()? };
    Some(if neg { -v } else { v })
}

/// Checks one command: its words, name first.
pub fn check(words: &[&str]) -> Option<Destructive> {
    let name = basename(words.first()?);
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
        "tee" => positionals(args).iter().any(|t| is_raw_device(t)).then(|| Destructive {
            why: "writes directly to a disk device, destroying what is on it".into(),
            instead: ASK_OPERATOR,
        }),
        "cp" => cp(args),
        "mv" => {
            let into_null = positionals(args).last() == Some(&"/dev/null")
                || args.contains(&"--target-directory=/dev/null")
                || args.windows(2).any(|p| p[0] == "-t" && p[1] == "/dev/null");
            if into_null {
                return found("moves files onto `/dev/null`, destroying them", RM_INSTEAD);
            }
            None
        }
        "ln" => ln(args),
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
            let deletes = args.iter().any(|w| w.starts_with("--delete"));
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

fn rm(args: &[&str]) -> Option<Destructive> {
    let (mut recursive, mut force, mut no_preserve_root) = (false, false, false);
    let mut targets = Vec::new();
    let mut options_done = false;
    for t in args.iter().copied() {
        if !options_done && t == "--" {
            options_done = true;
        } else if !options_done && t.starts_with("--") {
            recursive |= t == "--recursive";
            // Never asking is what -f does to a tree; `--interactive=never` says it in words.
            force |= t == "--force" || t == "--interactive=never";
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

fn dd(args: &[&str]) -> Option<Destructive> {
    let target = args.iter().find_map(|w| w.strip_prefix("of="))?;
    if clean_path(target) == "/dev/null" {
        return None;
    }
    found(format!("writes raw data over `{target}`"), "Copy files with `cp`, or ask the operator to run it.")
}

fn disk(name: &str, args: &[&str]) -> Option<Destructive> {
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

/// A pathspec that names the whole working tree: `.`, `:/`, `*`, or magic such as `:(top)`.
fn whole_tree(p: &str) -> bool {
    if matches!(p, "." | "./" | ":/" | "*" | ":/*" | ":/." | ":") {
        return true;
    }
    // Long magic: `:(top)`, `:(top,icase)`, `:(top)*`, and the short `:/` forms.
    if let Some(rest) = p.strip_prefix(":(")
        && let Some((magic, tail)) = rest.split_once(')')
    {
        return magic.split(',').any(|m| m.trim() == "top") && matches!(tail, "" | "." | "*" | "/");
    }
    false
}

fn git(args: &[&str]) -> Option<Destructive> {
    let (sub, rest, configs) = git_split(args)?;
    let pos = positionals(rest);
    let config_is = |key: &str, pred: &dyn Fn(&str) -> bool| {
        configs.iter().any(|c| c.split_once('=').is_some_and(|(k, v)| k.eq_ignore_ascii_case(key) && pred(v)))
    };
    match sub {
        "push" => {
            let forced_by_config = configs.iter().any(|c| {
                c.split_once('=').is_some_and(|(k, v)| {
                    let k = k.to_ascii_lowercase();
                    k.starts_with("remote.") && k.ends_with(".push") && v.starts_with('+')
                })
            });
            if forced_by_config
                || has_flag(rest, &['f'], &["--force", "--force-with-lease", "--force-if-includes"])
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
        "reset" if rest.contains(&"--hard") => found(
            "discards all uncommitted changes",
            "Set changes aside with `git stash`, use `git reset --soft` or `--mixed`, or ask the operator to run it.",
        ),
        "clean" => {
            let dry_run = has_flag(rest, &['n'], &["--dry-run"]);
            let forced = has_flag(rest, &['f'], &["--force"])
                || config_is("clean.requireForce", &|v| {
                    matches!(v.to_ascii_lowercase().as_str(), "false" | "no" | "off" | "0")
                });
            if forced && !dry_run {
                return found(
                    "deletes untracked files permanently",
                    "Run `git clean -n` to see what it would delete, delete specific files, or ask the operator to run it.",
                );
            }
            None
        }
        "checkout" if pos.iter().any(|p| whole_tree(p)) => found(
            "discards all uncommitted changes in the working tree",
            "Restore specific files with `git checkout -- FILE`, or ask the operator to run it.",
        ),
        "checkout" | "switch" if has_flag(rest, &['f'], &["--force", "--discard-changes"]) => found(
            "discards uncommitted changes while switching branches",
            "Commit or stash the changes first, or ask the operator to run it.",
        ),
        "restore" if pos.iter().any(|p| whole_tree(p)) => {
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
        "update-ref" if has_flag(rest, &['d'], &[]) || rest.contains(&"--stdin") => found(
            "deletes or rewrites refs directly, which can lose commits",
            "Use `git branch` or `git tag` to change refs, or ask the operator to run it.",
        ),
        "filter-branch" | "filter-repo" => found("rewrites the repository's whole history", ASK_OPERATOR),
        "reflog" if matches!(pos.first(), Some(&"expire" | &"delete")) => {
            found("deletes reflog entries that recovering lost commits depends on", ASK_OPERATOR)
        }
        "gc" if rest.iter().any(|w| matches!(*w, "--prune=now" | "--prune=all")) => {
            found("deletes unreachable commits immediately, so they cannot be recovered", ASK_OPERATOR)
        }
        _ => None,
    }
}

fn ownership(name: &str, args: &[&str]) -> Option<Destructive> {
    let recursive = args.iter().any(|w| *w == "--recursive" || short_cluster(w).is_some_and(|c| c.contains('R')));
    if !recursive {
        return None;
    }
    let target = positionals(args).into_iter().find(|t| is_system_or_home(t))?;
    let what = if name == "chmod" { "permissions" } else { "ownership" };
    found(format!("changes the {what} of everything under `{target}`"), TREE_INSTEAD)
}

fn find(args: &[&str]) -> Option<Destructive> {
    let deletes = args.contains(&"-delete")
        || args.windows(2).any(|p| {
            matches!(p[0], "-exec" | "-execdir" | "-ok" | "-okdir")
                && matches!(basename(p[1]), "rm" | "rmdir" | "unlink" | "shred")
        });
    if deletes {
        return found(
            "deletes every file the search matches",
            "Run the `find` without the delete action to list the files, then delete specific ones, or ask the operator to run it.",
        );
    }
    None
}

fn truncate(args: &[&str]) -> Option<Destructive> {
    let is_zero = |v: &str| number(v) == Some(0);
    let zero = args.iter().any(|w| w.strip_prefix("-s").is_some_and(|v| !v.is_empty() && is_zero(v)))
        || args.iter().any(|w| w.strip_prefix("--size=").is_some_and(is_zero))
        || args.windows(2).any(|p| matches!(p[0], "-s" | "--size") && is_zero(p[1]));
    if zero {
        return found("empties files", "Edit the file with the edit tool, or ask the operator to run it.");
    }
    None
}

/// `cp` onto a raw device, or `cp /dev/null FILE`, which empties the file.
fn cp(args: &[&str]) -> Option<Destructive> {
    let pos = positionals(args);
    let target = pos.last().copied()?;
    if is_raw_device(target) {
        return found("writes directly to a disk device, destroying what is on it", ASK_OPERATOR);
    }
    if pos.len() >= 2 && pos[..pos.len() - 1].iter().any(|s| clean_path(s) == "/dev/null") {
        return found(
            format!("copies `/dev/null` over `{target}`, emptying it"),
            "Edit the file with the edit tool, or ask the operator to run it.",
        );
    }
    None
}

/// `ln -sf TARGET FILE` replaces FILE, whatever it held, with a link.
fn ln(args: &[&str]) -> Option<Destructive> {
    let force = has_flag(args, &['f'], &["--force"]);
    let pos = positionals(args);
    if force && pos.first().is_some_and(|t| clean_path(t) == "/dev/null") {
        return found(
            "replaces files with links to `/dev/null`, losing what they held",
            "Edit the file with the edit tool, or ask the operator to run it.",
        );
    }
    None
}

fn kill(args: &[&str]) -> Option<Destructive> {
    // `kill -1` alone is read as "pid -1" by some kills and is never what an agent means.
    if args.len() == 1 && number(args[0]) == Some(-1) {
        return found("sends a signal to every process it may signal", ASK_OPERATOR);
    }
    let mut i = 0;
    match args.first() {
        Some(&"-s" | &"-n") => i = 2,
        Some(t) if t.starts_with('-') && *t != "--" && !matches!(*t, "-l" | "-L") => i = 1,
        _ => {}
    }
    if args.get(i) == Some(&"--") {
        i += 1;
    }
    let pids: Vec<Option<i64>> = args.get(i..).unwrap_or_default().iter().map(|p| number(p)).collect();
    if pids.contains(&Some(-1)) {
        return found("sends a signal to every process it may signal", ASK_OPERATOR);
    }
    if pids.contains(&Some(1)) {
        return found("signals init (process 1)", ASK_OPERATOR);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_destructive(s: &str) -> bool {
        let words: Vec<&str> = s.split_whitespace().collect();
        check(&words).is_some()
    }

    #[test]
    fn rm_flag_spellings() {
        for cmd in [
            "rm -rf x",
            "rm -fr x",
            "rm -r -f x",
            "rm -R -f x",
            "rm --recursive --force x",
            "rm -rfv x",
            "rm x -rf",
            "rm -r --interactive=never x",
        ] {
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
            "rm -r /./",
            "rm -r /usr/../etc",
            "rm -r //",
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
            "git -c remote.origin.push=+refs/heads/*:refs/heads/* push",
            "git reset --hard HEAD~1",
            "git clean -fdx",
            "git -c clean.requireForce=false clean",
            "git checkout -- .",
            "git checkout .",
            "git checkout HEAD -- :(top)",
            "git checkout HEAD -- :/",
            "git restore .",
            "git branch -D x",
            "git branch --delete --force x",
            "git stash drop",
            "git stash clear",
            "git update-ref -d refs/heads/main",
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
            "git clean",
            "git checkout main",
            "git checkout -- src/a.rs",
            "git checkout HEAD -- :(top)src/a.rs",
            "git restore --staged .",
            "git branch -d x",
            "git stash",
            "git stash pop",
            "git gc",
            "git update-ref refs/heads/x HEAD",
            // The peer's cases (Codex's execpolicy example: `git reset --hard` forbidden, these
            // two not; abbreviations are normalised first, normalise.rs).
            "git reset --keep",
            "git reset --merge",
        ] {
            assert!(!is_destructive(cmd), "{cmd}");
        }
        assert!(is_destructive("git reset --hard"));
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
            "chmod -R 755 /./",
            "chown -R root /usr/../etc",
            "chown -R me ~",
            "find . -delete",
            "find . -name x -exec rm -rf {} ;",
            "truncate -s 0 log",
            "truncate -s 00 log",
            "truncate -s0 log",
            "truncate --size=0 log",
            "cp /dev/null f",
            "cp /dev//null f",
            "ln -sf /dev/null f",
            "mv x /dev/null",
            "shutdown -h now",
            "reboot",
            "init 0",
            "systemctl reboot",
            "kill -9 -1",
            "kill -9 -01",
            "kill -1",
            "kill -- -1",
            "killall node",
            "pkill -f server",
            "crontab -r",
            "rsync -a --delete src/ dst/",
            "tee /dev/sda",
            "tee /dev//vda",
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
            "cp a b",
            "ln -s a b",
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
    fn paths_are_cleaned_lexically() {
        assert_eq!(clean_path("/./"), "/");
        assert_eq!(clean_path("/usr/../etc"), "/etc");
        assert_eq!(clean_path("/../.."), "/");
        assert_eq!(clean_path("a/./b/../c"), "a/c");
        assert_eq!(clean_path("../x"), "../x");
        assert_eq!(clean_path("./"), ".");
        assert!(is_raw_device("/dev//vda"));
        assert!(is_raw_device("/dev/./sda1"));
        assert!(!is_raw_device("/dev/null"));
    }
}
