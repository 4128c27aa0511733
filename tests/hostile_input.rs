//! Hostile client input, as raw bytes: malformed JSON, a batch, a line or body over the limit
//! (`max_message_bytes`; over HTTP also at most 4 MiB),
//! deep nesting, invalid UTF-8. Each gets a JSON-RPC error (over HTTP with a 4xx status),
//! never silence (without an id when none could be read, as MCP 2026-07-28 has it), and the same session goes on answering calls; over stdio, stdout carries
//! nothing but JSON lines. A made-up `Mcp-Session-Id` gets 404 from a caller who passed the
//! door, whether by token or anonymously.

mod common;

use common::*;
use serde_json::{Value, json};

/// The default stdio line limit: `max_message_bytes`' default, rmcp's own 16 MiB.
const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;
/// toolgate's HTTP body limit (`MAX_BODY_BYTES`) when `max_message_bytes` is not smaller.
const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

fn echo_only(extra: &str) -> Workdir {
    Workdir::new(&format!(
        "{extra}{}",
        server_toml("echo", "echo_server", &[])
    ))
}

/// `tools/call echo__echo {"text": text}` as bytes, with `text` spliced in raw.
fn call_with_raw_text(id: u64, text: &[u8]) -> Vec<u8> {
    let mut body = format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo__echo","arguments":{{"text":""#
    )
    .into_bytes();
    body.extend_from_slice(text);
    body.extend_from_slice(br#""}}}"#);
    body
}

/// One hostile message and the answer it must get.
struct Attack {
    what: &'static str,
    bytes: Vec<u8>,
    code: i64,
    /// The id of the answer; `None`: it has none (none could be read).
    id: Option<Value>,
    /// Words the error message contains.
    words: &'static str,
}

impl Attack {
    fn new(what: &'static str, bytes: Vec<u8>, code: i64, words: &'static str) -> Self {
        Self {
            what,
            bytes,
            code,
            id: None,
            words,
        }
    }

    fn assert_answered(&self, answer: &Value) {
        let what = self.what;
        assert_eq!(answer["jsonrpc"], "2.0", "{what}: {answer}");
        assert_eq!(answer.get("id"), self.id.as_ref(), "{what}: {answer}");
        assert_eq!(answer["error"]["code"], self.code, "{what}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(self.words), "{what}: {answer}");
    }
}

/// The attacks both transports answer alike.
fn attacks() -> Vec<Attack> {
    let batch = serde_json::to_vec(&json!([
        call_request(2, "echo__echo", json!({"text": "in a batch"})),
        call_request(3, "echo__echo", json!({"text": "in a batch"})),
    ]))
    .unwrap();
    vec![
        Attack::new(
            "malformed JSON",
            br#"{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "#.to_vec(),
            -32700,
            "not a JSON value",
        ),
        Attack::new("a batch", batch, -32600, "batches"),
        Attack::new(
            "100k levels of nesting",
            vec![b'['; 100_000],
            -32700,
            "recursion limit",
        ),
        Attack::new(
            "100k levels of nesting in the arguments",
            nested_arguments(7),
            -32700,
            "recursion limit",
        ),
        Attack::new(
            "invalid UTF-8",
            call_with_raw_text(4, b"\xff\xfe\xc3"),
            -32700,
            "not a JSON value",
        ),
        Attack {
            id: Some(json!(5)),
            ..Attack::new(
                "a request that fits no method",
                br#"{"jsonrpc":"2.0","id":5,"method":"initialize","params":3}"#.to_vec(),
                -32600,
                "not a valid JSON-RPC 2.0 message",
            )
        },
    ]
}

/// `tools/call echo__echo` whose `text` is 100k nested arrays.
fn nested_arguments(id: u64) -> Vec<u8> {
    let mut body = format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo__echo","arguments":{{"text":"#
    )
    .into_bytes();
    body.extend_from_slice(&[b'['; 100_000]);
    body.extend_from_slice(&[b']'; 100_000]);
    body.extend_from_slice(b"}}}");
    body
}

fn assert_echoed(what: &str, answer: &Value, id: u64) {
    assert_eq!(answer["id"], id, "after {what}: {answer}");
    assert_eq!(
        answer["result"]["content"][0]["text"],
        format!("still here {id}"),
        "after {what}: {answer}"
    );
}

/// The next answer, with or without an id: the next message that is not a request or a
/// notification.
async fn next_reply(gateway: &mut RawStdio) -> Value {
    loop {
        let message = gateway.next().await;
        if message.get("method").is_none() {
            return message;
        }
    }
}

#[tokio::test]
async fn over_stdio_every_unreadable_line_is_answered_and_the_session_goes_on() {
    let work = echo_only("");
    let mut gateway = RawStdio::start(&work).await;
    let mut oversized = call_with_raw_text(6, &vec![b'x'; MAX_LINE_BYTES]);
    oversized.push(b'\n');
    let mut attacks = attacks();
    // Its id is found at its start, though the line is never read whole.
    attacks.push(Attack {
        id: Some(json!(6)),
        ..Attack::new(
            "a line over 16 MiB",
            oversized,
            -32700,
            "longer than max_message_bytes (16777216)",
        )
    });

    for (i, mut attack) in attacks.into_iter().enumerate() {
        if attack.bytes.last() != Some(&b'\n') {
            attack.bytes.push(b'\n');
        }
        gateway.send_raw(&attack.bytes).await;
        attack.assert_answered(&next_reply(&mut gateway).await);
        let what = attack.what;

        let follow_up = 100 + i as u64;
        let text = format!("still here {follow_up}");
        gateway
            .send(&call_request(
                follow_up,
                "echo__echo",
                json!({"text": text}),
            ))
            .await;
        // The next answer is the follow-up's: nothing in the batch ran.
        assert_echoed(what, &next_reply(&mut gateway).await, follow_up);
    }

    let (rest, status) = gateway.finish().await;
    assert!(
        rest.iter().all(|m| m.get("method").is_some()),
        "no answer was left to come: {rest:?}"
    );
    assert_eq!(status.code(), Some(0), "{status}");
}

/// A POST of `body` in `session`: (status, its JSON-RPC answer).
async fn post(url: &str, session: &str, body: Vec<u8>) -> (u16, Value) {
    let response = mcp_post_raw(url, Some(session), &[], body).await;
    let status = response.status().as_u16();
    (status, jsonrpc_answer(response).await)
}

#[tokio::test]
async fn over_http_every_unreadable_body_is_refused_and_the_session_goes_on() {
    let work = echo_only("");
    let gateway = HttpGateway::start(&work).await;
    let session = raw_session(&gateway.url, &[]).await;

    for (i, attack) in attacks().into_iter().enumerate() {
        let what = attack.what;
        let (status, answer) = post(&gateway.url, &session, attack.bytes.clone()).await;
        assert_eq!(status, 400, "{what}: {answer}");
        attack.assert_answered(&answer);

        let follow_up = 100 + i as u64;
        let call = call_request(
            follow_up,
            "echo__echo",
            json!({"text": format!("still here {follow_up}")}),
        );
        let (status, answer) =
            post(&gateway.url, &session, serde_json::to_vec(&call).unwrap()).await;
        assert_eq!(status, 200, "after {what}: {answer}");
        assert_echoed(what, &answer, follow_up);
    }

    let oversized = call_with_raw_text(6, &vec![b'x'; MAX_BODY_BYTES]);
    let response = mcp_post_raw(&gateway.url, Some(&session), &[], oversized).await;
    assert_eq!(response.status(), 413, "{response:?}");
    let call = call_request(200, "echo__echo", json!({"text": "still here 200"}));
    let (status, answer) = post(&gateway.url, &session, serde_json::to_vec(&call).unwrap()).await;
    assert_eq!(status, 200, "after an oversized body: {answer}");
    assert_echoed("an oversized body", &answer, 200);
}

#[tokio::test]
async fn a_made_up_session_id_is_unknown_to_callers_past_the_door() {
    const TOKEN: &str = "ops-secret-token";
    let work = echo_only(&format!(
        "[gateway.http]\nallow_anonymous = true\n[profiles.ops]\ntokens = [{}]\n",
        toml_string(TOKEN)
    ));
    let gateway = HttpGateway::start(&work).await;
    let bearer = format!("Bearer {TOKEN}");
    let listing = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});

    for (who, url, headers) in [
        (
            "a token holder",
            gateway.url.clone(),
            vec![("authorization", bearer.as_str())],
        ),
        (
            "a token holder on its path",
            format!("{}/ops", gateway.url),
            vec![("authorization", bearer.as_str())],
        ),
        ("an anonymous caller", gateway.url.clone(), vec![]),
    ] {
        for body in [&listing, &initialized] {
            let response = mcp_post(&url, Some("made-up-session"), &headers, body).await;
            assert_eq!(response.status(), 404, "{who}, {body}: {response:?}");
        }
        // A real session of the same caller still works.
        let session = raw_session(&url, &headers).await;
        let response = mcp_post(&url, Some(&session), &headers, &listing).await;
        assert_eq!(response.status(), 200, "{who}");
    }
    // Without the door's token, the id is never looked up.
    let ops = format!("{}/ops", gateway.url);
    let response = mcp_post(&ops, Some("made-up-session"), &[], &listing).await;
    assert_eq!(response.status(), 401, "{response:?}");
}

#[tokio::test]
async fn over_stdio_a_line_over_max_message_bytes_is_answered_with_its_size_and_id() {
    let work = echo_only("[gateway]\nmax_message_bytes = 100000\n");
    let mut gateway = RawStdio::start(&work).await;
    let mut line = call_with_raw_text(7, &vec![b'x'; 200_000]);
    let size = line.len();
    line.push(b'\n');
    gateway.send_raw(&line).await;
    let answer = next_reply(&mut gateway).await;
    assert_eq!(answer["id"], 7, "{answer}");
    assert_eq!(answer["error"]["code"], -32700, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&format!(
            "{size} bytes, longer than max_message_bytes (100000)"
        )),
        "{answer}"
    );
    assert_eq!(
        answer["error"]["data"],
        json!({"bytes": size, "limit": 100000})
    );
    // An id at the end of the line is found too; none at all gives an answer without one.
    let mut id_last = br#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo__echo","arguments":{"text":""#.to_vec();
    id_last.extend_from_slice(&vec![b'y'; 150_000]);
    id_last.extend_from_slice(b"\"}},\"id\":\"last\"}\n");
    gateway.send_raw(&id_last).await;
    let answer = next_reply(&mut gateway).await;
    assert_eq!(answer["id"], "last", "{answer}");
    let mut no_id = vec![b'z'; 120_000];
    no_id.push(b'\n');
    gateway.send_raw(&no_id).await;
    let answer = next_reply(&mut gateway).await;
    assert_eq!(answer.get("id"), None, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("120000 bytes"),
        "{answer}"
    );
    // Under the limit, the same call goes through: the session goes on.
    gateway
        .send(&call_request(
            8,
            "echo__echo",
            json!({"text": "x".repeat(50_000)}),
        ))
        .await;
    let answer = next_reply(&mut gateway).await;
    assert_eq!(answer["id"], 8, "{answer}");
    assert_eq!(
        answer["result"]["content"][0]["text"]
            .as_str()
            .map(str::len),
        Some(50_000),
        "{answer}"
    );
    let (_, status) = gateway.finish().await;
    assert_eq!(status.code(), Some(0), "{status}");
}

#[tokio::test]
async fn over_http_a_body_over_a_smaller_max_message_bytes_is_refused() {
    let work = echo_only("[gateway]\nmax_message_bytes = 100000\n");
    let gateway = HttpGateway::start(&work).await;
    let session = raw_session(&gateway.url, &[]).await;
    let oversized = call_with_raw_text(6, &vec![b'x'; 200_000]);
    let response = mcp_post_raw(&gateway.url, Some(&session), &[], oversized).await;
    assert_eq!(response.status(), 413, "{response:?}");
    let call = call_request(7, "echo__echo", json!({"text": "still here 7"}));
    let (status, answer) = post(&gateway.url, &session, serde_json::to_vec(&call).unwrap()).await;
    assert_eq!(status, 200, "after an oversized body: {answer}");
    assert_echoed("an oversized body", &answer, 7);
}
