//! The `toolgate` command: parse the CLI, set up logging to stderr, run, map failures to exit codes.

use std::{net::SocketAddr, path::PathBuf, process::ExitCode, sync::Arc};

use clap::{Parser, Subcommand};
use tokio_util::sync::CancellationToken;
use toolgate::{
    config, downstream, error,
    gateway::Gateway,
    pipeline::Call,
    upstream::{CallContext, ServerState},
};

/// Exit code for a bad configuration (sysexits EX_USAGE... EX_DATAERR is 65; 64 is what users
/// of this tool script against).
const EXIT_CONFIG: u8 = 64;

#[derive(Parser)]
#[command(
    name = "toolgate",
    version,
    about = "An MCP gateway: one MCP server in front of many"
)]
struct Cli {
    /// The configuration file.
    #[arg(long, short, global = true, default_value = "servers.toml")]
    config: PathBuf,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the merged tools as one MCP server (stdio unless --http is given).
    Serve {
        /// Serve streamable HTTP at http://ADDR/mcp instead of stdio.
        #[arg(long, value_name = "ADDR")]
        http: Option<SocketAddr>,
    },
    /// Start every server, print each one's state and tool count; non-zero exit on any problem.
    Check,
    /// Print the merged tool list: exposed name, server, first line of the description.
    Tools,
    /// Call one tool and print its result as JSON.
    Call {
        /// The exposed tool name (see `toolgate tools`).
        tool: String,
        /// The arguments, a JSON object.
        #[arg(default_value = "{}")]
        arguments: String,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let default_level = match cli.command {
        Command::Serve { .. } => "info",
        _ => "warn",
    };
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| format!("toolgate={default_level},rmcp=error").into()),
        )
        .init();

    let config = match config::load(&cli.config) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("toolgate: {error}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("toolgate: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(run(cli.command, config))
}

async fn run(command: Command, config: config::Config) -> ExitCode {
    let gateway = match Gateway::start(config).await {
        Ok(gateway) => gateway,
        Err(error) => {
            eprintln!("toolgate: {error}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let code = match command {
        Command::Serve { http } => serve(gateway.clone(), http).await,
        Command::Check => check(&gateway),
        Command::Tools => tools(&gateway),
        Command::Call { tool, arguments } => call(&gateway, tool, &arguments).await,
    };
    gateway.shutdown().await;
    code
}

async fn serve(gateway: Arc<Gateway>, http: Option<SocketAddr>) -> ExitCode {
    let served = match http {
        Some(addr) => {
            downstream::http::serve(gateway, addr, |bound| {
                // Tests and scripts read this line to learn the port when ADDR ends in :0.
                eprintln!("toolgate: listening on http://{bound}/mcp");
            })
            .await
        }
        None => downstream::stdio::serve(gateway).await,
    };
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("toolgate: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn check(gateway: &Gateway) -> ExitCode {
    let mut healthy = true;
    for upstream in gateway.upstreams.iter() {
        let state = upstream.state();
        healthy &= matches!(state, ServerState::Ready { .. });
        println!("{}\t{state}", upstream.name());
    }
    println!("{} tools exposed", gateway.view().len());
    if healthy {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn tools(gateway: &Gateway) -> ExitCode {
    let view = gateway.view();
    let width = view
        .entries()
        .iter()
        .map(|e| e.exposed.len())
        .max()
        .unwrap_or(0);
    let server_width = view
        .entries()
        .iter()
        .map(|e| e.server.as_str().len())
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
            entry.server.as_str()
        );
    }
    ExitCode::SUCCESS
}

async fn call(gateway: &Gateway, tool: String, arguments: &str) -> ExitCode {
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
        name: tool,
        arguments,
        context: CallContext {
            cancel: CancellationToken::new(),
            progress: None,
        },
    };
    let view = gateway.view();
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
