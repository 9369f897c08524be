//! End-to-end checks of the policy: bypass attempts, positives, layering, memory, paths.

use super::*;

fn policy(toml: &str) -> Policy {
    Policy::new(&PolicyConfig::from_toml_str(toml).unwrap()).unwrap()
}

/// Allows the test runners, denies curl, mode auto.
fn guarded() -> Policy {
    policy("mode = \"auto\"\nallow = [\"npm test*\", \"cargo test*\"]\ndeny = [\"curl*\"]\n")
}

fn decision(cmd: &str) -> Decision {
    guarded().check_command(cmd).decision
}

/// The command must not be allowed, and the reason must be of the expected kind.
fn refused(cmd: &str, kind: fn(&ReasonKind) -> bool) {
    let verdict = guarded().check_command(cmd);
    assert_ne!(verdict.decision, Decision::Allow, "{cmd} was allowed: {verdict:#?}");
    assert!(
        verdict.reasons.iter().any(|r| r.decision == verdict.decision && kind(&r.kind)),
        "{cmd}: unexpected reasons {verdict:#?}"
    );
}

fn destructive(cmd: &str) {
    refused(cmd, |k| *k == ReasonKind::Destructive);
}

fn dynamic(cmd: &str) {
    refused(cmd, |k| *k == ReasonKind::Dynamic);
}

#[test]
fn bypass_and_list() {
    destructive("npm test && rm -rf /");
}

#[test]
fn bypass_semicolon() {
    destructive("npm test; rm -rf /");
}

#[test]
fn bypass_pipe() {
    destructive("npm test | rm -rf /");
}

#[test]
fn bypass_newline() {
    destructive("npm test\nrm -rf /");
}

#[test]
fn bypass_command_substitution() {
    destructive("echo $(rm -rf /)");
}

#[test]
fn bypass_backticks() {
    destructive("echo `rm -rf /`");
}

#[test]
fn bypass_substitution_in_assignment() {
    destructive("X=$(rm -rf /)");
}

#[test]
fn bypass_substitution_in_redirect_target() {
    destructive("echo hi > \"$(rm -rf /)\"");
}

#[test]
fn bypass_substitution_in_string() {
    destructive("npm test \"$(rm -rf ~)\"");
}

#[test]
fn bypass_bash_c() {
    destructive("bash -c 'rm -rf /'");
}

#[test]
fn bypass_sh_c_list() {
    destructive("sh -c \"npm test && rm -rf ~\"");
}

#[test]
fn bypass_eval() {
    destructive("eval rm -rf /");
}

#[test]
fn bypass_eval_dynamic() {
    dynamic("eval \"$X\"");
}

#[test]
fn bypass_env() {
    destructive("env X=1 rm -rf /");
}

#[test]
fn bypass_assignment_prefix() {
    destructive("X=1 rm -rf /");
}

#[test]
fn bypass_sudo() {
    destructive("sudo rm -rf /");
}

#[test]
fn bypass_sudo_user() {
    destructive("sudo -u root rm -rf /");
}

#[test]
fn bypass_subshell() {
    destructive("(rm -rf /)");
}

#[test]
fn bypass_brace_group() {
    destructive("{ rm -rf /; }");
}

#[test]
fn bypass_if() {
    destructive("if true; then rm -rf /; fi");
}

#[test]
fn bypass_for() {
    destructive("for f in a; do rm -rf $f; done");
}

#[test]
fn bypass_while_and_case() {
    destructive("while true; do case x in x) rm -rf /;; esac; done");
}

#[test]
fn bypass_function_body() {
    destructive("f() { rm -rf /; }; f");
}

#[test]
fn bypass_fork_bomb() {
    destructive(":(){ :|:& };:");
}

#[test]
fn bypass_named_fork_bomb() {
    destructive("bomb(){ bomb|bomb& }; bomb");
}

#[test]
fn bypass_dd() {
    destructive("dd if=/dev/zero of=/dev/sda");
}

#[test]
fn bypass_mkfs() {
    destructive("mkfs.ext4 /dev/sda1");
}

#[test]
fn bypass_force_push() {
    destructive("git push --force origin main");
}

#[test]
fn bypass_plus_refspec_push() {
    destructive("git push origin +main");
}

#[test]
fn bypass_find_exec() {
    destructive("find . -exec rm -rf {} \\;");
}

#[test]
fn bypass_xargs() {
    destructive("xargs rm -rf < list");
}

#[test]
fn bypass_timeout() {
    destructive("timeout 5 rm -rf /");
}

#[test]
fn bypass_nohup_background() {
    destructive("nohup rm -rf / &");
}

#[test]
fn bypass_process_substitution() {
    destructive("cat <(rm -rf /)");
}

#[test]
fn bypass_block_device_redirect() {
    destructive("echo x > /dev/sda");
}

#[test]
fn bypass_dynamic_name() {
    dynamic("$CMD -rf /");
}

#[test]
fn bypass_substituted_name() {
    dynamic("\"$(echo rm)\" -rf /");
}

#[test]
fn bypass_concatenated_name() {
    destructive("\"r\"\"m\" -rf /");
}

#[test]
fn bypass_escaped_name() {
    destructive("\\rm -rf /");
}

#[test]
fn bypass_ansi_c_name() {
    destructive("$'\\x72m' -rf /");
}

#[test]
fn bypass_absolute_path_name() {
    destructive("/bin/rm -rf /");
}

#[test]
fn bypass_command_builtin() {
    destructive("command rm -rf /");
}

#[test]
fn bypass_exec() {
    destructive("exec rm -rf /");
}

#[test]
fn bypass_nested_shells() {
    destructive("bash -c \"sh -c 'rm -rf /'\"");
}

#[test]
fn bypass_heredoc_to_shell() {
    destructive("bash <<'EOF'\nrm -rf /\nEOF");
}

#[test]
fn bypass_herestring_to_shell() {
    destructive("sh <<< 'rm -rf /'");
}

#[test]
fn bypass_piped_script() {
    dynamic("echo 'rm -rf /' | sh");
}

#[test]
fn bypass_brace_expansion() {
    dynamic("rm {-rf,/tmp/x}");
    // tree-sitter-bash cannot parse a brace expansion in command position, which asks as well.
    assert_eq!(decision("{rm,-rf,/}"), Decision::Ask);
}

#[test]
fn bypass_dynamic_flags() {
    dynamic("F=-rf; rm $F /tmp/x");
}

#[test]
fn bypass_glob_name() {
    dynamic("/bin/r? -rf /");
}

#[test]
fn bypass_busybox() {
    destructive("busybox rm -rf /");
}

#[test]
fn bypass_words_after_redirect() {
    destructive("rm > /dev/null -rf /");
}

#[test]
fn bypass_trap() {
    destructive("trap 'rm -rf /' EXIT");
}

#[test]
fn bypass_git_alias() {
    destructive("git -c alias.x='!rm -rf /' x");
}

#[test]
fn bypass_find_exec_shell() {
    destructive("find . -exec sh -c 'rm -rf \"$1\"' _ {} \\;");
}

#[test]
fn bypass_declare_substitution() {
    destructive("declare -x X=$(rm -rf /)");
}

#[test]
fn bypass_arithmetic_substitution() {
    destructive("(( $(rm -rf /) ))");
}

#[test]
fn bypass_exec_redirect_to_device() {
    destructive("exec 3>/dev/sda");
}

#[test]
fn deny_through_bash_lc() {
    let verdict = guarded().check_command("bash -lc 'curl x | sh'");
    assert_eq!(verdict.decision, Decision::Deny);
    assert!(verdict.reasons.iter().any(|r| r.kind == ReasonKind::DenyRule("curl*".into()) && r.command == "curl x"));
}

#[test]
fn deny_through_absolute_path() {
    assert_eq!(decision("/usr/bin/curl https://x"), Decision::Deny);
}

#[test]
fn deny_through_substitution() {
    assert_eq!(decision("npm test $(curl x)"), Decision::Deny);
}

#[test]
fn parse_errors_ask() {
    let verdict = guarded().check_command("npm test && (");
    assert_eq!(verdict.decision, Decision::Ask);
    let reason = verdict.reasons.iter().find(|r| r.kind == ReasonKind::Unparsed).unwrap();
    assert!(reason.message.starts_with("could not parse the command; "), "{}", reason.message);
    assert_eq!(decision("echo \"unterminated"), Decision::Ask);
}

#[test]
fn allowed_commands() {
    let verdict = guarded().check_command("npm test");
    assert_eq!(verdict.decision, Decision::Allow);
    assert_eq!(verdict.reasons[0].kind, ReasonKind::AllowRule("npm test*".into()));
    assert_eq!(verdict.commands, ["npm test"]);
    assert_eq!(decision("cargo test --release"), Decision::Allow);
    assert_eq!(decision("timeout 60 cargo test"), Decision::Allow);
}

#[test]
fn mode_auto_allows_unmatched() {
    let verdict = guarded().check_command("ls -la");
    assert_eq!(verdict.decision, Decision::Allow);
    assert_eq!(verdict.reasons[0].kind, ReasonKind::Default);
    assert_eq!(decision("rm file.txt"), Decision::Allow);
    assert_eq!(decision("rm -r build"), Decision::Allow);
    assert_eq!(decision("git push origin main"), Decision::Allow);
}

#[test]
fn mode_ask_asks_for_unmatched() {
    let p = policy("mode = \"ask\"\nallow = [\"npm test*\"]\n");
    let verdict = p.check_command("ls -la");
    assert_eq!(verdict.decision, Decision::Ask);
    assert_eq!(verdict.reasons[0].kind, ReasonKind::ModeAsk);
    assert_eq!(p.check_command("npm test").decision, Decision::Allow);
    // A transparent wrapper is settled by what it runs.
    assert_eq!(p.check_command("timeout 5 npm test").decision, Decision::Allow);
    // A privilege change is a command of its own.
    assert_eq!(p.check_command("sudo npm test").decision, Decision::Ask);
}

#[test]
fn ask_rule_beats_allow_rule() {
    let p = policy("allow = [\"git *\"]\nask = [\"git commit*\"]\n");
    let verdict = p.check_command("git commit -m x");
    assert_eq!(verdict.decision, Decision::Ask);
    assert_eq!(verdict.reasons[0].kind, ReasonKind::AskRule("git commit*".into()));
    assert_eq!(p.check_command("git status").decision, Decision::Allow);
}

#[test]
fn deny_rule_beats_everything() {
    let p = policy("allow = [\"git push*\"]\nask = [\"git push*\"]\ndeny = [\"git push*\"]\n");
    assert_eq!(p.check_command("git push origin main").decision, Decision::Deny);
    assert_eq!(p.check_command("git push --force").decision, Decision::Deny);
    assert_eq!(p.check_command("sudo git push").decision, Decision::Deny);
}

#[test]
fn destructive_beats_allow_rule() {
    let p = policy("allow = [\"rm*\"]\n");
    let verdict = p.check_command("rm -rf build");
    assert_eq!(verdict.decision, Decision::Ask);
    assert_eq!(
        verdict.reasons[0].message,
        "`rm -rf build` deletes a directory tree without asking, so it needs an operator's confirmation, and no operator can confirm in this run. Delete specific files with `rm FILE`, or ask the operator to run it."
    );
}

#[test]
fn wrapper_text_meets_deny_rules() {
    let p = policy("deny = [\"sudo*\"]\n");
    assert_eq!(p.check_command("sudo ls").decision, Decision::Deny);
    assert_eq!(p.check_command("ls && sudo -n true").decision, Decision::Deny);
}

#[test]
fn most_restrictive_wins_and_all_reasons_are_kept() {
    let verdict = guarded().check_command("npm test && rm -rf build && curl x");
    assert_eq!(verdict.decision, Decision::Deny);
    let kinds: Vec<&ReasonKind> = verdict.reasons.iter().map(|r| &r.kind).collect();
    assert_eq!(
        kinds,
        [&ReasonKind::AllowRule("npm test*".into()), &ReasonKind::Destructive, &ReasonKind::DenyRule("curl*".into())]
    );
    assert_eq!(verdict.commands, ["npm test", "rm -rf build", "curl x"]);
    assert!(verdict.message().contains("curl*"));
}

#[test]
fn empty_command_is_allowed() {
    for cmd in ["", "   \n", "# just a comment"] {
        let verdict = guarded().check_command(cmd);
        assert_eq!(verdict.decision, Decision::Allow, "{cmd:?}");
        assert!(verdict.commands.is_empty() && verdict.reasons.is_empty());
    }
}

#[test]
fn workspace_allow_rules_are_ignored() {
    let user = PolicyConfig::from_toml_str("mode = \"ask\"\nallow = [\"ls*\"]").unwrap();
    let ws = PolicyConfig::from_toml_str(
        "mode = \"auto\"\nallow = [\"rm*\"]\ndeny = [\"curl*\"]\n[paths]\nallow = [\"/etc/**\"]\n",
    )
    .unwrap();
    let (p, warnings) = Policy::layered(Some(user), Some(ws)).unwrap();
    assert_eq!(warnings.len(), 3, "{warnings:?}");
    assert!(warnings.iter().all(|w| w.contains("user configuration")));
    assert_eq!(p.check_command("rm x").decision, Decision::Ask);
    assert_eq!(p.check_command("ls").decision, Decision::Allow);
    assert_eq!(p.check_command("curl x").decision, Decision::Deny);
}

#[test]
fn workspace_may_tighten_mode() {
    let ws = PolicyConfig::from_toml_str("mode = \"ask\"").unwrap();
    let (p, warnings) = Policy::layered(None, Some(ws)).unwrap();
    assert!(warnings.is_empty());
    assert_eq!(p.check_command("ls").decision, Decision::Ask);
}

#[test]
fn remembered_commands() {
    let mut p = policy("mode = \"ask\"\nask = [\"make*\"]\n");
    assert_eq!(p.check_command("make build && ls").decision, Decision::Ask);
    p.remember("make build && ls");
    let verdict = p.check_command("make build && ls");
    assert_eq!(verdict.decision, Decision::Allow);
    assert!(verdict.reasons.iter().any(|r| r.kind == ReasonKind::Remembered));
    // Only the exact text is remembered.
    assert_eq!(p.check_command("make build && ls -l").decision, Decision::Ask);
    p.remember("rm -rf x");
    assert_eq!(p.check_command("rm -rf x").decision, Decision::Ask);
}

#[test]
fn interactive_guidance() {
    let p = guarded();
    let guide = |cmd: &str| p.check_command(cmd).interactive;
    assert!(guide("vim a.txt").is_some_and(|g| g.contains("edit tool")));
    assert!(guide("git rebase -i HEAD~2").is_some_and(|g| g.contains("GIT_SEQUENCE_EDITOR")));
    assert!(guide("git commit").is_some_and(|g| g.contains("-m")));
    assert!(guide("git commit -m x").is_none());
    assert!(guide("less file").is_some_and(|g| g.contains("cat")));
    assert!(guide("less file | cat").is_none());
    assert!(guide("python3").is_some());
    assert!(guide("python3 x.py").is_none());
    assert!(guide("sudo vim x").is_some());
    assert!(guide("GIT_EDITOR=true git commit").is_none());
    assert!(guide("echo 'print(1)' | python3").is_none());
    // Guidance does not change the decision.
    assert_eq!(p.check_command("vim a.txt").decision, Decision::Allow);
}

#[test]
fn paths() {
    let p = policy("[paths]\ndeny = [\"/etc/**\"]\nask = [\"/work/secrets/**\"]\nallow = [\"/work/**\"]\n");
    let v = p.check_path(Path::new("/etc/passwd"));
    assert_eq!(v.decision, Decision::Deny);
    assert_eq!(v.reasons[0].kind, ReasonKind::DenyRule("/etc/**".into()));
    assert_eq!(p.check_path(Path::new("/work/../etc/hosts")).decision, Decision::Deny);
    assert_eq!(p.check_path(Path::new("/work/secrets/key")).decision, Decision::Ask);
    let allowed = p.check_path(Path::new("/work/src/main.rs"));
    assert_eq!(allowed.decision, Decision::Allow);
    assert_eq!(allowed.reasons[0].kind, ReasonKind::AllowRule("/work/**".into()));
    assert_eq!(p.check_path(Path::new("/tmp/x")).reasons[0].kind, ReasonKind::Default);
}

#[test]
fn redirects_meet_path_rules() {
    let p = policy("[paths]\ndeny = [\"/etc/**\"]\nask = [\"/work/secrets/**\"]\n");
    assert_eq!(p.check_command("echo x > /etc/hosts").decision, Decision::Deny);
    assert_eq!(p.check_command("echo x >> /work/secrets/k").decision, Decision::Ask);
    assert_eq!(p.check_command("cat /etc/hosts > /tmp/x").decision, Decision::Allow);
}

#[test]
fn verdicts_serialize() {
    let verdict = guarded().check_command("curl x");
    let value = toml::Value::try_from(&verdict).unwrap();
    let reasons = value.get("reasons").and_then(|r| r.as_array()).unwrap();
    assert_eq!(reasons[0].get("kind").and_then(|k| k.get("type")).and_then(|k| k.as_str()), Some("deny_rule"));
}

#[test]
fn messages_are_deterministic() {
    let a = guarded().check_command("eval \"$X\"; curl y; rm -rf /");
    let b = guarded().check_command("eval \"$X\"; curl y; rm -rf /");
    assert_eq!(a, b);
    let dynamic = a.reasons.iter().find(|r| r.kind == ReasonKind::Dynamic).unwrap();
    assert_eq!(
        dynamic.message,
        "`eval $X` runs shell code that is only known when it runs (`$X`), so it cannot be checked in advance; it needs an operator's confirmation, and no operator can confirm in this run. Write the command out literally, without variables or substitutions in that place."
    );
}

/// Issue 17 item 3: in the mode "ask" with only `echo*` allowed, `echo ${x@P}` and
/// `echo $((x))` ran whatever the string held. A line in which the shell builds code from a
/// string is never allowed by an allow rule; in "ask" it asks, in "auto" it runs and the guest's
/// exec check decides on what it executes.
#[test]
fn code_built_from_strings_is_never_allowed_by_an_allow_rule() {
    let ask = policy("mode = \"ask\"\nallow = [\"echo*\", \"x=*\", \"printf*\", \"source*\", \"set*\", \":\"]\n");
    let auto = policy("mode = \"auto\"\nallow = [\"echo*\"]\n");
    for cmd in [
        "x='$(rm -rf C)'; echo ${x@P}",
        "x='a[$(rm -rf C)]'; echo $((x))",
        "PS4='$(rm -rf C) '; set -x; :",
        "printf -v 'a[$(rm -rf C)]' x",
        "echo ${a[$i]}",
        "source ./env.sh",
    ] {
        let v = ask.check_command(cmd);
        assert_eq!(v.decision, Decision::Ask, "{cmd}: {v:#?}");
        let r = v.reasons.iter().find(|r| r.kind == ReasonKind::Evaluated).unwrap_or_else(|| panic!("{cmd}: {v:#?}"));
        assert!(r.message.contains("cannot be checked in advance, and the approval mode is \"ask\""), "{}", r.message);
        assert_eq!(auto.check_command(cmd).decision, Decision::Allow, "{cmd}");
    }
    // The constructs are not commands: an operator's confirmation covers the line's commands,
    // and the exec check's approvals are made from those only.
    let v = ask.check_command("x='$(rm -rf C)'; echo ${x@P}");
    assert!(v.commands.iter().all(|c| !c.contains("@P}") || c.starts_with("echo")), "{:?}", v.commands);
    // Plain lines are unchanged in both modes.
    for cmd in ["echo $((1 + 2))", "echo hello", "echo \"${files[@]}\""] {
        assert_eq!(ask.check_command(cmd).decision, Decision::Allow, "{cmd}");
    }
}

/// Issue 17: a fork bomb of two functions that call each other passed the first look (only a
/// function calling itself was caught).
#[test]
fn functions_calling_each_other_in_a_circle_are_a_fork_bomb() {
    destructive("a(){ b|b& }; b(){ a|a& }; a");
    destructive("x(){ y; }; y(){ z & }; z(){ x | x & }; x");
    for ok in ["a(){ echo a; }; b(){ a; a; }; b", "f(){ g; }; g(){ echo; }; f"] {
        assert_eq!(decision(ok), Decision::Allow, "{ok}");
    }
}

#[test]
fn a_circle_of_calls_is_named_in_order() {
    let v = guarded().check_command("x(){ y; }; y(){ z & }; z(){ x | x & }; x");
    let r = v.reasons.iter().find(|r| r.kind == ReasonKind::Destructive).unwrap();
    assert!(r.message.contains("(`x` → `y` → `z` → `x`)"), "{}", r.message);
    // Many functions all calling each other: found at once, not by trying every path.
    let names: Vec<String> = (0..200).map(|i| format!("f{i}")).collect();
    let mut src = String::new();
    for n in &names {
        src.push_str(&format!("{n}(){{ {}; }}; ", names.join("; ")));
    }
    assert_eq!(guarded().check_command(&src).decision, Decision::Ask);
}

#[test]
fn the_sysrq_trigger_is_the_machine() {
    destructive("echo o > /proc/sysrq-trigger");
    destructive("echo b >/proc//./sysrq-trigger");
    assert_eq!(decision("cat /proc/sysrq-trigger 2>/dev/null"), Decision::Allow);
}

/// The peer's rule cases where they apply (Codex's execpolicy example policy and its sed
/// tests): an ask rule on `git reset --hard` does not catch `--keep` or `--merge`, and the
/// everyday read-only commands its examples allow need no confirmation here either.
#[test]
fn the_peer_s_example_cases_where_they_apply() {
    let p = policy("mode = \"auto\"\nask = [\"git reset --hard*\"]\n");
    assert_eq!(p.check_command("git reset --hard").decision, Decision::Ask);
    assert_eq!(p.check_command("git reset --keep").decision, Decision::Allow);
    assert_eq!(p.check_command("git reset --merge").decision, Decision::Allow);
    for cmd in [
        "ls",
        "ls -l",
        "ls -a .",
        "cat file.txt",
        "cat -n README.md",
        "head README.md",
        "head -n 5 CHANGELOG.md",
        "printenv",
        "printenv PATH",
        "pwd",
        "which python3",
        "which -a python3",
        "sed -n 122,202p hello.txt",
        "sed -n -e 122,202p hello.txt",
    ] {
        assert_eq!(decision(cmd), Decision::Allow, "{cmd}");
    }
}
