//! Code mode through the gateway: modes, programs over two servers, hooks and masks inside code, progress and cancel.

mod common;

use std::time::Duration;

use common::*;
use rmcp::model::{CallToolRequestParams, ServerResult};
use serde_json::{Value, json};

const LIMIT: Duration = Duration::from_secs(60);

/// echo (calls and cancels logged) and other, with `gateway` and `extra` TOML.
fn workdir(gateway: &str, extra: &str) -> Workdir {
    let work = Workdir::new("");
    let calls = work.path("calls.log").display().to_string();
    let cancels = work.path("cancel.log").display().to_string();
    std::fs::write(
        work.config(),
        format!(
            "[gateway]\n{gateway}\n[gateway.code]\ntimeout_ms = 20000\n\n{}{}{extra}",
            server_toml(
                "echo",
                "echo_server",
                &[("ECHO_CALL_LOG", &calls), ("ECHO_CANCEL_LOG", &cancels)]
            ),
            server_toml("other", "other_server", &[]),
        ),
    )
    .unwrap();
    work
}

async fn run(client: &Client, code: &str) -> rmcp::model::CallToolResult {
    tokio::time::timeout(LIMIT, call(client, "run_code", json!({ "code": code })))
        .await
        .expect("run_code answers in time")
        .expect("run_code is a tool result")
}

#[tokio::test]
async fn native_mode_has_no_run_code() {
    let work = workdir("", "");
    let (client, _) = stdio_client(&work).await;
    assert!(!tool_names(&client).await.contains(&"run_code".to_owned()));
    let error = call(&client, "run_code", json!({"code": "return 1"}))
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("unknown tool \"run_code\""),
        "{error}"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn code_mode_lists_only_run_code_and_refuses_direct_calls() {
    let work = workdir("mode = \"code\"", "");
    let (client, _) = stdio_client(&work).await;
    assert_eq!(tool_names(&client).await, ["run_code"]);
    let listed = client.list_all_tools().await.unwrap();
    let description = listed[0].description.as_deref().unwrap_or_default();
    assert!(description.contains("echo__add("), "{description}");
    assert!(description.contains("declare const tools"), "{description}");
    let error = call(&client, "echo__echo", json!({"text": "x"}))
        .await
        .unwrap_err();
    let text = error.to_string();
    assert!(
        text.contains(
            "only run_code is callable directly; call echo__echo from inside a run_code program"
        ),
        "{text}"
    );
    assert!(
        text.contains("-32602") || text.contains("Invalid params"),
        "{text}"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn the_sdk_shows_first_sentences_and_describe_gives_the_rest() {
    let full_sentence = "Always fail with a tool error (isError: true).";
    let rest = "The message says what failed.";
    let work = workdir("mode = \"code\"", "");
    let (client, _) = stdio_client(&work).await;
    let listed = client.list_all_tools().await.unwrap();
    let description = listed[0].description.as_deref().unwrap_or_default();
    assert!(
        description.contains(&format!("/** {full_sentence} */\necho__fail(")),
        "{description}"
    );
    assert!(!description.contains(rest), "{description}");
    assert!(
        description.contains("`await catalog.describe(name)` returns a tool's full declaration"),
        "{description}"
    );
    let described = run(&client, "return await catalog.describe('echo__fail')").await;
    assert_ne!(described.is_error, Some(true), "{described:?}");
    assert!(
        text(&described).contains(&format!("{full_sentence} {rest}")),
        "{}",
        text(&described)
    );
    client.cancel().await.unwrap();

    let work = workdir("mode = \"code\"\nsdk_docs = \"full\"", "");
    let (client, _) = stdio_client(&work).await;
    let listed = client.list_all_tools().await.unwrap();
    let description = listed[0].description.as_deref().unwrap_or_default();
    assert!(
        description.contains(&format!("  /** {full_sentence} {rest} */\n  echo__fail(")),
        "{description}"
    );
    assert!(!description.contains("catalog.describe"), "{description}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn both_mode_lists_every_tool_and_run_code() {
    let work = workdir("mode = \"both\"", "");
    let (client, _) = stdio_client(&work).await;
    let names = tool_names(&client).await;
    assert!(names.contains(&"echo__echo".to_owned()), "{names:?}");
    assert!(names.contains(&"other__reverse".to_owned()), "{names:?}");
    assert_eq!(
        names.last().map(String::as_str),
        Some("run_code"),
        "{names:?}"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_profile_mode_wins_and_is_inherited() {
    let work = workdir(
        "",
        "[profiles.coder]\nmode = \"code\"\n[profiles.junior]\nextends = \"coder\"\n[profiles.plain]\nextends = \"coder\"\nmode = \"native\"\n",
    );
    for (profile, expect_code) in [("coder", true), ("junior", true), ("plain", false)] {
        let (client, _) = stdio_client_with(&work, &["--profile", profile]).await;
        let names = tool_names(&client).await;
        assert_eq!(names == ["run_code"], expect_code, "{profile}: {names:?}");
        client.cancel().await.unwrap();
    }
}

#[tokio::test]
async fn a_program_combines_two_servers_and_returns_logs_then_value() {
    let work = workdir("mode = \"code\"", "");
    let (client, _) = stdio_client(&work).await;
    let result = run(
        &client,
        r#"
        interface Sum { sum: number }
        const { sum } = (await tools.echo__add({ a: 20, b: 22 })) as Sum;
        const reversed: string = await tools.other__reverse({ text: "edoc" });
        console.log("sum is", sum);
        return { sum, reversed };
        "#,
    )
    .await;
    assert_ne!(result.is_error, Some(true), "{result:?}");
    assert_eq!(
        text(&result),
        "sum is 42\n{\n  \"reversed\": \"code\",\n  \"sum\": 42\n}"
    );
    let empty = run(&client, "const x = 1;").await;
    assert_eq!(text(&empty), "(run_code completed with no output)");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn failures_name_their_kind() {
    let work = workdir("mode = \"code\"", "");
    let (client, _) = stdio_client(&work).await;
    let syntax = run(&client, "return (1 + ;").await;
    assert_eq!(syntax.is_error, Some(true));
    assert_eq!(code(&syntax).as_deref(), Some("CODE_RUN_FAILED"));
    assert_eq!(kind(&syntax).as_deref(), Some("syntax"));
    assert!(
        text(&syntax).starts_with("code run failed (syntax): "),
        "{}",
        text(&syntax)
    );

    let thrown = run(&client, "console.log('before'); throw new Error('boom');").await;
    assert_eq!(kind(&thrown).as_deref(), Some("exception"));
    assert!(text(&thrown).contains("boom"), "{}", text(&thrown));
    assert!(
        text(&thrown).contains("Captured output:\nbefore"),
        "{}",
        text(&thrown)
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn hooks_see_the_program_and_every_sub_call_and_a_deny_rejects_inside_code() {
    let log = "hooks.log";
    let work = workdir("mode = \"code\"", "");
    let hook_log = work.path(log).display().to_string();
    let toml = std::fs::read_to_string(work.config()).unwrap();
    std::fs::write(
        work.config(),
        format!(
            "{toml}[[hooks]]\nstage = \"pre\"\ncommand = [\"env\", \"POLICY_DENY=echo__add\", \"POLICY_LOG={hook_log}\", {}]\n",
            toml_string(&example("policy_hook").display().to_string())
        ),
    )
    .unwrap();
    let (client, _) = stdio_client(&work).await;
    let result = run(
        &client,
        r#"
        const echoed = await tools.echo__echo({ text: "fine" });
        try {
          await tools.echo__add({ a: 1, b: 2 });
          return "not denied";
        } catch (e) {
          return { echoed, isToolCallError: e instanceof ToolCallError, tool: e.toolName, code: e.code, message: e.message };
        }
        "#,
    )
    .await;
    assert_ne!(result.is_error, Some(true), "{result:?}");
    let value: Value = serde_json::from_str(&text(&result)).unwrap();
    assert_eq!(
        value,
        json!({
            "echoed": "fine",
            "isToolCallError": true,
            "tool": "echo__add",
            "code": "DENIED",
            "message": "echo__add is denied by policy_hook"
        })
    );
    let requests: Vec<Value> = std::fs::read_to_string(work.path(log))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(requests.len(), 3, "{requests:?}");
    assert_eq!(requests[0]["tool"], "run_code");
    assert!(
        requests[0]["arguments"]["code"]
            .as_str()
            .unwrap()
            .contains("tools.echo__add"),
        "the pre hook sees the program: {:?}",
        requests[0]
    );
    let parent = requests[0]["call_id"].as_str().unwrap();
    assert_eq!(requests[1]["tool"], "echo__echo");
    assert_eq!(requests[1]["call_id"], format!("{parent}:code:1"));
    assert_eq!(requests[2]["call_id"], format!("{parent}:code:2"));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn masks_apply_inside_code() {
    let work = workdir(
        "mode = \"code\"",
        "[profiles.safe]\ndeny = [\"echo__add\"]\n",
    );
    let (client, _) = stdio_client_with(&work, &["--profile", "safe"]).await;
    let listed = client.list_all_tools().await.unwrap();
    let description = listed[0].description.as_deref().unwrap_or_default();
    assert!(!description.contains("echo__add("), "{description}");
    assert!(description.contains("echo__add_tool("), "{description}");
    let result = run(&client, "return typeof tools.echo__add;").await;
    assert_eq!(text(&result), "undefined");
    let result = run(&client, "return await tools.echo__add({a: 1, b: 2});").await;
    assert_eq!(result.is_error, Some(true));
    assert!(
        !std::fs::read_to_string(work.path("calls.log"))
            .unwrap_or_default()
            .contains("\"add\"")
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn progress_names_each_finished_sub_call() {
    let work = workdir("mode = \"code\"", "");
    let (client, recorder) = stdio_client(&work).await;
    let handle = start_call(
        &client,
        "run_code",
        json!({"code": "await tools.echo__echo({text: 'a'}); await tools.other__reverse({text: 'b'}); return 'done';"}),
    )
    .await;
    let token = handle.progress_token.clone();
    let response = tokio::time::timeout(LIMIT, handle.await_response())
        .await
        .unwrap()
        .unwrap();
    let ServerResult::CallToolResult(result) = response else {
        panic!("{response:?}");
    };
    assert_eq!(text(&result), "done");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let progress = recorder.progress.lock().unwrap().clone();
    let messages: Vec<(f64, Option<String>)> = progress
        .iter()
        .filter(|p| p.progress_token == token)
        .map(|p| (p.progress, p.message.clone()))
        .collect();
    assert_eq!(
        messages,
        [
            (1.0, Some("echo__echo finished".to_owned())),
            (2.0, Some("other__reverse finished".to_owned()))
        ]
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_client_cancel_stops_the_run_and_its_sub_calls() {
    let work = workdir("mode = \"code\"", "");
    let (client, _) = stdio_client(&work).await;
    let peer = client.peer().clone();
    let pending = tokio::spawn(async move {
        let mut params = CallToolRequestParams::new("run_code");
        params.arguments = json!({"code": "await tools.echo__sleep({ms: 30000}); return 'slept';"})
            .as_object()
            .cloned();
        peer.call_tool(params).await
    });
    wait_for_file(&work.path("calls.log"), "\"sleep\"", LIMIT).await;
    pending.abort();
    assert!(pending.await.unwrap_err().is_cancelled());
    wait_for_file(
        &work.path("cancel.log"),
        "cancelled sleep",
        Duration::from_secs(10),
    )
    .await;
    let after = run(&client, "return 'after';").await;
    assert_eq!(text(&after), "after");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_sub_call_that_times_out_leaves_its_program_running() {
    // The timeout ends that call (upstream too) and the program goes on.
    let work = workdir(
        "mode = \"code\"",
        "[servers.echo.tools.sleep]\ntimeout_ms = 200\n",
    );
    let (client, _) = stdio_client(&work).await;
    let result = run(
        &client,
        r#"
        let code = "none";
        try { await tools.echo__sleep({ ms: 30000 }); } catch (e) { code = e.code; }
        const { sum } = (await tools.echo__add({ a: 1, b: 2 })) as { sum: number };
        return [code, sum];
        "#,
    )
    .await;
    assert_ne!(result.is_error, Some(true), "{result:?}");
    let value: Value = serde_json::from_str(&text(&result)).unwrap();
    assert_eq!(value, json!(["TOOL_TIMEOUT", 3]));
    wait_for_file(
        &work.path("cancel.log"),
        "cancelled sleep",
        Duration::from_secs(10),
    )
    .await;
    client.cancel().await.unwrap();
}
