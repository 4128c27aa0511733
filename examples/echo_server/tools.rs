//! echo-server's built-in tools: their declarations, and the bodies of those that need no server state.

use super::*;

/// Turns a `json!` object literal into a tool schema.
pub(super) fn schema(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(map) => Arc::new(map),
        _ => Arc::new(JsonObject::new()),
    }
}

pub(super) fn text_schema() -> Arc<JsonObject> {
    schema(json!({
        "type": "object",
        "properties": {
            "text": {"type": "string", "description": "Text to echo back"}
        },
        "required": ["text"],
        "additionalProperties": false
    }))
}

pub(super) fn echo_like(
    name: impl Into<Cow<'static, str>>,
    description: impl Into<Cow<'static, str>>,
) -> Tool {
    Tool::new(name, description, text_schema())
}

pub(super) fn builtin_tools() -> Vec<Entry> {
    let echo = echo_like("echo", "Return the given text unchanged")
        .with_title("Echo")
        .with_annotations(ToolAnnotations::new().read_only(true).idempotent(true));
    let add = Tool::new(
        "add",
        "Add two numbers and return their sum as structured content",
        schema(json!({
            "type": "object",
            "properties": {
                "a": {"type": "number", "description": "Left operand"},
                "b": {"type": "number", "description": "Right operand"}
            },
            "required": ["a", "b"],
            "additionalProperties": false
        })),
    )
    .with_raw_output_schema(schema(json!({
        "type": "object",
        "properties": {"sum": {"type": "number"}},
        "required": ["sum"]
    })));
    let sleep = Tool::new(
        "sleep",
        "Wait `ms` milliseconds in `steps` equal waits, reporting progress after each step",
        schema(json!({
            "type": "object",
            "properties": {
                "ms": {"type": "integer", "minimum": 0, "description": "Total time to wait"},
                "steps": {
                    "type": "integer",
                    "minimum": 1,
                    "default": 1,
                    "description": "Number of equal waits; progress is reported after each"
                }
            },
            "required": ["ms"],
            "additionalProperties": false
        })),
    );
    let fail = Tool::new(
        "fail",
        "Always fail with a tool error (isError: true). The message says what failed.",
        schema(json!({
            "type": "object",
            "properties": {
                "message": {"type": "string", "description": "Error text to return"}
            },
            "required": [],
            "additionalProperties": false
        })),
    );
    let name_schema = |what: &str| {
        schema(json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": what}
            },
            "required": ["name"],
            "additionalProperties": false
        }))
    };
    let add_tool = Tool::new(
        "add_tool",
        "Add an echo-like tool with the given name and notify tools/list_changed",
        name_schema("Name of the tool to add"),
    );
    let remove_tool = Tool::new(
        "remove_tool",
        "Remove a tool added by add_tool and notify tools/list_changed",
        name_schema("Name of the tool to remove"),
    );
    vec![
        Entry {
            tool: echo,
            kind: Kind::Echo,
        },
        Entry {
            tool: add,
            kind: Kind::Add,
        },
        Entry {
            tool: sleep,
            kind: Kind::Sleep,
        },
        Entry {
            tool: fail,
            kind: Kind::Fail,
        },
        Entry {
            tool: add_tool,
            kind: Kind::AddTool,
        },
        Entry {
            tool: remove_tool,
            kind: Kind::RemoveTool,
        },
    ]
}

pub(super) fn text_result(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text)])
}

pub(super) fn error_result(text: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

/// Rejects arguments that the tool's schema does not declare (`additionalProperties: false`).
pub(super) fn check_keys(args: &JsonObject, allowed: &[&str]) -> Result<(), String> {
    match args.keys().find(|key| !allowed.contains(&key.as_str())) {
        Some(key) => Err(format!("unexpected argument `{key}`")),
        None => Ok(()),
    }
}

pub(super) fn required_string(args: &JsonObject, key: &str) -> Result<String, String> {
    match args.get(key) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(format!("`{key}` must be a string")),
        None => Err(format!("missing required argument `{key}`")),
    }
}

pub(super) fn echo(args: &JsonObject) -> Result<CallToolResult, String> {
    check_keys(args, &["text"])?;
    Ok(text_result(required_string(args, "text")?))
}

pub(super) fn big(args: &JsonObject) -> Result<CallToolResult, String> {
    check_keys(args, &["bytes"])?;
    match args.get("bytes").and_then(Value::as_u64) {
        Some(bytes) if bytes <= MAX_BIG_BYTES => Ok(text_result("x".repeat(bytes as usize))),
        _ => Err(format!("`bytes` must be an integer in 0..={MAX_BIG_BYTES}")),
    }
}

pub(super) fn add(args: &JsonObject) -> Result<CallToolResult, String> {
    check_keys(args, &["a", "b"])?;
    let number = |key: &str| match args.get(key) {
        Some(Value::Number(n)) => Ok(n.clone()),
        Some(_) => Err(format!("`{key}` must be a number")),
        None => Err(format!("missing required argument `{key}`")),
    };
    let (a, b) = (number("a")?, number("b")?);
    // Integers stay integers (`1 + 2` gives `3`, not `3.0`) unless they overflow.
    let sum = match (a.as_i64(), b.as_i64()) {
        (Some(a), Some(b)) if a.checked_add(b).is_some() => json!(a + b),
        _ => {
            let sum = a.as_f64().unwrap_or(f64::NAN) + b.as_f64().unwrap_or(f64::NAN);
            match serde_json::Number::from_f64(sum) {
                Some(n) => Value::Number(n),
                None => return Err("the sum is not a finite number".into()),
            }
        }
    };
    // `structured` also adds a text block holding the same JSON, serialised.
    if std::env::var("ECHO_BAD_OUTPUT").is_ok_and(|v| v == "1") {
        return Ok(CallToolResult::structured(json!({"sum": sum.to_string()})));
    }
    Ok(CallToolResult::structured(json!({"sum": sum})))
}

pub(super) fn fail(args: &JsonObject) -> Result<CallToolResult, String> {
    check_keys(args, &["message"])?;
    let message = match args.get("message") {
        None | Some(Value::Null) => "failed on purpose".to_string(),
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err("`message` must be a string".into()),
    };
    Ok(error_result(message))
}
