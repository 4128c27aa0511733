//! Over HTTP the fast path answers a call whose answer comes first as a sized JSON body on a reusable connection, and streams a call with progress.
//!
//! rmcp streams every answer as SSE; a client that stops reading at the answer (rmcp's own
//! client does) cannot reuse the connection. The fast path's JSON body has a
//! `Content-Length`, so the next request can follow on the same socket: shown here with a raw
//! HTTP/1.1 connection carrying three calls. A call that reports progress before its answer
//! still gets the stream, progress first.

mod common;

use std::time::Duration;

use common::*;
use serde_json::{Value, json};
use tokio::{
    io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader},
    net::TcpStream,
};

const LIMIT: Duration = Duration::from_secs(30);

fn echo() -> Workdir {
    Workdir::new(&server_toml("echo", "echo_server", &[]))
}

/// A POST of `body` on `session`, as HTTP/1.1 bytes (the connection kept open).
fn post(authority: &str, session: &str, body: &Value) -> Vec<u8> {
    let body = body.to_string();
    format!(
        "POST /mcp HTTP/1.1\r\nhost: {authority}\r\ncontent-type: application/json\r\n\
         accept: application/json, text/event-stream\r\nmcp-session-id: {session}\r\n\
         content-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Reads one response's head: the status line and the headers (names lowercased).
async fn head(reader: &mut BufReader<TcpStream>) -> (String, Vec<(String, String)>) {
    let mut status = String::new();
    reader.read_line(&mut status).await.expect("status line");
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).await.expect("header line");
        let line = line.trim_end();
        if line.is_empty() {
            return (status.trim_end().to_owned(), headers);
        }
        let (name, value) = line.split_once(':').expect("a header");
        headers.push((name.to_ascii_lowercase(), value.trim().to_owned()));
    }
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

#[tokio::test]
async fn a_quick_answer_is_a_sized_json_body_and_the_connection_carries_the_next_call() {
    let work = echo();
    let gateway = HttpGateway::start(&work).await;
    let session = raw_session(&gateway.url, &[]).await;
    let authority = gateway.authority();
    let socket = TcpStream::connect(&authority).await.expect("connect");
    let mut reader = BufReader::new(socket);
    for id in 1..=3 {
        let call = call_request(id, "echo__echo", json!({"text": format!("call {id}")}));
        let request = post(&authority, &session, &call);
        reader.get_mut().write_all(&request).await.expect("send");
        let (status, headers) = tokio::time::timeout(LIMIT, head(&mut reader))
            .await
            .expect("answered");
        assert_eq!(status, "HTTP/1.1 200 OK", "call {id}: {headers:?}");
        assert_eq!(
            header(&headers, "content-type"),
            Some("application/json"),
            "call {id}: {headers:?}"
        );
        assert_eq!(header(&headers, "transfer-encoding"), None, "{headers:?}");
        let length: usize = header(&headers, "content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("call {id}: no content-length in {headers:?}"));
        let mut body = vec![0; length];
        reader.read_exact(&mut body).await.expect("the body");
        let answer: Value = serde_json::from_slice(&body).expect("a JSON body");
        assert_eq!(answer["id"], id, "{answer}");
        assert_eq!(
            answer["result"]["content"][0]["text"],
            format!("call {id}"),
            "{answer}"
        );
        assert_eq!(body.last(), Some(&b'}'), "no trailing newline in the body");
    }
}

#[tokio::test]
async fn a_call_with_progress_is_streamed_progress_first() {
    let work = echo();
    let gateway = HttpGateway::start(&work).await;
    let session = raw_session(&gateway.url, &[]).await;
    let mut call = call_request(7, "echo__sleep", json!({"ms": 300, "steps": 3}));
    call["params"]["_meta"] = json!({"progressToken": "p"});
    let response = tokio::time::timeout(LIMIT, mcp_post(&gateway.url, Some(&session), &[], &call))
        .await
        .expect("answered");
    assert_eq!(response.status(), 200);
    assert_eq!(
        response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok()),
        Some("text/event-stream")
    );
    let text = response.text().await.expect("the stream");
    let messages: Vec<Value> = text
        .split("\n\n")
        .filter_map(|event| event.strip_prefix("data: "))
        .map(|data| serde_json::from_str(data).expect("an event's JSON"))
        .collect();
    let progress = messages
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .count();
    assert_eq!(progress, 3, "{text}");
    let last = messages.last().expect("messages");
    assert_eq!(last["id"], 7, "the answer comes last: {text}");
    assert_eq!(
        last["result"]["content"][0]["text"], "slept 300ms",
        "{text}"
    );
}
