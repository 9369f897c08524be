//! The terminal's approval prompt: shows the call's description, the command (or path) and why
//! it needs confirmation, and takes once / always for this exact command / deny.

use std::fs::{File, OpenOptions};
use std::io::{BufRead as _, BufReader, IsTerminal as _, Write as _};
use std::sync::Mutex;

use abhed::approval::gate::{Answer, Approver, NoOperator, Question};
use abhed::approval::{Decision, ReasonKind};

/// Asks on the controlling terminal (/dev/tty), so it works while stdin and stdout are pipes.
pub struct TtyApprover {
    tty: Mutex<(BufReader<File>, File)>,
}

impl TtyApprover {
    /// The terminal's approver when there is a terminal and stderr (where progress goes) is on
    /// it; otherwise nobody can answer and what needs confirmation is denied.
    pub fn for_this_process() -> Box<dyn Approver> {
        if !std::io::stderr().is_terminal() {
            return Box::new(NoOperator);
        }
        match (File::open("/dev/tty"), OpenOptions::new().write(true).open("/dev/tty")) {
            (Ok(r), Ok(w)) => Box::new(TtyApprover { tty: Mutex::new((BufReader::new(r), w)) }),
            _ => Box::new(NoOperator),
        }
    }
}

impl Approver for TtyApprover {
    fn ask(&self, q: &Question<'_>) -> Option<Answer> {
        let mut tty = self.tty.lock().ok()?;
        let (reader, writer) = &mut *tty;
        let mut text = format!("\n── approval needed ── {}: {}\n", q.tool, q.description);
        // A command is shown as typed; a plan (plan mode) as the document it is.
        let prefix = if q.tool == "bash" { "$" } else { "|" };
        for line in q.subject.lines() {
            text.push_str(&format!("  {prefix} {line}\n"));
        }
        // Only the reasons that raised the question, in the operator's terms (the messages are
        // written for the model, which is told what it may do instead).
        for r in q.reasons.iter().filter(|r| r.decision == Decision::Ask) {
            let why = match &r.kind {
                ReasonKind::AskRule(p) => format!("`{}` matches the ask rule `{p}`", r.command),
                ReasonKind::ModeAsk => format!("`{}` matches no allow rule (mode \"ask\")", r.command),
                _ => r.message.split(", so it needs").next().unwrap_or(&r.message).to_string(),
            };
            text.push_str(&format!("  why: {why}\n"));
        }
        let choices = if q.offer_always {
            "[o]nce, [a]lways for this exact command, [d]eny"
        } else {
            "[o]nce, [d]eny (a destructive command is confirmed each time)"
        };
        loop {
            let _ = write!(writer, "{text}Allow? {choices}: ");
            let _ = writer.flush();
            let mut line = String::new();
            // End of input or an error: nobody is answering.
            if reader.read_line(&mut line).ok()? == 0 {
                return None;
            }
            match line.trim().to_ascii_lowercase().as_str() {
                "o" | "once" | "y" | "yes" => return Some(Answer::Once),
                "a" | "always" if q.offer_always => return Some(Answer::Always),
                "d" | "deny" | "n" | "no" => return Some(Answer::Deny),
                _ => text = String::from("Please answer with one of the letters.\n"),
            }
        }
    }
}
