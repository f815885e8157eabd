//! Step bodies and URLs with placeholders: `{{input.x}}` and `{{steps.NAME.output.y}}`.
//!
//! A string that is one placeholder and nothing else becomes the value it names, with its JSON
//! type (`"{{input.amount}}"` → `42`); placeholders inside a longer string are replaced by the
//! value's text (a string as itself, anything else as JSON). A path is dot-separated names and
//! array indexes, looked up with `serde_json`'s JSON Pointer. The contract needs nothing of a
//! template language (no filters, loops or conditions), so none is pulled in: a step's body must
//! stay data a participant can read in the definition.

use serde_json::Value;

/// Every placeholder of `text`: the byte range of `{{…}}` and the trimmed path inside.
fn placeholders(text: &str) -> Result<Vec<(usize, usize, &str)>, String> {
    let mut found = Vec::new();
    let mut at = 0;
    while let Some(open) = text[at..].find("{{").map(|i| i + at) {
        let close = text[open + 2..]
            .find("}}")
            .map(|i| i + open + 2)
            .ok_or_else(|| format!("{text:?} opens `{{{{` without closing it"))?;
        found.push((open, close + 2, text[open + 2..close].trim()));
        at = close + 2;
    }
    Ok(found)
}

/// Checks one path: `input[.…]` or `steps.NAME.output[.…]` with NAME among `steps`.
fn check_path(path: &str, steps: &[&str]) -> Result<(), String> {
    let parts: Vec<&str> = path.split('.').collect();
    if parts.iter().any(|p| p.is_empty()) {
        return Err(format!("`{{{{{path}}}}}` has an empty name"));
    }
    match parts.as_slice() {
        ["input", ..] => Ok(()),
        ["steps", name, "output", ..] if steps.contains(name) => Ok(()),
        ["steps", name, "output", ..] => {
            Err(format!("`{{{{{path}}}}}` names step {name:?}, which is not an earlier step"))
        }
        _ => Err(format!("`{{{{{path}}}}}` must start with `input.` or `steps.NAME.output`")),
    }
}

/// Checks every placeholder in a string.
pub fn validate_string(text: &str, steps: &[&str]) -> Result<(), String> {
    placeholders(text)?.iter().try_for_each(|(_, _, path)| check_path(path, steps))
}

/// Checks every placeholder in a body, keys included.
pub fn validate(value: &Value, steps: &[&str]) -> Result<(), String> {
    match value {
        Value::String(s) => validate_string(s, steps),
        Value::Array(items) => items.iter().try_for_each(|v| validate(v, steps)),
        Value::Object(map) => map.iter().try_for_each(|(k, v)| {
            validate_string(k, steps)?;
            validate(v, steps)
        }),
        _ => Ok(()),
    }
}

fn lookup<'a>(context: &'a Value, path: &str) -> Result<&'a Value, String> {
    let pointer: String = path.split('.').map(|p| format!("/{}", p.replace('~', "~0").replace('/', "~1"))).collect();
    context.pointer(&pointer).ok_or_else(|| format!("`{{{{{path}}}}}` names nothing"))
}

/// Renders one string: a lone placeholder keeps its value's type.
pub fn render_string(text: &str, context: &Value) -> Result<Value, String> {
    let found = placeholders(text)?;
    if let [(0, end, path)] = found.as_slice()
        && *end == text.len()
    {
        return lookup(context, path).cloned();
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (start, end, path) in found {
        out.push_str(&text[at..start]);
        match lookup(context, path)? {
            Value::String(s) => out.push_str(s),
            other => out.push_str(&other.to_string()),
        }
        at = end;
    }
    out.push_str(&text[at..]);
    Ok(Value::String(out))
}

/// Renders a body against `{"input": …, "steps": {NAME: {"output": …}}}`.
pub fn render(value: &Value, context: &Value) -> Result<Value, String> {
    Ok(match value {
        Value::String(s) => render_string(s, context)?,
        Value::Array(items) => Value::Array(items.iter().map(|v| render(v, context)).collect::<Result<_, _>>()?),
        Value::Object(map) => {
            let mut out = serde_json::Map::with_capacity(map.len());
            for (k, v) in map {
                let key = match render_string(k, context)? {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                out.insert(key, render(v, context)?);
            }
            Value::Object(out)
        }
        other => other.clone(),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_lone_placeholder_keeps_its_type_and_text_interpolates() {
        let context = json!({"input": {"amount": 42, "sku": "b-7", "tags": ["x"]}, "steps": {"reserve": {"output": {"id": "r1"}}}});
        let body = json!({
            "amount": "{{input.amount}}",
            "note": "reserve {{ steps.reserve.output.id }} for {{input.sku}} ({{input.amount}})",
            "first_tag": "{{input.tags.0}}",
            "{{input.sku}}": true,
            "plain": [1, null],
        });
        assert_eq!(
            render(&body, &context),
            Ok(
                json!({"amount": 42, "note": "reserve r1 for b-7 (42)", "first_tag": "x", "b-7": true, "plain": [1, null]})
            )
        );
        assert_eq!(render(&json!("{{input.missing}}"), &context), Err("`{{input.missing}}` names nothing".into()));
        assert!(render(&json!("{{input.amount"), &context).is_err());
    }

    #[test]
    fn paths_must_name_the_input_or_an_earlier_step() {
        assert_eq!(validate(&json!(["{{input}}", "{{steps.a.output.x}}"]), &["a"]), Ok(()));
        assert!(validate(&json!("{{steps.b.output}}"), &["a"]).unwrap_err().contains("not an earlier step"));
        assert!(validate(&json!("{{env.HOME}}"), &[]).unwrap_err().contains("must start with"));
        assert!(validate(&json!("{{input..x}}"), &[]).unwrap_err().contains("empty name"));
    }
}
