//! Code mode: one `run_code` tool whose program calls the profile's tools through a generated TypeScript SDK.

pub mod sdk;
