//! Patterns of commands that destroy data or disrupt the machine, for the first look at a command
//! line. They need an operator's confirmation in every mode, whatever the allow rules say.
//!
//! The list is the guest's (`abhed_guest::policy::destructive`), read on the words normalised the
//! way the guest's exec check normalises a program's argv (`rm --recurs` is `rm --recursive`,
//! git's global options and `-c` aliases resolved): a rule means the same before the command
//! runs and at each exec. Each check looks at one simple command after wrappers were removed, so
//! `sudo rm -rf /` reaches here as `rm -rf /`.

use abhed_guest::policy::destructive as list;
use abhed_guest::policy::normalise;

use super::parse::{Redirect, Word};

pub(crate) use list::{Destructive, basename, short_cluster};

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

/// A redirect that writes to a raw device (`> /dev//vda` too: the path is cleaned first).
pub(crate) fn check_redirect(r: &Redirect) -> Option<Destructive> {
    if r.writes && list::is_raw_device(&r.target.text) {
        let target = list::clean_path(&r.target.text);
        return Some(Destructive {
            why: format!("writes directly to the device `{target}`, destroying what is on it"),
            instead: "Write to a regular file, or ask the operator to run it.",
        });
    }
    if r.writes && list::clean_path(&r.target.text) == "/proc/sysrq-trigger" {
        return Some(Destructive {
            why: "writes to the kernel's SysRq trigger, which can power off, reboot or crash the machine".to_string(),
            instead: "Ask the operator to run it.",
        });
    }
    None
}

/// Checks one simple command (words after unwrapping, name first). Dynamic parts are read as
/// written (`$HOME`), which the list knows for the targets it cares about.
pub(crate) fn check(words: &[Word]) -> Option<Destructive> {
    let program = basename(&words.first()?.text);
    let args: Vec<String> = words[1..].iter().map(|w| w.text.clone()).collect();
    let normalised = normalise::normalise(program, &args, &normalise::Context::default());
    let texts: Vec<&str> = normalised.words.iter().map(String::as_str).collect();
    list::check(&texts)
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

    /// The list itself is tested where it lives (`abhed_guest::policy::destructive`); here, that
    /// the first look reaches it through the guest's normaliser, as the exec check does.
    #[test]
    fn the_first_look_reads_the_list_as_the_exec_check_does() {
        for cmd in ["rm -rf /w/C", "rm --recurs --forc C", "git reset --har", "kill -9 -01", "truncate -s 00 f"] {
            assert!(is_destructive(cmd), "{cmd}");
        }
        let alias = vec![
            Word::literal("git"),
            Word::literal("-c"),
            Word::literal("alias.nuke=reset --hard"),
            Word::literal("nuke"),
        ];
        assert!(check(&alias).is_some());
        for cmd in ["rm file", "rm -r build", "git status", "git push origin main"] {
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
