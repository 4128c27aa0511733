//! A raw line client: `toolgate serve` over stdio, driven with raw JSON lines and read as bytes.

use std::{path::Path, process::Stdio, time::Duration};

use serde_json::{Value, json};
use tokio::{
    io::{AsyncBufReadExt, AsyncWriteExt, BufReader},
    process::{Child, ChildStdin, ChildStdout},
    sync::oneshot,
};

use crate::common::{initialize_request, toolgate};
use crate::corpus::{Era, modern_meta};
use crate::{START_LIMIT, STEP_LIMIT};

/// `toolgate serve` over stdio, driven with raw lines; what it writes is kept as bytes.
pub(crate) struct LineClient {
    label: &'static str,
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    metrics: Option<oneshot::Receiver<String>>,
}

impl LineClient {
    /// Starts `toolgate --config CONFIG serve EXTRA...`; its stderr is echoed, tagged `label`.
    pub(crate) fn spawn(label: &'static str, config: &Path, extra: &[&str]) -> Self {
        let mut child = tokio::process::Command::new(toolgate())
            .arg("--config")
            .arg(config)
            .arg("serve")
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn toolgate serve");
        let stdin = child.stdin.take().expect("stdin piped");
        let stdout = BufReader::new(child.stdout.take().expect("stdout piped"));
        let stderr = child.stderr.take().expect("stderr piped");
        let (found, metrics) = oneshot::channel();
        // Drained to the end, so the gateway never blocks on a full pipe.
        tokio::spawn(async move {
            let mut found = Some(found);
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(url) = line.strip_prefix("toolgate: metrics on ")
                    && let Some(found) = found.take()
                {
                    let _ = found.send(url.to_owned());
                }
                eprintln!("[{label}] {line}");
            }
        });
        Self {
            label,
            child,
            stdin: Some(stdin),
            stdout,
            metrics: Some(metrics),
        }
    }

    /// The `/metrics` URL printed on stderr (`serve --metrics ADDR`).
    pub(crate) async fn metrics_url(&mut self) -> String {
        let found = self.metrics.take().expect("asked once");
        tokio::time::timeout(START_LIMIT, found)
            .await
            .unwrap_or_else(|_| panic!("{}: no metrics line within {START_LIMIT:?}", self.label))
            .unwrap_or_else(|_| panic!("{}: exited before serving metrics", self.label))
    }

    /// Writes `line` and a newline.
    pub(crate) async fn send(&mut self, line: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        let mut bytes = line.to_vec();
        bytes.push(b'\n');
        stdin.write_all(&bytes).await.expect("write to toolgate");
        stdin.flush().await.expect("flush to toolgate");
    }

    /// The next line toolgate writes, without its newline, within `limit`.
    async fn line(&mut self, limit: Duration, waiting_for: &str) -> Vec<u8> {
        let mut line = Vec::new();
        let read = tokio::time::timeout(limit, self.stdout.read_until(b'\n', &mut line))
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "{}: nothing more on stdout within {limit:?} while waiting for {waiting_for}",
                    self.label
                )
            })
            .expect("read toolgate's stdout");
        assert!(
            read > 0,
            "{}: stdout closed while waiting for {waiting_for}",
            self.label
        );
        assert_eq!(
            line.pop(),
            Some(b'\n'),
            "{}: a line ends with \\n",
            self.label
        );
        line
    }

    /// Reads lines until the answer to `id` (`None`: an answer without an id).
    pub(crate) async fn until_answer(&mut self, id: Option<&Value>, lines: &mut Vec<Vec<u8>>) {
        let waiting_for = match id {
            Some(id) => format!("the answer to id {id}"),
            None => "an answer without an id".to_owned(),
        };
        loop {
            let line = self.line(STEP_LIMIT, &waiting_for).await;
            let done = is_answer_to(&parse(self.label, &line), id);
            lines.push(line);
            if done {
                return;
            }
        }
    }

    /// Opens the session as `era` says, and tells whether results carry `resultType`.
    pub(crate) async fn handshake(&mut self, era: Era) -> bool {
        match era {
            Era::Initialize(version) => {
                let mut request = initialize_request(0);
                request["params"]["protocolVersion"] = json!(version);
                self.send(&to_line(&request)).await;
                let answer = parse(self.label, &self.line(START_LIMIT, "initialize").await);
                let negotiated = answer["result"]["protocolVersion"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{}: initialize failed: {answer}", self.label))
                    .to_owned();
                self.send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
                    .await;
                negotiated == "2026-07-28"
            }
            Era::Discover => {
                let request = json!({
                    "jsonrpc": "2.0",
                    "id": 0,
                    "method": "server/discover",
                    "params": {"_meta": modern_meta()}
                });
                self.send(&to_line(&request)).await;
                let answer = parse(self.label, &self.line(START_LIMIT, "server/discover").await);
                let versions = &answer["result"]["supportedVersions"];
                assert!(
                    versions
                        .as_array()
                        .is_some_and(|v| v.contains(&json!("2026-07-28"))),
                    "{}: server/discover failed: {answer}",
                    self.label
                );
                true
            }
        }
    }

    /// Closes stdin: the lines toolgate still writes before it exits (which it must, cleanly).
    pub(crate) async fn finish(mut self) -> Vec<Vec<u8>> {
        drop(self.stdin.take());
        let mut rest = Vec::new();
        let label = self.label;
        tokio::time::timeout(STEP_LIMIT, async {
            loop {
                let mut line = Vec::new();
                let read = self
                    .stdout
                    .read_until(b'\n', &mut line)
                    .await
                    .expect("read toolgate's stdout");
                if read == 0 {
                    return;
                }
                if line.last() == Some(&b'\n') {
                    line.pop();
                }
                rest.push(line);
            }
        })
        .await
        .unwrap_or_else(|_| panic!("{label}: stdout not closed within {STEP_LIMIT:?} of stdin"));
        let status = tokio::time::timeout(STEP_LIMIT, self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("{label}: no exit within {STEP_LIMIT:?} of stdin closing"))
            .expect("wait for toolgate");
        assert!(status.success(), "{label}: exited with {status}");
        rest
    }
}

pub(crate) fn parse(label: &str, line: &[u8]) -> Value {
    serde_json::from_slice(line)
        .unwrap_or_else(|e| panic!("{label}: not a JSON line ({e}): {}", shown(line)))
}

pub(crate) fn to_line(message: &Value) -> Vec<u8> {
    serde_json::to_vec(message).expect("serialize")
}

/// Whether `message` is a response (no `method`) to `id`; `None`: a response without an id
/// (JSON-RPC's `null` id counts as none).
pub(crate) fn is_answer_to(message: &Value, id: Option<&Value>) -> bool {
    if message.get("method").is_some() {
        return false;
    }
    match (message.get("id").filter(|v| !v.is_null()), id) {
        (Some(got), Some(id)) => got == id,
        (None, None) => true,
        _ => false,
    }
}

/// A line for a failure message: lossy UTF-8, long lines cut in the middle.
pub(crate) fn shown(line: &[u8]) -> String {
    let text = String::from_utf8_lossy(line);
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= 600 {
        return text.into_owned();
    }
    let head: String = chars[..300].iter().collect();
    let tail: String = chars[chars.len() - 200..].iter().collect();
    format!("{head} …[{} chars]… {tail}", chars.len() - 500)
}
