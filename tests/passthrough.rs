//! Prompts, resources, completion, logging and server requests pass through toolgate, named by the prefix policy and masked per profile.
#![allow(deprecated)] // logging, sampling and roots: 2025-era features relayed here

mod common;

use std::time::Duration;

use common::{Workdir, answers::Answers, server_toml, text, toolgate};
use rmcp::{
    RoleClient, ServiceExt,
    model::{
        ArgumentInfo, CompleteRequestParams, GetPromptRequestParams, LoggingLevel,
        ReadResourceRequestParams, Reference, ResourceContents, SetLevelRequestParams,
        SubscribeRequestParams,
    },
    service::{RunningService, ServiceError},
    transport::{StreamableHttpClientTransport, TokioChildProcess},
};
use serde_json::json;

type Client = RunningService<RoleClient, Answers>;

fn notes(prefix: &str, extra: &str) -> Workdir {
    Workdir::new(&format!(
        "[gateway]\nprefix = \"{prefix}\"\n\n{}{}{extra}",
        server_toml("notes", "notes_server", &[]),
        server_toml("other", "other_server", &[]),
    ))
}

async fn stdio(work: &Workdir, profile: Option<&str>) -> (Client, Answers) {
    let mut command = tokio::process::Command::new(toolgate());
    command.arg("--config").arg(work.config()).arg("serve");
    if let Some(profile) = profile {
        command.args(["--profile", profile]);
    }
    let (transport, _) = TokioChildProcess::builder(command)
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .expect("spawn toolgate");
    let asked = Answers::default();
    let client = asked.clone().serve(transport).await.expect("handshake");
    (client, asked)
}

async fn read_uri(
    client: &Client,
    uri: &str,
) -> Result<rmcp::model::ReadResourceResult, ServiceError> {
    client
        .read_resource(ReadResourceRequestParams::new(uri))
        .await
}

fn uris(result: &rmcp::model::ReadResourceResult) -> Vec<String> {
    result
        .contents
        .iter()
        .map(|c| match c {
            ResourceContents::TextResourceContents { uri, .. }
            | ResourceContents::BlobResourceContents { uri, .. } => uri.clone(),
            _ => String::new(),
        })
        .collect()
}

fn contents_text(result: &rmcp::model::ReadResourceResult) -> String {
    match result.contents.first() {
        Some(ResourceContents::TextResourceContents { text, .. }) => text.clone(),
        other => panic!("expected text contents, got {other:?}"),
    }
}

fn rpc_code(error: ServiceError) -> (i32, String) {
    match error {
        ServiceError::McpError(error) => (error.code.0, error.message.to_string()),
        other => panic!("expected a JSON-RPC error, got {other}"),
    }
}

#[tokio::test]
async fn lists_are_named_by_the_prefix_policy_and_capabilities_follow_the_servers() {
    let work = notes("always", "");
    let (client, _) = stdio(&work, None).await;
    let info = client.peer_info().expect("server info");
    let caps = &info.capabilities;
    assert!(caps.prompts.is_some(), "prompts advertised: {caps:?}");
    let resources = caps.resources.as_ref().expect("resources advertised");
    assert_eq!(resources.subscribe, Some(true));
    assert!(caps.completions.is_some() && caps.logging.is_some());

    let prompts: Vec<String> = client
        .list_all_prompts()
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.name)
        .collect();
    assert_eq!(prompts, ["notes__greet", "notes__summary"]);
    let resources: Vec<String> = client
        .list_all_resources()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.uri.clone())
        .collect();
    assert_eq!(resources, ["notes+note://welcome", "notes+note://logo"]);
    let templates = client.list_all_resource_templates().await.unwrap();
    assert_eq!(templates[0].uri_template, "notes+note://{name}");
    client.cancel().await.ok();

    let work = notes("never", "");
    let (client, _) = stdio(&work, None).await;
    let prompts = client.list_all_prompts().await.unwrap();
    assert_eq!(prompts[0].name, "greet", "never: names pass unchanged");
    let resources = client.list_all_resources().await.unwrap();
    assert_eq!(resources[0].uri, "note://welcome");
    client.cancel().await.ok();
}

#[tokio::test]
async fn a_gateway_whose_servers_offer_no_prompts_advertises_none() {
    let work = Workdir::new(&server_toml("other", "other_server", &[]));
    let (client, _) = stdio(&work, None).await;
    let caps = &client.peer_info().expect("server info").capabilities;
    assert!(
        caps.prompts.is_none() && caps.resources.is_none(),
        "{caps:?}"
    );
    let (code, _) = rpc_code(client.list_prompts(None).await.unwrap_err());
    assert_eq!(code, -32601, "prompts/list is not offered");
    client.cancel().await.ok();
}

#[tokio::test]
async fn prompts_and_resources_route_back_to_their_server() {
    let work = notes("always", "");
    let (client, _) = stdio(&work, None).await;

    let mut get = GetPromptRequestParams::new("notes__greet");
    get.arguments = json!({"name": "Ann"}).as_object().cloned();
    let prompt = client.get_prompt(get).await.expect("prompts/get");
    let said = prompt.messages[0]
        .content
        .as_text()
        .map(|t| t.text.as_str());
    assert_eq!(said, Some("Hello, Ann!"));
    let (code, message) = rpc_code(
        client
            .get_prompt(GetPromptRequestParams::new("notes__nope"))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (code, message.as_str()),
        (-32602, "unknown prompt \"notes__nope\"")
    );

    let read = read_uri(&client, "notes+note://welcome")
        .await
        .expect("listed resource");
    assert_eq!(contents_text(&read), "Welcome to notes.");
    assert_eq!(
        uris(&read),
        ["notes+note://welcome"],
        "the URI comes back as listed"
    );

    let by_template = read_uri(&client, "notes+note://shopping")
        .await
        .expect("a URI of the template");
    assert_eq!(contents_text(&by_template), "note shopping");

    let logo = read_uri(&client, "notes+note://logo").await.expect("blob");
    assert!(matches!(
        &logo.contents[0],
        ResourceContents::BlobResourceContents { blob, .. } if blob == "iVBORw0KGgo="
    ));

    let (code, message) = rpc_code(read_uri(&client, "elsewhere://x").await.unwrap_err());
    assert_eq!(code, -32002, "resource not found: {message}");
    assert!(message.contains("elsewhere://x"), "{message}");
    client.cancel().await.ok();
}

#[tokio::test]
async fn completion_goes_to_the_owning_server() {
    let work = notes("always", "");
    let (client, _) = stdio(&work, None).await;
    let completes = async |reference: Reference, typed: &str| {
        let request = CompleteRequestParams::new(reference, ArgumentInfo::new("name", typed));
        client
            .complete(request)
            .await
            .expect("completion/complete")
            .completion
            .values
    };
    let prompt = completes(Reference::for_prompt("notes__greet"), "a").await;
    assert_eq!(prompt, ["alice"]);
    let template = completes(Reference::for_resource("notes+note://{name}"), "b").await;
    assert_eq!(template, ["bob"]);
    client.cancel().await.ok();
}

#[tokio::test]
async fn log_messages_reach_the_caller_at_its_level_named_by_server() {
    let work = notes("always", "");
    let (client, asked) = stdio(&work, None).await;
    client
        .set_level(SetLevelRequestParams::new(LoggingLevel::Info))
        .await
        .expect("logging/setLevel");
    call(&client, "notes__log", json!({"message": "hello"}))
        .await
        .unwrap();
    asked
        .wait_until("the log message", |a| a.log_data() == ["hello"])
        .await;
    let logger = asked.logs.lock().unwrap()[0].logger.clone();
    assert_eq!(logger.as_deref(), Some("notes/notes"), "server/logger");

    client
        .set_level(SetLevelRequestParams::new(LoggingLevel::Error))
        .await
        .unwrap();
    call(
        &client,
        "notes__log",
        json!({"message": "quiet", "level": "info"}),
    )
    .await
    .unwrap();
    call(
        &client,
        "notes__log",
        json!({"message": "loud", "level": "error"}),
    )
    .await
    .unwrap();
    asked
        .wait_until("the error message", |a| a.log_data().len() == 2)
        .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        asked.log_data(),
        ["hello", "loud"],
        "below the session's level: dropped"
    );
    client.cancel().await.ok();
}

#[tokio::test]
async fn sampling_elicitation_and_roots_reach_the_calling_client() {
    let work = notes("always", "");
    let (client, _) = stdio(&work, None).await;
    let sampled = call(&client, "notes__ask_model", json!({"prompt": "2+2?"}))
        .await
        .unwrap();
    assert!(
        text(&sampled).contains("you asked") && text(&sampled).contains("2+2?"),
        "{}",
        text(&sampled)
    );
    let elicited = call(&client, "notes__ask_user", json!({"question": "ok?"}))
        .await
        .unwrap();
    assert_eq!(text(&elicited), "user Accept: {\"answer\":\"yes\"}");
    let roots = call(&client, "notes__roots", json!({})).await.unwrap();
    assert_eq!(text(&roots), "file:///work");
    client.cancel().await.ok();
}

#[tokio::test]
async fn a_client_without_the_capability_gets_an_error_never_a_made_up_answer() {
    let work = notes("always", "");
    let (client, _) = common::stdio_client(&work).await;
    let error = common::call(&client, "notes__ask_model", json!({"prompt": "2+2?"}))
        .await
        .expect_err("the upstream's tool fails with the relayed error");
    let (code, message) = rpc_code(error);
    assert_eq!(code, -32601, "{message}");
    assert!(
        message.contains("did not declare") && message.contains("sampling/createMessage"),
        "{message}"
    );
    client.cancel().await.ok();
}

#[tokio::test]
async fn subscribed_sessions_get_updates_under_the_uri_they_subscribed_with() {
    let work = notes("always", "");
    let (client, asked) = stdio(&work, None).await;
    client
        .subscribe(SubscribeRequestParams::new("notes+note://today"))
        .await
        .expect("resources/subscribe");
    call(&client, "notes__touch", json!({"name": "today"}))
        .await
        .unwrap();
    asked
        .wait_until("the update", |a| !a.updates.lock().unwrap().is_empty())
        .await;
    assert_eq!(*asked.updates.lock().unwrap(), ["notes+note://today"]);
    call(&client, "notes__touch", json!({"name": "elsewhere"}))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        asked.updates.lock().unwrap().len(),
        1,
        "not subscribed to that one"
    );
    client.cancel().await.ok();
}

#[tokio::test]
async fn prompt_and_resource_list_changes_are_announced() {
    let work = notes("always", "");
    let (client, asked) = stdio(&work, None).await;
    call(
        &client,
        "notes__add_note",
        json!({"name": "n1", "text": "first"}),
    )
    .await
    .unwrap();
    asked
        .wait_until("both announcements", |a| {
            let changes = a.changes.lock().unwrap();
            changes.contains(&"prompts") && changes.contains(&"resources")
        })
        .await;
    let prompts = client.list_all_prompts().await.unwrap();
    assert!(prompts.iter().any(|p| p.name == "notes__about_n1"));
    let read = read_uri(&client, "notes+note://n1").await.unwrap();
    assert_eq!(contents_text(&read), "first");
    client.cancel().await.ok();
}

#[tokio::test]
async fn profile_masks_apply_to_prompt_names_and_uris() {
    let profile = "\n[profiles.limited]\nallow = [\"notes__greet\", \"notes+note://welcome\", \"other__*\"]\n";
    let work = notes("always", profile);
    let (client, _) = stdio(&work, Some("limited")).await;
    let prompts: Vec<String> = client
        .list_all_prompts()
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.name)
        .collect();
    assert_eq!(prompts, ["notes__greet"]);
    let resources = client.list_all_resources().await.unwrap();
    assert_eq!(resources.len(), 1);
    assert!(
        client
            .list_all_resource_templates()
            .await
            .unwrap()
            .is_empty()
    );
    let (code, _) = rpc_code(read_uri(&client, "notes+note://logo").await.unwrap_err());
    assert_eq!(code, -32002, "a masked URI is not found");
    client.cancel().await.ok();
}

#[tokio::test]
async fn the_same_passes_through_over_http() {
    let work = notes("always", "");
    let gateway = common::HttpGateway::start(&work).await;
    let transport = StreamableHttpClientTransport::from_uri(gateway.url.clone());
    let asked = Answers::default();
    let client = asked
        .clone()
        .serve(transport)
        .await
        .expect("handshake over HTTP");
    let read = read_uri(&client, "notes+note://welcome").await.unwrap();
    assert_eq!(contents_text(&read), "Welcome to notes.");
    let sampled = call(&client, "notes__ask_model", json!({"prompt": "hi"}))
        .await
        .unwrap();
    assert!(text(&sampled).contains("you asked"), "{}", text(&sampled));
    client
        .set_level(SetLevelRequestParams::new(LoggingLevel::Debug))
        .await
        .unwrap();
    call(&client, "notes__log", json!({"message": "over http"}))
        .await
        .unwrap();
    asked
        .wait_until("the log message", |a| a.log_data() == ["over http"])
        .await;
    client.cancel().await.ok();
}

async fn call(
    client: &Client,
    name: &str,
    args: serde_json::Value,
) -> Result<rmcp::model::CallToolResult, ServiceError> {
    let mut params = rmcp::model::CallToolRequestParams::new(name.to_owned());
    params.arguments = args.as_object().cloned();
    client.call_tool(params).await
}
