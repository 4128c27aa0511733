//! A client's `tools/call`, however it was read, made into the pipeline's [`Call`]: where its progress, log messages and the upstream's requests go.

use std::sync::Arc;

use rmcp::{RoleServer, service::Peer};

use super::GatewayService;
use crate::{
    pipeline::Call,
    relay::{Caller, Reach},
    upstream::ProgressSink,
};

/// A `tools/call` as the client sent it, however it was read.
pub(super) struct CallRequest {
    pub(super) name: String,
    pub(super) arguments: Option<rmcp::model::JsonObject>,
    /// The client's own token, when it asked for progress.
    pub(super) progress: Option<rmcp::model::ProgressToken>,
    /// Where that progress goes instead of the session's peer (HTTP's fast path: the
    /// call's own response stream).
    pub(super) progress_stream: Option<crate::relay::NoticeStream>,
    /// Fired by the client's `notifications/cancelled`.
    pub(super) cancel: tokio_util::sync::CancellationToken,
    /// `_meta.traceparent`, else (over HTTP) the `traceparent` header; unreadable is absent.
    pub(super) traceparent: Option<crate::telemetry::Traceparent>,
    /// The caller's IdP subject ([`super::subject_of`]).
    pub(super) subject: Option<Arc<str>>,
}

impl GatewayService {
    /// The pipeline's call for a `tools/call` from this session, reached through `peer`.
    /// `rounds`: a 2026-07-28 call's sink for the upstream's requests ([`crate::rounds`]).
    pub(super) fn call_of(
        &self,
        peer: &Peer<RoleServer>,
        request: CallRequest,
        rounds: Option<crate::rounds::AskSink>,
    ) -> Call {
        self.call_via(&Reach::of(peer), request, rounds)
    }

    /// [`Self::call_of`] for a client reached as `reach` says: a session's fast path keeps
    /// one for all its calls, and a 2026-07-28 call taken by HTTP's modern fast path has no
    /// peer, only its response stream. Progress goes to the request's own stream when it
    /// has one, else to `reach`.
    pub(super) fn call_via(
        &self,
        reach: &Reach,
        request: CallRequest,
        rounds: Option<crate::rounds::AskSink>,
    ) -> Call {
        self.gateway
            .relay
            .register_reach(self.session, &self.profile, || reach.clone());
        Call {
            profile: self.profile.clone(),
            name: request.name,
            arguments: request.arguments,
            cancel: request.cancel,
            progress: request.progress.map(|token| ProgressSink {
                to: match request.progress_stream {
                    Some(stream) => Reach::Stream(stream),
                    None => reach.clone(),
                },
                token,
            }),
            client: Some(Caller {
                reach: reach.clone(),
                session: self.session,
                rounds,
                subject: request.subject,
            }),
            sub_call_id: None,
            trace: crate::telemetry::Trace {
                parent: None,
                remote: request.traceparent,
            },
        }
    }
}
