//! Commands that run other commands (`sudo`, `env`, `timeout`, `bash -c`, `eval`, `find -exec`, ...).
//! Unwrapping them lets the policy check the command that really runs.

use super::destructive::{basename, short_cluster};
use super::parse::{Stdin, Word};

/// What a wrapper runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Unwrap {
    /// Not a wrapper, or a wrapper that runs nothing here (`env` alone, `command -v rm`).
    No,
    /// Runs `words` as a command, with `assignments` (variable names) set for it.
    /// `full`: the wrapper itself also gets the full rule check (privilege changers, `find`),
    /// instead of only deny and ask rules.
    Inner { words: Vec<Word>, assignments: Vec<String>, full: bool },
    /// Runs shell source code.
    Script { source: String, full: bool },
    /// Runs something that is only known when it runs; `what` completes "`CMD` ...".
    Dynamic { what: String, full: bool },
    /// `find ... -exec CMD ;`: the find is a command of its own and each action runs another.
    Execs(Vec<Vec<Word>>),
}

/// Option syntax of a wrapper: which short letters and long options take a value.
struct Opts {
    short_value: &'static str,
    long_value: &'static [&'static str],
}

/// Index of the first word after the options that start at `start`.
/// Stops at `--` (skipping it) or at the first word that is not an option.
fn skip_options(words: &[Word], start: usize, opts: &Opts) -> usize {
    let mut i = start;
    while let Some(w) = words.get(i) {
        let t = w.text.as_str();
        if t == "--" {
            return i + 1;
        }
        if t.starts_with("--") {
            i += if !t.contains('=') && opts.long_value.contains(&t) { 2 } else { 1 };
        } else if let Some(cluster) = short_cluster(t) {
            // A letter that takes a value uses the rest of the cluster, or else the next word.
            let takes_next = cluster
                .char_indices()
                .find(|(_, c)| opts.short_value.contains(*c))
                .is_some_and(|(pos, _)| pos + 1 == cluster.len());
            i += if takes_next { 2 } else { 1 };
        } else {
            return i;
        }
    }
    i
}

fn is_assignment(text: &str) -> bool {
    text.split_once('=').is_some_and(|(name, _)| {
        let mut chars = name.chars();
        chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

fn has_option(words: &[Word], options: &[&str]) -> bool {
    words.iter().any(|w| options.contains(&w.text.as_str()))
}

fn inner(words: &[Word], i: usize, full: bool) -> Unwrap {
    let mut i = i;
    let mut assignments = Vec::new();
    // `env` and `sudo` accept NAME=value before the command.
    while let Some(w) = words.get(i).filter(|w| is_assignment(&w.text)) {
        if let Some((name, _)) = w.text.split_once('=') {
            assignments.push(name.to_string());
        }
        i += 1;
    }
    match words.get(i..) {
        Some(rest) if !rest.is_empty() => Unwrap::Inner { words: rest.to_vec(), assignments, full },
        _ => Unwrap::No,
    }
}

/// Joins words into shell source; dynamic words make the whole source unknowable.
fn source_of(words: &[Word]) -> Result<String, String> {
    if let Some(w) = words.iter().find(|w| w.dynamic) {
        return Err(w.text.clone());
    }
    Ok(words.iter().map(|w| w.text.as_str()).collect::<Vec<_>>().join(" "))
}

fn script(words: &[Word], full: bool) -> Unwrap {
    match source_of(words) {
        Ok(source) => Unwrap::Script { source, full },
        Err(part) => {
            Unwrap::Dynamic { what: format!("runs shell code that is only known when it runs (`{part}`)"), full }
        }
    }
}

/// Classifies a simple command (words after quote removal, name first).
pub(crate) fn unwrap(words: &[Word], stdin: &Stdin) -> Unwrap {
    let Some(first) = words.first() else { return Unwrap::No };
    let name = basename(&first.text);
    let o = |short_value, long_value| Opts { short_value, long_value };
    match name {
        "sudo" => {
            if has_option(words, &["-e", "--edit", "-l", "--list", "-v", "--validate", "-k", "-K", "-V", "--help"]) {
                return Unwrap::No;
            }
            let opts = o(
                "ugpCDrtTUR",
                &[
                    "--user",
                    "--group",
                    "--prompt",
                    "--close-from",
                    "--chdir",
                    "--role",
                    "--type",
                    "--command-timeout",
                    "--other-user",
                    "--host",
                    "--chroot",
                ],
            );
            inner(words, skip_options(words, 1, &opts), true)
        }
        "doas" => inner(words, skip_options(words, 1, &o("uC", &[])), true),
        "pkexec" => inner(words, skip_options(words, 1, &o("", &["--user"])), true),
        "env" => env(words),
        "nice" => inner(words, skip_options(words, 1, &o("n", &["--adjustment"])), false),
        "ionice" => {
            if has_option(words, &["-p", "-P", "-u", "--pid", "--pgid", "--uid"]) {
                return Unwrap::No;
            }
            inner(words, skip_options(words, 1, &o("cn", &["--class", "--classdata"])), false)
        }
        "nohup" | "builtin" | "coproc" | "unbuffer" => inner(words, skip_options(words, 1, &o("", &[])), false),
        "time" => inner(words, skip_options(words, 1, &o("fo", &["--format", "--output"])), false),
        "command" => {
            if has_option(words, &["-v", "-V", "-pv", "-vp", "-pV", "-Vp"]) {
                return Unwrap::No;
            }
            inner(words, skip_options(words, 1, &o("", &[])), false)
        }
        "exec" => inner(words, skip_options(words, 1, &o("a", &[])), false),
        "setsid" => inner(words, skip_options(words, 1, &o("", &[])), false),
        "stdbuf" => inner(words, skip_options(words, 1, &o("ioe", &["--input", "--output", "--error"])), false),
        "timeout" => {
            let i = skip_options(words, 1, &o("sk", &["--signal", "--kill-after"]));
            inner(words, i + 1, false)
        }
        "taskset" => {
            if has_option(words, &["-p", "--pid"]) {
                return Unwrap::No;
            }
            let i = skip_options(words, 1, &o("", &[]));
            // With -c the CPU list is the first operand too.
            inner(words, i + 1, false)
        }
        "chroot" => {
            let i = skip_options(words, 1, &o("", &["--userspec", "--groups"]));
            inner(words, i + 1, true)
        }
        "flock" => flock(words),
        "xargs" => xargs(words),
        "watch" => {
            let i = skip_options(words, 1, &o("nq", &["--interval"]));
            let rest = words.get(i..).unwrap_or_default();
            if rest.is_empty() {
                return Unwrap::No;
            }
            if has_option(&words[..i], &["-x", "--exec"]) {
                return inner(words, i, false);
            }
            script(rest, false)
        }
        "busybox" => match words.get(1) {
            Some(w) if !w.text.starts_with('-') => inner(words, 1, false),
            _ => Unwrap::No,
        },
        "bash" | "sh" | "zsh" | "dash" | "ksh" | "mksh" | "ash" | "yash" | "posh" | "fish" => shell(words, stdin),
        "su" | "runuser" => su(words),
        "eval" => match words.get(1..) {
            Some(rest) if !rest.is_empty() => script(rest, false),
            _ => Unwrap::No,
        },
        "find" => find(words),
        "trap" => match words.get(1..) {
            // `trap -l`/`trap -p` list; a lone `-` or a single argument resets handlers.
            Some([first, ..]) if matches!(first.text.as_str(), "-l" | "-p" | "-") => Unwrap::No,
            Some([dd, handler, _, ..]) if dd.text == "--" => script(std::slice::from_ref(handler), false),
            Some([handler, _, ..]) if handler.text != "--" => script(std::slice::from_ref(handler), false),
            _ => Unwrap::No,
        },
        "git" => git_configs(words),
        _ => Unwrap::No,
    }
}

fn env(words: &[Word]) -> Unwrap {
    let mut i = 1;
    while let Some(w) = words.get(i) {
        let t = w.text.as_str();
        match t {
            "--" => {
                i += 1;
                break;
            }
            "-u" | "--unset" | "-C" | "--chdir" => i += 2,
            // `env -S 'CMD ARGS'` splits its argument into a command line.
            "-S" | "--split-string" => return script(words.get(i + 1..).unwrap_or_default(), false),
            _ if t.starts_with("--split-string=") || (t.starts_with("-S") && t.len() > 2) => {
                let first = t.trim_start_matches("--split-string=").trim_start_matches("-S");
                let mut rest = vec![Word { text: first.to_string(), ..w.clone() }];
                rest.extend(words.iter().skip(i + 1).cloned());
                return script(&rest, false);
            }
            _ if t.starts_with('-') => i += 1,
            _ => break,
        }
    }
    inner(words, i, false)
}

fn flock(words: &[Word]) -> Unwrap {
    let mut i = 1;
    while let Some(w) = words.get(i) {
        let t = w.text.as_str();
        if matches!(t, "-c" | "--command") {
            return script(words.get(i + 1..i + 2).unwrap_or_default(), false);
        }
        if let Some(cmd) = t.strip_prefix("--command=") {
            return script(&[Word { text: cmd.to_string(), ..w.clone() }], false);
        }
        if matches!(t, "-w" | "--timeout" | "-E" | "--conflict-exit-code") {
            i += 2;
        } else if t.starts_with('-') {
            i += 1;
        } else {
            break;
        }
    }
    // The lock file, or a descriptor number (then nothing is run).
    match words.get(i) {
        Some(w) if w.text.chars().all(|c| c.is_ascii_digit()) => Unwrap::No,
        Some(_) => match words.get(i + 1) {
            Some(w) if matches!(w.text.as_str(), "-c" | "--command") => {
                script(words.get(i + 2..i + 3).unwrap_or_default(), false)
            }
            _ => inner(words, i + 1, false),
        },
        None => Unwrap::No,
    }
}

fn xargs(words: &[Word]) -> Unwrap {
    let opts = Opts {
        short_value: "aEdILnPs",
        long_value: &[
            "--arg-file",
            "--delimiter",
            "--max-args",
            "--max-procs",
            "--max-chars",
            "--process-slot-var",
            "--max-lines",
            "--replace",
            "--eof",
        ],
    };
    let i = skip_options(words, 1, &opts);
    // Without a command xargs runs `echo`, which `inner` reports as nothing to unwrap.
    inner(words, i, false)
}

/// `bash [options] -c SOURCE`, `bash SCRIPT`, or a script read from standard input.
fn shell(words: &[Word], stdin: &Stdin) -> Unwrap {
    let mut i = 1;
    let mut command_string = false;
    while let Some(w) = words.get(i) {
        let t = w.text.as_str();
        if t == "--" || t == "-" {
            i += 1;
            break;
        }
        if matches!(t, "--rcfile" | "--init-file") {
            i += 2;
        } else if t.starts_with("--") {
            // fish spells it --command.
            if t == "--command" {
                command_string = true;
            }
            i += 1;
        } else if let Some(cluster) = t.strip_prefix('-').or_else(|| t.strip_prefix('+')).filter(|c| !c.is_empty()) {
            command_string |= t.starts_with('-') && cluster.contains('c');
            // -o/-O take an option name.
            i += if cluster.contains(['o', 'O']) { 2 } else { 1 };
        } else {
            break;
        }
    }
    if command_string {
        return match words.get(i) {
            Some(source) => script(std::slice::from_ref(source), false),
            None => Unwrap::No,
        };
    }
    if i < words.len() {
        // Runs a script file: its contents are not visible here, the command is judged as written.
        return Unwrap::No;
    }
    match stdin {
        Stdin::Heredoc { body, dynamic: false } => Unwrap::Script { source: body.clone(), full: false },
        Stdin::Herestring(word) => script(std::slice::from_ref(word), false),
        Stdin::Heredoc { dynamic: true, .. } => Unwrap::Dynamic {
            what: "runs a script from a heredoc whose text depends on expansions".to_string(),
            full: false,
        },
        Stdin::Pipe => Unwrap::Dynamic { what: "runs a script that it reads from a pipe".to_string(), full: false },
        Stdin::File | Stdin::Inherit => Unwrap::No,
    }
}

fn su(words: &[Word]) -> Unwrap {
    let mut i = 1;
    while let Some(w) = words.get(i) {
        let t = w.text.as_str();
        if matches!(t, "-c" | "--command" | "--session-command") {
            return script(words.get(i + 1..i + 2).unwrap_or_default(), true);
        }
        if let Some(cmd) = t.strip_prefix("--command=").or_else(|| t.strip_prefix("--session-command=")) {
            return script(&[Word { text: cmd.to_string(), ..w.clone() }], true);
        }
        // `runuser -u USER -- COMMAND` runs a command directly.
        if t == "--" && basename(&words[0].text) == "runuser" {
            return inner(words, i + 1, true);
        }
        i += if matches!(t, "-s" | "--shell" | "-g" | "--group" | "-G" | "--supp-group" | "-w" | "-u" | "--user") {
            2
        } else {
            1
        };
    }
    Unwrap::No
}

/// `git -c KEY=VALUE` where the value is a shell command git will run (`alias.x=!cmd`, `core.pager=cmd`).
fn git_configs(words: &[Word]) -> Unwrap {
    const COMMAND_KEYS: &[&str] = &[
        "core.pager",
        "core.editor",
        "core.sshcommand",
        "core.fsmonitor",
        "sequence.editor",
        "diff.external",
        "gpg.program",
        "credential.helper",
    ];
    let mut sources = Vec::new();
    let mut i = 1;
    while let Some(w) = words.get(i) {
        let t = w.text.as_str();
        if matches!(t, "-C" | "--git-dir" | "--work-tree" | "--namespace" | "--config-env" | "--super-prefix") {
            i += 2;
            continue;
        }
        if t != "-c" {
            if !t.starts_with('-') {
                break;
            }
            i += 1;
            continue;
        }
        if let Some(config) = words.get(i + 1) {
            let (key, value) = config.text.split_once('=').unwrap_or((config.text.as_str(), ""));
            let key = key.to_ascii_lowercase();
            let shell = if key.starts_with("alias.") {
                value.strip_prefix('!')
            } else if COMMAND_KEYS.contains(&key.as_str()) {
                Some(value.strip_prefix('!').unwrap_or(value))
            } else {
                None
            };
            if let Some(source) = shell {
                if config.dynamic {
                    let what =
                        format!("configures a command for git that is only known when it runs (`{}`)", config.text);
                    return Unwrap::Dynamic { what, full: true };
                }
                sources.push(source.to_string());
            }
        }
        i += 2;
    }
    if sources.is_empty() { Unwrap::No } else { Unwrap::Script { source: sources.join("\n"), full: true } }
}

fn find(words: &[Word]) -> Unwrap {
    let mut execs = Vec::new();
    let mut i = 1;
    while let Some(w) = words.get(i) {
        if matches!(w.text.as_str(), "-exec" | "-execdir" | "-ok" | "-okdir") {
            let start = i + 1;
            let mut end = start;
            while words.get(end).is_some_and(|w| w.text != ";" && w.text != "+") {
                end += 1;
            }
            if end > start {
                execs.push(words[start..end].to_vec());
            }
            i = end + 1;
        } else {
            i += 1;
        }
    }
    if execs.is_empty() { Unwrap::No } else { Unwrap::Execs(execs) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(s: &str) -> Vec<Word> {
        s.split_whitespace().map(Word::literal).collect()
    }

    fn inner_text(s: &str) -> String {
        match unwrap(&w(s), &Stdin::Inherit) {
            Unwrap::Inner { words, .. } => words.iter().map(|w| w.text.as_str()).collect::<Vec<_>>().join(" "),
            Unwrap::Script { source, .. } => format!("script:{source}"),
            Unwrap::Dynamic { .. } => "dynamic".to_string(),
            Unwrap::Execs(e) => format!("execs:{}", e.len()),
            Unwrap::No => "no".to_string(),
        }
    }

    #[test]
    fn unwraps_option_taking_wrappers() {
        let cases = [
            ("sudo -u root rm -rf /", "rm -rf /"),
            ("sudo -Eu root X=1 rm x", "rm x"),
            ("env -i X=1 Y=2 rm x", "rm x"),
            ("env -u HOME rm x", "rm x"),
            ("nice -n 10 rm x", "rm x"),
            ("nice -10 rm x", "rm x"),
            ("ionice -c 3 rm x", "rm x"),
            ("timeout -s KILL 5 rm x", "rm x"),
            ("timeout 5s rm x", "rm x"),
            ("time -p rm x", "rm x"),
            ("stdbuf -o L rm x", "rm x"),
            ("stdbuf -oL rm x", "rm x"),
            ("xargs -n 1 -I {} rm {}", "rm {}"),
            ("xargs -0 rm -rf", "rm -rf"),
            ("chroot /mnt rm x", "rm x"),
            ("flock /tmp/l rm x", "rm x"),
            ("flock -w 5 /tmp/l -c ls", "script:ls"),
            ("exec -a n rm x", "rm x"),
            ("busybox rm x", "rm x"),
            ("bash -lc ls", "script:ls"),
            ("sh -ec ls", "script:ls"),
            ("bash -o pipefail -c ls", "script:ls"),
            ("su -c ls root", "script:ls"),
            ("su root --command=ls", "script:ls"),
            ("eval rm -rf /", "script:rm -rf /"),
            ("watch -n 1 ls -l", "script:ls -l"),
            ("env -S rm x", "script:rm x"),
            ("find . -exec rm {} ; -exec ls +", "execs:2"),
            ("trap rm EXIT", "script:rm"),
            ("trap -- rm EXIT", "script:rm"),
            ("git -c alias.x=!rm x", "script:rm"),
            ("git -C r -c core.pager=less log", "script:less"),
        ];
        for (cmd, expected) in cases {
            assert_eq!(inner_text(cmd), expected, "{cmd}");
        }
    }

    #[test]
    fn non_running_forms_are_not_wrappers() {
        for cmd in [
            "env",
            "sudo -l",
            "command -v rm",
            "bash script.sh",
            "bash",
            "nohup",
            "find . -name x",
            "flock 9",
            "trap -p",
            "trap EXIT",
            "git -c user.name=x commit",
        ] {
            assert_eq!(inner_text(cmd), "no", "{cmd}");
        }
    }

    #[test]
    fn shell_from_stdin() {
        let piped = unwrap(&w("sh"), &Stdin::Pipe);
        assert!(matches!(piped, Unwrap::Dynamic { .. }));
        let heredoc = unwrap(&w("bash"), &Stdin::Heredoc { body: "ls\n".into(), dynamic: false });
        assert_eq!(heredoc, Unwrap::Script { source: "ls\n".into(), full: false });
    }

    #[test]
    fn dynamic_scripts() {
        let mut words = w("eval X");
        words[1].dynamic = true;
        assert!(matches!(unwrap(&words, &Stdin::Inherit), Unwrap::Dynamic { .. }));
    }
}
