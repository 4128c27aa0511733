//! A plain `tools/call` message read by a [`Walk`], without serde's per-key work; anything less plain is left to [`super::envelope`].
//!
//! Reading a call's envelope with serde cost about 6k instructions per call, most of them per
//! key and per string (callgrind of 5ef9bf3: `Envelope::read` 74.3M instructions over 12,187
//! calls). What every SDK writes is plainer than what JSON allows: keys and strings without
//! escapes, integer ids. Such a message is read here in one walk, and its keys in the order
//! rmcp writes them are matched as text. `arguments` become the object that validation reads:
//! walked when flat and plain, through serde otherwise ([`Walk::json_object`]).
//!
//! The walk takes a strict subset of what [`super::envelope::Envelope::read`] takes, and reads
//! it to the same values: an object whose keys are `jsonrpc` (`"2.0"`), `id` (an integer or a
//! string), `method` (`"tools/call"`) and `params`, each at most once; params whose keys are
//! `name` (a string), `arguments` (`null` or an object) and `_meta` (`null`, or an object
//! of `progressToken` and `traceparent`, each `null`, and an integer or string token or a
//! string trace parent). Strings hold no escape and no control character; integers have
//! no fraction, exponent or leading zero and fit an `i64`. Anything else (another key or
//! method, an escape, `1.0` as an id, broken JSON) returns `None`, and the caller reads the
//! message as before: it costs one failed walk, and nothing that serde would have read
//! differently is ever taken here (unit tests below compare the two over mutated messages).

use rmcp::model::{JsonObject, NumberOrString, ProgressToken, RequestId};

use super::CallParts;
use crate::{downstream::guard::TOOLS_CALL, plain_json::Walk, telemetry::Traceparent};

/// A `tools/call` request's id and call, when the message is plain (see the module doc).
pub(super) fn call(message: &[u8]) -> Option<(RequestId, CallParts)> {
    sdk_shaped(message).or_else(|| any_order(message))
}

/// A call with its keys in the order rmcp's client writes them (`jsonrpc`, `id`, `method`,
/// `params`), matched as text rather than key by key: what [`any_order`] reads of the same
/// message, without the walk's work per key. Anything else, including a blank where this
/// expects none (or another SDK's order), is `None`, and [`any_order`] reads it.
fn sdk_shaped(message: &[u8]) -> Option<(RequestId, CallParts)> {
    let mut walk = Walk::new(message);
    if !walk.literal(br#"{"jsonrpc":"2.0","id":"#) {
        return None;
    }
    let id = number_or_string(&mut walk)?;
    if !walk.literal(br#","method":"tools/call","params":"#) {
        return None;
    }
    let params = call_params(&mut walk)?;
    (walk.literal(b"}") && walk.at_end()).then_some((id, params))
}

/// [`call`] for the envelope's keys in any order.
fn any_order(message: &[u8]) -> Option<(RequestId, CallParts)> {
    request(message, call_params)
}

/// A `tools/call` request walked, its keys in any order and each once: `jsonrpc` (`"2.0"`),
/// `id` (an integer or a string), `method` (`"tools/call"`) and `params`, which `read_params`
/// reads (for HTTP's modern fast path too, whose params differ).
pub(crate) fn request<'a, P>(
    message: &'a [u8],
    mut read_params: impl FnMut(&mut Walk<'a>) -> Option<P>,
) -> Option<(RequestId, P)> {
    let mut walk = Walk::new(message);
    let (mut jsonrpc, mut method) = (false, false);
    let mut id: Option<RequestId> = None;
    let mut params: Option<P> = None;
    walk.object(|key, walk| match key {
        b"jsonrpc" if !jsonrpc => {
            // Bytes: an ASCII match is UTF-8, and a mismatch ends the walk anyway.
            jsonrpc = walk.plain_bytes()? == b"2.0";
            jsonrpc.then_some(())
        }
        b"id" if id.is_none() => {
            id = Some(number_or_string(walk)?);
            Some(())
        }
        b"method" if !method => {
            method = walk.plain_bytes()? == TOOLS_CALL.as_bytes();
            method.then_some(())
        }
        b"params" if params.is_none() => {
            params = Some(read_params(walk)?);
            Some(())
        }
        _ => None,
    })?;
    if !walk.at_end() || !jsonrpc || !method {
        return None;
    }
    Some((id?, params?))
}

/// rmcp's id or progress token: an integer or a string.
pub(crate) fn number_or_string(walk: &mut Walk<'_>) -> Option<NumberOrString> {
    match walk.peek()? {
        b'"' => Some(NumberOrString::String(walk.plain_str()?.into())),
        _ => Some(NumberOrString::Number(walk.integer()?)),
    }
}

fn call_params(walk: &mut Walk<'_>) -> Option<CallParts> {
    let mut shaped = walk.clone();
    if let Some(parts) = rmcp_params(&mut shaped) {
        *walk = shaped;
        return Some(parts);
    }
    params_any_order(walk)
}

/// Params as rmcp writes them (`_meta` with a `progressToken` only, if any, then `arguments`,
/// if any, then `name`), matched as text: what [`params_any_order`] reads of them.
fn rmcp_params(walk: &mut Walk<'_>) -> Option<CallParts> {
    if !walk.literal(b"{") {
        return None;
    }
    let mut progress = None;
    if walk.literal(br#""_meta":{"progressToken":"#) {
        if !walk.literal(b"null") {
            progress = Some(ProgressToken(number_or_string(walk)?));
        }
        if !walk.literal(b"},") {
            return None;
        }
    }
    let mut arguments = None;
    if walk.literal(br#""arguments":"#) {
        arguments = call_arguments(walk)?;
        if !walk.literal(b",") {
            return None;
        }
    }
    if !walk.literal(br#""name":"#) {
        return None;
    }
    let name = walk.plain_str()?;
    walk.literal(b"}").then(|| CallParts {
        name: name.to_owned(),
        arguments,
        progress,
        traceparent: None,
    })
}

/// [`call_params`] for the keys in any order.
fn params_any_order(walk: &mut Walk<'_>) -> Option<CallParts> {
    let mut name: Option<&str> = None;
    let mut arguments: Option<Option<JsonObject>> = None;
    let mut meta: Option<Meta> = None;
    walk.object(|key, walk| {
        match key {
            b"name" if name.is_none() => name = Some(walk.plain_str()?),
            b"arguments" if arguments.is_none() => arguments = Some(call_arguments(walk)?),
            b"_meta" if meta.is_none() => meta = Some(call_meta(walk)?),
            _ => return None,
        }
        Some(())
    })?;
    let meta = meta.unwrap_or_default();
    Some(CallParts {
        name: name?.to_owned(),
        arguments: arguments.flatten(),
        progress: meta.progress,
        traceparent: meta.traceparent,
    })
}

/// A call's `arguments`, `null` or an object, read into the object validation reads (by
/// serde unless flat and plain).
pub(crate) fn call_arguments(walk: &mut Walk<'_>) -> Option<Option<JsonObject>> {
    match walk.literal(b"null") {
        true => Some(None),
        false => walk.json_object().map(Some),
    }
}

#[derive(Default)]
struct Meta {
    progress: Option<ProgressToken>,
    traceparent: Option<Option<Traceparent>>,
}

fn call_meta(walk: &mut Walk<'_>) -> Option<Meta> {
    let mut meta = Meta::default();
    if walk.literal(b"null") {
        return Some(meta);
    }
    let (mut progress, mut traceparent) = (false, false);
    walk.object(|key, walk| {
        match key {
            b"progressToken" if !progress => {
                progress = true;
                if !walk.literal(b"null") {
                    meta.progress = Some(ProgressToken(number_or_string(walk)?));
                }
            }
            b"traceparent" if !traceparent => {
                traceparent = true;
                if !walk.literal(b"null") {
                    meta.traceparent = Some(Traceparent::parse(walk.plain_str()?));
                }
            }
            _ => return None,
        }
        Some(())
    })?;
    Some(meta)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Messages the walk takes, each a different shape of what SDKs write.
    const PLAIN: &[&str] = &[
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"s0__echo","arguments":{"text":"hello world!"},"_meta":{"progressToken":7}}}"#,
        r#"{"method":"tools/call","params":{"name":"a","arguments":{"x":[1,2.5,{"y":null}],"é":"\u00e9\n"}},"jsonrpc":"2.0","id":"req-1"}"#,
        "{ \"jsonrpc\" : \"2.0\" ,\n\t\"id\" : -12 , \"method\" : \"tools/call\" , \"params\" : { \"name\" : \"b\" } }\r\n",
        r#"{"jsonrpc":"2.0","id":0,"method":"tools/call","params":{"name":"c","arguments":null,"_meta":null}}"#,
        r#"{"jsonrpc":"2.0","id":9223372036854775807,"method":"tools/call","params":{"_meta":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","progressToken":"p"},"name":"d","arguments":{}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"e","_meta":{"traceparent":"broken","progressToken":null},"arguments":{"k":"v","k":"w"}}}"#,
        r#"{"jsonrpc":"2.0","id":"","method":"tools/call","params":{"name":"","_meta":{}}}"#,
        // rmcp's own order, as its client writes a call.
        r#"{"jsonrpc":"2.0","id":3712,"method":"tools/call","params":{"_meta":{"progressToken":3711},"arguments":{"text":"hello world!"},"name":"s0__echo"}}"#,
        r#"{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"_meta":{"progressToken":null},"arguments":null,"name":"e"}}"#,
    ];

    /// The HTTP front takes a plain call before its checks of params and tasks: serde's
    /// reading of the same message must find nothing to refuse and nothing to divert.
    fn nothing_to_refuse_or_divert(message: &[u8]) {
        let shown = String::from_utf8_lossy(message);
        let envelope = crate::downstream::http::envelope::Envelope::peek(message);
        let envelope = envelope.unwrap_or_else(|| panic!("no envelope: {shown}"));
        assert_eq!(
            envelope.request().map(|(_, m)| m),
            Some(TOOLS_CALL),
            "{shown}"
        );
        assert_eq!(envelope.call_params_problem(), None, "{shown}");
        assert!(
            crate::downstream::faithful::divert_named(message).is_none(),
            "{shown}"
        );
    }

    #[test]
    fn plain_calls_are_read_as_serde_reads_them() {
        for message in PLAIN {
            let scanned = call(message.as_bytes());
            assert!(scanned.is_some(), "not taken: {message}");
            assert_eq!(scanned, any_order(message.as_bytes()), "{message}");
            nothing_to_refuse_or_divert(message.as_bytes());
            assert_eq!(
                scanned,
                CallParts::peek_by_serde(message.as_bytes()),
                "{message}"
            );
        }
        // rmcp's order is matched as text; another order is walked key by key.
        assert!(sdk_shaped(PLAIN[0].as_bytes()).is_some());
        assert!(sdk_shaped(PLAIN[1].as_bytes()).is_none());
        for rmcp in &PLAIN[7..] {
            let mut walk = Walk::new(rmcp.as_bytes());
            walk.literal(br#"{"jsonrpc":"2.0","id":"#);
            number_or_string(&mut walk).unwrap();
            walk.literal(br#","method":"tools/call","params":"#);
            assert!(rmcp_params(&mut walk).is_some(), "{rmcp}");
        }
        let (id, parts) = call(PLAIN[0].as_bytes()).unwrap();
        assert_eq!(id, RequestId::Number(7));
        assert_eq!(parts.name, "s0__echo");
        assert_eq!(
            parts.progress,
            Some(ProgressToken(NumberOrString::Number(7)))
        );
        assert_eq!(parts.arguments.unwrap()["text"], "hello world!");
        // Duplicate argument keys: the last one, as serde's map keeps it.
        let (_, parts) = call(PLAIN[5].as_bytes()).unwrap();
        assert_eq!(parts.arguments.unwrap()["k"], "w");
        assert_eq!(parts.traceparent, Some(None));
    }

    #[test]
    fn what_is_not_plain_is_left_to_serde() {
        for message in [
            // Escapes, a float id, a leading zero, `-0`, an id too large, a null id.
            r#"{"jsonrpc":"2.0","id":1,"method":"tools\/call","params":{"name":"a"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"\u0061"}}"#,
            r#"{"jsonrpc":"2.0","id":1.0,"method":"tools/call","params":{"name":"a"}}"#,
            r#"{"jsonrpc":"2.0","id":1e2,"method":"tools/call","params":{"name":"a"}}"#,
            r#"{"jsonrpc":"2.0","id":01,"method":"tools/call","params":{"name":"a"}}"#,
            r#"{"jsonrpc":"2.0","id":-0,"method":"tools/call","params":{"name":"a"}}"#,
            r#"{"jsonrpc":"2.0","id":9223372036854775808,"method":"tools/call","params":{"name":"a"}}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"a"}}"#,
            // Other keys, methods, versions; no params; a task.
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"},"x":1}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"name":"a"}}"#,
            r#"{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"a"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","task":{}}}"#,
        ] {
            assert!(call(message.as_bytes()).is_none(), "{message}");
        }
    }

    /// Every message one edit away from a plain one: whatever the walk takes, serde reads
    /// the same (and the walk still takes most of the harmless edits).
    #[test]
    fn edited_messages_are_taken_only_as_serde_reads_them() {
        const BYTES: &[u8] = b"\"\\{}[],: \t01-.eEnul\x01\x7f\xc3\xff";
        let (mut taken, mut cases, mut shaped_params) = (0, 0, 0);
        for message in PLAIN {
            let message = message.as_bytes();
            for edit in crate::plain_json::one_edit_away(message, BYTES) {
                cases += 1;
                // The params alone, where an edit left them findable.
                let marker = br#""params":"#;
                let params_at = edit
                    .windows(marker.len())
                    .position(|w| w == marker)
                    .map_or(edit.len(), |at| at + marker.len());
                let mut shaped = Walk::new(&edit[params_at..]);
                if let Some(params) = rmcp_params(&mut shaped) {
                    shaped_params += 1;
                    let mut any = Walk::new(&edit[params_at..]);
                    assert_eq!(
                        Some((params, shaped.at_end())),
                        params_any_order(&mut any).map(|p| (p, any.at_end())),
                        "{}",
                        String::from_utf8_lossy(&edit)
                    );
                }
                if let Some(shaped) = sdk_shaped(&edit) {
                    assert_eq!(
                        Some(&shaped),
                        any_order(&edit).as_ref(),
                        "{}",
                        String::from_utf8_lossy(&edit)
                    );
                }
                if let Some(scanned) = call(&edit) {
                    taken += 1;
                    nothing_to_refuse_or_divert(&edit);
                    assert_eq!(
                        Some(scanned),
                        CallParts::peek_by_serde(&edit),
                        "{}",
                        String::from_utf8_lossy(&edit)
                    );
                }
            }
        }
        assert!(taken > cases / 20, "{taken} of {cases} taken");
        assert!(
            shaped_params > cases / 40,
            "{shaped_params} of {cases} params matched"
        );
    }
}
