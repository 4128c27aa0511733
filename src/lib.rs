//! toolgate: one MCP server in front of many.
//!
//! # Map
//! - [`config`]: `servers.toml` + `TOOLGATE_*` → validated [`config::Config`].
//! - [`clean`]: invisible characters (zero-width, bidi, control, tag) stripped from the
//!   descriptions and titles of imported tools, prompts and resources, and logged.
//! - [`pinning`]: the rug-pull guard. `toolgate pin` writes `toolgate.lock` (each tool's
//!   definition and canonical hash); at every import a tool that no longer matches is
//!   withheld or served with a warning, with a diff in the log; new tools follow `on_new`.
//! - [`upstream`]: one rmcp client per server (stdio child in its own process group, or
//!   streamable HTTP) under a supervisor task that imports tools, follows `list_changed`,
//!   pings, and restarts with backoff; forwards calls, cancels and progress; every answer is
//!   bounded by `max_message_bytes` (stdio lines, HTTP bodies and SSE events). An HTTP server
//!   with `auth` is signed in to as an OAuth client ([`upstream::oauth`]: `toolgate login`,
//!   stored and refreshed tokens, client_credentials tokens renewed). Reports
//!   [`upstream::UpstreamEvent`]s (a dead server's are withdrawn); never touches the registry.
//! - [`registry`]: pure (no I/O, no async). Each layer's tools (global servers, each
//!   profile's own servers), named by the prefix policy ([`registry::names`]), merged and
//!   masked by profile restrictions ([`registry::restrict`]) into one immutable
//!   [`registry::View`] per profile, with `run_code` in `code`/`both` mode. Each entry
//!   carries its call policy (compiled validators, timeout, retry). Prompts, resources and
//!   templates are named, layered and masked the same way ([`registry::passthrough`]). Every
//!   entry keeps what its upstream listed that rmcp's typed item cannot hold
//!   ([`registry::extra`]), merged back into the lists clients get.
//! - [`relay`]: which client session gets what an upstream sends unasked: log messages,
//!   resource updates, and its sampling / elicitation / roots requests.
//! - [`gateway`]: owns the registry, applies upstream events (pinning, then cleaning, then
//!   call policies), publishes views on a `watch`, and decides readiness (first starts in, or
//!   the start grace over, and the config checked).
//!   [`gateway::Gateway::reload`] (SIGHUP, `serve --watch`: [`gateway::triggers`]) swaps the
//!   configuration, the pipeline's [`pipeline::Rules`] and the views, and starts, restarts or
//!   retires only the servers whose config changed; a retired one stops once its calls are over.
//! - [`pipeline`]: the one entry point for a call: resolve in the caller's view → validate
//!   arguments → pre gates → around wrappers (retry, timeout) → upstream → post hooks; audit
//!   and metrics. Its traits are the extension seam.
//! - [`hooks`]: `[[hooks]]` from the config (HTTP or long-lived command) as gates / post hooks.
//! - [`code_mode`]: `run_code`: the SDK text (pure), the warm pool of sandboxed `toolgate
//!   worker` processes running Boa, and the host that turns a program's `tools.x()` into
//!   sub-calls through the pipeline.
//! - [`child`]: every child process (upstream, command hook, worker): the environment it
//!   gets (a base set plus its own `env`) and the open-file limit the gateway started with
//!   (`serve` raises its own), its own process group, killed on drop and, on Linux, with the
//!   gateway (`PR_SET_PDEATHSIG`; both set in the crate's one `unsafe` block); stopped gently
//!   (stdin closed, SIGTERM, SIGKILL).
//! - [`drain`]: stopping cleanly: on SIGTERM, SIGINT or stdin EOF no new calls
//!   (`SHUTTING_DOWN`), calls in flight finish within `drain_grace_ms`, the rest are cancelled.
//! - [`downstream`]: the rmcp `ServerHandler` clients talk to, bound to a profile, over stdio
//!   or HTTP (`/mcp`, `/mcp/{profile}`, bearer tokens: static, or an identity provider's JWTs
//!   with [`downstream::http::oauth`], a session bound to the subject that opened it;
//!   `/metrics`); prompts, resources,
//!   completion and logging level are answered from the view and forwarded to their server;
//!   the four lists are answered as JSON with every upstream field ([`downstream::faithful`]);
//!   tasks (MCP 2025-11-25: task-augmented `tools/call`, `tasks/*`) are renamed the same way
//!   and routed to the owning server under per-owner ids ([`downstream::tasks`],
//!   [`relay::tasks`]); a 2026-07-28 client's tasks (the SEP-2663 extension) are bridged onto
//!   the upstream's 2025-11-25 ones ([`relay::tasks::Bridge`]).
//! - [`import`]: `toolgate import`: a client's MCP config (Claude Desktop, Cursor, VS Code,
//!   Windsurf) → `servers.toml`, secrets moved to `${VAR}`s; the snippet for the client.
//! - [`telemetry`]: the `tools/call` span of every call (hooks and upstream requests as
//!   children, a program's sub-calls under its `run_code`), W3C `traceparent` in and out,
//!   and the optional OTLP/HTTP export ([`telemetry::export`]).
//! - [`plain_json`]: a strict byte walk over plain JSON (no escapes, integers) that reads a
//!   `tools/call` line or POST body, and an upstream's answer line with its result's top-level
//!   keys, before, and instead of, serde; what it cannot read exactly as serde would is left
//!   to serde.
//! - [`error`]: stable error codes and their single mapping to JSON-RPC / `isError` results.
//! - [`commands`]: the one-shot commands `check`, `tools`, `sdk` and `call` (`main.rs` only
//!   parses the command line, starts the gateway and dispatches).
//! - [`code_mode`]: programs that call tools, run in sandboxed `toolgate worker` processes (Boa + oxc,
//!   rlimits, seccomp) that a warm [`code_mode::pool::WorkerPool`] starts, feeds and kills.
//!
//! # A call
//! client `tools/call` → [`downstream::GatewayService`] takes its profile's current view →
//! [`pipeline::Pipeline::execute`] resolves the exposed name to (server, upstream name) and
//! runs the stages → [`upstream::Upstream::call`] forwards it, relaying progress and
//! cancellation → the result comes back unchanged, or a failure goes through
//! [`error::into_mcp`].
//! It all runs in the call's `tools/call` span ([`telemetry`]), whose context reaches
//! hooks and the upstream as `traceparent`.
//!
//! The fast path of the same call over stdio: the client's lines (stdin and stdout both pipes,
//! or both sockets as Node gives, are read and written through the reactor:
//! [`downstream::stdio`]) are read by a task of their own, where [`downstream::fast`] takes
//! the `tools/call` line before rmcp decodes it (rmcp's service loop wakes only for the
//! lines it is to decode) → [`pipeline::Pipeline::execute_answer`]
//! runs the same stages → [`upstream::Upstream::call_raw`] writes the request on the stdio
//! upstream's pipe, and the task that reads that server's stdout hands back the answer line
//! ([`upstream::raw`]) without waking rmcp's client → unless a stage had to decode it, the
//! client's answer is written around the upstream's bytes. Over HTTP,
//! [`downstream::http::fast`] takes such a call's POST on a live 2025-era session after the
//! front's checks and answers it beside rmcp's session worker, through the same entry. A
//! 2026-07-28 call (no session) is taken by [`downstream::http::modern`]: the handler's
//! exchange ([`rounds`]) and the pipeline run as under rmcp, without rmcp's per-request
//! service; the client is reached through the response ([`relay::Reach`]), and a raw result
//! is written as over stdio.
//!
//! A `run_code` call takes the same path; at the base of the around chain
//! [`code_mode::CodeRunner`] hands the program to a worker, and each `await tools.x(args)`
//! comes back as a sub-call `<call_id>:code:<n>` into [`pipeline::Pipeline::execute`] for the
//! same profile and view.
//!
//! # Something an upstream asks
//! an upstream's `sampling/createMessage` (or elicitation, roots) during a call → its
//! [`upstream`] client handler → [`relay::Relay::requester`] picks the session with a call
//! in flight on that server → the client's answer goes back to the upstream. For a 2026-07-28
//! call the request goes to the call's [`rounds::AskSink`] instead: the call's work runs in a
//! task ([`rounds::Exchange`]), the client is answered with an `InputRequiredResult` and a
//! `requestState` naming the parked exchange, and its retry's `inputResponses` go back to the
//! upstream ([`rounds`]).
//!
//! # A change
//! upstream `notifications/{tools,prompts,resources}/list_changed` → its supervisor
//! re-imports → event → the gateway's registry owner checks the tools against the lock
//! ([`pinning::Pins::apply`]), cleans them ([`clean`]) and rebuilds every profile's view →
//! each session whose own view's fingerprint for that list changed gets the notification.

// One audited `unsafe` block (the parent-death signal in `child`) allows it for itself.
#![deny(unsafe_code)]

pub mod child;
pub mod clean;
pub mod code_mode;
pub mod commands;
pub mod config;
pub mod downstream;
pub mod drain;
pub mod error;
pub mod gateway;
pub mod hooks;
pub mod import;
pub mod pinning;
pub mod pipeline;
pub(crate) mod plain_json;
pub mod registry;
pub mod relay;
pub mod rounds;
pub mod telemetry;
pub mod upstream;

/// A hash map for keys toolgate or its config chose (tool, server and session names, raw
/// call numbers), looked up on every call: foldhash, randomly seeded per process, instead of
/// SipHash. Keys a client chooses and inserts (request ids) stay on the standard hasher
/// where the map serves more than that one client; a stdio gateway serves one client, whose
/// request ids are hashed with foldhash ([`downstream::fast::IdsInFlight`]).
pub(crate) type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
