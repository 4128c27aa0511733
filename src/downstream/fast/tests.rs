//! Unit tests of the stdio fast path: the ids in flight, and a call read alike either way.

use super::*;

fn taken(taking: u64) -> Option<Taken> {
    Some(Taken {
        taking,
        cancel: CancellationToken::new(),
    })
}

#[test]
fn an_id_is_one_request_across_both_paths_and_a_reused_id_keeps_its_new_request() {
    let ids = IdsInFlight::default();
    let one = RequestId::Number(1);
    assert!(ids.claim_as(&one, taken(1)));
    assert!(!ids.claim(&one), "rmcp's side is refused a fast call's id");
    assert!(!ids.claim_as(&one, taken(2)));
    // The client cancels call 1 and reuses its id for a request rmcp takes.
    let cancel = ids.cancel(&one).expect("a fast call");
    cancel.cancel();
    assert!(ids.claim(&one));
    assert!(
        ids.cancel(&one).is_none(),
        "rmcp's request is not cancelled here"
    );
    assert!(!ids.finish(&one, 1), "the cancelled call gives no answer");
    assert!(!ids.claim(&one), "and leaves the new request's id taken");
    ids.release(&one);
    // A call that ends frees its id; `cancel_all` reaches the calls in flight only.
    assert!(ids.claim_as(&one, taken(3)));
    assert!(ids.finish(&one, 3));
    assert!(ids.claim(&one));
    let two = RequestId::String("2".into());
    let call = taken(4);
    let token = call.as_ref().map(|t| t.cancel.clone()).expect("a token");
    assert!(ids.claim_as(&two, call));
    ids.cancel_all();
    assert!(token.is_cancelled());
}

#[test]
fn a_call_reads_the_same_whether_its_params_come_before_or_after_its_method() {
    let params = r#"{"name":"a","arguments":{"x":1},"_meta":{"progressToken":"p"}}"#;
    let after = format!(r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{params}}}"#);
    let before = format!(r#"{{"params":{params},"jsonrpc":"2.0","id":3,"method":"tools/call"}}"#);
    for line in [after, before] {
        let (id, call) = CallParts::peek(line.as_bytes()).unwrap();
        assert_eq!(id, RequestId::Number(3));
        assert_eq!(call.name, "a");
        assert!(call.wants_progress());
        assert_eq!(call.arguments.unwrap()["x"], 1);
    }
    // Refused either way: an unknown key in the params.
    let bad = r#"{"name":"a","task":{}}"#;
    for line in [
        format!(r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{bad}}}"#),
        format!(r#"{{"params":{bad},"jsonrpc":"2.0","id":3,"method":"tools/call"}}"#),
    ] {
        assert!(CallParts::peek(line.as_bytes()).is_none(), "{line}");
    }
}
