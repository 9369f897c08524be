//! Code the shell builds from strings while the command runs (issue 17, item 3): a value
//! expanded as a prompt (`${x@P}`), arithmetic on a variable (`$((x))`, where `x='a[$(cmd)]'`
//! runs `cmd`), `PS4`, `printf -v`, `mapfile -C`, `compgen -C`, `trap`, `source`. What such a
//! line runs cannot be read from it, so it is never *allowed by an allow rule*: in the mode
//! `"ask"` it asks; in `"auto"` it runs, and the guest's exec check (which decides on every
//! program actually executed) is what stands between it and a destructive command.

use tree_sitter::Node;

use super::parse::Word;

/// One construct found in the tree: its source text and what it does, completing "`TEXT` ...".
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Construct {
    pub text: String,
    pub what: &'static str,
}

const PROMPT: &str = "expands a value as a prompt (`@P`), which runs the command substitutions in it";
const ARITHMETIC: &str =
    "evaluates arithmetic on a value known only when it runs (a value such as `a[$(cmd)]` runs `cmd`)";
const SUBSCRIPT: &str =
    "indexes an array with a value known only when it runs (the index is arithmetic: `a[$(cmd)]` runs `cmd`)";
const HOOK_VARIABLE: &str =
    "sets a variable whose value bash later expands and runs (`PS4` when tracing, `PROMPT_COMMAND`, `BASH_ENV`, `ENV`)";

/// The constructs of the tree under `root` (every node, whatever statement holds it).
pub(crate) fn constructs(root: Node, src: &[u8]) -> Vec<Construct> {
    let text = |n: Node| n.utf8_text(src).unwrap_or("").to_string();
    let mut out = Vec::new();
    let mut stack = vec![root];
    while let Some(node) = stack.pop() {
        let what = match node.kind() {
            "expansion" if text(node).ends_with("@P}") => Some(PROMPT),
            "arithmetic_expansion" if has_value(node) => Some(ARITHMETIC),
            // `((x))` and `for ((…))`; `{ …; }` is a compound statement too, without the parentheses.
            "compound_statement" | "c_style_for_statement"
                if text(node).trim_start_matches("for").trim_start().starts_with("((") && has_value(node) =>
            {
                Some(ARITHMETIC)
            }
            "test_command" if text(node).starts_with("[[") && arithmetic_test(node, src) => Some(ARITHMETIC),
            "subscript" => node.child_by_field_name("index").filter(|i| has_value(*i)).map(|_| SUBSCRIPT),
            "variable_assignment" => node
                .child_by_field_name("name")
                .filter(|n| matches!(text(*n).as_str(), "PS4" | "PROMPT_COMMAND" | "BASH_ENV" | "ENV"))
                .map(|_| HOOK_VARIABLE),
            _ => None,
        };
        if let Some(what) = what {
            let mut t = text(node);
            if t.chars().count() > 80 {
                t = t.chars().take(77).collect::<String>() + "...";
            }
            out.push(Construct { text: t, what });
        }
        let mut cursor = node.walk();
        stack.extend(node.children(&mut cursor));
    }
    out
}

/// Whether an arithmetic node refers to a value known only at run time: a variable (bare, as
/// arithmetic writes it, or `$x`), an expansion or a command's output.
fn has_value(node: Node) -> bool {
    let mut stack = vec![node];
    while let Some(n) = stack.pop() {
        if matches!(n.kind(), "variable_name" | "simple_expansion" | "expansion" | "command_substitution") {
            return true;
        }
        let mut cursor = n.walk();
        stack.extend(n.children(&mut cursor));
    }
    false
}

/// `[[ A -eq B ]]` and the other integer comparisons evaluate both sides as arithmetic.
fn arithmetic_test(node: Node, src: &[u8]) -> bool {
    let mut stack = vec![node];
    while let Some(n) = stack.pop() {
        if n.kind() == "binary_expression"
            && let Some(op) = n.child_by_field_name("operator")
            && matches!(op.utf8_text(src).unwrap_or(""), "-eq" | "-ne" | "-lt" | "-le" | "-gt" | "-ge")
            && has_value(n)
        {
            return true;
        }
        let mut cursor = n.walk();
        stack.extend(n.children(&mut cursor));
    }
    false
}

/// What a builtin does with a string it is given, when it runs it as code: completes "`CMD` ...".
pub(crate) fn builtin(words: &[Word]) -> Option<&'static str> {
    let name = words.first()?.text.as_str();
    let args = &words[1..];
    // Options as the builtins take them: short, clustered, before the operands.
    let has_option = |letters: &[char]| {
        args.iter()
            .map(|w| w.text.as_str())
            .take_while(|a| a.starts_with('-') && *a != "--" && a.len() > 1)
            .any(|a| a[1..].chars().any(|c| letters.contains(&c)))
    };
    match name {
        "let" => Some("evaluates arithmetic on its arguments (a value such as `a[$(cmd)]` runs `cmd`)"),
        "printf" if has_option(&['v']) => {
            Some("assigns with `-v`, whose name may be an array element with code in its index (`a[$(cmd)]`)")
        }
        "mapfile" | "readarray" if has_option(&['C']) => Some("runs the callback given with `-C` as code"),
        "compgen" | "complete" if has_option(&['C', 'F']) => {
            Some("runs the command or function given with `-C`/`-F` as code")
        }
        "trap" => {
            let action = args.iter().map(|w| w.text.as_str()).find(|a| !a.starts_with('-') || *a == "-");
            match action {
                Some("" | "-") | None => None,
                Some(_) => Some("sets a trap whose text bash runs as code when the signal or event comes"),
            }
        }
        "source" | "." if args.first().is_some_and(|w| !w.text.is_empty()) => {
            Some("runs a file's text as code in this shell, and the file's text is not part of the command")
        }
        "declare" | "typeset" | "local" if has_option(&['i']) => {
            Some("declares an integer variable, whose every assignment is evaluated as arithmetic")
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(src: &str) -> Vec<&'static str> {
        let mut parser = tree_sitter::Parser::new();
        parser.set_language(&tree_sitter_bash::LANGUAGE.into()).unwrap();
        let tree = parser.parse(src, None).unwrap();
        constructs(tree.root_node(), src.as_bytes()).into_iter().map(|c| c.what).collect()
    }

    #[test]
    fn run_time_code_is_found_in_the_tree() {
        for src in [
            "x='$(rm -rf C)'; echo ${x@P}",
            "x='a[$(rm -rf C)]'; echo $((x))",
            "echo $(( $x + 1 ))",
            "((x))",
            "for ((i=0; i<n; i++)); do :; done",
            "[[ $x -eq 1 ]] && echo y",
            "echo ${a[$i]}",
            "PS4='$(rm -rf C) '; set -x; :",
            "PROMPT_COMMAND='rm -rf C' bash -i",
        ] {
            assert!(!found(src).is_empty(), "{src}");
        }
    }

    #[test]
    fn plain_commands_have_none() {
        for src in [
            "echo $((1 + 2))",
            "ls -la && cargo test",
            "echo ${HOME}/x",
            "for f in \"${files[@]}\" ${a[*]} ${a[0]}; do :; done",
            "[[ -f x ]] && echo y",
            "[ \"$x\" -eq 1 ]",
            "{ echo a; echo b; } > f",
            "x=1; echo $x",
        ] {
            assert!(found(src).is_empty(), "{src}: {:?}", found(src));
        }
    }

    #[test]
    fn builtins_that_run_strings_are_named() {
        let w = |s: &str| s.split_whitespace().map(Word::literal).collect::<Vec<_>>();
        for cmd in [
            "let x",
            "printf -v a[0] x",
            "printf -va x",
            "mapfile -C f -c 1",
            "readarray -tC f",
            "compgen -C cmd x",
            "complete -F f x",
            "trap f EXIT",
            "source ./env.sh",
            ". ./env.sh",
            "declare -i n",
            "local -ri n",
        ] {
            assert!(builtin(&w(cmd)).is_some(), "{cmd}");
        }
        for cmd in
            ["printf %s x", "mapfile -t a", "trap - EXIT", "trap -l", "declare -a n", "echo source", "compgen -c"]
        {
            assert!(builtin(&w(cmd)).is_none(), "{cmd}");
        }
    }
}
