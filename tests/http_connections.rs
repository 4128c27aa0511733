//! Connections are capped below the open-file limit, headers must arrive within
//! `header_timeout_secs`, bodies within `body_timeout_secs`, and a connection that moves no
//! bytes for `connection_idle_secs` is closed: a flood of idle or slow sockets delays new
//! clients by seconds but never locks them out.

mod common;

use std::time::{Duration, Instant};

use common::*;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

fn echo_with(gateway: &str) -> Workdir {
    Workdir::new(&format!(
        "{gateway}{}",
        server_toml("echo", "echo_server", &[])
    ))
}

/// Opens `count` TCP connections to `authority` that send nothing.
async fn idle_sockets(authority: &str, count: usize) -> Vec<TcpStream> {
    let mut sockets = Vec::with_capacity(count);
    for _ in 0..count {
        // Past the accept queue a connect may wait: keep what connected in time.
        if let Ok(Ok(socket)) =
            tokio::time::timeout(Duration::from_millis(500), TcpStream::connect(authority)).await
        {
            sockets.push(socket);
        }
    }
    sockets
}

/// A real MCP client connects and lists tools within `limit`.
async fn served_within(gateway: &HttpGateway, limit: Duration) -> Duration {
    let started = Instant::now();
    let (client, _) = tokio::time::timeout(limit, gateway.client())
        .await
        .expect("a new client is served despite the idle sockets");
    let names = tokio::time::timeout(limit, tool_names(&client))
        .await
        .expect("tools/list within the limit");
    assert!(names.contains(&"echo__echo".to_owned()));
    client.cancel().await.unwrap();
    started.elapsed()
}

/// How long until the server closes `socket` (reads end), or `None` within `limit`.
async fn closed_within(socket: &mut TcpStream, limit: Duration) -> Option<Duration> {
    let started = Instant::now();
    let mut buffer = [0u8; 1024];
    loop {
        match tokio::time::timeout_at(
            tokio::time::Instant::from_std(started + limit),
            socket.read(&mut buffer),
        )
        .await
        {
            Err(_) => return None,
            Ok(Ok(0) | Err(_)) => return Some(started.elapsed()),
            // A 408/400 answer before the close: keep reading to the end.
            Ok(Ok(_)) => {}
        }
    }
}

#[tokio::test]
async fn idle_connections_beyond_the_cap_do_not_lock_clients_out() {
    let work = echo_with("[gateway.http]\nmax_connections = 16\nheader_timeout_secs = 2\n");
    let gateway = HttpGateway::start(&work).await;
    let sockets = idle_sockets(&gateway.authority(), 40).await;
    assert!(
        sockets.len() >= 16,
        "the cap's worth connected: {}",
        sockets.len()
    );
    let waited = served_within(&gateway, Duration::from_secs(15)).await;
    eprintln!(
        "served after {waited:?} behind {} idle sockets",
        sockets.len()
    );
}

/// The attack as reported, with the default settings: more idle connections than the
/// open-file limit. Under `ulimit -n 256` (soft and hard), 300 idle sockets used to lock
/// every client out; now the client waits at most about one header timeout (10 s).
#[tokio::test]
async fn more_idle_connections_than_file_descriptors_do_not_lock_clients_out() {
    let work = echo_with("");
    let mut command = tokio::process::Command::new("sh");
    command
        .arg("-c")
        .arg("ulimit -n 256 && exec \"$0\" \"$@\"")
        .arg(toolgate())
        .arg("--config")
        .arg(work.config())
        .args(["serve", "--http", "127.0.0.1:0"]);
    let gateway = HttpGateway::launch(command).await;
    let sockets = idle_sockets(&gateway.authority(), 300).await;
    let waited = served_within(&gateway, Duration::from_secs(30)).await;
    eprintln!(
        "served after {waited:?} behind {} idle sockets",
        sockets.len()
    );
}

#[tokio::test]
async fn slowloris_headers_are_cut_off_at_the_header_timeout() {
    let work = echo_with("[gateway.http]\nheader_timeout_secs = 1\n");
    let gateway = HttpGateway::start(&work).await;
    let mut socket = TcpStream::connect(gateway.authority()).await.unwrap();
    let started = Instant::now();
    let head = b"POST /mcp HTTP/1.1\r\nhost: localhost\r\nx-slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    let mut cut = false;
    for byte in head {
        if socket.write_all(&[*byte]).await.is_err() {
            cut = true;
            break;
        }
        let mut probe = [0u8; 1];
        let probed =
            tokio::time::timeout(Duration::from_millis(200), socket.read(&mut probe)).await;
        if let Ok(Ok(0) | Err(_)) = probed {
            cut = true;
            break;
        }
        if started.elapsed() > Duration::from_secs(5) {
            break;
        }
    }
    let elapsed = started.elapsed();
    assert!(cut, "a header sent one byte at a time was never cut off");
    assert!(elapsed < Duration::from_secs(3), "cut after {elapsed:?}");
}

#[tokio::test]
async fn a_slow_body_is_refused_at_the_body_timeout() {
    let work = echo_with("[gateway.http]\nbody_timeout_secs = 1\n");
    let gateway = HttpGateway::start(&work).await;
    let mut socket = TcpStream::connect(gateway.authority()).await.unwrap();
    socket
        .write_all(
            b"POST /mcp HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\ncontent-length: 1000\r\n\r\n{",
        )
        .await
        .unwrap();
    let started = Instant::now();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), socket.read_to_end(&mut answer)).await;
    assert!(read.is_ok(), "the connection was held past 5s");
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_connection_that_moves_no_bytes_is_closed_when_idle() {
    // Headers may take long here; silence is what gets the connection closed.
    let work = echo_with("[gateway.http]\nheader_timeout_secs = 60\nconnection_idle_secs = 1\n");
    let gateway = HttpGateway::start(&work).await;
    let mut socket = TcpStream::connect(gateway.authority()).await.unwrap();
    let closed = closed_within(&mut socket, Duration::from_secs(5)).await;
    let closed = closed.expect("a silent connection is closed");
    assert!(
        closed >= Duration::from_millis(900),
        "not before the idle timeout: {closed:?}"
    );
}

#[tokio::test]
async fn a_long_call_is_not_mistaken_for_an_idle_connection() {
    // SSE keep-alive pings move bytes while the call runs, so the idle timeout spares it.
    // A raw POST, because an rmcp client would quietly resume a cut stream.
    let work = echo_with("[gateway.http]\nconnection_idle_secs = 1\n");
    let gateway = HttpGateway::start(&work).await;
    let session = raw_session(&gateway.url, &[]).await;
    let call = call_request(3, "echo__sleep", serde_json::json!({"ms": 2500}));
    let answer = tokio::time::timeout(Duration::from_secs(10), async {
        jsonrpc_answer(mcp_post(&gateway.url, Some(&session), &[], &call).await).await
    })
    .await
    .expect("answered");
    assert_eq!(answer["id"], 3, "{answer}");
    assert_ne!(answer["result"]["isError"], true, "{answer}");
}
