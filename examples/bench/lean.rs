//! Section 2b: throughput with lean clients (requests written by hand, answers found by a byte search), so that rmcp's HTTP client is not what bounds the HTTP paths.
//!
//! Section 2's HTTP client (rmcp's, on reqwest and hyper) spends about as much CPU per call as
//! toolgate and echo_server together, on a machine whose 2 cores all three processes share.
//! Here every path is driven by a client that does close to nothing: over HTTP, hyper's
//! HTTP/1.1 client with one connection per caller; over stdio, one pipe whose answers a reader
//! task hands back by id. They write requests as rmcp's clients do (the same keys in the same
//! order, a progress token per call) and check each answer for the echoed text. The direct stdio path
//! runs with both clients, so that every ratio can be read against either.

use std::collections::HashMap;

use http_body_util::{BodyExt, Full};
use hyper::{
    Request, StatusCode,
    body::Bytes,
    client::conn::http1::{SendRequest, handshake},
};
use hyper_util::rt::TokioIo;
use memchr::memmem;
use tokio::{
    io::{AsyncWriteExt, BufReader},
    process::{Child, ChildStdin},
    sync::oneshot,
};

use super::*;

/// The pre-2026 version the session-era client speaks, as rmcp's client does.
const SESSION_VERSION: &str = "2025-11-25";

/// A path of this section: who answers and how the lean client reaches it.
enum Lean {
    /// JSON-RPC lines on the server's stdin and stdout.
    Stdio(Arc<LineClient>),
    /// Streamable HTTP, one connection per caller.
    Http(HttpClient),
}

impl Lean {
    /// Makes `n` calls from `CALLERS` tasks; returns the wall time.
    async fn concurrent(&mut self, n: usize) -> anyhow::Result<Duration> {
        let next = Arc::new(AtomicUsize::new(0));
        let start = Instant::now();
        match self {
            Lean::Stdio(client) => {
                let mut tasks = tokio::task::JoinSet::new();
                for _ in 0..CALLERS {
                    let (client, next) = (client.clone(), next.clone());
                    tasks.spawn(async move {
                        while next.fetch_add(1, Ordering::Relaxed) < n {
                            client.call().await?;
                        }
                        anyhow::Ok(())
                    });
                }
                while let Some(joined) = tasks.join_next().await {
                    joined??;
                }
            }
            Lean::Http(client) => {
                let mut tasks = tokio::task::JoinSet::new();
                for mut connection in client.connections.drain(..) {
                    let (target, next) = (client.target.clone(), next.clone());
                    tasks.spawn(async move {
                        while next.fetch_add(1, Ordering::Relaxed) < n {
                            target.call(&mut connection).await?;
                        }
                        anyhow::Ok(connection)
                    });
                }
                while let Some(joined) = tasks.join_next().await {
                    client.connections.push(joined??);
                }
            }
        }
        Ok(start.elapsed())
    }
}

/// A path, its lean client, and the processes whose CPU it counts.
struct LeanRoute {
    label: &'static str,
    client: Lean,
    cpu: CpuWatch,
    /// The server, killed at the end.
    child: Child,
}

pub(super) async fn lean_benchmarks(env: &Env, plan: &Plan) -> anyhow::Result<()> {
    let one = env.echo_servers("lean.toml", 1, &[])?;
    let direct_rmcp = Route::direct(env).await?;
    let mut paths = vec![
        LeanRoute::stdio(env).await?,
        LeanRoute::http(
            "lean client → toolgate (HTTP) → echo_server",
            gateway_command(env, &one),
            "toolgate",
            Era::Session,
            "s0__echo",
        )
        .await?,
        LeanRoute::http(
            "lean client → toolgate (HTTP 2026-07-28) → echo_server",
            gateway_command(env, &one),
            "toolgate",
            Era::Modern,
            "s0__echo",
        )
        .await?,
        LeanRoute::http(
            "lean client → echo_server (HTTP, rmcp's server)",
            echo_http_command(env),
            "echo-server",
            Era::Session,
            "echo",
        )
        .await?,
        LeanRoute::http(
            "lean client → echo_server (HTTP 2026-07-28, rmcp's server)",
            echo_http_command(env),
            "echo-server",
            Era::Modern,
            "echo",
        )
        .await?,
    ];

    let warm = (plan.concurrent_calls / 10).max(CALLERS);
    concurrent(&direct_rmcp.session.peer(), &direct_rmcp.params, warm).await?;
    for path in &mut paths {
        path.client.concurrent(warm).await?;
    }
    // Row 0 is rmcp's client on direct stdio, the baseline of section 2's ratios.
    let rows = paths.len() + 1;
    let per_block = plan.concurrent_calls / plan.blocks;
    let mut elapsed = vec![Duration::ZERO; rows];
    let mut cpu = vec![(Duration::ZERO, Duration::ZERO); rows];
    let mut client_cpu = vec![Duration::ZERO; rows];
    for _ in 0..plan.blocks {
        let before = cpu_time(std::process::id());
        let peer = direct_rmcp.session.peer();
        elapsed[0] += direct_rmcp
            .cpu
            .measure(
                &mut cpu[0],
                concurrent(&peer, &direct_rmcp.params, per_block),
            )
            .await?;
        client_cpu[0] += cpu_time(std::process::id()).saturating_sub(before);
        for (i, path) in paths.iter_mut().enumerate() {
            let before = cpu_time(std::process::id());
            elapsed[i + 1] += path
                .cpu
                .measure(&mut cpu[i + 1], path.client.concurrent(per_block))
                .await?;
            client_cpu[i + 1] += cpu_time(std::process::id()).saturating_sub(before);
        }
    }
    let calls = per_block * plan.blocks;
    let rates = rates(&elapsed, calls);
    println!(
        "\n## 2b. Throughput with lean clients: {CALLERS} callers, {calls} calls per path \
         (hyper's HTTP/1.1 client, a connection per caller; over stdio one pipe, answers \
         matched by id; requests written as rmcp's clients write them)\n"
    );
    println!(
        "| path | calls/s | × direct (rmcp's client) | × direct (lean client) | toolgate CPU µs/call \
         | echo_server CPU µs/call | client CPU µs/call |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let labels = std::iter::once(direct_rmcp.label).chain(paths.iter().map(|p| p.label));
    for (i, label) in labels.enumerate() {
        // Rows 2 and 3 are the ones through toolgate.
        let (gw_cpu, up_cpu) = cpu_cells(cpu[i], calls, matches!(i, 2 | 3));
        println!(
            "| {label} | {:.0} | {:.2} | {:.2} | {gw_cpu} | {up_cpu} | {:.1} |",
            rates[i],
            rates[i] / rates[0],
            rates[i] / rates[1],
            us(client_cpu[i]) / calls as f64
        );
    }
    println!(
        "\n- toolgate over HTTP with a lean client: {:.2}× direct stdio with rmcp's client (the \
         baseline of issue 10's HTTP goal, ≥ 0.5, which section 2 decides with rmcp's HTTP \
         client), {:.2}× direct stdio with the lean client; 2026-07-28: {:.2}× and {:.2}×",
        rates[2] / rates[0],
        rates[2] / rates[1],
        rates[3] / rates[0],
        rates[3] / rates[1],
    );
    println!(
        "- rmcp's own HTTP server with the same client, no gateway: {:.2}× and {:.2}× direct \
         stdio with rmcp's client (toolgate over HTTP {:.2}× and {:.2}× of it)",
        rates[4] / rates[0],
        rates[5] / rates[0],
        rates[2] / rates[4],
        rates[3] / rates[5],
    );

    direct_rmcp.session.close().await;
    for mut path in paths {
        let _ = path.child.kill().await;
    }
    Ok(())
}

impl LeanRoute {
    /// echo_server on stdio, directly.
    async fn stdio(env: &Env) -> anyhow::Result<Self> {
        let mut child = tokio::process::Command::new(&env.echo)
            .env_remove("RUST_LOG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .context("cannot spawn echo_server")?;
        let pid = child.id().context("echo_server has no pid")?;
        let stdin = child.stdin.take().context("stdin is not piped")?;
        let stdout = child.stdout.take().context("stdout is not piped")?;
        let client = LineClient::start(stdin, stdout).await?;
        Ok(Self {
            label: "direct: lean client → echo_server (stdio)",
            client: Lean::Stdio(client),
            cpu: CpuWatch {
                gateway: None,
                upstream: pid,
            },
            child,
        })
    }

    /// `command` serving HTTP (it prints `NAME: listening on URL`), through its stdio
    /// upstream's `tool` when it is toolgate.
    async fn http(
        label: &'static str,
        command: tokio::process::Command,
        name: &str,
        era: Era,
        tool: &'static str,
    ) -> anyhow::Result<Self> {
        let (child, pid, url) = spawn_listening(command, name).await?;
        // Connected and checked first: toolgate's upstream is up once a call went through.
        let client = HttpClient::connect(&url, era, tool).await?;
        let gateway = name == "toolgate";
        let upstream = if gateway {
            match children(pid)[..] {
                [upstream] => upstream,
                ref other => bail!("{label}: children {other:?}, expected one echo_server"),
            }
        } else {
            pid
        };
        Ok(Self {
            label,
            client: Lean::Http(client),
            cpu: CpuWatch {
                gateway: gateway.then_some(pid),
                upstream,
            },
            child,
        })
    }
}

/// Where a lean HTTP client posts, and the headers every call carries.
#[derive(Clone)]
struct Target {
    authority: String,
    path: String,
    era: Era,
    tool: &'static str,
    /// `Mcp-Session-Id` of a session-era client.
    session: Option<String>,
    ids: Arc<AtomicUsize>,
}

/// A lean streamable HTTP client: `CALLERS` connections to one server.
struct HttpClient {
    target: Target,
    connections: Vec<SendRequest<Full<Bytes>>>,
}

impl HttpClient {
    /// Connects `CALLERS` times to `url`; a session-era client first opens its session.
    async fn connect(url: &str, era: Era, tool: &'static str) -> anyhow::Result<Self> {
        let rest = url
            .strip_prefix("http://")
            .with_context(|| format!("{url} is not an http:// URL"))?;
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let mut target = Target {
            authority: authority.to_owned(),
            path: if path.is_empty() { "/" } else { path }.to_owned(),
            era,
            tool,
            session: None,
            ids: Arc::new(AtomicUsize::new(1)),
        };
        let mut connections = Vec::with_capacity(CALLERS);
        for _ in 0..CALLERS {
            connections.push(target.connection().await?);
        }
        if let Era::Session = era {
            let (status, session, _) = target
                .post(
                    &mut connections[0],
                    format!(
                        r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"capabilities":{{}},"clientInfo":{{"name":"bench-lean","version":"1.0.0"}},"protocolVersion":"{SESSION_VERSION}"}}}}"#
                    ),
                    &[],
                )
                .await?;
            let session = session
                .filter(|_| status == StatusCode::OK)
                .with_context(|| {
                    format!("{url}: initialize answered {status} without a session")
                })?;
            target.session = Some(session);
            let (status, _, _) = target
                .post(
                    &mut connections[0],
                    r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_owned(),
                    &[("mcp-protocol-version", SESSION_VERSION)],
                )
                .await?;
            if status != StatusCode::ACCEPTED {
                bail!("{url}: notifications/initialized answered {status}");
            }
        }
        let mut client = Self {
            target,
            connections,
        };
        // Every connection once, checked, before anything is timed.
        for connection in &mut client.connections {
            client.target.call(connection).await?;
        }
        Ok(client)
    }
}

impl Target {
    async fn connection(&self) -> anyhow::Result<SendRequest<Full<Bytes>>> {
        let stream = tokio::net::TcpStream::connect(&self.authority)
            .await
            .with_context(|| format!("cannot connect to {}", self.authority))?;
        // As toolgate and echo_server set it on their side: no Nagle delay on small writes.
        stream.set_nodelay(true)?;
        let (sender, connection) = handshake(TokioIo::new(stream)).await?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(sender)
    }

    /// One `tools/call`, its answer checked.
    async fn call(&self, connection: &mut SendRequest<Full<Bytes>>) -> anyhow::Result<()> {
        let id = self.ids.fetch_add(1, Ordering::Relaxed);
        let tool = self.tool;
        let (body, headers): (String, &[(&str, &str)]) = match self.era {
            Era::Session => (
                format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"_meta":{{"progressToken":{id}}},"arguments":{{"text":"{TEXT}"}},"name":"{tool}"}}}}"#
                ),
                &[("mcp-protocol-version", SESSION_VERSION)],
            ),
            Era::Modern => (
                format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"_meta":{{"io.modelcontextprotocol/clientCapabilities":{{}},"io.modelcontextprotocol/clientInfo":{{"name":"bench-lean","version":"1.0.0"}},"io.modelcontextprotocol/protocolVersion":"2026-07-28","progressToken":{id}}},"arguments":{{"text":"{TEXT}"}},"name":"{tool}"}}}}"#
                ),
                &[
                    ("mcp-protocol-version", "2026-07-28"),
                    ("mcp-method", "tools/call"),
                    ("mcp-name", tool),
                ],
            ),
        };
        let (status, _, answer) = self.post(connection, body, headers).await?;
        check_answer(&answer).with_context(|| format!("{tool} over HTTP ({status})"))
    }

    /// POSTs `body`; returns the status, the `Mcp-Session-Id` header and the whole body.
    async fn post(
        &self,
        connection: &mut SendRequest<Full<Bytes>>,
        body: String,
        headers: &[(&str, &str)],
    ) -> anyhow::Result<(StatusCode, Option<String>, Bytes)> {
        let mut request = Request::post(self.path.as_str())
            .header("host", self.authority.as_str())
            .header("accept", "text/event-stream, application/json")
            .header("content-type", "application/json");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        if let Some(session) = &self.session {
            request = request.header("mcp-session-id", session.as_str());
        }
        connection.ready().await?;
        let response = connection
            .send_request(request.body(Full::new(Bytes::from(body)))?)
            .await?;
        let status = response.status();
        let session = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let body = response.into_body().collect().await?.to_bytes();
        Ok((status, session, body))
    }
}

/// A lean stdio client: requests written whole on one pipe, answers handed to their callers by
/// a reader task.
struct LineClient {
    stdin: tokio::sync::Mutex<ChildStdin>,
    waiting: std::sync::Mutex<HashMap<u64, oneshot::Sender<Vec<u8>>>>,
    ids: AtomicUsize,
}

impl LineClient {
    /// Says hello on the pipe, then leaves the reader running.
    async fn start(
        stdin: ChildStdin,
        stdout: tokio::process::ChildStdout,
    ) -> anyhow::Result<Arc<Self>> {
        let client = Arc::new(Self {
            stdin: tokio::sync::Mutex::new(stdin),
            waiting: Default::default(),
            ids: AtomicUsize::new(1),
        });
        let reader = client.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout);
            let mut line = Vec::new();
            while let Ok(n) =
                tokio::io::AsyncBufReadExt::read_until(&mut lines, b'\n', &mut line).await
            {
                if n == 0 {
                    break;
                }
                if let Some(id) = answer_id(&line) {
                    let waiter = reader.waiting.lock().ok().and_then(|mut w| w.remove(&id));
                    if let Some(waiter) = waiter {
                        let _ = waiter.send(std::mem::take(&mut line));
                    }
                }
                line.clear();
            }
        });
        let hello = client
            .request(0, format!(
                r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"capabilities":{{}},"clientInfo":{{"name":"bench-lean","version":"1.0.0"}},"protocolVersion":"{SESSION_VERSION}"}}}}"#
            ))
            .await?;
        if memmem::find(&hello, b"\"result\"").is_none() {
            bail!(
                "echo_server refused initialize: {}",
                String::from_utf8_lossy(&hello)
            );
        }
        client
            .write(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n".to_vec())
            .await?;
        client.call().await?;
        Ok(client)
    }

    async fn write(&self, mut line: Vec<u8>) -> anyhow::Result<()> {
        if line.last() != Some(&b'\n') {
            line.push(b'\n');
        }
        self.stdin.lock().await.write_all(&line).await?;
        Ok(())
    }

    /// Sends `line`, a request with `id`, and waits for its answer.
    async fn request(&self, id: u64, line: String) -> anyhow::Result<Vec<u8>> {
        let (tx, rx) = oneshot::channel();
        self.waiting
            .lock()
            .map_err(|_| anyhow::anyhow!("a caller panicked"))?
            .insert(id, tx);
        self.write(line.into_bytes()).await?;
        rx.await.context("echo_server ended before answering")
    }

    /// One `tools/call`, its answer checked.
    async fn call(&self) -> anyhow::Result<()> {
        let id = self.ids.fetch_add(1, Ordering::Relaxed) as u64;
        let answer = self
            .request(
                id,
                format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"_meta":{{"progressToken":{id}}},"arguments":{{"text":"{TEXT}"}},"name":"echo"}}}}"#
                ),
            )
            .await?;
        check_answer(&answer).context("echo over stdio")
    }
}

/// The numeric `id` of an answer line (`"id":N` as serde writes it, before any other key
/// that could hold the text).
fn answer_id(line: &[u8]) -> Option<u64> {
    let at = memmem::find(line, b"\"id\":")? + 5;
    let digits = line[at..].iter().take_while(|b| b.is_ascii_digit()).count();
    std::str::from_utf8(&line[at..at + digits])
        .ok()?
        .parse()
        .ok()
}

/// An answer (a JSON body, an SSE stream, or a line) that holds a result echoing the text.
fn check_answer(answer: &[u8]) -> anyhow::Result<()> {
    let echoed = memmem::find(answer, TEXT.as_bytes()).is_some();
    let result = memmem::find(answer, b"\"result\"").is_some();
    let failed = memmem::find(answer, b"\"isError\":true").is_some();
    if echoed && result && !failed {
        Ok(())
    } else {
        bail!("unexpected answer: {}", String::from_utf8_lossy(answer))
    }
}
