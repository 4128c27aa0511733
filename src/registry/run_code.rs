//! The gateway's own `run_code` entry of a view: its SDK description, input schema and call policy.

use std::sync::Arc;

use rmcp::model::Tool;

use super::{CallPolicy, RUN_CODE, Target, ToolEntry, View, layers::fingerprint};
use crate::{
    code_mode::sdk::{self, SdkForm, SdkTool},
    config::{CodeSettings, ServerId, ServerName},
};

pub(super) fn sdk_tool(entry: &ToolEntry) -> SdkTool<'_> {
    SdkTool {
        name: &entry.exposed,
        server: entry.server.name.as_str(),
        tool: &entry.tool,
    }
}

/// `run_code` for a view whose upstream tools are `entries`: its description carries their
/// SDK (inline, or the catalog form for a large set). The `previous` view's, when that had
/// these very entries: its description would come out the same, so neither it nor its hash
/// is made again by a rebuild for a change this view does not see.
pub(super) fn run_code_entry(
    entries: &[Arc<ToolEntry>],
    code: &CodeSettings,
    previous: Option<&View>,
) -> Arc<ToolEntry> {
    if let Some(kept) = previous.and_then(|view| unchanged(view, entries)) {
        return kept;
    }
    let tools: Vec<SdkTool<'_>> = entries.iter().map(|e| sdk_tool(e)).collect();
    let (description, _form) =
        sdk::run_code_description(&tools, code.sdk, code.sdk_docs, code.sdk_inline_max_tokens);
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "code": {
                "type": "string",
                "description": "The program: the body of an async function, in JavaScript or TypeScript."
            },
            "description": {
                "type": "string",
                "description": "What the program does, in a few words (shown to the user and in logs)."
            }
        },
        "required": ["code"],
        "additionalProperties": false
    });
    let input = jsonschema::validator_for(&schema).ok();
    let schema = match schema {
        serde_json::Value::Object(schema) => schema,
        _ => Default::default(),
    };
    let mut tool = Tool::new(RUN_CODE, description, Arc::new(schema));
    tool.annotations = Some(
        rmcp::model::ToolAnnotations::new()
            .read_only(false)
            .open_world(true),
    );
    Arc::new(ToolEntry {
        exposed: RUN_CODE.into(),
        server: ServerId::global(ServerName::gateway()),
        upstream_name: RUN_CODE.to_owned(),
        fingerprint: fingerprint(&tool),
        tool,
        extra: None,
        policy: Arc::new(CallPolicy {
            input,
            output: None,
            // The worker pool's own deadline ends a run with a proper `timeout` outcome; this
            // only backs it up.
            timeout_ms: code.timeout_ms + RUN_CODE_TIMEOUT_GRACE_MS,
            retry: None,
            header_params: false,
        }),
        target: Target::RunCode,
    })
}

/// The `run_code` entry of `previous` if its upstream entries are `entries` (the same `Arc`s,
/// in order). The registry puts `run_code` last.
fn unchanged(previous: &View, entries: &[Arc<ToolEntry>]) -> Option<Arc<ToolEntry>> {
    let (run_code, upstream) = previous.entries().split_last()?;
    let same = run_code.target == Target::RunCode
        && upstream.len() == entries.len()
        && upstream.iter().zip(entries).all(|(a, b)| Arc::ptr_eq(a, b));
    same.then(|| run_code.clone())
}

/// How long past its own limit a run may take before the pipeline's timeout ends it.
const RUN_CODE_TIMEOUT_GRACE_MS: u64 = 5_000;

/// The SDK form a view's `run_code` description would use (for `toolgate sdk`).
pub fn sdk_text(view: &View, code: &CodeSettings) -> (String, SdkForm) {
    let tools: Vec<SdkTool<'_>> = view.upstream_entries().map(|e| sdk_tool(e)).collect();
    sdk::run_code_description(&tools, code.sdk, code.sdk_docs, code.sdk_inline_max_tokens)
}
