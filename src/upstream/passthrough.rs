//! Requests other than `tools/call` that toolgate forwards to one upstream: prompts, resources, completion, logging level.
// `logging/setLevel` and `resources/subscribe` are 2025-era requests that rmcp marks
// deprecated; toolgate still relays them for the clients and servers that use them.
#![allow(deprecated)]

use std::{future::Future, time::Duration};

use rmcp::{
    RoleClient,
    model::{
        CompleteRequestParams, CompleteResult, GetPromptRequestParams, GetPromptResult,
        LoggingLevel, ReadResourceRequestParams, ReadResourceResult, ResultType,
        ServerCapabilities, SetLevelRequestParams, SubscribeRequestParams,
        UnsubscribeRequestParams,
    },
    service::{Peer, ServiceError},
};
use tokio_util::sync::CancellationToken;

use super::{Upstream, UpstreamError, lists};
use crate::registry::passthrough::{Features, Offer};

/// What one upstream offers besides tools, as its capabilities say. A list that fails is
/// logged and left empty: the server's tools still work.
pub(super) async fn import_offer(
    server: &super::ServerId,
    peer: &Peer<RoleClient>,
    source: &lists::JsonLists,
) -> Offer {
    let Some(info) = peer.peer_info() else {
        return Offer::default();
    };
    let features = features_of(&info.capabilities);
    let mut offer = Offer {
        features,
        ..Offer::default()
    };
    if features.prompts {
        match lists::list(server, &lists::PROMPTS, source, peer.list_all_prompts()).await {
            Ok(prompts) => {
                offer.prompts = prompts.items;
                offer.extras.prompts = prompts.extras;
            }
            Err(error) => {
                tracing::warn!(%server, %error, "prompts/list failed; no prompts from this server")
            }
        }
    }
    if features.resources {
        match lists::list(server, &lists::RESOURCES, source, peer.list_all_resources()).await {
            Ok(resources) => {
                offer.resources = resources.items;
                offer.extras.resources = resources.extras;
            }
            Err(error) => {
                tracing::warn!(%server, %error, "resources/list failed; no resources from this server")
            }
        }
        match lists::list(
            server,
            &lists::TEMPLATES,
            source,
            peer.list_all_resource_templates(),
        )
        .await
        {
            Ok(templates) => {
                offer.templates = templates.items;
                offer.extras.templates = templates.extras;
            }
            Err(error) => {
                tracing::warn!(%server, %error, "resources/templates/list failed; no templates from this server")
            }
        }
    }
    offer
}

/// The optional features toolgate relays, as a server's capabilities declare them.
pub(super) fn features_of(caps: &ServerCapabilities) -> Features {
    Features {
        prompts: caps.prompts.is_some(),
        resources: caps.resources.is_some(),
        subscribe: caps
            .resources
            .as_ref()
            .is_some_and(|r| r.subscribe == Some(true)),
        completions: caps.completions.is_some(),
        logging: caps.logging.is_some(),
    }
}

impl Upstream {
    /// Forwards `prompts/get` under the prompt's upstream name.
    pub async fn get_prompt(
        &self,
        params: GetPromptRequestParams,
        limit: Limit,
    ) -> Result<GetPromptResult, UpstreamError> {
        let peer = self.current_peer()?;
        let _in_flight = self.in_flight(&limit);
        let mut result = self.bounded(limit, peer.get_prompt(params)).await?;
        // As for tool results (see `tool_result`): an older upstream leaves `resultType` out,
        // a 2026-07-28 client requires it, and rmcp strips it again for older clients.
        result.result_type.get_or_insert(ResultType::COMPLETE);
        Ok(result)
    }

    /// Forwards `resources/read` with the upstream's own URI.
    pub async fn read_resource(
        &self,
        params: ReadResourceRequestParams,
        limit: Limit,
    ) -> Result<ReadResourceResult, UpstreamError> {
        let peer = self.current_peer()?;
        let _in_flight = self.in_flight(&limit);
        let mut result = self.bounded(limit, peer.read_resource(params)).await?;
        result.result_type.get_or_insert(ResultType::COMPLETE);
        Ok(result)
    }

    /// Forwards `completion/complete` with the upstream's own prompt name or URI template.
    pub async fn complete(
        &self,
        params: CompleteRequestParams,
        limit: Limit,
    ) -> Result<CompleteResult, UpstreamError> {
        let peer = self.current_peer()?;
        let mut result = self.bounded(limit, peer.complete(params)).await?;
        result.result_type.get_or_insert(ResultType::COMPLETE);
        Ok(result)
    }

    pub async fn subscribe(&self, uri: String, limit: Limit) -> Result<(), UpstreamError> {
        let peer = self.current_peer()?;
        self.bounded(limit, peer.subscribe(SubscribeRequestParams::new(uri)))
            .await
    }

    pub async fn unsubscribe(&self, uri: String, limit: Limit) -> Result<(), UpstreamError> {
        let peer = self.current_peer()?;
        self.bounded(limit, peer.unsubscribe(UnsubscribeRequestParams::new(uri)))
            .await
    }

    pub async fn set_level(&self, level: LoggingLevel, limit: Limit) -> Result<(), UpstreamError> {
        let peer = self.current_peer()?;
        self.bounded(limit, peer.set_level(SetLevelRequestParams::new(level)))
            .await
    }

    /// Marks the caller's request in flight on this server, so that the server's requests
    /// meanwhile go to it.
    fn in_flight(&self, limit: &Limit) -> Option<crate::relay::InFlight<'_>> {
        let (session, rounds) = limit.caller.clone()?;
        Some(self.relay.begin_call(&self.name, session, rounds))
    }

    /// Runs one request to the upstream within `limit`.
    async fn bounded<T>(
        &self,
        limit: Limit,
        request: impl Future<Output = Result<T, ServiceError>>,
    ) -> Result<T, UpstreamError> {
        tokio::select! {
            // The upstream answered, or the connection failed.
            answer = tokio::time::timeout(limit.timeout, request) => match answer {
                Ok(answer) => {
                    // Log messages the server wrote before its answer go first ([`super::logs`]).
                    self.logs.settle().await;
                    answer.map_err(|e| self.unavailable(e))
                }
                Err(_) => Err(UpstreamError::Unavailable {
                    server: self.name.clone(),
                    reason: format!("no answer within {} ms", limit.timeout.as_millis()),
                }),
            },
            // The client cancelled its request.
            () = limit.cancel.cancelled() => Err(UpstreamError::Cancelled),
        }
    }
}

/// How long a forwarded request may take, and what cancels it.
pub struct Limit {
    pub timeout: Duration,
    pub cancel: CancellationToken,
    /// The calling session, for `prompts/get` and `resources/read`: while the request runs,
    /// the upstream's requests go to it (through `rounds` for a 2026-07-28 request).
    pub caller: Option<(crate::relay::SessionId, Option<crate::rounds::AskSink>)>,
}
