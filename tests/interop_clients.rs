//! The official Python and TypeScript MCP SDKs, over stdio and HTTP, use every relayed feature through toolgate in front of third-party servers.
//!
//! The clients are tests/interop/client.py (`mcp` from PyPI) and tests/interop/client.mjs
//! (`@modelcontextprotocol/sdk` from npm); the upstreams are server-everything,
//! server-filesystem, server-memory (npm) and mcp-server-time (PyPI), all in one
//! servers.toml. `.ci/interop-deps` installs them; without them these tests fail and say so.
//! Each client lists tools, calls one of each server, receives progress, reads a resource,
//! gets a prompt, answers a sampling request and an elicitation, and gets a log message; it
//! prints what it saw as JSON lines, and the checks here judge them.

mod common;

use std::path::PathBuf;

use common::{interop::*, *};
use serde_json::{Value, json};

/// Which client, and how it connects.
#[derive(Clone, Copy, PartialEq)]
enum Sdk {
    /// The Python SDK with `mode="legacy"`: the initialize handshake (2025-11-25).
    PythonLegacy,
    /// The Python SDK's default `mode="auto"`: `server/discover`, so 2026-07-28 with toolgate.
    PythonAuto,
    /// The TypeScript SDK (2025-11-25).
    TypeScript,
}

enum Via {
    Stdio,
    Http,
}

fn script(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/interop")
        .join(name)
        .display()
        .to_string()
}

/// Runs `sdk`'s client against toolgate (over `via`) fronting the four servers, and checks
/// what it saw.
async fn client_uses_everything(sdk: Sdk, via: Via) {
    let deps = Deps::installed();
    let work = deps.workdir();
    let nonce = nonce();
    let note = format!("a note for {nonce}\nsecond line\n");
    std::fs::write(work.path("note.txt"), &note).expect("write note.txt");
    let dir = work.dir.path().display().to_string();

    let gateway;
    let target = match via {
        Via::Stdio => vec![
            toolgate().display().to_string(),
            work.config().display().to_string(),
        ],
        Via::Http => {
            gateway = HttpGateway::start(&work).await;
            vec![gateway.url.clone()]
        }
    };
    let via = match via {
        Via::Stdio => "stdio",
        Via::Http => "http",
    };
    let (program, mut args) = match sdk {
        Sdk::PythonLegacy | Sdk::PythonAuto => {
            let mode = if sdk == Sdk::PythonAuto {
                "auto"
            } else {
                "legacy"
            };
            (
                deps.python.clone(),
                vec![script("client.py"), via.into(), mode.into()],
            )
        }
        Sdk::TypeScript => (
            deps.node.clone(),
            vec![
                script("client.mjs"),
                deps.node_modules.display().to_string(),
                via.into(),
            ],
        ),
    };
    args.extend([nonce.clone(), dir]);
    args.extend(target);
    let observed = deps.run_client(&program, &args).await;
    // The Python SDK logs this when toolgate's answer to its closing DELETE is not 200 or 204.
    assert!(
        !observed.stderr.contains("Session termination failed"),
        "{}",
        observed.stderr
    );

    let connect = observed.step("connect");
    let era = if sdk == Sdk::PythonAuto {
        "2026-07-28"
    } else {
        "2025-11-25"
    };
    assert_eq!(connect["protocol_version"], era, "{connect}");
    for feature in ["tools", "prompts", "resources", "logging", "completions"] {
        assert!(
            connect["capabilities"].get(feature).is_some(),
            "toolgate advertises {feature}: {connect}"
        );
    }

    let tools = strings(&observed.step("tools/list")["tools"]);
    for expected in [
        "everything__echo",
        "everything__trigger-long-running-operation",
        "everything__trigger-sampling-request",
        "everything__trigger-elicitation-request",
        "everything__toggle-simulated-logging",
        "filesystem__read_text_file",
        "memory__create_entities",
        "memory__read_graph",
        "time__get_current_time",
        "time__convert_time",
    ] {
        assert!(
            tools.iter().any(|t| t == expected),
            "{expected} in {tools:?}"
        );
    }
    for tool in &tools {
        assert!(
            SERVERS.iter().any(|s| tool.starts_with(&format!("{s}__"))),
            "every tool is named after its server: {tool}"
        );
    }

    assert_eq!(
        ok_texts(&observed, "call everything"),
        [format!("Echo: hello {nonce}")]
    );
    assert_eq!(ok_texts(&observed, "call filesystem"), [note]);
    let graph = json_text(&observed, "call memory");
    let entities = graph["entities"].as_array().expect("entities");
    assert!(
        entities
            .iter()
            .any(|e| e["name"] == format!("entity-{nonce}") && e["observations"] == json!(["seen"])),
        "the entity created through toolgate is in the graph: {graph}"
    );
    let time = json_text(&observed, "call time");
    assert_eq!(time["timezone"], "UTC", "{time}");
    let datetime = time["datetime"].as_str().expect("datetime");
    assert!(datetime.ends_with("+00:00"), "{time}");

    let progress = observed.step("progress");
    let steps = |key: &str| -> Vec<(f64, f64)> {
        progress[key]
            .as_array()
            .expect("progress list")
            .iter()
            .map(|p| (number(&p["progress"]), number(&p["total"])))
            .collect()
    };
    let all = [(1.0, 3.0), (2.0, 3.0), (3.0, 3.0)];
    if sdk == Sdk::TypeScript {
        // toolgate wrote every step before the result: the client read them all first.
        assert_eq!(steps("wire"), all, "{progress}");
        // The TypeScript SDK drops a last step read in the same chunk as the result
        // (typescript-sdk#2580, a client race no server can avoid): what it hands on is
        // the wire's steps, in order, possibly short of the last.
        let delivered = steps("progress");
        assert!(
            delivered.len() >= all.len() - 1 && all.starts_with(&delivered),
            "{progress}"
        );
    } else {
        assert_eq!(steps("progress"), all, "{progress}");
    }
    assert_eq!(
        ok_texts(&observed, "progress"),
        ["Long running operation completed. Duration: 0.6 seconds, Steps: 3."]
    );

    let resource = observed.step("resource");
    let uri = "everything+demo://resource/static/document/architecture.md";
    assert!(
        strings(&resource["uris"]).iter().any(|u| u == uri),
        "{resource}"
    );
    assert_eq!(resource["read"], uri);
    let on_disk = std::fs::read_to_string(
        deps.package("server-everything")
            .join("dist/docs/architecture.md"),
    )
    .expect("the document server-everything serves");
    let contents = resource["contents"].as_array().expect("contents");
    assert_eq!(contents.len(), 1, "{resource}");
    assert_eq!(contents[0]["uri"], uri, "the URI comes back as listed");
    assert_eq!(contents[0]["text"], on_disk.as_str());

    let prompt = observed.step("prompt");
    assert!(
        strings(&prompt["prompts"])
            .iter()
            .any(|p| p == "everything__args-prompt"),
        "{prompt}"
    );
    assert_eq!(
        prompt["messages"][0]["content"]["text"],
        format!("What's weather in City {nonce}?"),
        "{prompt}"
    );

    // A 2026-07-28 client (the Python SDK's default mode) gets the upstream's requests as
    // `InputRequiredResult` rounds and retries; the others are sent them mid-call. Both
    // must see the same requests and get the same answers through.
    let sampling = observed.step("sampling");
    let asked = sampling["asked"].as_array().expect("sampling requests");
    assert_eq!(
        asked.len(),
        1,
        "one sampling request reached the client: {sampling}"
    );
    assert_eq!(
        asked[0]["messages"][0]["content"]["text"],
        format!("Resource trigger-sampling-request context: ask {nonce}")
    );
    assert_eq!(asked[0]["maxTokens"], 100);
    let answered = ok_texts(&observed, "sampling").join("\n");
    assert!(
        answered.contains(&format!("\"text\": \"sampled answer {nonce}\""))
            && answered.contains("\"model\": \"interop-model\""),
        "the client's answer reached server-everything: {answered}"
    );

    let elicitation = observed.step("elicitation");
    let asked = elicitation["asked"].as_array().expect("elicitations");
    assert_eq!(
        asked.len(),
        1,
        "one elicitation reached the client: {elicitation}"
    );
    assert_eq!(
        asked[0]["message"],
        "Please provide inputs for the following fields:"
    );
    assert_eq!(asked[0]["requestedSchema"]["required"], json!(["name"]));
    let answered = ok_texts(&observed, "elicitation").join("\n");
    assert!(
        answered.contains(&format!("- Name: Ada {nonce}"))
            && answered.contains("- Agreed to terms: true"),
        "the client's answer reached server-everything: {answered}"
    );

    let logging = observed.step("logging");
    let logs = logging["logs"].as_array().expect("log messages");
    assert!(
        !logs.is_empty(),
        "a log message reached the client: {logging}"
    );
    let levels = [
        "debug",
        "info",
        "notice",
        "warning",
        "error",
        "critical",
        "alert",
        "emergency",
    ];
    for log in logs {
        assert_eq!(
            log["logger"], "everything",
            "the logger names the server: {log}"
        );
        let level = log["level"].as_str().expect("level");
        assert!(levels.contains(&level), "{log}");
        let data = log["data"].as_str().expect("data");
        assert!(data.to_lowercase().starts_with(level), "{log}");
    }
}

/// The JSON document in the only text of a call step.
fn json_text(observed: &Observed, step: &str) -> Value {
    let texts = ok_texts(observed, step);
    assert_eq!(texts.len(), 1, "step {step:?}: {texts:?}");
    serde_json::from_str(&texts[0]).unwrap_or_else(|e| panic!("step {step:?}: {e}: {texts:?}"))
}

fn number(value: &Value) -> f64 {
    value
        .as_f64()
        .unwrap_or_else(|| panic!("expected a number: {value}"))
}

#[tokio::test]
async fn python_sdk_over_stdio() {
    client_uses_everything(Sdk::PythonLegacy, Via::Stdio).await;
}

#[tokio::test]
async fn python_sdk_over_http() {
    client_uses_everything(Sdk::PythonLegacy, Via::Http).await;
}

#[tokio::test]
async fn python_sdk_default_mode_over_stdio() {
    client_uses_everything(Sdk::PythonAuto, Via::Stdio).await;
}

#[tokio::test]
async fn python_sdk_default_mode_over_http() {
    client_uses_everything(Sdk::PythonAuto, Via::Http).await;
}

#[tokio::test]
async fn typescript_sdk_over_stdio() {
    client_uses_everything(Sdk::TypeScript, Via::Stdio).await;
}

#[tokio::test]
async fn typescript_sdk_over_http() {
    client_uses_everything(Sdk::TypeScript, Via::Http).await;
}
