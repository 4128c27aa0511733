//! A client that stops reading does not make the gateway buffer for it without bound: at
//! most 256 notifications wait for a session's transport, further ones are dropped, and the
//! answers still arrive once the client reads again.
//!
//! Over stdio, where the pipe's fixed 64 KiB make "not reading" exact. HTTP sessions go
//! through the same guard (`src/downstream/guard.rs`).

mod common;

use std::time::Duration;

use common::*;
use serde_json::json;

/// Progress notifications the upstream sends for the call: more than 256 plus what the
/// pipe holds, few enough to be sent while the client does not read, even in a debug build
/// on a busy machine (about 2,400 a second here).
const STEPS: u64 = 3_000;

#[tokio::test]
async fn notifications_for_a_client_that_does_not_read_are_capped() {
    let work = Workdir::new(&server_toml("echo", "echo_server", &[]));
    let mut gateway = RawStdio::start(&work).await;
    gateway
        .send(&json!({
            "jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {
                "name": "echo__sleep",
                "arguments": {"ms": 300, "steps": STEPS},
                "_meta": {"progressToken": "p"}
            }
        }))
        .await;
    // Not reading while the upstream sends its progress and finishes.
    tokio::time::sleep(Duration::from_secs(3)).await;

    // Read everything up to the answer, then ask again and read up to that answer too: the
    // second answer goes out after whatever was still queued, so every progress notification
    // the gateway kept for the client is counted.
    let mut progress = 0;
    let mut answers = Vec::new();
    let mut asked_again = false;
    while answers.len() < 2 {
        let message = gateway.next().await;
        if message["method"] == "notifications/progress" {
            progress += 1;
        } else if message.get("method").is_none() {
            answers.push(message);
            if !asked_again {
                asked_again = true;
                gateway
                    .send(&call_request(
                        8,
                        "echo__echo",
                        json!({"text": "reading again"}),
                    ))
                    .await;
            }
        }
    }
    assert_eq!(answers[0]["id"], 7, "{}", answers[0]);
    assert_ne!(answers[0]["result"]["isError"], true, "{}", answers[0]);
    assert_eq!(
        answers[1]["result"]["content"][0]["text"], "reading again",
        "{}",
        answers[1]
    );
    eprintln!("{progress} of {STEPS} progress notifications arrived");
    // Kept for it: 256 waiting, what the 64 KiB pipe held (about 600 of these), a few in
    // rmcp's hands; the rest was dropped. Unbounded, all of them would arrive.
    assert!(
        progress > 0 && progress < STEPS,
        "{progress} of {STEPS} progress notifications were kept for a client that did not read"
    );
}
