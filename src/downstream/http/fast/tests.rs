//! Unit tests of the HTTP fast path: which headers it takes, and how an answer becomes an event.

use axum::http::HeaderValue;

use super::{body::event, *};

fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.append(*name, HeaderValue::from_static(value));
    }
    map
}

#[test]
fn only_plain_headers_are_taken() {
    let base = [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
    ];
    assert!(plain_headers(&headers(&base)));
    let with = |extra: (&'static str, &'static str)| {
        let mut pairs = base.to_vec();
        pairs.push(extra);
        plain_headers(&headers(&pairs))
    };
    assert!(with(("mcp-protocol-version", "2025-11-25")));
    assert!(
        !with(("mcp-protocol-version", "2026-07-28")),
        "no session era"
    );
    assert!(
        !with(("mcp-protocol-version", "2099-01-01")),
        "unknown: rmcp's 400"
    );
    // Split over two headers is still both.
    assert!(plain_headers(&headers(&[
        ("content-type", "application/json"),
        ("accept", "application/json"),
        ("accept", "text/event-stream"),
    ])));
    // Weights (q=0 excludes a type), parameters and a missing type are rmcp's to judge.
    for accept in [
        "application/json, text/event-stream;q=0",
        "application/json;charset=utf-8, text/event-stream",
        "application/json",
        "*/*",
    ] {
        assert!(
            !plain_headers(&headers(&[
                ("content-type", "application/json"),
                ("accept", accept)
            ])),
            "{accept}"
        );
    }
    assert!(!plain_headers(&headers(&[(
        "accept",
        "application/json, text/event-stream"
    )])));
}

#[test]
fn the_sdks_accept_is_read_whole_as_item_by_item() {
    for accept in [
        "application/json, text/event-stream",
        "text/event-stream, application/json",
        "application/json,text/event-stream",
        "application/json, text/event-stream, */*",
        "Application/JSON, Text/Event-Stream",
        "application/json, text/event-stream ",
        "application/json, text/event-stream;q=0",
        "application/json,  text/event-stream",
        "application/json",
        "text/event-stream",
    ] {
        let one = headers(&[("accept", accept)]);
        assert_eq!(accepts_both(&one), lists_both(&one), "{accept}");
        let twice = headers(&[("accept", accept), ("accept", "application/json;q=0")]);
        assert_eq!(accepts_both(&twice), lists_both(&twice), "{accept}, twice");
    }
    let sdk = headers(&[("accept", "text/event-stream, application/json")]);
    assert!(accepts_both(&sdk));
}

#[test]
fn an_event_carries_one_message_whatever_its_line_breaks() {
    assert_eq!(&event(b"{\"a\":1}\n")[..], b"data: {\"a\":1}\n\n");
    assert_eq!(&event(b"{\"a\":1}")[..], b"data: {\"a\":1}\n\n");
    // JSON whitespace with line breaks: more data lines, joined back with `\n`.
    assert_eq!(
        &event(b"{\"a\":\r\n1}\n")[..],
        b"data: {\"a\":\ndata: \ndata: 1}\n\n"
    );
}
