//! The durable record of calls: `serve --audit-log FILE` writes one JSON line per resolved call
//! (arguments only with `[gateway] audit_arguments = true`), and `serve --metrics ADDR` serves
//! per-tool counts, error counts by code and a latency histogram as Prometheus text.

mod common;

use std::{
    future::Future,
    path::{Path, PathBuf},
    time::Duration,
};

use common::*;
use serde_json::{Value, json};

const LIMIT: Duration = Duration::from_secs(5);

async fn within<T>(future: impl Future<Output = T>) -> T {
    tokio::time::timeout(LIMIT, future)
        .await
        .unwrap_or_else(|_| panic!("did not finish within {LIMIT:?}"))
}

/// The echo server behind a command hook (`policy_hook`) that denies `echo__add` and logs
/// the requests it gets to `hook.jsonl`; `gateway` is prepended as is.
fn workdir(gateway: &str) -> Workdir {
    let work = Workdir::new("");
    let hook_log = work.path("hook.jsonl");
    let toml = format!(
        "{gateway}{}[[hooks]]\nstage = \"pre\"\ncommand = [\"env\", \"POLICY_DENY=echo__add\", {}, {}]\ntimeout_ms = 3000\n",
        server_toml("echo", "echo_server", &[]),
        toml_string(&format!("POLICY_LOG={}", hook_log.display())),
        toml_string(&example("policy_hook").display().to_string()),
    );
    std::fs::write(work.config(), toml).expect("write config");
    work
}

fn read_json_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).expect("every audit line is JSON"))
        .collect()
}

/// Waits until `path` holds at least `count` lines, then returns them all.
async fn wait_for_lines(path: &Path, count: usize) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + LIMIT;
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.lines().count() >= count && text.ends_with('\n') {
            return read_json_lines(path);
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} never had {count} lines; it has {text:?}",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Makes the same calls in each audit test: (tool, arguments, expected decision, outcome).
const CALLS: [(&str, &str, &str, &str); 5] = [
    (
        "echo__echo",
        r#"{"text": "secret-argument"}"#,
        "allow",
        "OK",
    ),
    (
        "echo__fail",
        r#"{"message": "upstream says no"}"#,
        "allow",
        "TOOL_ERROR",
    ),
    ("echo__add", r#"{"a": 1, "b": 2}"#, "deny", "DENIED"),
    ("echo__echo", r#"{"wrong": true}"#, "reject", "INVALID_ARGS"),
    ("echo__sleep", r#"{"ms": 150}"#, "allow", "OK"),
];

/// Runs [`CALLS`] plus an unknown tool (second) through `serve --audit-log`; returns the
/// audit lines and the work directory.
async fn audited_calls(gateway: &str) -> (Vec<Value>, Workdir, PathBuf) {
    let work = workdir(gateway);
    let audit = work.path("audit.jsonl");
    let (client, _) = within(stdio_client_with(
        &work,
        &["--audit-log", audit.to_str().unwrap()],
    ))
    .await;

    for (i, (tool, args, _, outcome)) in CALLS.iter().enumerate() {
        let args: Value = serde_json::from_str(args).unwrap();
        let result = within(call(&client, tool, args)).await.unwrap();
        match *outcome {
            "OK" => assert_ne!(result.is_error, Some(true), "{tool}: {result:?}"),
            "TOOL_ERROR" => {
                assert_eq!(result.is_error, Some(true), "{tool}: {result:?}");
                assert_eq!(code(&result), None, "the upstream's own error");
            }
            code_expected => {
                assert_eq!(code(&result).as_deref(), Some(code_expected), "{result:?}")
            }
        }
        if i == 0 {
            // Not in anyone's view: a protocol error, not a resolved call.
            let unknown = within(call(&client, "nope__missing", json!({}))).await;
            assert!(unknown.is_err(), "{unknown:?}");
        }
    }
    // Lines are written in call order, so once the last is there every other one is too.
    let lines = wait_for_lines(&audit, CALLS.len()).await;
    client.cancel().await.unwrap();
    (lines, work, audit)
}

#[tokio::test]
async fn the_audit_log_has_one_line_per_resolved_call_without_arguments() {
    let (lines, work, audit) = audited_calls("").await;
    assert_eq!(
        lines.len(),
        CALLS.len(),
        "one line per resolved call, none for the unknown tool: {lines:#?}"
    );
    let mut call_ids = Vec::new();
    for (line, (tool, _, decision, outcome)) in lines.iter().zip(CALLS) {
        assert_eq!(line["tool"], tool, "{line}");
        assert_eq!(line["profile"], "default", "{line}");
        assert_eq!(line["server"], "echo", "{line}");
        assert_eq!(
            line["upstream_tool"],
            tool.strip_prefix("echo__").unwrap(),
            "{line}"
        );
        assert_eq!(line["decision"], decision, "{line}");
        assert_eq!(line["outcome"], outcome, "{line}");
        assert!(line["duration_us"].is_u64(), "{line}");
        assert!(line["ts_ms"].is_u64(), "{line}");
        assert!(
            line.get("arguments").is_none(),
            "arguments only when asked for: {line}"
        );
        let call_id = line["call_id"].as_str().expect("call_id is a string");
        assert!(!call_id.is_empty());
        call_ids.push(call_id.to_owned());
    }
    let mut unique = call_ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(
        unique.len(),
        call_ids.len(),
        "call ids are unique: {call_ids:?}"
    );

    // The duration is measured: the sleep took at least its 150 ms.
    let slept = lines[4]["duration_us"].as_u64().unwrap();
    assert!(slept >= 150_000, "sleep lasted {slept}us");
    // The deny is the same call the hook saw.
    let hook = read_json_lines(&work.path("hook.jsonl"));
    let denied: Vec<&Value> = hook.iter().filter(|r| r["tool"] == "echo__add").collect();
    assert_eq!(denied.len(), 1, "{hook:#?}");
    assert_eq!(denied[0]["call_id"], lines[2]["call_id"]);

    let text = std::fs::read_to_string(&audit).unwrap();
    assert!(
        !text.contains("secret-argument"),
        "arguments stay out of the audit log by default: {text}"
    );
}

#[tokio::test]
async fn audit_arguments_puts_each_calls_arguments_in_its_line() {
    let (lines, _work, _) = audited_calls("[gateway]\naudit_arguments = true\n").await;
    assert_eq!(lines.len(), CALLS.len(), "{lines:#?}");
    for (line, (tool, args, decision, outcome)) in lines.iter().zip(CALLS) {
        let args: Value = serde_json::from_str(args).unwrap();
        assert_eq!(line["tool"], tool, "{line}");
        assert_eq!(line["decision"], decision, "{line}");
        assert_eq!(line["outcome"], outcome, "{line}");
        assert_eq!(line["arguments"], args, "{line}");
    }
}

/// `toolgate serve --http 127.0.0.1:0 --metrics 127.0.0.1:0`.
async fn start_with_metrics(work: &Workdir) -> HttpGateway {
    within(HttpGateway::start_with(work, &["--metrics", "127.0.0.1:0"])).await
}

/// `GET /metrics` on the metrics listener: status, content type, body.
async fn scrape(gateway: &HttpGateway) -> String {
    let url = gateway.metrics_url.as_deref().expect("serving metrics");
    let response = within(reqwest::get(url)).await.expect("GET /metrics");
    assert_eq!(response.status(), 200);
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    assert!(
        content_type.starts_with("text/plain"),
        "Prometheus text format: {content_type}"
    );
    within(response.text()).await.expect("metrics body")
}

/// The value of the sample named exactly `series` (name and labels), if present.
fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics.lines().find_map(|line| {
        let (name, value) = line.rsplit_once(' ')?;
        (name == series).then(|| value.parse().expect("a numeric sample"))
    })
}

/// The histogram buckets of `tool`, in order: (le, cumulative count).
fn buckets(metrics: &str, tool: &str) -> Vec<(String, f64)> {
    let prefix = format!("toolgate_call_duration_seconds_bucket{{tool=\"{tool}\",le=\"");
    metrics
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix(&prefix)?;
            let (le, value) = rest.split_once("\"} ")?;
            Some((le.to_owned(), value.parse().expect("numeric bucket")))
        })
        .collect()
}

#[tokio::test]
async fn metrics_count_calls_errors_and_latency_per_tool() {
    let work = workdir("");
    let gateway = start_with_metrics(&work).await;

    let before = scrape(&gateway).await;
    assert!(
        before.contains("# TYPE toolgate_calls_total counter"),
        "{before}"
    );
    assert!(
        !before.contains("tool=\"echo__echo\""),
        "no calls yet: {before}"
    );

    let (client, _) = within(gateway.client()).await;
    for args in [
        json!({"text": "one"}),
        json!({"text": "two"}),
        json!({"wrong": true}),
    ] {
        within(call(&client, "echo__echo", args)).await.unwrap();
    }
    let denied = within(call(&client, "echo__add", json!({"a": 1, "b": 2})))
        .await
        .unwrap();
    assert_eq!(code(&denied).as_deref(), Some("DENIED"));
    within(call(&client, "echo__sleep", json!({"ms": 300})))
        .await
        .unwrap();
    within(call(&client, "echo__fail", json!({})))
        .await
        .unwrap();

    let metrics = scrape(&gateway).await;
    let calls = |tool: &str| {
        sample(
            &metrics,
            &format!("toolgate_calls_total{{tool=\"{tool}\"}}"),
        )
    };
    let errors = |tool: &str, code: &str| {
        sample(
            &metrics,
            &format!("toolgate_call_errors_total{{tool=\"{tool}\",code=\"{code}\"}}"),
        )
    };
    assert_eq!(calls("echo__echo"), Some(3.0), "{metrics}");
    assert_eq!(calls("echo__add"), Some(1.0), "{metrics}");
    assert_eq!(calls("echo__sleep"), Some(1.0), "{metrics}");
    assert_eq!(calls("echo__fail"), Some(1.0), "{metrics}");
    assert_eq!(calls("echo__remove_tool"), None, "never called: {metrics}");
    assert_eq!(errors("echo__echo", "INVALID_ARGS"), Some(1.0), "{metrics}");
    assert_eq!(errors("echo__add", "DENIED"), Some(1.0), "{metrics}");
    assert_eq!(errors("echo__echo", "DENIED"), None, "{metrics}");
    assert_eq!(errors("echo__sleep", "TOOL_TIMEOUT"), None, "{metrics}");
    assert!(metrics.contains("# TYPE toolgate_call_errors_total counter"));

    // Histogram: one TYPE line, cumulative buckets ending in +Inf = count.
    assert!(
        metrics.contains("# TYPE toolgate_call_duration_seconds histogram"),
        "{metrics}"
    );
    let echo = buckets(&metrics, "echo__echo");
    assert!(echo.len() >= 2, "{metrics}");
    assert!(
        echo.windows(2).all(|w| w[0].1 <= w[1].1),
        "cumulative: {echo:?}"
    );
    assert_eq!(echo.last().unwrap(), &("+Inf".to_owned(), 3.0));
    let count = |tool: &str| {
        sample(
            &metrics,
            &format!("toolgate_call_duration_seconds_count{{tool=\"{tool}\"}}"),
        )
    };
    let sum = |tool: &str| {
        sample(
            &metrics,
            &format!("toolgate_call_duration_seconds_sum{{tool=\"{tool}\"}}"),
        )
    };
    assert_eq!(count("echo__echo"), Some(3.0), "{metrics}");
    assert!(sum("echo__echo").is_some_and(|s| s > 0.0), "{metrics}");

    // The 300 ms sleep lands above the 0.25 s bound and within the 1 s one.
    let sleep = buckets(&metrics, "echo__sleep");
    let le = |bound: &str| {
        sleep
            .iter()
            .find(|(le, _)| le == bound)
            .map(|(_, count)| *count)
    };
    assert_eq!(le("0.25"), Some(0.0), "{sleep:?}");
    assert_eq!(le("1"), Some(1.0), "{sleep:?}");
    assert!(sum("echo__sleep").is_some_and(|s| s >= 0.3), "{metrics}");

    // Later calls keep counting.
    within(call(&client, "echo__echo", json!({"text": "four"})))
        .await
        .unwrap();
    let after = scrape(&gateway).await;
    assert_eq!(
        sample(&after, "toolgate_calls_total{tool=\"echo__echo\"}"),
        Some(4.0),
        "{after}"
    );
    client.cancel().await.unwrap();
}

/// An upstream `isError` result is a failed call: the audit log says `TOOL_ERROR`, and the
/// error counter should agree with it.
#[tokio::test]
async fn metrics_count_upstream_tool_errors_like_the_audit_log() {
    let work = workdir("");
    let gateway = start_with_metrics(&work).await;
    let (client, _) = within(gateway.client()).await;
    let failed = within(call(&client, "echo__fail", json!({})))
        .await
        .unwrap();
    assert_eq!(failed.is_error, Some(true));
    let metrics = scrape(&gateway).await;
    assert_eq!(
        sample(&metrics, "toolgate_calls_total{tool=\"echo__fail\"}"),
        Some(1.0),
        "{metrics}"
    );
    assert_eq!(
        sample(
            &metrics,
            "toolgate_call_errors_total{tool=\"echo__fail\",code=\"TOOL_ERROR\"}"
        ),
        Some(1.0),
        "{metrics}"
    );
    client.cancel().await.unwrap();
}
