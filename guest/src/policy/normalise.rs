//! A command's words as the program will read them, so that a rule means what the program does:
//! GNU long options written out in full (getopt and git accept any unique prefix, so
//! `rm --recurs --forc` is `rm --recursive --force` and `git reset --har` is `--hard`), and
//! git's global options and aliases resolved (`git -C R push` and
//! `git -c alias.p=push p` are `git push`).

use super::destructive::{basename, short_cluster};

/// What the normaliser may need besides the words: where git reads its config from.
#[derive(Debug, Clone, Copy, Default)]
pub struct Context<'a> {
    /// The process's environment, `NAME=value` (for `GIT_CONFIG_COUNT`/`_KEY_n`/`_VALUE_n` and
    /// `GIT_CONFIG_PARAMETERS`).
    pub env: &'a [String],
    /// The text of the git config files the command would read (system, global, the
    /// repository's), lowest precedence first.
    pub git_config: &'a [String],
}

/// One command, normalised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Normalised {
    /// The program's name (`/usr/bin/git` is `git`).
    pub program: String,
    /// The words the checks read: the program's name, then its arguments in their full
    /// spelling. For git: `git`, the `-c` settings that change what a subcommand does (as
    /// `-c key=value`), then the subcommand and its arguments.
    pub words: Vec<String>,
}

impl Normalised {
    /// The words joined with spaces, as rules are matched.
    pub fn text(&self) -> String {
        self.words.join(" ")
    }
}

/// The long options of the programs whose options decide what they destroy. Complete per
/// program for rm and the coreutils, so a prefix is expanded exactly when getopt would expand
/// it; for git's subcommands only the options the checks read: a prefix unique among git's full
/// list is unique among these too, so none is expanded to another option than git's.
fn long_options(program: &str, sub: Option<&str>) -> &'static [&'static str] {
    match (program, sub) {
        ("rm", _) => &[
            "force",
            "interactive",
            "one-file-system",
            "no-preserve-root",
            "preserve-root",
            "recursive",
            "dir",
            "verbose",
            "help",
            "version",
        ],
        ("chmod", _) => &[
            "changes",
            "quiet",
            "silent",
            "verbose",
            "no-preserve-root",
            "preserve-root",
            "reference",
            "recursive",
            "help",
            "version",
        ],
        ("chown" | "chgrp", _) => &[
            "changes",
            "dereference",
            "no-dereference",
            "from",
            "quiet",
            "silent",
            "verbose",
            "no-preserve-root",
            "preserve-root",
            "reference",
            "recursive",
            "help",
            "version",
        ],
        ("truncate", _) => &["no-create", "io-blocks", "reference", "size", "help", "version"],
        ("shred", _) => {
            &["force", "iterations", "random-source", "size", "remove", "verbose", "exact", "zero", "help", "version"]
        }
        ("mv", _) => &[
            "backup",
            "debug",
            "exchange",
            "force",
            "interactive",
            "no-clobber",
            "no-copy",
            "strip-trailing-slashes",
            "suffix",
            "target-directory",
            "no-target-directory",
            "update",
            "verbose",
            "context",
            "help",
            "version",
        ],
        ("rsync", _) => {
            &["delete", "delete-before", "delete-during", "delete-delay", "delete-after", "delete-excluded", "dry-run"]
        }
        ("git", Some("push")) => {
            &["force", "force-with-lease", "force-if-includes", "delete", "mirror", "prune", "dry-run"]
        }
        ("git", Some("reset")) => &["hard", "soft", "mixed", "merge", "keep"],
        ("git", Some("clean")) => &["force", "dry-run"],
        ("git", Some("checkout")) => &["force"],
        ("git", Some("switch")) => &["force", "discard-changes"],
        ("git", Some("restore")) => &["staged", "worktree"],
        ("git", Some("branch")) => &["delete", "force"],
        ("git", Some("update-ref")) => &["stdin"],
        ("git", Some("gc")) => &["prune"],
        _ => &[],
    }
}

/// `--pref[=value]` written out as the one long option of `options` it is a prefix of; as it
/// was when it names none, or several (the program refuses an ambiguous prefix).
fn expand_long(arg: &str, options: &[&str]) -> String {
    let Some(body) = arg.strip_prefix("--").filter(|b| !b.is_empty()) else { return arg.to_string() };
    let (name, value) = match body.split_once('=') {
        Some((n, v)) => (n, Some(v)),
        None => (body, None),
    };
    if options.contains(&name) {
        return arg.to_string();
    }
    let mut hits = options.iter().filter(|o| o.starts_with(name));
    match (hits.next(), hits.next()) {
        (Some(full), None) => match value {
            Some(v) => format!("--{full}={v}"),
            None => format!("--{full}"),
        },
        _ => arg.to_string(),
    }
}

fn expand_all(args: &[String], options: &[&str]) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut done = false;
    for a in args {
        if done || options.is_empty() {
            out.push(a.clone());
        } else if a == "--" {
            done = true;
            out.push(a.clone());
        } else {
            out.push(expand_long(a, options));
        }
    }
    out
}

/// The program an exec runs, by name: the executable's file name, except for busybox, whose
/// applet is its `argv[0]` (or `argv[1]` after `busybox`).
pub fn program_name<'a>(exe: &'a str, argv: &'a [String]) -> (&'a str, usize) {
    let name = basename(exe);
    if name == "busybox" {
        let first = argv.first().map(|a| basename(a)).unwrap_or("busybox");
        if first != "busybox" {
            return (first, 1);
        }
        if let Some(applet) = argv.get(1) {
            return (basename(applet), 2);
        }
    }
    (name, 1)
}

/// Normalise the exec of `program` with arguments `args` (argv without `argv[0]`).
pub fn normalise(program: &str, args: &[String], ctx: &Context) -> Normalised {
    if program == "git" {
        return git(args, ctx);
    }
    let mut words = vec![program.to_string()];
    words.extend(expand_all(args, long_options(program, None)));
    Normalised { program: program.to_string(), words }
}

/// git's global options, and whether each takes the next word as its value.
fn git_global(arg: &str) -> Option<bool> {
    const WITH_VALUE: &[&str] = &[
        "-C",
        "-c",
        "--git-dir",
        "--work-tree",
        "--namespace",
        "--super-prefix",
        "--config-env",
        "--exec-path",
        "--list-cmds",
        "--attr-source",
    ];
    const FLAGS: &[&str] = &[
        "-p",
        "-P",
        "--paginate",
        "--no-pager",
        "--no-replace-objects",
        "--no-lazy-fetch",
        "--no-optional-locks",
        "--no-advice",
        "--bare",
        "--literal-pathspecs",
        "--glob-pathspecs",
        "--noglob-pathspecs",
        "--icase-pathspecs",
        "--exec-path",
    ];
    if WITH_VALUE.contains(&arg) {
        return Some(arg != "--exec-path");
    }
    if FLAGS.contains(&arg) || (arg.starts_with("--") && arg.contains('=')) {
        return Some(false);
    }
    None
}

/// Subcommands git runs itself: an alias of the same name is never used.
const GIT_BUILTINS: &[&str] = &[
    "add",
    "am",
    "annotate",
    "apply",
    "archive",
    "bisect",
    "blame",
    "branch",
    "bundle",
    "cat-file",
    "check-ignore",
    "checkout",
    "cherry",
    "cherry-pick",
    "clean",
    "clone",
    "commit",
    "config",
    "count-objects",
    "describe",
    "diff",
    "fetch",
    "filter-branch",
    "format-patch",
    "fsck",
    "gc",
    "grep",
    "help",
    "init",
    "log",
    "ls-files",
    "ls-remote",
    "ls-tree",
    "merge",
    "mv",
    "notes",
    "pull",
    "push",
    "rebase",
    "reflog",
    "remote",
    "repack",
    "replace",
    "reset",
    "restore",
    "rev-list",
    "rev-parse",
    "revert",
    "rm",
    "shortlog",
    "show",
    "show-ref",
    "sparse-checkout",
    "stash",
    "status",
    "submodule",
    "switch",
    "symbolic-ref",
    "tag",
    "update-index",
    "update-ref",
    "version",
    "worktree",
];

/// Config settings, later ones winning: the files, then the environment, then `-c`.
fn git_settings(cli: &[String], ctx: &Context) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for text in ctx.git_config {
        out.extend(parse_git_config(text));
    }
    let env =
        |name: &str| ctx.env.iter().rev().find_map(|e| e.strip_prefix(name)?.strip_prefix('=').map(str::to_string));
    if let Some(params) = env("GIT_CONFIG_PARAMETERS") {
        out.extend(parse_config_parameters(&params));
    }
    if let Some(n) = env("GIT_CONFIG_COUNT").and_then(|n| n.trim().parse::<usize>().ok()) {
        for i in 0..n.min(1000) {
            if let (Some(k), Some(v)) = (env(&format!("GIT_CONFIG_KEY_{i}")), env(&format!("GIT_CONFIG_VALUE_{i}"))) {
                out.push((k.to_ascii_lowercase(), v));
            }
        }
    }
    for c in cli {
        let (k, v) = c.split_once('=').unwrap_or((c.as_str(), "true"));
        out.push((k.to_ascii_lowercase(), v.to_string()));
    }
    out
}

/// `'key'='value' 'key2'='value2'` as git writes GIT_CONFIG_PARAMETERS (values single-quoted,
/// `'\''` for a quote).
fn parse_config_parameters(s: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_quote = false;
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => in_quote = !in_quote,
            '\\' if !in_quote => {
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            ' ' if !in_quote => {
                if !cur.is_empty() {
                    words.push(std::mem::take(&mut cur));
                }
            }
            _ => cur.push(c),
        }
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    for w in words {
        let (k, v) = w.split_once('=').unwrap_or((w.as_str(), "true"));
        out.push((k.to_ascii_lowercase(), v.to_string()));
    }
    out
}

/// The settings of a git config file: `[section "sub"]` headers and `key = value` lines, as
/// `section.sub.key` (section and key lowercased, as git compares them).
pub fn parse_git_config(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut section = String::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(rest) = line.strip_prefix('[') {
            let head = rest.split(']').next().unwrap_or("");
            section = match head.split_once(char::is_whitespace) {
                Some((s, sub)) => format!("{}.{}", s.to_ascii_lowercase(), sub.trim().trim_matches('"')),
                None => head.to_ascii_lowercase(),
            };
            continue;
        }
        let (key, value) = match line.split_once('=') {
            Some((k, v)) => (k.trim(), unquote_config(v.trim())),
            None => (line, "true".to_string()),
        };
        out.push((format!("{section}.{}", key.to_ascii_lowercase()), value));
    }
    out
}

fn unquote_config(v: &str) -> String {
    // Comments after the value, outside quotes.
    let mut out = String::new();
    let mut in_quote = false;
    let mut chars = v.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => in_quote = !in_quote,
            '\\' => {
                if let Some(n) = chars.next() {
                    out.push(match n {
                        'n' => '\n',
                        't' => '\t',
                        other => other,
                    });
                }
            }
            '#' | ';' if !in_quote => break,
            _ => out.push(c),
        }
    }
    out.trim().to_string()
}

/// An alias's text split into words as git splits it (quotes grouped, no expansion).
fn split_alias(v: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut any = false;
    for c in v.chars() {
        match (quote, c) {
            (None, '\'' | '"') => {
                quote = Some(c);
                any = true;
            }
            (Some(q), c) if c == q => quote = None,
            (None, c) if c.is_whitespace() => {
                if any {
                    words.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            (_, c) => {
                cur.push(c);
                any = true;
            }
        }
    }
    if any {
        words.push(cur);
    }
    words
}

fn git(args: &[String], ctx: &Context) -> Normalised {
    let mut args: Vec<String> = args.to_vec();
    let mut cli_configs: Vec<String> = Vec::new();
    // Aliases may name aliases; git stops at a loop, so do we.
    for _ in 0..16 {
        let mut i = 0;
        let mut sub_at = None;
        while let Some(a) = args.get(i) {
            if a == "-c" {
                if let Some(v) = args.get(i + 1) {
                    cli_configs.push(v.clone());
                }
                i += 2;
            } else if let Some(v) = a.strip_prefix("--config-env=") {
                // NAME=ENVVAR: the value is the environment variable's.
                if let Some((k, var)) = v.split_once('=') {
                    let val = ctx.env.iter().rev().find_map(|e| e.strip_prefix(var)?.strip_prefix('='));
                    cli_configs.push(format!("{k}={}", val.unwrap_or("")));
                }
                i += 1;
            } else if let Some(takes) = git_global(a) {
                i += if takes { 2 } else { 1 };
            } else if a.starts_with('-') {
                i += 1;
            } else {
                sub_at = Some(i);
                break;
            }
        }
        let Some(at) = sub_at else {
            return git_words(None, &[], &cli_configs);
        };
        let sub = args[at].clone();
        let rest: Vec<String> = args[at + 1..].to_vec();
        if !GIT_BUILTINS.contains(&sub.as_str()) {
            let key = format!("alias.{}", sub.to_ascii_lowercase());
            let settings = git_settings(&cli_configs, ctx);
            if let Some((_, value)) = settings.iter().rev().find(|(k, _)| *k == key) {
                // A `!` alias runs a shell command: that command's execs are checked as they come.
                if !value.starts_with('!') {
                    let mut expanded = split_alias(value);
                    expanded.extend(rest);
                    args = expanded;
                    continue;
                }
            }
        }
        return git_words(Some(&sub), &rest, &cli_configs);
    }
    git_words(None, &[], &cli_configs)
}

fn git_words(sub: Option<&str>, rest: &[String], cli_configs: &[String]) -> Normalised {
    let mut words = vec!["git".to_string()];
    for c in cli_configs {
        words.push("-c".into());
        words.push(c.clone());
    }
    if let Some(sub) = sub {
        words.push(sub.to_string());
        let options = long_options("git", Some(sub));
        // git's short clusters are one letter each after the subcommand: `-fu` is `-f -u`.
        for a in expand_all(rest, options) {
            match short_cluster(&a) {
                Some(c) if c.len() > 1 && c.chars().all(|ch| ch.is_ascii_alphabetic()) && sub != "commit" => {
                    words.extend(c.chars().map(|ch| format!("-{ch}")));
                }
                _ => words.push(a),
            }
        }
    }
    Normalised { program: "git".into(), words }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(cmd: &str) -> String {
        norm_with(cmd, &[], &[])
    }

    fn norm_with(cmd: &str, env: &[&str], files: &[&str]) -> String {
        let words: Vec<String> = cmd.split_whitespace().map(str::to_string).collect();
        let env: Vec<String> = env.iter().map(|s| s.to_string()).collect();
        let files: Vec<String> = files.iter().map(|s| s.to_string()).collect();
        let ctx = Context { env: &env, git_config: &files };
        normalise(&words[0], &words[1..], &ctx).text()
    }

    #[test]
    fn getopt_abbreviations_are_written_out() {
        assert_eq!(norm("rm --recurs --forc C"), "rm --recursive --force C");
        assert_eq!(norm("rm --no-p C"), "rm --no-preserve-root C");
        assert_eq!(norm("rm --interactive=never -r C"), "rm --interactive=never -r C");
        assert_eq!(norm("rm --inter=never -r C"), "rm --interactive=never -r C");
        // Ambiguous (verbose, version): left alone, rm refuses it.
        assert_eq!(norm("rm --ver C"), "rm --ver C");
        // After `--` a word is a file name.
        assert_eq!(norm("rm -- --recurs"), "rm -- --recurs");
        assert_eq!(norm("chmod --recur 755 /"), "chmod --recursive 755 /");
        assert_eq!(norm("truncate --si=0 f"), "truncate --size=0 f");
    }

    #[test]
    fn git_global_options_and_abbreviations() {
        assert_eq!(norm("git -C R push"), "git push");
        assert_eq!(norm("git --no-pager push origin"), "git push origin");
        assert_eq!(norm("git --git-dir=/r/.git --work-tree /r push"), "git push");
        assert_eq!(norm("git -c k=v push"), "git -c k=v push");
        assert_eq!(norm("git push --force-w"), "git push --force-with-lease");
        assert_eq!(norm("git reset --har"), "git reset --hard");
        assert_eq!(norm("git reset --ke"), "git reset --keep");
        assert_eq!(norm("git clean --forc"), "git clean --force");
        assert_eq!(norm("git push -fu origin main"), "git push -f -u origin main");
        // Ambiguous for git too (force, force-with-lease, force-if-includes): left as written.
        assert_eq!(norm("git push --forc"), "git push --forc");
    }

    #[test]
    fn git_aliases_from_every_source() {
        let words: Vec<String> = ["-c", "alias.nuke=reset --hard", "nuke"].iter().map(|s| s.to_string()).collect();
        let n = normalise("git", &words, &Context::default());
        assert_eq!(n.text(), "git -c alias.nuke=reset --hard reset --hard");
        assert_eq!(
            norm_with("git p", &["GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=alias.p", "GIT_CONFIG_VALUE_0=push -f"], &[]),
            "git push -f"
        );
        assert_eq!(norm_with("git p", &["GIT_CONFIG_PARAMETERS='alias.p'='push --mirror'"], &[]), "git push --mirror");
        let file = "[core]\n\tbare = false\n[alias]\n\tzap = clean -fdx # comment\n\tco = checkout\n";
        assert_eq!(norm_with("git zap", &[], &[file]), "git clean -f -d -x");
        assert_eq!(norm_with("git co .", &[], &[file]), "git checkout .");
        // An alias that names an alias.
        let chain = "[alias]\n a = b\n b = reset --hard\n";
        assert_eq!(norm_with("git a", &[], &[chain]), "git reset --hard");
        // A loop ends.
        let looped = "[alias]\n a = b\n b = a\n";
        assert!(norm_with("git a", &[], &[looped]).starts_with("git"));
        // A builtin is never an alias.
        let shadow = "[alias]\n status = reset --hard\n";
        assert_eq!(norm_with("git status", &[], &[shadow]), "git status");
        // --config-env takes the value from the environment.
        assert_eq!(
            norm_with("git --config-env=alias.x=V x", &["V=reset --hard"], &[]),
            "git -c alias.x=reset --hard reset --hard"
        );
    }

    #[test]
    fn busybox_applets_are_named_by_argv() {
        let argv: Vec<String> = ["rm", "-rf", "x"].iter().map(|s| s.to_string()).collect();
        assert_eq!(program_name("/bin/busybox", &argv), ("rm", 1));
        let argv: Vec<String> = ["busybox", "rm", "-rf"].iter().map(|s| s.to_string()).collect();
        assert_eq!(program_name("/bin/busybox", &argv), ("rm", 2));
        assert_eq!(program_name("/usr/bin/rm", &argv), ("rm", 1));
    }
}
