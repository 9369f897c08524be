//! What a repository's `abhed.toml` may set: each key's rule, and the narrowing of a
//! repository table against the user's values. A value that would widen is left out and
//! reported; a value equal to the user's changes nothing and passes.

use std::path::Path;

use serde_json::Value as Json;
use toml::Value;

use super::{SPECIAL_BITS, parse_mode, user_config_display};

/// How a key may come from a repository.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Rule {
    /// Only the user config sets it; the text says why.
    UserOnly(&'static str),
    /// A limit: a repository may lower it.
    Lower,
    /// A limit whose unset value means this number: a repository may lower it.
    LowerFrom(u64),
    /// A budget where 0 means no limit: a repository may set a lower, non-zero one.
    Budget,
    /// A reserve: a repository may raise it.
    Raise,
    /// A switch that grants something when on: a repository may turn it off.
    OffOnly,
    /// Permission bits: a repository may take bits away, and never add setuid, setgid or sticky.
    Mode,
    /// A list a repository adds to (ignore patterns narrow what glob and grep show).
    Add,
}

const WIDEN: &str = "a repository cannot widen its own access";
const MODEL: &str = "the model and how it runs are the operator's choice (an endpoint would carry the workspace's files off the machine)";
const SANDBOX: &str = "the programs the sandbox is built from, and what of the host it sees, are the operator's choice";
const GATE: &str = "a repository cannot lower the bar for the model that works on it";
const UNCLASSIFIED: &str = "it is not a key a repository may set";

/// Every key of every table (but `[approval]`, which the policy layers itself). A key missing
/// here is user-only; a test checks that every key of `Config` is listed.
pub(super) const RULES: &[(&str, &str, Rule)] = &[
    ("workspace", "extra_roots", Rule::UserOnly(WIDEN)),
    ("workspace", "ignore", Rule::Add),
    ("workspace", "allow_system_dirs", Rule::UserOnly("only the operator may share a system directory with the VM")),
    ("read", "max_file_bytes", Rule::Lower),
    ("read", "max_output_chars", Rule::Lower),
    ("write", "create_parent_dirs", Rule::OffOnly),
    ("write", "file_mode", Rule::Mode),
    ("write", "allow_special_bits", Rule::UserOnly("only the operator may allow setuid, setgid or sticky files")),
    ("model", "path", Rule::UserOnly(MODEL)),
    // The llama adapter's default window: the training context, at most 8192.
    ("model", "n_ctx", Rule::LowerFrom(8192)),
    ("model", "n_batch", Rule::Lower),
    ("model", "n_threads", Rule::UserOnly(MODEL)),
    ("model", "kv_type", Rule::UserOnly(MODEL)),
    ("model", "chat_template", Rule::UserOnly(MODEL)),
    ("model", "protocol", Rule::UserOnly(MODEL)),
    ("model", "temperature", Rule::UserOnly(MODEL)),
    ("model", "seed", Rule::UserOnly(MODEL)),
    ("model", "max_reply_tokens", Rule::Lower),
    ("model", "prompt_cache", Rule::OffOnly),
    ("model", "parallel", Rule::Lower),
    ("model", "endpoint", Rule::UserOnly(MODEL)),
    ("model", "endpoint_model", Rule::UserOnly(MODEL)),
    ("model", "api_key_env", Rule::UserOnly(MODEL)),
    ("model", "connect_timeout_s", Rule::Lower),
    ("model", "turn_timeout_s", Rule::Lower),
    ("run", "max_turns", Rule::Lower),
    ("run", "max_tokens", Rule::Lower),
    ("run", "max_wall_s", Rule::Budget),
    ("run", "working_budget", Rule::Raise),
    ("run", "repeat_limit", Rule::Budget),
    ("run", "first_turn_acts", Rule::UserOnly(MODEL)),
    ("run", "act_after_error", Rule::UserOnly(MODEL)),
    ("run", "check_answers", Rule::UserOnly(MODEL)),
    ("run", "resample_repeats", Rule::UserOnly(MODEL)),
    ("run", "act_until_change", Rule::UserOnly(MODEL)),
    ("run", "given_calls", Rule::UserOnly(MODEL)),
    ("run", "given_check", Rule::UserOnly(MODEL)),
    ("task", "max_concurrent", Rule::Lower),
    ("task", "max_turns", Rule::Lower),
    ("task", "summary_tokens", Rule::Lower),
    ("task", "nested", Rule::OffOnly),
    ("conformance", "require", Rule::UserOnly(GATE)),
    ("conformance", "min_pass_rate", Rule::UserOnly(GATE)),
    ("conformance", "min_tool_pass_rate", Rule::UserOnly(GATE)),
    ("conformance", "min_call_validity", Rule::UserOnly(GATE)),
    ("conformance", "min_recovery_rate", Rule::UserOnly(GATE)),
    ("sandbox", "accel", Rule::UserOnly(SANDBOX)),
    ("sandbox", "memory_mib", Rule::Lower),
    ("sandbox", "cpus", Rule::Lower),
    ("sandbox", "share_host_usr", Rule::OffOnly),
    ("sandbox", "host_readonly", Rule::UserOnly(SANDBOX)),
    ("sandbox", "qemu", Rule::UserOnly(SANDBOX)),
    ("sandbox", "image_dir", Rule::UserOnly(SANDBOX)),
    ("sandbox", "boot_timeout_s", Rule::Lower),
    ("sandbox", "disk_quota_mib", Rule::Lower),
    ("sandbox", "share_mode", Rule::UserOnly(SANDBOX)),
    ("sandbox", "checkpoint_mib", Rule::UserOnly("what undo can put back is the operator's choice")),
];

pub(super) fn rule(table: &str, key: &str) -> Rule {
    RULES.iter().find(|(t, k, _)| *t == table && *k == key).map_or(Rule::UserOnly(UNCLASSIFIED), |r| r.2)
}

/// What is left of a repository table, and what was not.
pub(super) struct Narrowed {
    pub accepted: toml::Table,
    pub warnings: Vec<String>,
    /// `workspace.ignore` patterns the repository added.
    pub ignore: Vec<String>,
}

/// Keep the keys of `ws` that only narrow the user's values (`user`: the effective config of
/// the defaults and the user config, as JSON).
pub(super) fn narrow(user: &Json, ws: toml::Table, ws_path: &Path) -> Narrowed {
    let mut out = Narrowed { accepted: toml::Table::new(), warnings: Vec::new(), ignore: Vec::new() };
    for (table, section) in ws {
        let Value::Table(section) = section else { continue };
        for (key, value) in section {
            let mine = &user[table.as_str()][key.as_str()];
            let rule = rule(&table, &key);
            if rule == Rule::Add
                && let Value::Array(items) = &value
            {
                out.ignore.extend(items.iter().filter_map(|v| v.as_str().map(str::to_string)));
            }
            match verdict(rule, &value, mine) {
                Ok(()) => {
                    let entry = out.accepted.entry(table.clone()).or_insert_with(|| Value::Table(toml::Table::new()));
                    if let Value::Table(t) = entry {
                        t.insert(key, value);
                    }
                }
                Err(why) => out.warnings.push(format!(
                    "ignored `{table}.{key} = {value}` in {}: {why}. Set it in the user config ({}) if it should apply.",
                    ws_path.display(),
                    user_config_display()
                )),
            }
        }
    }
    out
}

/// `Ok` when `value` narrows (or equals) `mine`; else why not, with the value that stays.
fn verdict(rule: Rule, value: &Value, mine: &Json) -> Result<(), String> {
    if serde_json::to_value(value).is_ok_and(|v| &v == mine) {
        return Ok(());
    }
    let shown = match mine {
        Json::Null => "unset".to_string(),
        v => v.to_string(),
    };
    let int = value.as_integer().and_then(|v| u64::try_from(v).ok());
    let lower = |m: Option<u64>| matches!((int, m), (Some(v), Some(m)) if v <= m);
    let (ok, why) = match rule {
        Rule::UserOnly(why) => (false, format!("only the user config sets it ({why})")),
        Rule::Add => (true, String::new()),
        Rule::Lower => (lower(mine.as_u64()), "a repository may only lower this limit".into()),
        Rule::LowerFrom(unset) => {
            (lower(mine.as_u64().or(mine.is_null().then_some(unset))), "a repository may only lower this limit".into())
        }
        Rule::Budget => (
            match (int, mine.as_u64()) {
                (Some(0), _) => false,
                (Some(v), Some(m)) => m == 0 || v <= m,
                _ => false,
            },
            "a repository may only tighten this budget (0 means no limit)".into(),
        ),
        Rule::Raise => (
            matches!((int, mine.as_u64()), (Some(v), Some(m)) if v >= m),
            "a repository may only raise this reserve".into(),
        ),
        Rule::OffOnly => (value.as_bool() == Some(false), "a repository may only turn this off".into()),
        Rule::Mode => {
            let theirs = value.as_str().and_then(parse_mode);
            let ours = mine.as_str().and_then(parse_mode);
            (
                matches!((theirs, ours), (Some(t), Some(o)) if t & SPECIAL_BITS == 0 && t & !o == 0),
                "a repository may only take permission bits away from the mode, and never set the setuid, setgid or sticky bit".into(),
            )
        }
    };
    if ok { Ok(()) } else { Err(format!("{why}; the value {shown} stays")) }
}
