//! Over HTTP, once any profile lists tokens a caller without one is refused (401 with
//! `WWW-Authenticate: Bearer`), unless `[gateway.http] allow_anonymous = true` lets such
//! callers use the profiles that list no tokens.

mod common;

use common::*;

const OPS_TOKEN: &str = "ops-secret-token";

/// The echo server for everyone, and `ops`, selected by its token.
fn guarded(gateway: &str) -> Workdir {
    Workdir::new(&format!(
        "{gateway}{}[profiles.ops]\ntokens = [{}]\nallow = [\"echo__echo\"]\n",
        server_toml("echo", "echo_server", &[]),
        toml_string(OPS_TOKEN),
    ))
}

async fn initialize(url: &str, headers: &[(&str, &str)]) -> reqwest::Response {
    mcp_post(url, None, headers, &initialize_request(1)).await
}

fn assert_challenged(response: &reqwest::Response) {
    assert_eq!(response.status(), 401, "{response:?}");
    let challenge = response
        .headers()
        .get("www-authenticate")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    assert!(challenge.starts_with("Bearer"), "{response:?}");
    assert!(
        response.headers().get("mcp-session-id").is_none(),
        "no session for a refused caller"
    );
}

#[tokio::test]
async fn callers_without_a_token_are_refused_when_tokens_are_in_use() {
    let work = guarded("");
    let gateway = HttpGateway::start(&work).await;
    let base = gateway.url.clone();

    // The attack: no token at /mcp used to land on `default` with every global tool.
    assert_challenged(&initialize(&base, &[]).await);
    assert_challenged(&initialize(&format!("{base}/default"), &[]).await);
    assert_challenged(&initialize(&format!("{base}/ops"), &[]).await);
    let listing = mcp_post(
        &base,
        Some("made-up"),
        &[],
        &serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    )
    .await;
    assert_challenged(&listing);

    // Token misuse is still refused, and still challenged.
    let bad = format!("Bearer {OPS_TOKEN}-not");
    assert_challenged(&initialize(&base, &[("authorization", &bad)]).await);
    assert_challenged(&initialize(&base, &[("authorization", "Basic b3BzOnNlY3JldA==")]).await);
    let other = initialize(
        &format!("{base}/default"),
        &[("authorization", &format!("Bearer {OPS_TOKEN}"))],
    )
    .await;
    assert_eq!(other.status(), 403, "a token on another profile's path");

    // The token's holder is served its profile.
    let (client, _) = try_http_client(&base, Some(OPS_TOKEN))
        .await
        .expect("the token opens /mcp");
    assert_eq!(tool_names(&client).await, ["echo__echo"]);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn allow_anonymous_opens_the_profiles_without_tokens() {
    let work = guarded("[gateway.http]\nallow_anonymous = true\n");
    let gateway = HttpGateway::start(&work).await;

    let (client, _) = try_http_client(&gateway.url, None)
        .await
        .expect("an anonymous caller gets default");
    assert!(tool_names(&client).await.contains(&"echo__add".to_owned()));
    client.cancel().await.unwrap();

    // A profile that lists tokens still requires one.
    assert_challenged(&initialize(&format!("{}/ops", gateway.url), &[]).await);
}

#[tokio::test]
async fn without_tokens_anywhere_anonymous_callers_are_served() {
    let work = Workdir::new(&server_toml("echo", "echo_server", &[]));
    let gateway = HttpGateway::start(&work).await;
    let (client, _) = gateway.client().await;
    assert!(tool_names(&client).await.contains(&"echo__echo".to_owned()));
    client.cancel().await.unwrap();
}
