//! Code mode: one `run_code` tool; the model's program calls the profile's tools through a typed SDK, in a sandboxed worker.
//!
//! - [`sdk`] (pure): the visible tools → TypeScript declarations for `run_code`'s description,
//!   and the catalog (`catalog.search`/`describe`) for large tool sets.
//! - [`pool`]: warm `toolgate worker` processes; one run at a time each, killed at the
//!   deadline and replaced; enforces the call, output and parallelism limits.
//! - [`worker`] + [`sandbox`]: the worker side: rlimits and seccomp, TypeScript stripped with
//!   oxc, a fresh Boa context per run; [`wire`] is the JSON-lines protocol between the two.
//! - `host`: `run_code` as a pipeline tool: a program's `await tools.x(args)` is a sub-call
//!   `<call_id>:code:<n>` through the whole pipeline again, for the caller's profile.

mod host;
pub mod pool;
pub mod sandbox;
pub mod sdk;
pub mod wire;
pub mod worker;

pub use host::CodeRunner;
