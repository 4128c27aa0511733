//! Logs on stderr: no colour codes unless stderr is a terminal, and `--log-format json` for collectors.

mod common;

use common::*;

fn check_stderr(extra: &[&str]) -> String {
    let work = two_servers();
    let output = std::process::Command::new(toolgate())
        .arg("--config")
        .arg(work.config())
        .args(extra)
        .arg("check")
        .env("RUST_LOG", "toolgate=info")
        .output()
        .expect("run toolgate check");
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stderr).expect("stderr is UTF-8")
}

#[test]
fn logs_to_a_pipe_carry_no_colour_codes() {
    let stderr = check_stderr(&[]);
    assert!(stderr.contains("server ready"), "{stderr}");
    assert!(
        !stderr.contains('\u{1b}'),
        "ANSI escape in piped logs: {stderr:?}"
    );
}

#[test]
fn json_logs_are_one_object_per_line() {
    let stderr = check_stderr(&["--log-format", "json"]);
    let mut ready = 0;
    for line in stderr.lines() {
        let event: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"));
        assert!(event["level"].is_string(), "{line}");
        if event["fields"]["message"] == "server ready" {
            ready += 1;
        }
    }
    assert_eq!(ready, 2, "{stderr}");
}
