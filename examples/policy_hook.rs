//! `policy-hook`: an example command hook for toolgate's `[[hooks]]`, speaking JSON lines.
//!
//! Configure it as `command = ["path/to/policy_hook"]` (or `["cargo", "run", "-q", "--example",
//! "policy_hook"]`). It reads one request per line on stdin and answers one line on stdout
//! that repeats the request's `call_id`. Its policy comes from the environment, each a
//! comma-separated list of `*` globs over exposed tool names:
//! `POLICY_DENY` (pre: deny), `POLICY_ASK` (pre: ask), `POLICY_BLOCK` (post: block),
//! `POLICY_REDACT` (post: accept with the content replaced by `POLICY_REDACT_TEXT`, default
//! `[redacted]`, and with `structuredContent` set to `POLICY_STRUCTURED` when that holds
//! JSON). Everything else is allowed / accepted. `POLICY_LOG=<path>` appends every request
//! it receives. `POLICY_BATCH=<n>` answers out of order: it gathers up to n requests (or
//! what came within 200 ms) and answers them last first, appending the `call_id`s in answer
//! order to `POLICY_ANSWER_LOG=<path>` when set. `POLICY_DELAY_MS=<n>` waits n milliseconds
//! before deciding each request (a slow policy service).
//! For tests, `POLICY_MISBEHAVE` makes it fail on purpose: `garbage` (a line that is not JSON),
//! `bad-decision` (JSON with an unknown decision), `hang` (never answers), `crash` (exits on
//! the first request) or `crash-once:<marker file>` (exits unless the marker exists, then
//! creates it).

use std::io::{BufRead, Write};

use serde_json::{Value, json};

fn globs(var: &str) -> Vec<String> {
    std::env::var(var)
        .map(|v| {
            v.split(',')
                .filter(|g| !g.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// `*` matches any run of characters; everything else matches itself.
fn glob_match(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((head, rest)) => name.strip_prefix(head).is_some_and(|tail| {
            (0..=tail.len()).any(|k| tail.is_char_boundary(k) && glob_match(rest, &tail[k..]))
        }),
    }
}

fn matches(globs: &[String], tool: &str) -> bool {
    globs.iter().any(|g| glob_match(g, tool))
}

fn decide(request: &Value) -> Value {
    let tool = request["tool"].as_str().unwrap_or_default();
    let stage = request["stage"].as_str().unwrap_or_default();
    match stage {
        "pre" if matches(&globs("POLICY_DENY"), tool) => {
            json!({"decision": "deny", "reason": format!("{tool} is denied by policy_hook")})
        }
        "pre" if matches(&globs("POLICY_ASK"), tool) => {
            json!({"decision": "ask", "reason": format!("{tool} needs a human")})
        }
        "pre" => json!({"decision": "allow"}),
        "post" if matches(&globs("POLICY_BLOCK"), tool) => {
            json!({"decision": "block", "feedback": format!("the result of {tool} was blocked by policy_hook")})
        }
        "post" if matches(&globs("POLICY_REDACT"), tool) => {
            let text =
                std::env::var("POLICY_REDACT_TEXT").unwrap_or_else(|_| "[redacted]".to_owned());
            let mut answer =
                json!({"decision": "accept", "content": [{"type": "text", "text": text}]});
            if let Some(structured) = std::env::var("POLICY_STRUCTURED")
                .ok()
                .and_then(|s| serde_json::from_str::<Value>(&s).ok())
            {
                answer["structuredContent"] = structured;
            }
            answer
        }
        _ => json!({"decision": "accept"}),
    }
}

/// Requests come from a reader thread, so that batches can end on a lull.
fn requests() -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

fn main() {
    let misbehave = std::env::var("POLICY_MISBEHAVE").unwrap_or_default();
    let log = std::env::var_os("POLICY_LOG");
    let answer_log = std::env::var_os("POLICY_ANSWER_LOG");
    let batch: usize = std::env::var("POLICY_BATCH")
        .ok()
        .and_then(|b| b.parse().ok())
        .unwrap_or(1)
        .max(1);
    let delay = std::env::var("POLICY_DELAY_MS")
        .ok()
        .and_then(|ms| ms.parse().ok())
        .map(std::time::Duration::from_millis);
    let incoming = requests();
    let mut stdout = std::io::stdout();
    let mut pending: Vec<Value> = Vec::new();
    loop {
        let line = if pending.is_empty() {
            match incoming.recv() {
                Ok(line) => Some(line),
                Err(_) => break,
            }
        } else {
            incoming
                .recv_timeout(std::time::Duration::from_millis(200))
                .ok()
        };
        let Some(line) = line else {
            flush(&mut pending, &mut stdout, answer_log.as_deref());
            continue;
        };
        if let Some(path) = &log
            && let Ok(mut file) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
        {
            let _ = writeln!(file, "{line}");
        }
        let Ok(request) = serde_json::from_str::<Value>(&line) else {
            eprintln!("policy_hook: ignoring a line that is not JSON");
            continue;
        };
        if let Some(delay) = delay {
            std::thread::sleep(delay);
        }
        let mut answer = match misbehave.as_str() {
            "garbage" => {
                let _ = writeln!(stdout, "this is not json");
                let _ = stdout.flush();
                continue;
            }
            "hang" => continue,
            "crash" => std::process::exit(3),
            "bad-decision" => json!({"decision": "maybe"}),
            other => {
                if let Some(marker) = other.strip_prefix("crash-once:")
                    && std::fs::metadata(marker).is_err()
                {
                    let _ = std::fs::write(marker, "crashed");
                    std::process::exit(3);
                }
                decide(&request)
            }
        };
        answer["call_id"] = request["call_id"].clone();
        pending.push(answer);
        if pending.len() >= batch {
            flush(&mut pending, &mut stdout, answer_log.as_deref());
        }
    }
    flush(&mut pending, &mut stdout, answer_log.as_deref());
}

/// Answers the gathered requests, last first.
fn flush(
    pending: &mut Vec<Value>,
    stdout: &mut std::io::Stdout,
    answer_log: Option<&std::ffi::OsStr>,
) {
    while let Some(answer) = pending.pop() {
        if let Some(path) = answer_log
            && let Ok(mut file) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
        {
            let _ = writeln!(file, "{}", answer["call_id"]);
        }
        let _ = writeln!(stdout, "{answer}");
    }
    let _ = stdout.flush();
}
