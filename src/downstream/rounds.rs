//! A 2026-07-28 client's `tools/call`, `prompts/get` and `resources/read` run as multi round-trip exchanges ([`crate::rounds`]): the upstream's requests reach the client as `InputRequiredResult`s, its retries carry the answers back.

use std::{cell::Cell, future::Future, sync::Arc, time::Duration};

use rmcp::{
    ErrorData as McpError, RoleServer,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities,
        GetPromptRequestParams, GetPromptResponse, InputRequiredResult, InputResponses, JsonObject,
        ProgressToken, ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse,
    },
    service::RequestContext,
};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use super::{CallRequest, GatewayService};
use crate::{
    error,
    gateway::Gateway,
    pipeline::Answer,
    relay::{NoticeStream, Reach, Relay, SWEEP_EVERY, SessionId},
    rounds::{AskSink, Exchange, Outcome, Owner, Step, What},
    upstream::Limit,
};

impl GatewayService {
    /// Whether the request is of the 2026-07-28 era, whose clients are not sent requests.
    pub(super) fn modern(context: &RequestContext<RoleServer>) -> bool {
        context
            .protocol_version()
            .is_some_and(|version| version >= ProtocolVersion::V_2026_07_28)
    }

    /// Who may continue an exchange this request parks.
    pub(super) fn owner(&self, context: &RequestContext<RoleServer>) -> Owner {
        match context.extensions.get::<http::request::Parts>() {
            Some(parts) => self.http_owner(&parts.headers),
            None => Owner::Session(self.session),
        }
    }

    /// The owner of an HTTP request's exchange: 2026-07-28 requests have no session, so the
    /// profile and the `Authorization` header stand for the client.
    pub(super) fn http_owner(&self, headers: &http::HeaderMap) -> Owner {
        let credential = headers
            .get(http::header::AUTHORIZATION)
            .map(|value| Sha256::digest(value.as_bytes()).into())
            .unwrap_or([0; 32]);
        Owner::Http {
            profile: self.profile.clone(),
            credential,
        }
    }

    /// The request's client as an exchange needs it.
    pub(super) fn asker(&self, context: &RequestContext<RoleServer>) -> Asker {
        Asker {
            owner: self.owner(context),
            reach: Reach::of(&context.peer),
            capabilities: context.client_capabilities().unwrap_or_default(),
            ct: context.ct.clone(),
        }
    }

    /// Over HTTP a 2026-07-28 request's handler (and session number) is its own: the relay
    /// forgets that session once its answer is out ([`crate::relay::Relay::forget_later`]).
    /// Over stdio the session stays.
    pub(super) fn forget_request_session_later(&self, context: &RequestContext<RoleServer>) {
        if !matches!(self.owner(context), Owner::Http { .. }) {
            return;
        }
        forget_later(&self.gateway, self.session);
    }

    /// Continues the exchange `state` names, or starts `work` as a new one; then drives it.
    pub(super) async fn in_rounds<Fut>(
        &self,
        what: What,
        state: Option<String>,
        responses: Option<InputResponses>,
        asker: Asker,
        work: impl FnOnce(GatewayService, AskSink, CancellationToken) -> Fut,
    ) -> Result<Step, McpError>
    where
        Fut: Future<Output = Outcome> + Send + 'static,
    {
        let Asker {
            owner,
            reach,
            capabilities,
            ct,
        } = asker;
        let rounds = &self.gateway.rounds;
        let exchange = match state {
            Some(state) => rounds
                .resume(&state, &owner, &what, responses)
                .map_err(error::rounds_failed)?,
            None => {
                // Over HTTP each 2026-07-28 request has a handler (and session number) of its
                // own: the relay forgets it once the answer is out, at the latest
                // `LATE_MESSAGES` after the work (what the upstream said just before its
                // answer, e.g. a log message, may still be on its way).
                let request_scoped = matches!(owner, Owner::Http { .. });
                let service = self.clone();
                Exchange::start(
                    owner,
                    what,
                    capabilities,
                    self.gateway.tasks(),
                    move |sink, cancel| {
                        let gateway = service.gateway.clone();
                        let session = service.session;
                        gateway
                            .relay
                            .register_reach(session, &service.profile, || reach);
                        let running = work(service, sink, cancel);
                        async move {
                            let outcome = running.await;
                            if request_scoped {
                                forget_later(&gateway, session);
                            }
                            outcome
                        }
                    },
                )
            }
        };
        rounds
            .drive(exchange, &ct)
            .await
            .map_err(error::rounds_failed)
    }

    /// `tools/call` from a 2026-07-28 client: a new exchange, or the retry of a parked one.
    pub(super) async fn call_in_rounds(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let progress = context.meta.get_progress_token();
        let traceparent = super::traceparent_of(&context);
        let subject = super::subject_of(&context);
        let asker = self.asker(&context);
        let call = RoundsCall {
            name: request.name.into_owned(),
            arguments: request.arguments,
            progress,
            progress_stream: None,
            traceparent,
            subject,
        };
        self.run_call_in_rounds(call, request.request_state, request.input_responses, asker)
            .await
    }

    /// A 2026-07-28 `tools/call` taken by HTTP's modern fast path: what rmcp's handler runs
    /// for it ([`ServerHandler::call_tool`](rmcp::ServerHandler::call_tool) of a request
    /// that asks for no task and continues no exchange), with the tool's result left raw
    /// when it came raw and no stage read it.
    pub(super) async fn modern_fast_call(
        &self,
        call: RoundsCall,
        asker: Asker,
    ) -> Result<CallStep, McpError> {
        self.settled().await?;
        self.answer_in_rounds(call, None, None, asker).await
    }

    /// A 2026-07-28 `tools/call` run as an exchange, answered from rmcp's types.
    pub(super) async fn run_call_in_rounds(
        &self,
        call: RoundsCall,
        state: Option<String>,
        responses: Option<InputResponses>,
        asker: Asker,
    ) -> Result<CallToolResponse, McpError> {
        match self.answer_in_rounds(call, state, responses, asker).await? {
            CallStep::Done(answer) => typed(answer).map(Into::into),
            CallStep::Input(input) => Ok(CallToolResponse::InputRequired(input)),
        }
    }

    /// A 2026-07-28 `tools/call` run as an exchange, however it was read (rmcp's handler,
    /// or HTTP's modern fast path).
    async fn answer_in_rounds(
        &self,
        call: RoundsCall,
        state: Option<String>,
        responses: Option<InputResponses>,
        asker: Asker,
    ) -> Result<CallStep, McpError> {
        let what = What {
            method: "tools/call",
            name: call.name.clone(),
        };
        let reach = asker.reach.clone();
        let step = self
            .in_rounds(
                what,
                state,
                responses,
                asker,
                move |service, sink, cancel| {
                    let request = CallRequest {
                        name: call.name,
                        arguments: call.arguments,
                        progress: call.progress,
                        progress_stream: call.progress_stream,
                        cancel,
                        traceparent: call.traceparent,
                        subject: call.subject,
                    };
                    let call = service.call_via(&reach, request, Some(sink));
                    async move {
                        let view = service.view();
                        let pipeline = &service.gateway.pipeline;
                        let outcome = match pipeline.execute_undecoded(&view, call).await {
                            Ok(answer) => Ok(answer),
                            Err(failure) => error::into_mcp(failure).map(Answer::Decoded),
                        };
                        Outcome::Tool(outcome)
                    }
                },
            )
            .await?;
        match step {
            Step::Done(Outcome::Tool(answer)) => Ok(CallStep::Done(answer)),
            Step::Done(_) => Err(other_result("tools/call")),
            Step::Input(input) => Ok(CallStep::Input(input)),
        }
    }

    /// `prompts/get` from a 2026-07-28 client.
    pub(super) async fn prompt_in_rounds(
        &self,
        mut request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let what = What {
            method: "prompts/get",
            name: request.name.clone(),
        };
        let state = request.request_state.take();
        let responses = request.input_responses.take();
        let step = self
            .passthrough_in_rounds(what, state, responses, &context, |service, limit| async move {
                Outcome::Prompt(service.prompt(request, limit).await)
            })
            .await?;
        match step {
            Step::Done(Outcome::Prompt(result)) => result.map(GetPromptResponse::Complete),
            Step::Done(_) => Err(other_result("prompts/get")),
            Step::Input(input) => Ok(GetPromptResponse::InputRequired(input)),
        }
    }

    /// `resources/read` from a 2026-07-28 client.
    pub(super) async fn read_in_rounds(
        &self,
        mut request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let what = What {
            method: "resources/read",
            name: request.uri.clone(),
        };
        let state = request.request_state.take();
        let responses = request.input_responses.take();
        let step = self
            .passthrough_in_rounds(
                what,
                state,
                responses,
                &context,
                |service, limit| async move { Outcome::Read(service.read(request, limit).await) },
            )
            .await?;
        match step {
            Step::Done(Outcome::Read(result)) => result.map(ReadResourceResponse::Complete),
            Step::Done(_) => Err(other_result("resources/read")),
            Step::Input(input) => Ok(ReadResourceResponse::InputRequired(input)),
        }
    }

    /// [`Self::in_rounds`] for a request passed through to one server: `work` gets the
    /// gateway's call timeout, the round's cancel and the caller's sink for the upstream's
    /// requests.
    async fn passthrough_in_rounds<Fut>(
        &self,
        what: What,
        state: Option<String>,
        responses: Option<InputResponses>,
        context: &RequestContext<RoleServer>,
        work: impl FnOnce(GatewayService, Limit) -> Fut,
    ) -> Result<Step, McpError>
    where
        Fut: Future<Output = Outcome> + Send + 'static,
    {
        let timeout = Duration::from_millis(self.gateway.config().call_timeout_ms);
        self.in_rounds(
            what,
            state,
            responses,
            self.asker(context),
            move |service, sink, cancel| {
                let limit = Limit {
                    timeout,
                    cancel,
                    caller: Some((service.session, Some(sink))),
                };
                work(service, limit)
            },
        )
        .await
    }
}

/// Who asks, as an exchange needs it: read from rmcp's request context ([`GatewayService::asker`]),
/// or by HTTP's modern fast path from the request itself.
pub(super) struct Asker {
    pub(super) owner: Owner,
    pub(super) reach: Reach,
    pub(super) capabilities: ClientCapabilities,
    /// Cancelled when the client is gone: the exchange ends with it.
    pub(super) ct: CancellationToken,
}

/// How far a 2026-07-28 `tools/call` got: its answer, or an input round for the client.
pub(super) enum CallStep {
    /// The tool's answer, or the error the client gets.
    Done(Result<Answer, McpError>),
    Input(InputRequiredResult),
}

/// A tool's answer as rmcp's types: a raw one decoded, as rmcp's client would decode it
/// (one that does not decode is the error the client gets for it).
pub(super) fn typed(answer: Result<Answer, McpError>) -> Result<CallToolResult, McpError> {
    answer?.decode().or_else(error::into_mcp)
}

/// A 2026-07-28 `tools/call`, as its exchange's work needs it (its cancel comes from the
/// exchange).
pub(super) struct RoundsCall {
    pub(super) name: String,
    pub(super) arguments: Option<JsonObject>,
    pub(super) progress: Option<ProgressToken>,
    pub(super) progress_stream: Option<NoticeStream>,
    pub(super) traceparent: Option<crate::telemetry::Traceparent>,
    pub(super) subject: Option<Arc<str>>,
}

/// Hands a 2026-07-28 HTTP request's session to the relay to forget once its answer is out,
/// and starts the relay's sweeper when none runs: one task at a time, not one per request
/// (it ends when no session is left to forget, or when the gateway stops).
fn forget_later(gateway: &Arc<Gateway>, session: SessionId) {
    if !gateway.relay.forget_later(session) {
        return;
    }
    let sweeper = Sweeper {
        relay: gateway.relay.clone(),
        ended: Cell::new(false),
    };
    let stop = gateway.shutdown_token().clone();
    gateway.tasks().spawn(async move {
        loop {
            tokio::select! {
                () = tokio::time::sleep(SWEEP_EVERY) => {}
                () = stop.cancelled() => {
                    sweeper.relay.forget_late_now();
                    break;
                }
            }
            if !sweeper.relay.sweep_late() {
                break;
            }
        }
        sweeper.ended.set(true);
    });
}

/// The relay's sweeper task: if it is dropped before it ended (the runtime shutting down,
/// a panic), the relay is told, so that the next request starts another.
struct Sweeper {
    relay: Arc<Relay>,
    ended: Cell<bool>,
}

impl Drop for Sweeper {
    fn drop(&mut self) {
        if !self.ended.get() {
            self.relay.sweeper_gone();
        }
    }
}

fn other_result(method: &str) -> McpError {
    McpError::internal_error(
        format!("a {method} exchange ended with another request's result"),
        None,
    )
}
