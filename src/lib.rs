//! toolgate: one MCP server in front of many.
//!
//! # Map
//! - [`config`]: `servers.toml` + `TOOLGATE_*` → validated [`config::Config`].
//! - [`upstream`]: one rmcp client per server (stdio child in its own process group, or
//!   streamable HTTP); imports tools, follows `list_changed`, forwards calls, cancels and
//!   progress. Reports [`upstream::UpstreamEvent`]s; never touches the registry.
//! - [`registry`]: pure (no I/O, no async). Each layer's tools (global servers, each
//!   profile's own servers), named by the prefix policy ([`registry::names`]), merged and
//!   masked by profile restrictions ([`registry::restrict`]) into one immutable
//!   [`registry::View`] per profile, with `run_code` in `code`/`both` mode. Each entry
//!   carries its call policy (compiled validators, timeout, retry). Prompts, resources and
//!   templates are named, layered and masked the same way ([`registry::passthrough`]).
//! - [`relay`]: which client session gets what an upstream sends unasked: log messages,
//!   resource updates, and its sampling / elicitation / roots requests.
//! - [`gateway`]: owns the registry, applies upstream events, publishes views on a `watch`.
//! - [`pipeline`]: the one entry point for a call: resolve in the caller's view → validate
//!   arguments → pre gates → around wrappers (retry, timeout) → upstream → post hooks; audit
//!   and metrics. Its traits are the extension seam.
//! - [`hooks`]: `[[hooks]]` from the config (HTTP or long-lived command) as gates / post hooks.
//! - [`code_mode`]: `run_code`: the SDK text (pure), the warm pool of sandboxed `toolgate
//!   worker` processes running Boa, and the host that turns a program's `tools.x()` into
//!   sub-calls through the pipeline.
//! - [`child`]: what every child process inherits: a base environment plus its own `env`,
//!   and the open-file limit the gateway started with (`serve` raises its own).
//! - [`downstream`]: the rmcp `ServerHandler` clients talk to, bound to a profile, over stdio
//!   or HTTP (`/mcp`, `/mcp/{profile}`, bearer tokens, `/metrics`); prompts, resources,
//!   completion and logging level are answered from the view and forwarded to their server.
//! - [`import`]: `toolgate import`: a client's MCP config (Claude Desktop, Cursor, VS Code,
//!   Windsurf) → `servers.toml`, secrets moved to `${VAR}`s; the snippet for the client.
//! - [`error`]: stable error codes and their single mapping to JSON-RPC / `isError` results.
//! - [`code_mode`]: programs that call tools, run in sandboxed `toolgate worker` processes (Boa + oxc,
//!   rlimits, seccomp) that a warm [`code_mode::pool::WorkerPool`] starts, feeds and kills.
//!
//! # A call
//! client `tools/call` → [`downstream::GatewayService`] takes its profile's current view →
//! [`pipeline::Pipeline::execute`] resolves the exposed name to (server, upstream name) and
//! runs the stages → [`upstream::Upstream::call`] forwards it, relaying progress and
//! cancellation → the result comes back unchanged, or a failure goes through
//! [`error::into_mcp`].
//!
//! A `run_code` call takes the same path; at the base of the around chain
//! [`code_mode::CodeRunner`] hands the program to a worker, and each `await tools.x(args)`
//! comes back as a sub-call `<call_id>:code:<n>` into [`pipeline::Pipeline::execute`] for the
//! same profile and view.
//!
//! # Something an upstream asks
//! an upstream's `sampling/createMessage` (or elicitation, roots) during a call → its
//! [`upstream`] client handler → [`relay::Relay::requester`] picks the session with a call
//! in flight on that server → the client's answer goes back to the upstream.
//!
//! # A change
//! upstream `notifications/{tools,prompts,resources}/list_changed` → its supervisor
//! re-imports → event → the gateway's registry owner rebuilds every profile's view → each
//! session whose own view's fingerprint for that list changed gets the notification.

pub mod child;
pub mod code_mode;
pub mod config;
pub mod downstream;
pub mod error;
pub mod gateway;
pub mod hooks;
pub mod import;
pub mod pipeline;
pub mod registry;
pub mod relay;
pub mod upstream;
