//! What an upstream lists that rmcp's typed model drops (unknown fields, `execution`, unknown keys inside known objects): kept beside the typed item and merged back into what clients get.
//!
//! An item's *extra* is the part of the upstream's JSON that serializing the typed item does
//! not give back: a key the type does not know, whole; a key it knows, only for what is
//! missing inside it (objects key by key, arrays of the same length item by item). Scalars
//! the type knows are the type's: toolgate's own changes to them (the exposed name, cleaned
//! descriptions and titles) are never undone by the merge.

use std::{collections::HashMap, sync::Arc};

use serde::Serialize;
use serde_json::{Map, Value};

/// The extra of one item: `None` when the typed item says it all (the common case).
pub type Extra = Option<Arc<Map<String, Value>>>;

/// Extras of a list, by the name or URI the upstream gives each item.
pub type Extras = HashMap<String, Arc<Map<String, Value>>>;

/// What `raw` has that `typed` (the same item, decoded and serialized again) lacks.
pub fn residue(raw: &Value, typed: &Value) -> Option<Value> {
    match (raw, typed) {
        (Value::Object(raw), Value::Object(typed)) => {
            let mut left = Map::new();
            for (key, value) in raw {
                match typed.get(key) {
                    None => {
                        left.insert(key.clone(), value.clone());
                    }
                    Some(known) => {
                        if let Some(rest) = residue(value, known) {
                            left.insert(key.clone(), rest);
                        }
                    }
                }
            }
            (!left.is_empty()).then_some(Value::Object(left))
        }
        (Value::Array(raw), Value::Array(typed)) if raw.len() == typed.len() => {
            let items: Vec<Value> = raw
                .iter()
                .zip(typed)
                .map(|(r, t)| residue(r, t).unwrap_or(Value::Null))
                .collect();
            items
                .iter()
                .any(|item| !item.is_null())
                .then_some(Value::Array(items))
        }
        _ => None,
    }
}

/// Puts `extra` back into `typed` (the inverse of [`residue`]): missing keys are added,
/// present ones merged into, nothing the typed item has is replaced.
pub fn merge(typed: &mut Value, extra: &Value) {
    match (typed, extra) {
        (Value::Object(typed), Value::Object(extra)) => {
            for (key, value) in extra {
                match typed.get_mut(key) {
                    Some(known) => merge(known, value),
                    None => {
                        typed.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        (Value::Array(typed), Value::Array(extra)) if typed.len() == extra.len() => {
            for (item, value) in typed.iter_mut().zip(extra) {
                merge(item, value);
            }
        }
        _ => {}
    }
}

/// The extra of an upstream item `raw` that was decoded into `typed`.
pub fn extra_of<T: Serialize>(raw: &Map<String, Value>, typed: &T) -> Extra {
    let typed = serde_json::to_value(typed).ok()?;
    match residue(&Value::Object(raw.clone()), &typed)? {
        Value::Object(extra) => Some(Arc::new(extra)),
        _ => None,
    }
}

/// An item as a client gets it: the typed item (as toolgate shows it) with its extra.
pub fn faithful<T: Serialize>(item: &T, extra: &Extra) -> Value {
    // Serializing an rmcp model type does not fail.
    let mut value = serde_json::to_value(item).unwrap_or(Value::Null);
    if let Some(extra) = extra {
        let extra = Value::Object(extra.as_ref().clone());
        merge(&mut value, &extra);
    }
    value
}

/// Hashes an extra into a fingerprint, so a change only there is announced too.
pub fn hash_extra(extra: &Extra, hasher: &mut impl std::hash::Hasher) {
    use std::hash::Hash;
    if let Some(extra) = extra {
        serde_json::to_string(extra.as_ref())
            .unwrap_or_default()
            .hash(hasher);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn unknown_keys_and_unknown_insides_come_back_and_typed_values_win() {
        let raw = json!({
            "name": "up",
            "description": "raw\u{200b}",
            "execution": {"taskSupport": "optional"},
            "annotations": {"readOnlyHint": true, "x-vendor": 1},
            "icons": [{"src": "a.png"}, {"src": "b.png", "theme": "dark", "x": [1]}]
        });
        let typed = json!({
            "name": "up",
            "description": "raw",
            "annotations": {"readOnlyHint": true},
            "icons": [{"src": "a.png"}, {"src": "b.png"}]
        });
        let extra = residue(&raw, &typed).unwrap();
        assert_eq!(
            extra,
            json!({
                "execution": {"taskSupport": "optional"},
                "annotations": {"x-vendor": 1},
                "icons": [null, {"theme": "dark", "x": [1]}]
            })
        );
        let mut shown = json!({
            "name": "srv__up",
            "description": "raw",
            "annotations": {"readOnlyHint": true},
            "icons": [{"src": "a.png"}, {"src": "b.png"}]
        });
        merge(&mut shown, &extra);
        let mut expected = raw.clone();
        expected["name"] = json!("srv__up");
        expected["description"] = json!("raw");
        assert_eq!(shown, expected);
    }

    #[test]
    fn nothing_left_is_none() {
        let item = json!({"name": "a", "inputSchema": {"type": "object"}});
        assert_eq!(residue(&item, &item), None);
        assert_eq!(residue(&json!([1, 2]), &json!([1])), None);
    }
}
