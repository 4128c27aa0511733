//! A line from a stdio server read for its head: the raw call it answers or reports progress for.

use rmcp::model::{NumberOrString, ProgressNotificationParam};
use serde::Deserialize;
use serde_json::value::RawValue;

use super::peek::{Facts, Reading};
use crate::plain_json::Walk;

/// Where a value is in its line: `line[start..end]`.
type Span = (usize, usize);

/// What a line from the server is for a raw call.
pub(super) enum ForRawCall {
    /// The answer to request `"tg-<id>"`: where its `result` or `error` is in the line.
    Answer {
        id: u64,
        result: Option<Span>,
        error: Option<Span>,
        /// The result's keys, when the walk that checked it read them too.
        facts: Option<Facts>,
    },
    /// Progress with the token `"tg-<id>"`.
    Progress {
        id: u64,
        params: ProgressNotificationParam,
    },
}

/// `"tg-<n>"` → `n`.
fn raw_id(json: &str) -> Option<u64> {
    json.strip_prefix("\"tg-")?.strip_suffix('"')?.parse().ok()
}

/// Whether `line` is for a raw call; `None` for any other line. A plain line is walked once,
/// any other read by serde after the walk gave up; an answer's values are not decoded.
pub(super) fn for_raw_call(line: &[u8]) -> Option<ForRawCall> {
    plain_answer(line).or_else(|| by_serde(line))
}

/// A plain answer to a raw call (rmcp writes `{"jsonrpc":"2.0","id":"tg-1","result":{…}}`),
/// walked without serde's per-key work ([`crate::plain_json`]); its result or error is
/// checked as JSON, not decoded ([`Walk::raw_value`]); a result's keys are read on the
/// way ([`Reading`]), so that [`super::RawResult`] need not walk it again. `None` for anything
/// else, which [`by_serde`] reads as before.
fn plain_answer(line: &[u8]) -> Option<ForRawCall> {
    rmcp_shaped(line).or_else(|| any_order(line))
}

/// A result answer as rmcp writes it (`jsonrpc`, `id`, `result`, in that order), matched as
/// text rather than key by key: what [`any_order`] reads of the same line, at a fraction of
/// its cost for the envelope. Anything else is `None`, and [`any_order`] reads it.
fn rmcp_shaped(line: &[u8]) -> Option<ForRawCall> {
    let mut walk = Walk::new(line);
    if !walk.literal(br#"{"jsonrpc":"2.0","id":"#) {
        return None;
    }
    let id = walk.prefixed_number(b"tg-")?;
    if !walk.literal(br#","result":"#) {
        return None;
    }
    let mut facts = None;
    let result = result(&mut walk, line, &mut facts)?;
    (walk.literal(b"}") && walk.at_end()).then_some(ForRawCall::Answer {
        id,
        result,
        error: None,
        facts,
    })
}

/// A `result`'s value: where it is (`None` for `null`), with its keys read on the way into
/// `facts` when the walk checked it.
fn result(walk: &mut Walk<'_>, line: &[u8], facts: &mut Option<Facts>) -> Option<Option<Span>> {
    if walk.literal(b"null") {
        return Some(None);
    }
    let mut reading = Reading::default();
    let mut member = |key: &[u8], value| reading.member(key, value);
    let (span, walked) = walk.raw_value_keyed(Some(&mut member))?;
    // Only the walk gives every member; serde gives none.
    if walked && line.get(span.0) == Some(&b'{') {
        *facts = reading.done().map(Facts::from);
    }
    Some(Some(span))
}

/// [`plain_answer`] for the keys in any order.
fn any_order(line: &[u8]) -> Option<ForRawCall> {
    let mut walk = Walk::new(line);
    let mut jsonrpc = false;
    let mut id = None;
    // Seen, and where (`null` is absent, as serde reads an `Option`).
    let mut result_at: Option<Option<Span>> = None;
    let mut error: Option<Option<Span>> = None;
    let mut facts = None;
    walk.object(|key, walk| {
        let value = |walk: &mut Walk<'_>| match walk.literal(b"null") {
            true => Some(None),
            false => walk.raw_value().map(Some),
        };
        match key {
            // serde's reading ignores `jsonrpc`; this one takes only what rmcp writes.
            b"jsonrpc" if !jsonrpc => {
                jsonrpc = walk.plain_bytes()? == b"2.0";
                jsonrpc.then_some(())?;
            }
            b"id" if id.is_none() => id = Some(walk.prefixed_number(b"tg-")?),
            b"result" if result_at.is_none() => result_at = Some(result(walk, line, &mut facts)?),
            b"error" if error.is_none() => error = Some(value(walk)?),
            _ => return None,
        }
        Some(())
    })?;
    if !walk.at_end() {
        return None;
    }
    Some(ForRawCall::Answer {
        id: id?,
        result: result_at.flatten(),
        error: error.flatten(),
        facts,
    })
}

/// The walk against serde over one line, for `examples/fuzz.rs`: whatever the walk takes,
/// serde reads to the same id, result and error, and the keys the walk read off a result are
/// those read after it ([`super::peek`]). `Err` says where they part.
pub fn walk_against_serde(line: &[u8]) -> Result<(), String> {
    let Some(ForRawCall::Answer {
        id,
        result,
        error,
        facts,
    }) = plain_answer(line)
    else {
        return Ok(());
    };
    match by_serde(line) {
        Some(ForRawCall::Answer {
            id: serde_id,
            result: serde_result,
            error: serde_error,
            ..
        }) if (serde_id, serde_result, serde_error) == (id, result, error) => {}
        _ => {
            return Err(format!(
                "the walk read id {id}, result at {result:?}, error at {error:?}; serde did not"
            ));
        }
    }
    if let (Some(facts), Some((start, end))) = (facts, result) {
        let json = &line[start..end];
        let after = super::peek::peek(json)
            .or_else(|| super::peek::by_serde(json))
            .map(Facts::from);
        if after != Some(facts) {
            return Err(format!(
                "the walk read the result's keys as {facts:?}, after it {after:?}"
            ));
        }
    }
    Ok(())
}

/// [`for_raw_call`] by serde: any line.
fn by_serde(line: &[u8]) -> Option<ForRawCall> {
    #[derive(Deserialize)]
    struct Head<'a> {
        #[serde(borrow)]
        id: Option<&'a RawValue>,
        #[serde(borrow)]
        method: Option<&'a RawValue>,
        #[serde(borrow)]
        params: Option<&'a RawValue>,
        #[serde(borrow)]
        result: Option<&'a RawValue>,
        #[serde(borrow)]
        error: Option<&'a RawValue>,
    }
    let head: Head<'_> = serde_json::from_slice(line).ok()?;
    if let Some(method) = head.method {
        if head.id.is_some() || method.get() != r#""notifications/progress""# {
            return None;
        }
        let params: ProgressNotificationParam = serde_json::from_str(head.params?.get()).ok()?;
        let NumberOrString::String(token) = &params.progress_token.0 else {
            return None;
        };
        let id = token.strip_prefix("tg-")?.parse().ok()?;
        return Some(ForRawCall::Progress { id, params });
    }
    let id = raw_id(head.id?.get())?;
    let span = |value: &RawValue| {
        let start = value.get().as_ptr() as usize - line.as_ptr() as usize;
        (start, start + value.get().len())
    };
    Some(ForRawCall::Answer {
        id,
        result: head.result.map(span),
        error: head.error.map(span),
        facts: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_answers_and_progress_for_raw_ids_are_taken_and_spans_found() {
        let answer = |line: &[u8]| match for_raw_call(line) {
            Some(ForRawCall::Answer {
                id, result, error, ..
            }) => Some((id, result, error)),
            _ => None,
        };
        let line = br#"{"jsonrpc":"2.0","id":"tg-42","result":{"content":[]}}"#;
        let (id, result, error) = answer(line).unwrap();
        assert_eq!(id, 42);
        let (start, end) = result.unwrap();
        assert_eq!(&line[start..end], br#"{"content":[]}"#);
        assert!(error.is_none());

        // The TypeScript SDK writes the id last.
        let line = br#"{"error":{"code":-1,"message":"x"},"jsonrpc":"2.0","id":"tg-7"}"#;
        let (id, result, error) = answer(line).unwrap();
        assert_eq!((id, result), (7, None));
        let (start, end) = error.unwrap();
        assert_eq!(&line[start..end], br#"{"code":-1,"message":"x"}"#);

        let progress = br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"tg-3","progress":1}}"#;
        assert!(matches!(
            for_raw_call(progress),
            Some(ForRawCall::Progress { id: 3, .. })
        ));

        for other in [
            &br#"{"jsonrpc":"2.0","id":3,"result":{}}"#[..],
            br#"{"jsonrpc":"2.0","id":"tg-1","method":"ping"}"#,
            br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":5,"progress":1}}"#,
            br#"{"jsonrpc":"2.0","method":"notifications/message","params":{}}"#,
            br#"{"jsonrpc":"2.0","id":"tg-x","result":{}}"#,
            b"not json",
        ] {
            assert!(for_raw_call(other).is_none());
        }
    }

    /// Every answer one edit away from a plain one: whatever the walk takes, serde reads the
    /// same (and the walk takes the plain ones).
    #[test]
    fn the_walk_takes_only_answers_serde_reads_the_same() {
        fn answer(found: Option<ForRawCall>) -> Option<(u64, Option<Span>, Option<Span>)> {
            match found? {
                ForRawCall::Answer {
                    id, result, error, ..
                } => Some((id, result, error)),
                ForRawCall::Progress { .. } => None,
            }
        }
        type Read = (u64, Option<Span>, Option<Span>, Option<Facts>);
        fn with_facts(found: Option<ForRawCall>) -> Option<Read> {
            match found? {
                ForRawCall::Answer {
                    id,
                    result,
                    error,
                    facts,
                } => Some((id, result, error, facts)),
                ForRawCall::Progress { .. } => None,
            }
        }
        const PLAIN: &[&str] = &[
            r#"{"jsonrpc":"2.0","id":"tg-42","result":{"content":[{"type":"text","text":"h\u00e9 \"x\""}],"isError":false}}"#,
            r#"{"error":{"code":-32602,"message":"x"},"jsonrpc":"2.0","id":"tg-7"}"#,
            "{ \"jsonrpc\" : \"2.0\" , \"result\" : [ 1 , 2.5e3 ] , \"id\" : \"tg-0\" }\n",
            r#"{"jsonrpc":"2.0","id":"tg-1","result":null,"error":{"code":1,"message":""}}"#,
            r#"{"jsonrpc":"2.0","id":"tg-2","result":5}"#,
            r#"{"jsonrpc":"2.0","id":"tg-3","result":{"content":[{"type":"text","text":"\ud83d\ude00 é \/\b\f\n\r\t"}],"structuredContent":{"a":[true,false,null,-0.5e-3,10E+2,0,[],{}]},"isError":true}}"#,
        ];
        const BYTES: &[u8] = b"\"\\{}[],: \t01-.enul\x01\xc3\xff";
        // rmcp's order is matched as text; another order is walked key by key.
        assert!(rmcp_shaped(PLAIN[0].as_bytes()).is_some());
        assert!(rmcp_shaped(PLAIN[1].as_bytes()).is_none());
        let (mut taken, mut cases) = (0, 0);
        for message in PLAIN {
            let message = message.as_bytes();
            assert!(
                plain_answer(message).is_some(),
                "{}",
                String::from_utf8_lossy(message)
            );
            for edit in crate::plain_json::one_edit_away(message, BYTES) {
                cases += 1;
                if let Some(shaped) = with_facts(rmcp_shaped(&edit)) {
                    assert_eq!(
                        Some(shaped),
                        with_facts(any_order(&edit)),
                        "{}",
                        String::from_utf8_lossy(&edit)
                    );
                }
                if let Some(walked) = answer(plain_answer(&edit)) {
                    taken += 1;
                    assert_eq!(
                        Some(walked),
                        answer(by_serde(&edit)),
                        "{}",
                        String::from_utf8_lossy(&edit)
                    );
                }
            }
        }
        assert!(taken > cases / 20, "{taken} of {cases} taken");
    }

    /// The keys the walk reads off a result are those read off it after, by
    /// [`super::super::peek`] or serde (what [`super::super::RawResult`] did before); what the
    /// walk is unsure of it leaves to them.
    #[test]
    fn a_results_keys_read_by_the_walk_are_those_read_after_it() {
        use super::super::peek;
        fn walked(line: &[u8]) -> Option<(Span, Option<Facts>)> {
            match plain_answer(line)? {
                ForRawCall::Answer {
                    result: Some(span),
                    facts,
                    ..
                } => Some((span, facts)),
                _ => None,
            }
        }
        let after = |line: &[u8], (start, end): Span| {
            let json = &line[start..end];
            peek::peek(json)
                .or_else(|| peek::by_serde(json))
                .map(Facts::from)
        };
        let line = |result: &str| format!(r#"{{"jsonrpc":"2.0","id":"tg-1","result":{result}}}"#);
        const RESULTS: &[&str] = &[
            r#"{"content":[{"type":"text","text":"hello world!"}]}"#,
            r#"{"resultType":"complete","content":[],"isError":true}"#,
            r#"{ "isError" : false , "structuredContent" : {"a":[1]} , "content" : [ ] }"#,
            r#"{"content":[],"structuredContent":[1],"resultType":"task","_meta":{"content":1}}"#,
            r#"{"resultType":null,"content":null,"structuredContent":null,"isError":null}"#,
            r#"{}"#,
        ];
        const BYTES: &[u8] = b"\"\\{}[],: 01-.enul\xc3";
        let (mut cases, mut read) = (0, 0);
        for result in RESULTS {
            let line = line(result);
            let (span, facts) = walked(line.as_bytes()).expect("a plain answer");
            assert!(facts.is_some(), "{line}");
            assert_eq!(facts, after(line.as_bytes(), span), "{line}");
            for edit in crate::plain_json::one_edit_away(line.as_bytes(), BYTES) {
                cases += 1;
                if let Some((span, Some(facts))) = walked(&edit) {
                    read += 1;
                    let shown = String::from_utf8_lossy(&edit);
                    assert_eq!(Some(facts), after(&edit, span), "{shown}");
                }
            }
        }
        assert!(read > cases / 20, "{read} of {cases} read");
        // Unsure (an escaped key, a repeated one, an `isError` not a boolean) or not an
        // object: no keys from the walk, the answer still taken.
        for result in [
            r#"{"isErr\u006fr":true,"content":[]}"#,
            r#"{"content":[],"content":[]}"#,
            r#"{"content":[],"isError":"yes"}"#,
            r#"[{"content":[]}]"#,
        ] {
            let line = line(result);
            let (_, facts) = walked(line.as_bytes()).expect("a plain answer");
            assert_eq!(facts, None, "{line}");
        }
    }

    /// A long or deep result is checked by serde instead, to the same span.
    #[test]
    fn long_and_deep_results_are_left_to_serde_and_found_alike() {
        let long = format!(
            "{{\"content\":[{{\"type\":\"text\",\"text\":\"{}\"}}]}}",
            "é".repeat(2000)
        );
        let deep = format!("{}1{}", "[".repeat(100), "]".repeat(100));
        for result in [long, deep] {
            let line = format!(r#"{{"jsonrpc":"2.0","id":"tg-5","result":{result} }}"#);
            let span = |found: Option<ForRawCall>| match found {
                Some(ForRawCall::Answer {
                    id: 5,
                    result: Some((start, end)),
                    error: None,
                    facts: None,
                }) => Some((start, end)),
                _ => None,
            };
            let (start, end) = span(plain_answer(line.as_bytes())).unwrap();
            assert_eq!(&line.as_bytes()[start..end], result.as_bytes());
            assert_eq!(Some((start, end)), span(by_serde(line.as_bytes())));
        }
    }
}
