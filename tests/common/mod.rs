//! Shared fixtures: real example servers, a real `toolgate` process, a real rmcp client.
#![allow(dead_code)] // each test file uses a different subset

pub mod code_pool;

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
        CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, Implementation,
        ProgressNotificationParam,
    },
    service::{NotificationContext, RunningService},
    transport::{StreamableHttpClientTransport, TokioChildProcess},
};
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    sync::Notify,
};

/// The `toolgate` binary under test.
pub fn toolgate() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_toolgate"))
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

/// A `toolgate serve --http 127.0.0.1:0` process; killed on drop.
pub struct HttpGateway {
    pub child: tokio::process::Child,
    pub url: String,
}

impl HttpGateway {
    pub async fn start(work: &Workdir) -> Self {
        let mut child = tokio::process::Command::new(toolgate())
            .arg("--config")
            .arg(work.config())
            .args(["serve", "--http", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn toolgate --http");
        let stderr = child.stderr.take().expect("stderr piped");
        let mut lines = BufReader::new(stderr).lines();
        let url = tokio::time::timeout(Duration::from_secs(60), async {
            while let Some(line) = lines.next_line().await.expect("read stderr") {
                eprintln!("[toolgate] {line}");
                if let Some(url) = line.strip_prefix("toolgate: listening on ") {
                    return url.to_owned();
                }
            }
            panic!("toolgate exited before listening");
        })
        .await
        .expect("toolgate listens within 60s");
        // Keep draining stderr so the gateway never blocks on a full pipe.
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                eprintln!("[toolgate] {line}");
            }
        });
        Self { child, url }
    }

    pub async fn client(&self) -> (Client, Recorder) {
        http_client(&self.url).await
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
