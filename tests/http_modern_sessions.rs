//! Over HTTP, a 2026-07-28 request's session is forgotten once its answer is out, not held for seconds after (`toolgate_client_sessions`).

mod common;

use std::time::Duration;

use common::*;
use serde_json::json;

const SESSIONS: &str = "toolgate_client_sessions";

async fn sessions(metrics: &str) -> u64 {
    metric(metrics, SESSIONS)
        .await
        .unwrap_or_else(|| panic!("no {SESSIONS} in {metrics}"))
}

#[tokio::test]
async fn a_modern_requests_session_goes_once_its_answer_is_out() {
    let work = Workdir::new(&server_toml("echo", "echo_server", &[]));
    let gateway = HttpGateway::start_with(&work, &["--metrics", "127.0.0.1:0"]).await;
    let metrics = gateway.metrics_url.clone().expect("a metrics URL");
    let client = modern::over_http(Recorder::default(), &gateway.url).await;
    assert_eq!(sessions(&metrics).await, 0, "no call yet");

    let calls = 40;
    for n in 0..calls {
        let text = format!("call {n}");
        let result = call(&client, "echo__echo", json!({ "text": text }))
            .await
            .expect("an answer");
        assert_eq!(
            result.content[0].as_text().map(|t| t.text.as_str()),
            Some(text.as_str())
        );
    }
    // Each call is a request with a session of its own. Held for seconds after its work (as
    // before), all of them would still be known now; each call's end forgets those whose
    // answers are out (up to 4), the sweeper the rest every 50 ms: a few at most, with room
    // for a slow machine.
    let known = sessions(&metrics).await;
    assert!(
        known <= calls / 4,
        "{known} of {calls} sessions still known right after the calls"
    );
    // And the last ones go without another call (the sweeper).
    let gone = async {
        while sessions(&metrics).await > 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), gone)
        .await
        .expect("no session left once the calls are over");
    client.cancel().await.ok();
}
