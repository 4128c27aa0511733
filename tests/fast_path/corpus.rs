//! The corpus types: how a session opens, what each step sends and expects, and the builder.

use serde_json::{Value, json};

use crate::client::to_line;

/// How a session is opened.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Era {
    /// `initialize` asking for this protocol version, then `notifications/initialized`.
    Initialize(&'static str),
    /// The 2026-07-28 lifecycle: `server/discover`, then the protocol keys in every
    /// request's `_meta`.
    Discover,
}

/// The `_meta` keys a 2026-07-28 request carries.
pub(crate) fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "toolgate-tests", "version": "0"}
    })
}

/// What an awaited answer must be (checked on each run's transcript).
#[derive(Debug, Clone)]
pub(crate) enum Expect {
    /// A result, not `isError`, whose first content block is this text.
    Text(String),
    /// A result with `isError: true` and this text, from the tool itself (no toolgate code).
    ToolError(String),
    /// A result with `isError: true` and `_meta["toolgate/error"].code`.
    Code(&'static str),
    /// A JSON-RPC error with this code.
    Rpc(i64),
    /// An empty result (`ping`).
    Empty,
    /// A `tools/list` result that lists this tool.
    Tools(&'static str),
}

/// Whether a result must carry `resultType`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Shape {
    /// As the session's protocol version says.
    Session,
    /// No `resultType` (a 2025-era request).
    Legacy,
    /// `resultType: "complete"` (a 2026-07-28 request).
    Modern,
}

#[derive(Debug)]
pub(crate) enum Step {
    /// Write this line (the newline is added).
    Send(Vec<u8>),
    /// Read lines up to the answer to `id` (`None`: one without an id), then check them.
    Await {
        id: Option<Value>,
        expect: Expect,
        /// `notifications/progress` expected before the answer: the token and the steps.
        progress: Option<(Value, u64)>,
        shape: Shape,
    },
    /// Wait until the upstream log `file` (in the gateway's work directory) holds `needle`
    /// at least `count` times.
    WaitLog {
        file: &'static str,
        needle: String,
        count: usize,
    },
}

#[derive(Debug)]
pub(crate) struct Case {
    pub(crate) name: &'static str,
    pub(crate) steps: Vec<Step>,
    /// Request ids that must never be answered (cancelled calls).
    pub(crate) silent: Vec<Value>,
}

/// Builds the corpus for one era.
pub(crate) struct Corpus {
    pub(crate) discover: bool,
    pub(crate) next_id: u64,
    pub(crate) cancels: usize,
    pub(crate) cases: Vec<Case>,
}

impl Corpus {
    pub(crate) fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// A `tools/call` line; in a `server/discover` session `_meta` carries the protocol keys
    /// too, besides `meta`.
    pub(crate) fn call(
        &self,
        id: impl Into<Value>,
        name: &str,
        arguments: Value,
        meta: Value,
    ) -> Vec<u8> {
        let mut meta = meta.as_object().cloned().unwrap_or_default();
        if self.discover {
            meta.extend(modern_meta().as_object().cloned().unwrap_or_default());
        }
        let mut params = json!({"name": name, "arguments": arguments});
        if !meta.is_empty() {
            params["_meta"] = Value::Object(meta);
        }
        to_line(
            &json!({"jsonrpc": "2.0", "id": id.into(), "method": "tools/call", "params": params}),
        )
    }

    pub(crate) fn echo(&self, id: impl Into<Value>, text: &str) -> Vec<u8> {
        self.call(id, "echo__echo", json!({"text": text}), json!({}))
    }

    /// A line written by hand: `@ID@` is `id`; `@M@`, right after a `{` that opens params,
    /// is `"_meta":{…},` in a `server/discover` session and nothing otherwise.
    pub(crate) fn raw(&self, id: u64, template: &str) -> Vec<u8> {
        let meta = if self.discover {
            format!("\"_meta\":{},", modern_meta())
        } else {
            String::new()
        };
        template
            .replace("@ID@", &id.to_string())
            .replace("@M@", &meta)
            .into_bytes()
    }

    pub(crate) fn case(&mut self, name: &'static str, steps: Vec<Step>) {
        self.cases.push(Case {
            name,
            steps,
            silent: Vec::new(),
        });
    }

    /// One request line and its answer.
    pub(crate) fn single(
        &mut self,
        name: &'static str,
        line: Vec<u8>,
        id: impl Into<Value>,
        expect: Expect,
    ) {
        self.case(name, vec![Step::Send(line), answer(id, expect)]);
    }
}

pub(crate) fn answer(id: impl Into<Value>, expect: Expect) -> Step {
    Step::Await {
        id: Some(id.into()),
        expect,
        progress: None,
        shape: Shape::Session,
    }
}

pub(crate) fn anonymous(code: i64) -> Step {
    Step::Await {
        id: None,
        expect: Expect::Rpc(code),
        progress: None,
        shape: Shape::Session,
    }
}

pub(crate) fn text(s: &str) -> Expect {
    Expect::Text(s.to_owned())
}

/// The text of the unicode cases: emoji (with ZWJ sequences and flags), CJK, right-to-left
/// scripts and overrides, zero-width characters, every kind of escaped control character,
/// quotes, backslashes, U+2028/U+2029 and astral characters.
pub(crate) const UNICODE: &str = "emoji 😀👩‍👩‍👧‍👦🏳️‍🌈🇯🇵 · CJK 中文漢字日本語한국어 · RTL עברית العربية \
    \u{202E}reversed\u{202C} \u{200F}mark · zero-width [\u{200B}\u{200D}\u{FEFF}] · controls \
    [\u{0}\u{1}\u{8}\u{b}\u{c}\u{1f}\u{7f}\t\n\r] · quotes \" ' · backslash \\ · slash / · \
    separators [\u{2028}\u{2029}] · astral 𝄞𐍈\u{10FFFF} · accents e\u{301} é";

/// `s` as a JSON string with everything but printable ASCII written as `\uXXXX` escapes
/// (UTF-16 surrogate pairs for astral characters), and `/` as `\/`.
pub(crate) fn escaped_json_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '/' => out.push_str("\\/"),
            ' '..='~' => out.push(c),
            _ => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
        }
    }
    out.push('"');
    out
}
