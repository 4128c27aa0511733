//! `toolgate login NAME` and `toolgate logout NAME`: the authorization-code flow with PKCE through a loopback redirect, and the token file it leaves.
//!
//! Login probes the server without a token to read its `WWW-Authenticate` challenge (the
//! protected-resource metadata URL and the scope it wants), lets rmcp discover the
//! authorization server from it, picks the scopes and the client (configured, client
//! metadata document, or dynamic registration), prints the authorization URL (and opens a
//! browser when there is one), waits for the redirect on `127.0.0.1`, exchanges the code and
//! stores the tokens. It then lists the server's tools with them: a server that answers
//! `insufficient_scope` for scopes not yet granted gets a step-up authorization for the
//! union, at most rmcp's `ScopeUpgradeConfig::max_upgrade_attempts` times.

use std::{sync::Arc, time::Duration};

use rmcp::{
    ServiceExt,
    transport::{
        StreamableHttpClientTransport,
        auth::{AuthClient, AuthorizationManager, OAuthClientConfig},
    },
};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

use super::{AuthWatch, Challenge, store};
use crate::config::{Config, OAuthSettings, ServerConfig, Transport, UpstreamAuth};

/// How long one MCP request of the probe or the check may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a connection to the redirect listener may take to send its request.
const CALLBACK_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest request head the redirect listener reads.
const CALLBACK_MAX_BYTES: usize = 16 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum LoginError {
    #[error("no server named {0:?} in the config")]
    UnknownServer(String),
    #[error(
        "server \"{0}\" has no `auth` table with type = \"oauth\" (only `url` servers with one sign in)"
    )]
    NotOAuth(String),
    #[error(transparent)]
    Store(#[from] store::StoreError),
    #[error("server \"{server}\": {message}")]
    Flow { server: String, message: String },
}

/// What `toolgate login` may do.
#[derive(Debug, Clone)]
pub struct LoginOptions {
    /// Try to open the authorization URL in a browser (it is printed either way).
    pub open_browser: bool,
    /// How long to wait for each redirect.
    pub timeout: Duration,
    pub max_message_bytes: usize,
}

fn find<'a>(config: &'a Config, name: &str) -> Result<&'a ServerConfig, LoginError> {
    config
        .servers
        .iter()
        .find(|s| s.id.to_string() == name)
        .ok_or_else(|| LoginError::UnknownServer(name.to_owned()))
}

/// Deletes the stored tokens of server `name`; `false` when there were none.
pub fn logout(config: &Config, name: &str) -> Result<(bool, std::path::PathBuf), LoginError> {
    let server = find(config, name)?;
    let Transport::Http {
        url, auth: Some(_), ..
    } = &server.transport
    else {
        return Err(LoginError::NotOAuth(name.to_owned()));
    };
    let dir = match &server.transport {
        Transport::Http {
            auth: Some(UpstreamAuth::OAuth(settings)),
            ..
        } => settings.token_dir.as_deref(),
        _ => None,
    };
    let store = store::FileStore::for_url(url, dir)?;
    Ok((store.remove()?, store.path().to_owned()))
}

/// Signs in to server `name` and stores its tokens; prints what the user must do on stdout.
pub async fn login(config: &Config, name: &str, options: &LoginOptions) -> Result<(), LoginError> {
    let server = find(config, name)?;
    let (url, headers, settings) = match &server.transport {
        Transport::Http {
            url,
            headers,
            auth: Some(UpstreamAuth::OAuth(settings)),
        } => (url, headers, settings),
        _ => return Err(LoginError::NotOAuth(name.to_owned())),
    };
    let flow = |message: String| LoginError::Flow {
        server: name.to_owned(),
        message,
    };
    let store = store::FileStore::for_url(url, settings.token_dir.as_deref())?;
    let file = store.read()?;
    let http_config = || {
        super::super::connect::http_config(url, headers, options.max_message_bytes).map_err(flow)
    };

    // 1. What the server says without a token: where its metadata is, which scope it wants.
    let watch = Arc::new(AuthWatch::default());
    let (client, _) = super::super::http_lists::tap(options.max_message_bytes, Some(watch.clone()))
        .map_err(flow)?;
    let _ = list_tools(StreamableHttpClientTransport::with_client(
        client,
        http_config()?,
    ))
    .await;
    let challenge = watch.last_challenge().map(|c| c.header);

    // 2. Discovery (RFC 9728, then RFC 8414 / OpenID Connect).
    let mut manager = AuthorizationManager::new(url.as_str())
        .await
        .map_err(|e| flow(format!("OAuth setup failed: {e}")))?;
    manager.set_credential_store(store.clone());
    let resolution = manager
        .resolve_metadata_from_challenge(challenge.as_deref())
        .await
        .map_err(|e| flow(format!("authorization server discovery failed: {e}")))?;
    let metadata = resolution.metadata.clone();
    manager.set_metadata(resolution.metadata);

    // 3. Scopes: the configured ones, else the challenge's, else the resource's
    //    `scopes_supported`; plus what the server asked for since the last login.
    let mut scopes = if settings.scopes.is_empty() {
        manager.select_initial_scopes(&[]).await
    } else {
        settings.scopes.clone()
    };
    if !file.needed_scopes.is_empty() {
        let granted = file
            .credentials
            .as_ref()
            .map(|c| c.granted_scopes.clone())
            .unwrap_or_default();
        for scope in granted
            .into_iter()
            .chain(file.needed_scopes.iter().cloned())
        {
            if !scopes.contains(&scope) {
                scopes.push(scope);
            }
        }
    }
    let scope_refs: Vec<&str> = scopes.iter().map(String::as_str).collect();

    // 4. The redirect listener, then the client: configured, CIMD, or registered (the client
    //    registered at the last login when the redirect URI can be the same again: its port
    //    is tried first).
    let listener = match settings.redirect_port {
        Some(port) => TcpListener::bind(("127.0.0.1", port)).await.map_err(|e| {
            flow(format!(
                "cannot listen on 127.0.0.1:{port} for the redirect: {e}"
            ))
        })?,
        None => redirect_listener(file.registration.as_ref())
            .await
            .map_err(|e| flow(format!("cannot listen on 127.0.0.1 for the redirect: {e}")))?,
    };
    let bound = listener
        .local_addr()
        .map_err(|e| flow(format!("cannot read the redirect listener's address: {e}")))?;
    let redirect = format!("http://127.0.0.1:{}/callback", bound.port());
    let registered = configure_client(
        &mut manager,
        settings,
        &metadata,
        &redirect,
        &scope_refs,
        &file,
    )
    .await
    .map_err(flow)?;

    // 5. Authorize, exchange, check; step up while the server wants scopes not granted.
    let check_watch = Arc::new(AuthWatch::default());
    let (check_client, _) =
        super::super::http_lists::tap(options.max_message_bytes, Some(check_watch.clone()))
            .map_err(flow)?;
    let auth_client = AuthClient::new(check_client, manager);
    let manager = auth_client.auth_manager.clone();
    let mut auth_url = manager
        .lock()
        .await
        .get_authorization_url(&scope_refs)
        .await
        .map_err(|e| flow(format!("cannot build the authorization URL: {e}")))?;
    loop {
        let callback = authorize(name, &auth_url, &listener, &redirect, options)
            .await
            .map_err(flow)?;
        manager
            .lock()
            .await
            .exchange_code_for_token_with_issuer(
                &callback.code,
                &callback.state,
                callback.issuer.as_deref(),
            )
            .await
            .map_err(|e| flow(format!("exchanging the authorization code failed: {e}")))?;
        store.update(|file| {
            if let Some((registration, secret)) = &registered {
                file.client_secret = secret.clone();
                file.registration = Some(registration.clone());
            }
            file.needed_scopes.clear();
        })?;
        let checked = list_tools(StreamableHttpClientTransport::with_client(
            auth_client.clone(),
            http_config()?,
        ))
        .await;
        let granted = manager.lock().await.get_current_scopes().await;
        let refusal = match checked {
            Ok(tools) => {
                println!(
                    "Signed in to \"{name}\" ({tools} tools; scopes: {}). Tokens saved in {}.",
                    if granted.is_empty() {
                        "none requested".to_owned()
                    } else {
                        granted.join(" ")
                    },
                    store.path().display()
                );
                return Ok(());
            }
            Err(error) => match check_watch.last_challenge() {
                Some(challenge) => challenge,
                None => {
                    return Err(flow(format!(
                        "signed in, but listing tools failed: {error}"
                    )));
                }
            },
        };
        auth_url = step_up(&refusal, url, &granted, &manager)
            .await
            .map_err(flow)?;
    }
}

/// The authorization URL for the union of `granted` and what `refusal` asks for, if asking
/// again can help and rmcp's attempt limit allows it.
async fn step_up(
    refusal: &Challenge,
    url: &str,
    granted: &[String],
    manager: &tokio::sync::Mutex<AuthorizationManager>,
) -> Result<String, String> {
    let params = refusal.params(url);
    if !(refusal.status == 403 && params.is_insufficient_scope()) {
        return Err(format!(
            "the server refused the new token (HTTP {})",
            refusal.status
        ));
    }
    let required = params.scope.unwrap_or_default();
    if required
        .split_whitespace()
        .all(|s| granted.iter().any(|g| g == s))
    {
        return Err(format!(
            "the server answers insufficient_scope for scope \"{required}\", which was granted: asking again cannot help"
        ));
    }
    println!("The server needs scope \"{required}\" too: authorizing again.");
    manager
        .lock()
        .await
        .request_scope_upgrade(&required)
        .await
        .map_err(|e| format!("cannot step up to scope \"{required}\": {e}"))
}

/// A listener for the redirect: on the port of the last registration's redirect URI when it
/// is free (so that client can be used again), else on any port.
async fn redirect_listener(previous: Option<&store::Registration>) -> std::io::Result<TcpListener> {
    let port = previous
        .and_then(|r| url::Url::parse(&r.redirect_uri).ok())
        .filter(|u| u.host_str() == Some("127.0.0.1"))
        .and_then(|u| u.port());
    if let Some(port) = port
        && let Ok(listener) = TcpListener::bind(("127.0.0.1", port)).await
    {
        return Ok(listener);
    }
    TcpListener::bind(("127.0.0.1", 0)).await
}

/// Configures `manager`'s client; returns a new dynamic registration and its secret (`None`
/// when the client is configured, a metadata document, or the one `file` registered before
/// with this authorization server and `redirect`).
async fn configure_client(
    manager: &mut AuthorizationManager,
    settings: &OAuthSettings,
    metadata: &rmcp::transport::auth::AuthorizationMetadata,
    redirect: &str,
    scopes: &[&str],
    file: &store::TokenFile,
) -> Result<Option<(store::Registration, Option<String>)>, String> {
    let owned: Vec<String> = scopes.iter().map(|s| (*s).to_owned()).collect();
    let supports_cimd = metadata
        .additional_fields
        .get("client_id_metadata_document_supported")
        .and_then(serde_json::Value::as_bool)
        .unwrap_or(false);
    let authorization_server = metadata
        .issuer
        .clone()
        .or_else(|| metadata.registration_endpoint.clone())
        .unwrap_or_default();
    let reusable = file.registration.as_ref().filter(|r| {
        r.authorization_server == authorization_server
            && r.redirect_uri == redirect
            && file.client_id.as_deref() == Some(r.client_id.as_str())
    });
    let (config, registered) = if let Some(id) = &settings.client_id {
        let mut config = OAuthClientConfig::new(id.clone(), redirect).with_scopes(owned);
        if let Some(secret) = &settings.client_secret {
            config = config.with_client_secret(secret.expose());
        }
        (config, None)
    } else if let Some(document) = settings
        .client_metadata_url
        .as_ref()
        .filter(|_| supports_cimd)
    {
        (
            OAuthClientConfig::new(document.clone(), redirect).with_scopes(owned),
            None,
        )
    } else if let Some(previous) = reusable {
        let mut config =
            OAuthClientConfig::new(previous.client_id.clone(), redirect).with_scopes(owned);
        if let Some(secret) = &file.client_secret {
            config = config.with_client_secret(secret.clone());
        }
        (config, None)
    } else if metadata.registration_endpoint.is_some() {
        let config = manager
            .register_client("toolgate", redirect, scopes)
            .await
            .map_err(|e| format!("dynamic client registration failed: {e}"))?;
        let registration = store::Registration {
            client_id: config.client_id.clone(),
            authorization_server,
            redirect_uri: redirect.to_owned(),
        };
        let secret = config.client_secret.clone();
        (config, Some((registration, secret)))
    } else {
        return Err(
            "the authorization server offers no client registration: set `client_id` (and `client_secret`) in the server's `auth` table"
                .to_owned(),
        );
    };
    manager
        .configure_client(config)
        .map_err(|e| format!("cannot configure the OAuth client: {e}"))?;
    Ok(registered)
}

/// `tools/list` on a fresh session through `transport`: the number of tools.
async fn list_tools<C>(transport: StreamableHttpClientTransport<C>) -> Result<usize, String>
where
    C: rmcp::transport::streamable_http_client::StreamableHttpClient + Send + Sync + 'static,
{
    // The `initialize` handshake names the newest version that has one (as toolgate's
    // upstream client does, `super::super::client`).
    let client = rmcp::model::ClientConfig::new(
        rmcp::model::ClientCapabilities::default(),
        rmcp::model::Implementation::new("toolgate", env!("CARGO_PKG_VERSION")),
    )
    .with_protocol_version(rmcp::model::ProtocolVersion::LATEST_WITH_INITIALIZE);
    let service = match tokio::time::timeout(REQUEST_TIMEOUT, client.serve(transport)).await {
        Ok(Ok(service)) => service,
        Ok(Err(error)) => return Err(format!("MCP handshake failed: {error}")),
        Err(_) => return Err("MCP handshake timed out".to_owned()),
    };
    let listed = tokio::time::timeout(REQUEST_TIMEOUT, service.list_tools(None)).await;
    let _ = tokio::time::timeout(REQUEST_TIMEOUT, service.cancel()).await;
    match listed {
        Ok(Ok(tools)) => Ok(tools.tools.len()),
        Ok(Err(error)) => Err(format!("tools/list failed: {error}")),
        Err(_) => Err("tools/list timed out".to_owned()),
    }
}

struct Callback {
    code: String,
    state: String,
    issuer: Option<String>,
}

/// Shows `auth_url` and waits for its redirect on `listener`.
async fn authorize(
    server: &str,
    auth_url: &str,
    listener: &TcpListener,
    redirect: &str,
    options: &LoginOptions,
) -> Result<Callback, String> {
    println!("To sign in to \"{server}\", open this URL in a browser:\n\n  {auth_url}\n");
    println!(
        "Waiting for the redirect to {redirect} (up to {} s)...",
        options.timeout.as_secs()
    );
    if options.open_browser {
        open_browser(auth_url).await;
    }
    let deadline = tokio::time::Instant::now() + options.timeout;
    loop {
        let accepted = tokio::time::timeout_at(deadline, listener.accept()).await;
        let (stream, _) = match accepted {
            Ok(Ok(accepted)) => accepted,
            Ok(Err(error)) => return Err(format!("the redirect listener failed: {error}")),
            Err(_) => {
                return Err(format!(
                    "no redirect came back within {} s",
                    options.timeout.as_secs()
                ));
            }
        };
        match tokio::time::timeout(CALLBACK_READ_TIMEOUT, answer_callback(stream)).await {
            Ok(Ok(Some(callback))) => return Ok(callback),
            Ok(Err(denied)) => return Err(denied),
            // Not the redirect (a favicon, a probe), or too slow: keep waiting.
            Ok(Ok(None)) | Err(_) => {}
        }
    }
}

/// Reads one request on the redirect listener and answers it: the callback's parameters, or
/// `None` for another path, or why the authorization server refused.
async fn answer_callback(mut stream: TcpStream) -> Result<Option<Callback>, String> {
    let mut head = Vec::new();
    let mut buffer = [0u8; 2048];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < CALLBACK_MAX_BYTES {
        match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(n) => head.extend_from_slice(&buffer[..n]),
        }
    }
    let text = String::from_utf8_lossy(&head);
    let target = text
        .lines()
        .next()
        .and_then(|line| line.strip_prefix("GET "))
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or("");
    let parsed = url::Url::parse(&format!("http://127.0.0.1{target}")).ok();
    let Some(parsed) = parsed.filter(|u| u.path() == "/callback") else {
        respond(
            &mut stream,
            "404 Not Found",
            "Not the toolgate sign-in redirect.",
        )
        .await;
        return Ok(None);
    };
    let param = |name: &str| {
        parsed
            .query_pairs()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
    };
    if let Some(error) = param("error") {
        let description = param("error_description").unwrap_or_default();
        respond(
            &mut stream,
            "400 Bad Request",
            "toolgate: the sign-in was refused.",
        )
        .await;
        return Err(format!(
            "the authorization server refused: {error} {description}"
        ));
    }
    match (param("code"), param("state")) {
        (Some(code), Some(state)) => {
            respond(
                &mut stream,
                "200 OK",
                "toolgate: signed in. You can close this tab.",
            )
            .await;
            Ok(Some(Callback {
                code,
                state,
                issuer: param("iss"),
            }))
        }
        _ => {
            respond(
                &mut stream,
                "400 Bad Request",
                "The redirect has no code or state.",
            )
            .await;
            Ok(None)
        }
    }
}

async fn respond(stream: &mut TcpStream, status: &str, text: &str) {
    let response = format!(
        "HTTP/1.1 {status}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
        text.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}

/// Opens `url` with the desktop's opener when there seems to be a desktop; bounded.
async fn open_browser(url: &str) {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else if std::env::var_os("DISPLAY").is_some() || std::env::var_os("WAYLAND_DISPLAY").is_some()
    {
        "xdg-open"
    } else {
        return;
    };
    let status = tokio::process::Command::new(opener)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .status();
    let _ = tokio::time::timeout(Duration::from_secs(5), status).await;
}
