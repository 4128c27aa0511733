//! A look at the top-level keys of a tool result the reader has already checked as JSON.
//!
//! [`super::call::RawResult`] needs four keys of a result (`isError`, `resultType`,
//! `structuredContent`, `content`) and where their values start. Reading them with serde
//! scanned the whole result a second time (the reader's check was the first), at about 250
//! instructions a key. A small result's keys are read by the walk that checks it
//! ([`super::head`], through [`Reading`]); [`peek`] reads those of a result that serde
//! checked (a long or deep one, or an answer that is not plain) by skipping values over text
//! already known to be valid JSON: strings are jumped with `memchr`, nothing is checked
//! twice. What neither reads with certainty (a key with an escape, a repeated key, an
//! `isError` that is not a boolean) is left to serde: `None`, and the caller reads as before.

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

/// What decides how a result is written, read off its [`Peek`] (see [`super::RawResult`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Facts {
    pub is_error: bool,
    pub has_result_type: bool,
    /// `structuredContent` is absent or an object (what clients before 2026-07-28 accept).
    pub structured_is_object: bool,
    /// Written as it is: rmcp's typed path would change nothing (a `content` list is there,
    /// which it would add otherwise, and a result type, if any, is `complete`).
    pub plain: bool,
}

impl From<Peek<'_>> for Facts {
    fn from(peek: Peek<'_>) -> Self {
        Self {
            is_error: peek.is_error == Some(true),
            has_result_type: peek.result_type.is_some(),
            structured_is_object: peek.structured.is_none_or(|value| value.starts_with(b"{")),
            plain: peek.content.is_some_and(|c| c.starts_with(b"["))
                && peek.result_type.is_none_or(|t| t == br#""complete""#),
        }
    }
}

/// The members of a result taken one by one (by [`peek`], or by the walk that checks an
/// answer's result, [`super::head`]) into its [`Peek`]; unsure of it (a key with an escape,
/// a repeated key, an `isError` that is not a boolean) it leaves it to serde.
#[derive(Default)]
pub(super) struct Reading<'a> {
    peek: Peek<'a>,
    seen: [bool; 4],
    unsure: bool,
}

impl<'a> Reading<'a> {
    /// One member: its key as written between its quotes, and its value's text.
    pub fn member(&mut self, key: &[u8], value: &'a [u8]) {
        if key.contains(&b'\\') {
            self.unsure = true;
            return;
        }
        let slot = match key {
            b"isError" => 0,
            b"resultType" => 1,
            b"structuredContent" => 2,
            b"content" => 3,
            _ => return,
        };
        if std::mem::replace(&mut self.seen[slot], true) {
            self.unsure = true;
            return;
        }
        let null = value == b"null";
        match slot {
            0 => {
                self.peek.is_error = match value {
                    b"true" => Some(true),
                    b"false" => Some(false),
                    b"null" => None,
                    _ => {
                        self.unsure = true;
                        None
                    }
                }
            }
            1 => self.peek.result_type = (!null).then_some(value),
            2 => self.peek.structured = (!null).then_some(value),
            _ => self.peek.content = (!null).then_some(value),
        }
    }

    /// The keys read, unless unsure of them.
    pub fn done(self) -> Option<Peek<'a>> {
        (!self.unsure).then_some(self.peek)
    }
}

/// The keys of `json`, a JSON object already checked as valid. `None` for what is left to
/// serde (see the module doc); never a different answer from serde's.
pub(super) fn peek(json: &[u8]) -> Option<Peek<'_>> {
    let mut at = skip_blank(json, 0);
    if json.get(at) != Some(&b'{') {
        return None;
    }
    at = skip_blank(json, at + 1);
    let mut reading = Reading::default();
    if json.get(at) == Some(&b'}') {
        return reading.done();
    }
    loop {
        if json.get(at) != Some(&b'"') {
            return None;
        }
        let key_end = string_end(json, at)?;
        let key = &json[at + 1..key_end - 1];
        at = skip_blank(json, key_end);
        if json.get(at) != Some(&b':') {
            return None;
        }
        let start = skip_blank(json, at + 1);
        let end = value_end(json, start)?;
        reading.member(key, &json[start..end]);
        at = skip_blank(json, end);
        match json.get(at) {
            Some(b',') => at = skip_blank(json, at + 1),
            Some(b'}') => return reading.done(),
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
