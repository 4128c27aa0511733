//! Tracing: OTLP/HTTP export to a real receiver run by the test, and W3C `traceparent` from the
//! client through an HTTP pre hook to the upstream; `run_code` sub-calls as children of their
//! program's span; the `traceparent` header of an HTTP client; OTLP's default encoding
//! (protobuf) decoded with the OTLP messages.

mod common;

use std::{
    collections::HashMap,
    path::Path,
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{body::Bytes, extract::State, http::HeaderMap, http::header::CONTENT_TYPE};
use common::*;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use serde_json::{Value, json};

const CLIENT_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";

fn client_traceparent() -> String {
    format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-01")
}

/// What a [`Recording`] server got: each POST's `traceparent` header, content type and body
/// (a protobuf OTLP export as its OTLP/JSON form).
type Seen = Arc<Mutex<Vec<(Option<String>, String, Value)>>>;

/// A real HTTP server on 127.0.0.1 that records each POST: body (JSON) and `traceparent`.
struct Recording {
    base: String,
    seen: Seen,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Recording {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn record(
    State(seen): State<Seen>,
    headers: HeaderMap,
    body: Bytes,
) -> impl axum::response::IntoResponse {
    let traceparent = headers
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let content_type = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body = if content_type == "application/x-protobuf" {
        use prost::Message;
        let request = ExportTraceServiceRequest::decode(body.as_ref())
            .expect("a protobuf ExportTraceServiceRequest");
        serde_json::to_value(&request).expect("OTLP/JSON form")
    } else {
        serde_json::from_slice(&body)
            .unwrap_or_else(|_| json!({"not json": String::from_utf8_lossy(&body)}))
    };
    seen.lock().unwrap().push((traceparent, content_type, body));
    // An OTLP export's success is an empty `ExportTraceServiceResponse`; a pre hook's `allow`.
    (
        [(CONTENT_TYPE, "application/json")],
        r#"{"decision":"allow"}"#,
    )
}

impl Recording {
    /// Answers every POST, on any path.
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let base = format!("http://{}", listener.local_addr().unwrap());
        let seen: Seen = Arc::default();
        let app = axum::Router::new()
            .route("/{*path}", axum::routing::post(record))
            .with_state(seen.clone());
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.expect("server runs");
        });
        Self { base, seen, task }
    }

    fn seen(&self) -> Vec<(Option<String>, String, Value)> {
        self.seen.lock().unwrap().clone()
    }
}

/// One exported span, from OTLP/JSON.
#[derive(Debug, Clone)]
struct Span {
    trace_id: String,
    span_id: String,
    parent: String,
    name: String,
    attributes: HashMap<String, String>,
}

/// Every span in the receiver's OTLP/JSON exports (each checked to name the service).
fn spans(receiver: &Recording) -> Vec<Span> {
    let mut spans = Vec::new();
    for (_, _, export) in receiver.seen() {
        let resource_spans = export["resourceSpans"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert!(!resource_spans.is_empty(), "not an OTLP export: {export}");
        for resource in resource_spans {
            let service = attributes(&resource["resource"]["attributes"]);
            assert_eq!(
                service.get("service.name").map(String::as_str),
                Some("toolgate-test")
            );
            for scope in resource["scopeSpans"].as_array().into_iter().flatten() {
                for span in scope["spans"].as_array().into_iter().flatten() {
                    spans.push(Span {
                        trace_id: span["traceId"].as_str().unwrap_or_default().to_owned(),
                        span_id: span["spanId"].as_str().unwrap_or_default().to_owned(),
                        parent: span["parentSpanId"].as_str().unwrap_or_default().to_owned(),
                        name: span["name"].as_str().unwrap_or_default().to_owned(),
                        attributes: attributes(&span["attributes"]),
                    });
                }
            }
        }
    }
    spans
}

/// OTLP/JSON key-values as text (ints are strings or numbers in OTLP/JSON).
fn attributes(list: &Value) -> HashMap<String, String> {
    list.as_array()
        .into_iter()
        .flatten()
        .filter_map(|kv| {
            let value = kv["value"].as_object()?.values().next()?;
            let text = value
                .as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| value.to_string());
            Some((kv["key"].as_str()?.to_owned(), text))
        })
        .collect()
}

fn attr<'a>(span: &'a Span, key: &str) -> &'a str {
    span.attributes.get(key).map(String::as_str).unwrap_or("")
}

/// (trace id, parent span id) of a `traceparent`.
fn ids(traceparent: &str) -> (String, String) {
    let parts: Vec<&str> = traceparent.split('-').collect();
    assert_eq!(parts.len(), 4, "{traceparent}");
    assert_eq!(parts[0], "00", "{traceparent}");
    (parts[1].to_owned(), parts[2].to_owned())
}

/// The `traceparent` each call that reached the echo server carried, in order.
fn upstream_traceparents(call_log: &Path) -> Vec<Option<String>> {
    std::fs::read_to_string(call_log)
        .unwrap_or_default()
        .lines()
        .map(|line| {
            let call: Value = serde_json::from_str(line).expect("call log lines are JSON");
            call["traceparent"].as_str().map(str::to_owned)
        })
        .collect()
}

/// Receiver, hook server, and a config exporting to the receiver with a pre hook on every tool.
struct Setup {
    work: Workdir,
    call_log: std::path::PathBuf,
    receiver: Recording,
    hook: Recording,
}

async fn setup(gateway: &str) -> Setup {
    setup_with(gateway, "protocol = \"http/json\"\n").await
}

/// [`setup`] with `tracing` as the rest of `[gateway.tracing]`.
async fn setup_with(gateway: &str, tracing: &str) -> Setup {
    let receiver = Recording::start().await;
    let hook = Recording::start().await;
    let work = Workdir::new("");
    let call_log = work.path("calls.jsonl");
    let toml = format!(
        "[gateway]\n{gateway}\n\
         [gateway.tracing]\notlp_endpoint = {}\n{tracing}service_name = \"toolgate-test\"\n\n\
         {}\
         [[hooks]]\nstage = \"pre\"\ntools = [\"echo__*\"]\nhttp = {}\n",
        toml_string(&receiver.base),
        server_toml(
            "echo",
            "echo_server",
            &[("ECHO_CALL_LOG", call_log.to_str().unwrap())]
        ),
        toml_string(&format!("{}/pre", hook.base)),
    );
    std::fs::write(work.config(), toml).expect("write config");
    Setup {
        work,
        call_log,
        receiver,
        hook,
    }
}

fn traced_call(id: u64, name: &str, arguments: Value, traceparent: Option<&str>) -> Value {
    let mut request = call_request(id, name, arguments);
    if let Some(traceparent) = traceparent {
        request["params"]["_meta"] = json!({ "traceparent": traceparent });
    }
    request
}

#[tokio::test]
async fn a_call_is_one_trace_from_the_client_through_the_hook_to_the_upstream() {
    one_trace_through_hook_and_upstream("").await;
}

/// The same spans and the same propagation when rmcp's typed path takes the call.
#[tokio::test]
async fn the_typed_path_traces_the_same() {
    one_trace_through_hook_and_upstream("fast_path = false").await;
}

async fn one_trace_through_hook_and_upstream(gateway: &str) {
    let s = setup(gateway).await;
    let mut gateway = RawStdio::start(&s.work).await;
    let traceparent = client_traceparent();
    gateway
        .send(&traced_call(
            1,
            "echo__echo",
            json!({"text": "traced"}),
            Some(&traceparent),
        ))
        .await;
    let answer = gateway.next_answer().await;
    assert_eq!(answer["result"]["content"][0]["text"], "traced", "{answer}");
    // Without a traceparent: a trace of its own.
    gateway
        .send(&traced_call(
            2,
            "echo__echo",
            json!({"text": "fresh"}),
            None,
        ))
        .await;
    let answer = gateway.next_answer().await;
    assert_eq!(answer["result"]["content"][0]["text"], "fresh", "{answer}");
    // Stdin EOF: the gateway drains and exits, sending the spans still batched on its way.
    let (_, status) = gateway.finish().await;
    assert!(status.success(), "{status}");

    let spans = spans(&s.receiver);
    let hooks = s.hook.seen();
    let upstream = upstream_traceparents(&s.call_log);
    assert_eq!(hooks.len(), 2, "{hooks:?}");
    assert_eq!(upstream.len(), 2, "{upstream:?}");
    for (n, client) in [(0, Some(CLIENT_TRACE)), (1, None)] {
        let calls: Vec<&Span> = spans
            .iter()
            .filter(|span| attr(span, "call_id") == format!("c{}", n + 1))
            .collect();
        assert_eq!(calls.len(), 1, "one span for call {n}: {spans:#?}");
        let call = calls[0];
        assert_eq!(call.name, "tools/call echo__echo");
        assert_eq!(attr(call, "tool"), "echo__echo");
        assert_eq!(attr(call, "server"), "echo");
        assert_eq!(attr(call, "profile"), "default");
        assert_eq!(attr(call, "outcome"), "OK");
        assert!(attr(call, "duration_us").parse::<u64>().is_ok(), "{call:?}");
        match client {
            Some(trace) => {
                assert_eq!(call.trace_id, trace, "the client's trace continues");
                assert_eq!(call.parent, CLIENT_SPAN, "under the client's span");
            }
            None => {
                assert_ne!(call.trace_id, CLIENT_TRACE, "a new trace");
                assert!(call.parent.is_empty(), "a root span: {call:?}");
            }
        }
        let child = |name: &str| {
            let children: Vec<&Span> = spans
                .iter()
                .filter(|span| span.name == name && span.parent == call.span_id)
                .collect();
            assert_eq!(children.len(), 1, "one {name} under call {n}: {spans:#?}");
            assert_eq!(children[0].trace_id, call.trace_id);
            children[0].span_id.clone()
        };
        let hook_span = child("hook");
        let upstream_span = child("upstream tools/call");
        // What went out names the hop's own span in the same trace.
        let sent = hooks[n]
            .0
            .as_deref()
            .expect("the hook got a traceparent header");
        assert_eq!(ids(sent), (call.trace_id.clone(), hook_span));
        let sent = upstream[n]
            .as_deref()
            .expect("the upstream got _meta.traceparent");
        assert_eq!(ids(sent), (call.trace_id.clone(), upstream_span));
    }
}

#[tokio::test]
async fn run_code_sub_calls_are_children_of_the_run_code_span() {
    let s = setup("mode = \"both\"").await;
    let mut gateway = RawStdio::start(&s.work).await;
    let traceparent = client_traceparent();
    let code = "const a = await tools.echo__echo({ text: 'one' });\n\
                const b = await tools.echo__echo({ text: 'two' });\n\
                return [a, b];";
    gateway
        .send(&traced_call(
            1,
            "run_code",
            json!({ "code": code }),
            Some(&traceparent),
        ))
        .await;
    let answer = gateway.next_answer().await;
    assert!(
        answer["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|text| text.contains("one") && text.contains("two")),
        "{answer}"
    );
    let (_, status) = gateway.finish().await;
    assert!(status.success(), "{status}");

    let spans = spans(&s.receiver);
    let run: Vec<&Span> = spans
        .iter()
        .filter(|span| attr(span, "tool") == "run_code")
        .collect();
    assert_eq!(run.len(), 1, "{spans:#?}");
    let run = run[0];
    assert_eq!(
        (run.trace_id.as_str(), run.parent.as_str()),
        (CLIENT_TRACE, CLIENT_SPAN)
    );
    assert_eq!(attr(run, "outcome"), "OK");
    let run_id = attr(run, "call_id");
    let mut subs: Vec<&Span> = spans
        .iter()
        .filter(|span| span.name == "tools/call echo__echo")
        .collect();
    subs.sort_by_key(|span| attr(span, "call_id").to_owned());
    assert_eq!(subs.len(), 2, "{spans:#?}");
    for (n, sub) in subs.iter().enumerate() {
        assert_eq!(attr(sub, "call_id"), format!("{run_id}:code:{}", n + 1));
        assert_eq!(sub.parent, run.span_id, "a child of run_code: {sub:?}");
        assert_eq!(sub.trace_id, CLIENT_TRACE);
    }
    // The sub-calls' hops carry the client's trace too.
    let upstream = upstream_traceparents(&s.call_log);
    assert_eq!(upstream.len(), 2, "{upstream:?}");
    for sent in upstream {
        assert_eq!(ids(sent.as_deref().expect("a traceparent")).0, CLIENT_TRACE);
    }
    for (header, _, _) in s.hook.seen() {
        assert_eq!(
            ids(header.as_deref().expect("a traceparent")).0,
            CLIENT_TRACE
        );
    }
}

#[tokio::test]
async fn an_http_client_traceparent_header_starts_the_trace() {
    let s = setup("").await;
    let gateway = HttpGateway::start(&s.work).await;
    let traceparent = client_traceparent();
    let session = raw_session(&gateway.url, &[]).await;
    let response = mcp_post(
        &gateway.url,
        Some(&session),
        &[("traceparent", &traceparent)],
        &call_request(1, "echo__echo", json!({"text": "over http"})),
    )
    .await;
    let answer = jsonrpc_answer(response).await;
    assert_eq!(
        answer["result"]["content"][0]["text"], "over http",
        "{answer}"
    );
    let pid = gateway.child.id().expect("running");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("signal the gateway");
    let mut child = gateway.child;
    let status = tokio::time::timeout(Duration::from_secs(15), child.wait())
        .await
        .expect("the gateway exits on SIGTERM")
        .expect("wait");
    assert!(status.success(), "{status}");

    let spans = spans(&s.receiver);
    let call: Vec<&Span> = spans
        .iter()
        .filter(|span| span.name == "tools/call echo__echo")
        .collect();
    assert_eq!(call.len(), 1, "{spans:#?}");
    assert_eq!(
        (call[0].trace_id.as_str(), call[0].parent.as_str()),
        (CLIENT_TRACE, CLIENT_SPAN)
    );
    let upstream = upstream_traceparents(&s.call_log);
    assert_eq!(upstream.len(), 1);
    assert_eq!(
        ids(upstream[0].as_deref().expect("a traceparent")).0,
        CLIENT_TRACE
    );
}

#[tokio::test]
async fn the_default_encoding_is_protobuf() {
    let s = setup_with("", "").await;
    let mut gateway = RawStdio::start(&s.work).await;
    let traceparent = client_traceparent();
    gateway
        .send(&traced_call(
            1,
            "echo__echo",
            json!({"text": "pb"}),
            Some(&traceparent),
        ))
        .await;
    let answer = gateway.next_answer().await;
    assert_eq!(answer["result"]["content"][0]["text"], "pb", "{answer}");
    let (_, status) = gateway.finish().await;
    assert!(status.success(), "{status}");

    let exports = s.receiver.seen();
    assert!(!exports.is_empty());
    for (_, content_type, _) in &exports {
        assert_eq!(content_type, "application/x-protobuf");
    }
    let spans = spans(&s.receiver);
    let call: Vec<&Span> = spans
        .iter()
        .filter(|span| span.name == "tools/call echo__echo")
        .collect();
    assert_eq!(call.len(), 1, "{spans:#?}");
    assert_eq!(
        (call[0].trace_id.as_str(), call[0].parent.as_str()),
        (CLIENT_TRACE, CLIENT_SPAN)
    );
    assert_eq!(attr(call[0], "outcome"), "OK");
}

/// A streamable-HTTP MCP server with one tool, `pong`, that records the `traceparent` header
/// of every request it gets.
#[derive(Clone)]
struct Pong;

fn pong_tool() -> rmcp::model::Tool {
    let schema = json!({"type": "object"})
        .as_object()
        .cloned()
        .unwrap_or_default();
    rmcp::model::Tool::new("pong", "Answers pong", Arc::new(schema))
}

impl rmcp::ServerHandler for Pong {
    fn get_info(&self) -> rmcp::model::ServerConfig {
        rmcp::model::ServerConfig::new(
            rmcp::model::ServerCapabilities::builder()
                .enable_tools()
                .build(),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<rmcp::model::PaginatedRequestParams>,
        _context: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> Result<rmcp::model::ListToolsResult, rmcp::ErrorData> {
        Ok(rmcp::model::ListToolsResult::with_all_items(vec![
            pong_tool(),
        ]))
    }

    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        (name == "pong").then(pong_tool)
    }

    async fn call_tool(
        &self,
        _request: rmcp::model::CallToolRequestParams,
        _context: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> Result<rmcp::model::CallToolResponse, rmcp::ErrorData> {
        Ok(
            rmcp::model::CallToolResult::success(vec![rmcp::model::ContentBlock::text("pong")])
                .into(),
        )
    }
}

type Headers = Arc<Mutex<Vec<Option<String>>>>;

async fn capture(
    State(headers): State<Headers>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    if request.method() == axum::http::Method::POST {
        let traceparent = request
            .headers()
            .get("traceparent")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        headers.lock().unwrap().push(traceparent);
    }
    next.run(request).await
}

#[tokio::test]
async fn an_http_upstream_gets_the_traceparent_header() {
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
    };
    let headers: Headers = Arc::default();
    let service = StreamableHttpService::new(
        || Ok(Pong),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let app = axum::Router::new().nest_service("/mcp", service).layer(
        axum::middleware::from_fn_with_state(headers.clone(), capture),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let server = tokio::spawn(async move {
        axum::serve(listener, app).await.expect("server runs");
    });

    let receiver = Recording::start().await;
    let work = Workdir::new(&format!(
        "[gateway.tracing]\notlp_endpoint = {}\nprotocol = \"http/json\"\nservice_name = \"toolgate-test\"\n\n\
         [servers.pong]\nurl = {}\n",
        toml_string(&receiver.base),
        toml_string(&url),
    ));
    let mut gateway = RawStdio::start(&work).await;
    let traceparent = client_traceparent();
    gateway
        .send(&traced_call(1, "pong__pong", json!({}), Some(&traceparent)))
        .await;
    let answer = gateway.next_answer().await;
    assert_eq!(answer["result"]["content"][0]["text"], "pong", "{answer}");
    let (_, status) = gateway.finish().await;
    assert!(status.success(), "{status}");
    server.abort();

    let spans = spans(&receiver);
    let call: Vec<&Span> = spans
        .iter()
        .filter(|span| span.name == "tools/call pong__pong")
        .collect();
    assert_eq!(call.len(), 1, "{spans:#?}");
    let hop: Vec<&Span> = spans
        .iter()
        .filter(|span| span.name == "upstream tools/call" && span.parent == call[0].span_id)
        .collect();
    assert_eq!(hop.len(), 1, "{spans:#?}");
    // Only the `tools/call` POST carries one: the handshake and lists are no call's.
    let sent: Vec<String> = headers.lock().unwrap().iter().flatten().cloned().collect();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(
        ids(&sent[0]),
        (CLIENT_TRACE.to_owned(), hop[0].span_id.clone())
    );
}
