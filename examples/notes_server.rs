//! `notes-server`: an upstream on stdio that offers everything but tools too: prompts, resources, templates, completion, logging, and tools that ask its client.
//!
//! - Resources: `note://welcome` (text), `note://logo` (blob, `image/png`), plus one per note
//!   added; template `note://{name}` (any name reads as `note <name>`, except `roots`: the
//!   client's roots, asked for while reading, and `logged`: `logged`, after a log message
//!   `reading note://logged`). Subscribe is supported.
//! - Prompts: `greet` {name} → one user message `Hello, <name>!` (name `?`: the client is
//!   asked for it by an elicitation first); `summary` (no arguments).
//! - Completion: `greet`'s `name` and the template's `name` complete from `alice`, `bob`.
//! - Tools: `log` {message, level?} sends it as a log message at `level` (`info` unless
//!   `debug` or `error`) (logger `notes`) and returns
//!   `logged`; `ask_model` {prompt} asks the client for a sampling answer; `ask_user`
//!   {question} asks the client to elicit `{answer: string}`; `roots` lists the client's roots;
//!   `touch` {name} sends `notifications/resources/updated` for `note://<name>`; `add_note`
//!   {name, text} adds a resource and a prompt and announces both list changes.
//!
//! stdout carries only MCP messages.
#![allow(deprecated)] // logging, sampling and roots: 2025-era features this server exercises

use std::sync::{Arc, Mutex};

use rmcp::{
    ErrorData as McpError, RoleServer, ServerHandler, ServiceExt,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, CompleteRequestParams,
        CompleteResult, CompletionInfo, ContentBlock, CreateMessageRequestParams,
        ElicitRequestParams, GetPromptRequestParams, GetPromptResponse, GetPromptResult,
        Implementation, JsonObject, ListPromptsResult, ListResourceTemplatesResult,
        ListResourcesResult, ListToolsResult, LoggingLevel, LoggingMessageNotificationParam,
        PaginatedRequestParams, Prompt, PromptArgument, PromptMessage, ReadResourceRequestParams,
        ReadResourceResponse, ReadResourceResult, Resource, ResourceContents, ResourceTemplate,
        ResourceUpdatedNotificationParam, Role, SamplingMessage, ServerCapabilities, ServerConfig,
        SetLevelRequestParams, SubscribeRequestParams, Tool, UnsubscribeRequestParams,
    },
    service::RequestContext,
    transport::stdio_pipes,
};
use serde_json::{Value, json};

const SERVER_NAME: &str = "notes-server";

#[derive(Clone, Default)]
struct Notes {
    /// Notes added by `add_note`: (name, text).
    added: Arc<Mutex<Vec<(String, String)>>>,
}

fn object(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(map) => Arc::new(map),
        _ => Arc::new(JsonObject::new()),
    }
}

fn schema(required: &[&str]) -> Arc<JsonObject> {
    let properties: JsonObject = required
        .iter()
        .map(|key| ((*key).to_owned(), json!({"type": "string"})))
        .collect();
    object(json!({"type": "object", "properties": properties, "required": required}))
}

fn arg(args: &JsonObject, key: &str) -> Result<String, McpError> {
    args.get(key)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| McpError::invalid_params(format!("missing string argument `{key}`"), None))
}

fn text(text: impl Into<String>) -> CallToolResponse {
    CallToolResult::success(vec![ContentBlock::text(text)]).into()
}

impl Notes {
    fn added(&self) -> Vec<(String, String)> {
        self.added.lock().map(|a| a.clone()).unwrap_or_default()
    }

    fn note_text(&self, uri: &str) -> Option<String> {
        if uri == "note://welcome" {
            return Some("Welcome to notes.".into());
        }
        let name = uri.strip_prefix("note://")?;
        let added = self.added();
        Some(match added.iter().find(|(n, _)| n == name) {
            Some((_, text)) => text.clone(),
            None => format!("note {name}"),
        })
    }
}

impl ServerHandler for Notes {
    fn get_info(&self) -> ServerConfig {
        let caps = ServerCapabilities::builder()
            .enable_tools()
            .enable_prompts()
            .enable_prompts_list_changed()
            .enable_resources()
            .enable_resources_list_changed()
            .enable_resources_subscribe()
            .enable_completions()
            .enable_logging()
            .build();
        ServerConfig::new(caps)
            .with_server_info(Implementation::new(SERVER_NAME, env!("CARGO_PKG_VERSION")))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(vec![
            Tool::new("log", "Send a log message", schema(&["message"])),
            Tool::new("ask_model", "Ask the client's model", schema(&["prompt"])),
            Tool::new("ask_user", "Ask the client's user", schema(&["question"])),
            Tool::new("roots", "List the client's roots", schema(&[])),
            Tool::new("touch", "Announce that a note changed", schema(&["name"])),
            Tool::new("add_note", "Add a note", schema(&["name", "text"])),
        ]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let args = request.arguments.unwrap_or_default();
        let peer = &context.peer;
        let failed = |e: rmcp::service::ServiceError| match e {
            rmcp::service::ServiceError::McpError(error) => error,
            other => McpError::internal_error(other.to_string(), None),
        };
        match request.name.as_ref() {
            "log" => {
                let level = match args.get("level").and_then(Value::as_str) {
                    Some("error") => LoggingLevel::Error,
                    Some("debug") => LoggingLevel::Debug,
                    _ => LoggingLevel::Info,
                };
                let mut notice =
                    LoggingMessageNotificationParam::new(level, json!(arg(&args, "message")?));
                notice.logger = Some("notes".into());
                peer.notify_logging_message(notice).await.map_err(failed)?;
                Ok(text("logged"))
            }
            "ask_model" => {
                let message = SamplingMessage::user_text(arg(&args, "prompt")?);
                let params = CreateMessageRequestParams::new(vec![message], 100);
                let answer = peer.create_message(params).await.map_err(failed)?;
                Ok(text(format!(
                    "model said: {}",
                    json!(answer.message.content)
                )))
            }
            "ask_user" => {
                let schema = rmcp::model::ElicitationSchema::builder()
                    .required_string("answer")
                    .build()
                    .map_err(|e| McpError::internal_error(e.to_string(), None))?;
                let params = ElicitRequestParams::FormElicitationParams {
                    meta: None,
                    message: arg(&args, "question")?,
                    requested_schema: schema,
                };
                let answer = peer.create_elicitation(params).await.map_err(failed)?;
                Ok(text(format!(
                    "user {:?}: {}",
                    answer.action,
                    json!(answer.content)
                )))
            }
            "roots" => {
                let roots = peer.list_roots().await.map_err(failed)?;
                let uris: Vec<String> = roots.roots.into_iter().map(|r| r.uri).collect();
                Ok(text(uris.join(",")))
            }
            "touch" => {
                let uri = format!("note://{}", arg(&args, "name")?);
                peer.notify_resource_updated(ResourceUpdatedNotificationParam::new(uri))
                    .await
                    .map_err(failed)?;
                Ok(text("touched"))
            }
            "add_note" => {
                let entry = (arg(&args, "name")?, arg(&args, "text")?);
                if let Ok(mut added) = self.added.lock() {
                    added.push(entry);
                }
                peer.notify_resource_list_changed().await.map_err(failed)?;
                peer.notify_prompt_list_changed().await.map_err(failed)?;
                Ok(text("added"))
            }
            other => Err(McpError::invalid_params(
                format!("unknown tool {other}"),
                None,
            )),
        }
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        let mut prompts = vec![
            Prompt::new(
                "greet",
                Some("Greet someone"),
                Some(vec![PromptArgument::new("name").with_required(true)]),
            ),
            Prompt::new("summary", Some("Summarise the notes"), None),
        ];
        for (name, _) in self.added() {
            prompts.push(Prompt::new(format!("about_{name}"), None::<String>, None));
        }
        Ok(ListPromptsResult::with_all_items(prompts))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let args = request.arguments.unwrap_or_default();
        let message = match request.name.as_str() {
            "greet" if arg(&args, "name")? == "?" => {
                let schema = rmcp::model::ElicitationSchema::builder()
                    .required_string("answer")
                    .build()
                    .map_err(|e| McpError::internal_error(e.to_string(), None))?;
                let params = ElicitRequestParams::FormElicitationParams {
                    meta: None,
                    message: "Whom to greet?".into(),
                    requested_schema: schema,
                };
                let answer = context
                    .peer
                    .create_elicitation(params)
                    .await
                    .map_err(|e| McpError::internal_error(e.to_string(), None))?;
                let name = answer
                    .content
                    .as_ref()
                    .and_then(|c| c.get("answer"))
                    .and_then(Value::as_str)
                    .unwrap_or("nobody")
                    .to_owned();
                format!("Hello, {name}!")
            }
            "greet" => format!("Hello, {}!", arg(&args, "name")?),
            "summary" => "Summarise the notes.".to_owned(),
            other => {
                return Err(McpError::invalid_params(
                    format!("unknown prompt {other}"),
                    None,
                ));
            }
        };
        let result = GetPromptResult::new(vec![PromptMessage::new_text(Role::User, message)]);
        Ok(GetPromptResponse::Complete(result))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let mut resources = vec![
            Resource::new("note://welcome", "welcome").with_mime_type("text/plain"),
            Resource::new("note://logo", "logo").with_mime_type("image/png"),
        ];
        for (name, _) in self.added() {
            resources.push(Resource::new(format!("note://{name}"), name));
        }
        Ok(ListResourcesResult::with_all_items(resources))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        Ok(ListResourceTemplatesResult::with_all_items(vec![
            ResourceTemplate::new("note://{name}", "note"),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let uri = request.uri;
        let contents = if uri == "note://roots" {
            let roots = context
                .peer
                .list_roots()
                .await
                .map_err(|e| McpError::internal_error(e.to_string(), None))?;
            let uris: Vec<String> = roots.roots.into_iter().map(|r| r.uri).collect();
            ResourceContents::text(uris.join(","), uri)
        } else if uri == "note://logged" {
            // Unlisted (read through the template): logs, then answers at once.
            let mut notice = LoggingMessageNotificationParam::new(
                LoggingLevel::Info,
                json!("reading note://logged"),
            );
            notice.logger = Some("notes".into());
            if let Err(error) = context.peer.notify_logging_message(notice).await {
                return Err(McpError::internal_error(error.to_string(), None));
            }
            ResourceContents::text("logged", uri)
        } else if uri == "note://logo" {
            ResourceContents::blob("iVBORw0KGgo=", uri).with_mime_type("image/png")
        } else {
            match self.note_text(&uri) {
                Some(text) => ResourceContents::text(text, uri),
                None => {
                    return Err(McpError::resource_not_found(
                        format!("no such note: {uri}"),
                        Some(json!({"uri": uri})),
                    ));
                }
            }
        };
        Ok(ReadResourceResponse::Complete(ReadResourceResult::new(
            vec![contents],
        )))
    }

    async fn subscribe(
        &self,
        _request: SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        Ok(())
    }

    async fn unsubscribe(
        &self,
        _request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        Ok(())
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        let typed = request.argument.value;
        let values: Vec<String> = ["alice", "bob"]
            .iter()
            .filter(|v| v.starts_with(&typed))
            .map(|v| (*v).to_owned())
            .collect();
        let info = CompletionInfo::new(values).map_err(|e| McpError::internal_error(e, None))?;
        Ok(CompleteResult::new(info))
    }

    async fn set_level(
        &self,
        _request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        Ok(())
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let service = Notes::default().serve(stdio_pipes()).await?;
    service.waiting().await?;
    Ok(())
}
