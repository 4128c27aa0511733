//! `toolgate serve` over stdio whose stdin and stdout are sockets, as Node's clients start it (a socket pair for each) or an inetd-style launcher does (one socket for both): calls answered, large messages carried both ways, the sockets' flags left alone, and the client's close ends the gateway.
#![cfg(target_os = "linux")]

mod common;

use std::time::Duration;

use common::*;
use serde_json::json;

/// `toolgate serve` over `sockets`, with the two example servers.
async fn launch(work: &Workdir, sockets: Sockets) -> SocketGateway {
    let mut command = tokio::process::Command::new(toolgate());
    command.arg("--config").arg(work.config()).arg("serve");
    SocketGateway::launch(command, sockets).await
}

/// Calls `echo__echo` with `text` and checks it comes back whole.
async fn echoes(gateway: &SocketGateway, text: &str) {
    let result = call(&gateway.client, "echo__echo", json!({ "text": text }))
        .await
        .expect("tools/call answered");
    assert_eq!(result.is_error, Some(false), "{result:?}");
    assert_eq!(common::text(&result).len(), text.len());
    assert!(common::text(&result) == text, "the echo differs");
}

/// Whether `O_NONBLOCK` is set on the open file description behind the gateway's `fd`.
fn nonblocking(pid: u32, fd: u32) -> bool {
    let info = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{fd}")).expect("fdinfo");
    let flags = info
        .lines()
        .find_map(|line| line.strip_prefix("flags:"))
        .and_then(|octal| u32::from_str_radix(octal.trim(), 8).ok())
        .unwrap_or_else(|| panic!("no flags in {info}"));
    const O_NONBLOCK: u32 = 0o4000;
    flags & O_NONBLOCK != 0
}

/// The client's close ends the gateway, cleanly, within 10 s.
async fn close_ends_it(gateway: SocketGateway) {
    let SocketGateway { mut child, client } = gateway;
    client.cancel().await.expect("the client closes");
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("the gateway exits once the client closes")
        .expect("the gateway's status");
    assert!(status.success(), "{status}");
}

#[tokio::test]
async fn calls_over_socket_pairs_as_node_spawns_the_gateway() {
    let work = two_servers();
    let gateway = launch(&work, Sockets::Pairs).await;
    for text in ["hello", "héllo wörld ✓", "line\nbreak \"quoted\""] {
        echoes(&gateway, text).await;
    }
    // Calls at once, each answered to its own caller.
    let calls = (0..16).map(|n| {
        let client = gateway.client.peer().clone();
        async move {
            let mut params = rmcp::model::CallToolRequestParams::new("echo__echo");
            params.arguments = json!({ "text": format!("caller {n}") })
                .as_object()
                .cloned();
            let result = client.call_tool(params).await.expect("answered");
            assert_eq!(common::text(&result), format!("caller {n}"));
        }
    });
    futures::future::join_all(calls).await;
    // The sockets are read and written without blocking, yet their flags, which the
    // process that started toolgate may share, are as they were given.
    assert!(
        !nonblocking(gateway.pid(), 0),
        "stdin was made non-blocking"
    );
    assert!(
        !nonblocking(gateway.pid(), 1),
        "stdout was made non-blocking"
    );
    close_ends_it(gateway).await;
}

/// 3 MB of text: more than a socket buffers.
fn large_text() -> String {
    (0..3_000_000u32)
        .map(|n| char::from(b'a' + (n % 26) as u8))
        .collect()
}

/// A message larger than what a socket buffers, both ways: the request is read in many
/// pieces, and the answer's writes find the socket full and wait for the client to read.
#[tokio::test]
async fn a_large_call_and_answer_cross_the_sockets() {
    let work = two_servers();
    let gateway = launch(&work, Sockets::Pairs).await;
    echoes(&gateway, &large_text()).await;
    echoes(&gateway, "after").await;
    close_ends_it(gateway).await;
}

/// The process's CPU time so far, in clock ticks (user and system, all threads).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("the gateway's stat");
    // The fields after the command's closing parenthesis; utime and stime are the 12th and
    // 13th of them.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .expect("a stat line")
        .1
        .split_whitespace()
        .collect();
    fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime")
}

/// While the client reads nothing and an answer larger than the socket holds waits, the
/// gateway sleeps: it waits for the socket to take more, rather than trying again and again.
#[tokio::test]
async fn a_full_socket_is_waited_on_not_spun_on() {
    let work = two_servers();
    let mut raw = RawStdio::start_on_sockets(&work, Sockets::Pairs).await;
    let pid = raw.child.id().expect("the gateway's pid");
    let large = large_text();
    raw.send(&call_request(1, "echo__echo", json!({ "text": large })))
        .await;
    // The call is read, sent upstream and answered, and the answer's first part fills the
    // socket: from then on the gateway's CPU time must stand still (within a tick per
    // reading) until this side reads.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut still = 0;
    let mut last = cpu_ticks(pid);
    while still < 3 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the gateway kept spending CPU while its stdout was full"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = cpu_ticks(pid);
        still = if now - last <= 1 { still + 1 } else { 0 };
        last = now;
    }
    let answer = raw.next_answer().await;
    assert_eq!(answer["id"], 1, "{answer}");
    let text = answer["result"]["content"][0]["text"]
        .as_str()
        .expect("a text answer");
    assert!(text == large, "the echo differs");
    let (_, status) = raw.finish().await;
    assert!(status.success(), "{status}");
}

/// The TypeScript SDK's `close()` ends its child's stdin with `end()`: a shutdown of the
/// socket's writing side, which stays open. Here stdin and stdout are one socket, so the
/// gateway's end stays open for writing too: the shutdown alone must read as the client gone
/// (README, "Stopping"), and the gateway exit cleanly.
#[tokio::test]
async fn a_shutdown_of_stdin_ends_the_gateway() {
    let work = two_servers();
    let mut raw = RawStdio::start_on_sockets(&work, Sockets::One).await;
    raw.send(&call_request(
        1,
        "echo__echo",
        json!({ "text": "before the end" }),
    ))
    .await;
    let answer = raw.next_answer().await;
    assert_eq!(
        answer["result"]["content"][0]["text"], "before the end",
        "{answer}"
    );
    let (rest, status) = raw.finish().await;
    assert!(rest.is_empty(), "{rest:?}");
    assert!(status.success(), "{status}");
}

#[tokio::test]
async fn one_socket_for_stdin_and_stdout() {
    let work = two_servers();
    let gateway = launch(&work, Sockets::One).await;
    echoes(&gateway, "one socket").await;
    let names = tool_names(&gateway.client).await;
    assert!(names.contains(&"echo__echo".to_owned()), "{names:?}");
    close_ends_it(gateway).await;
}
