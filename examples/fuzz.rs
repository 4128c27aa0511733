//! `fuzz`: a stable-toolchain mutational fuzzer for what toolgate reads from outside: client messages, upstream answers and `servers.toml`.
//!
//! `cargo run --release --example fuzz -- [--iterations N] [--seed S] [--target NAME]`
//! (`--quick`: 20,000 inputs per target, for CI). Each target starts from a corpus of valid
//! inputs and feeds mutations of them (bit flips, byte insertions and deletions, truncation,
//! splices of two inputs, repeated chunks, deep nesting) to the code under test. A panic, or
//! two readings of one input that differ, is a finding: the input is written to
//! `target/fuzz-findings/<target>-<n>` and the run exits 1.
//! The machine has no nightly toolchain, so this stands in for `cargo fuzz`; it has no
//! coverage feedback, which is why the corpus starts from real, valid messages and configs.
//!
//! Targets:
//! - `client-message`: a client line as the stdio and HTTP fronts see it: the envelope peek,
//!   the `tools/call` params check, and rmcp's decoding into a `ClientJsonRpcMessage`.
//! - `call-walk`: the fast paths' byte walk over a `tools/call` (a stdio line, an HTTP body)
//!   against serde's reading: what the walk takes, serde must read to the same call.
//! - `modern-walk`: HTTP's modern fast path's byte walk over a 2026-07-28 `tools/call` body
//!   against serde's reading of it: what the walk takes, serde must read to the same call.
//! - `answer-walk`: the stdio fast path's byte walk over an upstream's answer line against
//!   serde's: the same id, result and error, and the same keys read off the result.
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

/// `tools/call` lines as clients write them (rmcp's key order, other orders, `_meta`, flat
/// and nested arguments), for the walk that reads them on the fast paths.
const CALL_CORPUS: &[&str] = &[
    r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo__echo","arguments":{"text":"hello world!"}}}"#,
    r#"{"jsonrpc":"2.0","id":"x-3","method":"tools/call","params":{"name":"echo__echo","arguments":{"text":"héllo ✓"},"_meta":{"progressToken":7}}}"#,
    r#"{"method":"tools/call","params":{"_meta":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","progressToken":"p"},"arguments":{"n":-12,"ok":true,"none":null},"name":"a"},"jsonrpc":"2.0","id":-9}"#,
    r#"{ "jsonrpc" : "2.0" , "id" : 42 , "method" : "tools/call" , "params" : { "name" : "b" , "arguments" : null } }"#,
    r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"c","arguments":{"list":[1,2.5,{"k":"v"}],"esc":"a\"b\u00e9"}}}"#,
    r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"d"}}"#,
    r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"e","arguments":{},"_meta":null}}"#,
];

/// 2026-07-28 `tools/call` bodies, as HTTP's modern fast path reads them.
const MODERN_CORPUS: &[&str] = &[
    r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"rmcp","version":"3.11.0"},"io.modelcontextprotocol/protocolVersion":"2026-07-28","progressToken":0},"arguments":{"text":"hello world!"},"name":"s0__echo"}}"#,
    r#"{"method":"tools/call","params":{"name":"a","arguments":{"x":[1,2.5,{"y":null}]},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}},"roots":{"listChanged":true}}}},"jsonrpc":"2.0","id":"req-1"}"#,
    r#"{ "jsonrpc" : "2.0" , "id" : -12 , "method" : "tools/call" , "params" : { "name" : "b" , "arguments" : null , "_meta" : { "io.modelcontextprotocol/clientCapabilities" : { } , "io.modelcontextprotocol/protocolVersion" : "2026-07-28" , "io.modelcontextprotocol/clientInfo" : null , "traceparent" : "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" } } }"#,
    r#"{"jsonrpc":"2.0","id":"","method":"tools/call","params":{"name":"c","_meta":{"io.modelcontextprotocol/clientInfo":{"name":"n","title":"T","version":"1"},"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/protocolVersion":"2026-07-28","progressToken":"p"}}}"#,
];

/// An upstream's lines for raw calls (`"tg-<n>"` ids): results in rmcp's order and others,
/// errors, progress, for the walk that reads them on the stdio fast path.
const ANSWER_CORPUS: &[&str] = &[
    r#"{"jsonrpc":"2.0","id":"tg-42","result":{"content":[{"type":"text","text":"hello world!"}],"isError":false}}"#,
    r#"{"jsonrpc":"2.0","id":"tg-1","result":{"resultType":"complete","content":[],"structuredContent":{"a":[1,true,null]},"isError":true}}"#,
    r#"{"error":{"code":-32602,"message":"x"},"jsonrpc":"2.0","id":"tg-7"}"#,
    "{ \"jsonrpc\" : \"2.0\" , \"result\" : [ 1 , 2.5e3 ] , \"id\" : \"tg-0\" }",
    r#"{"jsonrpc":"2.0","id":"tg-3","result":{"content":[{"type":"text","text":"\ud83d\ude00 é \/\b\n"}],"structuredContent":{"a":[-0.5e-3,10E+2,0,[],{}]},"_meta":{"content":1}}}"#,
    r#"{"jsonrpc":"2.0","id":"tg-2","result":{"isErr\u006fr":true,"content":[],"content":[]}}"#,
    r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"tg-9","progress":1,"total":2}}"#,
    r#"{"jsonrpc":"2.0","id":"tg-4","result":null,"error":{"code":1,"message":""}}"#,
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

/// A name, a corpus of valid inputs, and the code under test: a panic or an `Err` (two
/// readings that differ) is a finding.
type Target = (&'static str, Vec<Vec<u8>>, fn(&[u8]) -> Result<(), String>);

fn client_message(input: &[u8]) -> Result<(), String> {
    if let Some(envelope) = toolgate::downstream::http::envelope::Envelope::peek(input) {
        let _ = envelope.request();
        if let Some(params) = &envelope.params
            && let Ok(params) = serde_json::from_str::<serde_json::Value>(params.get())
        {
            let _ = toolgate::downstream::guard::call_params_problem(Some(&params));
        }
    }
    let _ = serde_json::from_slice::<rmcp::model::ClientJsonRpcMessage>(input);
    Ok(())
}

/// The fast paths' byte walk over a client's `tools/call` (stdio lines and HTTP bodies)
/// against serde's reading of the same message.
fn call_walk(input: &[u8]) -> Result<(), String> {
    toolgate::downstream::fast::walk_against_serde(input)
}

/// HTTP's modern fast path's byte walk over a 2026-07-28 `tools/call` body against serde's.
fn modern_walk(input: &[u8]) -> Result<(), String> {
    toolgate::downstream::http::modern::walk_against_serde(input)
}

/// The stdio fast path's byte walk over an upstream's answer line against serde's.
fn answer_walk(input: &[u8]) -> Result<(), String> {
    toolgate::upstream::raw::answer_walk_against_serde(input)
}

fn config(input: &[u8]) -> Result<(), String> {
    let text = String::from_utf8_lossy(input);
    let _ = toolgate::config::from_toml_str(&text, "fuzz.toml");
    Ok(())
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
            "call-walk",
            CALL_CORPUS.iter().map(|s| s.as_bytes().to_vec()).collect(),
            call_walk,
        ),
        (
            "modern-walk",
            MODERN_CORPUS
                .iter()
                .map(|s| s.as_bytes().to_vec())
                .collect(),
            modern_walk,
        ),
        (
            "answer-walk",
            ANSWER_CORPUS
                .iter()
                .map(|s| s.as_bytes().to_vec())
                .collect(),
            answer_walk,
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
            let found = match std::panic::catch_unwind(AssertUnwindSafe(|| run(&input))) {
                Ok(Ok(())) => continue,
                Ok(Err(differ)) => format!("readings differ ({differ})"),
                Err(_) => "panic".to_owned(),
            };
            findings += 1;
            let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/fuzz-findings");
            std::fs::create_dir_all(&dir)?;
            let path = dir.join(format!("{name}-{n}"));
            std::fs::write(&path, &input)?;
            eprintln!(
                "fuzz: {name}: {found} on input {n}, saved to {}",
                path.display()
            );
        }
        println!(
            "fuzz: {name}: {iterations} inputs in {:.1} s (seed {seed})",
            started.elapsed().as_secs_f64()
        );
    }
    if findings > 0 {
        bail!("{findings} inputs made the code under test panic or read differently");
    }
    println!("fuzz: ok");
    Ok(())
}
