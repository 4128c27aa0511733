//! A look at the top-level keys of a tool result the reader has already checked as JSON.
//!
//! [`super::call::RawResult`] needs four keys of a result (`isError`, `resultType`,
//! `structuredContent`, `content`) and where their values start. Reading them with serde
//! scanned the whole result a second time (the reader's check was the first), at about 250
//! instructions a key. Here the keys are found by skipping values over text already known to be
//! valid JSON: strings are jumped with `memchr`, nothing is checked twice. What this does not
//! read with certainty (a key with an escape, a repeated key, an `isError` that is not a
//! boolean) it leaves to serde: [`peek`] answers `None`, and the caller reads as before.

use serde::Deserialize;
use serde_json::value::RawValue;

/// The keys of a result that decide how it is written; `None`: absent or `null`.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Peek<'a> {
    pub is_error: Option<bool>,
    pub result_type: Option<&'a [u8]>,
    pub structured: Option<&'a [u8]>,
    pub content: Option<&'a [u8]>,
}

/// The keys of `json`, a JSON object already checked as valid. `None` for what is left to
/// serde (see the module doc); never a different answer from serde's.
pub(super) fn peek(json: &[u8]) -> Option<Peek<'_>> {
    let mut at = skip_blank(json, 0);
    if json.get(at) != Some(&b'{') {
        return None;
    }
    at = skip_blank(json, at + 1);
    let mut peek = Peek::default();
    let mut seen = [false; 4];
    if json.get(at) == Some(&b'}') {
        return Some(peek);
    }
    loop {
        if json.get(at) != Some(&b'"') {
            return None;
        }
        let key_end = string_end(json, at)?;
        let key = &json[at + 1..key_end - 1];
        if key.contains(&b'\\') {
            return None;
        }
        at = skip_blank(json, key_end);
        if json.get(at) != Some(&b':') {
            return None;
        }
        let start = skip_blank(json, at + 1);
        let end = value_end(json, start)?;
        let value = &json[start..end];
        let null = value == b"null";
        let slot = match key {
            b"isError" => 0,
            b"resultType" => 1,
            b"structuredContent" => 2,
            b"content" => 3,
            _ => usize::MAX,
        };
        if slot != usize::MAX {
            if std::mem::replace(&mut seen[slot], true) {
                return None;
            }
            match slot {
                0 => {
                    peek.is_error = match value {
                        b"true" => Some(true),
                        b"false" => Some(false),
                        b"null" => None,
                        _ => return None,
                    }
                }
                1 => peek.result_type = (!null).then_some(value),
                2 => peek.structured = (!null).then_some(value),
                _ => peek.content = (!null).then_some(value),
            }
        }
        at = skip_blank(json, end);
        match json.get(at) {
            Some(b',') => at = skip_blank(json, at + 1),
            Some(b'}') => return Some(peek),
            _ => return None,
        }
    }
}

/// [`peek`]'s answer read by serde, for the results it leaves (escaped or repeated
/// keys, an `isError` that is not a boolean); `None` when serde cannot read it either.
pub(super) fn by_serde(json: &[u8]) -> Option<Peek<'_>> {
    #[derive(Deserialize)]
    struct Serde<'a> {
        #[serde(default, rename = "isError")]
        is_error: Option<bool>,
        #[serde(borrow, rename = "resultType")]
        result_type: Option<&'a RawValue>,
        #[serde(borrow, rename = "structuredContent")]
        structured: Option<&'a RawValue>,
        #[serde(borrow)]
        content: Option<&'a RawValue>,
    }
    let read = serde_json::from_slice::<Serde<'_>>(json).ok()?;
    Some(Peek {
        is_error: read.is_error,
        result_type: read.result_type.map(|v| v.get().as_bytes()),
        structured: read.structured.map(|v| v.get().as_bytes()),
        content: read.content.map(|v| v.get().as_bytes()),
    })
}

fn skip_blank(json: &[u8], mut at: usize) -> usize {
    while json
        .get(at)
        .is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
    {
        at += 1;
    }
    at
}

/// The index just past the string that opens at `at` (its `"`).
fn string_end(json: &[u8], at: usize) -> Option<usize> {
    let mut i = at + 1;
    loop {
        i += memchr::memchr2(b'"', b'\\', json.get(i..)?)?;
        if json[i] == b'"' {
            return Some(i + 1);
        }
        // An escape: the next byte is part of it (`\"` does not end the string).
        i += 2;
    }
}

/// The index just past the value that starts at `at`.
fn value_end(json: &[u8], at: usize) -> Option<usize> {
    match json.get(at)? {
        b'"' => string_end(json, at),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = at;
            loop {
                match json.get(i)? {
                    b'"' => {
                        i = string_end(json, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
        }
        // A number, `true`, `false` or `null`: up to the next delimiter.
        _ => {
            let rest = &json[at..];
            Some(
                at + rest
                    .iter()
                    .position(|b| matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))
                    .unwrap_or(rest.len()),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn where_it_answers_it_answers_as_serde_does() {
        let cases = [
            r#"{}"#,
            r#" { } "#,
            r#"{"content":[{"type":"text","text":"hello world!"}]}"#,
            r#"{"content":[],"isError":true}"#,
            r#"{"content":[],"isError":false,"structuredContent":{"a":[1,{"b":"}"}]}}"#,
            r#"{"resultType":"complete","content":[{"type":"text","text":"a \"quoted\" ] } word"}]}"#,
            r#"{ "content" : [ ] , "isError" : null , "resultType" : null }"#,
            r#"{"other":{"content":1},"content":[],"n":-1.5e3,"t":true,"f":false,"z":null}"#,
            r#"{"content":[],"structuredContent":[1,2]}"#,
            r#"{"content":[],"structuredContent":"text"}"#,
            r#"{"content":"\\"}"#,
            r#"{"content":["\\\"",{"x":"\\"}],"isError":true}"#,
            "{\"content\":[{\"type\":\"text\",\"text\":\"é ✓ \\u00e9\"}]}",
            "{\n\t\"content\": [],\r\n\"isError\": true\n}",
            r#"{"structuredContent":{},"content":[{"type":"image","data":"AAAA","mimeType":"image/png"}],"_meta":{"k":[[]]}}"#,
        ];
        for case in cases {
            let ours = peek(case.as_bytes());
            assert!(ours.is_some(), "left to serde: {case}");
            assert_eq!(ours, by_serde(case.as_bytes()), "{case}");
        }
    }

    #[test]
    fn what_it_is_not_sure_of_is_left_to_serde() {
        // Escaped keys (serde unescapes them), repeated keys (serde refuses them), an
        // `isError` serde does not read as a boolean.
        for case in [
            r#"{"isErr\u006fr":true,"content":[]}"#,
            r#"{"content":[],"content":[]}"#,
            r#"{"isError":true,"isError":false,"content":[]}"#,
            r#"{"content":[],"isError":"yes"}"#,
            r#"{"content":[],"isError":1}"#,
            r#"[1,2]"#,
            r#""text""#,
        ] {
            assert_eq!(peek(case.as_bytes()), None, "{case}");
        }
        // Unknown keys repeated are ignored by both.
        let twice = r#"{"a":1,"a":2,"content":[]}"#;
        assert_eq!(peek(twice.as_bytes()), by_serde(twice.as_bytes()));
    }
}
