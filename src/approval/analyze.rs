//! Policy-independent analysis: a command line becomes a flat list of [`Unit`]s, one per simple command
//! and per wrapper layer, each with what was found about it. The policy then decides per unit.

use super::destructive::{self, Destructive, basename};
use super::evaluated;
use super::interactive;
use super::parse::{self, Redirect, SimpleCommand, Stdin, Word};
use super::wrappers::{self, Unwrap};

/// How deep shell strings may nest (`bash -c "bash -c '...'"`) before the analyzer gives up.
const MAX_NESTING: usize = 8;

/// How many wrappers one command may stack (`nohup nohup ...`); bounds recursion on hostile input.
const MAX_LAYERS: usize = 64;

/// Something found about a unit that needs an operator's attention.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Finding {
    Destructive(Destructive),
    /// Completes "`CMD` ...", e.g. "runs a command whose name is only known when it runs (`$X`)".
    Dynamic(String),
    /// The text could not be parsed; the detail says where.
    Unparsed(String),
    /// Completes "`CMD` ...": the shell builds code from a string while it runs
    /// ([`super::evaluated`]); never allowed by an allow rule, asked in the mode "ask".
    Evaluated(&'static str),
}

/// One command the policy has to judge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unit {
    /// Words joined by single spaces, quotes removed (dynamic parts as written).
    pub text: String,
    /// The same with the command name reduced to its base name (`/bin/rm x` → `rm x`), when different;
    /// deny and ask rules also match this form, so a path cannot dodge them.
    pub alt_text: Option<String>,
    /// Judged by every rule. Transparent wrappers (`env`, `timeout`, `bash -c`, ...) are only judged by deny
    /// and ask rules, since the command they run is judged on its own.
    pub full: bool,
    pub findings: Vec<Finding>,
    pub interactive: Option<String>,
    /// Absolute paths this command writes through redirections, for the path rules.
    pub write_targets: Vec<String>,
    /// A construct inside a command (`${x@P}`), not a command: judged, never listed among the
    /// commands (an operator's confirmation covers commands, not constructs).
    pub construct: bool,
}

impl Unit {
    fn new(words: &[Word], full: bool) -> Self {
        let text = join(words);
        let alt_text = words.first().filter(|w| w.text.contains('/')).map(|w| {
            let mut alt = vec![basename(&w.text).to_string()];
            alt.extend(words[1..].iter().map(|w| w.text.clone()));
            alt.join(" ")
        });
        Unit {
            text,
            alt_text,
            full,
            findings: Vec::new(),
            interactive: None,
            write_targets: Vec::new(),
            construct: false,
        }
    }
}

fn join(words: &[Word]) -> String {
    words.iter().map(|w| w.text.as_str()).collect::<Vec<_>>().join(" ")
}

/// Analyzes a whole command line.
pub(crate) fn analyze(source: &str) -> Vec<Unit> {
    let mut out = Vec::new();
    analyze_source(source, 0, &mut out);
    out
}

fn analyze_source(source: &str, depth: usize, out: &mut Vec<Unit>) {
    let script = parse::parse(source);
    if let Some(detail) = script.error {
        let mut unit = Unit::new(&[Word::literal(source.trim())], false);
        unit.findings.push(Finding::Unparsed(detail));
        out.push(unit);
    }
    for construct in script.evaluated {
        let mut unit = Unit::new(&[Word::literal(&construct.text)], false);
        unit.construct = true;
        unit.findings.push(Finding::Evaluated(construct.what));
        out.push(unit);
    }
    if let Some(cycle) = call_cycle(&script.commands) {
        let mut unit = Unit::new(&[Word::literal(&cycle.join(" "))], false);
        unit.construct = true;
        unit.findings.push(Finding::Destructive(Destructive {
            why: format!(
                "defines functions that call each other in a circle (`{}`), which can fork without limit (a fork bomb)",
                cycle.join("` → `")
            ),
            instead: "Do not define functions that call each other without an end; ask the operator to run it if it is intended.",
        }));
        out.push(unit);
    }
    for cmd in script.commands {
        command(cmd, depth, out);
    }
    for (_, redirect) in script.loose_redirects {
        let mut unit = Unit::new(&[Word::literal(&redirect.op), redirect.target.clone()], false);
        redirect_findings(&redirect, &mut unit);
        out.push(unit);
    }
}

/// Functions that call each other in a circle (`a(){ b|b& }; b(){ a|a& }`), as the circle's
/// names (`a b a`); a function calling itself is caught per command (see [`expand`]).
fn call_cycle(commands: &[SimpleCommand]) -> Option<Vec<String>> {
    use std::collections::BTreeMap;
    let mut calls: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for cmd in commands {
        if let (Some(caller), Some(name)) = (cmd.functions.last(), cmd.words.first())
            && !name.dynamic
            && name.text != *caller
        {
            calls.entry(caller.as_str()).or_default().push(name.text.as_str());
        }
    }
    // From each function, a breadth-first walk over the calls between defined functions (each
    // function visited once: linear per start, however the calls are wired); reaching the start
    // again is a circle, read back through the parents.
    for &start in calls.keys() {
        let mut parent: BTreeMap<&str, &str> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([start]);
        while let Some(at) = queue.pop_front() {
            for &next in calls.get(at).into_iter().flatten() {
                if next == start {
                    let mut chain = Vec::new();
                    let mut back = at;
                    while back != start {
                        chain.push(back.to_string());
                        back = parent.get(back).copied().unwrap_or(start);
                    }
                    chain.reverse();
                    let mut cycle = vec![start.to_string()];
                    cycle.extend(chain);
                    cycle.push(start.to_string());
                    return Some(cycle);
                }
                if calls.contains_key(next) && !parent.contains_key(next) {
                    parent.insert(next, at);
                    queue.push_back(next);
                }
            }
        }
    }
    None
}

fn redirect_findings(redirect: &Redirect, unit: &mut Unit) {
    if let Some(d) = destructive::check_redirect(redirect) {
        unit.findings.push(Finding::Destructive(d));
    }
    if redirect.writes && !redirect.target.dynamic && redirect.target.text.starts_with('/') {
        unit.write_targets.push(redirect.target.text.clone());
    }
}

/// One layer of a simple command: the command itself, or what a wrapper runs.
struct Layer {
    words: Vec<Word>,
    assignments: Vec<String>,
    stdin: Stdin,
    stdout_captured: bool,
    functions: Vec<String>,
    /// Wrappers above this layer.
    level: usize,
}

fn command(cmd: SimpleCommand, depth: usize, out: &mut Vec<Unit>) {
    let first = out.len();
    let layer = Layer {
        words: cmd.words,
        assignments: cmd.assignments,
        stdin: cmd.stdin,
        stdout_captured: cmd.stdout_captured,
        functions: cmd.functions,
        level: 0,
    };
    expand(layer, depth, out);
    // Redirections belong to the outermost layer, which was pushed first.
    if let Some(unit) = out.get_mut(first) {
        for redirect in &cmd.redirects {
            redirect_findings(redirect, unit);
        }
    }
}

fn expand(layer: Layer, depth: usize, out: &mut Vec<Unit>) {
    let Some(name) = layer.words.first() else { return };
    let mut unit = Unit::new(&layer.words, true);
    if layer.level > MAX_LAYERS {
        unit.findings.push(Finding::Unparsed("the command stacks too many wrappers to check".to_string()));
        out.push(unit);
        return;
    }
    if name.dynamic || name.glob {
        let why = if name.dynamic { "is only known when it runs" } else { "is a pattern the shell expands" };
        unit.findings.push(Finding::Dynamic(format!("runs a command whose name {why} (`{}`)", name.text)));
        out.push(unit);
        return;
    }
    if layer.functions.contains(&name.text) {
        unit.findings.push(Finding::Destructive(Destructive {
            why: format!(
                "calls the function `{}` from inside its own body, which can fork without limit (a fork bomb)",
                name.text
            ),
            instead: "Do not define functions that call themselves; ask the operator to run it if it is intended.",
        }));
    }
    if let Some(d) = destructive::check(&layer.words) {
        unit.findings.push(Finding::Destructive(d));
    }
    if let Some(what) = evaluated::builtin(&layer.words) {
        unit.findings.push(Finding::Evaluated(what));
    }
    if let Some(part) = destructive::dynamic_option(&layer.words) {
        unit.findings.push(Finding::Dynamic(format!(
            "has an argument that is only known when it runs (`{part}`) and could make it destructive"
        )));
    }
    unit.interactive = interactive::check(&layer.words, &layer.assignments, &layer.stdin, layer.stdout_captured);
    match wrappers::unwrap(&layer.words, &layer.stdin) {
        Unwrap::No => out.push(unit),
        Unwrap::Inner { words, assignments, full } => {
            unit.full = full;
            out.push(unit);
            let mut all = layer.assignments;
            all.extend(assignments);
            expand(Layer { words, assignments: all, level: layer.level + 1, ..layer }, depth, out);
        }
        Unwrap::Script { source, full } => {
            unit.full = full;
            if depth >= MAX_NESTING {
                unit.findings.push(Finding::Unparsed("shell strings are nested too deeply to check".to_string()));
                out.push(unit);
            } else {
                out.push(unit);
                analyze_source(&source, depth + 1, out);
            }
        }
        Unwrap::Dynamic { what, full } => {
            unit.full = full;
            unit.findings.push(Finding::Dynamic(what));
            out.push(unit);
        }
        Unwrap::Execs(execs) => {
            out.push(unit);
            for words in execs {
                let inner = Layer {
                    words,
                    assignments: Vec::new(),
                    stdin: Stdin::Inherit,
                    stdout_captured: layer.stdout_captured,
                    functions: layer.functions.clone(),
                    level: layer.level + 1,
                };
                expand(inner, depth, out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(src: &str) -> Vec<(String, bool)> {
        analyze(src).into_iter().map(|u| (u.text, u.full)).collect()
    }

    #[test]
    fn wrapper_layers_are_units() {
        let got = texts("sudo env X=1 timeout 5 rm -rf /tmp/x");
        let expected = [
            ("sudo env X=1 timeout 5 rm -rf /tmp/x", true),
            ("env X=1 timeout 5 rm -rf /tmp/x", false),
            ("timeout 5 rm -rf /tmp/x", false),
            ("rm -rf /tmp/x", true),
        ];
        assert_eq!(got, expected.map(|(t, f)| (t.to_string(), f)));
    }

    #[test]
    fn shell_strings_are_parsed_again() {
        let got = texts("bash -c 'ls && rm x'");
        assert_eq!(got.iter().map(|(t, _)| t.as_str()).collect::<Vec<_>>(), ["bash -c ls && rm x", "ls", "rm x"]);
    }

    #[test]
    fn nesting_is_bounded() {
        let mut cmd = "ls".to_string();
        for _ in 0..12 {
            cmd = format!("eval {}", cmd);
        }
        let units = analyze(&cmd);
        assert!(units.iter().any(|u| u.findings.iter().any(|f| matches!(f, Finding::Unparsed(_)))));
    }

    #[test]
    fn wrapper_stacking_is_bounded() {
        let cmd = format!("{}ls", "nohup ".repeat(5000));
        let units = analyze(&cmd);
        assert!(units.len() < 100);
        assert!(units.iter().any(|u| u.findings.iter().any(|f| matches!(f, Finding::Unparsed(_)))));
    }

    #[test]
    fn path_names_get_an_alternative_text() {
        let units = analyze("/usr/bin/curl x");
        assert_eq!(units[0].alt_text.as_deref(), Some("curl x"));
    }

    #[test]
    fn redirect_targets_are_recorded() {
        let units = analyze("echo x > /etc/hosts 2>/dev/sda");
        assert_eq!(units[0].write_targets, ["/etc/hosts", "/dev/sda"]);
        assert!(matches!(units[0].findings[0], Finding::Destructive(_)));
        let loose = analyze("{ echo; } > /dev/sda");
        assert!(loose.iter().any(|u| u.text == "> /dev/sda" && !u.findings.is_empty()));
    }
}
