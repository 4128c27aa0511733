//! A call on a 2025-era HTTP session, taken by the fast path, gets its response's headers in the same write as its answer when the answer is quick, and soon when it is not.

mod common;

use std::time::{Duration, Instant};

use common::*;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

const CALLS: u64 = 20;

fn echo() -> Workdir {
    Workdir::new(&server_toml("echo", "echo_server", &[]))
}

/// One POST of `body` on `session`, written on `socket` as HTTP/1.1 (the connection kept).
async fn send(socket: &mut TcpStream, authority: &str, session: &str, body: &serde_json::Value) {
    let body = serde_json::to_vec(body).expect("serialize");
    let head = format!(
        "POST /mcp HTTP/1.1\r\nhost: {authority}\r\ncontent-type: application/json\r\n\
         accept: application/json, text/event-stream\r\nmcp-session-id: {session}\r\n\
         mcp-protocol-version: 2025-11-25\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    socket.write_all(head.as_bytes()).await.expect("write head");
    socket.write_all(&body).await.expect("write body");
}

/// Reads one chunked response to its end; returns it and whether the first read that
/// returned anything held the answer's event already.
async fn response(socket: &mut TcpStream) -> (String, bool) {
    let mut text = Vec::new();
    let mut first_read_whole = None;
    let mut buffer = [0u8; 8192];
    while !text.ends_with(b"0\r\n\r\n") {
        let read = tokio::time::timeout(Duration::from_secs(10), socket.read(&mut buffer))
            .await
            .expect("the response within 10 s")
            .expect("read");
        assert!(read > 0, "the connection closed mid-response");
        text.extend_from_slice(&buffer[..read]);
        first_read_whole.get_or_insert_with(|| String::from_utf8_lossy(&text).contains("data: "));
    }
    (
        String::from_utf8_lossy(&text).into_owned(),
        first_read_whole.unwrap_or(false),
    )
}

#[tokio::test]
async fn a_quick_answer_comes_in_the_same_read_as_the_headers() {
    let work = echo();
    let gateway = HttpGateway::start_with(&work, &["--metrics", "127.0.0.1:0"]).await;
    let metrics = gateway.metrics_url.clone().expect("metrics served");
    let session = raw_session(&gateway.url, &[]).await;
    let authority = gateway.authority();
    let mut socket = TcpStream::connect(&authority).await.expect("connect");
    let before = metric(&metrics, "toolgate_fast_path_calls_total")
        .await
        .unwrap_or(0);
    let mut whole = 0;
    for id in 1..=CALLS {
        let call = call_request(
            id,
            "echo__echo",
            serde_json::json!({"text": format!("n{id}")}),
        );
        send(&mut socket, &authority, &session, &call).await;
        let (text, first_whole) = response(&mut socket).await;
        assert!(text.starts_with("HTTP/1.1 200"), "{text}");
        assert!(text.contains("text/event-stream"), "{text}");
        assert!(text.contains(&format!("\"id\":{id}")), "{text}");
        assert!(text.contains(&format!("n{id}")), "{text}");
        whole += usize::from(first_whole);
    }
    let after = metric(&metrics, "toolgate_fast_path_calls_total")
        .await
        .unwrap_or(0);
    assert_eq!(after - before, CALLS, "every call taken by the fast path");
    // Headers written on their own as the call starts reach a client waiting in `read`
    // before the answer exists: the first read would hold them alone, nearly every time.
    // A call slower than the head's wait (5 ms) may still come in two reads on a busy machine.
    assert!(
        whole * 2 >= CALLS as usize,
        "only {whole} of {CALLS} answers came with their headers"
    );
}

#[tokio::test]
async fn a_slow_call_gets_its_headers_before_its_answer() {
    let work = echo();
    let gateway = HttpGateway::start(&work).await;
    let session = raw_session(&gateway.url, &[]).await;
    let started = Instant::now();
    let call = call_request(7, "echo__sleep", serde_json::json!({"ms": 1_500}));
    let response = mcp_post(&gateway.url, Some(&session), &[], &call).await;
    let headed = started.elapsed();
    assert_eq!(response.status(), 200);
    assert_eq!(header_text(&response, "content-type"), "text/event-stream");
    let answer = jsonrpc_answer(response).await;
    let answered = started.elapsed();
    assert_eq!(answer["id"], 7, "{answer}");
    assert!(
        answer["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("1500")),
        "{answer}"
    );
    // The head is held back for quick answers only: it comes long before this one.
    assert!(
        headed < Duration::from_millis(1_000),
        "headers after {headed:?}"
    );
    assert!(answered >= Duration::from_millis(1_500), "{answered:?}");
}
