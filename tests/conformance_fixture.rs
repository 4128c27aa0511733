//! The conformance fixture (`examples/conformance_server.rs`) over stdio, as toolgate's stdio upstream sees it.
//!
//! `.ci/conformance` runs the official suite against the fixture over HTTP only; these tests
//! check its stdio mode with a real rmcp client, and the log-level filter the suite does not
//! check.
#![allow(deprecated)] // sampling and logging types are deprecated by SEP-2577 in rmcp

mod common;

use std::{
    process::Stdio,
    sync::{Arc, Mutex},
    time::Duration,
};

use rmcp::{
    ClientHandler, ErrorData as McpError, RoleClient, ServiceExt,
    model::{
        ArgumentInfo, CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig,
        CompleteRequestParams, CreateMessageRequestParams, CreateMessageResult,
        ElicitRequestParams, ElicitResult, ElicitationAction, GetPromptRequestParams,
        Implementation, LoggingLevel, LoggingMessageNotificationParam, ReadResourceRequestParams,
        Reference, SamplingMessage, SetLevelRequestParams, SubscribeRequestParams,
    },
    service::{NotificationContext, RequestContext, RunningService, ServiceError},
    transport::TokioChildProcess,
};
use serde_json::{Value, json};
use tokio::sync::Notify;

/// A client that declares sampling and elicitation, answers both, and records what it got.
#[derive(Clone, Default)]
struct Answering {
    sampled: Arc<Mutex<Vec<Value>>>,
    elicited: Arc<Mutex<Vec<Value>>>,
    logs: Arc<Mutex<Vec<LoggingMessageNotificationParam>>>,
    log_seen: Arc<Notify>,
}

impl ClientHandler for Answering {
    fn get_info(&self) -> ClientConfig {
        let capabilities = ClientCapabilities::builder()
            .enable_sampling()
            .enable_elicitation()
            .build();
        ClientConfig::new(
            capabilities,
            Implementation::new("conformance-fixture-test", "0"),
        )
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, McpError> {
        self.sampled
            .lock()
            .unwrap()
            .push(serde_json::to_value(&params).unwrap());
        Ok(CreateMessageResult::new(
            SamplingMessage::assistant_text("the model's answer"),
            "test-model".into(),
        ))
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, McpError> {
        self.elicited
            .lock()
            .unwrap()
            .push(serde_json::to_value(&request).unwrap());
        Ok(ElicitResult::new(ElicitationAction::Accept)
            .with_content(json!({"username": "ada", "email": "ada@example.com"})))
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.logs.lock().unwrap().push(params);
        self.log_seen.notify_waiters();
    }
}

async fn fixture() -> (Client, Answering) {
    let command = tokio::process::Command::new(common::example("conformance_server"));
    let (transport, _stderr) = TokioChildProcess::builder(command)
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn conformance_server");
    let handler = Answering::default();
    let client = handler
        .clone()
        .serve(transport)
        .await
        .expect("MCP handshake with conformance_server over stdio");
    (client, handler)
}

type Client = RunningService<RoleClient, Answering>;

async fn call(
    client: &Client,
    name: &str,
    arguments: Value,
) -> Result<CallToolResult, ServiceError> {
    let mut params = CallToolRequestParams::new(name.to_owned());
    params.arguments = arguments.as_object().cloned();
    client.call_tool(params).await
}

fn to_json(value: &impl serde::Serialize) -> Value {
    serde_json::to_value(value).expect("serializes")
}

/// The text of the first content block of a `tools/call` result.
fn first_text(result: &Value) -> &str {
    result
        .pointer("/content/0/text")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

#[tokio::test]
async fn offers_the_names_the_scenarios_call() {
    let (client, _) = fixture().await;
    let mut tools: Vec<String> = client
        .list_all_tools()
        .await
        .expect("tools/list")
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    tools.sort();
    assert_eq!(
        tools,
        [
            "json_schema_2020_12_tool",
            "test_audio_content",
            "test_elicitation",
            "test_elicitation_sep1034_defaults",
            "test_elicitation_sep1330_enums",
            "test_embedded_resource",
            "test_error_handling",
            "test_image_content",
            "test_multiple_content_types",
            "test_sampling",
            "test_simple_text",
            "test_tool_with_logging",
            "test_tool_with_progress",
        ]
    );
    let resources: Vec<String> = client
        .list_all_resources()
        .await
        .expect("resources/list")
        .into_iter()
        .map(|r| r.uri.clone())
        .collect();
    assert_eq!(
        resources,
        [
            "test://static-text",
            "test://static-binary",
            "test://watched-resource"
        ]
    );
    let templates = to_json(
        &client
            .list_all_resource_templates()
            .await
            .expect("resources/templates/list"),
    );
    assert_eq!(templates[0]["uriTemplate"], "test://template/{id}/data");
    let prompts: Vec<String> = client
        .list_all_prompts()
        .await
        .expect("prompts/list")
        .into_iter()
        .map(|p| p.name)
        .collect();
    assert_eq!(
        prompts,
        [
            "test_simple_prompt",
            "test_prompt_with_arguments",
            "test_prompt_with_embedded_resource",
            "test_prompt_with_image"
        ]
    );
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn reads_resources_gets_prompts_and_completes() {
    let (client, _) = fixture().await;
    let read = |uri: &str| client.read_resource(ReadResourceRequestParams::new(uri));
    let text = to_json(&read("test://static-text").await.expect("read text"));
    assert_eq!(
        text["contents"][0]["text"],
        "This is the content of the static text resource."
    );
    let binary = to_json(&read("test://static-binary").await.expect("read binary"));
    assert_eq!(binary["contents"][0]["mimeType"], "image/png");
    assert!(
        binary["contents"][0]["blob"]
            .as_str()
            .is_some_and(|b| !b.is_empty())
    );
    let templated = to_json(
        &read("test://template/42/data")
            .await
            .expect("read template"),
    );
    assert_eq!(templated["contents"][0]["uri"], "test://template/42/data");
    assert!(
        templated["contents"][0]["text"]
            .as_str()
            .unwrap()
            .contains("Data for ID: 42")
    );
    let missing = read("test://nothing").await.expect_err("unknown URI");
    assert!(missing.to_string().contains("test://nothing"), "{missing}");

    client
        .subscribe(SubscribeRequestParams::new("test://watched-resource"))
        .await
        .expect("resources/subscribe");

    let arguments = json!({"arg1": "hello", "arg2": "world"});
    let prompt = client
        .get_prompt(
            GetPromptRequestParams::new("test_prompt_with_arguments")
                .with_arguments(arguments.as_object().unwrap().clone()),
        )
        .await
        .expect("prompts/get");
    assert_eq!(
        to_json(&prompt)["messages"][0]["content"]["text"],
        "Prompt with arguments: arg1='hello', arg2='world'"
    );
    let no_args = client
        .get_prompt(GetPromptRequestParams::new("test_prompt_with_arguments"))
        .await
        .expect_err("arguments are required");
    assert!(no_args.to_string().contains("arg1"), "{no_args}");

    let completion = client
        .complete(CompleteRequestParams::new(
            Reference::for_prompt("test_prompt_with_arguments"),
            ArgumentInfo::new("arg1", "par"),
        ))
        .await
        .expect("completion/complete");
    assert_eq!(completion.completion.values, ["paris", "park", "party"]);
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn asks_the_caller_for_sampling_and_elicitation() {
    let (client, handler) = fixture().await;
    let result = to_json(
        &call(&client, "test_sampling", json!({"prompt": "two plus two?"}))
            .await
            .expect("test_sampling"),
    );
    assert_eq!(first_text(&result), "LLM response: the model's answer");
    let sampled = handler.sampled.lock().unwrap().clone();
    assert_eq!(sampled.len(), 1);
    assert_eq!(
        sampled[0]["messages"][0]["content"]["text"],
        "two plus two?"
    );

    let result = to_json(
        &call(
            &client,
            "test_elicitation",
            json!({"message": "who are you?"}),
        )
        .await
        .expect("test_elicitation"),
    );
    assert_eq!(
        first_text(&result),
        r#"User response: action=accept, content={"email":"ada@example.com","username":"ada"}"#
    );
    let elicited = handler.elicited.lock().unwrap().clone();
    assert_eq!(elicited.len(), 1);
    assert_eq!(elicited[0]["message"], "who are you?");
    assert_eq!(
        elicited[0]["requestedSchema"]["required"],
        json!(["username", "email"])
    );
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn log_messages_follow_the_session_level() {
    let (client, handler) = fixture().await;
    let set_level = |level| client.set_level(SetLevelRequestParams::new(level));

    // Above the tool's `info` messages: none may arrive.
    set_level(LoggingLevel::Warning)
        .await
        .expect("logging/setLevel");
    call(&client, "test_tool_with_logging", json!({}))
        .await
        .expect("test_tool_with_logging");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(handler.logs.lock().unwrap().is_empty());

    set_level(LoggingLevel::Info)
        .await
        .expect("logging/setLevel");
    call(&client, "test_tool_with_logging", json!({}))
        .await
        .expect("test_tool_with_logging");
    tokio::time::timeout(Duration::from_secs(10), async {
        while handler.logs.lock().unwrap().len() < 3 {
            let seen = handler.log_seen.notified();
            if handler.logs.lock().unwrap().len() >= 3 {
                break;
            }
            seen.await;
        }
    })
    .await
    .expect("three log messages within 10 s");
    let logs = handler.logs.lock().unwrap().clone();
    let texts: Vec<&str> = logs.iter().filter_map(|l| l.data.as_str()).collect();
    assert_eq!(
        texts,
        [
            "Tool execution started",
            "Tool processing data",
            "Tool execution completed"
        ]
    );
    assert!(logs.iter().all(
        |l| l.level == LoggingLevel::Info && l.logger.as_deref() == Some("conformance-server")
    ));
    client.cancel().await.expect("close");
}
