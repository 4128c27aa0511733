//! The JSON-lines protocol between the gateway and a `toolgate worker` process, and the types both sides share.
//!
//! One frame per line, UTF-8 JSON, tagged by `"type"`.
//!
//! Gateway → worker ([`ToWorker`]):
//! - `{"type":"run","code":"…","tools":["a","b"],"limits":{…}}` starts one program. The worker serves one run at
//!   a time and answers it with exactly one `done`.
//! - `{"type":"result","n":3,"ok":<value>}` or `{"type":"result","n":3,"error":{"code":"DENIED","message":"…"}}`
//!   answers the worker's `call` number `n`.
//! - `{"type":"search_result","n":4,"value":<value>}`, `{"type":"describe_result","n":5,"text":"…"|null}` answer
//!   `search` and `describe`.
//!
//! Worker → gateway ([`FromWorker`]):
//! - `{"type":"ready"}` once, after the sandbox is in place.
//! - `{"type":"call","n":3,"tool":"name","args":{…}}`, `{"type":"search","n":4,"query":"…","limit":5}`,
//!   `{"type":"describe","n":5,"name":"…"}`: requests; `n` is unique over the worker's whole life, so a late
//!   answer to a finished run can never be taken for an answer in the next one.
//! - `{"type":"log","level":"info","text":"…"}`: one captured console line, sent as it happens so that the
//!   logs survive a run that is killed later.
//! - `{"type":"done","value":<value>}` (value absent = `undefined`) or
//!   `{"type":"done","error":{"kind":"exception","message":"…"}}`.
//!
//! The gateway bounds every frame it reads ([`max_frame_bytes`]); a worker that sends anything else is killed.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

/// Why a tool call made from a program failed; the program sees it as a `ToolCallError`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolFailure {
    /// A stable code such as `DENIED`, `UNKNOWN_TOOL`, `TOOL_TIMEOUT`.
    pub code: String,
    /// The reason, as the model should read it.
    pub message: String,
}

/// How a run failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// The program does not parse (TypeScript or JavaScript), or uses `import`/`export`.
    Syntax,
    /// The program threw, or its promise was rejected or never settled.
    Exception,
    /// The wall-clock limit passed (or the client cancelled the run).
    Timeout,
    /// A resource limit: loop iterations, recursion, memory, CPU, tool calls, output bytes.
    Limit,
    /// The worker process died or broke the protocol.
    Crash,
}

impl FailureKind {
    /// The kind as the model reads it: `syntax`, `exception`, `timeout`, `limit`, `crash`.
    pub fn as_str(&self) -> &'static str {
        match self {
            FailureKind::Syntax => "syntax",
            FailureKind::Exception => "exception",
            FailureKind::Timeout => "timeout",
            FailureKind::Limit => "limit",
            FailureKind::Crash => "crash",
        }
    }
}

/// The limits a worker applies inside one run (memory and CPU are per process, set at spawn).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunLimits {
    /// Loop iterations per run, all loops together (see [`super::pool::Limits`]).
    pub loop_iterations: u64,
    /// How deeply calls may nest, checked as each function starts (Boa's own limit, a little
    /// higher, is the backstop).
    pub recursion_depth: usize,
    /// The program's tool calls beyond this many end the run.
    pub max_tool_calls: u32,
    /// Captured logs plus the returned value beyond this many bytes end the run.
    pub max_output_bytes: usize,
}

/// A failure reported in a `done` frame.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DoneError {
    pub kind: FailureKind,
    pub message: String,
}

/// A console level; the gateway keeps the text only, the level is for whoever wants it later.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogLevel {
    Log,
    Info,
    Warn,
    Error,
    Debug,
}

/// A frame the gateway sends to a worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToWorker {
    Run {
        code: String,
        tools: Vec<String>,
        limits: RunLimits,
    },
    Result {
        n: u64,
        /// The tool's value; `Some(Value::Null)` is a real `null`.
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            deserialize_with = "present"
        )]
        ok: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<ToolFailure>,
    },
    SearchResult {
        n: u64,
        value: Value,
    },
    DescribeResult {
        n: u64,
        text: Option<String>,
    },
}

/// A frame a worker sends to the gateway.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FromWorker {
    Ready,
    Call {
        n: u64,
        tool: String,
        args: Value,
    },
    Search {
        n: u64,
        query: String,
        #[serde(default)]
        limit: Option<usize>,
    },
    Describe {
        n: u64,
        name: String,
    },
    Log {
        level: LogLevel,
        text: String,
    },
    Done {
        /// The returned value; absent means `undefined`, `Some(Value::Null)` is a real `null`.
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            deserialize_with = "present"
        )]
        value: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<DoneError>,
    },
}

/// Deserializes a field that is present as `Some`, even when it is `null` (absent stays `None` by `default`).
fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}

/// The bytes a returned value counts against `max_output_bytes`: a string's own length, otherwise its compact
/// JSON. Both sides use this one measure so that they agree on where the limit is.
pub fn value_bytes(value: &Value) -> usize {
    match value {
        Value::String(text) => text.len(),
        other => other.to_string().len(),
    }
}

/// The largest frame the gateway accepts from a worker running with this output limit. Tool arguments travel in
/// frames too, so the bound never drops below 1 MiB of payload; JSON escaping can grow text up to six times
/// (`\u0000`), and the slack covers the envelope.
pub fn max_frame_bytes(max_output_bytes: usize) -> usize {
    max_output_bytes
        .max(1 << 20)
        .saturating_mul(6)
        .saturating_add(64 * 1024)
}

/// The largest serialized tool arguments a worker sends; bigger ones are rejected inside the program.
pub fn max_args_bytes(max_output_bytes: usize) -> usize {
    max_frame_bytes(max_output_bytes) - 64 * 1024
}

/// How deeply a value sent to a worker may nest: frames are parsed with serde_json's recursion limit of 128, and
/// the envelope takes a level.
pub const MAX_VALUE_DEPTH: usize = 100;

/// Whether `value` nests deeper than `max` arrays/objects (checked without recursion).
pub fn nests_deeper_than(value: &Value, max: usize) -> bool {
    let mut stack = vec![(value, 0usize)];
    while let Some((value, depth)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match value {
            Value::Array(items) => Box::new(items.iter()),
            Value::Object(map) => Box::new(map.values()),
            _ => continue,
        };
        if depth + 1 > max {
            return true;
        }
        stack.extend(children.map(|child| (child, depth + 1)));
    }
    false
}

/// Serializes a frame as one line (with its newline).
pub fn encode<T: Serialize>(frame: &T) -> Vec<u8> {
    // Serializing these frames cannot fail: every map key is a string and every value is already JSON.
    let mut line = serde_json::to_vec(frame).unwrap_or_else(|_| b"{}".to_vec());
    line.push(b'\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn null_values_survive_and_absent_means_undefined() {
        let done = FromWorker::Done {
            value: Some(Value::Null),
            error: None,
        };
        let line = encode(&done);
        assert_eq!(line, b"{\"type\":\"done\",\"value\":null}\n");
        let back: FromWorker = serde_json::from_slice(&line).unwrap();
        assert_eq!(back, done);
        let undefined: FromWorker = serde_json::from_str(r#"{"type":"done"}"#).unwrap();
        assert_eq!(
            undefined,
            FromWorker::Done {
                value: None,
                error: None
            }
        );
        let result: ToWorker =
            serde_json::from_str(r#"{"type":"result","n":1,"ok":null}"#).unwrap();
        assert_eq!(
            result,
            ToWorker::Result {
                n: 1,
                ok: Some(Value::Null),
                error: None
            }
        );
    }

    #[test]
    fn frames_have_the_documented_shape() {
        let call: FromWorker =
            serde_json::from_value(json!({"type":"call","n":3,"tool":"t","args":{"a":1}})).unwrap();
        assert_eq!(
            call,
            FromWorker::Call {
                n: 3,
                tool: "t".into(),
                args: json!({"a":1})
            }
        );
        let failed = ToWorker::Result {
            n: 2,
            ok: None,
            error: Some(ToolFailure {
                code: "DENIED".into(),
                message: "no".into(),
            }),
        };
        assert_eq!(
            serde_json::to_value(&failed).unwrap(),
            json!({"type":"result","n":2,"error":{"code":"DENIED","message":"no"}})
        );
        let error: FromWorker = serde_json::from_value(
            json!({"type":"done","error":{"kind":"limit","message":"more than 3 tool calls"}}),
        )
        .unwrap();
        assert!(matches!(
            error,
            FromWorker::Done {
                error: Some(DoneError {
                    kind: FailureKind::Limit,
                    ..
                }),
                ..
            }
        ));
    }

    #[test]
    fn depth_counts_arrays_and_objects() {
        assert!(!nests_deeper_than(&json!(1), 0));
        assert!(!nests_deeper_than(&json!([1, {"a": 2}]), 2));
        assert!(nests_deeper_than(&json!([1, {"a": [2]}]), 2));
        let mut deep = json!(0);
        for _ in 0..200 {
            deep = json!([deep]);
        }
        assert!(nests_deeper_than(&deep, MAX_VALUE_DEPTH));
        assert!(!nests_deeper_than(&deep, 200));
        let line = encode(&ToWorker::SearchResult { n: 1, value: deep });
        assert!(
            serde_json::from_slice::<ToWorker>(&line).is_err(),
            "serde_json's own limit is lower"
        );
    }

    #[test]
    fn output_bytes_count_strings_raw_and_the_rest_as_compact_json() {
        assert_eq!(value_bytes(&json!("héllo")), 6);
        assert_eq!(value_bytes(&json!({"a": [1, 2]})), 11);
    }
}
