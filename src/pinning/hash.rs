//! The pinned part of a tool and its canonical hash: SHA-256 over JSON with sorted keys and no whitespace.

use rmcp::model::Tool;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// What a pin covers: everything a model reads or a call is checked against. `icons` and
/// `_meta` are left out: a model does not read them, and servers may vary them freely.
pub const PINNED_FIELDS: [&str; 6] = [
    "name",
    "title",
    "description",
    "inputSchema",
    "outputSchema",
    "annotations",
];

/// The pinned fields of `tool` as the upstream sent them (before any cleaning, so that a
/// change in hidden characters is a change), as a JSON object with MCP's field names.
/// Absent fields are left out rather than `null`.
pub fn definition(tool: &Tool) -> Value {
    let mut fields = Map::new();
    fields.insert("name".into(), Value::String(tool.name.to_string()));
    if let Some(title) = &tool.title {
        fields.insert("title".into(), Value::String(title.clone()));
    }
    if let Some(description) = &tool.description {
        fields.insert("description".into(), Value::String(description.to_string()));
    }
    fields.insert(
        "inputSchema".into(),
        Value::Object((*tool.input_schema).clone()),
    );
    if let Some(output) = &tool.output_schema {
        fields.insert("outputSchema".into(), Value::Object((**output).clone()));
    }
    if let Some(annotations) = &tool.annotations {
        // Field by field (the MCP 2025-11-25 set), so that building a definition cannot fail.
        let mut hints = Map::new();
        if let Some(title) = &annotations.title {
            hints.insert("title".into(), Value::String(title.clone()));
        }
        for (key, hint) in [
            ("readOnlyHint", annotations.read_only_hint),
            ("destructiveHint", annotations.destructive_hint),
            ("idempotentHint", annotations.idempotent_hint),
            ("openWorldHint", annotations.open_world_hint),
        ] {
            if let Some(hint) = hint {
                hints.insert(key.into(), Value::Bool(hint));
            }
        }
        fields.insert("annotations".into(), Value::Object(hints));
    }
    sorted(&Value::Object(fields))
}

/// `value` with every object's keys inserted in sorted order, so that it prints the same
/// whether or not serde_json keeps insertion order (its `preserve_order` feature).
pub fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .filter_map(|key| Some((key.clone(), sorted(map.get(key)?))))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// The canonical text of `value`: no whitespace, object keys sorted by code point at every
/// level, strings and numbers as serde_json writes them.
pub fn canonical(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (key, value)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                // A string's `Display` is its JSON text, escapes included.
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(value, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// `sha256:` and the lowercase hex SHA-256 of [`canonical`]`(definition)`.
pub fn hash(definition: &Value) -> String {
    let digest = Sha256::digest(canonical(definition).as_bytes());
    let mut text = String::with_capacity(7 + 64);
    text.push_str("sha256:");
    for byte in digest {
        text.push_str(&format!("{byte:02x}"));
    }
    text
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rmcp::model::{JsonObject, Tool, ToolAnnotations};
    use serde_json::{Value, json};

    use super::*;

    fn schema(value: Value) -> Arc<JsonObject> {
        match value {
            Value::Object(map) => Arc::new(map),
            _ => Arc::new(JsonObject::new()),
        }
    }

    fn echo() -> Tool {
        Tool::new(
            "echo",
            "Return the given text",
            schema(json!({"type": "object", "properties": {"text": {"type": "string"}}})),
        )
        .with_title("Echo")
        .with_annotations(ToolAnnotations::new().read_only(true))
    }

    #[test]
    fn canonical_text_sorts_keys_at_every_level_and_has_no_whitespace() {
        let value = json!({"b": {"z": 1, "a": [true, null, "x y"]}, "a": 2.5});
        assert_eq!(
            canonical(&value),
            r#"{"a":2.5,"b":{"a":[true,null,"x y"],"z":1}}"#
        );
    }

    #[test]
    fn the_definition_has_exactly_the_pinned_fields_present() {
        let mut tool = echo();
        tool.meta = Some(rmcp::model::MetaObject::new());
        let definition = definition(&tool);
        let keys: Vec<&String> = definition.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            ["annotations", "description", "inputSchema", "name", "title"]
        );
        assert_eq!(definition["annotations"], json!({"readOnlyHint": true}));
        for key in keys {
            assert!(PINNED_FIELDS.contains(&key.as_str()));
        }
    }

    #[test]
    fn the_hash_is_stable_and_sees_every_pinned_field() {
        let base = hash(&definition(&echo()));
        assert!(base.starts_with("sha256:") && base.len() == 71, "{base}");
        // Key order in the upstream's JSON does not matter.
        let reordered = Tool::new(
            "echo",
            "Return the given text",
            schema(json!({"properties": {"text": {"type": "string"}}, "type": "object"})),
        )
        .with_title("Echo")
        .with_annotations(ToolAnnotations::new().read_only(true));
        assert_eq!(hash(&definition(&reordered)), base);

        let mut changes: Vec<Tool> = Vec::new();
        let mut t = echo();
        t.description = Some("Return the given text\u{200B}".into());
        changes.push(t);
        let mut t = echo();
        t.title = None;
        changes.push(t);
        let mut t = echo();
        t.name = "echo2".into();
        changes.push(t);
        let mut t = echo();
        t.input_schema = schema(json!({"type": "object"}));
        changes.push(t);
        let mut t = echo();
        t.output_schema = Some(schema(json!({"type": "object"})));
        changes.push(t);
        let mut t = echo();
        t.annotations = Some(ToolAnnotations::new().read_only(false));
        changes.push(t);
        for changed in changes {
            assert_ne!(hash(&definition(&changed)), base, "{changed:?}");
        }
    }
}
