//! Validation of a call's arguments against the tool's own schema, before the tool runs.
//!
//! serde's messages ("invalid type: string, expected u64 at line 1 column 9") teach a model
//! little. These name the field, say what was expected and what came, and list the schema's
//! fields, so the next call can be right.

use std::cell::RefCell;
use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use sha2::{Digest as _, Sha256};

use super::{ErrorCode, ToolError, human_bytes};

/// The most bytes a call's arguments may have (the raw JSON text). Room for a `write` of a file
/// as large as `read` will load (10 MiB by default) even with JSON's escaping, and small enough
/// that no call can bloat the session store: past it the call is refused before anything is
/// stored whole.
pub const MAX_ARGUMENTS_BYTES: usize = 16 * 1024 * 1024;

/// How much of a refused (too large) call's arguments the action event keeps.
pub const KEPT_PREFIX_BYTES: usize = 4096;

/// Why a call's raw arguments did not become a JSON value.
#[derive(Debug)]
pub enum ArgsError {
    /// Not JSON at all.
    NotJson(serde_json::Error),
    /// An object with the same key twice (`path` names it, e.g. `parallel[0].prompt`): JSON
    /// parsers keep one of them, so which the model meant is unknowable.
    DuplicateKey(String),
    /// Over [`MAX_ARGUMENTS_BYTES`]; not parsed.
    TooLarge(usize),
}

/// The raw arguments text of a call as JSON. An empty string is how some models say "no
/// arguments": it is the empty object. A duplicate key is refused, at any depth.
pub fn parse_text(raw: &str) -> Result<Value, ArgsError> {
    if raw.len() > MAX_ARGUMENTS_BYTES {
        return Err(ArgsError::TooLarge(raw.len()));
    }
    let raw = raw.trim();
    let text = if raw.is_empty() { "{}" } else { raw };
    let duplicate = RefCell::new(None);
    let mut de = serde_json::Deserializer::from_str(text);
    let parsed = Strict { path: String::new(), duplicate: &duplicate }.deserialize(&mut de).and_then(|v| {
        de.end()?;
        Ok(v)
    });
    match (parsed, duplicate.into_inner()) {
        (_, Some(path)) => Err(ArgsError::DuplicateKey(path)),
        (Ok(v), None) => Ok(v),
        (Err(e), None) => Err(ArgsError::NotJson(e)),
    }
}

/// The error for arguments that did not parse.
pub fn rejected(tool: &str, schema: &Value, err: &ArgsError) -> ToolError {
    let msg = match err {
        ArgsError::NotJson(e) => format!(
            "the arguments for {tool} are not valid JSON ({e}). Send one JSON object, e.g. {}.",
            example(schema)
        ),
        ArgsError::DuplicateKey(path) => format!(
            "invalid arguments for {tool}: the key `{path}` appears more than once, so which value you meant is unclear. Send each field once. The fields of {tool} are: {}.",
            field_list(schema)
        ),
        ArgsError::TooLarge(n) => format!(
            "the arguments of this {tool} call are {}, over the {} of JSON a call may carry, so it was not run. Send less at once: write a large file in parts (write the first part, then extend it with edit), or have a bash command generate it.",
            human_bytes(*n as u64),
            human_bytes(MAX_ARGUMENTS_BYTES as u64)
        ),
    };
    ToolError::new(ErrorCode::InvalidArguments, msg)
}

/// What the action event keeps of arguments too large to store: a prefix (cut at a character
/// boundary), the total size, and the size and sha256 of the rest.
pub fn omitted(raw: &str) -> Value {
    let mut cut = KEPT_PREFIX_BYTES.min(raw.len());
    while !raw.is_char_boundary(cut) {
        cut -= 1;
    }
    let rest = &raw.as_bytes()[cut..];
    serde_json::json!({
        "prefix": &raw[..cut],
        "bytes": raw.len(),
        "rest_bytes": rest.len(),
        "rest_sha256": super::fsutil::hex(&Sha256::digest(rest)),
    })
}

/// A JSON value, built as serde_json builds one, that notes the first duplicate key.
struct Strict<'a> {
    path: String,
    duplicate: &'a RefCell<Option<String>>,
}

impl<'de> DeserializeSeed<'de> for Strict<'_> {
    type Value = Value;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(v) =
            seq.next_element_seed(Strict { path: format!("{}[{}]", self.path, out.len()), duplicate: self.duplicate })?
        {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(k) = map.next_key::<String>()? {
            let path = if self.path.is_empty() { k.clone() } else { format!("{}.{k}", self.path) };
            if out.contains_key(&k) {
                *self.duplicate.borrow_mut() = Some(path);
                return Err(de::Error::custom("duplicate key"));
            }
            let v = map.next_value_seed(Strict { path, duplicate: self.duplicate })?;
            out.insert(k, v);
        }
        Ok(Value::Object(out))
    }
}

/// Check `value` against a tool's input schema (the subset our schemas use: an object of
/// string / integer / boolean / enum / array-of-object properties, with `required`).
pub fn validate(tool: &str, schema: &Value, value: &Value) -> Result<(), ToolError> {
    let fields = field_list(schema);
    let Some(obj) = value.as_object() else {
        return Err(invalid(tool, format!("the arguments must be a JSON object, got {}", kind(value)), &fields));
    };
    check_object(tool, "", schema, obj, &fields)
}

fn check_object(
    tool: &str,
    prefix: &str,
    schema: &Value,
    obj: &Map<String, Value>,
    fields: &str,
) -> Result<(), ToolError> {
    let props = schema.get("properties").and_then(Value::as_object);
    let empty = Map::new();
    let props = props.unwrap_or(&empty);

    let mut unknown: Vec<&str> = obj.keys().filter(|k| !props.contains_key(*k)).map(String::as_str).collect();
    if !unknown.is_empty() {
        unknown.sort_unstable();
        let list = unknown.iter().map(|k| format!("`{prefix}{k}`")).collect::<Vec<_>>().join(", ");
        let hint = unknown
            .iter()
            .filter_map(|k| {
                // A field the call already has is not suggested again (`path` and `file_path`).
                let free = props.keys().map(String::as_str).filter(|p| !obj.contains_key(*p));
                suggest_field(k, free).map(|c| format!("`{prefix}{c}` instead of `{prefix}{k}`"))
            })
            .collect::<Vec<_>>();
        let hint = if hint.is_empty() { String::new() } else { format!(" (did you mean {}?)", hint.join(", ")) };
        return Err(invalid(tool, format!("unknown field {list}{hint}"), fields));
    }

    let required = schema.get("required").and_then(Value::as_array);
    let missing: Vec<&str> = required
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|k| obj.get(*k).is_none_or(Value::is_null))
        .collect();
    if !missing.is_empty() {
        let list = missing.iter().map(|k| format!("`{prefix}{k}`")).collect::<Vec<_>>().join(", ");
        return Err(invalid(tool, format!("missing required field {list}"), fields));
    }

    for (key, val) in obj {
        let Some(prop) = props.get(key) else { continue };
        // null means "not given" for optional fields: models emit it often and it is harmless.
        if val.is_null() {
            continue;
        }
        let name = format!("{prefix}{key}");
        check_value(tool, &name, prop, val, fields)?;
    }
    Ok(())
}

fn check_value(tool: &str, name: &str, prop: &Value, val: &Value, fields: &str) -> Result<(), ToolError> {
    let ty = prop.get("type").and_then(Value::as_str).unwrap_or("any");
    let ok = match ty {
        "string" => val.is_string(),
        "integer" => val.is_i64() || val.is_u64(),
        "boolean" => val.is_boolean(),
        "array" => val.is_array(),
        "object" => val.is_object(),
        _ => true,
    };
    if !ok {
        let hint = match (ty, val) {
            ("integer", Value::String(s)) if s.trim().parse::<i64>().is_ok() => {
                format!(" (write it as a number: {}, not \"{s}\")", s.trim())
            }
            ("boolean", Value::String(s)) if matches!(s.as_str(), "true" | "false") => {
                format!(" (write it as {s}, without quotes)")
            }
            _ => String::new(),
        };
        return Err(invalid(tool, format!("`{name}` must be {}, got {}{hint}", article(ty), kind(val)), fields));
    }
    if let (Some(choices), Some(s)) = (prop.get("enum").and_then(Value::as_array), val.as_str())
        && !choices.iter().any(|c| c.as_str() == Some(s))
    {
        let list = choices.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(", ");
        return Err(invalid(tool, format!("`{name}` must be one of {list}, got \"{s}\""), fields));
    }
    let (min, max) = (prop.get("minimum").and_then(Value::as_i64), prop.get("maximum").and_then(Value::as_i64));
    if let Some(n) = val.as_f64()
        && (min.is_some_and(|m| n < m as f64) || max.is_some_and(|m| n > m as f64))
    {
        return Err(invalid(tool, format!("`{name}` must be {}, got {val}", whole_number(min, max)), fields));
    }
    if let (Some(items), Some(arr)) = (prop.get("items"), val.as_array()) {
        for (i, item) in arr.iter().enumerate() {
            let item_name = format!("{name}[{i}]");
            if items.get("type").and_then(Value::as_str) == Some("object") {
                let Some(obj) = item.as_object() else {
                    return Err(invalid(tool, format!("`{item_name}` must be an object, got {}", kind(item)), fields));
                };
                check_object(tool, &format!("{item_name}."), items, obj, fields)?;
            } else {
                check_value(tool, &item_name, items, item, fields)?;
            }
        }
    }
    Ok(())
}

fn invalid(tool: &str, what: String, fields: &str) -> ToolError {
    ToolError::new(
        ErrorCode::InvalidArguments,
        format!("invalid arguments for {tool}: {what}. The fields of {tool} are: {fields}."),
    )
}

/// "path (string, required), offset (integer), ..." for the top-level properties.
pub fn field_list(schema: &Value) -> String {
    let required: Vec<&str> =
        schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return "(none)".to_string();
    };
    props
        .iter()
        .map(|(k, v)| {
            let ty = match v.get("enum").and_then(Value::as_array) {
                Some(choices) => choices.iter().filter_map(Value::as_str).collect::<Vec<_>>().join("|"),
                None => v.get("type").and_then(Value::as_str).unwrap_or("any").to_string(),
            };
            if required.contains(&k.as_str()) { format!("{k} ({ty}, required)") } else { format!("{k} ({ty})") }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A minimal valid call, for the "not JSON" error.
fn example(schema: &Value) -> String {
    let required: Vec<&str> =
        schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    let parts: Vec<String> = required.iter().map(|k| format!("\"{k}\": ...")).collect();
    format!("{{{}}}", parts.join(", "))
}

/// What a field's bounds allow: "a whole number from 1 to 600000", "at least 1", "at most 9".
fn whole_number(min: Option<impl fmt::Display>, max: Option<impl fmt::Display>) -> String {
    match (min, max) {
        (Some(a), Some(b)) => format!("a whole number from {a} to {b}"),
        (Some(a), None) => format!("at least {a}"),
        (None, Some(b)) => format!("at most {b}"),
        (None, None) => "a whole number".to_string(),
    }
}

/// Names models use for our fields (from other tool sets, or by habit), and ours.
const FIELD_ALIASES: &[(&str, &str)] = &[
    ("file_path", "path"),
    ("filepath", "path"),
    ("file", "path"),
    ("filename", "path"),
    ("file_name", "path"),
    ("absolute_path", "path"),
    ("target_file", "path"),
    ("dir", "path"),
    ("directory", "path"),
    ("folder", "path"),
    ("cmd", "command"),
    ("shell_command", "command"),
    ("script", "command"),
    ("old", "old_string"),
    ("old_str", "old_string"),
    ("old_text", "old_string"),
    ("find", "old_string"),
    ("search", "old_string"),
    ("new", "new_string"),
    ("new_str", "new_string"),
    ("new_text", "new_string"),
    ("replace", "new_string"),
    ("replacement", "new_string"),
    ("contents", "content"),
    ("text", "content"),
    ("data", "content"),
    ("body", "content"),
    ("timeout", "timeout_ms"),
    ("regex", "pattern"),
    ("query", "pattern"),
    ("glob_pattern", "pattern"),
    ("ignore_case", "case_insensitive"),
    ("all", "replace_all"),
    ("start_line", "offset"),
    ("line", "offset"),
    ("lines", "limit"),
    ("max_lines", "limit"),
];

/// The field an unknown key most likely meant: a known alias, then a field whose name contains
/// the key or is contained in it (`old` → `old_string`), then the nearest by edit distance.
fn suggest_field<'a>(key: &str, fields: impl Iterator<Item = &'a str> + Clone) -> Option<&'a str> {
    let k = key.to_lowercase().replace('-', "_");
    let alias = FIELD_ALIASES.iter().find(|(a, _)| *a == k).map(|(_, f)| *f);
    if let Some(f) = alias.and_then(|a| fields.clone().find(|f| *f == a)) {
        return Some(f);
    }
    let mut within = fields.clone().filter(|f| k.len() >= 3 && (f.contains(k.as_str()) || k.contains(*f)));
    if let (Some(f), None) = (within.next(), within.next()) {
        return Some(f);
    }
    closest(&k, fields)
}

/// The error for arguments that fit the schema but not the tool's own type (a negative count
/// where the schema says only "integer", say): the field by name, what it must be, what came.
/// `schema` is the tool's, when known.
pub fn from_serde(
    tool: &str,
    schema: Option<&Value>,
    args: &Value,
    err: &serde_path_to_error::Error<serde_json::Error>,
) -> ToolError {
    let fields = schema.map(field_list).unwrap_or_default();
    let mut name = String::new();
    let (mut val, mut prop) = (Some(args), schema);
    for seg in err.path().iter() {
        match seg {
            serde_path_to_error::Segment::Map { key } => {
                name = if name.is_empty() { key.clone() } else { format!("{name}.{key}") };
                val = val.and_then(|v| v.get(key));
                prop = prop.and_then(|p| p.get("properties")).and_then(|p| p.get(key));
            }
            serde_path_to_error::Segment::Seq { index } => {
                name = format!("{name}[{index}]");
                val = val.and_then(|v| v.get(index));
                prop = prop.and_then(|p| p.get("items"));
            }
            _ => {}
        }
    }
    let inner = err.inner().to_string();
    // A flattened struct loses the path: find the field by the value serde quotes
    // ("invalid value: integer `-5`"), when exactly one field holds it.
    if name.is_empty()
        && let Some(quoted) = inner.split('`').nth(1)
    {
        let mut found = Vec::new();
        find_number(args, schema, String::new(), quoted, &mut found);
        if let [(n, v, p)] = found.as_slice() {
            (name, val, prop) = (n.clone(), Some(*v), *p);
        }
    }
    let bound = |k: &str| prop.and_then(|p| p.get(k)).and_then(Value::as_i64);
    // serde names the Rust type it wanted ("expected u32"): its range, narrowed by the schema's.
    let range = ["u8", "u16", "u32", "u64", "usize", "i8", "i16", "i32", "i64", "isize"]
        .iter()
        .find(|t| inner.contains(&format!("expected {t}")))
        .map(|t| {
            let (lo, hi): (i128, i128) = match *t {
                "u8" => (0, u8::MAX.into()),
                "u16" => (0, u16::MAX.into()),
                "u32" => (0, u32::MAX.into()),
                "i8" => (i8::MIN.into(), i8::MAX.into()),
                "i16" => (i16::MIN.into(), i16::MAX.into()),
                "i32" => (i32::MIN.into(), i32::MAX.into()),
                "i64" | "isize" => (i64::MIN.into(), i64::MAX.into()),
                _ => (0, u64::MAX.into()),
            };
            let type_max = hi;
            let (lo, hi) =
                (bound("minimum").map_or(lo, |m| lo.max(m.into())), bound("maximum").map_or(hi, |m| hi.min(m.into())));
            // A limit as wide as the type is no help to a model: it is named only when crossed.
            let name_hi = hi < type_max || val.and_then(Value::as_f64).is_some_and(|g| g > hi as f64);
            whole_number((lo > i128::from(i64::MIN)).then_some(lo), name_hi.then_some(hi))
        });
    let mut given = val.map(|v| v.to_string()).unwrap_or_else(|| "nothing".into());
    if given.chars().count() > 80 {
        given = format!("{}...", given.chars().take(80).collect::<String>());
    }
    let what = match range {
        Some(r) if !name.is_empty() => format!("`{name}` must be {r}, got {given}"),
        Some(r) => format!(
            "a number is out of range: it must be {r}, got {}",
            inner.split('`').nth(1).unwrap_or("another value")
        ),
        _ if !name.is_empty() => format!("`{name}` cannot be {given} ({})", plain(&inner)),
        _ => plain(&inner),
    };
    ToolError::new(
        ErrorCode::InvalidArguments,
        if fields.is_empty() {
            format!("invalid arguments for {tool}: {what}.")
        } else {
            format!("invalid arguments for {tool}: {what}. The fields of {tool} are: {fields}.")
        },
    )
}

/// Every number in `v` written as `quoted`, with its field's name and schema.
fn find_number<'v>(
    v: &'v Value,
    schema: Option<&'v Value>,
    name: String,
    quoted: &str,
    found: &mut Vec<(String, &'v Value, Option<&'v Value>)>,
) {
    match v {
        Value::Number(n) if n.to_string() == quoted => found.push((name, v, schema)),
        Value::Object(m) => {
            for (k, x) in m {
                let sub = schema.and_then(|s| s.get("properties")).and_then(|p| p.get(k));
                let n = if name.is_empty() { k.clone() } else { format!("{name}.{k}") };
                find_number(x, sub, n, quoted, found);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                find_number(x, schema.and_then(|s| s.get("items")), format!("{name}[{i}]"), quoted, found);
            }
        }
        _ => {}
    }
}

/// serde's message without its position suffix.
fn plain(msg: &str) -> String {
    match msg.find(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg.to_string(),
    }
}

fn closest<'a>(key: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .map(|c| (strsim::normalized_damerau_levenshtein(&key.to_lowercase(), c), c))
        .filter(|(score, _)| *score >= 0.5)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

fn article(ty: &str) -> &'static str {
    match ty {
        "string" => "a string",
        "integer" => "an integer",
        "boolean" => "a boolean (true or false)",
        "array" => "an array",
        "object" => "an object",
        _ => "a value",
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.as_f64().is_some_and(|f| f.fract() == 0.0) && n.is_f64() => {
            "a number too large for an integer"
        }
        Value::Number(n) if n.is_f64() => "a fractional number",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn duplicate_keys_are_found_at_any_depth() {
        let dup = |raw: &str| match parse_text(raw) {
            Err(ArgsError::DuplicateKey(p)) => p,
            other => panic!("{raw}: {other:?}"),
        };
        assert_eq!(dup(r#"{"a": 1, "a": 1}"#), "a");
        assert_eq!(dup(r#"{"a": {"b": 1, "c": [1, {"d": 1, "d": 2}]}}"#), "a.c[1].d");
        assert_eq!(dup(r#"{"x": [{"k": 1}, {"k": 1, "k": 2}]}"#), "x[1].k");
        // The same key in sibling objects is fine, and so is everything serde_json accepts.
        let v = parse_text(r#"{"x": [{"k": 1}, {"k": 2}], "n": -1.5e3, "u": 18446744073709551615, "s": "\u00e9"}"#)
            .unwrap();
        assert_eq!(v, json!({"x": [{"k": 1}, {"k": 2}], "n": -1500.0, "u": 18446744073709551615u64, "s": "é"}));
        assert_eq!(parse_text("  ").unwrap(), json!({}));
        assert!(matches!(parse_text(r#"{"a": 1} x"#), Err(ArgsError::NotJson(_))));
        assert!(matches!(parse_text(&"[".repeat(10_000)), Err(ArgsError::NotJson(_))));
    }

    #[test]
    fn too_large_arguments_are_not_parsed_and_keep_a_bounded_prefix() {
        let raw = format!("{{\"content\": \"{}é\"}}", "a".repeat(MAX_ARGUMENTS_BYTES));
        assert!(matches!(parse_text(&raw), Err(ArgsError::TooLarge(n)) if n == raw.len()));
        // The prefix is cut at a character boundary.
        let raw = format!("{}é{}", "a".repeat(KEPT_PREFIX_BYTES - 1), "b".repeat(10));
        let kept = omitted(&raw);
        assert_eq!(kept["prefix"].as_str().unwrap().len(), KEPT_PREFIX_BYTES - 1);
        assert_eq!(kept["rest_bytes"], 12);
        assert_eq!(kept["bytes"], raw.len());
    }

    #[test]
    fn fields_are_suggested_by_alias_containment_and_distance() {
        let fields = ["path", "old_string", "new_string", "replace_all"];
        let s = |k| suggest_field(k, fields.iter().copied());
        assert_eq!(s("file_path"), Some("path"));
        assert_eq!(s("FilePath"), Some("path"));
        assert_eq!(s("old"), Some("old_string"));
        assert_eq!(s("new_str"), Some("new_string"));
        assert_eq!(s("replaceall"), Some("replace_all"));
        assert_eq!(s("pathh"), Some("path"));
        assert_eq!(s("zzz"), None);
        // An alias whose field this tool lacks suggests nothing rather than a wrong field.
        assert_eq!(suggest_field("cmd", ["path", "pattern"].iter().copied()), None);
    }

    #[test]
    fn bounds_come_from_the_schema() {
        let schema = json!({"type": "object", "properties": {
            "n": {"type": "integer", "minimum": 1, "maximum": 10},
            "m": {"type": "integer", "maximum": 5}
        }});
        let e = validate("t", &schema, &json!({"n": 11})).unwrap_err();
        assert!(e.message.contains("`n` must be a whole number from 1 to 10, got 11"), "{}", e.message);
        let e = validate("t", &schema, &json!({"m": 6})).unwrap_err();
        assert!(e.message.contains("`m` must be at most 5, got 6"), "{}", e.message);
        assert!(validate("t", &schema, &json!({"n": 10, "m": -3})).is_ok());
    }
}
