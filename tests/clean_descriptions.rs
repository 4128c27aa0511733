//! Clean descriptions: zero-width, bidi, BOM and tag characters in an upstream's tool
//! descriptions and titles never reach the client, and each cleaning is logged.

mod common;

use std::time::Duration;

use common::*;

const LIMIT: Duration = Duration::from_secs(10);

/// What `echo_server` hides with `ECHO_HIDDEN_CHARS=1`, one of each kind.
const HIDDEN: [char; 6] = [
    '\u{200B}',
    '\u{202E}',
    '\u{2066}',
    '\u{FEFF}',
    '\u{E0049}',
    '\u{200D}',
];

#[tokio::test]
async fn hidden_characters_are_stripped_from_the_listed_tool_and_logged() {
    let work = Workdir::new(&server_toml(
        "echo",
        "echo_server",
        &[("ECHO_HIDDEN_CHARS", "1")],
    ));
    let gateway = HttpGateway::start(&work).await;
    let (client, _) = gateway.client().await;
    let tools = client.list_all_tools().await.expect("tools/list");
    let echo = tools
        .iter()
        .find(|t| t.name == "echo__echo")
        .expect("echo__echo is listed");
    assert_eq!(
        echo.description.as_deref(),
        Some("Return the given text unchanged")
    );
    assert_eq!(echo.title.as_deref(), Some("Echo"));
    let listed = serde_json::to_string(&tools).unwrap();
    for c in HIDDEN {
        assert!(
            !listed.contains(c),
            "U+{:04X} reached the client: {listed}",
            c as u32
        );
    }
    let line = gateway
        .wait_log_line(&["hidden character", "tool=echo"], LIMIT)
        .await;
    assert!(line.contains("WARN"), "{line}");
    assert!(line.contains("server=echo"), "{line}");
    assert!(line.contains("removed 6 hidden character(s)"), "{line}");
    assert!(line.contains("description, title"), "{line}");
    // Tools without hidden characters are not mentioned.
    assert!(gateway.log_lines("tool=add").is_empty());
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_pinned_tool_with_hidden_characters_is_pinned_raw_and_served_clean() {
    let work = Workdir::new(&server_toml(
        "echo",
        "echo_server",
        &[("ECHO_HIDDEN_CHARS", "1")],
    ));
    let config = work.config();
    let (code, stdout, stderr) = run_toolgate(&["--config", config.to_str().unwrap(), "pin"]);
    assert_eq!(code, Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    // The lock holds what the upstream sent, its hidden characters visible as escapes.
    let lock = std::fs::read_to_string(work.path("toolgate.lock")).unwrap();
    assert!(
        lock.contains(r#""description": "Return the\u200b given\u202e text\u2066 unchanged\ufeff\udb40\udc49""#),
        "{lock}"
    );
    let gateway = HttpGateway::start(&work).await;
    let (client, _) = gateway.client().await;
    let tools = client.list_all_tools().await.expect("tools/list");
    let echo = tools.iter().find(|t| t.name == "echo__echo");
    assert_eq!(
        echo.and_then(|t| t.description.as_deref()),
        Some("Return the given text unchanged"),
        "matches its pin, so it is served, cleaned"
    );
    assert!(gateway.log_lines("tool withheld").is_empty());
    client.cancel().await.unwrap();
}
