//! Compiled JSON-Schema validators for tool inputs and outputs, compiled once per import.

use std::sync::Arc;

use jsonschema::Validator;
use rmcp::model::{CallToolResult, JsonObject, Tool};
use serde_json::Value;

use super::builtin::Limits;
use crate::{
    config::ServerId,
    registry::{CallPolicy, Imported, ToolEntry, annotates_headers},
};

/// At most this many violations are listed; more would drown the model.
const MAX_VIOLATIONS: usize = 20;

/// Prepares `server`'s freshly imported `tools` for calls: compiles their schemas and
/// resolves their timeout and retry. Returns a warning for each schema that does not compile:
/// that tool goes unvalidated.
pub fn import(
    server: &ServerId,
    tools: Vec<Tool>,
    limits: &Limits,
) -> (Vec<Imported>, Vec<String>) {
    let mut warnings = Vec::new();
    let mut compile = |tool: &Tool, which: &str, schema: &JsonObject| -> Option<Validator> {
        match jsonschema::validator_for(&Value::Object(schema.clone())) {
            Ok(validator) => Some(validator),
            Err(error) => {
                warnings.push(format!(
                    "server \"{server}\" tool {:?}: {which} does not compile ({error}); calls to it are not validated",
                    tool.name
                ));
                None
            }
        }
    };
    let imported = tools
        .into_iter()
        .map(|tool| {
            let (timeout_ms, retry) = limits.for_tool(server, &tool);
            let policy = CallPolicy {
                input: compile(&tool, "inputSchema", &tool.input_schema),
                output: tool
                    .output_schema
                    .as_ref()
                    .and_then(|schema| compile(&tool, "outputSchema", schema)),
                timeout_ms,
                retry,
                header_params: annotates_headers(&tool.input_schema),
            };
            Imported {
                tool,
                policy: Arc::new(policy),
                extra: None,
            }
        })
        .collect();
    (imported, warnings)
}

/// Every violation of the tool's `inputSchema`, with its path; empty when valid.
pub fn check_input(entry: &ToolEntry, arguments: &Value) -> Vec<String> {
    match &entry.policy.input {
        Some(validator) => violations(validator, arguments),
        None => Vec::new(),
    }
}

/// Every violation of the tool's `outputSchema` by `structuredContent`. A tool with an
/// output schema must return structured content unless the result is an error.
pub fn check_output(entry: &ToolEntry, result: &CallToolResult) -> Vec<String> {
    if result.is_error == Some(true) {
        return Vec::new();
    }
    let Some(validator) = &entry.policy.output else {
        return Vec::new();
    };
    match &result.structured_content {
        Some(structured) => violations(validator, structured),
        None => {
            vec!["the tool declares an outputSchema but returned no structuredContent".to_owned()]
        }
    }
}

fn violations(validator: &Validator, instance: &Value) -> Vec<String> {
    if validator.is_valid(instance) {
        return Vec::new();
    }
    validator
        .iter_errors(instance)
        .take(MAX_VIOLATIONS)
        .map(|error| {
            let path = error.instance_path().to_string();
            let at = if path.is_empty() {
                "/".to_owned()
            } else {
                path
            };
            format!("{at}: {error}")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rmcp::model::Tool;
    use serde_json::{Value, json};

    use super::{check_input, import};
    use crate::{
        config::{ServerId, ServerName},
        pipeline::builtin::Limits,
        registry::{Imported, ToolEntry},
    };

    fn tool(schema: Value) -> Tool {
        let Value::Object(schema) = schema else {
            unreachable!()
        };
        Tool::new("t", "a tool", Arc::new(schema))
    }

    fn server() -> ServerId {
        ServerId::global(ServerName::parse("s").unwrap())
    }

    /// Imports `tool` and makes its entry: (entry, warnings).
    fn entry(tool: Tool) -> (ToolEntry, Vec<String>) {
        let (mut imported, warnings) = import(&server(), vec![tool], &Limits::default());
        let Imported { tool, policy, .. } = imported.remove(0);
        let entry = ToolEntry {
            exposed: "s__t".into(),
            server: server(),
            upstream_name: "t".into(),
            tool,
            extra: None,
            fingerprint: 0,
            policy,
            target: crate::registry::Target::Upstream,
        };
        (entry, warnings)
    }

    #[test]
    fn every_violation_is_listed_with_its_path() {
        let (entry, warnings) = entry(tool(json!({
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "string"}},
            "required": ["a", "b"]
        })));
        assert!(warnings.is_empty());
        let violations = check_input(&entry, &json!({"a": "x"}));
        assert_eq!(violations.len(), 2, "{violations:?}");
        assert!(
            violations.iter().any(|v| v.starts_with("/a: ")),
            "{violations:?}"
        );
        assert!(
            violations
                .iter()
                .any(|v| v.contains("\"b\" is a required property")),
            "{violations:?}"
        );
        assert!(check_input(&entry, &json!({"a": 1, "b": "y"})).is_empty());
    }

    #[test]
    fn a_schema_that_does_not_compile_warns_and_skips_validation() {
        let (entry, warnings) = entry(tool(json!({"type": 12})));
        assert_eq!(warnings.len(), 1);
        assert!(
            warnings[0].contains("server \"s\" tool \"t\": inputSchema does not compile"),
            "{warnings:?}"
        );
        assert!(check_input(&entry, &json!({"anything": true})).is_empty());
    }

    #[test]
    fn a_remote_ref_fails_to_compile_instead_of_fetching() {
        let (_, warnings) = entry(tool(json!({"$ref": "https://example.com/schema.json"})));
        assert_eq!(warnings.len(), 1, "{warnings:?}");
    }

    #[test]
    fn header_annotations_are_found_at_import_where_rmcp_looks() {
        let annotated = |schema: Value| entry(tool(schema)).0.policy.header_params;
        assert!(!annotated(json!({
            "type": "object",
            "properties": {"a": {"type": "string"}}
        })));
        assert!(annotated(json!({
            "properties": {"a": {"type": "string", "x-mcp-header": "A"}}
        })));
        assert!(annotated(json!({
            "properties": {"a": {"properties": {"b": {"x-mcp-header": "B"}}}}
        })));
        // Only where rmcp looks: not under `items`, not at the root.
        assert!(!annotated(json!({
            "x-mcp-header": "R",
            "properties": {"a": {"items": {"x-mcp-header": "I"}}}
        })));
    }
}
