//! `[gateway] prefix`: how upstream tool names become exposed names, and that odd upstream
//! names are mapped to provider-legal names that still reach the right tool.

mod common;

use std::{future::Future, time::Duration};

use common::*;
use serde_json::json;

/// Fails the test instead of hanging if `future` takes longer than `secs`.
async fn within<T>(secs: u64, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(secs), future)
        .await
        .unwrap_or_else(|_| panic!("did not finish within {secs}s"))
}

/// A config with `prefix = POLICY` and the given `[servers.*]` tables.
fn with_policy(policy: &str, servers: &[String]) -> Workdir {
    Workdir::new(&format!(
        "[gateway]\nprefix = \"{policy}\"\n{}",
        servers.concat()
    ))
}

/// echo_server as `echo` and other_server as `other` under `policy`, both logging calls to
/// `calls.log` in the work directory.
fn both_servers(policy: &str) -> Workdir {
    let work = Workdir::new("");
    let log = work.path("calls.log");
    let log = log.to_str().unwrap();
    std::fs::write(
        work.config(),
        format!(
            "[gateway]\nprefix = \"{policy}\"\n{}{}",
            server_toml("echo", "echo_server", &[("ECHO_CALL_LOG", log)]),
            server_toml("other", "other_server", &[("ECHO_CALL_LOG", log)])
        ),
    )
    .unwrap();
    work
}

/// Whether `name` matches `^[A-Za-z0-9_-]{1,64}$`.
fn provider_legal(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The upstream tool names in the call log, in call order.
fn logged_tools(work: &Workdir) -> Vec<String> {
    std::fs::read_to_string(work.path("calls.log"))
        .unwrap_or_default()
        .lines()
        .map(|line| {
            let entry: serde_json::Value = serde_json::from_str(line).expect("JSON log line");
            entry["tool"].as_str().expect("tool name").to_owned()
        })
        .collect()
}

#[tokio::test]
async fn always_prefixes_every_tool_with_its_server() {
    within(30, async {
        let work = both_servers("always");
        let (client, _) = stdio_client(&work).await;
        assert_eq!(
            tool_names(&client).await,
            [
                "echo__echo",
                "echo__add",
                "echo__sleep",
                "echo__fail",
                "echo__add_tool",
                "echo__remove_tool",
                "other__echo",
                "other__reverse"
            ]
        );
        let echoed = call(&client, "echo__echo", json!({"text": "x"}))
            .await
            .unwrap();
        assert_eq!(text(&echoed), "x");
        let other = call(&client, "other__echo", json!({"text": "x"}))
            .await
            .unwrap();
        assert_eq!(text(&other), "other: x");
        // Bare names are not exposed, even where they would be unique.
        assert!(
            call(&client, "reverse", json!({"text": "x"}))
                .await
                .is_err()
        );
        assert_eq!(logged_tools(&work), ["echo", "echo"]);
        client.cancel().await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn on_conflict_prefixes_only_the_shared_name() {
    within(30, async {
        let work = both_servers("on-conflict");
        let (client, _) = stdio_client(&work).await;
        assert_eq!(
            tool_names(&client).await,
            [
                "echo__echo",
                "add",
                "sleep",
                "fail",
                "add_tool",
                "remove_tool",
                "other__echo",
                "reverse"
            ]
        );
        let echoed = call(&client, "echo__echo", json!({"text": "x"}))
            .await
            .unwrap();
        assert_eq!(text(&echoed), "x");
        let other = call(&client, "other__echo", json!({"text": "x"}))
            .await
            .unwrap();
        assert_eq!(text(&other), "other: x");
        let sum = call(&client, "add", json!({"a": 1, "b": 2})).await.unwrap();
        assert_eq!(sum.structured_content, Some(json!({"sum": 3})));
        let reversed = call(&client, "reverse", json!({"text": "abc"}))
            .await
            .unwrap();
        assert_eq!(text(&reversed), "cba");
        // The shared name itself is not exposed bare.
        assert!(call(&client, "echo", json!({"text": "x"})).await.is_err());
        assert_eq!(logged_tools(&work), ["echo", "echo", "add", "reverse"]);
        client.cancel().await.unwrap();
    })
    .await;
}

#[test]
fn never_with_a_shared_name_refuses_to_start_naming_both_servers() {
    let work = both_servers("never");
    let config = work.config();
    let (code, stdout, stderr) = run_toolgate(&["--config", config.to_str().unwrap(), "tools"]);
    assert_eq!(code, Some(64), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.is_empty(), "no tools are listed: {stdout}");
    let message = stderr
        .lines()
        .find(|line| line.starts_with("toolgate: "))
        .unwrap_or_else(|| panic!("no error line in {stderr}"));
    assert!(message.contains(config.to_str().unwrap()), "{message}");
    assert!(message.contains("`gateway.prefix`"), "{message}");
    assert!(message.contains("tool name \"echo\""), "{message}");
    assert!(message.contains("server \"echo\""), "{message}");
    assert!(message.contains("server \"other\""), "{message}");
    assert!(
        message.contains("prefix = \"always\" or \"on-conflict\""),
        "the fix is not suggested: {message}"
    );
}

#[tokio::test]
async fn never_with_one_server_exposes_bare_names() {
    within(30, async {
        let work = with_policy("never", &[server_toml("echo", "echo_server", &[])]);
        let (client, _) = stdio_client(&work).await;
        assert_eq!(
            tool_names(&client).await,
            ["echo", "add", "sleep", "fail", "add_tool", "remove_tool"]
        );
        let echoed = call(&client, "echo", json!({"text": "bare"}))
            .await
            .unwrap();
        assert_eq!(text(&echoed), "bare");
        assert!(
            call(&client, "echo__echo", json!({"text": "x"}))
                .await
                .is_err()
        );
        client.cancel().await.unwrap();
    })
    .await;
}

/// Under `policy`, every exposed name is provider-legal and the mapped names of
/// `dotted.name/with spaces` and the 80-character tool reach exactly those upstream tools.
async fn odd_names_are_legal_and_reach_their_tool(policy: &str) {
    let work = Workdir::new("");
    let log = work.path("calls.log");
    std::fs::write(
        work.config(),
        format!(
            "[gateway]\nprefix = \"{policy}\"\n{}",
            server_toml(
                "echo",
                "echo_server",
                &[
                    ("ECHO_ODD_NAMES", "1"),
                    ("ECHO_CALL_LOG", log.to_str().unwrap())
                ]
            )
        ),
    )
    .unwrap();
    let (client, _) = stdio_client(&work).await;
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
    assert_eq!(names.len(), 8, "{names:?}");
    for name in &names {
        assert!(provider_legal(name), "{policy}: {name:?} is not legal");
    }
    let unique: std::collections::HashSet<&String> = names.iter().collect();
    assert_eq!(unique.len(), names.len(), "{names:?}");

    let long_upstream = "very_long_".repeat(8);
    assert_eq!(long_upstream.len(), 80);
    let prefix = if policy == "always" { "echo__" } else { "" };
    let dotted = format!("{prefix}dotted_name_with_spaces");
    assert!(names.contains(&dotted), "{names:?}");
    // Too long to keep: cut to 64 characters, ending in a hash of the original.
    let long_exposed = names
        .iter()
        .find(|n| n.starts_with(&format!("{prefix}very_long_")))
        .unwrap_or_else(|| panic!("no mapped long name in {names:?}"))
        .clone();
    assert_eq!(long_exposed.len(), 64, "{long_exposed}");

    let result = call(&client, &dotted, json!({"text": "dot"}))
        .await
        .unwrap();
    assert_eq!(text(&result), "dot");
    assert_ne!(result.is_error, Some(true));
    let result = call(&client, &long_exposed, json!({"text": "long"}))
        .await
        .unwrap();
    assert_eq!(text(&result), "long");
    assert_ne!(result.is_error, Some(true));
    let logged = wait_for_file(&log, "very_long_", Duration::from_secs(5)).await;
    let called: Vec<String> = logged
        .lines()
        .map(|line| {
            let entry: serde_json::Value = serde_json::from_str(line).unwrap();
            entry["tool"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(
        called,
        ["dotted.name/with spaces".to_owned(), long_upstream],
        "{policy}"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn odd_names_under_always_are_legal_and_reach_their_tool() {
    within(30, odd_names_are_legal_and_reach_their_tool("always")).await;
}

#[tokio::test]
async fn odd_names_under_never_are_legal_and_reach_their_tool() {
    within(30, odd_names_are_legal_and_reach_their_tool("never")).await;
}
