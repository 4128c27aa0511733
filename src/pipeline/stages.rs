//! The stage seams of the pipeline: what a pre gate and a post hook decide, and the traits of gates, around wrappers and post hooks, with the around chain they form.

use std::sync::Arc;

use rmcp::model::{CallToolResult, ContentBlock};
use tokio_util::{either::Either, sync::CancellationToken};

use super::{Answer, BoxFuture, CallError, Pipeline, Rules, ToolCall, dispatch::dispatch};

/// What a pre gate decides.
#[derive(Debug, Clone, PartialEq)]
pub enum GateDecision {
    Allow,
    /// Refuse, with the reason the model reads; `code` is the stable machine code.
    Deny {
        reason: String,
        code: &'static str,
    },
    /// Ask the user (through elicitation); without a channel this is a deny.
    Ask {
        reason: String,
    },
}

/// What a post hook decides.
#[derive(Debug, Clone, PartialEq)]
pub enum PostDecision {
    /// Keep the result (both `None`), or replace it. A replacement is whole, so that a
    /// redaction cannot leak through the part it did not mention:
    /// - new `content` alone drops `structuredContent`; for a tool with an `outputSchema`
    ///   (which promises structured content) that is refused as `INVALID_TOOL_OUTPUT`;
    /// - new `structured_content` is checked against the `outputSchema`; without new
    ///   `content` the content becomes its JSON text.
    Accept {
        content: Option<Vec<ContentBlock>>,
        structured_content: Option<serde_json::Value>,
    },
    /// Turn the result into an error whose content is `feedback`.
    Block {
        feedback: String,
        code: &'static str,
    },
}

/// Runs before the upstream is called.
pub trait PreGate: Send + Sync {
    fn check<'a>(&'a self, call: &'a ToolCall) -> BoxFuture<'a, GateDecision>;
}

/// Wraps the rest of the chain: may call `next` once, several times, or not at all.
///
/// `cancel` fires when the call is cancelled (by the client, by its session's end, or by a
/// drain that outlasts its grace); pass it, or a child of it, to `next`. Nothing inside
/// cancels the token a wrapper passes on: the timeout cancels a child of it, so after
/// `TOOL_TIMEOUT` it is still good for a fallback or another try (`tests/rust_stages.rs`).
pub trait Around: Send + Sync {
    fn around<'a>(
        &'a self,
        call: &'a ToolCall,
        cancel: CancellationToken,
        next: Next<'a>,
    ) -> BoxFuture<'a, Result<Answer, CallError>>;

    /// Whether this wrapper has anything to do for `call`; one that has not is skipped, which
    /// saves the boxed future of its `around` (the chain runs once or more per call).
    fn wraps(&self, _call: &ToolCall) -> bool {
        true
    }
}

/// Runs on the upstream's result, in order.
pub trait PostHook: Send + Sync {
    fn after<'a>(
        &'a self,
        call: &'a ToolCall,
        result: &'a CallToolResult,
    ) -> BoxFuture<'a, PostDecision>;
}

/// The rest of the around chain, ending in the dispatch to the upstream.
#[derive(Clone, Copy)]
pub struct Next<'a> {
    pub(super) chain: &'a [Arc<dyn Around>],
    pub(super) pipeline: &'a Pipeline,
    pub(super) rules: &'a Rules,
    /// Set by the pipeline when the token it runs the chain with is this call's alone: the
    /// admitted call's (the drain's child of the client's, or a fast path's own token, whose
    /// map reads only who cancelled), not a token a program's host passed in.
    pub(super) own_token: bool,
    /// The token the wrapper given this `Next` was given is this call's alone: it came
    /// straight from the pipeline (with `own_token`), and nobody reads it after the chain.
    given_own_token: bool,
}

impl PostDecision {
    /// Keep the result as it is.
    pub const KEEP: PostDecision = PostDecision::Accept {
        content: None,
        structured_content: None,
    };
}

impl<'a> Next<'a> {
    /// The pipeline's own `Next`: the whole chain, then the dispatch.
    pub(super) fn chain(
        chain: &'a [Arc<dyn Around>],
        pipeline: &'a Pipeline,
        rules: &'a Rules,
        own_token: bool,
    ) -> Self {
        Self {
            chain,
            pipeline,
            rules,
            own_token,
            given_own_token: false,
        }
    }

    /// Whether the token the wrapper holding this `Next` was given may be cancelled as it
    /// is: nobody reads it after the chain (a fast path keeps a clone only to cancel it, and
    /// tells a client's cancel by its map). Otherwise whoever passed it (retry, another
    /// wrapper, a program's host) may still need it.
    pub(crate) fn owns_token(&self) -> bool {
        self.given_own_token
    }

    /// Runs the rest of the chain; `cancel` reaches the upstream as `notifications/cancelled`.
    pub fn run(
        self,
        call: &'a ToolCall,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, Result<Answer, CallError>> {
        match self.wrapper(call) {
            Some((wrapper, next)) => wrapper.around(call, cancel, next),
            None => Box::pin(dispatch(self.pipeline, self.rules, call, cancel)),
        }
    }

    /// [`run`](Self::run) for a wrapper: the dispatch at the end is not boxed but runs inside
    /// the wrapper's own future (normally the timeout's), one allocation fewer per call.
    pub fn run_inline(
        self,
        call: &'a ToolCall,
        cancel: CancellationToken,
    ) -> impl Future<Output = Result<Answer, CallError>> + Send + 'a {
        match self.wrapper(call) {
            Some((wrapper, next)) => Either::Left(wrapper.around(call, cancel, next)),
            None => Either::Right(dispatch(self.pipeline, self.rules, call, cancel)),
        }
    }

    /// The first wrapper of the rest that wraps `call`, and what follows it.
    fn wrapper(self, call: &ToolCall) -> Option<(&'a Arc<dyn Around>, Next<'a>)> {
        let mut chain = self.chain;
        while let Some((wrapper, rest)) = chain.split_first() {
            if wrapper.wraps(call) {
                let next = Next {
                    chain: rest,
                    pipeline: self.pipeline,
                    rules: self.rules,
                    // What this wrapper passes on is its own business.
                    own_token: false,
                    given_own_token: self.own_token,
                };
                return Some((wrapper, next));
            }
            chain = rest;
        }
        None
    }
}
