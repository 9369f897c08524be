//! The exec check: what the guest decides about each program a command executes, on the argv the
//! kernel copied, before the program runs (the supervisor, `crate::supervise`, stops every exec
//! of a command's process tree and asks [`decide`]). A static reading of a command line cannot
//! see what bash builds at run time (`${x@P}`, `$((x))` on a string, `PS4`, aliases, `xargs`,
//! `find -exec`, a shell fed on stdin, a copied binary); every one of those ends in an exec of
//! the real program, and that is what is judged here.
//!
//! Pure: the supervisor gathers the facts (argv, the executable, the environment, git's config
//! files); the host's first look at a command line calls the same [`destructive::check`], so a
//! rule means the same in both places.

pub mod destructive;
pub mod normalise;

use serde::{Deserialize, Serialize};

pub use normalise::{Context, Normalised};

/// The operator's rules as the guest applies them, sent with every command.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecPolicy {
    /// Command patterns (`*` matches any text, everything else is literal, the whole command
    /// must match), as in `[approval]`: an exec that matches one is refused.
    pub deny: Vec<String>,
    /// Command patterns that need an operator's confirmation: refused at exec time unless
    /// `approved` covers the exec.
    pub ask: Vec<String>,
    /// What the operator confirmed for this call: patterns over normalised commands (the first
    /// look's units, with what bash expands as `*`). An exec one of these matches passes the ask
    /// rules and the destructive list, never a deny rule.
    pub approved: Vec<String>,
    /// Abhed's own commands (the task suite's setup and checks), not the model's: every exec
    /// runs. Never set for a command the model wrote.
    #[serde(default)]
    pub own: bool,
    /// Run the command without the supervisor at all: only `abhed bench --sandbox` sets it, to
    /// measure what the check costs. The bash tool never does.
    #[serde(default)]
    pub unchecked: bool,
}

impl ExecPolicy {
    /// For Abhed's own commands ([`ExecPolicy::own`]).
    pub fn own() -> ExecPolicy {
        ExecPolicy { own: true, ..Default::default() }
    }
}

/// One exec as the supervisor saw it.
#[derive(Debug, Clone)]
pub struct Exec<'a> {
    /// The program's name: the executable's file name, or the name of the program it is a
    /// byte-for-byte copy of.
    pub program: &'a str,
    /// The arguments after the program's name (after `argv[0]`, or after `busybox APPLET`).
    pub args: &'a [String],
    /// The executable is busybox, which runs some applets inside its own process (its shells
    /// run other applets without an exec the check could see).
    pub busybox: bool,
    pub ctx: Context<'a>,
}

/// An exec refused, for the command's observation and the log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Denial {
    /// The exec, normalised (`git push --force-with-lease`).
    pub command: String,
    /// The rule: `deny:PATTERN`, `ask:PATTERN`, or `destructive`.
    pub rule: String,
    /// For the model: what was refused, why, and what to do instead.
    pub message: String,
}

/// Whether the whole of `text` matches `pattern`, where `*` matches any text (empty included).
pub fn pattern_matches(pattern: &str, text: &str) -> bool {
    let (p, t) = (pattern.as_bytes(), text.as_bytes());
    // Greedy with backtracking to the last star: linear in practice, no recursion.
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, ti));
            pi += 1;
        } else if pi < p.len() && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

/// The texts rules are matched against: the command as given (under its program's name), and
/// normalised, with and without git's `-c` settings.
fn texts(exec: &Exec, n: &Normalised) -> Vec<String> {
    let mut out = Vec::with_capacity(3);
    let mut raw = exec.program.to_string();
    for a in exec.args {
        raw.push(' ');
        raw.push_str(a);
    }
    out.push(raw);
    out.push(n.text());
    if n.program == "git" {
        let mut words = Vec::new();
        let mut it = n.words.iter();
        while let Some(w) = it.next() {
            if w == "-c" {
                it.next();
            } else {
                words.push(w.as_str());
            }
        }
        out.push(words.join(" "));
    }
    out.dedup();
    out
}

const NOT_RUN: &str = "It did not run; what ran before it in your command did, and the command went on without it.";

/// Decide on one exec: `Ok` with its normalised form when it may run.
pub fn decide(policy: &ExecPolicy, exec: &Exec) -> Result<Normalised, Denial> {
    let n = normalise::normalise(exec.program, exec.args, &exec.ctx);
    if policy.own {
        return Ok(n);
    }
    let texts = texts(exec, &n);
    // For git, shown without its `-c` settings (the last text): `git reset --hard`.
    let command = texts.last().cloned().unwrap_or_else(|| n.text());
    let first = |patterns: &[String]| -> Option<String> {
        patterns.iter().find(|p| texts.iter().any(|t| pattern_matches(p, t))).cloned()
    };
    if let Some(rule) = first(&policy.deny) {
        return Err(Denial {
            message: format!(
                "`{command}` was refused when it was about to run: it matches the deny rule `{rule}` in the approval policy. {NOT_RUN} Do not retry it or a variant of it; find another way, or tell the operator what you need."
            ),
            command,
            rule: format!("deny:{rule}"),
        });
    }
    if first(&policy.approved).is_some() {
        return Ok(n);
    }
    if let Some(rule) = first(&policy.ask) {
        return Err(Denial {
            message: format!(
                "`{command}` was refused when it was about to run: it matches the ask rule `{rule}`, so it needs an operator's confirmation, and none was given for it. {NOT_RUN} If it is needed, run it as its own bash call, written out literally, so that it can be confirmed."
            ),
            command,
            rule: format!("ask:{rule}"),
        });
    }
    if exec.busybox && matches!(exec.program, "sh" | "ash" | "hush" | "bash") {
        return Err(Denial {
            message: format!(
                "`busybox {}` was refused when it was about to run: busybox's shell runs commands such as `rm` inside its own process, where the exec check cannot see them. {NOT_RUN} Use bash (`bash -c '...'`, or `sh`, which is bash here).",
                exec.program
            ),
            command,
            rule: "busybox-shell".to_string(),
        });
    }
    let words: Vec<&str> = n.words.iter().map(String::as_str).collect();
    if let Some(d) = destructive::check(&words) {
        return Err(Denial {
            message: format!(
                "`{command}` was refused when it was about to run: it {}, so it needs an operator's confirmation, and none was given for it. {NOT_RUN} {} If it is needed, run it as its own bash call, written out literally, so that it can be confirmed.",
                d.why, d.instead
            ),
            command,
            rule: "destructive".to_string(),
        });
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exec_of(cmd: &str) -> (String, Vec<String>) {
        let mut words = cmd.split_whitespace().map(str::to_string);
        let program = words.next().unwrap_or_default();
        (program, words.collect())
    }

    fn run(policy: &ExecPolicy, cmd: &str) -> Result<Normalised, Denial> {
        let (program, args) = exec_of(cmd);
        decide(policy, &Exec { program: &program, args: &args, busybox: false, ctx: Context::default() })
    }

    #[test]
    fn patterns_match_the_whole_text() {
        assert!(pattern_matches("git push*", "git push origin main"));
        assert!(pattern_matches("git push*", "git push"));
        assert!(!pattern_matches("curl", "curl x"));
        assert!(pattern_matches("*rm*", "sudo rm -rf x"));
        assert!(pattern_matches("a*b*c", "a__b__b__c"));
        assert!(!pattern_matches("a*b*c", "a__b__b__"));
        assert!(pattern_matches("*", ""));
    }

    #[test]
    fn deny_rules_match_the_normalised_command() {
        let policy = ExecPolicy { deny: vec!["git push*".into(), "curl*".into()], ..Default::default() };
        for cmd in ["git push", "git -C R push", "git --no-pager push origin", "git -c k=v push -f", "curl http://x"] {
            let e = run(&policy, cmd).unwrap_err();
            assert!(e.rule.starts_with("deny:"), "{cmd}: {e:?}");
            assert!(e.message.contains("was refused when it was about to run"), "{}", e.message);
        }
        assert!(run(&policy, "git status").is_ok());
    }

    #[test]
    fn destructive_execs_need_an_approval_and_an_approval_covers_them() {
        let none = ExecPolicy::default();
        for cmd in
            ["rm -rf /w/C", "rm --recurs --forc /w/C", "git reset --har", "git -c clean.requireForce=false clean"]
        {
            let e = run(&none, cmd).unwrap_err();
            assert_eq!(e.rule, "destructive", "{cmd}");
        }
        let approved = ExecPolicy { approved: vec!["rm -rf /w/build/*".into()], ..Default::default() };
        assert!(run(&approved, "rm -rf /w/build/a /w/build/b").is_ok());
        assert!(run(&approved, "rm -rf /w/C").is_err());
        // An approval never passes a deny rule.
        let both = ExecPolicy { deny: vec!["rm*".into()], approved: vec!["rm*".into()], ..Default::default() };
        assert!(run(&both, "rm x").is_err());
    }

    #[test]
    fn ask_rules_refuse_without_an_approval() {
        let policy = ExecPolicy { ask: vec!["npm publish*".into()], ..Default::default() };
        assert_eq!(run(&policy, "npm publish").unwrap_err().rule, "ask:npm publish*");
        assert!(run(&policy, "npm test").is_ok());
    }

    #[test]
    fn common_safe_commands_pass() {
        let policy = ExecPolicy { deny: vec!["git push*".into()], ..Default::default() };
        for cmd in [
            "cargo test",
            "git status",
            "pwd",
            "ls",
            "wc -l",
            "npm test",
            "rm -r build",
            "rm file",
            "python3 -m pytest",
        ] {
            assert!(run(&policy, cmd).is_ok(), "{cmd}");
        }
    }
}
