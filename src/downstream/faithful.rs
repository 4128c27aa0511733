//! `tools/list`, `prompts/list`, `resources/list` and `resources/templates/list` answered as JSON, with every field the upstream gave (the typed lists rmcp's handler returns cannot carry unknown fields).
//!
//! rmcp's `ServerHandler` answers these requests with typed results, and its types drop what
//! they do not know (`execution`, vendor fields, unknown keys of annotations and icons). Its
//! only untyped answer is the one to a custom request, so the stdio and HTTP fronts rename
//! these four methods to private ones ([`divert`]) before rmcp decodes the message; the
//! handler's `on_custom_request` then answers from the view ([`GatewayService::faithful_list`]):
//! the typed list, post-processed for the client's protocol era exactly as rmcp's handler
//! would, with each item's extra merged back in ([`crate::registry::extra`]).

use rmcp::{
    ErrorData as McpError, RoleServer,
    model::{
        ErrorCode, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
        ListToolsResult, ProtocolVersion, ServerResult,
    },
    service::RequestContext,
};
use serde_json::{Map, Value};

use super::GatewayService;
use crate::registry::{
    ListAnswer, View,
    extra::{Extra, merge},
};

/// The four list methods and the private names they are renamed to.
const LISTS: [(&str, &str); 4] = [
    ("tools/list", "toolgate/faithful/tools/list"),
    ("prompts/list", "toolgate/faithful/prompts/list"),
    ("resources/list", "toolgate/faithful/resources/list"),
    (
        "resources/templates/list",
        "toolgate/faithful/resources/templates/list",
    ),
];

/// The private name of a list method, for the fronts to rename it to.
pub fn private_method(method: &str) -> Option<&'static str> {
    LISTS
        .iter()
        .find(|(public, _)| *public == method)
        .map(|(_, private)| *private)
}

/// `message` (one JSON-RPC request) with a list method, or a task request
/// ([`super::tasks`]), renamed to its private name; `None` when it is neither (or not
/// readable: rmcp then refuses it as before).
pub fn divert(message: &[u8]) -> Option<Vec<u8>> {
    divert_named(message).map(|(renamed, _)| renamed)
}

/// [`divert`], with the private name.
pub fn divert_named(message: &[u8]) -> Option<(Vec<u8>, &'static str)> {
    let mut object: Map<String, Value> = serde_json::from_slice(message).ok()?;
    let method = object.get("method").and_then(Value::as_str)?;
    let private = private_method(method)
        .or_else(|| super::tasks::private_method(method, object.get("params")))?;
    object.insert("method".to_owned(), Value::String(private.to_owned()));
    Some((serde_json::to_vec(&object).ok()?, private))
}

/// A request read from a stdio line, read again under its private name when it is a list
/// or about tasks; any other message as it was. The typed message says which it may be, so
/// that other lines are not decoded twice.
pub fn reread(
    message: rmcp::service::RxJsonRpcMessage<RoleServer>,
    line: &[u8],
) -> rmcp::service::RxJsonRpcMessage<RoleServer> {
    use rmcp::model::{ClientRequest as R, JsonRpcMessage};
    let renamed = matches!(
        &message,
        JsonRpcMessage::Request(request) if match &request.request {
            R::ListToolsRequest(_)
            | R::ListPromptsRequest(_)
            | R::ListResourcesRequest(_)
            | R::ListResourceTemplatesRequest(_)
            | R::GetTaskRequest(_)
            | R::CancelTaskRequest(_)
            | R::UpdateTaskRequest(_) => true,
            R::CustomRequest(custom) => custom.method.starts_with("tasks/"),
            R::CallToolRequest(_) => super::tasks::may_carry_task(line),
            _ => false,
        }
    );
    if !renamed {
        return message;
    }
    divert(line)
        .and_then(|renamed| serde_json::from_slice(&renamed).ok())
        .unwrap_or(message)
}

impl GatewayService {
    /// The answer to a renamed list request; `None` for any other custom method.
    pub(super) async fn faithful_list(
        &self,
        method: &str,
        context: &RequestContext<RoleServer>,
    ) -> Option<Result<Value, McpError>> {
        let public = LISTS
            .iter()
            .find(|(_, private)| *private == method)
            .map(|(public, _)| *public)?;
        Some(self.answer_list(public, context).await)
    }

    async fn answer_list(
        &self,
        method: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<Value, McpError> {
        self.settled().await?;
        let view = self.view();
        let modern = context
            .protocol_version()
            .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str());
        if method == "tools/list" {
            // Built once per view and era; a clone of the value is still much cheaper than
            // building it (the stdio fast path writes the cached text and skips even that).
            return tools_answer(&view, modern).map(|answer| answer.value.as_ref().clone());
        }
        // Items and extras from the same view, so that they stay in step.
        let (result, field, extras): (ServerResult, &str, Vec<Extra>) = match method {
            "prompts/list" => {
                self.offered(method, |f| f.prompts)?;
                let named = &view.offers().prompts;
                (
                    ServerResult::ListPromptsResult(ListPromptsResult::with_all_items(
                        named.iter().map(|n| n.item.clone()).collect(),
                    )),
                    "prompts",
                    named.iter().map(|n| n.extra.clone()).collect(),
                )
            }
            "resources/list" => {
                self.offered(method, |f| f.resources)?;
                let named = &view.offers().resources;
                (
                    ServerResult::ListResourcesResult(ListResourcesResult::with_all_items(
                        named.iter().map(|n| n.item.clone()).collect(),
                    )),
                    "resources",
                    named.iter().map(|n| n.extra.clone()).collect(),
                )
            }
            _ => {
                self.offered(method, |f| f.resources)?;
                let named = &view.offers().templates;
                (
                    ServerResult::ListResourceTemplatesResult(
                        ListResourceTemplatesResult::with_all_items(
                            named.iter().map(|n| n.item.clone()).collect(),
                        ),
                    ),
                    "resourceTemplates",
                    named.iter().map(|n| n.extra.clone()).collect(),
                )
            }
        };
        list_value(method, result, field, &extras, modern)
    }
}

/// The `tools/list` result of `view` for a client of era `modern`, built on first use.
pub(super) fn tools_answer(view: &View, modern: bool) -> Result<&ListAnswer, McpError> {
    view.tools_answer(modern, |view| {
        let entries: Vec<_> = view.listed_entries().collect();
        let tools = entries.iter().map(|e| e.tool.clone()).collect();
        let extras: Vec<Extra> = entries.iter().map(|e| e.extra.clone()).collect();
        let result = ServerResult::ListToolsResult(ListToolsResult::with_all_items(tools));
        list_value("tools/list", result, "tools", &extras, modern)
    })
}

/// A typed list result as rmcp's handler would send it to a client of era `modern`, with
/// each item's extra merged back in.
fn list_value(
    method: &str,
    mut result: ServerResult,
    field: &str,
    extras: &[Extra],
    modern: bool,
) -> Result<Value, McpError> {
    if modern {
        result.fill_missing_cache_hints();
    } else {
        result.strip_result_type_for_legacy_peer();
        result.strip_non_object_output_for_legacy_peer();
    }
    let mut value = serde_json::to_value(&result).map_err(|error| {
        McpError::new(
            ErrorCode::INTERNAL_ERROR,
            format!("{method}: could not write the list: {error}"),
            None,
        )
    })?;
    if let Some(Value::Array(items)) = value.get_mut(field) {
        for (item, extra) in items.iter_mut().zip(extras) {
            if let Some(extra) = extra {
                merge(item, &Value::Object(extra.as_ref().clone()));
            }
        }
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_four_lists_are_renamed_and_the_rest_of_the_message_is_kept() {
        let line = br#"{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"cursor":"c","_meta":{"k":1}}}"#;
        let renamed: Value = serde_json::from_slice(&divert(line).unwrap()).unwrap();
        assert_eq!(
            renamed,
            serde_json::json!({"jsonrpc":"2.0","id":7,"method":"toolgate/faithful/tools/list","params":{"cursor":"c","_meta":{"k":1}}})
        );
        assert!(divert(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}"#).is_none());
        assert!(divert(b"not json").is_none());
        assert_eq!(
            private_method("resources/templates/list"),
            Some("toolgate/faithful/resources/templates/list")
        );
    }
}
