//! A 2026-07-28 client's `tools/call` runs as a multi round-trip exchange ([`crate::rounds`]): the upstream's requests reach the client as `InputRequiredResult`s, its retries carry the answers back.

use rmcp::{
    ErrorData as McpError, RoleServer,
    model::{CallToolRequestParams, CallToolResponse, ProtocolVersion},
    service::RequestContext,
};
use sha2::{Digest, Sha256};

use super::{CallRequest, GatewayService};
use crate::{
    error,
    rounds::{Exchange, Outcome, Owner, Step, What},
};

impl GatewayService {
    /// Whether the request is of the 2026-07-28 era, whose clients are not sent requests.
    pub(super) fn modern(context: &RequestContext<RoleServer>) -> bool {
        context
            .protocol_version()
            .is_some_and(|version| version >= ProtocolVersion::V_2026_07_28)
    }

    /// Who may continue an exchange this request parks.
    fn owner(&self, context: &RequestContext<RoleServer>) -> Owner {
        match context.extensions.get::<http::request::Parts>() {
            Some(parts) => {
                let credential = parts
                    .headers
                    .get(http::header::AUTHORIZATION)
                    .map(|value| Sha256::digest(value.as_bytes()).into())
                    .unwrap_or([0; 32]);
                Owner::Http {
                    profile: self.profile.clone(),
                    credential,
                }
            }
            None => Owner::Session(self.session),
        }
    }

    /// `tools/call` from a 2026-07-28 client: a new exchange, or the retry of a parked one.
    pub(super) async fn call_in_rounds(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let what = What {
            method: "tools/call",
            name: request.name.to_string(),
        };
        let owner = self.owner(&context);
        let rounds = &self.gateway.rounds;
        let exchange = match request.request_state {
            Some(state) => rounds
                .resume(&state, &owner, &what, request.input_responses)
                .map_err(error::rounds_failed)?,
            None => {
                // Over HTTP each 2026-07-28 request has a handler (and session number) of its
                // own: the relay forgets it once the work is done.
                let request_scoped = matches!(owner, Owner::Http { .. });
                let service = self.clone();
                let peer = context.peer.clone();
                let progress = context.meta.get_progress_token();
                let capabilities = context.client_capabilities().unwrap_or_default();
                Exchange::start(
                    owner,
                    what,
                    capabilities,
                    self.gateway.tasks(),
                    move |sink, cancel| async move {
                        let call = CallRequest {
                            name: request.name.into_owned(),
                            arguments: request.arguments,
                            progress,
                            cancel,
                        };
                        let call = service.call_of(&peer, call, Some(sink));
                        let view = service.view();
                        let outcome = match service.gateway.pipeline.execute(&view, call).await {
                            Ok(result) => Ok(result),
                            Err(failure) => {
                                tracing::debug!(code = failure.code(), "{failure}");
                                error::into_mcp(failure)
                            }
                        };
                        if request_scoped {
                            service.gateway.relay.unregister(service.session);
                        }
                        Outcome::Tool(outcome)
                    },
                )
            }
        };
        match rounds
            .drive(exchange, &context.ct)
            .await
            .map_err(error::rounds_failed)?
        {
            Step::Done(Outcome::Tool(result)) => result.map(Into::into),
            Step::Done(_) => Err(McpError::internal_error(
                "a tools/call exchange ended with another request's result",
                None,
            )),
            Step::Input(input) => Ok(CallToolResponse::InputRequired(input)),
        }
    }
}
