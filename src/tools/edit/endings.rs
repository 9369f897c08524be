//! The line ending edit writes new_string's line breaks in: the file's own, when it has one
//! kind. old_string is still matched byte for byte (the contract forbids normalising it); this is
//! only about the text written. A careful user's editor keeps a CRLF file CRLF when they type a
//! line: a model that writes `\n` in new_string for a CRLF file (the common case: it is what
//! models write) would otherwise leave a file with mixed endings, silently.

use std::borrow::Cow;

use super::{Member, Plan};

/// A file's one line ending, when it has only one kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Endings {
    Lf,
    Crlf,
}

impl Endings {
    /// The line ending of every line break of `text`; `None` for none, or a mix.
    pub(super) fn of(text: &str) -> Option<Endings> {
        let b = text.as_bytes();
        let mut crlf = false;
        let mut lf = false;
        for i in memchr::memchr_iter(b'\n', b) {
            if i > 0 && b[i - 1] == b'\r' {
                crlf = true;
            } else {
                lf = true;
            }
            if crlf && lf {
                return None;
            }
        }
        match (crlf, lf) {
            (true, false) => Some(Endings::Crlf),
            (false, true) => Some(Endings::Lf),
            _ => None,
        }
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            Endings::Lf => "LF (\\n)",
            Endings::Crlf => "CRLF (\\r\\n)",
        }
    }

    /// A bash command that turns a file's line endings into the other kind.
    pub(super) fn convert_away(self) -> &'static str {
        match self {
            Endings::Crlf => "`sed -i 's/\\r$//' FILE` for LF",
            Endings::Lf => "`sed -i 's/$/\\r/' FILE` for CRLF",
        }
    }

    /// The plan with each new_string's line breaks written in this ending, and which members
    /// changed.
    pub(super) fn adapt(self, plan: &Plan) -> (std::borrow::Cow<'_, Plan>, Vec<usize>) {
        let convert = |s: &str| -> Option<String> {
            match self {
                Endings::Crlf => {
                    let bare =
                        s.bytes().enumerate().any(|(i, c)| c == b'\n' && (i == 0 || s.as_bytes()[i - 1] != b'\r'));
                    bare.then(|| s.replace("\r\n", "\n").replace('\n', "\r\n"))
                }
                Endings::Lf => s.contains("\r\n").then(|| s.replace("\r\n", "\n")),
            }
        };
        let mut changed = Vec::new();
        let mut members = Vec::new();
        for (i, m) in plan.members.iter().enumerate() {
            match convert(&m.new) {
                Some(new) => {
                    changed.push(i);
                    members.push(Member { new, ..m.clone() });
                }
                None => members.push(m.clone()),
            }
        }
        if changed.is_empty() {
            return (Cow::Borrowed(plan), changed);
        }
        (Cow::Owned(Plan { members, batch: plan.batch }), changed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(old: &str, new: &str) -> Member {
        Member { old: old.into(), new: new.into(), all: false }
    }

    fn plan(members: Vec<Member>) -> Plan {
        let batch = members.len() > 1;
        Plan { members, batch }
    }

    #[test]
    fn line_endings_of_the_file() {
        assert_eq!(Endings::of("a\r\nb\r\n"), Some(Endings::Crlf));
        assert_eq!(Endings::of("a\nb"), Some(Endings::Lf));
        assert_eq!(Endings::of("a\r\nb\n"), None, "mixed: new_string is written as given");
        assert_eq!(Endings::of("one line"), None);
        let p = plan(vec![m("x", "a\nb\r\nc\n"), m("y", "no break")]);
        let (crlf, changed) = Endings::Crlf.adapt(&p);
        assert_eq!(crlf.members[0].new, "a\r\nb\r\nc\r\n");
        assert_eq!(changed, vec![0]);
        let (lf, changed) = Endings::Lf.adapt(&p);
        assert_eq!((lf.members[0].new.as_str(), changed), ("a\nb\nc\n", vec![0]));
        // A lone CR is not a line break: left alone.
        let p = plan(vec![m("x", "10%\r100%")]);
        assert!(Endings::Crlf.adapt(&p).1.is_empty());
        assert!(Endings::Lf.adapt(&p).1.is_empty());
    }
}
