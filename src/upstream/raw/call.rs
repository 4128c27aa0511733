//! `Upstream::call_raw`: one `tools/call` over the raw path, and the result it returns undecoded.

use std::io::Write as _;

use rmcp::model::{CallToolResult, ErrorData, RequestId, ServerResult};

use super::{Event, RawAnswer, peek, peek::Facts};
use crate::{
    config::ServerId,
    upstream::{CallContext, Upstream, UpstreamError},
};

/// The opening `resultType` that a 2026-07-28 server writes first (rmcp does); removed for
/// clients of earlier versions, as rmcp's typed path does.
const COMPLETE_FIRST: &[u8] = br#"{"resultType":"complete","#;

/// A tool result as the upstream wrote it, looked at but not decoded.
pub struct RawResult {
    server: ServerId,
    /// The whole answer line; the result is `line[start..end]`.
    line: Vec<u8>,
    start: usize,
    end: usize,
    /// Its keys, and whether it can be written to a client as it is ([`RawResult::reply`]).
    facts: Facts,
}

impl RawResult {
    /// Looks at the result in `answer`, which the reader checked as JSON: its top-level
    /// keys as the reader's walk read them (`facts`), else as [`super::peek`] reads them, or
    /// with serde what that leaves.
    fn new(
        server: ServerId,
        line: Vec<u8>,
        (start, end): (usize, usize),
        facts: Option<Facts>,
    ) -> Self {
        let json = &line[start..end];
        // Anything rmcp's typed path would change (a missing `content`, which it adds, or a
        // result type other than `complete`) is decoded instead: not `plain`.
        let facts = facts
            .or_else(|| {
                peek::peek(json)
                    .or_else(|| peek::by_serde(json))
                    .map(Facts::from)
            })
            .unwrap_or(Facts {
                is_error: false,
                has_result_type: false,
                structured_is_object: true,
                plain: false,
            });
        Self {
            server,
            line,
            start,
            end,
            facts,
        }
    }

    /// `result` as server `s` answered a raw call with it, for other modules' tests.
    #[cfg(test)]
    pub(crate) fn answered(result: &str) -> Self {
        let line = format!(r#"{{"jsonrpc":"2.0","id":"tg-1","result":{result}}}"#).into_bytes();
        let start = line.len() - 1 - result.len();
        let server = ServerId::global(crate::config::ServerName::parse("s").unwrap());
        RawResult::new(server, line, (start, start + result.len()), None)
    }

    /// The result's JSON text.
    pub fn json(&self) -> &[u8] {
        &self.line[self.start..self.end]
    }

    /// Its size in bytes for `max_result_bytes`: the upstream's bytes, plus the
    /// `"resultType":"complete",` that the typed path adds when the upstream left it out
    /// (so that both paths refuse the same results).
    pub fn size(&self) -> usize {
        let added = if self.facts.has_result_type {
            0
        } else {
            COMPLETE_FIRST.len() - 1
        };
        self.end - self.start + added
    }

    /// Whether the tool says it failed (`isError: true`).
    pub fn is_error(&self) -> bool {
        self.facts.is_error
    }

    /// Decoded as [`Upstream::call`] reads rmcp's typed answer: straight as a tool result
    /// (rmcp tries every kind of result in turn, which costs an error per kind tried); only
    /// what is not one is decoded as rmcp would, to name what it is.
    pub fn decode(&self) -> Result<CallToolResult, UpstreamError> {
        if let Ok(result) = serde_json::from_slice::<CallToolResult>(self.json()) {
            return crate::upstream::tool_result(
                &self.server,
                ServerResult::CallToolResult(result),
            );
        }
        match serde_json::from_slice::<ServerResult>(self.json()) {
            Ok(result) => crate::upstream::tool_result(&self.server, result),
            Err(error) => Err(UpstreamError::Protocol {
                server: self.server.clone(),
                detail: format!("expected a tool result: {error}"),
            }),
        }
    }

    /// The whole answer line to a client's request `id`, the result as the upstream wrote it;
    /// `modern` is a client of 2026-07-28 or later. `None` when rmcp's typed path would
    /// change the result for this client (then it is [`decode`](Self::decode)d): a
    /// `resultType` that is not at the very front for an older client, or structured content
    /// that is not an object, which older clients do not accept.
    pub fn reply(&self, id: &RequestId, modern: bool) -> Option<Vec<u8>> {
        if !self.facts.plain {
            return None;
        }
        let json = self.json();
        let mut line = Vec::with_capacity(json.len() + 64);
        line.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
        serde_json::to_writer(&mut line, id).ok()?;
        line.extend_from_slice(br#","result":"#);
        match (modern, self.facts.has_result_type) {
            (true, true) => line.extend_from_slice(json),
            // The typed path adds `resultType` (it comes first in rmcp's result).
            (true, false) => {
                line.extend_from_slice(COMPLETE_FIRST);
                line.extend_from_slice(json.get(1..)?);
            }
            (false, _) if !self.facts.structured_is_object => return None,
            (false, false) => line.extend_from_slice(json),
            (false, true) => {
                let rest = json.strip_prefix(COMPLETE_FIRST)?;
                line.push(b'{');
                line.extend_from_slice(rest);
            }
        }
        line.extend_from_slice(b"}\n");
        Some(line)
    }
}

/// Writes `"tg-<id>"`, a raw request's id and progress token. Without `fmt`: a formatted
/// write cost about 1,300 instructions per call.
fn push_raw_id(line: &mut Vec<u8>, id: u64) {
    line.extend_from_slice(b"\"tg-");
    line.extend_from_slice(itoa::Buffer::new().format(id).as_bytes());
    line.push(b'"');
}

/// Relays one progress notification to the calling client under its own token, and waits
/// until it is sent, so that the answer written after it cannot overtake it.
async fn relay_progress(ctx: &CallContext, mut params: rmcp::model::ProgressNotificationParam) {
    let Some(sink) = &ctx.progress else {
        return;
    };
    params.progress_token = sink.token.clone();
    if let Err(error) = sink.notify(params).await {
        tracing::debug!(%error, "could not relay progress to the client");
    }
}

impl Upstream {
    /// [`Upstream::call`] over the raw path: the request is written as bytes and the answer
    /// comes back as the line it was. Progress, cancel and the relay of the server's requests
    /// behave as in `call`. Call it only while [`Upstream::raw_link`] is `Some`.
    #[tracing::instrument(name = "upstream tools/call", target = "toolgate::call::upstream", level = "debug", skip_all, fields(otel.kind = "client", server = %self.name, tool = tool))]
    pub async fn call_raw(
        &self,
        tool: &str,
        arguments: &rmcp::model::JsonObject,
        ctx: CallContext,
    ) -> Result<RawResult, UpstreamError> {
        let Some(link) = self.raw_link() else {
            return Err(self.not_connected());
        };
        let Some(mut waiting) = link.expect(ctx.progress.is_some()) else {
            return Err(self.closed_during_call());
        };
        // While this call runs, the server's requests and log messages go to its caller.
        let _in_flight = ctx.session.map(|session| {
            self.relay
                .begin_call(&self.name, session, ctx.rounds.clone())
        });
        let id = waiting.id;
        // Room for the envelope, a `_meta` and small arguments: growing the line cost a
        // reallocation and a copy on most calls (the envelope alone is about 100 bytes).
        let mut line = Vec::with_capacity(256 + tool.len());
        line.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
        push_raw_id(&mut line, id);
        line.extend_from_slice(br#","method":"tools/call","params":{"name":"#);
        // Not by serde: the same bytes, without its work per value.
        crate::plain_json::write_str(&mut line, tool).map_err(|e| self.unwritable(e))?;
        line.extend_from_slice(br#","arguments":"#);
        crate::plain_json::write_object(&mut line, arguments).map_err(|e| self.unwritable(e))?;
        let traceparent = crate::telemetry::outgoing(&tracing::Span::current(), ctx.remote);
        match (ctx.progress.is_some(), traceparent) {
            // The reader hands this call its progress in order with the answer.
            (true, None) => {
                line.extend_from_slice(br#","_meta":{"progressToken":"#);
                push_raw_id(&mut line, id);
                line.push(b'}');
            }
            (true, Some(traceparent)) => {
                let _ = write!(
                    line,
                    r#","_meta":{{"progressToken":"tg-{id}","traceparent":"{traceparent}"}}"#
                );
            }
            // SEP-414: the trace context of a request travels in its `_meta`.
            (false, Some(traceparent)) => {
                let _ = write!(line, r#","_meta":{{"traceparent":"{traceparent}"}}"#);
            }
            (false, None) => {}
        }
        line.extend_from_slice(b"}}\n");
        let answer = tokio::select! {
            // In order, not by lot (`select!` draws one per poll): the answer first.
            biased;
            // Queued (or the connection is gone), then answered; progress relayed meanwhile.
            answer = async {
                link.send(line, Some(id)).await.map_err(|()| self.closed_during_call())?;
                // Progress first: the reader leaves it in the order the server wrote it.
                let answer = loop {
                    match waiting.events.next().await {
                        // Boxed: a notification's future is large, and most calls have none.
                        Event::Progress(params) => Box::pin(relay_progress(&ctx, *params)).await,
                        Event::Answer(answer) => break Ok(answer),
                        Event::Closed => break Err(()),
                    }
                };
                answer.map_err(|()| self.closed_during_call())
            } => answer?,
            // The client cancelled: tell the upstream, and give no answer.
            () = ctx.cancel.cancelled() => {
                let notice = format!(
                    "{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{{\"requestId\":\"tg-{id}\",\"reason\":\"cancelled by the gateway's client\"}}}}\n"
                );
                if link.send(notice.into_bytes(), None).await.is_err() {
                    tracing::debug!(server = %self.name, "could not forward cancel");
                }
                return Err(UpstreamError::Cancelled);
            }
        };
        // Log messages the server wrote before its answer reach the client before it.
        self.logs.settle().await;
        self.raw_result(answer)
    }

    fn unwritable(&self, error: serde_json::Error) -> UpstreamError {
        UpstreamError::Protocol {
            server: self.name.clone(),
            detail: format!("could not write the request: {error}"),
        }
    }

    fn raw_result(&self, answer: RawAnswer) -> Result<RawResult, UpstreamError> {
        let RawAnswer {
            line,
            result,
            error,
            facts,
        } = answer;
        match (result, error) {
            (Some(span), None) => Ok(RawResult::new(self.name.clone(), line, span, facts)),
            (None, Some((start, end))) => {
                match serde_json::from_slice::<ErrorData>(&line[start..end]) {
                    Ok(error) => {
                        Err(self.unavailable(rmcp::service::ServiceError::McpError(error)))
                    }
                    Err(error) => Err(UpstreamError::Protocol {
                        server: self.name.clone(),
                        detail: format!("unreadable error answer: {error}"),
                    }),
                }
            }
            _ => Err(UpstreamError::Protocol {
                server: self.name.clone(),
                detail: "an answer with neither a result nor an error, or both".into(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(result: &str) -> RawResult {
        RawResult::answered(result)
    }

    fn reply(result: &RawResult, modern: bool) -> Option<String> {
        result
            .reply(&RequestId::Number(7), modern)
            .map(|line| String::from_utf8(line).unwrap())
    }

    #[test]
    fn a_result_goes_out_as_written_with_the_result_type_each_era_expects() {
        let with_type = raw(r#"{"resultType":"complete","content":[],"isError":true}"#);
        assert!(with_type.is_error());
        assert_eq!(
            reply(&with_type, true).unwrap(),
            "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"resultType\":\"complete\",\"content\":[],\"isError\":true}}\n"
        );
        assert_eq!(
            reply(&with_type, false).unwrap(),
            "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[],\"isError\":true}}\n"
        );
        let without = raw(r#"{"content":[{"type":"text","text":"é"}]}"#);
        assert!(!without.is_error());
        assert_eq!(
            reply(&without, true).unwrap(),
            "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"resultType\":\"complete\",\"content\":[{\"type\":\"text\",\"text\":\"é\"}]}}\n"
        );
        assert!(reply(&without, false).unwrap().ends_with(
            r#""result":{"content":[{"type":"text","text":"é"}]}}
"#
        ));
    }

    #[test]
    fn what_the_typed_path_would_change_is_left_to_it() {
        // No content (rmcp adds `[]`), another result type, a result type not in front for
        // an older client, a non-object structured content for an older client.
        assert!(reply(&raw(r#"{"structuredContent":{}}"#), true).is_none());
        assert!(reply(&raw(r#"{"resultType":"task","content":[]}"#), true).is_none());
        let late = raw(r#"{"content":[],"resultType":"complete"}"#);
        assert!(reply(&late, true).is_some());
        assert!(reply(&late, false).is_none());
        let list = raw(r#"{"content":[],"structuredContent":[1]}"#);
        assert!(reply(&list, true).is_some());
        assert!(reply(&list, false).is_none());
        // Unreadable for the peek: decoded, where the error is named.
        assert!(reply(&raw(r#"{"content":[],"isError":"yes"}"#), true).is_none());
        assert!(raw(r#"{"content":[],"isError":"yes"}"#).decode().is_err());
    }
}
