//! Profile-owned servers (shadowing, started once) and list_changed reaching only the views it changes.

mod common;

use std::time::Duration;

use common::*;
use serde_json::json;

/// Global `echo` is echo_server; profile `ops` owns a server also named `echo` that runs
/// other_server, whose `echo` answers "other: ...".
fn shadowing_config() -> Workdir {
    Workdir::new(&format!(
        "{}[profiles.ops]\n[profiles.ops.servers.echo]\ncommand = {}\n",
        server_toml("echo", "echo_server", &[]),
        toml_string(&example("other_server").display().to_string()),
    ))
}

#[tokio::test]
async fn a_shadowed_name_dispatches_to_the_profiles_own_server() {
    let work = shadowing_config();
    let http = HttpGateway::start(&work).await;
    let (ops, _) = http_client(&format!("{}/ops", http.url)).await;
    let (default, _) = http_client(&http.url).await;

    let from_ops = call(&ops, "echo__echo", json!({"text": "hi"}))
        .await
        .unwrap();
    assert_eq!(text(&from_ops), "other: hi");
    let from_default = call(&default, "echo__echo", json!({"text": "hi"}))
        .await
        .unwrap();
    assert_eq!(text(&from_default), "hi");

    let ops_names = tool_names(&ops).await;
    assert_eq!(
        ops_names[0], "echo__echo",
        "the shadowing tool keeps the global one's place"
    );
    assert!(ops_names.contains(&"echo__reverse".to_owned()));
    assert!(
        !tool_names(&default)
            .await
            .contains(&"echo__reverse".to_owned())
    );
    for client in [ops, default] {
        client.cancel().await.unwrap();
    }
}

#[tokio::test]
async fn a_profile_server_is_started_once_for_all_its_sessions() {
    let work = shadowing_config();
    let http = HttpGateway::start(&work).await;
    let gateway_pid = http.child.id().expect("gateway pid");
    let mut clients = Vec::new();
    for _ in 0..3 {
        let (client, _) = http_client(&format!("{}/ops", http.url)).await;
        call(&client, "echo__reverse", json!({"text": "ab"}))
            .await
            .unwrap();
        clients.push(client);
    }
    // One global server and one profile server, however many ops sessions there are.
    assert_eq!(children_of(gateway_pid).len(), 2);
    for client in clients {
        client.cancel().await.unwrap();
    }

    let config = work.config().display().to_string();
    let (code, stdout, _) = run_toolgate(&["--config", &config, "check"]);
    assert_eq!(code, Some(0), "{stdout}");
    assert!(stdout.contains("ops/echo\tready (2 tools)"), "{stdout}");
}

#[tokio::test]
async fn list_changed_reaches_only_sessions_whose_view_changed() {
    let work = Workdir::new(&format!(
        "{}{}[profiles.echoes]\nallow = [\"echo__*\"]\n[profiles.others]\nallow = [\"other__*\"]\n",
        server_toml("echo", "echo_server", &[]),
        server_toml("other", "other_server", &[])
    ));
    let http = HttpGateway::start(&work).await;
    let (echoes, echoes_seen) = http_client(&format!("{}/echoes", http.url)).await;
    let (others, others_seen) = http_client(&format!("{}/others", http.url)).await;

    let notified = echoes_seen.list_changed_seen.notified();
    call(&echoes, "echo__add_tool", json!({"name": "fresh"}))
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(5), notified)
        .await
        .expect("the echoes session is told its list changed");
    assert!(
        tool_names(&echoes)
            .await
            .contains(&"echo__fresh".to_owned())
    );
    // Give a wrong notification every chance to arrive before checking it did not.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        others_seen
            .list_changed
            .load(std::sync::atomic::Ordering::SeqCst),
        0,
        "the others session's view did not change"
    );
    for client in [echoes, others] {
        client.cancel().await.unwrap();
    }
}

#[tokio::test]
async fn an_entry_naming_a_server_that_is_down_is_only_a_warning() {
    let work = Workdir::new(&format!(
        "{}{}[profiles.p]\nallow = [\"echo__echo\", \"other__*\"]\n",
        server_toml("echo", "echo_server", &[("ECHO_EXIT_AT_START", "3")]),
        server_toml("other", "other_server", &[])
    ));
    let config = work.config().display().to_string();
    let (code, stdout, stderr) = run_toolgate(&["--config", &config, "tools", "--profile", "p"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("may name a server that is down (echo)"),
        "{stderr}"
    );
    assert!(stdout.contains("other__echo"), "{stdout}");
}

/// Pids whose parent is `pid`, from /proc.
fn children_of(pid: u32) -> Vec<u32> {
    let mut children = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
            continue;
        };
        // Fields after the parenthesised command: state, ppid, ...
        let Some(after) = stat.rsplit_once(')').map(|(_, rest)| rest) else {
            continue;
        };
        let fields: Vec<&str> = after.split_whitespace().collect();
        if fields.get(1).and_then(|p| p.parse::<u32>().ok()) == Some(pid) && fields[0] != "Z" {
            children.push(child);
        }
    }
    children
}
