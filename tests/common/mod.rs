//! Shared fixtures: real example servers, a real `toolgate` process, a real rmcp client.
#![allow(dead_code)] // each test file uses a different subset

pub mod answers;
pub mod code_pool;
pub mod hook_server;
pub mod idp;
pub mod interop;
pub mod modern;
pub mod procs;
mod raw;

#[allow(unused_imports)] // each test file uses a different subset
pub use raw::*;

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    sync::{
        Arc, Mutex, Once,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use rmcp::{
    ClientHandler, RoleClient, ServiceExt,
    model::{
        CallToolRequest, CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig,
        ClientRequest, Implementation, ProgressNotificationParam,
    },
    service::{NotificationContext, PeerRequestOptions, RequestHandle, RunningService},
    transport::{StreamableHttpClientTransport, TokioChildProcess},
};
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    sync::Notify,
};

/// The `toolgate` binary under test; `TEST_TOOLGATE_BIN` runs the tests against another
/// build (for example the previous release, to see a new test fail there).
pub fn toolgate() -> PathBuf {
    std::env::var_os("TEST_TOOLGATE_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_toolgate")))
}

/// The path of a built example server (`echo_server`, `other_server`), building it if a
/// narrower `cargo test` did not.
pub fn example(name: &str) -> PathBuf {
    static BUILD: Once = Once::new();
    let path = toolgate()
        .parent()
        .expect("binary has a directory")
        .join("examples")
        .join(name);
    if !path.exists() {
        BUILD.call_once(|| {
            let status = std::process::Command::new(env!("CARGO"))
                .args(["build", "--examples", "--quiet"])
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .status()
                .expect("cargo runs");
            assert!(status.success(), "building the examples failed");
        });
    }
    path
}

/// Spawns an example server that serves HTTP (`command` with its arguments), waits (30 s at
/// most) for the stderr line `{marker}URL` it prints once it listens, and returns the child
/// (killed on drop) and that URL. The rest of its stderr goes to the test's output.
pub async fn listening_example(
    mut command: tokio::process::Command,
    marker: &str,
) -> (tokio::process::Child, String) {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn the example server");
    let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let url = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.expect("read stderr") {
            if let Some(url) = line.strip_prefix(marker) {
                return url.trim().to_owned();
            }
        }
        panic!("the example server exited before it printed {marker:?}");
    })
    .await
    .expect("the example server listens within 30 s");
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            eprintln!("{line}");
        }
    });
    (child, url)
}

/// A `[servers.NAME]` table running an example server with extra environment.
pub fn server_toml(name: &str, example_name: &str, env: &[(&str, &str)]) -> String {
    let env: Vec<String> = env
        .iter()
        .map(|(k, v)| format!("{k} = {}", toml_string(v)))
        .collect();
    format!(
        "[servers.{name}]\ncommand = {}\nenv = {{ {} }}\n",
        toml_string(&example(example_name).display().to_string()),
        env.join(", ")
    )
}

/// The two example servers, `echo` and `other`, under the default `prefix = "always"`.
pub fn two_servers() -> Workdir {
    Workdir::new(&format!(
        "{}{}",
        server_toml("echo", "echo_server", &[]),
        server_toml("other", "other_server", &[])
    ))
}

pub fn toml_string(s: &str) -> String {
    format!("{s:?}")
}

/// A temporary directory holding `servers.toml` with `toml`.
pub struct Workdir {
    pub dir: tempfile::TempDir,
}

impl Workdir {
    pub fn new(toml: &str) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("servers.toml"), toml).expect("write config");
        Self { dir }
    }

    pub fn config(&self) -> PathBuf {
        self.dir.path().join("servers.toml")
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

/// A client handler that records what the gateway sends it.
#[derive(Clone, Default)]
pub struct Recorder {
    pub progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
    pub progress_seen: Arc<Notify>,
    pub list_changed: Arc<AtomicUsize>,
    pub list_changed_seen: Arc<Notify>,
}

impl ClientHandler for Recorder {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("toolgate-tests", "0"),
        )
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().unwrap().push(params);
        self.progress_seen.notify_waiters();
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.list_changed.fetch_add(1, Ordering::SeqCst);
        self.list_changed_seen.notify_waiters();
    }
}

pub type Client = RunningService<RoleClient, Recorder>;

/// `toolgate serve` over stdio with the config in `work`, and a connected client.
pub async fn stdio_client(work: &Workdir) -> (Client, Recorder) {
    stdio_client_with(work, &[]).await
}

/// Like [`stdio_client`], with extra arguments after `serve`.
pub async fn stdio_client_with(work: &Workdir, extra: &[&str]) -> (Client, Recorder) {
    let mut command = tokio::process::Command::new(toolgate());
    command
        .arg("--config")
        .arg(work.config())
        .arg("serve")
        .args(extra)
        .env("RUST_LOG", "toolgate=debug");
    let (transport, _stderr) = TokioChildProcess::builder(command)
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn toolgate");
    let recorder = Recorder::default();
    let client = recorder
        .clone()
        .serve(transport)
        .await
        .expect("MCP handshake with toolgate over stdio");
    (client, recorder)
}

/// How a [`SocketGateway`]'s stdin and stdout are sockets.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Sockets {
    /// A socket pair for each, as Node's `child_process` gives its children (so the
    /// TypeScript SDK's stdio client, and the clients built on Node).
    Pairs,
    /// One socket for both, as an inetd-style launcher (or `socat`) gives it.
    One,
}

/// `toolgate serve` (over stdio) whose stdin and stdout are sockets; killed on drop.
pub struct SocketGateway {
    pub child: tokio::process::Child,
    pub client: Client,
}

impl SocketGateway {
    /// Starts `command` (`toolgate … serve`) with `sockets` for its stdin and stdout, and
    /// says hello as a [`Recorder`].
    pub async fn launch(command: tokio::process::Command, sockets: Sockets) -> Self {
        let (child, from_child, to_child) = spawn_on_sockets(command, sockets);
        let client = Recorder::default()
            .serve((from_child, to_child))
            .await
            .expect("MCP handshake with toolgate over sockets");
        Self { child, client }
    }

    pub fn pid(&self) -> u32 {
        self.child.id().expect("the gateway's pid")
    }
}

/// Starts `command` with `sockets` for its stdin and stdout (killed on drop): the child, and
/// this side's ends of its stdout and its stdin.
pub fn spawn_on_sockets(
    mut command: tokio::process::Command,
    sockets: Sockets,
) -> (
    tokio::process::Child,
    tokio::net::UnixStream,
    tokio::net::UnixStream,
) {
    use std::os::{fd::OwnedFd, unix::net::UnixStream};
    let (to_child, child_in) = UnixStream::pair().expect("a socket pair");
    let (from_child, child_out) = match sockets {
        Sockets::Pairs => UnixStream::pair().expect("a socket pair"),
        Sockets::One => (
            to_child.try_clone().expect("a duplicate socket"),
            child_in.try_clone().expect("a duplicate socket"),
        ),
    };
    command
        .stdin(OwnedFd::from(child_in))
        .stdout(OwnedFd::from(child_out))
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    let child = command.spawn().expect("spawn toolgate");
    // The child's ends leave this process, so that the gateway's exit ends what is read
    // here, and this side's end of its stdin is the only one.
    drop(command);
    for end in [&to_child, &from_child] {
        end.set_nonblocking(true).expect("a non-blocking socket");
    }
    let tokio = |end| tokio::net::UnixStream::from_std(end).expect("a tokio socket");
    (child, tokio(from_child), tokio(to_child))
}

/// A `toolgate serve --http 127.0.0.1:0` process; killed on drop.
pub struct HttpGateway {
    pub child: tokio::process::Child,
    pub url: String,
    /// `http://ADDR/metrics` when serving metrics.
    pub metrics_url: Option<String>,
    /// Everything it wrote to stderr so far.
    pub log: Arc<Mutex<String>>,
}

impl HttpGateway {
    pub async fn start(work: &Workdir) -> Self {
        Self::start_with(work, &[]).await
    }

    /// Like [`HttpGateway::start`], with extra arguments after `serve --http 127.0.0.1:0`.
    pub async fn start_with(work: &Workdir, extra: &[&str]) -> Self {
        let mut command = tokio::process::Command::new(toolgate());
        command
            .arg("--config")
            .arg(work.config())
            .args(["serve", "--http", "127.0.0.1:0"])
            .args(extra);
        Self::launch(command).await
    }

    /// Runs `command` (which must end up running `toolgate serve --http ...`) and waits
    /// until it listens.
    pub async fn launch(mut command: tokio::process::Command) -> Self {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn toolgate --http");
        let stderr = child.stderr.take().expect("stderr piped");
        let mut lines = BufReader::new(stderr).lines();
        let log = Arc::new(Mutex::new(String::new()));
        let keep = |line: &str| {
            eprintln!("[toolgate] {line}");
            let mut log = log.lock().unwrap();
            log.push_str(line);
            log.push('\n');
        };
        let mut metrics_url = None;
        let url = tokio::time::timeout(Duration::from_secs(60), async {
            while let Some(line) = lines.next_line().await.expect("read stderr") {
                keep(&line);
                if let Some(url) = line.strip_prefix("toolgate: metrics on ") {
                    metrics_url = Some(url.to_owned());
                }
                if let Some(url) = line.strip_prefix("toolgate: listening on ") {
                    return url.to_owned();
                }
            }
            panic!("toolgate exited before listening");
        })
        .await
        .expect("toolgate listens within 60s");
        // Keep draining stderr so the gateway never blocks on a full pipe.
        let drained = log.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                eprintln!("[toolgate] {line}");
                let mut log = drained.lock().unwrap();
                log.push_str(&line);
                log.push('\n');
            }
        });
        Self {
            child,
            url,
            metrics_url,
            log,
        }
    }

    pub async fn client(&self) -> (Client, Recorder) {
        http_client(&self.url).await
    }

    /// `host:port` of the MCP listener.
    pub fn authority(&self) -> String {
        self.url
            .strip_prefix("http://")
            .and_then(|rest| rest.strip_suffix("/mcp"))
            .expect("the MCP URL is http://HOST:PORT/mcp")
            .to_owned()
    }

    /// The stderr lines so far that contain `needle`.
    pub fn log_lines(&self, needle: &str) -> Vec<String> {
        self.log
            .lock()
            .unwrap()
            .lines()
            .filter(|line| line.contains(needle))
            .map(str::to_owned)
            .collect()
    }
}

/// A client connected to the MCP endpoint at `url`.
pub async fn http_client(url: &str) -> (Client, Recorder) {
    try_http_client(url, None)
        .await
        .expect("MCP handshake with toolgate over HTTP")
}

/// A client connected to `url`, sending `Authorization: Bearer <token>` when given.
pub async fn try_http_client(
    url: &str,
    token: Option<&str>,
) -> Result<(Client, Recorder), rmcp::service::ClientInitializeError> {
    let recorder = Recorder::default();
    let mut config =
        rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(url);
    config.auth_header = token.map(str::to_owned);
    let transport = StreamableHttpClientTransport::from_config(config);
    let client = recorder.clone().serve(transport).await?;
    Ok((client, recorder))
}

/// Calls `name` with `args` (a JSON object literal).
pub async fn call(
    client: &Client,
    name: &str,
    args: serde_json::Value,
) -> Result<CallToolResult, rmcp::service::ServiceError> {
    let mut params = CallToolRequestParams::new(name.to_owned());
    params.arguments = args.as_object().cloned();
    client.call_tool(params).await
}

/// The first line of `text` (an audit log's, say), parsed as JSON.
pub fn first_json_line(text: &str) -> serde_json::Value {
    let line = text
        .lines()
        .next()
        .unwrap_or_else(|| panic!("no line in {text:?}"));
    serde_json::from_str(line).unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"))
}

/// Sends `tools/call` without waiting: the handle has the call's progress token, can cancel
/// it, and waits for its answer.
pub async fn start_call(
    client: &Client,
    name: &str,
    args: serde_json::Value,
) -> RequestHandle<RoleClient> {
    let mut params = CallToolRequestParams::new(name.to_owned());
    params.arguments = args.as_object().cloned();
    client
        .peer()
        .send_request_with_option(
            ClientRequest::CallToolRequest(CallToolRequest::new(params)),
            PeerRequestOptions::no_options(),
        )
        .await
        .expect("send tools/call")
}

/// The stable code of a failed result: `_meta["toolgate/error"].code`.
pub fn code(result: &CallToolResult) -> Option<String> {
    error_field(result, "code")
}

/// The failure kind of a failed `run_code`: `_meta["toolgate/error"].kind`.
pub fn kind(result: &CallToolResult) -> Option<String> {
    error_field(result, "kind")
}

fn error_field(result: &CallToolResult, field: &str) -> Option<String> {
    result
        .meta
        .as_ref()?
        .get("toolgate/error")?
        .get(field)?
        .as_str()
        .map(str::to_owned)
}

/// The text of a result's first content block.
pub fn text(result: &CallToolResult) -> String {
    result
        .content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.clone())
        .unwrap_or_default()
}

/// Names from `tools/list`.
pub async fn tool_names(client: &Client) -> Vec<String> {
    client
        .list_all_tools()
        .await
        .expect("tools/list")
        .into_iter()
        .map(|t| t.name.to_string())
        .collect()
}

/// Waits until `path` contains `needle`, or panics after `timeout`.
pub async fn wait_for_file(path: &Path, needle: &str, timeout: Duration) -> String {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.contains(needle) {
            return text;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} never contained {needle:?}; it has {text:?}",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Runs `toolgate ARGS...` to completion: (exit code, stdout, stderr).
pub fn run_toolgate(args: &[&str]) -> (Option<i32>, String, String) {
    let output = std::process::Command::new(toolgate())
        .args(args)
        .output()
        .expect("run toolgate");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

// ---- Pinning and clean descriptions (tests/pinning.rs, tests/clean_descriptions.rs) ----

/// Waits until `recorder` has seen at least `count` `tools/list_changed` notifications, or
/// panics after `timeout`.
pub async fn wait_tools_changed(recorder: &Recorder, count: usize, timeout: Duration) {
    let waited = tokio::time::timeout(timeout, async {
        loop {
            // Interest is registered before the check, so a notification in between counts.
            let seen = recorder.list_changed_seen.notified();
            tokio::pin!(seen);
            seen.as_mut().enable();
            if recorder.list_changed.load(Ordering::SeqCst) >= count {
                return;
            }
            seen.await;
        }
    })
    .await;
    assert!(
        waited.is_ok(),
        "expected {count} tools/list_changed within {timeout:?}, got {}",
        recorder.list_changed.load(Ordering::SeqCst)
    );
}

impl HttpGateway {
    /// The first stderr line containing every one of `needles`, waiting up to `timeout`.
    pub async fn wait_log_line(&self, needles: &[&str], timeout: Duration) -> String {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let found = self
                .log
                .lock()
                .unwrap()
                .lines()
                .find(|line| needles.iter().all(|needle| line.contains(needle)))
                .map(str::to_owned);
            if let Some(line) = found {
                return line;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no log line with {needles:?} within {timeout:?}; the log:\n{}",
                self.log.lock().unwrap()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// A `[servers.NAME]` table running `echo_server` behind `sh`, which first appends its pid
/// (the server's, as sh `exec`s into it) to `pid_file`: one line per start, restarts included.
pub fn echo_writing_pids(name: &str, pid_file: &Path) -> String {
    // `$$$$`: toolgate expands `$$` to `$` (see `${VAR}` expansion), so sh sees `$$`.
    let script = format!(
        "echo $$$$ >> '{}'; exec '{}'",
        pid_file.display(),
        example("echo_server").display()
    );
    format!(
        "[servers.{name}]\ncommand = \"sh\"\nargs = [\"-c\", {}]\n",
        toml_string(&script)
    )
}

/// The pids written by [`echo_writing_pids`], oldest first.
pub fn written_pids(pid_file: &Path) -> Vec<u32> {
    std::fs::read_to_string(pid_file)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.trim().parse().ok())
        .collect()
}
