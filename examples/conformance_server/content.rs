//! What `conformance-server` offers, as JSON in the shapes the conformance scenarios expect.
//!
//! Names, URIs and texts follow the scenario descriptions of
//! `@modelcontextprotocol/conformance@0.1.16` (`server` scenarios): each function names the
//! scenario that reads it.

use serde_json::{Value, json};

/// A 1×1 red PNG (`tools-call-image`, `resources-read-binary`, `prompts-get-with-image`).
pub const PNG_BASE64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A WAV header with two bytes of silence (`tools-call-audio` checks `audio/wav`).
pub const WAV_BASE64: &str = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";

/// The logger name of every `notifications/message` this server sends.
pub const LOGGER: &str = "conformance-server";

/// `{"type": "object", "properties": {}}`: the schema of the tools without arguments.
fn no_arguments() -> Value {
    json!({"type": "object", "properties": {}})
}

fn one_string(name: &str, description: &str) -> Value {
    json!({
        "type": "object",
        "properties": {name: {"type": "string", "description": description}},
        "required": [name]
    })
}

/// Every tool, in listing order: `(name, description, inputSchema)`.
pub fn tools() -> Vec<(&'static str, &'static str, Value)> {
    vec![
        (
            "test_simple_text",
            "Returns one text block (tools-call-simple-text)",
            no_arguments(),
        ),
        (
            "test_image_content",
            "Returns one PNG image block (tools-call-image)",
            no_arguments(),
        ),
        (
            "test_audio_content",
            "Returns one WAV audio block (tools-call-audio)",
            no_arguments(),
        ),
        (
            "test_embedded_resource",
            "Returns one embedded text resource (tools-call-embedded-resource)",
            no_arguments(),
        ),
        (
            "test_multiple_content_types",
            "Returns text, image and embedded resource blocks (tools-call-mixed-content)",
            no_arguments(),
        ),
        (
            "test_tool_with_logging",
            "Sends three info log messages 50 ms apart while running (tools-call-with-logging)",
            no_arguments(),
        ),
        (
            "test_tool_with_progress",
            "Reports progress 0, 50 and 100 of 100, 50 ms apart (tools-call-with-progress)",
            no_arguments(),
        ),
        (
            "test_error_handling",
            "Always returns an isError result (tools-call-error)",
            no_arguments(),
        ),
        (
            "test_sampling",
            "Asks the client for sampling/createMessage with the prompt (tools-call-sampling)",
            one_string("prompt", "The prompt to send to the LLM"),
        ),
        (
            "test_elicitation",
            "Asks the client for elicitation/create with the message (tools-call-elicitation)",
            one_string("message", "The message to show the user"),
        ),
        (
            "test_elicitation_sep1034_defaults",
            "Elicits a form whose fields carry defaults (elicitation-sep1034-defaults)",
            no_arguments(),
        ),
        (
            "test_elicitation_sep1330_enums",
            "Elicits a form with the five enum variants (elicitation-sep1330-enums)",
            no_arguments(),
        ),
        (
            "json_schema_2020_12_tool",
            "Tool with JSON Schema 2020-12 features (json-schema-2020-12, a pending scenario)",
            json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "$defs": {
                    "address": {
                        "type": "object",
                        "properties": {"street": {"type": "string"}, "city": {"type": "string"}}
                    }
                },
                "properties": {
                    "name": {"type": "string"},
                    "address": {"$ref": "#/$defs/address"}
                },
                "additionalProperties": false
            }),
        ),
    ]
}

/// The result of a tool whose answer does not depend on the session, or `None`.
pub fn fixed_tool_result(name: &str, arguments: &Value) -> Option<Value> {
    let content = match name {
        "test_simple_text" => {
            json!([{"type": "text", "text": "This is a simple text response for testing."}])
        }
        "test_image_content" => {
            json!([{"type": "image", "data": PNG_BASE64, "mimeType": "image/png"}])
        }
        "test_audio_content" => {
            json!([{"type": "audio", "data": WAV_BASE64, "mimeType": "audio/wav"}])
        }
        "test_embedded_resource" => json!([{
            "type": "resource",
            "resource": {
                "uri": "test://embedded-resource",
                "mimeType": "text/plain",
                "text": "This is an embedded resource content."
            }
        }]),
        "test_multiple_content_types" => json!([
            {"type": "text", "text": "Multiple content types test:"},
            {"type": "image", "data": PNG_BASE64, "mimeType": "image/png"},
            {
                "type": "resource",
                "resource": {
                    "uri": "test://mixed-content-resource",
                    "mimeType": "application/json",
                    "text": "{\"test\":\"data\",\"value\":123}"
                }
            }
        ]),
        "test_error_handling" => {
            return Some(json!({
                "isError": true,
                "content": [{
                    "type": "text",
                    "text": "This tool intentionally returns an error for testing"
                }]
            }));
        }
        "json_schema_2020_12_tool" => json!([{
            "type": "text",
            "text": format!("JSON Schema 2020-12 tool called with: {arguments}")
        }]),
        _ => return None,
    };
    Some(json!({"content": content}))
}

/// The `elicitation/create` params a tool sends, or `None` for a tool that elicits nothing.
/// `message` is the `test_elicitation` argument.
pub fn elicitation(tool: &str, message: &str) -> Option<Value> {
    let (message, properties, required) = match tool {
        // tools-call-elicitation: the scenario's description names these two fields.
        "test_elicitation" => (
            message.to_owned(),
            json!({
                "username": {"type": "string", "description": "User's response"},
                "email": {"type": "string", "description": "User's email address"}
            }),
            json!(["username", "email"]),
        ),
        "test_elicitation_sep1034_defaults" => (
            "Please review and update the form fields with defaults".to_owned(),
            json!({
                "name": {"type": "string", "description": "User name", "default": "John Doe"},
                "age": {"type": "integer", "description": "User age", "default": 30},
                "score": {"type": "number", "description": "User score", "default": 95.5},
                "status": {
                    "type": "string",
                    "description": "User status",
                    "enum": ["active", "inactive", "pending"],
                    "default": "active"
                },
                "verified": {
                    "type": "boolean",
                    "description": "Verification status",
                    "default": true
                }
            }),
            json!([]),
        ),
        "test_elicitation_sep1330_enums" => (
            "Please select options from the enum fields".to_owned(),
            json!({
                "untitledSingle": {
                    "type": "string",
                    "description": "Select one option",
                    "enum": ["option1", "option2", "option3"]
                },
                "titledSingle": {
                    "type": "string",
                    "description": "Select one option with titles",
                    "oneOf": [
                        {"const": "value1", "title": "First Option"},
                        {"const": "value2", "title": "Second Option"},
                        {"const": "value3", "title": "Third Option"}
                    ]
                },
                "legacyEnum": {
                    "type": "string",
                    "description": "Select one option (legacy)",
                    "enum": ["opt1", "opt2", "opt3"],
                    "enumNames": ["Option One", "Option Two", "Option Three"]
                },
                "untitledMulti": {
                    "type": "array",
                    "description": "Select multiple options",
                    "minItems": 1,
                    "maxItems": 3,
                    "items": {"type": "string", "enum": ["option1", "option2", "option3"]}
                },
                "titledMulti": {
                    "type": "array",
                    "description": "Select multiple options with titles",
                    "minItems": 1,
                    "maxItems": 3,
                    "items": {
                        "anyOf": [
                            {"const": "value1", "title": "First Choice"},
                            {"const": "value2", "title": "Second Choice"},
                            {"const": "value3", "title": "Third Choice"}
                        ]
                    }
                }
            }),
            json!([]),
        ),
        _ => return None,
    };
    Some(json!({
        "mode": "form",
        "message": message,
        "requestedSchema": {"type": "object", "properties": properties, "required": required}
    }))
}

/// The subscribable resource of `resources-subscribe` and `resources-unsubscribe`.
pub const WATCHED_URI: &str = "test://watched-resource";

/// `resources/list` (resources-list: every resource has `uri` and `name`).
pub fn resources() -> Value {
    json!({"resources": [
        {
            "uri": "test://static-text",
            "name": "static-text",
            "title": "Static Text Resource",
            "description": "A static text resource for testing",
            "mimeType": "text/plain"
        },
        {
            "uri": "test://static-binary",
            "name": "static-binary",
            "title": "Static Binary Resource",
            "description": "A static binary resource (image) for testing",
            "mimeType": "image/png"
        },
        {
            "uri": WATCHED_URI,
            "name": "watched-resource",
            "title": "Watched Resource",
            "description": "A resource clients can subscribe to",
            "mimeType": "text/plain"
        }
    ]})
}

/// The one template (resources-templates-read).
pub const TEMPLATE: &str = "test://template/{id}/data";

/// `resources/templates/list`.
pub fn resource_templates() -> Value {
    json!({"resourceTemplates": [{
        "uriTemplate": TEMPLATE,
        "name": "template",
        "title": "Resource Template",
        "description": "A resource template with parameter substitution",
        "mimeType": "application/json"
    }]})
}

/// `resources/read` of `uri`, or `None` when no resource or template matches.
pub fn read_resource(uri: &str) -> Option<Value> {
    let content = match uri {
        "test://static-text" => json!({
            "uri": uri,
            "mimeType": "text/plain",
            "text": "This is the content of the static text resource."
        }),
        "test://static-binary" => json!({"uri": uri, "mimeType": "image/png", "blob": PNG_BASE64}),
        WATCHED_URI => {
            json!({"uri": uri, "mimeType": "text/plain", "text": "Watched resource content"})
        }
        _ => {
            let id = template_id(uri)?;
            let text =
                json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")});
            json!({"uri": uri, "mimeType": "application/json", "text": text.to_string()})
        }
    };
    Some(json!({"contents": [content]}))
}

/// The `{id}` of a URI that matches [`TEMPLATE`]: one non-empty path segment.
fn template_id(uri: &str) -> Option<&str> {
    let id = uri
        .strip_prefix("test://template/")?
        .strip_suffix("/data")?;
    (!id.is_empty() && !id.contains('/')).then_some(id)
}

/// `prompts/list` (prompts-list: every prompt has `name` and `description`).
pub fn prompts() -> Value {
    let argument = |name: &str, description: &str| json!({"name": name, "description": description, "required": true});
    json!({"prompts": [
        {
            "name": "test_simple_prompt",
            "title": "Simple Test Prompt",
            "description": "A simple prompt without arguments"
        },
        {
            "name": "test_prompt_with_arguments",
            "title": "Prompt With Arguments",
            "description": "A prompt with required arguments",
            "arguments": [
                argument("arg1", "First test argument"),
                argument("arg2", "Second test argument")
            ]
        },
        {
            "name": "test_prompt_with_embedded_resource",
            "title": "Prompt With Embedded Resource",
            "description": "A prompt that includes an embedded resource",
            "arguments": [argument("resourceUri", "URI of the resource to embed")]
        },
        {
            "name": "test_prompt_with_image",
            "title": "Prompt With Image",
            "description": "A prompt that includes image content"
        }
    ]})
}

/// `prompts/get`; `Err` names what is wrong with the request.
pub fn get_prompt(name: &str, arguments: &serde_json::Map<String, Value>) -> Result<Value, String> {
    let argument = |key: &str| match arguments.get(key) {
        Some(Value::String(s)) => Ok(s.as_str()),
        Some(_) => Err(format!("prompt {name}: argument {key} must be a string")),
        None => Err(format!("prompt {name}: missing required argument {key}")),
    };
    let user = |content: Value| json!({"role": "user", "content": content});
    let messages = match name {
        "test_simple_prompt" => json!([user(
            json!({"type": "text", "text": "This is a simple prompt for testing."})
        )]),
        "test_prompt_with_arguments" => {
            let (arg1, arg2) = (argument("arg1")?, argument("arg2")?);
            json!([user(json!({
                "type": "text",
                "text": format!("Prompt with arguments: arg1='{arg1}', arg2='{arg2}'")
            }))])
        }
        "test_prompt_with_embedded_resource" => json!([
            user(json!({
                "type": "resource",
                "resource": {
                    "uri": argument("resourceUri")?,
                    "mimeType": "text/plain",
                    "text": "Embedded resource content for testing."
                }
            })),
            user(json!({"type": "text", "text": "Please process the embedded resource above."}))
        ]),
        "test_prompt_with_image" => json!([
            user(json!({"type": "image", "data": PNG_BASE64, "mimeType": "image/png"})),
            user(json!({"type": "text", "text": "Please analyze the image above."}))
        ]),
        _ => return Err(format!("unknown prompt {name}")),
    };
    Ok(json!({"messages": messages}))
}

/// `completion/complete` values for an argument of a prompt or of the template, filtered by
/// the typed prefix (completion-complete asks for `arg1` of `test_prompt_with_arguments`).
pub fn complete(reference: &Value, argument: &str, prefix: &str) -> Result<Value, String> {
    let candidates: &[&str] = match (
        reference.get("type").and_then(Value::as_str),
        reference
            .get("name")
            .or_else(|| reference.get("uri"))
            .and_then(Value::as_str),
        argument,
    ) {
        (Some("ref/prompt"), Some("test_prompt_with_arguments"), "arg1" | "arg2") => {
            &["paris", "park", "party", "test-value"]
        }
        (Some("ref/prompt"), Some("test_prompt_with_embedded_resource"), "resourceUri") => {
            &["test://static-text", "test://static-binary", WATCHED_URI]
        }
        (Some("ref/resource"), Some(TEMPLATE), "id") => &["123", "456", "789"],
        _ => {
            return Err(format!(
                "nothing to complete for argument {argument} of {reference}"
            ));
        }
    };
    let values: Vec<&str> = candidates
        .iter()
        .copied()
        .filter(|c| c.starts_with(prefix))
        .collect();
    Ok(json!({"completion": {"values": values, "total": values.len(), "hasMore": false}}))
}
