//! `fuzz`: a stable-toolchain mutational fuzzer for what toolgate reads from outside: client messages and `servers.toml`.
//!
//! `cargo run --release --example fuzz -- [--iterations N] [--seed S] [--target NAME]`
//! (`--quick`: 20,000 inputs per target, for CI). Each target starts from a corpus of valid
//! inputs and feeds mutations of them (bit flips, byte insertions and deletions, truncation,
//! splices of two inputs, repeated chunks, deep nesting) to the code under test. A panic is a
//! finding: the input is written to `target/fuzz-findings/<target>-<n>` and the run exits 1.
//! The machine has no nightly toolchain, so this stands in for `cargo fuzz`; it has no
//! coverage feedback, which is why the corpus starts from real, valid messages and configs.
//!
//! Targets:
//! - `client-message`: a client line as the stdio and HTTP fronts see it: the envelope peek,
//!   the `tools/call` params check, and rmcp's decoding into a `ClientJsonRpcMessage`.
//! - `config`: `servers.toml` text through figment and validation (`config::from_toml_str`).

use std::{panic::AssertUnwindSafe, path::PathBuf};

use anyhow::bail;

const CLIENT_CORPUS: &[&str] = &[
    r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{"listChanged":true},"sampling":{}},"clientInfo":{"name":"c","version":"1"}}}"#,
    r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    r#"{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"cursor":"abc"}}"#,
    r#"{"jsonrpc":"2.0","id":"x-3","method":"tools/call","params":{"name":"echo__echo","arguments":{"text":"héllo ✓"},"_meta":{"progressToken":7}}}"#,
    r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"run_code","arguments":{"code":"return await tools.echo__echo({text: 'a'})"}}}"#,
    r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":4,"reason":"user"}}"#,
    r#"{"jsonrpc":"2.0","id":5,"method":"resources/read","params":{"uri":"notes+note://1"}}"#,
    r#"{"jsonrpc":"2.0","id":6,"method":"prompts/get","params":{"name":"notes__summary","arguments":{"style":"short"}}}"#,
    r#"{"jsonrpc":"2.0","id":7,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"p"},"argument":{"name":"a","value":"x"}}}"#,
    r#"{"jsonrpc":"2.0","id":8,"method":"logging/setLevel","params":{"level":"debug"}}"#,
    r#"{"jsonrpc":"2.0","id":9,"result":{"roots":[{"uri":"file:///tmp","name":"tmp"}]}}"#,
    r#"{"jsonrpc":"2.0","id":10,"error":{"code":-32601,"message":"no"}}"#,
    r#"[{"jsonrpc":"2.0","id":11,"method":"ping"}]"#,
    r#"{"jsonrpc":"2.0","id":12,"method":"ping"}"#,
];

fn config_corpus() -> Vec<String> {
    let mut corpus = vec![
        r#"
[gateway]
prefix = "on-conflict"
call_timeout_ms = 1000
mode = "both"
[gateway.http]
allowed_origins = ["https://app.example"]
max_sessions = 10
[gateway.supervise]
ping_interval_ms = 0
[servers.echo]
command = "echo-server"
args = ["-x", "${HOME}"]
env = { LOG = "1" }
[servers.remote]
url = "https://example.com/mcp"
headers = { Authorization = "Bearer t" }
[profiles.reader]
allow = ["echo__*"]
tokens = ["abc"]
[profiles.child]
extends = "reader"
deny = ["echo__fail"]
[[hooks]]
stage = "pre"
command = "policy"
tools = ["echo__*"]
"#
        .to_owned(),
    ];
    for path in ["servers.toml", "tests/fixtures/conformance/stdio.toml"] {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(path);
        if let Ok(text) = std::fs::read_to_string(path) {
            corpus.push(text);
        }
    }
    corpus
}

/// One random change (or a few) to `input`, sometimes spliced with `other`.
fn mutate(input: &[u8], other: &[u8]) -> Vec<u8> {
    let mut out = input.to_vec();
    for _ in 0..fastrand::usize(1..=4) {
        let at = fastrand::usize(..=out.len());
        match fastrand::u8(..8) {
            0 if !out.is_empty() => {
                let i = fastrand::usize(..out.len());
                out[i] ^= 1 << fastrand::u8(..8);
            }
            1 => {
                let byte = *fastrand::choice(b"{}[]\":,\\0-9eE+.ntfu\xff\x00\n ").unwrap_or(&b'x');
                out.insert(at, byte);
            }
            2 if !out.is_empty() => {
                let end = (at + fastrand::usize(1..16)).min(out.len());
                out.drain(at.min(end)..end);
            }
            3 => out.truncate(at),
            4 => {
                let from = fastrand::usize(..=other.len());
                out.splice(at..at, other[from..].iter().copied());
            }
            5 if !out.is_empty() => {
                let start = fastrand::usize(..out.len());
                let end = (start + fastrand::usize(1..32)).min(out.len());
                let chunk = out[start..end].to_vec();
                for _ in 0..fastrand::usize(1..64) {
                    out.splice(at..at, chunk.iter().copied());
                }
            }
            6 => {
                let depth = fastrand::usize(1..20_000);
                let open = if fastrand::bool() { b'[' } else { b'{' };
                out.splice(at..at, std::iter::repeat_n(open, depth));
            }
            _ => {
                let junk: Vec<u8> = (0..fastrand::usize(1..8))
                    .map(|_| fastrand::u8(..))
                    .collect();
                out.splice(at..at, junk);
            }
        }
    }
    out
}

/// A name, a corpus of valid inputs, and the code under test.
type Target = (&'static str, Vec<Vec<u8>>, fn(&[u8]));

fn client_message(input: &[u8]) {
    if let Some(envelope) = toolgate::downstream::http::envelope::Envelope::peek(input) {
        let _ = envelope.request();
        if let Some(params) = &envelope.params
            && let Ok(params) = serde_json::from_str::<serde_json::Value>(params.get())
        {
            let _ = toolgate::downstream::guard::call_params_problem(Some(&params));
        }
    }
    let _ = serde_json::from_slice::<rmcp::model::ClientJsonRpcMessage>(input);
}

fn config(input: &[u8]) {
    let text = String::from_utf8_lossy(input);
    let _ = toolgate::config::from_toml_str(&text, "fuzz.toml");
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let value = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let quick = args.iter().any(|a| a == "--quick");
    let iterations: usize = value("--iterations")
        .and_then(|v| v.parse().ok())
        .unwrap_or(if quick { 20_000 } else { 500_000 });
    let seed: u64 = value("--seed")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    let only = value("--target");
    fastrand::seed(seed);
    // Findings are reported once, by us, with the input saved.
    std::panic::set_hook(Box::new(|_| {}));

    let configs = config_corpus();
    let targets: Vec<Target> = vec![
        (
            "client-message",
            CLIENT_CORPUS
                .iter()
                .map(|s| s.as_bytes().to_vec())
                .collect(),
            client_message,
        ),
        (
            "config",
            configs.iter().map(|s| s.as_bytes().to_vec()).collect(),
            config,
        ),
    ];
    let mut findings = 0;
    for (name, corpus, run) in targets {
        if only.as_deref().is_some_and(|o| o != name) {
            continue;
        }
        let started = std::time::Instant::now();
        for n in 0..iterations {
            let base = &corpus[fastrand::usize(..corpus.len())];
            let other = &corpus[fastrand::usize(..corpus.len())];
            let input = mutate(base, other);
            if std::panic::catch_unwind(AssertUnwindSafe(|| run(&input))).is_err() {
                findings += 1;
                let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/fuzz-findings");
                std::fs::create_dir_all(&dir)?;
                let path = dir.join(format!("{name}-{n}"));
                std::fs::write(&path, &input)?;
                eprintln!(
                    "fuzz: {name}: panic on input {n}, saved to {}",
                    path.display()
                );
            }
        }
        println!(
            "fuzz: {name}: {iterations} inputs in {:.1} s (seed {seed})",
            started.elapsed().as_secs_f64()
        );
    }
    if findings > 0 {
        bail!("{findings} inputs made the code under test panic");
    }
    println!("fuzz: ok");
    Ok(())
}
