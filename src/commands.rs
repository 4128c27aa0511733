//! The one-shot commands of the `toolgate` binary (`check`, `tools`, `sdk`, `call`): each runs on a started gateway and prints to stdout.

use std::process::ExitCode;

use tokio_util::sync::CancellationToken;

use crate::{config::ProfileName, error, gateway::Gateway, pipeline::Call, upstream::ServerState};

/// Exit code for a bad configuration or command line (sysexits EX_USAGE).
pub const EXIT_CONFIG: u8 = 64;

pub fn check(gateway: &Gateway) -> ExitCode {
    let mut healthy = true;
    for upstream in gateway.upstreams.all() {
        let state = upstream.state();
        healthy &= matches!(state, ServerState::Ready { .. });
        let mut line = match upstream.needs_login() {
            Some(reason) => format!("{}\tneeds login: {reason}", upstream.name()),
            None => format!("{}\t{state}", upstream.name()),
        };
        let restarts = upstream.restarts();
        if restarts > 0 {
            line.push_str(&format!("; {restarts} restarts"));
            if let Some(error) = upstream.last_error() {
                line.push_str(&format!("; last error: {error}"));
            }
        }
        println!("{line}");
    }
    for profile in &gateway.config().profiles {
        let count = gateway.view(&profile.name).map_or(0, |v| v.len());
        println!("profile {}\t{count} tools", profile.name);
    }
    if healthy {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

pub fn tools(gateway: &Gateway, profile: &ProfileName) -> ExitCode {
    let view = gateway.view(profile).unwrap_or_default();
    let width = view
        .entries()
        .iter()
        .map(|e| e.exposed.len())
        .max()
        .unwrap_or(0);
    let server_width = view
        .entries()
        .iter()
        .map(|e| e.server.to_string().len())
        .max()
        .unwrap_or(0);
    for entry in view.entries() {
        let summary = entry
            .tool
            .description
            .as_deref()
            .and_then(|d| d.lines().next())
            .unwrap_or("");
        println!(
            "{:width$}  {:server_width$}  {summary}",
            entry.exposed,
            entry.server.to_string()
        );
    }
    ExitCode::SUCCESS
}

pub fn sdk(gateway: &Gateway, profile: &ProfileName) -> ExitCode {
    let view = gateway.view(profile).unwrap_or_default();
    let (text, form) = crate::registry::sdk_text(&view, &gateway.config().code);
    // The form goes to stderr so that stdout is exactly the text a model reads.
    eprintln!(
        "toolgate: {form:?} form, about {} tokens",
        crate::code_mode::sdk::estimate_tokens(&text)
    );
    println!("{text}");
    ExitCode::SUCCESS
}

pub async fn call(
    gateway: &Gateway,
    profile: &ProfileName,
    tool: String,
    arguments: &str,
) -> ExitCode {
    let arguments = match serde_json::from_str::<serde_json::Value>(arguments) {
        Ok(serde_json::Value::Object(map)) => Some(map),
        Ok(_) => {
            eprintln!("toolgate: the arguments must be a JSON object");
            return ExitCode::from(EXIT_CONFIG);
        }
        Err(error) => {
            eprintln!("toolgate: the arguments are not valid JSON: {error}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let call = Call {
        profile: profile.clone(),
        name: tool,
        arguments,
        cancel: CancellationToken::new(),
        progress: None,
        client: None,
        sub_call_id: None,
        trace: Default::default(),
    };
    let view = gateway.view(profile).unwrap_or_default();
    let outcome = gateway.pipeline.execute(&view, call).await;
    match outcome.map_err(error::into_mcp) {
        Ok(result) | Err(Ok(result)) => {
            match serde_json::to_string_pretty(&result) {
                Ok(text) => println!("{text}"),
                Err(error) => eprintln!("toolgate: cannot print the result: {error}"),
            }
            if result.is_error == Some(true) {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(Err(error)) => {
            eprintln!(
                "toolgate: {} (JSON-RPC error {})",
                error.message, error.code.0
            );
            ExitCode::FAILURE
        }
    }
}
