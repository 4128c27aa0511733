//! toolgate as an OAuth resource server (`[gateway.auth]`): IdP tokens (real RS256 and ES256
//! JWTs from a test IdP with OpenID discovery and a JWKS) select profiles through the claim
//! map; bad tokens get 401 with an RFC 6750 challenge naming the RFC 9728 metadata, which
//! toolgate serves; keys rotate, unknown `kid`s cannot hammer the IdP, a dead IdP cannot hang
//! a request, static profile tokens keep working alongside, and a session opened for one
//! subject takes no request signed for another.

mod common;

use std::time::{Duration, Instant};

use common::{idp::*, *};
use serde_json::{Value, json};

const AUDIENCE: &str = "https://toolgate.test/mcp";
const METADATA: &str = "https://toolgate.test/.well-known/oauth-protected-resource/mcp";
const STATIC_TOKEN: &str = "static-ops-token";

/// The echo server; `ops` (static token too) sees `echo__echo`, `readers` sees `echo__add`,
/// `default` everything; the `groups` claim selects among them.
fn config(issuer: &str, auth_extra: &str) -> Workdir {
    Workdir::new(&format!(
        "{}[profiles.ops]\ntokens = [{}]\nallow = [\"echo__echo\"]\n\
         [profiles.readers]\nallow = [\"echo__add\"]\n\
         [gateway.auth]\nissuer = \"{issuer}\"\naudience = \"{AUDIENCE}\"\nclaim = \"groups\"\n{auth_extra}\n\
         [[gateway.auth.map]]\nvalue = \"tg-ops\"\nprofile = \"ops\"\n\
         [[gateway.auth.map]]\nvalue = \"tg-readers\"\nprofile = \"readers\"\n\
         [[gateway.auth.map]]\nvalue = \"tg-all\"\nprofile = \"default\"\n",
        server_toml("echo", "echo_server", &[]),
        toml_string(STATIC_TOKEN),
    ))
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

async fn initialize(url: &str, token: Option<&str>) -> reqwest::Response {
    let header = token.map(bearer);
    let headers: Vec<(&str, &str)> = header
        .as_deref()
        .map(|h| vec![("authorization", h)])
        .unwrap_or_default();
    mcp_post(url, None, &headers, &initialize_request(1)).await
}

fn challenge(response: &reqwest::Response) -> String {
    header_text(response, "www-authenticate")
}

/// 401, an `invalid_token` challenge naming the metadata, and a body with `code`.
async fn assert_invalid(response: reqwest::Response, code: &str) {
    assert_eq!(response.status(), 401, "{code}: {response:?}");
    let challenge = challenge(&response);
    assert!(
        challenge.starts_with("Bearer ") && challenge.contains(r#"error="invalid_token""#),
        "{code}: {challenge}"
    );
    assert!(
        challenge.contains(&format!(r#"resource_metadata="{METADATA}""#)),
        "{code}: {challenge}"
    );
    assert!(response.headers().get("mcp-session-id").is_none());
    let body = response.text().await.unwrap();
    assert!(body.contains(code), "expected {code} in {body:?}");
}

#[tokio::test]
async fn the_claim_selects_each_profile_and_static_tokens_still_work() {
    let rsa = SigningKey::rsa("rsa-1");
    let ec = SigningKey::ec("ec-1");
    let idp = Idp::start(&[&rsa, &ec]).await;
    let work = config(&idp.issuer, "");
    let gateway = HttpGateway::start(&work).await;
    let url = gateway.url.clone();

    let token = |key: &SigningKey, groups: Value| {
        key.sign(&idp.claims(AUDIENCE, "alice", json!({"groups": groups})))
    };
    // Each profile by its claim value, signed RS256 and ES256 alike.
    for (key, group, tools) in [
        (&rsa, "tg-ops", vec!["echo__echo"]),
        (&ec, "tg-readers", vec!["echo__add"]),
        (&ec, "tg-all", vec!["echo__echo", "echo__add"]),
    ] {
        let token = token(key, json!(["unrelated", group]));
        let (client, _) = try_http_client(&url, Some(&token))
            .await
            .unwrap_or_else(|e| panic!("{group} ({:?}) opens /mcp: {e}", key.alg));
        let names = tool_names(&client).await;
        for tool in &tools {
            assert!(names.contains(&tool.to_string()), "{group}: {names:?}");
        }
        if group != "tg-all" {
            assert_eq!(names.len(), tools.len(), "{group}: {names:?}");
        }
        let arguments = match tools[0] {
            "echo__add" => json!({"a": 1, "b": 2}),
            _ => json!({"text": "hi"}),
        };
        let result = call(&client, tools[0], arguments).await.unwrap();
        assert_ne!(result.is_error, Some(true), "{group}: {result:?}");
        client.cancel().await.unwrap();
    }

    // Two groups: /mcp takes the first in map order, the path may pick the other one.
    let both = token(&rsa, json!(["tg-readers", "tg-ops"]));
    let (client, _) = try_http_client(&url, Some(&both)).await.unwrap();
    assert_eq!(tool_names(&client).await, ["echo__echo"], "map order wins");
    client.cancel().await.unwrap();
    let (client, _) = try_http_client(&format!("{url}/readers"), Some(&both))
        .await
        .unwrap();
    assert_eq!(tool_names(&client).await, ["echo__add"]);
    client.cancel().await.unwrap();

    // A valid token that maps to nothing, or to another profile than the path's: 403.
    let nobody = token(&rsa, json!(["strangers"]));
    let refused = initialize(&url, Some(&nobody)).await;
    assert_eq!(refused.status(), 403);
    assert!(challenge(&refused).contains(r#"error="insufficient_scope""#));
    let body = refused.text().await.unwrap();
    assert!(
        body.contains("AUTH_NO_PROFILE") && body.contains("\"groups\""),
        "a clear body: {body}"
    );
    let ops_only = token(&rsa, json!(["tg-ops"]));
    let refused = initialize(&format!("{url}/readers"), Some(&ops_only)).await;
    assert_eq!(refused.status(), 403);
    assert!(refused.text().await.unwrap().contains("\"readers\""));

    // The static token keeps selecting its profile; no token is challenged with the metadata.
    let (client, _) = try_http_client(&url, Some(STATIC_TOKEN)).await.unwrap();
    assert_eq!(tool_names(&client).await, ["echo__echo"]);
    client.cancel().await.unwrap();
    let anonymous = initialize(&url, None).await;
    assert_eq!(anonymous.status(), 401);
    assert_eq!(
        challenge(&anonymous),
        format!(r#"Bearer resource_metadata="{METADATA}""#),
        "no error code without a token (RFC 6750 §3.1)"
    );
    let anonymous = initialize(&format!("{url}/readers"), None).await;
    assert_eq!(anonymous.status(), 401, "a mapped profile is guarded");

    // Never the token in the log.
    for token in [&both, &nobody, &ops_only] {
        assert!(!gateway.log.lock().unwrap().contains(token.as_str()));
    }
}

#[tokio::test]
async fn bad_tokens_are_refused_with_a_challenge() {
    let rsa = SigningKey::rsa("rsa-1");
    let ec = SigningKey::ec("ec-1");
    let idp = Idp::start(&[&rsa, &ec]).await;
    // The default skew (60 s) applies to `exp` and `nbf`.
    let work = config(&idp.issuer, "jwks_min_refresh_secs = 0");
    let gateway = HttpGateway::start(&work).await;
    let url = gateway.url.clone();
    let claims = |extra: Value| idp.claims(AUDIENCE, "mallory", extra);
    let groups = json!({"groups": ["tg-ops"]});

    let mut expired = claims(groups.clone());
    expired["exp"] = json!(now() - 120);
    let mut early = claims(groups.clone());
    early["nbf"] = json!(now() + 600);
    let mut elsewhere = claims(groups.clone());
    elsewhere["aud"] = json!("https://other.test/mcp");
    let mut forged_issuer = claims(groups.clone());
    forged_issuer["iss"] = json!("https://evil.test/realms/test");
    let mut no_exp = claims(groups.clone());
    no_exp.as_object_mut().unwrap().remove("exp");
    let stranger = SigningKey::rsa("rsa-1");
    let good = claims(groups.clone());

    let cases = [
        ("expired", rsa.sign(&expired), "AUTH_TOKEN_EXPIRED"),
        ("not yet valid", ec.sign(&early), "AUTH_TOKEN_NOT_YET_VALID"),
        (
            "wrong audience",
            rsa.sign(&elsewhere),
            "AUTH_WRONG_AUDIENCE",
        ),
        ("wrong issuer", ec.sign(&forged_issuer), "AUTH_WRONG_ISSUER"),
        ("no exp", rsa.sign(&no_exp), "AUTH_MISSING_CLAIM"),
        (
            "unknown kid",
            ec.sign_as("ec-404", &good),
            "AUTH_UNKNOWN_KEY",
        ),
        (
            "another key's signature",
            stranger.sign(&good),
            "AUTH_BAD_SIGNATURE",
        ),
        ("alg none", unsigned("rsa-1", &good), "AUTH_TOKEN_MALFORMED"),
        (
            "HS256 keyed with the public key",
            hmac_with_public_key(&rsa, &good),
            "AUTH_ALGORITHM_REFUSED",
        ),
    ];
    for (what, token, code) in cases {
        eprintln!("case: {what}");
        assert_invalid(initialize(&url, Some(&token)).await, code).await;
    }
    // A token a minute past `exp` is still inside the skew.
    let mut just_expired = claims(groups.clone());
    just_expired["exp"] = json!(now() - 20);
    let (client, _) = try_http_client(&url, Some(&rsa.sign(&just_expired)))
        .await
        .expect("20 s past exp is within the 60 s skew");
    client.cancel().await.unwrap();
    // A token neither static nor JWT-shaped is an unknown static token, challenged alike.
    let unknown = initialize(&url, Some("not-a-known-token")).await;
    assert_eq!(unknown.status(), 401);
    assert!(challenge(&unknown).contains(&format!(r#"resource_metadata="{METADATA}""#)));
    let logged = gateway.log.lock().unwrap().clone();
    assert!(
        logged.contains("AUTH_WRONG_AUDIENCE"),
        "refusals are logged by code"
    );
    assert!(!logged.contains(&rsa.sign(&elsewhere)[..40]));
}

#[tokio::test]
async fn the_metadata_names_the_issuer_and_the_resource() {
    let rsa = SigningKey::rsa("rsa-1");
    let idp = Idp::start(&[&rsa]).await;
    let work = config(&idp.issuer, "");
    let gateway = HttpGateway::start(&work).await;
    let base = gateway.url.trim_end_matches("/mcp").to_owned();
    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
    ] {
        let response = reqwest::get(format!("{base}{path}")).await.unwrap();
        assert_eq!(response.status(), 200, "{path}");
        let document: Value = response.json().await.unwrap();
        assert_eq!(document["resource"], AUDIENCE, "{path}: {document}");
        assert_eq!(
            document["authorization_servers"],
            json!([idp.issuer]),
            "{path}"
        );
        assert_eq!(document["bearer_methods_supported"], json!(["header"]));
    }
    assert_eq!(idp.fetches(), 0, "keys are fetched when a token needs them");
}

#[tokio::test]
async fn keys_rotate_and_unknown_kids_cannot_hammer_the_idp() {
    const MIN_REFRESH: u64 = 2;
    let old = SigningKey::rsa("rsa-old");
    let new = SigningKey::ec("ec-new");
    let idp = Idp::start(&[&old]).await;
    let work = config(
        &idp.issuer,
        &format!("jwks_min_refresh_secs = {MIN_REFRESH}"),
    );
    let gateway = HttpGateway::start(&work).await;
    let url = gateway.url.clone();
    let claims = idp.claims(AUDIENCE, "bob", json!({"groups": ["tg-ops"]}));

    let (client, _) = try_http_client(&url, Some(&old.sign(&claims)))
        .await
        .expect("the published key verifies");
    client.cancel().await.unwrap();
    assert_eq!(idp.fetches(), 1);

    // A flood of made-up kids: at most one fetch per interval reaches the IdP.
    let started = Instant::now();
    for n in 0..40 {
        let token = new.sign_as(&format!("made-up-{n}"), &claims);
        assert_invalid(initialize(&url, Some(&token)).await, "AUTH_UNKNOWN_KEY").await;
    }
    let intervals = started.elapsed().as_secs() / MIN_REFRESH + 1;
    let flood_fetches = idp.fetches() - 1;
    assert!(
        flood_fetches as u64 <= intervals,
        "{flood_fetches} fetches for 40 unknown kids in {:?}",
        started.elapsed()
    );

    // Rotation: the IdP now publishes only the new key; once the interval has passed, a
    // token with its kid makes toolgate fetch again, and the retired key stops working.
    idp.publish(&[&new]);
    tokio::time::sleep(Duration::from_secs(MIN_REFRESH + 1)).await;
    let before = idp.fetches();
    let (client, _) = try_http_client(&url, Some(&new.sign(&claims)))
        .await
        .expect("the rotated-in key verifies");
    assert_eq!(tool_names(&client).await, ["echo__echo"]);
    client.cancel().await.unwrap();
    assert_eq!(idp.fetches(), before + 1, "one fetch for the new kid");
    assert_invalid(
        initialize(&url, Some(&old.sign(&claims))).await,
        "AUTH_UNKNOWN_KEY",
    )
    .await;
}

#[tokio::test]
async fn a_dead_idp_cannot_hang_requests() {
    // Accepts connections (the kernel's backlog) and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let issuer = format!("http://{}/realms/test", silent.local_addr().unwrap());
    let work = config(&issuer, "fetch_timeout_ms = 500");
    let gateway = HttpGateway::start(&work).await;
    let key = SigningKey::rsa("rsa-1");
    let token = key.sign(&json!({
        "iss": issuer, "aud": AUDIENCE, "sub": "carol", "exp": now() + 600, "groups": ["tg-ops"],
    }));

    let started = Instant::now();
    let response = initialize(&gateway.url, Some(&token)).await;
    let waited = started.elapsed();
    assert_eq!(response.status(), 503, "{response:?}");
    let body = response.text().await.unwrap();
    assert!(body.contains("AUTH_IDP_UNAVAILABLE"), "{body}");
    // Discovery tries two documents, each bounded by the 500 ms timeout.
    assert!(waited < Duration::from_secs(5), "waited {waited:?}");
    // Within the refresh interval the next request does not wait for the IdP again.
    let started = Instant::now();
    let again = initialize(&gateway.url, Some(&token)).await;
    assert_eq!(again.status(), 503);
    assert!(
        started.elapsed() < Duration::from_millis(400),
        "{:?}",
        started.elapsed()
    );
    // Static tokens do not depend on the IdP.
    let (client, _) = try_http_client(&gateway.url, Some(STATIC_TOKEN))
        .await
        .expect("static tokens work while the IdP is down");
    client.cancel().await.unwrap();
    drop(silent);
}

#[tokio::test]
async fn a_session_is_bound_to_the_subject_that_opened_it() {
    let rsa = SigningKey::rsa("rsa-1");
    let idp = Idp::start(&[&rsa]).await;
    let work = config(&idp.issuer, "");
    let gateway = HttpGateway::start(&work).await;
    let url = gateway.url.clone();
    // Alice and Bob map to the same profile.
    let token = |subject: &str| {
        bearer(&rsa.sign(&idp.claims(AUDIENCE, subject, json!({"groups": ["tg-all"]}))))
    };
    let (alice, bob) = (token("alice"), token("bob"));
    let session = raw_session(&url, &[("authorization", &alice)]).await;
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});

    // Bob, with a valid token for the same profile, cannot use Alice's session id.
    let refused = mcp_post(&url, Some(&session), &[("authorization", &bob)], &list).await;
    assert_eq!(refused.status(), 403, "{refused:?}");
    let body = refused.text().await.unwrap();
    assert!(
        body.contains("AUTH_SESSION_NOT_YOURS") && body.contains("opened by another identity"),
        "{body}"
    );
    // Nor call a tool on it, nor close it.
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "echo__echo", "arguments": {"text": "hi"}}});
    let refused = mcp_post(&url, Some(&session), &[("authorization", &bob)], &call).await;
    assert_eq!(refused.status(), 403);
    let refused = reqwest::Client::new()
        .delete(&url)
        .header("mcp-session-id", &session)
        .header("authorization", &bob)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 403, "Bob cannot close Alice's session");

    // Alice goes on using it; Bob opens his own.
    let answer =
        jsonrpc_answer(mcp_post(&url, Some(&session), &[("authorization", &alice)], &list).await)
            .await;
    assert!(answer["result"]["tools"].is_array(), "{answer}");
    let own = raw_session(&url, &[("authorization", &bob)]).await;
    let answer =
        jsonrpc_answer(mcp_post(&url, Some(&own), &[("authorization", &bob)], &list).await).await;
    assert!(answer["result"]["tools"].is_array(), "{answer}");
}
