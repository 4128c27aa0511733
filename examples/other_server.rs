//! `other-server`: a second small upstream MCP server on stdio whose `echo` tool clashes by name with `echo-server`'s.
//!
//! Tools: `echo` {text} returns `other: <text>`; `reverse` {text} returns the text with its
//! characters reversed. Optional environment knob: `ECHO_CALL_LOG=<path>` appends one JSON line
//! `{"tool":…,"arguments":…}` per `tools/call` before it runs (the same format as
//! `echo-server`). stdout carries only MCP messages.

use std::{io::Write, path::PathBuf, sync::Arc};

use rmcp::{
    ErrorData as McpError, RoleServer, ServerHandler, ServiceExt,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
        JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
        Tool,
    },
    service::RequestContext,
    transport::stdio_pipes,
};
use serde_json::{Value, json};

const SERVER_NAME: &str = "other-server";

#[derive(Debug, Clone)]
struct OtherServer {
    tools: Arc<Vec<Tool>>,
    call_log: Option<PathBuf>,
}

fn text_schema() -> Arc<JsonObject> {
    let schema = json!({
        "type": "object",
        "properties": {
            "text": {"type": "string", "description": "Input text"}
        },
        "required": ["text"],
        "additionalProperties": false
    });
    match schema {
        Value::Object(map) => Arc::new(map),
        _ => Arc::new(JsonObject::new()),
    }
}

impl OtherServer {
    fn from_env() -> Self {
        Self {
            tools: Arc::new(vec![
                Tool::new(
                    "echo",
                    "Return the given text prefixed with `other: `",
                    text_schema(),
                ),
                Tool::new(
                    "reverse",
                    "Return the given text with its characters reversed",
                    text_schema(),
                ),
            ]),
            call_log: std::env::var_os("ECHO_CALL_LOG").map(PathBuf::from),
        }
    }

    fn log_call(&self, name: &str, arguments: &JsonObject) {
        let Some(path) = &self.call_log else { return };
        let line = format!("{}\n", json!({"tool": name, "arguments": arguments}));
        let result = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut file| file.write_all(line.as_bytes()));
        if let Err(e) = result {
            eprintln!("{SERVER_NAME}: cannot append to {}: {e}", path.display());
        }
    }
}

/// Reads the single `text` argument, rejecting anything the schema does not allow.
fn text_arg(args: &JsonObject) -> Result<String, String> {
    if let Some(key) = args.keys().find(|key| key.as_str() != "text") {
        return Err(format!("unexpected argument `{key}`"));
    }
    match args.get("text") {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err("`text` must be a string".into()),
        None => Err("missing required argument `text`".into()),
    }
}

impl ServerHandler for OtherServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
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
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let args = request.arguments.unwrap_or_default();
        self.log_call(&request.name, &args);
        let transform: fn(String) -> String = match request.name.as_ref() {
            "echo" => |text| format!("other: {text}"),
            "reverse" => |text| text.chars().rev().collect(),
            other => {
                return Err(McpError::invalid_params(
                    format!("unknown tool {other}"),
                    None,
                ));
            }
        };
        let result = match text_arg(&args) {
            Ok(text) => CallToolResult::success(vec![ContentBlock::text(transform(text))]),
            // Bad arguments are a tool execution error (SEP-1303), which the caller can see.
            Err(e) => {
                CallToolResult::error(vec![ContentBlock::text(format!("invalid arguments: {e}"))])
            }
        };
        Ok(result.into())
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let service = OtherServer::from_env().serve(stdio_pipes()).await?;
    service.waiting().await?;
    Ok(())
}
