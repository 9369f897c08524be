//! Validation of a call's arguments against the tool's own schema, before the tool runs.
//!
//! serde's messages ("invalid type: string, expected u64 at line 1 column 9") teach a model
//! little. These name the field, say what was expected and what came, and list the schema's
//! fields, so the next call can be right.

use serde_json::{Map, Value};

use super::{ErrorCode, ToolError};

/// The raw arguments text of a call as JSON. An empty string is how some models say "no
/// arguments": it is the empty object.
pub fn parse_text(raw: &str) -> Result<Value, serde_json::Error> {
    let raw = raw.trim();
    serde_json::from_str(if raw.is_empty() { "{}" } else { raw })
}

/// The error for arguments that are not JSON at all.
pub fn not_json(tool: &str, schema: &Value, err: &serde_json::Error) -> ToolError {
    ToolError::new(
        ErrorCode::InvalidArguments,
        format!("the arguments for {tool} are not valid JSON ({err}). Send one JSON object, e.g. {}.", example(schema)),
    )
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
                closest(k, props.keys().map(String::as_str)).map(|c| format!("`{prefix}{c}` instead of `{prefix}{k}`"))
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
    if let Some(min) = prop.get("minimum").and_then(Value::as_i64)
        && let Some(n) = val.as_f64()
        && n < min as f64
    {
        return Err(invalid(tool, format!("`{name}` must be at least {min}, got {val}"), fields));
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
