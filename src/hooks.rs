//! External hooks from `[[hooks]]`: an HTTP endpoint or a long-lived command, asked for a decision.
//!
//! Protocol (README has it in full): the request is one JSON object
//! `{stage, call_id, profile, tool, server, upstream_tool, arguments[, subject][, result]}`
//! (`subject`: the `sub` of the caller's IdP token, when `[gateway.auth]` verified one); a pre hook
//! answers `{"decision": "allow" | "deny" | "ask", "reason"?}`, a post hook
//! `{"decision": "accept", "content"?, "structuredContent"?}` (a replacement is whole: see
//! [`PostDecision::Accept`](crate::pipeline::PostDecision::Accept)) or
//! `{"decision": "block", "feedback"}`. A command hook
//! gets one request per line on stdin and answers one line on stdout carrying the request's
//! `call_id`, so answers may come in any order. Anything else, a timeout, or a crash is a hook
//! error and follows `on_error`.

mod command;

use std::{sync::Arc, time::Duration};

use rmcp::model::{CallToolResult, ContentBlock};
use serde::Deserialize;
use serde_json::{Value, json};
use tracing::Instrument;

use crate::{
    config::{HookConfig, HookStage, HookTransport, OnError},
    pipeline::{BoxFuture, GateDecision, HOOK_FAILED, PostDecision, PostHook, PreGate, ToolCall},
    registry::restrict::glob_match,
};
use command::CommandHook;

#[derive(Debug, thiserror::Error)]
pub enum HookError {
    #[error("did not answer within {0}ms")]
    Timeout(u64),
    #[error("HTTP request failed: {0}")]
    Http(String),
    #[error("the hook process failed: {0}")]
    Process(String),
    #[error("answered something that is not a decision: {0}")]
    Garbage(String),
}

enum Transport {
    Http {
        client: reqwest::Client,
        url: String,
    },
    Command(CommandHook),
}

/// One configured hook, shared by the gate or post-hook adapter that runs it.
pub struct ExternalHook {
    config: HookConfig,
    transport: Transport,
}

impl ExternalHook {
    /// `http`: the gateway's one pooled client, shared by every HTTP hook and built by the
    /// first of them. Building one reads the system's CA certificates (about 19 million
    /// instructions and their memory), which a gateway without HTTP hooks does not pay.
    pub fn new(config: HookConfig, http: &std::cell::OnceCell<reqwest::Client>) -> Self {
        let transport = match &config.transport {
            HookTransport::Http { url } => Transport::Http {
                client: http.get_or_init(reqwest::Client::new).clone(),
                url: url.clone(),
            },
            HookTransport::Command { program, args, env } => Transport::Command(CommandHook::new(
                config.key.clone(),
                program.clone(),
                args.clone(),
                env.clone(),
            )),
        };
        Self { config, transport }
    }

    /// Stops a command hook's process group for good; nothing for an HTTP hook.
    pub async fn shutdown(&self) {
        if let Transport::Command(command) = &self.transport {
            command.shutdown().await;
        }
    }

    /// The `[[hooks]]` entry it runs: a reload keeps a hook whose entry is unchanged.
    pub fn config(&self) -> &HookConfig {
        &self.config
    }

    pub fn stage(&self) -> HookStage {
        self.config.stage
    }

    fn applies(&self, call: &ToolCall) -> bool {
        (self.config.profiles.is_empty() || self.config.profiles.contains(&call.profile))
            && self
                .config
                .tools
                .iter()
                .any(|glob| glob_match(glob, &call.entry.exposed))
    }

    fn request(&self, call: &ToolCall, result: Option<&CallToolResult>) -> Value {
        let mut request = json!({
            "stage": stage_name(self.config.stage),
            "call_id": call.call_id,
            "profile": call.profile.as_str(),
            "tool": call.entry.exposed,
            "server": call.entry.server.to_string(),
            "upstream_tool": call.entry.upstream_name,
            "arguments": call.arguments,
        });
        if let Some(subject) = call.client.as_ref().and_then(|c| c.subject.as_deref()) {
            request["subject"] = subject.into();
        }
        if let Some(result) = result {
            request["result"] = serde_json::to_value(result).unwrap_or(Value::Null);
        }
        request
    }

    /// Sends one request and waits, at most `timeout_ms`, for the answer. In a span of its
    /// own under the call's, whose context an HTTP hook gets as `traceparent`.
    async fn ask(&self, call: &ToolCall, request: Value) -> Result<Value, HookError> {
        let limit = self.config.timeout_ms;
        let span = tracing::debug_span!(
            target: "toolgate::call::hook",
            parent: &call.span,
            "hook",
            otel.kind = "client",
            otel.status_code = tracing::field::Empty,
            hook = %self.config.key,
            stage = stage_name(self.config.stage),
        );
        let asking = async {
            match &self.transport {
                Transport::Http { client, url } => {
                    let mut post = client.post(url);
                    if let Some(traceparent) = crate::telemetry::outgoing(&span, call.remote) {
                        post = post.header("traceparent", traceparent.to_string());
                    }
                    let response = post
                        .json(&request)
                        .send()
                        .await
                        .map_err(|e| HookError::Http(e.without_url().to_string()))?;
                    let status = response.status();
                    if !status.is_success() {
                        return Err(HookError::Http(format!("status {status}")));
                    }
                    let body = response
                        .bytes()
                        .await
                        .map_err(|e| HookError::Http(e.to_string()))?;
                    serde_json::from_slice(&body).map_err(|_| HookError::Garbage(preview(&body)))
                }
                Transport::Command(hook) => hook.ask(&call.call_id, &request).await,
            }
        };
        let answer = tokio::time::timeout(Duration::from_millis(limit), asking)
            .instrument(span.clone())
            .await
            .unwrap_or(Err(HookError::Timeout(limit)));
        if answer.is_err() {
            span.record("otel.status_code", "error");
        }
        answer
    }

    fn failed(&self, call: &ToolCall, error: &HookError) -> String {
        tracing::warn!(hook = %self.config.key, call_id = %call.call_id, tool = %call.entry.exposed, "hook failed: {error}");
        format!("hook {} failed: {error}", self.config.key)
    }
}

fn stage_name(stage: HookStage) -> &'static str {
    match stage {
        HookStage::Pre => "pre",
        HookStage::Post => "post",
    }
}

fn preview(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let mut preview: String = text.chars().take(120).collect();
    if text.chars().count() > 120 {
        preview.push('…');
    }
    preview
}

/// Reads a decision from the hook's answer without copying it; anything else is garbage,
/// reported with the answer itself so the hook's author sees what was wrong.
fn decode<T: serde::de::DeserializeOwned>(value: &Value) -> Result<T, HookError> {
    T::deserialize(value).map_err(|_| HookError::Garbage(value.to_string()))
}

#[derive(Deserialize)]
#[serde(tag = "decision", rename_all = "lowercase")]
enum PreAnswer {
    Allow {},
    Deny { reason: Option<String> },
    Ask { reason: Option<String> },
}

#[derive(Deserialize)]
#[serde(tag = "decision", rename_all = "lowercase")]
enum PostAnswer {
    Accept {
        content: Option<Vec<ContentBlock>>,
        #[serde(rename = "structuredContent")]
        structured_content: Option<Value>,
    },
    Block {
        feedback: String,
    },
}

/// A pre hook as a [`PreGate`].
pub struct ExternalGate(pub Arc<ExternalHook>);

impl PreGate for ExternalGate {
    fn check<'a>(&'a self, call: &'a ToolCall) -> BoxFuture<'a, GateDecision> {
        Box::pin(async move {
            let hook = &self.0;
            if !hook.applies(call) {
                return GateDecision::Allow;
            }
            let answer = hook
                .ask(call, hook.request(call, None))
                .await
                .and_then(|value| decode::<PreAnswer>(&value));
            match answer {
                Ok(PreAnswer::Allow {}) => GateDecision::Allow,
                Ok(PreAnswer::Deny { reason }) => GateDecision::Deny {
                    reason: reason.unwrap_or_else(|| {
                        format!("tool \"{}\" was denied by policy", call.entry.exposed)
                    }),
                    code: crate::pipeline::DENIED,
                },
                Ok(PreAnswer::Ask { reason }) => GateDecision::Ask {
                    reason: reason.unwrap_or_default(),
                },
                Err(error) => {
                    let reason = hook.failed(call, &error);
                    match hook.config.on_error {
                        OnError::Deny => GateDecision::Deny {
                            reason,
                            code: HOOK_FAILED,
                        },
                        OnError::Allow => GateDecision::Allow,
                    }
                }
            }
        })
    }
}

/// A post hook as a [`PostHook`].
pub struct ExternalPost(pub Arc<ExternalHook>);

impl PostHook for ExternalPost {
    fn after<'a>(
        &'a self,
        call: &'a ToolCall,
        result: &'a CallToolResult,
    ) -> BoxFuture<'a, PostDecision> {
        Box::pin(async move {
            let hook = &self.0;
            if !hook.applies(call) {
                return PostDecision::KEEP;
            }
            let answer = hook
                .ask(call, hook.request(call, Some(result)))
                .await
                .and_then(|value| decode::<PostAnswer>(&value));
            match answer {
                Ok(PostAnswer::Accept {
                    content,
                    structured_content,
                }) => PostDecision::Accept {
                    content,
                    structured_content,
                },
                Ok(PostAnswer::Block { feedback }) => PostDecision::Block {
                    feedback,
                    code: crate::pipeline::BLOCKED,
                },
                Err(error) => {
                    let feedback = hook.failed(call, &error);
                    match hook.config.on_error {
                        OnError::Deny => PostDecision::Block {
                            feedback,
                            code: HOOK_FAILED,
                        },
                        OnError::Allow => PostDecision::KEEP,
                    }
                }
            }
        })
    }
}
