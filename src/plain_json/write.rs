//! Plain JSON written without serde's per-value work: byte for byte what `serde_json::to_writer` writes, by serde itself for anything but plain strings, integers and literals.
//!
//! A raw call's request line holds the tool's name and its arguments, written by serde at
//! about 700 instructions per call for one short string argument (callgrind of 10e852c under
//! 16 callers: `format_escaped_str` and `SerializeMap::serialize_entry`), most of it serde's
//! machinery per value rather than the bytes. serde escapes only `"`, `\` and control
//! characters in a string, writes integers as `itoa` does and a map as `{`, members joined by
//! `,`, `}`: the same text is written here directly, and anything else (a float, an array,
//! a nested object, a string with an escape) goes to serde.

use rmcp::model::JsonObject;
use serde_json::Value;

/// Writes `text` as a JSON string, as serde does.
pub(crate) fn write_str(out: &mut Vec<u8>, text: &str) -> serde_json::Result<()> {
    if !needs_escape(text.as_bytes()) {
        out.reserve(text.len() + 2);
        out.push(b'"');
        out.extend_from_slice(text.as_bytes());
        out.push(b'"');
        return Ok(());
    }
    serde_json::to_writer(out, text)
}

/// Writes `object` as serde does (members in the map's order).
pub(crate) fn write_object(out: &mut Vec<u8>, object: &JsonObject) -> serde_json::Result<()> {
    out.push(b'{');
    for (at, (key, value)) in object.iter().enumerate() {
        if at > 0 {
            out.push(b',');
        }
        write_str(out, key)?;
        out.push(b':');
        match value {
            Value::Null => out.extend_from_slice(b"null"),
            Value::Bool(true) => out.extend_from_slice(b"true"),
            Value::Bool(false) => out.extend_from_slice(b"false"),
            Value::String(text) => write_str(out, text)?,
            Value::Number(number) => match (number.as_u64(), number.as_i64()) {
                (Some(n), _) => out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes()),
                (None, Some(n)) => out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes()),
                // A float: `ryu`, or `null` for what JSON cannot hold.
                (None, None) => serde_json::to_writer(&mut *out, number)?,
            },
            // Arrays and objects.
            other => serde_json::to_writer(&mut *out, other)?,
        }
    }
    out.push(b'}');
    Ok(())
}

/// Whether serde escapes some byte of `text`: `"`, `\` or a control character (bytes that
/// are not ASCII it writes as they are). Byte by byte: names, keys and most argument
/// strings are short.
fn needs_escape(text: &[u8]) -> bool {
    text.iter().any(|&b| b < 0x20 || b == b'"' || b == b'\\')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn both(object: &Value) -> (String, String) {
        let Value::Object(map) = object else {
            panic!("an object")
        };
        let mut ours = Vec::new();
        write_object(&mut ours, map).unwrap();
        let serde = serde_json::to_string(map).unwrap();
        (String::from_utf8(ours).unwrap(), serde)
    }

    #[test]
    fn objects_are_written_as_serde_writes_them() {
        for object in [
            json!({}),
            json!({"text": "hello world!"}),
            json!({"b": 1, "a": -1, "c": u64::MAX, "d": i64::MIN, "e": 0}),
            json!({"t": true, "f": false, "n": null}),
            json!({"float": 1.5, "big": 1e300, "small": -0.0}),
            json!({"list": [1, "two", {"three": 3}], "nested": {"k": "v\n"}}),
            json!({"é": "ü 😀", "quote\"key": "back\\slash", "tab": "a\tb", "del": "\u{7f}"}),
            json!({"long": "x".repeat(100), "long escaped": format!("{}\"", "y".repeat(50))}),
        ] {
            let (ours, serde) = both(&object);
            assert_eq!(ours, serde);
        }
    }

    /// Every ASCII byte, and a few that are not, at every place of a string.
    #[test]
    fn every_byte_in_a_string_is_written_as_serde_writes_it() {
        let mut chars: Vec<char> = (0u8..0x80).map(char::from).collect();
        chars.extend(['é', '\u{2028}', '😀']);
        for len in 1..18 {
            for at in 0..len {
                for &c in &chars {
                    let mut text: String = "a".repeat(len - 1);
                    text.insert(at, c);
                    let mut ours = Vec::new();
                    write_str(&mut ours, &text).unwrap();
                    assert_eq!(ours, serde_json::to_vec(&text).unwrap(), "{c:?} at {at}");
                }
            }
        }
    }
}
