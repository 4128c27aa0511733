//! A 2026-07-28 client gets the sampling, elicitation and roots requests a 2025-era upstream makes during its `tools/call` as `InputRequiredResult` rounds, over stdio and HTTP, and its retries carry the answers back.
#![allow(deprecated)] // sampling and roots: 2025-era features the upstream uses

mod common;

use std::time::Duration;

use common::{answers::Answers, *};
use rmcp::{
    RoleClient,
    model::{ProtocolVersion, ResultType},
    service::RunningService,
};
use serde_json::{Value, json};

const LIMIT: Duration = Duration::from_secs(10);

type Modern = RunningService<RoleClient, Answers>;

fn notes() -> Workdir {
    Workdir::new(&server_toml("notes", "notes_server", &[]))
}

async fn call_modern(client: &Modern, name: &str, args: Value) -> rmcp::model::CallToolResult {
    let mut params = rmcp::model::CallToolRequestParams::new(name.to_owned());
    params.arguments = args.as_object().cloned();
    tokio::time::timeout(LIMIT, client.call_tool(params))
        .await
        .unwrap_or_else(|_| panic!("{name} in time"))
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The three kinds of request each reach the client and its answer reaches the upstream.
async fn asks_are_answered(client: &Modern) {
    let info = client
        .peer_info()
        .expect("discover stored the server's info");
    assert_eq!(info.protocol_version, ProtocolVersion::V_2026_07_28);
    let sampled = call_modern(client, "notes__ask_model", json!({"prompt": "2+2?"})).await;
    assert!(
        text(&sampled).contains("you asked") && text(&sampled).contains("2+2?"),
        "{}",
        text(&sampled)
    );
    assert_eq!(sampled.result_type, Some(ResultType::COMPLETE));
    let elicited = call_modern(client, "notes__ask_user", json!({"question": "ok?"})).await;
    assert_eq!(text(&elicited), "user Accept: {\"answer\":\"yes\"}");
    let roots = call_modern(client, "notes__roots", json!({})).await;
    assert_eq!(text(&roots), "file:///work");
}

#[tokio::test]
async fn a_modern_stdio_client_answers_in_rounds() {
    let work = notes();
    let client = modern::over_stdio(Answers::default(), &work).await;
    asks_are_answered(&client).await;
    client.cancel().await.ok();
}

#[tokio::test]
async fn a_modern_http_client_answers_in_rounds() {
    let work = notes();
    let gateway = HttpGateway::start(&work).await;
    let client = modern::over_http(Answers::default(), &gateway.url).await;
    asks_are_answered(&client).await;
    client.cancel().await.ok();
}

/// `_meta` of a 2026-07-28 request whose client declares elicitation.
fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"}
    })
}

/// A 2026-07-28 `tools/call`, with `extra` params (`requestState`, `inputResponses`).
fn modern_call(id: u64, name: &str, arguments: Value, extra: Value) -> Value {
    let mut params = json!({"name": name, "arguments": arguments, "_meta": meta()});
    if let (Some(params), Some(extra)) = (params.as_object_mut(), extra.as_object()) {
        params.extend(extra.clone());
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
}

fn accept(answer: &str) -> Value {
    json!({"action": "accept", "content": {"answer": answer}})
}

/// The one elicitation an `InputRequiredResult` asks for: its key and `requestState`.
fn asked_elicitation(answer: &Value) -> (String, String) {
    let result = &answer["result"];
    assert_eq!(result["resultType"], "input_required", "{answer}");
    let requests = result["inputRequests"].as_object().expect("inputRequests");
    assert_eq!(requests.len(), 1, "{answer}");
    let (key, request) = requests.iter().next().expect("one request");
    assert_eq!(request["method"], "elicitation/create", "{answer}");
    assert_eq!(request["params"]["message"], "ok?", "{answer}");
    let state = result["requestState"].as_str().expect("requestState");
    (key.clone(), state.to_owned())
}

fn error_code(answer: &Value) -> (i64, String, String) {
    let error = &answer["error"];
    (
        error["code"]
            .as_i64()
            .unwrap_or_else(|| panic!("an error: {answer}")),
        error["data"]["code"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        error["message"].as_str().unwrap_or_default().to_owned(),
    )
}

#[tokio::test]
async fn raw_rounds_over_stdio_check_state_and_responses() {
    let work = notes();
    let mut raw = RawStdio::spawn(&work);
    let ask = json!({"question": "ok?"});
    raw.send(&modern_call(1, "notes__ask_user", ask.clone(), json!({})))
        .await;
    let (key, state) = asked_elicitation(&raw.next_answer().await);
    assert!(state.len() >= 32, "a long random state: {state}");

    // A made-up state, and the state on another tool: refused; the exchange stays parked.
    raw.send(&modern_call(
        2,
        "notes__ask_user",
        ask.clone(),
        json!({"requestState": "tg.0000", "inputResponses": {key.clone(): accept("no")}}),
    ))
    .await;
    let (code, data, message) = error_code(&raw.next_answer().await);
    assert_eq!(
        (code, data.as_str()),
        (-32602, "UNKNOWN_REQUEST_STATE"),
        "{message}"
    );
    raw.send(&modern_call(
        3,
        "notes__roots",
        json!({}),
        json!({"requestState": state.clone()}),
    ))
    .await;
    let (code, data, message) = error_code(&raw.next_answer().await);
    assert_eq!(
        (code, data.as_str()),
        (-32602, "REQUEST_STATE_MISMATCH"),
        "{message}"
    );
    assert!(message.contains("notes__ask_user"), "{message}");

    // An answer that is no elicitation result: refused, naming the key.
    raw.send(&modern_call(
        4,
        "notes__ask_user",
        ask.clone(),
        json!({"requestState": state.clone(), "inputResponses": {key.clone(): {"action": 5}}}),
    ))
    .await;
    let (code, data, message) = error_code(&raw.next_answer().await);
    assert_eq!(
        (code, data.as_str()),
        (-32602, "INVALID_INPUT_RESPONSE"),
        "{message}"
    );
    assert!(message.contains(&key), "{message}");

    // The right retry: the answer reaches the upstream and its result comes back.
    raw.send(&modern_call(
        5,
        "notes__ask_user",
        ask.clone(),
        json!({"requestState": state.clone(), "inputResponses": {key.clone(): accept("sure")}}),
    ))
    .await;
    let answer = raw.next_answer().await;
    assert_eq!(answer["id"], 5, "{answer}");
    assert_eq!(answer["result"]["resultType"], "complete", "{answer}");
    assert_eq!(
        answer["result"]["content"][0]["text"], "user Accept: {\"answer\":\"sure\"}",
        "{answer}"
    );

    // A state works once.
    raw.send(&modern_call(
        6,
        "notes__ask_user",
        ask,
        json!({"requestState": state, "inputResponses": {key: accept("again")}}),
    ))
    .await;
    let (code, data, _) = error_code(&raw.next_answer().await);
    assert_eq!((code, data.as_str()), (-32602, "UNKNOWN_REQUEST_STATE"));
}

#[tokio::test]
async fn a_client_that_did_not_declare_elicitation_gets_the_error_not_a_round() {
    let work = notes();
    let mut raw = RawStdio::spawn(&work);
    let mut call = modern_call(1, "notes__ask_user", json!({"question": "ok?"}), json!({}));
    call["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] = json!({});
    raw.send(&call).await;
    let (code, _, message) = error_code(&raw.next_answer().await);
    assert_eq!(code, -32601, "{message}");
    assert!(
        message.contains("did not declare") && message.contains("elicitation/create"),
        "{message}"
    );
}

/// POSTs a 2026-07-28 request (no session) with `token`.
async fn post_modern(url: &str, token: &str, body: &Value) -> Value {
    let name = body["params"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let bearer = format!("Bearer {token}");
    let headers = [
        ("authorization", bearer.as_str()),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", name.as_str()),
    ];
    let response = mcp_post(url, None, &headers, body).await;
    jsonrpc_answer(response).await
}

#[tokio::test]
async fn over_http_a_state_is_bound_to_the_credential_that_got_it() {
    let work = Workdir::new(&format!(
        "{}\n[profiles.default]\ntokens = [\"token-a\", \"token-b\"]\n",
        server_toml("notes", "notes_server", &[])
    ));
    let gateway = HttpGateway::start(&work).await;
    let ask = json!({"question": "ok?"});
    let first = post_modern(
        &gateway.url,
        "token-a",
        &modern_call(1, "notes__ask_user", ask.clone(), json!({})),
    )
    .await;
    let (key, state) = asked_elicitation(&first);

    let retry = |id| {
        modern_call(
            id,
            "notes__ask_user",
            ask.clone(),
            json!({"requestState": state.clone(), "inputResponses": {key.clone(): accept("http")}}),
        )
    };
    let foreign = post_modern(&gateway.url, "token-b", &retry(2)).await;
    let (code, data, message) = error_code(&foreign);
    assert_eq!(
        (code, data.as_str()),
        (-32602, "UNKNOWN_REQUEST_STATE"),
        "{message}"
    );

    let own = post_modern(&gateway.url, "token-a", &retry(3)).await;
    assert_eq!(
        own["result"]["content"][0]["text"], "user Accept: {\"answer\":\"http\"}",
        "{own}"
    );
}

#[tokio::test]
async fn the_calls_timeout_spans_its_rounds() {
    let work = Workdir::new(&format!(
        "[gateway]\ncall_timeout_ms = 1500\n\n{}",
        server_toml("notes", "notes_server", &[])
    ));
    let mut raw = RawStdio::spawn(&work);
    let ask = json!({"question": "ok?"});
    raw.send(&modern_call(1, "notes__ask_user", ask.clone(), json!({})))
        .await;
    let (key, state) = asked_elicitation(&raw.next_answer().await);
    // The client takes longer to answer than the whole call may take.
    tokio::time::sleep(Duration::from_millis(2000)).await;
    raw.send(&modern_call(
        2,
        "notes__ask_user",
        ask,
        json!({"requestState": state, "inputResponses": {key: accept("late")}}),
    ))
    .await;
    let answer = raw.next_answer().await;
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert_eq!(
        answer["result"]["content"][0]["text"], "tool call timed out after 1500ms",
        "{answer}"
    );
}

#[tokio::test]
async fn an_unanswered_request_is_asked_again_under_a_new_state() {
    let work = notes();
    let mut raw = RawStdio::spawn(&work);
    let ask = json!({"question": "ok?"});
    raw.send(&modern_call(1, "notes__ask_user", ask.clone(), json!({})))
        .await;
    let (key, state) = asked_elicitation(&raw.next_answer().await);
    // A retry that answers nothing gets the same request again, under a new state.
    raw.send(&modern_call(
        2,
        "notes__ask_user",
        ask.clone(),
        json!({"requestState": state.clone()}),
    ))
    .await;
    let (again_key, again_state) = asked_elicitation(&raw.next_answer().await);
    assert_eq!(again_key, key);
    assert_ne!(again_state, state, "a state works once");
    raw.send(&modern_call(
        3,
        "notes__ask_user",
        ask,
        json!({"requestState": again_state, "inputResponses": {key: accept("later")}}),
    ))
    .await;
    let answer = raw.next_answer().await;
    assert_eq!(
        answer["result"]["content"][0]["text"], "user Accept: {\"answer\":\"later\"}",
        "{answer}"
    );
}

#[tokio::test]
async fn prompts_and_resource_reads_take_rounds_too() {
    let work = notes();
    let client = modern::over_stdio(Answers::default(), &work).await;

    let mut get = rmcp::model::GetPromptRequestParams::new("notes__greet");
    get.arguments = json!({"name": "?"}).as_object().cloned();
    let prompt = tokio::time::timeout(LIMIT, client.get_prompt(get))
        .await
        .expect("prompts/get in time")
        .expect("prompts/get after an elicitation round");
    let said = prompt.messages[0]
        .content
        .as_text()
        .map(|t| t.text.as_str());
    assert_eq!(said, Some("Hello, yes!"));

    let read = rmcp::model::ReadResourceRequestParams::new("notes+note://roots");
    let read = tokio::time::timeout(LIMIT, client.read_resource(read))
        .await
        .expect("resources/read in time")
        .expect("resources/read after a roots round");
    match read.contents.first() {
        Some(rmcp::model::ResourceContents::TextResourceContents { text, uri, .. }) => {
            assert_eq!(
                (text.as_str(), uri.as_str()),
                ("file:///work", "notes+note://roots")
            );
        }
        other => panic!("expected text contents, got {other:?}"),
    }
    client.cancel().await.ok();
}

#[tokio::test]
async fn an_approval_hooks_ask_is_a_round_too() {
    let work = Workdir::new("");
    let toml = format!(
        "{}[[hooks]]\nstage = \"pre\"\ncommand = [\"env\", \"POLICY_ASK=echo__echo\", {}]\ntimeout_ms = 3000\n",
        server_toml("echo", "echo_server", &[]),
        toml_string(&example("policy_hook").display().to_string()),
    );
    std::fs::write(work.config(), toml).expect("write config");
    let mut raw = RawStdio::spawn(&work);
    let text = json!({"text": "approved"});
    raw.send(&modern_call(1, "echo__echo", text.clone(), json!({})))
        .await;
    let answer = raw.next_answer().await;
    let result = &answer["result"];
    assert_eq!(result["resultType"], "input_required", "{answer}");
    let requests = result["inputRequests"].as_object().expect("inputRequests");
    let (key, request) = requests.iter().next().expect("the approval request");
    assert_eq!(request["method"], "elicitation/create", "{answer}");
    let message = request["params"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("Allow tool \"echo__echo\"?"),
        "{answer}"
    );
    let state = result["requestState"].as_str().expect("requestState");

    raw.send(&modern_call(
        2,
        "echo__echo",
        text,
        json!({"requestState": state, "inputResponses": {key.clone(): {"action": "accept", "content": {}}}}),
    ))
    .await;
    let answer = raw.next_answer().await;
    assert_eq!(
        answer["result"]["content"][0]["text"], "approved",
        "{answer}"
    );
}

#[tokio::test]
async fn cancelling_a_retry_cancels_the_upstream_call() {
    let work = Workdir::new("");
    let cancels = work.path("cancel.log").display().to_string();
    let toml = format!(
        "{}[[hooks]]\nstage = \"pre\"\ncommand = [\"env\", \"POLICY_ASK=echo__sleep\", {}]\ntimeout_ms = 3000\n",
        server_toml("echo", "echo_server", &[("ECHO_CANCEL_LOG", &cancels)]),
        toml_string(&example("policy_hook").display().to_string()),
    );
    std::fs::write(work.config(), toml).expect("write config");
    let mut raw = RawStdio::spawn(&work);
    let sleep = json!({"ms": 30000});
    raw.send(&modern_call(1, "echo__sleep", sleep.clone(), json!({})))
        .await;
    let answer = raw.next_answer().await;
    let result = &answer["result"];
    assert_eq!(result["resultType"], "input_required", "{answer}");
    let key = result["inputRequests"]
        .as_object()
        .and_then(|r| r.keys().next().cloned())
        .expect("the approval request");
    let state = result["requestState"].as_str().expect("requestState");
    // Approved: the retry now waits for the 30 s sleep; the client cancels it.
    raw.send(&modern_call(
        2,
        "echo__sleep",
        sleep,
        json!({"requestState": state, "inputResponses": {key: {"action": "accept", "content": {}}}}),
    ))
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    raw.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 2, "reason": "test"}}),
    )
    .await;
    wait_for_file(&work.path("cancel.log"), "cancelled sleep", LIMIT).await;
}
