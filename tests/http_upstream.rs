//! A streamable-HTTP upstream: one toolgate serving HTTP is the upstream of another over stdio.

mod common;

use common::*;
use serde_json::json;

#[tokio::test]
async fn tools_of_an_http_upstream_are_listed_and_called() {
    let inner = Workdir::new(&server_toml("echo", "echo_server", &[]));
    let http = HttpGateway::start(&inner).await;

    let outer = Workdir::new(&format!(
        "[servers.remote]\nurl = {}\nheaders = {{ X-Test = \"${{HOME}}\" }}\n",
        toml_string(&http.url)
    ));
    let (client, _) = stdio_client(&outer).await;
    let names = tool_names(&client).await;
    assert!(
        names.contains(&"remote__echo__echo".to_owned()),
        "{names:?}"
    );

    let sum = call(&client, "remote__echo__add", json!({"a": 20, "b": 22}))
        .await
        .unwrap();
    assert_eq!(sum.structured_content, Some(json!({"sum": 42})));
    let failed = call(&client, "remote__echo__fail", json!({}))
        .await
        .unwrap();
    assert_eq!(failed.is_error, Some(true));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn an_unreachable_http_upstream_is_reported_by_check() {
    // Port 9 (discard) on loopback: nothing listens there.
    let work = Workdir::new(&format!(
        "[servers.gone]\nurl = \"http://127.0.0.1:9/mcp\"\n{}",
        server_toml("echo", "echo_server", &[])
    ));
    let config = work.config().display().to_string();
    let (code, stdout, _stderr) = run_toolgate(&["--config", &config, "check"]);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stdout.contains("gone\tfailed: MCP handshake with http://127.0.0.1:9/mcp failed"),
        "{stdout}"
    );
    assert!(stdout.contains("echo\tready (6 tools)"), "{stdout}");
}
