//! Compiled JSON-Schema validators for tool inputs and outputs, compiled once per import.

use std::{
    collections::HashMap,
    sync::{Arc, RwLock},
};

use jsonschema::Validator;
use rmcp::model::{CallToolResult, JsonObject, Tool};
use serde_json::Value;

use crate::{config::ServerId, registry::ToolEntry};

/// At most this many violations are listed; more would drown the model.
const MAX_VIOLATIONS: usize = 20;

#[derive(Default)]
struct Compiled {
    input: Option<Arc<Validator>>,
    output: Option<Arc<Validator>>,
}

/// Validators per server, then upstream tool name: looked up by reference on every call.
#[derive(Default)]
pub struct Validators {
    by_server: RwLock<HashMap<ServerId, HashMap<String, Compiled>>>,
}

impl Validators {
    /// Compiles the schemas of `server`'s freshly imported `tools`, replacing its old ones.
    /// Returns a warning for each schema that does not compile: that tool goes unvalidated.
    pub fn prepare(&self, server: &ServerId, tools: &[Tool]) -> Vec<String> {
        let mut warnings = Vec::new();
        let mut compile = |tool: &Tool,
                           which: &str,
                           schema: &JsonObject|
         -> Option<Arc<Validator>> {
            match jsonschema::validator_for(&Value::Object(schema.clone())) {
                Ok(validator) => Some(Arc::new(validator)),
                Err(error) => {
                    warnings.push(format!(
                        "server \"{server}\" tool {:?}: {which} does not compile ({error}); calls to it are not validated",
                        tool.name
                    ));
                    None
                }
            }
        };
        let compiled: HashMap<String, Compiled> = tools
            .iter()
            .map(|tool| {
                let input = compile(tool, "inputSchema", &tool.input_schema);
                let output = tool
                    .output_schema
                    .as_ref()
                    .and_then(|schema| compile(tool, "outputSchema", schema));
                (tool.name.to_string(), Compiled { input, output })
            })
            .collect();
        let mut by_server = match self.by_server.write() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        by_server.insert(server.clone(), compiled);
        warnings
    }

    fn get(&self, entry: &ToolEntry, output: bool) -> Option<Arc<Validator>> {
        let by_server = match self.by_server.read() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        let compiled = by_server
            .get(&entry.server)?
            .get(entry.upstream_name.as_str())?;
        if output {
            compiled.output.clone()
        } else {
            compiled.input.clone()
        }
    }

    /// Every violation of the tool's `inputSchema`, with its path; empty when valid.
    pub fn check_input(&self, entry: &ToolEntry, arguments: &Value) -> Vec<String> {
        let Some(validator) = self.get(entry, false) else {
            return Vec::new();
        };
        violations(&validator, arguments)
    }

    /// Every violation of the tool's `outputSchema` by `structuredContent`. A tool with an
    /// output schema must return structured content unless the result is an error.
    pub fn check_output(&self, entry: &ToolEntry, result: &CallToolResult) -> Vec<String> {
        if result.is_error == Some(true) {
            return Vec::new();
        }
        let Some(validator) = self.get(entry, true) else {
            return Vec::new();
        };
        match &result.structured_content {
            Some(structured) => violations(&validator, structured),
            None => vec![
                "the tool declares an outputSchema but returned no structuredContent".to_owned(),
            ],
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

    use super::Validators;
    use crate::{
        config::{ServerId, ServerName},
        registry::ToolEntry,
    };

    fn tool(schema: Value) -> Tool {
        let Value::Object(schema) = schema else {
            unreachable!()
        };
        Tool::new("t", "a tool", Arc::new(schema))
    }

    fn entry(tool: &Tool) -> ToolEntry {
        ToolEntry {
            exposed: "s__t".into(),
            server: ServerId::global(ServerName::parse("s").unwrap()),
            upstream_name: "t".into(),
            tool: tool.clone(),
            fingerprint: 0,
        }
    }

    #[test]
    fn every_violation_is_listed_with_its_path() {
        let validators = Validators::default();
        let tool = tool(json!({
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "string"}},
            "required": ["a", "b"]
        }));
        assert!(
            validators
                .prepare(&entry(&tool).server, std::slice::from_ref(&tool))
                .is_empty()
        );
        let violations = validators.check_input(&entry(&tool), &json!({"a": "x"}));
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
        assert!(
            validators
                .check_input(&entry(&tool), &json!({"a": 1, "b": "y"}))
                .is_empty()
        );
    }

    #[test]
    fn a_schema_that_does_not_compile_warns_and_skips_validation() {
        let validators = Validators::default();
        let broken = tool(json!({"type": 12}));
        let warnings = validators.prepare(&entry(&broken).server, std::slice::from_ref(&broken));
        assert_eq!(warnings.len(), 1);
        assert!(
            warnings[0].contains("server \"s\" tool \"t\": inputSchema does not compile"),
            "{warnings:?}"
        );
        assert!(
            validators
                .check_input(&entry(&broken), &json!({"anything": true}))
                .is_empty()
        );
    }

    #[test]
    fn a_remote_ref_fails_to_compile_instead_of_fetching() {
        let validators = Validators::default();
        let remote = tool(json!({"$ref": "https://example.com/schema.json"}));
        let warnings = validators.prepare(&entry(&remote).server, std::slice::from_ref(&remote));
        assert_eq!(warnings.len(), 1, "{warnings:?}");
    }
}
