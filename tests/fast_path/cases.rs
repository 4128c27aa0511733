//! The corpus of the differential test: every case, in order.

use serde_json::{Value, json};

use crate::MAX_RESULT_BYTES;
use crate::client::to_line;
use crate::corpus::{
    Case, Corpus, Era, Expect, Shape, Step, UNICODE, anonymous, answer, escaped_json_string,
    modern_meta, text,
};

/// The corpus, in order. Ids are unique, except where a case reuses one on purpose.
pub(crate) fn corpus(era: Era) -> Vec<Case> {
    let mut c = Corpus {
        discover: matches!(era, Era::Discover),
        next_id: 100,
        cancels: 0,
        cases: Vec::new(),
    };

    // Plain outcomes.
    let id = c.id();
    c.single("success: echo", c.echo(id, "hello"), id, text("hello"));
    let id = c.id();
    let line = c.call(id, "echo__add", json!({"a": 2, "b": 3}), json!({}));
    c.single(
        "success: structured content (add)",
        line,
        id,
        text("{\"sum\":5}"),
    );
    let id = c.id();
    let line = c.call(
        id,
        "echo__add",
        json!({"a": 12_345_678_901_234_567_890_u64, "b": 0.1}),
        json!({}),
    );
    // echo_server adds them as doubles (the 0.1 is lost) and serializes with serde_json.
    let sum = json!({"sum": 12_345_678_901_234_567_890_u64 as f64 + 0.1}).to_string();
    c.single(
        "success: numbers beyond i64 and floats",
        line,
        id,
        text(&sum),
    );
    let id = c.id();
    let line = c.call(id, "echo__fail", json!({"message": "it broke"}), json!({}));
    c.single(
        "tool error: isError result (fail)",
        line,
        id,
        Expect::ToolError("it broke".into()),
    );
    let id = c.id();
    let line = c.raw(
        id,
        r#"{"jsonrpc":"2.0","id":@ID@,"method":"tools/call","params":{@M@"name":"echo__fail"}}"#,
    );
    c.single(
        "tool error: no arguments at all",
        line,
        id,
        Expect::ToolError("failed on purpose".into()),
    );
    let id = c.id();
    let line = c.raw(
        id,
        r#"{"jsonrpc":"2.0","id":@ID@,"method":"tools/call","params":{@M@"name":"echo__fail","arguments":null}}"#,
    );
    c.single(
        "tool error: arguments null",
        line,
        id,
        Expect::ToolError("failed on purpose".into()),
    );

    // Refused by toolgate before any upstream.
    let id = c.id();
    let line = c.call(id, "echo__echo", json!({"text": 5}), json!({}));
    c.single(
        "invalid arguments: wrong type",
        line,
        id,
        Expect::Code("INVALID_ARGS"),
    );
    let id = c.id();
    let line = c.call(
        id,
        "echo__echo",
        json!({"txt": "x", "extra": [1]}),
        json!({}),
    );
    c.single(
        "invalid arguments: missing and unexpected",
        line,
        id,
        Expect::Code("INVALID_ARGS"),
    );
    let id = c.id();
    let line = c.call(id, "no_such_tool", json!({}), json!({}));
    c.single("unknown tool", line, id, Expect::Rpc(-32602));
    let id = c.id();
    let line = c.call(id, "nöpe😀\u{7}\u{202E}", json!({}), json!({}));
    c.single(
        "unknown tool with a unicode name",
        line,
        id,
        Expect::Rpc(-32602),
    );
    let id = c.id();
    let line = c.call(id, "echo__", json!({}), json!({}));
    c.single(
        "unknown tool: the bare server prefix",
        line,
        id,
        Expect::Rpc(-32602),
    );

    // Sizes and text.
    let large = "ab😀中\n".repeat(20_000); // 200 KB, about 220 KB once escaped
    let id = c.id();
    let line = c.echo(id, &large);
    c.single("large result (~200 KB)", line, id, Expect::Text(large));
    let id = c.id();
    let line = c.echo(id, &"x".repeat(MAX_RESULT_BYTES + 10_000));
    c.single(
        "result over max_result_bytes",
        line,
        id,
        Expect::Code("RESULT_TOO_LARGE"),
    );
    let id = c.id();
    let line = c.echo(id, UNICODE);
    c.single("unicode text", line, id, text(UNICODE));
    let id = c.id();
    let line = c.raw(
        id,
        &format!(
            r#"{{"jsonrpc":"2.0","id":@ID@,"method":"tools/call","params":{{@M@"name":"echo__echo","arguments":{{"text":{}}}}}}}"#,
            escaped_json_string(UNICODE)
        ),
    );
    c.single(
        "unicode text written as \\u escapes",
        line,
        id,
        text(UNICODE),
    );

    // Progress: echo_server's `sleep` reports after each of its `steps`.
    for (name, token, steps) in [
        ("progress: a string token", json!("p-α"), 3),
        ("progress: a numeric token", json!(7), 2),
    ] {
        let id = c.id();
        let line = c.call(
            id,
            "echo__sleep",
            json!({"ms": 300, "steps": steps}),
            json!({"progressToken": token}),
        );
        c.case(
            name,
            vec![
                Step::Send(line),
                Step::Await {
                    id: Some(json!(id)),
                    expect: text("slept 300ms"),
                    progress: Some((token, steps)),
                    shape: Shape::Session,
                },
            ],
        );
    }

    // A client cancel: the call reached the upstream, which sees the cancel and answers
    // "cancelled"; neither path may pass that on. An echo and a ping show the next lines.
    let id = c.id();
    let ms = 30_000 + id;
    c.cancels += 1;
    let cancel = json!({
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": id, "reason": "changed my mind"}
    });
    let mut cancel_line = cancel.clone();
    if c.discover {
        cancel_line["params"]["_meta"] = modern_meta();
    }
    let after = c.id();
    let ping = c.id();
    let ping_line = c.raw(
        ping,
        if c.discover {
            r#"{"jsonrpc":"2.0","id":@ID@,"method":"ping","params":{@M@"x":1}}"#
        } else {
            r#"{"jsonrpc":"2.0","id":@ID@,"method":"ping"}"#
        },
    );
    c.cases.push(Case {
        name: "client cancel of a call in flight",
        steps: vec![
            Step::Send(c.call(id, "echo__sleep", json!({"ms": ms}), json!({}))),
            Step::WaitLog {
                file: "calls.log",
                needle: format!("\"ms\":{ms}"),
                count: 1,
            },
            Step::Send(to_line(&cancel_line)),
            Step::WaitLog {
                file: "cancel.log",
                needle: "cancelled sleep".into(),
                count: c.cancels,
            },
            Step::Send(c.echo(after, "after the cancel")),
            answer(after, text("after the cancel")),
            Step::Send(ping_line),
            // `ping` is gone from the 2026-07-28 protocol.
            answer(
                ping,
                if c.discover {
                    Expect::Rpc(-32601)
                } else {
                    Expect::Empty
                },
            ),
        ],
        silent: vec![json!(id)],
    });
    let after = c.id();
    let stray = json!({
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": 999_999, "reason": "nothing to cancel"}
    });
    c.case(
        "cancel of an id not in flight",
        vec![
            Step::Send(to_line(&stray)),
            Step::Send(c.echo(after, "still here")),
            answer(after, text("still here")),
        ],
    );

    // A timeout: the `slow` server's `timeout_ms` ends a long sleep.
    let id = c.id();
    let line = c.call(id, "slow__sleep", json!({"ms": 5_000}), json!({}));
    c.single(
        "timeout (per-server timeout_ms)",
        line,
        id,
        Expect::Code("TOOL_TIMEOUT"),
    );

    // The upstream answers with its own JSON-RPC error: notes_server's `roots` asks the client
    // for its roots, toolgate refuses for this client (no `roots` capability) with -32601,
    // and notes_server fails the call with that error, which toolgate relays unchanged.
    let id = c.id();
    let line = c.call(id, "notes__roots", json!({}), json!({}));
    c.single(
        "upstream JSON-RPC error (notes roots)",
        line,
        id,
        Expect::Rpc(-32601),
    );

    // Overlapping calls.
    let id = c.id();
    c.case(
        "duplicate id of a call in flight",
        vec![
            Step::Send(c.call(id, "echo__sleep", json!({"ms": 2_000}), json!({}))),
            Step::Send(c.echo(id, "second")),
            answer(id, Expect::Rpc(-32600)),
            answer(id, text("slept 2000ms")),
        ],
    );
    let slow = c.id();
    let quick = c.id();
    c.case(
        "a quick call overtakes a slow one",
        vec![
            Step::Send(c.call(slow, "echo__sleep", json!({"ms": 1_500}), json!({}))),
            Step::Send(c.echo(quick, "overtakes")),
            answer(quick, text("overtakes")),
            answer(slow, text("slept 1500ms")),
        ],
    );

    // Ids.
    let string_id = "req-α \"1\"";
    c.single(
        "string id",
        c.echo(string_id, "string id"),
        string_id,
        text("string id"),
    );
    c.single("negative id", c.echo(-1, "negative"), -1, text("negative"));
    let big = 9_007_199_254_740_993_u64; // 2^53 + 1: not exact as a double
    c.single("id beyond 2^53", c.echo(big, "big id"), big, text("big id"));
    for (name, id) in [
        ("id: a float", "1.5"),
        ("id: null", "null"),
        ("id: a boolean", "true"),
        ("id: beyond i64", "18446744073709551615"),
    ] {
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{@M@"name":"echo__echo","arguments":{{"text":"bad id"}}}}}}"#
        );
        c.case(name, vec![Step::Send(c.raw(0, &line)), anonymous(-32600)]);
    }

    // Line forms rmcp's decoder accepts: every one must reach the same answer.
    let id = c.id();
    let line = c.raw(
        id,
        r#"{"params":{@M@"arguments":{"text":"order"},"name":"echo__echo"},"method":"tools/call","id":@ID@,"jsonrpc":"2.0"}"#,
    );
    c.single("keys in reverse order", line, id, text("order"));
    let id = c.id();
    let line = c.raw(
        id,
        "  { \"jsonrpc\" : \"2.0\" ,\t\"id\" : @ID@ , \"method\" : \"tools/call\" , \"params\" : { @M@ \"name\" : \"echo__echo\" , \"arguments\" : { \"text\" : \"spaced\" } } }  ",
    );
    c.single("whitespace between tokens", line, id, text("spaced"));
    let id = c.id();
    let line = c.raw(
        id,
        r#"{"jsonrpc":"2.0","id":@ID@,"method":"tools\/call","params":{@M@"name":"echo\u005f_echo","arguments":{"text":"esc\/aped"}}}"#,
    );
    c.single(
        "escapes in method and tool name",
        line,
        id,
        text("esc/aped"),
    );
    let id = c.id();
    let mut line = b"\xEF\xBB\xBF".to_vec();
    line.extend(c.echo(id, "after a BOM"));
    c.single("a byte order mark", line, id, text("after a BOM"));
    let id = c.id();
    let mut line = c.echo(id, "crlf");
    line.push(b'\r');
    c.single("a CRLF line end", line, id, text("crlf"));
    let id = c.id();
    let line = c.raw(
        id,
        r#"{"jsonrpc":"2.0","id":@ID@,"method":"tools/call","params":{@M@"name":"echo__echo","arguments":{"text":"extra"},"extra":1,"task":{"ttl":1000}},"extra":2}"#,
    );
    c.single(
        "unknown fields (and a task request)",
        line,
        id,
        text("extra"),
    );
    let id = c.id();
    let line = c.call(
        id,
        "echo__echo",
        json!({"text": "token"}),
        json!({"progressToken": {"not": "a token"}}),
    );
    c.single("a progressToken that is an object", line, id, text("token"));

    // Lines that do not fit.
    let id = c.id();
    let line = c.raw(
        id,
        r#"{"jsonrpc":"2.0","id":@ID@,"id":999,"method":"tools/call","params":{@M@"name":"echo__echo","arguments":{"text":"dup"}}}"#,
    );
    c.case(
        "a duplicate id key",
        vec![Step::Send(line), answer(999, Expect::Rpc(-32600))],
    );
    let id = c.id();
    let line = c.raw(
        id,
        r#"{"jsonrpc":"2.0","id":@ID@,"method":"tools/call","params":{@M@"name":"echo__echo","name":"echo__fail","arguments":{"text":"dup"}}}"#,
    );
    c.single("a duplicate name key", line, id, Expect::Rpc(-32602));
    for (name, params) in [
        (
            "params: arguments a number",
            r#"{@M@"name":"echo__echo","arguments":5}"#,
        ),
        (
            "params: arguments an array",
            r#"{@M@"name":"echo__echo","arguments":["text"]}"#,
        ),
        ("params: name missing", r#"{@M@"arguments":{}}"#),
        ("params: name a number", r#"{@M@"name":7}"#),
    ] {
        let id = c.id();
        let line = c.raw(
            id,
            &format!(r#"{{"jsonrpc":"2.0","id":@ID@,"method":"tools/call","params":{params}}}"#),
        );
        c.single(name, line, id, Expect::Rpc(-32602));
    }
    let id = c.id();
    let line = c.raw(id, r#"{"jsonrpc":"2.0","id":@ID@,"method":"tools/call"}"#);
    c.single("params: none", line, id, Expect::Rpc(-32602));
    // Params that are not an object make no JSON-RPC request at all.
    let id = c.id();
    let line = c.raw(
        id,
        r#"{"jsonrpc":"2.0","id":@ID@,"method":"tools/call","params":["echo__echo"]}"#,
    );
    c.single("params: an array", line, id, Expect::Rpc(-32600));
    let id = c.id();
    let line = c.raw(
        id,
        r#"{"id":@ID@,"method":"tools/call","params":{@M@"name":"echo__echo","arguments":{"text":"v"}}}"#,
    );
    c.single("no jsonrpc member", line, id, Expect::Rpc(-32600));
    let id = c.id();
    let line = c.raw(
        id,
        r#"{"jsonrpc":"1.0","id":@ID@,"method":"tools/call","params":{@M@"name":"echo__echo","arguments":{"text":"v"}}}"#,
    );
    c.single("jsonrpc 1.0", line, id, Expect::Rpc(-32600));
    for (name, template) in [
        (
            "not JSON: cut short",
            r#"{"jsonrpc":"2.0","id":@ID@,"method":"tools/call","params":{@M@"name":"echo__echo","arguments":{"text":"cut"}}"#,
        ),
        (
            "not JSON: a number out of range",
            r#"{"jsonrpc":"2.0","id":@ID@,"method":"tools/call","params":{@M@"name":"echo__add","arguments":{"a":1e400,"b":1}}}"#,
        ),
        (
            "not JSON: a lone surrogate",
            r#"{"jsonrpc":"2.0","id":@ID@,"method":"tools/call","params":{@M@"name":"echo__echo","arguments":{"text":"lone \ud800 x"}}}"#,
        ),
    ] {
        let id = c.id();
        c.case(
            name,
            vec![Step::Send(c.raw(id, template)), anonymous(-32700)],
        );
    }
    let id = c.id();
    let mut line = c.raw(
        id,
        r#"{"jsonrpc":"2.0","id":@ID@,"method":"tools/call","params":{@M@"name":"echo__echo","arguments":{"text":"bad "#,
    );
    line.extend(b"\xFF\xFE\"}}}");
    c.case(
        "not JSON: invalid UTF-8",
        vec![Step::Send(line), anonymous(-32700)],
    );
    let sync = c.id();
    let notification = c.raw(
        0,
        r#"{"jsonrpc":"2.0","method":"tools/call","params":{@M@"name":"echo__echo","arguments":{"text":"unanswered"}}}"#,
    );
    c.case(
        "tools/call without an id (a notification: no answer)",
        vec![
            Step::Send(notification),
            Step::Send(c.echo(sync, "next")),
            answer(sync, text("next")),
        ],
    );

    // The protocol version of each request (2026-07-28 `_meta`), whatever the session's.
    let with_meta = |id: u64, meta: Value| {
        to_line(&json!({
            "jsonrpc": "2.0",
            "id": id,
            "method": "tools/call",
            "params": {"name": "echo__echo", "arguments": {"text": "v"}, "_meta": meta}
        }))
    };
    let id = c.id();
    let line = with_meta(
        id,
        json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}
        }),
    );
    c.case(
        "a 2026-07-28 request",
        vec![
            Step::Send(line),
            Step::Await {
                id: Some(json!(id)),
                expect: text("v"),
                progress: None,
                shape: Shape::Modern,
            },
        ],
    );
    let id = c.id();
    let line = with_meta(
        id,
        json!({
            "io.modelcontextprotocol/protocolVersion": "2025-11-25",
            "io.modelcontextprotocol/clientCapabilities": {}
        }),
    );
    c.case(
        "a 2025-11-25 request",
        vec![
            Step::Send(line),
            Step::Await {
                id: Some(json!(id)),
                expect: text("v"),
                progress: None,
                shape: if c.discover {
                    Shape::Legacy
                } else {
                    Shape::Session
                },
            },
        ],
    );
    let id = c.id();
    let line = with_meta(
        id,
        json!({
            "io.modelcontextprotocol/protocolVersion": "2099-01-01",
            "io.modelcontextprotocol/clientCapabilities": {}
        }),
    );
    c.single(
        "an unsupported protocol version",
        line,
        id,
        Expect::Rpc(-32022),
    );
    if c.discover {
        let id = c.id();
        let line = c.raw(
            id,
            r#"{"jsonrpc":"2.0","id":@ID@,"method":"tools/call","params":{"name":"echo__echo","arguments":{"text":"v"}}}"#,
        );
        c.single(
            "a 2026-07-28 session: a request without _meta",
            line,
            id,
            Expect::Rpc(-32602),
        );
        let id = c.id();
        let line = with_meta(
            id,
            json!({
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": 5
            }),
        );
        c.single(
            "a 2026-07-28 session: malformed capabilities",
            line,
            id,
            Expect::Rpc(-32602),
        );
    }

    // `tools/list`, which the fast path answers from the view's cached text: no params,
    // empty params, a cursor and `_meta` (taken), and an unknown key (left to rmcp).
    // (A 2026-07-28 request always has params: its protocol keys are in `_meta`.)
    let mut lists = vec![
        ("tools/list: a cursor", r#","params":{@M@"cursor":"c0"}"#),
        ("tools/list: an unknown key", r#","params":{@M@"other":1}"#),
    ];
    if !c.discover {
        lists.push(("tools/list: no params", ""));
        lists.push(("tools/list: empty params", r#","params":{}"#));
        lists.push((
            "tools/list: _meta",
            r#","params":{"_meta":{"progressToken":"p"}}"#,
        ));
    }
    for (name, params) in lists {
        let id = c.id();
        let template = format!(r#"{{"jsonrpc":"2.0","id":@ID@,"method":"tools/list"{params}}}"#);
        let line = c.raw(id, &template);
        c.single(name, line, id, Expect::Tools("echo__echo"));
    }

    // Last, a plain call: the gateway still serves after all of the above.
    let id = c.id();
    c.single(
        "success after everything",
        c.echo(id, "bye"),
        id,
        text("bye"),
    );
    c.cases
}
