//! `conformance-server`: the upstream fixture for the MCP conformance suite, on stdio (default) or streamable HTTP (`--http ADDR`).
//!
//! It offers what the server scenarios of `@modelcontextprotocol/conformance@0.1.16` call
//! (see `.ci/conformance`, which runs the suite against it directly and behind toolgate):
//! - tools `test_simple_text`, `test_image_content`, `test_audio_content`,
//!   `test_embedded_resource`, `test_multiple_content_types`, `test_error_handling`;
//!   `test_tool_with_logging` (three `notifications/message` at `info`, 50 ms apart),
//!   `test_tool_with_progress` (progress 0, 50, 100 of 100 when the call has a token),
//!   `test_sampling` (`sampling/createMessage` to the caller), `test_elicitation`,
//!   `test_elicitation_sep1034_defaults`, `test_elicitation_sep1330_enums`
//!   (`elicitation/create` to the caller), and `json_schema_2020_12_tool`;
//! - resources `test://static-text`, `test://static-binary`, `test://watched-resource`
//!   (subscribable), the template `test://template/{id}/data`;
//! - prompts `test_simple_prompt`, `test_prompt_with_arguments` (`arg1`, `arg2`),
//!   `test_prompt_with_embedded_resource` (`resourceUri`), `test_prompt_with_image`;
//! - `completion/complete` for those prompt arguments and the template's `id`;
//! - `logging/setLevel`, which filters this session's log messages.
//!
//! Over HTTP it serves `/mcp` with sessions and refuses a `Host` or browser `Origin` that is
//! not loopback (403), as the `dns-rebinding-protection` scenario requires. It prints
//! `conformance-server: listening on http://ADDR/mcp` to stderr once it listens (`ADDR` may
//! use port 0) and stops on SIGINT or SIGTERM. On stdio, stdout carries only MCP messages.
// rmcp marks logging, sampling and resources/subscribe deprecated (SEP-2577, 2026-07-28);
// they are what the 2025-11-25 scenarios check.
#![allow(deprecated)]

#[path = "conformance_server/content.rs"]
mod content;

use std::{
    collections::BTreeSet,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
    time::Duration,
};

use rmcp::{
    ErrorData as McpError, RoleServer, ServerHandler, ServiceExt,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, CompleteRequestParams,
        CompleteResult, ContentBlock, CreateMessageRequestParams, ElicitRequestParams,
        GetPromptRequestParams, GetPromptResponse, GetPromptResult, Implementation, JsonObject,
        ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
        LoggingLevel, LoggingMessageNotificationParam, PaginatedRequestParams,
        ProgressNotificationParam, ReadResourceRequestParams, ReadResourceResponse,
        ReadResourceResult, ServerCapabilities, ServerConfig, SetLevelRequestParams,
        SubscribeRequestParams, Tool, UnsubscribeRequestParams,
    },
    service::RequestContext,
    transport::{
        stdio_pipes,
        streamable_http_server::{
            StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
        },
    },
};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const SERVER_NAME: &str = "conformance-server";
/// The pause between the log messages and between the progress steps of a call.
const STEP: Duration = Duration::from_millis(50);
/// Browser origins the HTTP endpoint accepts: loopback on any port.
const LOOPBACK_ORIGINS: [&str; 3] = ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"];

/// What one client session changes: its log level and its subscriptions.
#[derive(Debug, Default)]
struct Session {
    /// `None` until `logging/setLevel`: then every message is sent.
    log_level: Mutex<Option<LoggingLevel>>,
    subscriptions: Mutex<BTreeSet<String>>,
}

/// One handler per session: the HTTP transport calls the factory once per session.
#[derive(Debug, Clone)]
struct ConformanceServer {
    tools: Arc<Vec<Tool>>,
    session: Arc<Session>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Turns one of our JSON literals into rmcp's type; a mismatch is our bug, reported as such.
fn typed<T: DeserializeOwned>(what: &str, value: Value) -> Result<T, McpError> {
    serde_json::from_value(value).map_err(|e| {
        McpError::internal_error(format!("{SERVER_NAME}: cannot build {what}: {e}"), None)
    })
}

/// Severity order of the MCP log levels, lowest first.
fn severity(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

fn text_result(text: impl Into<String>, is_error: bool) -> CallToolResult {
    let content = vec![ContentBlock::text(text)];
    if is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    }
}

fn string_argument(arguments: &JsonObject, tool: &str, key: &str) -> Result<String, McpError> {
    match arguments.get(key) {
        Some(Value::String(s)) => Ok(s.clone()),
        _ => Err(McpError::invalid_params(
            format!("tool {tool}: argument {key} must be a string"),
            None,
        )),
    }
}

impl ConformanceServer {
    fn new() -> Result<Self, McpError> {
        let tools = content::tools()
            .into_iter()
            .map(|(name, description, schema)| {
                let Value::Object(schema) = schema else {
                    return Err(McpError::internal_error(
                        format!("{SERVER_NAME}: the schema of {name} is not an object"),
                        None,
                    ));
                };
                Ok(Tool::new(name, description, Arc::new(schema)))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            tools: Arc::new(tools),
            session: Arc::default(),
        })
    }

    /// Sends `text` as a log message at `level` unless the session asked for less.
    async fn log(&self, context: &RequestContext<RoleServer>, level: LoggingLevel, text: &str) {
        let threshold = *lock(&self.session.log_level);
        if threshold.is_some_and(|min| severity(level) < severity(min)) {
            return;
        }
        let param =
            LoggingMessageNotificationParam::new(level, json!(text)).with_logger(content::LOGGER);
        if let Err(e) = context.peer.notify_logging_message(param).await {
            eprintln!("{SERVER_NAME}: cannot send a log message: {e}");
        }
    }

    async fn with_logging(&self, context: &RequestContext<RoleServer>) -> CallToolResult {
        let messages = [
            "Tool execution started",
            "Tool processing data",
            "Tool execution completed",
        ];
        for (i, message) in messages.into_iter().enumerate() {
            if i > 0 {
                tokio::time::sleep(STEP).await;
            }
            self.log(context, LoggingLevel::Info, message).await;
        }
        text_result("Tool with logging executed successfully", false)
    }

    async fn with_progress(context: &RequestContext<RoleServer>) -> CallToolResult {
        let token = context.meta.get_progress_token();
        for (i, progress) in [0.0, 50.0, 100.0].into_iter().enumerate() {
            if i > 0 {
                tokio::time::sleep(STEP).await;
            }
            if let Some(token) = &token {
                let param = ProgressNotificationParam::new(token.clone(), progress)
                    .with_total(100.0)
                    .with_message(format!("Completed step {progress} of 100"));
                if let Err(e) = context.peer.notify_progress(param).await {
                    eprintln!("{SERVER_NAME}: cannot send progress: {e}");
                }
            }
        }
        text_result("Tool with progress executed successfully", false)
    }

    async fn sampling(
        context: &RequestContext<RoleServer>,
        prompt: String,
    ) -> Result<CallToolResult, McpError> {
        let can_sample = context
            .peer
            .peer_info()
            .is_some_and(|info| info.capabilities.sampling.is_some());
        if !can_sample {
            return Ok(text_result(
                "the client does not declare the sampling capability",
                true,
            ));
        }
        let params: CreateMessageRequestParams = typed(
            "sampling/createMessage params",
            json!({
                "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
                "maxTokens": 100
            }),
        )?;
        Ok(match context.peer.create_message(params).await {
            Ok(result) => {
                let answer = serde_json::to_value(&result).unwrap_or_default();
                let text = answer
                    .pointer("/content/text")
                    .and_then(Value::as_str)
                    .unwrap_or("No response");
                text_result(format!("LLM response: {text}"), false)
            }
            Err(e) => text_result(format!("sampling/createMessage failed: {e}"), true),
        })
    }

    async fn elicitation(
        context: &RequestContext<RoleServer>,
        tool: &str,
        params: Value,
    ) -> Result<CallToolResult, McpError> {
        let can_elicit = context
            .peer
            .peer_info()
            .is_some_and(|info| info.capabilities.elicitation.is_some());
        if !can_elicit {
            return Ok(text_result(
                "the client does not declare the elicitation capability",
                true,
            ));
        }
        let params: ElicitRequestParams = typed("elicitation/create params", params)?;
        Ok(match context.peer.create_elicitation(params).await {
            Ok(result) => {
                let answer = serde_json::to_value(&result).unwrap_or_default();
                let action = answer.get("action").cloned().unwrap_or(Value::Null);
                let content = answer.get("content").cloned().unwrap_or_else(|| json!({}));
                let lead = if tool == "test_elicitation" {
                    "User response"
                } else {
                    "Elicitation completed"
                };
                let action = action
                    .as_str()
                    .map_or_else(|| action.to_string(), str::to_owned);
                text_result(format!("{lead}: action={action}, content={content}"), false)
            }
            Err(e) => text_result(format!("elicitation/create failed: {e}"), true),
        })
    }

    fn known_resource(uri: &str) -> Result<(), McpError> {
        match content::read_resource(uri) {
            Some(_) => Ok(()),
            None => Err(McpError::resource_not_found(
                format!("no resource {uri}"),
                Some(json!({"uri": uri})),
            )),
        }
    }
}

impl ServerHandler for ConformanceServer {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_logging()
            .enable_completions()
            .enable_prompts()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_tools()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new(SERVER_NAME, env!("CARGO_PKG_VERSION")))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(self.tools.to_vec()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools.iter().find(|tool| tool.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let name = request.name.as_ref();
        let arguments = request.arguments.unwrap_or_default();
        if let Some(result) = content::fixed_tool_result(name, &Value::Object(arguments.clone())) {
            return Ok(typed::<CallToolResult>(name, result)?.into());
        }
        let result = match name {
            "test_tool_with_logging" => self.with_logging(&context).await,
            "test_tool_with_progress" => Self::with_progress(&context).await,
            "test_sampling" => {
                let prompt = string_argument(&arguments, name, "prompt")?;
                Self::sampling(&context, prompt).await?
            }
            _ => {
                let message = match name {
                    "test_elicitation" => string_argument(&arguments, name, "message")?,
                    _ => String::new(),
                };
                match content::elicitation(name, &message) {
                    Some(params) => Self::elicitation(&context, name, params).await?,
                    None => {
                        return Err(McpError::invalid_params(
                            format!("unknown tool {name}"),
                            None,
                        ));
                    }
                }
            }
        };
        Ok(result.into())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        typed("resources/list result", content::resources())
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        typed(
            "resources/templates/list result",
            content::resource_templates(),
        )
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        Self::known_resource(&request.uri)?;
        let contents = content::read_resource(&request.uri).unwrap_or_default();
        Ok(typed::<ReadResourceResult>("resources/read result", contents)?.into())
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        Self::known_resource(&request.uri)?;
        lock(&self.session.subscriptions).insert(request.uri);
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        lock(&self.session.subscriptions).remove(&request.uri);
        Ok(())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        typed("prompts/list result", content::prompts())
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let arguments = request.arguments.unwrap_or_default();
        let result = content::get_prompt(&request.name, &arguments)
            .map_err(|message| McpError::invalid_params(message, None))?;
        Ok(typed::<GetPromptResult>("prompts/get result", result)?.into())
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        let reference = serde_json::to_value(&request.r#ref).unwrap_or_default();
        let result = content::complete(&reference, &request.argument.name, &request.argument.value)
            .map_err(|message| McpError::invalid_params(message, None))?;
        typed("completion/complete result", result)
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        *lock(&self.session.log_level) = Some(request.level);
        Ok(())
    }
}

/// Resolves on SIGINT or SIGTERM.
async fn stop_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(e) => {
                eprintln!("{SERVER_NAME}: cannot watch SIGTERM: {e}");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = terminate => {}
    }
}

async fn serve_http(addr: &str) -> anyhow::Result<()> {
    let stop = CancellationToken::new();
    // The default `allowed_hosts` is the loopback names; origins are unchecked unless listed.
    let config = StreamableHttpServerConfig::default()
        .with_cancellation_token(stop.child_token())
        .with_allowed_origins(LOOPBACK_ORIGINS);
    ConformanceServer::new()?;
    let service: StreamableHttpService<ConformanceServer, LocalSessionManager> =
        StreamableHttpService::new(
            || ConformanceServer::new().map_err(std::io::Error::other),
            Arc::default(),
            config,
        );
    let router = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("{SERVER_NAME}: cannot listen on {addr}: {e}"))?;
    // One write: `eprintln!` writes its pieces one by one, and a reader may see half a URL.
    let line = format!(
        "{SERVER_NAME}: listening on http://{}/mcp\n",
        listener.local_addr()?
    );
    let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
    axum::serve(listener, router)
        .with_graceful_shutdown(async move {
            stop_signal().await;
            stop.cancel();
        })
        .await?;
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [] => {
            let service = ConformanceServer::new()?.serve(stdio_pipes()).await?;
            service.waiting().await?;
            Ok(())
        }
        [flag, addr] if flag == "--http" => serve_http(addr).await,
        _ => {
            eprintln!("usage: {SERVER_NAME} [--http ADDR]   (stdio when no --http)");
            std::process::exit(2);
        }
    }
}
