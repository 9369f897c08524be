//! Turns a shell command line into the simple commands it would run, using tree-sitter-bash.
//!
//! The walk is deliberately generic: every `command` node anywhere in the tree (inside lists,
//! pipelines, compound statements, function bodies, substitutions, heredoc pipelines, ...) is a
//! command bash may execute, so all of them are collected.

use tree_sitter::{Node, Parser};

/// Deeper trees than this are refused rather than risking the stack on hostile input.
const MAX_DEPTH: usize = 256;

/// One shell word after quote removal.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Word {
    /// The word's value when static; for dynamic parts, their source text (`$HOME`, `$(cmd)`).
    pub text: String,
    /// Contains an expansion, substitution or brace expansion, so the real value is only known at run time.
    pub dynamic: bool,
    /// The word begins with something dynamic, so at run time it may turn into an option such as `-rf`.
    pub starts_dynamic: bool,
    /// Contains unquoted glob characters (`*`, `?`, `[`), which the shell may expand to file names.
    pub glob: bool,
}

impl Word {
    /// A static word, for words synthesized by the analyzer.
    pub(crate) fn literal(text: &str) -> Self {
        Word { text: text.to_string(), ..Word::default() }
    }
}

/// Where a command's standard input comes from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) enum Stdin {
    /// Whatever the tool gives the shell (`/dev/null` for the agent).
    #[default]
    Inherit,
    /// The previous stage of a pipeline.
    Pipe,
    /// A file (`< FILE`).
    File,
    /// A heredoc; `dynamic` when its body contains expansions.
    Heredoc { body: String, dynamic: bool },
    /// A here-string (`<<< WORD`).
    Herestring(Word),
}

/// One redirection of a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Redirect {
    /// The operator as written (`>`, `>>`, `2>`, `&>`, `<`, ...), descriptor included.
    pub op: String,
    pub target: Word,
    /// Opens the target for writing (`>`, `>>`, `&>`, `&>>`, `>|`, `<>`), as opposed to reading or dup'ing.
    pub writes: bool,
}

/// One simple command: words (name first), redirections and some context around it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct SimpleCommand {
    /// Names assigned before the command (`X=1 cmd`), which some checks care about (`GIT_EDITOR=...`).
    pub assignments: Vec<String>,
    pub words: Vec<Word>,
    pub redirects: Vec<Redirect>,
    pub stdin: Stdin,
    /// Standard output goes to a pipe or a file rather than the terminal.
    pub stdout_captured: bool,
    /// Names of the function definitions this command sits in (innermost last).
    pub functions: Vec<String>,
}

/// Everything found in one command line.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Script {
    pub commands: Vec<SimpleCommand>,
    /// Redirections of compound statements (`{ ...; } > FILE`) or of no command at all (`> FILE`),
    /// each with the source text of its statement.
    pub loose_redirects: Vec<(String, Redirect)>,
    /// Set when the text is not valid shell (tree-sitter ERROR or MISSING nodes, or too deep).
    pub error: Option<String>,
    /// Code the shell builds from strings while it runs (`${x@P}`, `$((x))`, `PS4=`).
    pub evaluated: Vec<super::evaluated::Construct>,
}

/// Parses `src` and collects its simple commands. Never fails: problems end up in `Script::error`.
pub(crate) fn parse(src: &str) -> Script {
    let mut parser = Parser::new();
    if parser.set_language(&tree_sitter_bash::LANGUAGE.into()).is_err() {
        return Script { error: Some("the shell grammar could not be loaded".to_string()), ..Script::default() };
    }
    let Some(tree) = parser.parse(src, None) else {
        return Script { error: Some("the parser gave up".to_string()), ..Script::default() };
    };
    let root = tree.root_node();
    let mut walker = Walker { src: src.as_bytes(), out: Script::default(), functions: Vec::new(), depth: 0 };
    if root.has_error() {
        walker.out.error = Some(describe_error(root, src.as_bytes()));
    }
    walker.walk(root, &Ctx::default());
    walker.out.evaluated = super::evaluated::constructs(root, src.as_bytes());
    walker.out
}

fn describe_error(root: Node, src: &[u8]) -> String {
    let mut stack = vec![root];
    while let Some(node) = stack.pop() {
        let pos = node.start_position();
        if node.is_missing() {
            return format!("`{}` is missing at line {}, column {}", node.kind(), pos.row + 1, pos.column + 1);
        }
        if node.is_error() {
            let text: String = node.utf8_text(src).unwrap_or("").chars().take(30).collect();
            return format!("unexpected `{}` at line {}, column {}", text.trim(), pos.row + 1, pos.column + 1);
        }
        let mut cursor = node.walk();
        let children: Vec<Node> = node.children(&mut cursor).collect();
        // Reverse so the first error in source order is popped first.
        stack.extend(children.into_iter().rev());
    }
    "the syntax is not valid".to_string()
}

#[derive(Debug, Clone, Default)]
struct Ctx {
    stdin: Stdin,
    stdout_captured: bool,
}

struct Walker<'s> {
    src: &'s [u8],
    out: Script,
    functions: Vec<String>,
    depth: usize,
}

impl Walker<'_> {
    fn text(&self, node: Node) -> String {
        node.utf8_text(self.src).unwrap_or("").to_string()
    }

    fn walk(&mut self, node: Node, ctx: &Ctx) {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            if self.out.error.is_none() {
                self.out.error = Some("the command is nested too deeply".to_string());
            }
        } else {
            self.walk_inner(node, ctx);
        }
        self.depth -= 1;
    }

    fn walk_inner(&mut self, node: Node, ctx: &Ctx) {
        match node.kind() {
            "command" => self.command(node, ctx, Vec::new(), Vec::new()),
            "declaration_command" | "unset_command" => self.declaration(node, ctx),
            "redirected_statement" => self.redirected(node, ctx),
            "pipeline" => self.pipeline(node, ctx),
            "function_definition" => self.function(node),
            // Substitutions run in their own context: their output is captured, their input is the shell's.
            "command_substitution" | "process_substitution" => {
                let inner = Ctx { stdin: Stdin::Inherit, stdout_captured: true };
                self.walk_children(node, &inner);
            }
            "heredoc_redirect" => {
                let mut ctx = Ctx::default();
                self.heredoc(node, &mut Vec::new(), &mut Vec::new(), &mut ctx);
            }
            _ => self.walk_children(node, ctx),
        }
    }

    fn walk_children(&mut self, node: Node, ctx: &Ctx) {
        let mut cursor = node.walk();
        let children: Vec<Node> = node.named_children(&mut cursor).collect();
        for child in children {
            self.walk(child, ctx);
        }
    }

    fn pipeline(&mut self, node: Node, ctx: &Ctx) {
        let mut cursor = node.walk();
        let stages: Vec<Node> = node.named_children(&mut cursor).collect();
        let last = stages.len().saturating_sub(1);
        for (i, stage) in stages.into_iter().enumerate() {
            let stage_ctx = Ctx {
                stdin: if i > 0 { Stdin::Pipe } else { ctx.stdin.clone() },
                stdout_captured: i < last || ctx.stdout_captured,
            };
            self.walk(stage, &stage_ctx);
        }
    }

    fn function(&mut self, node: Node) {
        let name = node.child_by_field_name("name").map(|n| self.text(n)).unwrap_or_default();
        self.functions.push(name);
        let mut cursor = node.walk();
        let children: Vec<Node> = node.named_children(&mut cursor).collect();
        for child in children {
            if node.child_by_field_name("name") != Some(child) {
                self.walk(child, &Ctx::default());
            }
        }
        self.functions.pop();
    }

    /// `export`, `local`, `declare`, `readonly`, `typeset`, `unset`: recorded as ordinary commands.
    fn declaration(&mut self, node: Node, ctx: &Ctx) {
        let mut words = Vec::new();
        let mut cursor = node.walk();
        let children: Vec<Node> = node.children(&mut cursor).collect();
        for child in children {
            if child.is_named() {
                words.push(self.word(child));
                self.walk(child, &Ctx::default());
            } else if words.is_empty() {
                words.push(Word::literal(&self.text(child)));
            }
        }
        self.push(words, Vec::new(), Vec::new(), ctx);
    }

    fn redirected(&mut self, node: Node, ctx: &Ctx) {
        let body = node.child_by_field_name("body");
        let mut redirects = Vec::new();
        let mut extra_args = Vec::new();
        let mut inner_ctx = ctx.clone();
        let mut cursor = node.walk();
        let children: Vec<Node> = node.named_children(&mut cursor).collect();
        for child in children {
            if Some(child) == body {
                continue;
            }
            self.redirect(child, &mut redirects, &mut extra_args, &mut inner_ctx);
        }
        match body {
            Some(b) if b.kind() == "command" => self.command(b, &inner_ctx, redirects, extra_args),
            Some(b) => {
                if !extra_args.is_empty() && self.out.error.is_none() {
                    self.out.error = Some("words after a redirection of a compound command".to_string());
                }
                self.walk(b, &inner_ctx);
                let owner = self.text(node);
                self.out.loose_redirects.extend(redirects.into_iter().map(|r| (owner.clone(), r)));
            }
            None => {
                let owner = self.text(node);
                self.out.loose_redirects.extend(redirects.into_iter().map(|r| (owner.clone(), r)));
            }
        }
    }

    /// Reads one redirect node; updates the context the redirected command runs in.
    fn redirect(&mut self, node: Node, redirects: &mut Vec<Redirect>, extra_args: &mut Vec<Word>, ctx: &mut Ctx) {
        match node.kind() {
            "file_redirect" => {
                let mut op = String::new();
                let mut targets = Vec::new();
                let mut cursor = node.walk();
                let children: Vec<Node> = node.children(&mut cursor).collect();
                for child in children {
                    if child.kind() == "file_descriptor" {
                        op.push_str(&self.text(child));
                    } else if !child.is_named() {
                        op.push_str(child.kind());
                    } else {
                        self.walk(child, &Ctx::default());
                        targets.push(self.word(child));
                    }
                }
                let mut targets = targets.into_iter();
                let Some(target) = targets.next() else { return };
                // tree-sitter-bash attaches words after `> FILE` to the redirect; bash treats them as arguments.
                extra_args.extend(targets);
                let bare = op.trim_start_matches(|c: char| c.is_ascii_digit());
                let dup = matches!(bare, ">&" | "<&" | ">&-" | "<&-")
                    && (target.text.chars().all(|c| c.is_ascii_digit()) || target.text == "-");
                let writes = !dup && matches!(bare, ">" | ">>" | "&>" | "&>>" | ">|" | "<>" | ">&");
                let fd_is_stdout = bare == op || op.starts_with('1') || bare.starts_with('&');
                if writes && fd_is_stdout {
                    ctx.stdout_captured = true;
                }
                if bare == "<" && (bare == op || op.starts_with('0')) {
                    ctx.stdin = Stdin::File;
                }
                redirects.push(Redirect { op, target, writes });
            }
            "heredoc_redirect" => self.heredoc(node, redirects, extra_args, ctx),
            "herestring_redirect" => {
                let mut cursor = node.walk();
                let children: Vec<Node> = node.named_children(&mut cursor).collect();
                if let Some(value) = children.first() {
                    self.walk(*value, &Ctx::default());
                    ctx.stdin = Stdin::Herestring(self.word(*value));
                }
            }
            _ => self.walk(node, &Ctx::default()),
        }
    }

    /// Reads a heredoc into the context of its command, and walks what hangs off it: redirects written
    /// after `<<EOF`, a pipeline it feeds, commands chained after it, substitutions in its body.
    fn heredoc(&mut self, node: Node, redirects: &mut Vec<Redirect>, extra_args: &mut Vec<Word>, ctx: &mut Ctx) {
        let mut body = String::new();
        let mut dynamic = false;
        let mut piped = false;
        let quoted = node
            .children(&mut node.walk())
            .find(|c| c.kind() == "heredoc_start")
            .is_some_and(|s| self.text(s).contains(['\'', '"', '\\']));
        let mut cursor = node.walk();
        let children: Vec<Node> = node.named_children(&mut cursor).collect();
        for child in children {
            match child.kind() {
                "heredoc_body" => {
                    body = self.text(child);
                    let mut c = child.walk();
                    dynamic = child.named_children(&mut c).any(|n| n.kind() != "heredoc_content");
                    self.walk(child, &Ctx::default());
                }
                "heredoc_start" | "heredoc_end" | "file_descriptor" => {}
                "file_redirect" | "herestring_redirect" => self.redirect(child, redirects, extra_args, ctx),
                "pipeline" => {
                    // `cmd <<EOF | next`: the stages here read the output of the heredoc's command.
                    piped = true;
                    let ctx = Ctx { stdin: Stdin::Pipe, stdout_captured: false };
                    self.pipeline(child, &ctx);
                }
                _ => self.walk(child, &Ctx::default()),
            }
        }
        if !quoted {
            body = unescape_heredoc(&body);
        }
        ctx.stdin = Stdin::Heredoc { body, dynamic };
        ctx.stdout_captured |= piped;
    }

    fn command(&mut self, node: Node, ctx: &Ctx, mut redirects: Vec<Redirect>, extra_args: Vec<Word>) {
        let mut ctx = ctx.clone();
        let mut assignments = Vec::new();
        let mut words = Vec::new();
        let mut cursor = node.walk();
        let children: Vec<Node> = node.named_children(&mut cursor).collect();
        let mut unused = Vec::new();
        for child in children {
            match child.kind() {
                "variable_assignment" => {
                    if let Some(name) = child.child_by_field_name("name") {
                        assignments.push(self.text(name));
                    }
                    self.walk(child, &Ctx::default());
                }
                "file_redirect" | "heredoc_redirect" | "herestring_redirect" => {
                    self.redirect(child, &mut redirects, &mut unused, &mut ctx);
                }
                "command_name" => {
                    self.walk(child, &Ctx::default());
                    // command_name wraps the real word node.
                    let mut c = child.walk();
                    let inner: Vec<Node> = child.named_children(&mut c).collect();
                    match inner.as_slice() {
                        [one] => words.push(self.word(*one)),
                        _ => words.push(self.word(child)),
                    }
                }
                _ => {
                    self.walk(child, &Ctx::default());
                    words.push(self.word(child));
                }
            }
        }
        words.extend(unused);
        words.extend(extra_args);
        if words.is_empty() {
            let owner = self.text(node);
            self.out.loose_redirects.extend(redirects.into_iter().map(|r| (owner.clone(), r)));
            return;
        }
        self.push(words, assignments, redirects, &ctx);
    }

    fn push(&mut self, words: Vec<Word>, assignments: Vec<String>, redirects: Vec<Redirect>, ctx: &Ctx) {
        self.out.commands.push(SimpleCommand {
            assignments,
            words,
            redirects,
            stdin: ctx.stdin.clone(),
            stdout_captured: ctx.stdout_captured,
            functions: self.functions.clone(),
        });
    }

    fn word(&self, node: Node) -> Word {
        let mut b = WordBuilder::default();
        self.build(node, &mut b);
        b.finish()
    }

    fn build(&self, node: Node, b: &mut WordBuilder) {
        let text = self.text(node);
        match node.kind() {
            "word" => b.unquoted(&text),
            "raw_string" => b.quoted(text.strip_prefix('\'').and_then(|t| t.strip_suffix('\'')).unwrap_or(&text)),
            "ansi_c_string" => {
                let inner = text.strip_prefix("$'").and_then(|t| t.strip_suffix('\'')).unwrap_or(&text);
                b.quoted(&decode_ansi_c(inner));
            }
            "string" | "translated_string" => {
                let mut cursor = node.walk();
                let children: Vec<Node> = node.children(&mut cursor).collect();
                for child in children {
                    match child.kind() {
                        "\"" | "$\"" => {}
                        "string_content" => b.quoted(&unescape_double_quoted(&self.text(child))),
                        "string" => self.build(child, b),
                        _ if child.is_named() => b.dynamic(&self.text(child)),
                        _ => b.quoted(&self.text(child)),
                    }
                }
            }
            "concatenation" => {
                let mut cursor = node.walk();
                let children: Vec<Node> = node.children(&mut cursor).collect();
                for child in children {
                    if child.is_named() {
                        self.build(child, b);
                    } else {
                        b.unquoted(&self.text(child));
                    }
                }
            }
            "number" | "variable_name" if node.named_child_count() == 0 => b.unquoted(&text),
            "variable_assignment" => {
                match node.child_by_field_name("name") {
                    Some(name) => b.unquoted(&self.text(name)),
                    None => b.dynamic(&text),
                }
                b.quoted("=");
                if let Some(value) = node.child_by_field_name("value") {
                    self.build(value, b);
                }
            }
            "extglob_pattern" => b.unquoted(&text),
            // Expansions, substitutions, arrays, brace ranges, anything unknown: only known at run time.
            _ => b.dynamic(&text),
        }
    }
}

/// Accumulates a word's value, tracking which characters were unquoted (they may be glob or brace syntax).
#[derive(Default)]
struct WordBuilder {
    text: String,
    /// Unquoted characters as written; quoted or escaped ones are replaced by `_`.
    unquoted_shape: String,
    dynamic: bool,
    starts_dynamic: bool,
}

impl WordBuilder {
    fn unquoted(&mut self, raw: &str) {
        let mut chars = raw.chars();
        while let Some(c) = chars.next() {
            if c == '\\' {
                match chars.next() {
                    Some('\n') | None => {}
                    Some(escaped) => {
                        self.text.push(escaped);
                        self.unquoted_shape.push('_');
                    }
                }
            } else {
                self.text.push(c);
                self.unquoted_shape.push(c);
            }
        }
    }

    fn quoted(&mut self, value: &str) {
        self.text.push_str(value);
        self.unquoted_shape.extend(value.chars().map(|_| '_'));
    }

    fn dynamic(&mut self, source: &str) {
        if self.text.is_empty() {
            self.starts_dynamic = true;
        }
        self.dynamic = true;
        self.text.push_str(source);
        self.unquoted_shape.extend(source.chars().map(|_| '_'));
    }

    fn finish(self) -> Word {
        let shape = &self.unquoted_shape;
        let glob = shape.contains(['*', '?', '[']) || shape.contains("@(") || shape.contains("!(");
        // Brace expansion changes the words themselves (`{rm,-rf,/}` is three words), so it counts as dynamic.
        let brace = has_brace_expansion(shape);
        Word { text: self.text, dynamic: self.dynamic || brace, starts_dynamic: self.starts_dynamic || brace, glob }
    }
}

fn has_brace_expansion(shape: &str) -> bool {
    let mut rest = shape;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else { return false };
        let inside = &after[..close];
        if inside.contains(',') || inside.contains("..") {
            return true;
        }
        rest = after;
    }
    false
}

/// Backslash escapes that stay special inside double quotes.
fn unescape_double_quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.peek() {
                Some('$' | '`' | '"' | '\\') => {
                    if let Some(next) = chars.next() {
                        out.push(next);
                    }
                }
                Some('\n') => {
                    chars.next();
                }
                _ => out.push(c),
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// An unquoted heredoc body undergoes the same backslash processing as a double-quoted string.
fn unescape_heredoc(s: &str) -> String {
    unescape_double_quoted(s)
}

/// Decodes the escapes of a `$'...'` string, so `$'\x72m'` is seen as `rm`.
pub(crate) fn decode_ansi_c(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let Some(e) = chars.next() else {
            out.push('\\');
            break;
        };
        let simple = match e {
            'n' => Some('\n'),
            't' => Some('\t'),
            'r' => Some('\r'),
            'a' => Some('\u{7}'),
            'b' => Some('\u{8}'),
            'e' | 'E' => Some('\u{1b}'),
            'f' => Some('\u{c}'),
            'v' => Some('\u{b}'),
            '\\' | '\'' | '"' | '?' => Some(e),
            _ => None,
        };
        if let Some(ch) = simple {
            out.push(ch);
            continue;
        }
        let (radix, max) = match e {
            'x' => (16, 2),
            'u' => (16, 4),
            'U' => (16, 8),
            '0'..='7' => (8, 2),
            'c' => {
                if let Some(ctrl) = chars.next() {
                    out.push(char::from((ctrl as u8) & 0x1f));
                }
                continue;
            }
            _ => {
                out.push('\\');
                out.push(e);
                continue;
            }
        };
        let mut digits = String::new();
        if radix == 8 {
            digits.push(e);
        }
        while digits.len() < max + usize::from(radix == 8) {
            match chars.peek() {
                Some(d) if d.is_digit(radix) => {
                    digits.push(*d);
                    chars.next();
                }
                _ => break,
            }
        }
        match u32::from_str_radix(&digits, radix).ok().and_then(char::from_u32) {
            Some(ch) if !digits.is_empty() => out.push(ch),
            _ => {
                out.push('\\');
                out.push(e);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(src: &str) -> Vec<String> {
        parse(src)
            .commands
            .iter()
            .map(|c| c.words.iter().map(|w| w.text.as_str()).collect::<Vec<_>>().join(" "))
            .collect()
    }

    #[test]
    fn collects_commands_across_operators() {
        assert_eq!(names("a && b || c; d & e\nf | g"), ["a", "b", "c", "d", "e", "f", "g"]);
    }

    #[test]
    fn collects_substitutions_everywhere() {
        let got = names("X=$(a) echo \"$(b)\" `c` <(d) > \"$(e)\"; export Y=$(f); for i in $(g); do h; done");
        for expected in ["a", "b", "c", "d", "e", "f", "g", "h"] {
            assert!(got.iter().any(|g| g == expected), "{expected} missing from {got:?}");
        }
    }

    #[test]
    fn removes_quotes_from_static_words() {
        let script = parse(r#""r""m" 'a b' "c\"d" e\ f \rm $'\x72m'"#);
        let words = &script.commands[0].words;
        let texts: Vec<&str> = words.iter().map(|w| w.text.as_str()).collect();
        assert_eq!(texts, ["rm", "a b", "c\"d", "e f", "rm", "rm"]);
        assert!(words.iter().all(|w| !w.dynamic));
    }

    #[test]
    fn marks_dynamic_words() {
        let script = parse("echo $X \"a$Y\" $(z) {a,b} plain *.rs");
        let words = &script.commands[1].words;
        let flags: Vec<(bool, bool)> = words.iter().map(|w| (w.dynamic, w.starts_dynamic)).collect();
        assert_eq!(
            flags,
            [(false, false), (true, true), (true, false), (true, true), (true, true), (false, false), (false, false)]
        );
        assert!(words[6].glob);
    }

    #[test]
    fn records_redirects() {
        let script = parse("echo a > out 2>&1 >> log < in");
        let cmd = &script.commands[0];
        let r: Vec<(&str, &str, bool)> =
            cmd.redirects.iter().map(|r| (r.op.as_str(), r.target.text.as_str(), r.writes)).collect();
        assert_eq!(r, [(">", "out", true), ("2>&", "1", false), (">>", "log", true), ("<", "in", false)]);
        assert_eq!(cmd.stdin, Stdin::File);
        assert!(cmd.stdout_captured);
    }

    #[test]
    fn words_after_a_redirect_are_arguments() {
        assert_eq!(names("echo > f x y"), ["echo x y"]);
    }

    #[test]
    fn heredoc_feeds_commands() {
        let script = parse("bash <<'EOF'\nrm -rf /\nEOF\n");
        assert_eq!(script.commands[0].stdin, Stdin::Heredoc { body: "rm -rf /\n".to_string(), dynamic: false });
        let piped = parse("cat <<EOF | sh\n$(id)\nEOF\n");
        assert_eq!(names("cat <<EOF | sh\n$(id)\nEOF\n"), ["sh", "id", "cat"]);
        assert_eq!(piped.commands[0].stdin, Stdin::Pipe);
    }

    #[test]
    fn redirects_after_a_heredoc_belong_to_the_command() {
        let script = parse("cat <<EOF > /etc/x\nhi\nEOF\n");
        let cmd = &script.commands[0];
        assert_eq!(cmd.redirects.len(), 1);
        assert_eq!(cmd.redirects[0].target.text, "/etc/x");
        assert!(cmd.stdout_captured);
    }

    #[test]
    fn records_function_context() {
        let script = parse("f() { g | f & }; f");
        let inner: Vec<&[String]> = script.commands.iter().map(|c| c.functions.as_slice()).collect();
        assert_eq!(inner, [&["f".to_string()][..], &["f".to_string()][..], &[][..]]);
    }

    #[test]
    fn reports_parse_errors() {
        assert!(parse("echo \"abc").error.is_some());
        assert!(parse("if true; then").error.is_some());
        assert!(parse("echo ok").error.is_none());
    }

    #[test]
    fn refuses_absurd_nesting() {
        let deep = format!("{}echo{}", "(".repeat(400), ")".repeat(400));
        assert!(parse(&deep).error.is_some());
    }

    #[test]
    fn decodes_ansi_c() {
        assert_eq!(decode_ansi_c(r"a\tb\x41\101\u00e9\\"), "a\tbAA\u{e9}\\");
    }
}
