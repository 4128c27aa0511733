//! `oauth-server`: an OAuth-protected streamable-HTTP MCP server with its own authorization server, for the tests of toolgate as an OAuth client.
//!
//! `oauth_server [--http ADDR] [--expires-in SECS]` serves, on one listener:
//! - `/mcp`: an MCP server with one tool, `whoami` (answers `ok`), that needs a bearer token
//!   this server issued; without one it answers 401 with a `WWW-Authenticate` naming its
//!   protected-resource metadata;
//! - `/.well-known/oauth-protected-resource/mcp` (RFC 9728) and
//!   `/.well-known/oauth-authorization-server` (RFC 8414);
//! - `/register` (RFC 7591, public clients), `/authorize` (approves at once: redirects to the
//!   `redirect_uri` with a code), `/token` (`authorization_code` with PKCE S256 checked,
//!   `refresh_token`, and `client_credentials` for the client `cc-client` with the secret
//!   `cc-secret`, in the body or as HTTP Basic); access tokens are refused after
//!   `--expires-in` seconds (default 3600);
//! - for tests: `POST /admin/expire-access` (every access token issued so far is refused; refresh
//!   tokens still work), `POST /admin/revoke` (access and refresh tokens refused), and
//!   `GET /admin/stats` (grants, registrations, refused requests and how many of those carried
//!   a token, as JSON).
//!
//! Prints `oauth-server: listening on http://ADDR/mcp` to stderr once it listens.

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use axum::{
    Form, Json, Router,
    extract::{Query, Request, State},
    http::{HeaderMap, StatusCode, header},
    middleware::{self, Next},
    response::{IntoResponse, Redirect, Response},
    routing::{get, post},
};
use rmcp::{
    ErrorData as McpError, RoleServer, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
        JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
        Tool,
    },
    service::RequestContext,
    transport::{
        StreamableHttpServerConfig, StreamableHttpService,
        streamable_http_server::session::local::LocalSessionManager,
    },
};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

const SERVER_NAME: &str = "oauth-server";

#[derive(Default)]
struct Auth {
    base: String,
    expires_in: u64,
    next: u64,
    /// access token → when it expires
    access: HashMap<String, Instant>,
    refresh: HashSet<String>,
    /// code → (PKCE challenge, client id)
    codes: HashMap<String, (String, String)>,
    stats: HashMap<&'static str, u64>,
}

type Shared = Arc<Mutex<Auth>>;

fn lock(state: &Shared) -> std::sync::MutexGuard<'_, Auth> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

#[derive(Clone)]
struct WhoAmI;

impl ServerHandler for WhoAmI {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(SERVER_NAME, env!("CARGO_PKG_VERSION")))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(vec![tool()]))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        (name == "whoami").then(tool)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        if request.name != "whoami" {
            return Err(McpError::invalid_params("unknown tool", None));
        }
        Ok(CallToolResult::success(vec![ContentBlock::text("ok")]).into())
    }
}

fn tool() -> Tool {
    let mut schema = JsonObject::new();
    schema.insert("type".into(), Value::String("object".into()));
    Tool::new(
        "whoami",
        "Answers ok to a caller with a valid token",
        Arc::new(schema),
    )
}

/// Base64url without padding (RFC 7636's encoding of the S256 challenge).
fn base64url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

async fn protected_resource(State(state): State<Shared>) -> Json<Value> {
    let base = lock(&state).base.clone();
    Json(json!({"resource": format!("{base}/mcp"), "authorization_servers": [base]}))
}

async fn authorization_server(State(state): State<Shared>) -> Json<Value> {
    let base = lock(&state).base.clone();
    Json(json!({
        "issuer": base,
        "authorization_endpoint": format!("{base}/authorize"),
        "token_endpoint": format!("{base}/token"),
        "registration_endpoint": format!("{base}/register"),
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none", "client_secret_basic", "client_secret_post"],
    }))
}

async fn register(State(state): State<Shared>, Json(body): Json<Value>) -> Response {
    let mut auth = lock(&state);
    *auth.stats.entry("registrations").or_default() += 1;
    auth.next += 1;
    let client_id = format!("client-{}", auth.next);
    (
        StatusCode::CREATED,
        Json(json!({"client_id": client_id, "redirect_uris": body["redirect_uris"]})),
    )
        .into_response()
}

async fn authorize(
    State(state): State<Shared>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let (Some(redirect), Some(challenge), Some(client)) = (
        query.get("redirect_uri"),
        query.get("code_challenge"),
        query.get("client_id"),
    ) else {
        return (
            StatusCode::BAD_REQUEST,
            "redirect_uri, code_challenge and client_id are required",
        )
            .into_response();
    };
    let mut auth = lock(&state);
    auth.next += 1;
    let code = format!("code-{}", auth.next);
    auth.codes
        .insert(code.clone(), (challenge.clone(), client.clone()));
    let state_param = query.get("state").cloned().unwrap_or_default();
    let Ok(mut target) = url::Url::parse(redirect) else {
        return (StatusCode::BAD_REQUEST, "redirect_uri is not a URL").into_response();
    };
    target
        .query_pairs_mut()
        .append_pair("code", &code)
        .append_pair("state", &state_param);
    Redirect::to(target.as_str()).into_response()
}

fn token_error(error: &str) -> Response {
    (StatusCode::BAD_REQUEST, Json(json!({"error": error}))).into_response()
}

/// The client id and secret of a token request: HTTP Basic, else the body.
fn client_secret(headers: &HeaderMap, form: &HashMap<String, String>) -> Option<(String, String)> {
    let basic = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Basic "))
        .and_then(base64_decode)
        .and_then(|pair| String::from_utf8(pair).ok());
    if let Some((id, secret)) = basic.as_deref().and_then(|p| p.split_once(':')) {
        return Some((id.to_owned(), secret.to_owned()));
    }
    Some((
        form.get("client_id")?.clone(),
        form.get("client_secret")?.clone(),
    ))
}

/// Standard base64 (HTTP Basic credentials).
fn base64_decode(text: &str) -> Option<Vec<u8>> {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut bits = 0u32;
    let mut count = 0;
    let mut out = Vec::new();
    for byte in text.trim_end_matches('=').bytes() {
        let value = ALPHABET.iter().position(|b| *b == byte)? as u32;
        bits = (bits << 6) | value;
        count += 6;
        if count >= 8 {
            count -= 8;
            out.push((bits >> count) as u8);
            bits &= (1 << count) - 1;
        }
    }
    Some(out)
}

async fn token(
    State(state): State<Shared>,
    headers: HeaderMap,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    let mut auth = lock(&state);
    let grant = form.get("grant_type").map(String::as_str).unwrap_or("");
    match grant {
        "client_credentials" => {
            if client_secret(&headers, &form)
                != Some(("cc-client".to_owned(), "cc-secret".to_owned()))
            {
                return (
                    StatusCode::UNAUTHORIZED,
                    Json(json!({"error": "invalid_client"})),
                )
                    .into_response();
            }
            *auth.stats.entry("client_credentials").or_default() += 1;
            auth.next += 1;
            let access = format!("access-{}", auth.next);
            let expires = Instant::now() + Duration::from_secs(auth.expires_in);
            auth.access.insert(access.clone(), expires);
            return Json(json!({
                "access_token": access,
                "token_type": "Bearer",
                "expires_in": auth.expires_in,
            }))
            .into_response();
        }
        "authorization_code" => {
            let Some((challenge, _client)) = form.get("code").and_then(|c| auth.codes.remove(c))
            else {
                return token_error("invalid_grant");
            };
            let verifier = form.get("code_verifier").cloned().unwrap_or_default();
            if base64url(&Sha256::digest(verifier.as_bytes())) != challenge {
                return token_error("invalid_grant");
            }
        }
        "refresh_token" => {
            let known = form
                .get("refresh_token")
                .is_some_and(|t| auth.refresh.contains(t));
            if !known {
                *auth.stats.entry("refused_refresh").or_default() += 1;
                return token_error("invalid_grant");
            }
        }
        _ => return token_error("unsupported_grant_type"),
    }
    *auth
        .stats
        .entry(if grant == "refresh_token" {
            "refresh_token"
        } else {
            "authorization_code"
        })
        .or_default() += 1;
    auth.next += 1;
    let access = format!("access-{}", auth.next);
    let refresh = format!("refresh-{}", auth.next);
    let expires = Instant::now() + Duration::from_secs(auth.expires_in);
    auth.access.insert(access.clone(), expires);
    auth.refresh.insert(refresh.clone());
    Json(json!({
        "access_token": access,
        "token_type": "Bearer",
        "expires_in": auth.expires_in,
        "refresh_token": refresh,
    }))
    .into_response()
}

async fn admin_expire_access(State(state): State<Shared>) -> StatusCode {
    lock(&state).access.clear();
    StatusCode::NO_CONTENT
}

async fn admin_revoke(State(state): State<Shared>) -> StatusCode {
    let mut auth = lock(&state);
    auth.access.clear();
    auth.refresh.clear();
    StatusCode::NO_CONTENT
}

async fn admin_stats(State(state): State<Shared>) -> Json<Value> {
    Json(json!(lock(&state).stats))
}

/// Lets through `/mcp` requests that carry a token this server issued (and still honours).
async fn require_token(
    State(state): State<Shared>,
    headers: HeaderMap,
    request: Request,
    next: Next,
) -> Response {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let (valid, base) = {
        let auth = lock(&state);
        (
            token.is_some_and(|t| {
                auth.access
                    .get(t)
                    .is_some_and(|expires| Instant::now() < *expires)
            }),
            auth.base.clone(),
        )
    };
    if valid {
        return next.run(request).await;
    }
    {
        let mut auth = lock(&state);
        *auth.stats.entry("refused").or_default() += 1;
        if token.is_some() {
            *auth.stats.entry("refused_token").or_default() += 1;
        }
    }
    // A test server's tokens are throwaway: naming the refused one helps a failing test.
    eprintln!(
        "{SERVER_NAME}: refused {} {} (token: {token:?})",
        request.method(),
        request.uri()
    );
    let challenge = format!(
        "Bearer error=\"invalid_token\", resource_metadata=\"{base}/.well-known/oauth-protected-resource/mcp\""
    );
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, challenge)],
        "unauthorized",
    )
        .into_response()
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut addr = "127.0.0.1:0".to_owned();
    let mut expires_in = 3600;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match (arg.as_str(), args.next()) {
            ("--http", Some(value)) => addr = value,
            ("--expires-in", Some(value)) => expires_in = value.parse()?,
            _ => anyhow::bail!("usage: oauth_server [--http ADDR] [--expires-in SECS]"),
        }
    }
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    let bound = listener.local_addr()?;
    let state: Shared = Arc::new(Mutex::new(Auth {
        base: format!("http://{bound}"),
        expires_in,
        ..Auth::default()
    }));
    let mcp: StreamableHttpService<WhoAmI, LocalSessionManager> = StreamableHttpService::new(
        || Ok(WhoAmI),
        Arc::default(),
        StreamableHttpServerConfig::default(),
    );
    let router = Router::new()
        .nest_service("/mcp", mcp)
        .layer(middleware::from_fn_with_state(state.clone(), require_token))
        .route(
            "/.well-known/oauth-protected-resource/mcp",
            get(protected_resource),
        )
        .route(
            "/.well-known/oauth-authorization-server",
            get(authorization_server),
        )
        .route("/register", post(register))
        .route("/authorize", get(authorize))
        .route("/token", post(token))
        .route("/admin/expire-access", post(admin_expire_access))
        .route("/admin/revoke", post(admin_revoke))
        .route("/admin/stats", get(admin_stats))
        .with_state(state);
    eprintln!("{SERVER_NAME}: listening on http://{bound}/mcp");
    axum::serve(listener, router).await?;
    Ok(())
}
