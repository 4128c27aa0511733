//! Prompts, resources, completion and logging level for a client: answered from the caller's view, forwarded to the owning upstream.
// `logging/setLevel` and `resources/subscribe` are 2025-era requests rmcp marks deprecated;
// toolgate serves them to the clients that send them.
#![allow(deprecated)]

use std::{sync::Arc, time::Duration};

use rmcp::{
    ErrorData as McpError, RoleServer,
    model::{
        CompleteRequestParams, CompleteResult, ErrorCode, GetPromptRequestParams, GetPromptResult,
        ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, LoggingLevel,
        ReadResourceRequestParams, ReadResourceResult, Reference, ResourceContents,
    },
    service::RequestContext,
};
use serde_json::json;

use super::GatewayService;
use crate::{
    error,
    registry::passthrough::{Features, ResourceRoute},
    upstream::{Limit, Upstream},
};

impl GatewayService {
    /// `caller`: the upstream's requests meanwhile go to this session.
    pub(super) fn limit(&self, context: &RequestContext<RoleServer>, caller: bool) -> Limit {
        Limit {
            timeout: Duration::from_millis(self.gateway.config().call_timeout_ms),
            cancel: context.ct.clone(),
            caller: caller.then_some((self.session, None)),
        }
    }

    fn upstream(&self, server: &crate::config::ServerId) -> Result<Arc<Upstream>, McpError> {
        self.gateway.upstreams.get(server).ok_or_else(|| {
            McpError::internal_error(format!("server \"{server}\" is not configured"), None)
        })
    }

    /// `-32601` for a method of a feature no server of this profile declared (and so
    /// toolgate did not advertise), as for any server without it.
    pub(super) fn offered(
        &self,
        method: &str,
        feature: impl Fn(Features) -> bool,
    ) -> Result<(), McpError> {
        if feature(self.view().offers().features()) {
            Ok(())
        } else {
            Err(McpError::new(
                ErrorCode::METHOD_NOT_FOUND,
                format!("{method}: no server of this profile offers it"),
                None,
            ))
        }
    }

    pub(super) fn prompts(&self) -> Result<ListPromptsResult, McpError> {
        self.offered("prompts/list", |f| f.prompts)?;
        let view = self.view();
        Ok(ListPromptsResult::with_all_items(
            view.offers()
                .prompts
                .iter()
                .map(|n| n.item.clone())
                .collect(),
        ))
    }

    pub(super) fn resources(&self) -> Result<ListResourcesResult, McpError> {
        self.offered("resources/list", |f| f.resources)?;
        let view = self.view();
        Ok(ListResourcesResult::with_all_items(
            view.offers()
                .resources
                .iter()
                .map(|n| n.item.clone())
                .collect(),
        ))
    }

    pub(super) fn templates(&self) -> Result<ListResourceTemplatesResult, McpError> {
        self.offered("resources/templates/list", |f| f.resources)?;
        let view = self.view();
        Ok(ListResourceTemplatesResult::with_all_items(
            view.offers()
                .templates
                .iter()
                .map(|n| n.item.clone())
                .collect(),
        ))
    }

    pub(super) async fn prompt(
        &self,
        mut request: GetPromptRequestParams,
        limit: Limit,
    ) -> Result<GetPromptResult, McpError> {
        let view = self.view();
        let Some(named) = view.offers().prompt(&request.name) else {
            return Err(McpError::invalid_params(
                format!("unknown prompt \"{}\"", request.name),
                Some(json!({ "code": "UNKNOWN_PROMPT" })),
            ));
        };
        request.name = named.upstream.clone();
        // A 2026-07-28 retry's answers are toolgate's to use; the 2025-era upstream never
        // asked for them.
        request.input_responses = None;
        request.request_state = None;
        let upstream = self.upstream(&named.server)?;
        upstream
            .get_prompt(request, limit)
            .await
            .map_err(error::request_failed)
    }

    /// Where a URI the client sent goes, or `-32002` (resource not found).
    fn route(&self, uri: &str) -> Result<ResourceRoute, McpError> {
        let view = self.view();
        view.offers()
            .route_uri(uri, |uri| view.admits(uri))
            .ok_or_else(|| {
                McpError::resource_not_found(
                    format!("resource not found: no server of this profile offers {uri:?}"),
                    Some(json!({ "uri": uri, "code": "UNKNOWN_RESOURCE" })),
                )
            })
    }

    pub(super) async fn read(
        &self,
        mut request: ReadResourceRequestParams,
        limit: Limit,
    ) -> Result<ReadResourceResult, McpError> {
        let route = self.route(&request.uri)?;
        request.uri = route.upstream_uri.clone();
        request.input_responses = None;
        request.request_state = None;
        let upstream = self.upstream(&route.server)?;
        let mut result = upstream
            .read_resource(request, limit)
            .await
            .map_err(error::request_failed)?;
        // The contents name the URIs the upstream knows; the client knows them prefixed.
        if let Some(prefix) = &route.prefix {
            for contents in &mut result.contents {
                if let ResourceContents::TextResourceContents { uri, .. }
                | ResourceContents::BlobResourceContents { uri, .. } = contents
                {
                    uri.insert_str(0, prefix);
                }
            }
        }
        Ok(result)
    }

    pub(super) async fn subscribe_to(
        &self,
        uri: String,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let route = self.route(&uri)?;
        let relay = &self.gateway.relay;
        relay.register(self.session, &self.profile, &context.peer);
        if relay.subscribe(self.session, &route.server, &route.upstream_uri, &uri) {
            let subscribed = self
                .upstream(&route.server)?
                .subscribe(route.upstream_uri.clone(), self.limit(&context, false))
                .await;
            if let Err(failure) = subscribed {
                relay.unsubscribe(self.session, &route.server, &route.upstream_uri);
                return Err(error::request_failed(failure));
            }
        }
        Ok(())
    }

    /// The URIs of `requested` that name a resource of this profile (what a
    /// `subscriptions/listen` stream may subscribe to).
    pub(super) fn routable(&self, requested: &[String]) -> Vec<String> {
        requested
            .iter()
            .filter(|uri| self.route(uri).is_ok())
            .cloned()
            .collect()
    }

    /// Subscribes a 2026-07-28 listen stream to `uris` (the client's URIs): registered with
    /// the relay, and upstream where it is the first subscriber. A refused upstream
    /// subscription ends the stream with that error.
    pub(super) async fn listen_to(
        &self,
        uris: &[String],
        context: &RequestContext<RoleServer>,
    ) -> Result<crate::relay::Listening, McpError> {
        let mut resources = Vec::new();
        for uri in uris {
            let route = self.route(uri)?;
            resources.push((route.server, route.upstream_uri, uri.clone()));
        }
        let listening = self.gateway.relay.listen(resources);
        for (server, upstream_uri) in &listening.first {
            let subscribed = match self.upstream(server) {
                Ok(upstream) => upstream
                    .subscribe(upstream_uri.clone(), self.limit(context, false))
                    .await
                    .map_err(error::request_failed),
                Err(error) => Err(error),
            };
            if let Err(error) = subscribed {
                self.stop_listening(listening.id).await;
                return Err(error);
            }
        }
        Ok(listening)
    }

    /// The listen stream `id` ended: unsubscribes upstream from what no one holds any more.
    pub(super) async fn stop_listening(&self, id: u64) {
        for (server, uri) in self.gateway.relay.stop_listening(id) {
            let Ok(upstream) = self.upstream(&server) else {
                continue;
            };
            let limit = Limit {
                timeout: Duration::from_millis(self.gateway.config().call_timeout_ms),
                cancel: self.gateway.shutdown_token().child_token(),
                caller: None,
            };
            if let Err(failure) = upstream.unsubscribe(uri, limit).await {
                tracing::debug!(%server, "unsubscribe after a listen stream ended failed: {failure}");
            }
        }
    }

    pub(super) async fn unsubscribe_from(
        &self,
        uri: String,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let route = self.route(&uri)?;
        if self
            .gateway
            .relay
            .unsubscribe(self.session, &route.server, &route.upstream_uri)
        {
            self.upstream(&route.server)?
                .unsubscribe(route.upstream_uri, self.limit(&context, false))
                .await
                .map_err(error::request_failed)?;
        }
        Ok(())
    }

    pub(super) async fn completion(
        &self,
        mut request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        self.offered("completion/complete", |f| f.completions)?;
        let view = self.view();
        let server = match &mut request.r#ref {
            Reference::Prompt(prompt) => {
                let named = view.offers().prompt(&prompt.name).ok_or_else(|| {
                    McpError::invalid_params(format!("unknown prompt \"{}\"", prompt.name), None)
                })?;
                prompt.name = named.upstream.clone();
                named.server.clone()
            }
            Reference::Resource(template) => {
                let named = view.offers().template(&template.uri).ok_or_else(|| {
                    McpError::invalid_params(
                        format!("unknown resource template {:?}", template.uri),
                        None,
                    )
                })?;
                template.uri = named.upstream.clone();
                named.server.clone()
            }
            _ => {
                return Err(McpError::invalid_params(
                    "completion/complete: unsupported kind of `ref`",
                    None,
                ));
            }
        };
        self.upstream(&server)?
            .complete(request, self.limit(&context, false))
            .await
            .map_err(error::request_failed)
    }

    /// Records the session's level and sets every logging server it sees to the most verbose
    /// level any session asked for (each session is filtered to its own in [`crate::relay`]).
    pub(super) async fn level(
        &self,
        level: LoggingLevel,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.offered("logging/setLevel", |f| f.logging)?;
        self.gateway
            .relay
            .register(self.session, &self.profile, &context.peer);
        let upstream_level = self.gateway.relay.set_level(self.session, level);
        let view = self.view();
        for upstream in self.gateway.upstreams.all() {
            let logs = upstream.features().is_some_and(|f| f.logging);
            if !logs || !view.shows_server(upstream.name()) {
                continue;
            }
            let limit = self.limit(&context, false);
            if let Err(failure) = upstream.set_level(upstream_level, limit).await {
                tracing::warn!(server = %upstream.name(), "logging/setLevel failed: {failure}");
            }
        }
        Ok(())
    }
}
