//! A client message's envelope read in one pass, a `tools/call`'s params read as the call they are.
//!
//! Reading `params` as raw JSON first and as a call after scanned them twice (a raw value is
//! skipped over, then checked as UTF-8), and `_meta` the same way. Every SDK writes `method`
//! before `params`, so a `tools/call`'s params are read once, straight into [`CallParams`];
//! params that come first stay raw and are read after, as before. The saving is small: most
//! of the 7k instructions that reading a call's line costs are per key (BENCHMARKS.md,
//! "Per-call trims").
//!
//! What is taken is what the two-pass reading took: an object (a struct is not read from
//! an array), no duplicate or unknown keys in the params or their `_meta`; anything else is
//! a failed read, and the message goes to rmcp.

use std::{borrow::Cow, fmt, marker::PhantomData};

use rmcp::model::{JsonObject, ProgressToken, RequestId};
use serde::{
    Deserialize, Deserializer,
    de::{self, IgnoredAny, MapAccess, Visitor, value::MapAccessDeserializer},
};
use serde_json::value::RawValue;

use crate::downstream::guard::TOOLS_CALL;

/// The parts of a message looked at to decide.
pub(super) struct Envelope<'a> {
    pub jsonrpc: Cow<'a, str>,
    pub id: Option<RequestId>,
    pub method: Option<Cow<'a, str>>,
    pub params: Params<'a>,
}

pub(super) enum Params<'a> {
    Absent,
    /// Not a `tools/call`'s, or before its `method`: read by whoever takes the method.
    Raw(&'a RawValue),
    /// A `tools/call`'s, read as such.
    Call(CallParams<'a>),
}

impl<'a> Params<'a> {
    /// The params of anything but a `tools/call` (those come read).
    pub fn raw(&self) -> Option<&'a RawValue> {
        match self {
            Params::Raw(raw) => Some(raw),
            _ => None,
        }
    }
}

/// `tools/call` params the fast path takes; any other key leaves the request to rmcp.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CallParams<'a> {
    #[serde(borrow)]
    pub name: Cow<'a, str>,
    #[serde(default)]
    pub arguments: Option<JsonObject>,
    #[serde(default, rename = "_meta")]
    pub meta: Option<Object<CallMeta>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CallMeta {
    #[serde(rename = "progressToken")]
    pub progress_token: Option<ProgressToken>,
    /// W3C trace context (SEP-414); anything but a string leaves the request to rmcp.
    pub traceparent: Option<String>,
}

/// A string borrowed from the message when it has no escapes, else owned. serde's own `Cow`
/// always owns outside a derive's `#[serde(borrow)]`: that was an allocation for every key
/// and string value of the envelope.
struct Text<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TextVisitor<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for TextVisitor<'a> {
            type Value = Text<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, text: &'de str) -> Result<Text<'a>, E> {
                Ok(Text(Cow::Borrowed(text)))
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<Text<'a>, E> {
                Ok(Text(Cow::Owned(text.to_owned())))
            }
            fn visit_string<E: de::Error>(self, text: String) -> Result<Text<'a>, E> {
                Ok(Text(Cow::Owned(text)))
            }
        }
        deserializer.deserialize_str(TextVisitor(PhantomData))
    }
}

/// `T` read from a JSON object only (serde reads a struct from an array too).
pub(crate) struct Object<T>(pub T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ObjectVisitor<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjectVisitor<T> {
            type Value = T;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(MapAccessDeserializer::new(map))
            }
        }
        deserializer
            .deserialize_map(ObjectVisitor(PhantomData))
            .map(Object)
    }
}

impl<'a> Envelope<'a> {
    /// `None` for anything but an object with a string `jsonrpc`, keys at most once, and (for
    /// a `tools/call` whose params come after its method) params a call can be read from.
    pub fn read(message: &'a [u8]) -> Option<Self> {
        // Read as a map only: an array is refused, as JSON-RPC messages are objects.
        serde_json::from_slice(message).ok()
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Envelope<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(EnvelopeVisitor(PhantomData))
    }
}

struct EnvelopeVisitor<'a>(PhantomData<&'a ()>);

impl<'de: 'a, 'a> Visitor<'de> for EnvelopeVisitor<'a> {
    type Value = Envelope<'a>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON-RPC message")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Envelope<'a>, A::Error> {
        fn once<T, E: de::Error>(slot: &Option<T>, key: &'static str) -> Result<(), E> {
            match slot {
                Some(_) => Err(E::duplicate_field(key)),
                None => Ok(()),
            }
        }
        let mut jsonrpc: Option<Cow<'a, str>> = None;
        let mut id: Option<Option<RequestId>> = None;
        let mut method: Option<Option<Cow<'a, str>>> = None;
        let mut params: Option<Params<'a>> = None;
        while let Some(Text(key)) = map.next_key::<Text<'de>>()? {
            match key.as_ref() {
                "jsonrpc" => {
                    once(&jsonrpc, "jsonrpc")?;
                    jsonrpc = Some(map.next_value::<Text<'a>>()?.0);
                }
                "id" => {
                    once(&id, "id")?;
                    id = Some(map.next_value()?);
                }
                "method" => {
                    once(&method, "method")?;
                    method = Some(map.next_value::<Option<Text<'a>>>()?.map(|m| m.0));
                }
                "params" => {
                    once(&params, "params")?;
                    let call = matches!(&method, Some(Some(m)) if m == TOOLS_CALL);
                    params = Some(if call {
                        Params::Call(map.next_value::<Object<CallParams<'a>>>()?.0)
                    } else {
                        match map.next_value::<Option<&'a RawValue>>()? {
                            Some(raw) => Params::Raw(raw),
                            None => Params::Absent,
                        }
                    });
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Envelope {
            jsonrpc: jsonrpc.ok_or_else(|| de::Error::missing_field("jsonrpc"))?,
            id: id.flatten(),
            method: method.flatten(),
            params: params.unwrap_or(Params::Absent),
        })
    }
}

/// Whether this JSON text is an object (its first non-blank byte is `{`).
pub(super) fn is_object(json: &[u8]) -> bool {
    json.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(line: &str) -> Option<(Option<RequestId>, String)> {
        let envelope = Envelope::read(line.as_bytes())?;
        match envelope.params {
            Params::Call(params) => Some((envelope.id, params.name.into_owned())),
            _ => None,
        }
    }

    #[test]
    fn a_call_is_read_in_one_pass_as_the_two_pass_reading_read_it() {
        let line = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"a","arguments":{"x":1},"_meta":{"progressToken":"p","traceparent":"t"}}}"#;
        assert_eq!(call(line), Some((Some(RequestId::Number(7)), "a".into())));
        // Params before the method stay raw, for a second reading.
        let late = Envelope::read(
            br#"{"params":{"name":"a"},"jsonrpc":"2.0","id":1,"method":"tools/call"}"#,
        )
        .unwrap();
        assert!(matches!(late.params, Params::Raw(raw) if raw.get() == r#"{"name":"a"}"#));
        // Another method's params stay raw.
        let list = Envelope::read(
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":"c"}}"#,
        )
        .unwrap();
        assert!(list.params.raw().is_some());
        // What the two-pass reading refused is refused.
        for refused in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","other":1}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":["a"]}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":null}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_meta":["p"]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_meta":{"other":1}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":[1]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call","params":{"name":"a"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","name":"b"}}"#,
            r#"{"id":1,"method":"tools/call","params":{"name":"a"}}"#,
            r#"["2.0",1,"tools/call",{"name":"a"}]"#,
        ] {
            assert!(call(refused).is_none(), "{refused}");
        }
        // Plain strings are borrowed from the line, escaped ones read as serde reads them.
        let plain = Envelope::read(br#"{"jsonrpc":"2.0","method":"tools/list"}"#).unwrap();
        assert!(matches!(plain.jsonrpc, Cow::Borrowed("2.0")));
        assert!(matches!(plain.method, Some(Cow::Borrowed("tools/list"))));
        let escaped = Envelope::read(br#"{"jsonrpc":"2.0","metho\u0064":"tools\/list"}"#).unwrap();
        assert_eq!(escaped.method.as_deref(), Some("tools/list"));
        assert!(Envelope::read(br#"{"jsonrpc":2,"method":"tools/list"}"#).is_none());
        // `null` is absent, as before.
        let nulls = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":null,"_meta":null}}"#;
        assert!(call(nulls).is_some());
    }
}
