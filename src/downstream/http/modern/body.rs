//! A 2026-07-28 `tools/call` body as HTTP's modern fast path takes it: walked when plain, read by serde otherwise, to the same call.
//!
//! serde's reading cost about 12,400 instructions per call (callgrind of 16ba698's release
//! build, `ModernCall::read` over a 314-byte body from rmcp's client), most of it per key:
//! the `_meta` of a 2026-07-28 request has long keys, and the client's info is two more
//! strings. [`Body::read`] first walks the body with [`Walk`], which takes a strict subset of
//! what serde takes: keys without escapes, each at most once, strings without escapes, integer
//! ids and tokens, the client's capabilities as `{}` (any other object goes to serde on its
//! own) and its info as a `name` and a `version` (else serde, on their own too). Anything the
//! walk does not take is read by serde as before, so a body is taken exactly when serde's
//! reading takes it, and to the same call: the unit tests below compare the two over bodies
//! one edit away from plain ones, and `examples/fuzz.rs` (`modern-walk`) over mutated ones.

use std::borrow::Cow;

use rmcp::model::{
    ClientCapabilities, Implementation, JsonObject, ProgressToken, ProtocolVersion, RequestId,
};
use serde::Deserialize;

use crate::{
    downstream::{
        fast::{envelope::Object, scan},
        guard::TOOLS_CALL,
    },
    plain_json::Walk,
};

/// What a taken body says: the call, and the `_meta` its exchange needs.
#[derive(Debug, PartialEq)]
pub(super) struct Body {
    pub id: RequestId,
    pub name: String,
    pub arguments: Option<JsonObject>,
    pub progress: Option<ProgressToken>,
    pub traceparent: Option<String>,
    pub capabilities: ClientCapabilities,
}

impl Body {
    /// The call in `body` when it is one `tools/call` request of version 2026-07-28 whose
    /// keys are the ones the module doc of [`super`] lists; `None` leaves it to rmcp.
    pub fn read(body: &[u8]) -> Option<Self> {
        walk(body).or_else(|| by_serde(body))
    }
}

/// For `examples/fuzz.rs`: an `Err` names a body the walk reads otherwise than serde.
pub fn walk_against_serde(body: &[u8]) -> Result<(), String> {
    match walk(body) {
        Some(walked) => {
            let serde = by_serde(body);
            match serde.as_ref() == Some(&walked) {
                true => Ok(()),
                false => Err(format!("the walk read {walked:?}, serde {serde:?}")),
            }
        }
        None => Ok(()),
    }
}

fn version() -> &'static str {
    ProtocolVersion::V_2026_07_28.as_str()
}

/// [`Body::read`]'s walk: keys in any order, each once.
fn walk(body: &[u8]) -> Option<Body> {
    let (id, (name, arguments, meta)) = scan::request(body, walk_params)?;
    Some(Body {
        id,
        name: name.to_owned(),
        arguments,
        progress: meta.progress,
        traceparent: meta.traceparent,
        capabilities: meta.capabilities,
    })
}

/// `_meta` as the walk reads it.
struct WalkedMeta {
    progress: Option<ProgressToken>,
    traceparent: Option<String>,
    capabilities: ClientCapabilities,
}

fn walk_params<'a>(walk: &mut Walk<'a>) -> Option<(&'a str, Option<JsonObject>, WalkedMeta)> {
    let mut name = None;
    let mut arguments: Option<Option<JsonObject>> = None;
    let mut meta = None;
    walk.object(|key, walk| {
        match key {
            b"name" if name.is_none() => name = Some(walk.plain_str()?),
            b"arguments" if arguments.is_none() => arguments = Some(scan::call_arguments(walk)?),
            b"_meta" if meta.is_none() => meta = Some(walk_meta(walk)?),
            _ => return None,
        }
        Some(())
    })?;
    Some((name?, arguments.flatten(), meta?))
}

fn walk_meta(walk: &mut Walk<'_>) -> Option<WalkedMeta> {
    let (mut progress, mut traceparent) = (None, None);
    let (mut version_seen, mut capabilities, mut info) = (false, None, false);
    walk.object(|key, walk| {
        match key {
            b"progressToken" if progress.is_none() => {
                progress = Some(match walk.literal(b"null") {
                    true => None,
                    false => Some(ProgressToken(scan::number_or_string(walk)?)),
                })
            }
            b"traceparent" if traceparent.is_none() => {
                traceparent = Some(match walk.literal(b"null") {
                    true => None,
                    false => Some(walk.plain_str()?.to_owned()),
                })
            }
            b"io.modelcontextprotocol/protocolVersion" if !version_seen => {
                version_seen = walk.plain_bytes()? == version().as_bytes();
                if !version_seen {
                    return None;
                }
            }
            b"io.modelcontextprotocol/clientCapabilities" if capabilities.is_none() => {
                capabilities = Some(match walk.literal(b"{}") {
                    true => ClientCapabilities::default(),
                    false => walk.object_by_serde()?,
                })
            }
            // Read only to leave a malformed one to rmcp.
            b"io.modelcontextprotocol/clientInfo" if !info => {
                info = true;
                if !walk.literal(b"null") {
                    let mut plain = walk.clone();
                    match client_info(&mut plain) {
                        Some(()) => *walk = plain,
                        None => {
                            walk.object_by_serde::<Implementation>()?;
                        }
                    }
                }
            }
            _ => return None,
        }
        Some(())
    })?;
    version_seen.then_some(())?;
    Some(WalkedMeta {
        progress: progress.flatten(),
        traceparent: traceparent.flatten(),
        capabilities: capabilities?,
    })
}

/// A client's info of a plain `name` and `version` only, each once; anything else is `None`,
/// for serde to read.
fn client_info(walk: &mut Walk<'_>) -> Option<()> {
    let (mut name, mut version) = (false, false);
    walk.object(|key, walk| {
        let seen = match key {
            b"name" => &mut name,
            b"version" => &mut version,
            _ => return None,
        };
        if *seen {
            return None;
        }
        walk.plain_str()?;
        *seen = true;
        Some(())
    })?;
    (name && version).then_some(())
}

/// [`Body::read`] by serde: what the walk leaves.
fn by_serde(body: &[u8]) -> Option<Body> {
    let message: Message<'_> = serde_json::from_slice(body).ok()?;
    let Object(params) = message.params;
    let Object(meta) = params.meta;
    if message.jsonrpc != "2.0" || message.method != TOOLS_CALL || meta.version != version() {
        return None;
    }
    Some(Body {
        id: message.id,
        name: params.name.into_owned(),
        arguments: params.arguments,
        progress: meta.progress_token,
        traceparent: meta.traceparent,
        capabilities: meta.capabilities.0,
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Message<'a> {
    #[serde(borrow)]
    jsonrpc: Cow<'a, str>,
    id: RequestId,
    #[serde(borrow)]
    method: Cow<'a, str>,
    #[serde(borrow)]
    params: Object<Params<'a>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Params<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(default)]
    arguments: Option<JsonObject>,
    #[serde(rename = "_meta")]
    meta: Object<Meta>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Meta {
    #[serde(default, rename = "progressToken")]
    progress_token: Option<ProgressToken>,
    /// W3C trace context (SEP-414); anything but a string leaves the request to rmcp.
    #[serde(default)]
    traceparent: Option<String>,
    #[serde(rename = "io.modelcontextprotocol/protocolVersion")]
    version: String,
    #[serde(rename = "io.modelcontextprotocol/clientCapabilities")]
    capabilities: Object<ClientCapabilities>,
    /// Read only to leave a malformed one to rmcp.
    #[serde(default, rename = "io.modelcontextprotocol/clientInfo")]
    _client_info: Option<Object<Implementation>>,
}

#[cfg(test)]
mod tests {
    use rmcp::model::NumberOrString;

    use super::*;

    /// Bodies the walk takes, each a different shape of what clients write.
    const PLAIN: &[&str] = &[
        // rmcp's client, as `bench` captured it.
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"rmcp","version":"3.11.0"},"io.modelcontextprotocol/protocolVersion":"2026-07-28","progressToken":0},"arguments":{"text":"hello world!"},"name":"s0__echo"}}"#,
        r#"{"method":"tools/call","params":{"name":"a","arguments":{"x":[1,2.5,{"y":null}],"é":"\u00e9\n"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}},"roots":{"listChanged":true},"extensions":{"io.modelcontextprotocol/ui":{}}}}},"jsonrpc":"2.0","id":"req-1"}"#,
        "{ \"jsonrpc\" : \"2.0\" ,\n\t\"id\" : -12 , \"method\" : \"tools/call\" , \"params\" : { \"name\" : \"b\" , \"_meta\" : { \"io.modelcontextprotocol/clientCapabilities\" : { } , \"io.modelcontextprotocol/protocolVersion\" : \"2026-07-28\" } } }\r\n",
        r#"{"jsonrpc":"2.0","id":0,"method":"tools/call","params":{"name":"c","arguments":null,"_meta":{"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":null,"progressToken":null,"traceparent":null}}}"#,
        r#"{"jsonrpc":"2.0","id":9223372036854775807,"method":"tools/call","params":{"_meta":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","progressToken":"p","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"name":"d","arguments":{}}}"#,
        // A client's info with more than a name and a version: read by serde on its own.
        r#"{"jsonrpc":"2.0","id":"","method":"tools/call","params":{"name":"","_meta":{"io.modelcontextprotocol/clientInfo":{"name":"n","title":"T","version":"1","websiteUrl":"https://example.com"},"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"arguments":{"k":"v","k":"w"}}}"#,
    ];

    #[test]
    fn plain_bodies_are_read_as_serde_reads_them() {
        for body in PLAIN {
            let walked = walk(body.as_bytes());
            assert!(walked.is_some(), "not walked: {body}");
            assert_eq!(walked, by_serde(body.as_bytes()), "{body}");
        }
        let call = walk(PLAIN[0].as_bytes()).unwrap();
        assert_eq!(call.id, RequestId::Number(1));
        assert_eq!(call.name, "s0__echo");
        assert_eq!(
            call.progress,
            Some(ProgressToken(NumberOrString::Number(0)))
        );
        assert_eq!(call.arguments.unwrap()["text"], "hello world!");
        assert_eq!(call.capabilities, ClientCapabilities::default());
        let call = walk(PLAIN[1].as_bytes()).unwrap();
        assert!(call.capabilities.elicitation.is_some() && call.capabilities.roots.is_some());
        assert!(call.capabilities.extensions.is_some());
        let call = walk(PLAIN[4].as_bytes()).unwrap();
        assert_eq!(call.traceparent.as_deref().map(str::len), Some(55));
        // Duplicate argument keys: the last one, as serde's map keeps it.
        assert_eq!(
            walk(PLAIN[5].as_bytes()).unwrap().arguments.unwrap()["k"],
            "w"
        );
    }

    #[test]
    fn what_is_not_plain_is_left_to_serde() {
        let meta = r#""_meta":{"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/protocolVersion":"2026-07-28"}"#;
        // Taken by serde, not walked: escapes.
        for body in [
            format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools\/call","params":{{"name":"a",{meta}}}}}"#),
            format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"\u0061",{meta}}}}}"#),
        ]
        .iter()
        {
            assert_eq!(walk(body.as_bytes()), None, "{body}");
            assert!(Body::read(body.as_bytes()).is_some(), "{body}");
        }
        // Taken by neither: a repeated key, another key, another version or method, no
        // capabilities, no version, no `_meta`, a task.
        for body in [
            format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"a",{meta}}},"id":2}}"#),
            format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"a",{meta}}},"x":1}}"#),
            format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{"name":"a",{meta}}}}}"#),
            format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"a","task":{{}},{meta}}}}}"#),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_meta":{"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/protocolVersion":"2025-11-25"}}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_meta":{"io.modelcontextprotocol/clientCapabilities":{}}}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_meta":{"io.modelcontextprotocol/clientCapabilities":{"roots":5},"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_meta":{"io.modelcontextprotocol/clientInfo":{"name":"n"},"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#.to_owned(),
        ] {
            assert_eq!(Body::read(body.as_bytes()), None, "{body}");
        }
    }

    /// Every body one edit away from a plain one: whatever the walk takes, serde reads the
    /// same (and the walk still takes many of the harmless edits).
    #[test]
    fn edited_bodies_are_taken_only_as_serde_reads_them() {
        const BYTES: &[u8] = b"\"\\{}[],: \t01-.eEnul\x01\x7f\xc3\xff";
        let (mut taken, mut cases) = (0, 0);
        for body in PLAIN {
            for edit in crate::plain_json::one_edit_away(body.as_bytes(), BYTES) {
                cases += 1;
                if let Some(walked) = walk(&edit) {
                    taken += 1;
                    assert_eq!(
                        Some(walked),
                        by_serde(&edit),
                        "{}",
                        String::from_utf8_lossy(&edit)
                    );
                }
            }
        }
        assert!(taken > cases / 20, "{taken} of {cases} taken");
    }
}
