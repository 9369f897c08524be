//! Commands that need a terminal (editors, pagers, full-screen monitors, REPLs, prompts). The agent's
//! shell has none, so these hang or fail; the guidance tells the model what to run instead.

use super::destructive::{basename, git_split, short_cluster};
use super::parse::{Stdin, Word};

const EDITOR: &str = "Use the edit tool to change files and the read tool to view them.";
const PAGER: &str = "Use `cat`, `head`, `tail` or `sed -n 'A,Bp'` instead, or pipe the output through `cat` (for git: `git --no-pager ...`).";
const REPL: &str = "Pass the script as an argument or with -c/-e (`python3 -c '...'`, `node -e '...'`, `psql -c '...'`), or write it to a file and run that.";

fn any(args: &[Word], options: &[&str]) -> bool {
    args.iter()
        .any(|w| options.iter().any(|o| w.text == *o || w.text.strip_prefix(o).is_some_and(|r| r.starts_with('='))))
}

fn has_short(args: &[Word], letters: &[char]) -> bool {
    args.iter().any(|w| short_cluster(&w.text).is_some_and(|c| c.contains(letters)))
}

/// Returns guidance when the command would need a terminal.
/// `assignments` are variable names set for the command (`GIT_EDITOR=true git commit` needs none).
pub(crate) fn check(words: &[Word], assignments: &[String], stdin: &Stdin, stdout_captured: bool) -> Option<String> {
    let first = words.first()?;
    let name = basename(&first.text);
    let args = &words[1..];
    let cmd = words.iter().map(|w| w.text.as_str()).collect::<Vec<_>>().join(" ");
    let assigned = |v: &str| assignments.iter().any(|a| a == v);
    let stdin_given = *stdin != Stdin::Inherit;
    let needs = |what: &str, instead: &str| {
        Some(format!("`{cmd}` {what}, which needs a terminal that this tool does not have. {instead}"))
    };
    match name {
        "vi" | "vim" | "nvim" | "view" | "vimdiff" => {
            if any(args, &["-es", "-Es", "--headless"]) || (has_short(args, &['e']) && has_short(args, &['s'])) {
                return None;
            }
            needs("opens a full-screen editor", EDITOR)
        }
        "nano" | "pico" | "micro" | "joe" | "mcedit" | "kak" | "hx" | "helix" | "sudoedit" => {
            needs("opens a full-screen editor", EDITOR)
        }
        "emacs" if !any(args, &["--batch", "-batch", "--script", "--daemon", "--fg-daemon", "--bg-daemon"]) => {
            needs("opens a full-screen editor", EDITOR)
        }
        // Pagers and man act like `cat` when their output is not a terminal.
        "less" | "more" | "most" | "pg" if !stdout_captured => needs("opens a pager", PAGER),
        "man" if !stdout_captured && !assigned("MANPAGER") && !assigned("PAGER") => {
            needs("opens a pager", "Use `man PAGE | cat`, or `COMMAND --help`.")
        }
        "top" if !has_short(args, &['b']) && !any(args, &["--batch"]) => {
            needs("is a full-screen monitor", "Use `top -b -n 1` or `ps aux` instead.")
        }
        "htop" | "btop" | "atop" | "iotop" | "nmon" | "glances" | "nvtop" | "bmon" | "iftop" => {
            needs("is a full-screen monitor", "Use `ps aux`, `top -b -n 1`, `free` or `df` instead.")
        }
        "watch" => needs(
            "repeats a command on a full screen forever",
            "Run the command once, or loop a bounded number of times with `sleep`.",
        ),
        "ssh" if ssh_is_interactive(args) => {
            needs("opens an interactive session", "Pass the remote command as an argument: `ssh HOST 'COMMAND'`.")
        }
        "ftp" | "telnet" | "sftp" if !(name == "sftp" && has_short(args, &['b'])) => {
            needs("opens an interactive session", "Use `curl`, `scp`, or `sftp -b BATCHFILE` instead.")
        }
        "tmux" | "screen" if multiplexer_attaches(name, args) => needs(
            "attaches to a terminal multiplexer",
            "Start it detached (`tmux new-session -d -s NAME 'COMMAND'` or `screen -dmS NAME COMMAND`) and use `tmux send-keys`/`tmux capture-pane`.",
        ),
        "su" if !any(args, &["-c", "--command", "--help", "--version"]) => needs(
            "opens an interactive shell and may prompt for a password",
            "Run the command directly, or with `su -c 'COMMAND'`.",
        ),
        "sudo" if sudo_opens_shell(args) => {
            needs("opens an interactive shell", "Run the command directly with `sudo COMMAND`.")
        }
        "xargs" if has_short(args, &['p', 'o']) || any(args, &["--interactive", "--open-tty"]) => {
            needs("asks for confirmation on the terminal", "Drop `-p`/`-o` and run it non-interactively.")
        }
        "git" => git(args, assignments, &needs),
        _ => repl(name, args, stdin_given, &needs),
    }
}

fn ssh_is_interactive(args: &[Word]) -> bool {
    const WITH_VALUE: &str = "BbcDEeFIiJLlmOopQRSWw";
    let mut i = 0;
    let mut positional = 0;
    while let Some(w) = args.get(i) {
        if let Some(cluster) = short_cluster(&w.text) {
            // Tunnels, backgrounded sessions and queries do not open a shell.
            if cluster.contains(['N', 'f', 'V', 'G', 'O', 'Q']) {
                return false;
            }
            // An option taking a value takes the rest of the cluster or the next word.
            if let Some(pos) = cluster.find(|c| WITH_VALUE.contains(c))
                && pos + 1 == cluster.len()
            {
                i += 1;
            }
        } else {
            positional += 1;
        }
        i += 1;
    }
    positional == 1
}

fn multiplexer_attaches(name: &str, args: &[Word]) -> bool {
    if name == "screen" {
        let non_attaching = args.iter().any(|w| {
            w.text.starts_with("-d")
                || w.text.starts_with("-D")
                || matches!(w.text.as_str(), "-ls" | "-list" | "-X" | "-Q" | "-v")
        });
        return !non_attaching;
    }
    let Some(sub) = args.iter().find(|w| !w.text.starts_with('-')) else {
        return args.is_empty();
    };
    matches!(sub.text.as_str(), "new" | "new-session" | "attach" | "attach-session" | "a" | "at")
        && !has_short(args, &['d'])
}

fn sudo_opens_shell(args: &[Word]) -> bool {
    let shell = has_short(args, &['i', 's']) || any(args, &["--login", "--shell"]);
    shell && args.iter().all(|w| w.text.starts_with('-') || w.text.contains('='))
}

fn git(args: &[Word], assignments: &[String], needs: &dyn Fn(&str, &str) -> Option<String>) -> Option<String> {
    let (sub, rest, configs) = git_split(args)?;
    let assigned = |v: &str| assignments.iter().any(|a| a == v);
    let editor_set = assigned("GIT_EDITOR")
        || assigned("EDITOR")
        || assigned("VISUAL")
        || configs.iter().any(|c| c.starts_with("core.editor="));
    let patch = has_short(rest, &['p']) || any(rest, &["--patch"]);
    let message_given = || {
        any(rest, &["--message", "--file", "--reuse-message", "--no-edit", "--fixup"])
            || rest.iter().any(|w| short_cluster(&w.text).is_some_and(|c| c.contains(['m', 'F', 'C'])))
    };
    match sub {
        "rebase"
            if (has_short(rest, &['i']) || any(rest, &["--interactive"]))
                && !assigned("GIT_SEQUENCE_EDITOR")
                && !configs.iter().any(|c| c.starts_with("sequence.editor=")) =>
        {
            needs(
                "opens an editor for the rebase todo list",
                "Use non-interactive `git rebase`, or set the editor: `GIT_SEQUENCE_EDITOR=\"sed -i 's/^pick 123abc/squash 123abc/'\" git rebase -i ...`.",
            )
        }
        "add" if patch || has_short(rest, &['i', 'e']) || any(rest, &["--interactive", "--edit"]) => needs(
            "asks questions interactively",
            "Stage whole files with `git add FILE`, or stage part of a file by applying a patch with `git apply --cached`.",
        ),
        "checkout" | "reset" | "restore" | "stash" | "commit" if patch || any(rest, &["--interactive"]) => {
            needs("asks questions interactively", "Name the files instead, or apply a patch with `git apply`.")
        }
        "commit" if !editor_set && !message_given() && !any(rest, &["--dry-run"]) => needs(
            "opens an editor for the commit message",
            "Pass the message with `-m MESSAGE` or `-F FILE`, or use `--no-edit`.",
        ),
        "revert"
            if !editor_set
                && !any(rest, &["--no-edit", "--no-commit", "--abort", "--quit", "--skip"])
                && !has_short(rest, &['n']) =>
        {
            needs("opens an editor for the commit message", "Add `--no-edit`.")
        }
        "tag"
            if (has_short(rest, &['a', 's']) || any(rest, &["--annotate", "--sign"]))
                && !editor_set
                && !any(rest, &["--message", "--file"])
                && !has_short(rest, &['m', 'F']) =>
        {
            needs("opens an editor for the tag message", "Pass the message with `-m MESSAGE`.")
        }
        "mergetool" => needs(
            "starts an interactive merge tool",
            "Resolve the conflicts with the edit tool, then `git add` the files.",
        ),
        "difftool" => needs("starts an interactive diff tool", "Use `git --no-pager diff` instead."),
        _ => None,
    }
}

fn repl(name: &str, args: &[Word], stdin_given: bool, needs: &dyn Fn(&str, &str) -> Option<String>) -> Option<String> {
    // A script arriving on standard input is not a REPL session.
    if stdin_given {
        return None;
    }
    let python = name.strip_prefix("python").is_some_and(|v| v.chars().all(|c| c.is_ascii_digit() || c == '.'));
    let interactive = match name {
        _ if python => args.is_empty() || any(args, &["-i"]),
        "node" | "deno" | "bun" => {
            args.is_empty()
                || any(args, &["-i", "--interactive"])
                || (name != "node" && args.iter().all(|w| w.text == "repl"))
        }
        "irb" | "ghci" | "ipython" | "bpython" | "lua" | "julia" | "erl" | "iex" | "utop" | "ocaml" | "guile"
        | "racket" | "sbcl" | "R" => args.is_empty(),
        "psql" => !any(args, &["-c", "--command", "-f", "--file", "-l", "--list", "--help", "-V", "--version"]),
        "mysql" | "mariadb" => !any(args, &["-e", "--execute", "--help", "-V", "--version"]),
        "sqlite3" => {
            let positional = args.iter().filter(|w| !w.text.starts_with('-')).count();
            positional < 2 && !any(args, &["-cmd", "-version", "-help", "--version", "--help"])
        }
        _ => false,
    };
    if interactive {
        return needs("starts an interactive interpreter", REPL);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guide(s: &str) -> Option<String> {
        let words: Vec<Word> = s.split_whitespace().map(Word::literal).collect();
        check(&words, &[], &Stdin::Inherit, false)
    }

    #[test]
    fn editors_and_pagers() {
        for cmd in
            ["vim a.txt", "vi", "nvim x", "nano f", "emacs f", "less f", "more f", "man ls", "top", "htop", "watch ls"]
        {
            assert!(guide(cmd).is_some(), "{cmd}");
        }
        for cmd in ["emacs --batch -l x", "vim -es -c wq f", "top -b -n 1", "cat f"] {
            assert!(guide(cmd).is_none(), "{cmd}");
        }
        let words: Vec<Word> = ["less", "f"].into_iter().map(Word::literal).collect();
        assert!(check(&words, &[], &Stdin::Inherit, true).is_none());
    }

    #[test]
    fn sessions() {
        for cmd in [
            "ssh host",
            "ssh -p 22 host",
            "telnet h",
            "ftp h",
            "tmux",
            "tmux attach",
            "screen",
            "screen -r x",
            "su",
            "sudo -i",
        ] {
            assert!(guide(cmd).is_some(), "{cmd}");
        }
        for cmd in [
            "ssh host ls",
            "ssh -N -L 1:a:2 host",
            "tmux new -d -s x",
            "tmux send-keys -t x ls",
            "screen -dmS x ls",
            "su -c id",
        ] {
            assert!(guide(cmd).is_none(), "{cmd}");
        }
    }

    #[test]
    fn git_interactive() {
        for cmd in [
            "git rebase -i HEAD~2",
            "git add -p",
            "git add --interactive",
            "git commit",
            "git commit -a",
            "git mergetool",
            "git revert HEAD",
            "git tag -a v1",
        ] {
            assert!(guide(cmd).is_some(), "{cmd}");
        }
        for cmd in [
            "git commit -m x",
            "git commit -am x",
            "git commit --amend --no-edit",
            "git commit -F f",
            "git rebase main",
            "git add .",
            "git revert --no-edit HEAD",
            "git tag v1",
        ] {
            assert!(guide(cmd).is_none(), "{cmd}");
        }
        let words: Vec<Word> = ["git", "commit"].into_iter().map(Word::literal).collect();
        assert!(check(&words, &["GIT_EDITOR".to_string()], &Stdin::Inherit, false).is_none());
    }

    #[test]
    fn repls() {
        for cmd in [
            "python3",
            "python",
            "node",
            "irb",
            "ghci",
            "psql",
            "psql -h db",
            "mysql",
            "sqlite3",
            "sqlite3 db.sqlite",
            "python3 -i x.py",
        ] {
            assert!(guide(cmd).is_some(), "{cmd}");
        }
        for cmd in
            ["python3 x.py", "python3 -c print(1)", "node x.js", "psql -c select", "sqlite3 db select", "mysql -e x"]
        {
            assert!(guide(cmd).is_none(), "{cmd}");
        }
        let words = vec![Word::literal("python3")];
        assert!(check(&words, &[], &Stdin::Pipe, false).is_none());
    }
}
