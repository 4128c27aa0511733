//! A post hook's replacement of a result, applied by the rule of [`super::PostDecision::Accept`].

use rmcp::model::{CallToolResult, ContentBlock};

use super::{CallError, validate};
use crate::registry::ToolEntry;

/// Applies a post hook's replacement by the rule of [`super::PostDecision::Accept`].
pub(super) fn replace(
    entry: &ToolEntry,
    result: &mut CallToolResult,
    content: Option<Vec<ContentBlock>>,
    structured_content: Option<serde_json::Value>,
) -> Result<(), CallError> {
    let promises_structure = entry.policy.output.is_some() && result.is_error != Some(true);
    match structured_content {
        Some(structured) => {
            let content = match content {
                Some(content) => content,
                None => vec![ContentBlock::text(structured.to_string())],
            };
            result.content = content;
            result.structured_content = Some(structured);
            let violations = validate::check_output(entry, result);
            if !violations.is_empty() {
                return Err(CallError::InvalidOutput(violations));
            }
        }
        None if promises_structure => {
            return Err(CallError::InvalidOutput(vec![format!(
                "a post hook replaced the content of \"{}\", which declares an outputSchema, without supplying structuredContent",
                entry.exposed
            )]));
        }
        None => {
            result.content = content.unwrap_or_default();
            result.structured_content = None;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use rmcp::model::{CallToolResult, ContentBlock, Tool};
    use serde_json::json;

    use super::replace;
    use crate::{
        config::{ServerId, ServerName},
        registry::ToolEntry,
    };

    #[test]
    fn replaced_content_drops_structured_content_of_a_tool_without_schema() {
        let schema = json!({"type": "object"});
        let serde_json::Value::Object(schema) = schema else {
            unreachable!()
        };
        let entry = ToolEntry {
            exposed: "s__t".into(),
            server: ServerId::global(ServerName::parse("s").unwrap()),
            upstream_name: "t".into(),
            tool: Tool::new("s__t", "t", std::sync::Arc::new(schema)),
            extra: None,
            fingerprint: 0,
            policy: Default::default(),
            target: crate::registry::Target::Upstream,
        };
        let mut result = CallToolResult::structured(json!({"secret": 42}));
        replace(
            &entry,
            &mut result,
            Some(vec![ContentBlock::text("[redacted]")]),
            None,
        )
        .unwrap();
        assert_eq!(result.structured_content, None);
        assert_eq!(
            serde_json::to_value(&result.content).unwrap()[0]["text"],
            "[redacted]"
        );
    }
}
