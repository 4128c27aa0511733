//! Connecting to one upstream: a stdio child in its own process group, or a streamable-HTTP URL.
//!
//! A stdio child is stopped gently: the client closes (which closes the child's stdin, the
//! way a stdio server is asked to exit), then [`ChildGroup::stop`] waits, SIGTERMs the group
//! and at last SIGKILLs it, within a few seconds in all.

use std::{
    collections::VecDeque,
    future::Future,
    pin::Pin,
    process::Stdio,
    sync::{Arc, Mutex},
    time::Duration,
};

use rmcp::{
    RoleClient, ServiceExt,
    service::{Peer, QuitReason, RunningServiceCancellationToken},
    transport::{
        StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig,
    },
};
use tokio::io::{AsyncBufReadExt, BufReader};

use super::client::UpstreamClient;
use crate::{
    child::ChildGroup,
    config::{ServerConfig, ServerId, Transport},
};

/// Lines of a child's stderr kept to explain a failure.
const STDERR_TAIL_LINES: usize = 20;
/// How long to let a dying child's last stderr lines arrive before reporting.
const STDERR_DRAIN: Duration = Duration::from_millis(500);
/// How long the client may take to close (and so close the child's stdin) before the child
/// is stopped anyway.
const CLOSE_GRACE: Duration = Duration::from_secs(1);

type Done = Pin<Box<dyn Future<Output = Result<QuitReason, tokio::task::JoinError>> + Send>>;

/// A live connection to one server, owned by its supervisor.
pub struct Connection {
    peer: Peer<RoleClient>,
    /// The raw path for `tools/call` (stdio servers only).
    raw: Option<Arc<super::raw::RawLink>>,
    /// List pages as JSON beside rmcp's client (HTTP servers only).
    http_lists: Option<Arc<super::http_lists::HttpLists>>,
    cancel: Option<RunningServiceCancellationToken>,
    done: Option<Done>,
    process: Process,
}

impl Connection {
    pub fn peer(&self) -> &Peer<RoleClient> {
        &self.peer
    }

    pub fn raw(&self) -> Option<&Arc<super::raw::RawLink>> {
        self.raw.as_ref()
    }

    /// Where this server's lists are read as JSON, with every field.
    pub fn json_lists(&self) -> super::lists::JsonLists {
        match (&self.raw, &self.http_lists) {
            (Some(raw), _) => super::lists::JsonLists::Stdio(raw.clone()),
            (None, Some(http)) => super::lists::JsonLists::Http(http.clone()),
            (None, None) => super::lists::JsonLists::None,
        }
    }

    /// Resolves when the connection ends by itself (child exited, session lost).
    pub async fn closed(&mut self) {
        match self.done.as_mut() {
            Some(done) => {
                let _ = done.await;
                self.done = None;
            }
            None => std::future::pending().await,
        }
    }

    /// `what` plus whatever the child said on its way out: exit status and stderr tail.
    pub async fn describe_failure(&mut self, what: &str) -> String {
        self.process.describe_failure(what).await
    }

    /// Closes the client, which closes the child's stdin, then stops the child's whole
    /// process group gently ([`ChildGroup::stop`]: wait, SIGTERM, SIGKILL) and reaps it.
    pub async fn stop(&mut self) {
        if let Some(cancel) = self.cancel.take() {
            cancel.cancel();
        }
        if let Some(done) = self.done.take() {
            let _ = tokio::time::timeout(CLOSE_GRACE, done).await;
        }
        self.process.stop().await;
    }
}

/// Starts `config`'s server and completes the MCP handshake.
/// `max_message_bytes` bounds each line a stdio server writes (see [`super::size_guard`]) and
/// each answer of an HTTP one ([`super::bounded_http`]).
/// `auth` is the server's sign-in state: a server with `auth` that needs a login is marked
/// there ([`super::oauth`]).
pub async fn connect(
    config: &ServerConfig,
    handler: UpstreamClient,
    max_message_bytes: usize,
    auth: &Arc<super::oauth::AuthWatch>,
) -> Result<Connection, String> {
    match &config.transport {
        Transport::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            // Its own group, so `npx`/`uv` grandchildren die with it; killed on drop and,
            // on Linux, with the gateway.
            let mut child = crate::child::spawn_group(command, |cmd| {
                crate::child::set_env(cmd, env);
                cmd.args(args)
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped());
                if let Some(cwd) = cwd {
                    cmd.current_dir(cwd);
                }
            })
            .map_err(|e| format!("could not run {command:?}: {e}"))?;
            let (Some(stdout), Some(stdin)) = (child.take_stdout(), child.take_stdin()) else {
                return Err("child process has no stdio pipes".into());
            };
            let stderr = child.take_stderr().map(|stderr| {
                StderrTail::spawn(config.id.clone(), stderr, handler.log_budget.clone())
            });
            // One writer for rmcp and the raw path; answers to raw requests are taken out
            // before rmcp reads ([`super::raw`]).
            let (raw, stdin, writer) = super::raw::RawLink::new(stdin, max_message_bytes);
            let stdout = super::size_guard::SizeGuard::new(stdout, max_message_bytes)
                .with_raw(raw.clone())
                .with_logs(handler.logs.clone());
            // Read in a task of its own: rmcp's loop wakes only for what is left for it.
            let stdout = super::pump::Pumped::spawn(stdout);
            let served = handler.serve((stdout, stdin)).await;
            let mut process = Process {
                child: Some(child),
                stderr,
                writer: Some(writer.drop_guard()),
                renewal: None,
            };
            match served {
                Ok(service) => {
                    let mut connection = process.into_connection(service);
                    connection.raw = Some(raw);
                    Ok(connection)
                }
                Err(error) => {
                    let reason = process
                        .describe_failure(&format!("MCP handshake failed: {error}"))
                        .await;
                    process.kill().await;
                    Err(reason)
                }
            }
        }
        Transport::Http {
            url,
            headers,
            auth: sign_in,
        } => {
            let transport_config = http_config(url, headers, max_message_bytes)?;
            // rmcp's client, its answers bounded so that one over the limit fails its call
            // at once ([`super::bounded_http`]), and beside it the reader of list pages as
            // JSON ([`super::http_lists`]).
            let watch = sign_in.as_ref().map(|_| auth.clone());
            let (client, lists) = super::http_lists::tap(max_message_bytes, watch)?;
            let client = client.with_logs(handler.logs.clone());
            // A client_credentials server's token renewal, stopped with the connection.
            let mut renewal = None;
            let served = match sign_in {
                None => {
                    handler
                        .serve(StreamableHttpClientTransport::with_client(
                            client,
                            transport_config,
                        ))
                        .await
                }
                // rmcp's client around ours: the bound stays on every answer, and the token
                // is added, refreshed before it expires and once on a 401.
                Some(sign_in) => {
                    let (client, renews) =
                        super::oauth::authorize(&config.id, url, sign_in, client, auth).await?;
                    renewal = renews;
                    handler
                        .serve(StreamableHttpClientTransport::with_client(
                            client,
                            transport_config,
                        ))
                        .await
                }
            };
            let service = served.map_err(|e| {
                auth.refused(&config.id)
                    .unwrap_or_else(|| format!("MCP handshake with {url} failed: {e}"))
            })?;
            let mut connection = Process {
                child: None,
                stderr: None,
                writer: None,
                renewal,
            }
            .into_connection(service);
            connection.http_lists = Some(lists);
            Ok(connection)
        }
    }
}

/// rmcp's transport settings for the server at `url`: its `headers`, and `max_message_bytes`
/// on every answer.
pub(super) fn http_config(
    url: &str,
    headers: &std::collections::BTreeMap<String, String>,
    max_message_bytes: usize,
) -> Result<StreamableHttpClientTransportConfig, String> {
    let mut custom = std::collections::HashMap::new();
    for (name, value) in headers {
        let name = http::HeaderName::try_from(name.as_str())
            .map_err(|e| format!("header name {name:?} is invalid: {e}"))?;
        // The value may hold a secret: the error names the header only.
        let value = http::HeaderValue::try_from(value.as_str())
            .map_err(|_| format!("header {name} has a value that is not valid in HTTP"))?;
        custom.insert(name, value);
    }
    let mut transport_config = StreamableHttpClientTransportConfig::with_uri(url);
    transport_config.custom_headers = custom;
    transport_config.max_json_response_size = max_message_bytes;
    transport_config.max_sse_event_size = max_message_bytes;
    Ok(transport_config)
}

/// The local side of a stdio server (nothing for an HTTP one): the child and its stderr.
struct Process {
    child: Option<ChildGroup>,
    stderr: Option<StderrTail>,
    /// Stops the task writing the child's stdin (which closes it) when dropped.
    writer: Option<tokio_util::sync::DropGuard>,
    /// Stops the task renewing an HTTP server's client_credentials token when dropped.
    renewal: Option<tokio_util::sync::DropGuard>,
}

impl Process {
    fn into_connection(self, service: super::Service) -> Connection {
        let peer = service.peer().clone();
        let cancel = service.cancellation_token();
        Connection {
            peer,
            raw: None,
            http_lists: None,
            cancel: Some(cancel),
            done: Some(Box::pin(service.waiting())),
            process: self,
        }
    }

    async fn describe_failure(&mut self, what: &str) -> String {
        let mut text = what.to_owned();
        if let Some(child) = self.child.as_mut() {
            // Give a dying child a moment so its status and last words are known.
            let _ = tokio::time::timeout(STDERR_DRAIN, child.wait()).await;
            if let Ok(Some(status)) = child.try_wait() {
                text.push_str(&format!(" ({status})"));
            }
        }
        if let Some(stderr) = &self.stderr {
            text.push_str(&stderr.describe().await);
        }
        text
    }

    /// Kills the child's whole process group now and reaps it: it failed anyway.
    async fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().await;
        }
    }

    /// Stops the child's whole process group gently and reaps it.
    async fn stop(&mut self) {
        // Its stdin closes first, which asks a stdio server to exit.
        drop(self.writer.take());
        drop(self.renewal.take());
        if let Some(mut child) = self.child.take() {
            child.stop().await;
        }
    }
}

/// Reads a child's stderr: every line goes to our log, the last few are kept for errors.
struct StderrTail {
    lines: Arc<Mutex<VecDeque<String>>>,
    reader: tokio::task::JoinHandle<()>,
}

impl StderrTail {
    fn spawn(
        server: ServerId,
        stderr: tokio::process::ChildStderr,
        budget: Arc<super::flood::LogBudget>,
    ) -> Self {
        let lines = Arc::new(Mutex::new(VecDeque::with_capacity(STDERR_TAIL_LINES)));
        let kept = lines.clone();
        // Owned by the connection; ends at the child's EOF, which its kill guarantees.
        let reader = tokio::spawn(async move {
            let mut reader = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                super::flood::log_within(&budget, &server, || {
                    tracing::debug!(server = %server, "stderr: {line}");
                });
                if let Ok(mut kept) = kept.lock() {
                    if kept.len() == STDERR_TAIL_LINES {
                        kept.pop_front();
                    }
                    kept.push_back(line);
                }
            }
        });
        Self { lines, reader }
    }

    async fn describe(&self) -> String {
        // Let the reader reach EOF first if the child is gone, so the last words are in.
        let deadline = tokio::time::Instant::now() + STDERR_DRAIN;
        while !self.reader.is_finished() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let lines = match self.lines.lock() {
            Ok(lines) => lines.iter().cloned().collect::<Vec<_>>(),
            Err(_) => Vec::new(),
        };
        if lines.is_empty() {
            String::new()
        } else {
            format!("; stderr: {}", lines.join(" | "))
        }
    }
}

impl Drop for StderrTail {
    fn drop(&mut self) {
        self.reader.abort();
    }
}
