//! The `toolgate` command: parse the CLI, set up logging to stderr, run, map failures to exit codes.
//!
//! Stopping: the first SIGTERM/SIGINT (or, over stdio, the client closing stdin) drains the
//! calls in flight within `drain_grace_ms`, then the sessions close and every child stops; a
//! second signal cancels the calls in flight at once.
//!
//! Reloading: while serving, SIGHUP (and with `--watch`, a change of the file) re-reads the
//! configuration ([`toolgate::gateway::triggers`]).
#![deny(unsafe_code)]

use std::{convert::Infallible, net::SocketAddr, path::PathBuf, process::ExitCode, sync::Arc};

use clap::{Parser, Subcommand};
use tokio_util::{sync::CancellationToken, task::TaskTracker};
use toolgate::{
    commands::{self, EXIT_CONFIG},
    config::{self, ProfileName},
    downstream,
    gateway::Gateway,
    gateway::{StartError, StartOptions, triggers},
    telemetry::export::{self, LogStyle},
};

/// mimalloc instead of glibc's allocator: a forwarded call makes about 19 allocations, and
/// glibc spent about 11% of the gateway's instructions on them (BENCHMARKS.md, issue 10).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Exit code when an output file (the audit log) cannot be created (sysexits EX_CANTCREAT).
const EXIT_CANT_CREATE: u8 = 73;
/// Exit code of a command stopped by SIGINT or SIGTERM before it finished (128 + SIGINT).
const EXIT_INTERRUPTED: u8 = 130;

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
    /// The profile whose tools to serve, list or call (default: `default`).
    #[arg(long, short, global = true, value_name = "NAME")]
    profile: Option<String>,
    /// How log lines on stderr look: `text` (coloured only on a terminal) or `json` (one
    /// object per line, for log collectors).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
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
        /// Append one JSON line per call to FILE.
        #[arg(long, value_name = "FILE")]
        audit_log: Option<PathBuf>,
        /// Serve Prometheus metrics at http://ADDR/metrics, on a listener of their own
        /// (overrides `gateway.http.metrics_addr`; non-loopback needs `metrics_token`).
        #[arg(long, value_name = "ADDR")]
        metrics: Option<SocketAddr>,
        /// Reload the configuration when the file changes (as on SIGHUP).
        #[arg(long)]
        watch: bool,
    },
    /// Start every server, print each one's state and tool count; non-zero exit on any problem.
    Check,
    /// Print the merged tool list: exposed name, server, first line of the description.
    Tools,
    /// Print the profile's code-mode SDK: the `run_code` description a model reads.
    Sdk,
    /// Call one tool and print its result as JSON.
    Call {
        /// The exposed tool name (see `toolgate tools`).
        tool: String,
        /// The arguments, a JSON object.
        #[arg(default_value = "{}")]
        arguments: String,
    },
    /// Record every server's tool definitions in the lock (`toolgate.lock` beside the
    /// config); with --check, compare instead and exit 1 on any drift.
    Pin {
        /// Write nothing; list each changed, new or missing tool and exit 1 if there is one.
        #[arg(long)]
        check: bool,
    },
    /// Sign in to a `url` server whose `auth` has type = "oauth": print the authorization
    /// URL (and open a browser when there is one), wait for the redirect on 127.0.0.1, and
    /// store the tokens (see README, "Signing in to remote servers").
    Login {
        /// The server's name in the config.
        server: String,
        /// Only print the URL; do not try to open a browser.
        #[arg(long)]
        no_browser: bool,
        /// How long to wait for the redirect, in seconds.
        #[arg(long, value_name = "SECS", default_value_t = 300)]
        timeout: u64,
    },
    /// Delete the stored tokens of a server (the next start needs `toolgate login` again).
    Logout {
        /// The server's name in the config.
        server: String,
    },
    /// Convert an MCP client's config (Claude Desktop, Cursor, VS Code, Windsurf) into a
    /// servers.toml, or print the snippet that points a client at toolgate.
    Import(toolgate::import::Options),
    /// Run code-mode programs in a sandbox (started by the gateway itself).
    #[command(hide = true)]
    Worker(toolgate::code_mode::worker::Options),
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Before logging and configuration: a worker must not read files or the environment.
    if let Command::Worker(options) = cli.command {
        return toolgate::code_mode::worker::main(options);
    }
    // Reads a client's config, not ours: the servers.toml may not exist yet.
    if let Command::Import(options) = &cli.command {
        return toolgate::import::run(options, &cli.config, cli.profile.as_deref());
    }
    let default_level = match cli.command {
        Command::Serve { .. } => "info",
        _ => "warn",
    };
    let mut config = match config::load(&cli.config) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("toolgate: {error}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    // `opentelemetry*`: the span exporter's own errors (a collector that is down).
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        format!("toolgate={default_level},rmcp=error,opentelemetry=warn").into()
    });
    let style = match cli.log_format {
        // Colour codes are noise in a file or a pipe (Claude Desktop keeps stderr in a log).
        LogFormat::Text => LogStyle::Text {
            ansi: std::io::IsTerminal::is_terminal(&std::io::stderr()),
        },
        LogFormat::Json => LogStyle::Json,
    };
    let telemetry = match export::init(style, filter, &config.tracing) {
        Ok(telemetry) => telemetry,
        Err(error) => {
            eprintln!("toolgate: {error}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    // A one-shot command reports a server that failed to start; restarting it is the job of
    // a gateway that keeps running.
    if !matches!(cli.command, Command::Serve { .. }) {
        config.supervise.restart = false;
    }
    let serving_http = matches!(cli.command, Command::Serve { http: Some(_), .. });
    let profile = match select_profile(&config, cli.profile.as_deref(), serving_http) {
        Ok(profile) => profile,
        Err(message) => {
            eprintln!("toolgate: {message}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    // Serving runs on one thread, which spares every call the hand-offs and wake-ups
    // between workers (BENCHMARKS.md, issue 10). `TOKIO_WORKER_THREADS` (which tokio reads)
    // asks for tokio's worker pool instead, for HTTP sessions that need more than a core.
    let workers = match worker_threads() {
        Ok(workers) => workers,
        Err(message) => {
            eprintln!("toolgate: {message}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let one_thread = matches!(cli.command, Command::Serve { .. }) && workers.is_none();
    let mut builder = match one_thread {
        true => tokio::runtime::Builder::new_current_thread(),
        false => tokio::runtime::Builder::new_multi_thread(),
    };
    if let Some(workers) = workers {
        builder.worker_threads(workers);
    }
    let runtime = match builder.enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("toolgate: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(run(cli.command, config, profile, cli.config));
    // Every child is stopped by now. Do not wait for a blocking read of stdin (the fallback
    // when stdin and stdout are neither both pipes nor both stream sockets) that only the
    // client can end.
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    // Every call has ended: its spans are batched, and sent now (bounded).
    telemetry.shutdown();
    code
}

/// `TOKIO_WORKER_THREADS`, read here: tokio, left to read it, panics on a value that is not a
/// whole number above 0.
fn worker_threads() -> Result<Option<usize>, String> {
    let Some(value) = std::env::var_os("TOKIO_WORKER_THREADS") else {
        return Ok(None);
    };
    value
        .to_str()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|n| *n > 0)
        .map(Some)
        .ok_or_else(|| {
            format!(
                "environment variable TOKIO_WORKER_THREADS={value:?}: must be a whole number \
                 of worker threads, at least 1"
            )
        })
}

/// The profile named on the command line, or `default`; over HTTP the caller picks per request.
fn select_profile(
    config: &config::Config,
    named: Option<&str>,
    serving_http: bool,
) -> Result<ProfileName, String> {
    let Some(named) = named else {
        if config.require_profile && !serving_http {
            return Err(format!(
                "{}: key `gateway.require_profile` is true: pass --profile NAME",
                config.source
            ));
        }
        return Ok(ProfileName::default_profile());
    };
    config
        .profiles
        .iter()
        .find(|p| p.name.as_str() == named)
        .map(|p| p.name.clone())
        .ok_or_else(|| {
            let known: Vec<&str> = config.profiles.iter().map(|p| p.name.as_str()).collect();
            format!(
                "unknown profile {named:?} (configured in {}: {})",
                config.source,
                known.join(", ")
            )
        })
}

async fn run(
    command: Command,
    config: config::Config,
    profile: ProfileName,
    path: PathBuf,
) -> ExitCode {
    // Handlers for SIGTERM/SIGINT are registered here, before anything is spawned, so a
    // signal during startup or before the first client still shuts the upstreams down
    // instead of killing the process while its children live on in their own groups.
    let signals = match downstream::Termination::register() {
        Ok(signals) => signals,
        Err(error) => {
            eprintln!("toolgate: cannot listen for signals: {error}");
            return ExitCode::FAILURE;
        }
    };
    // Serving reloads on SIGHUP, whose default action would end the process: registered as
    // early as the others.
    let hangup = match &command {
        Command::Serve { .. } => match triggers::Hangup::register() {
            Ok(hangup) => Some(hangup),
            Err(error) => {
                eprintln!("toolgate: cannot listen for SIGHUP: {error}");
                return ExitCode::FAILURE;
            }
        },
        _ => None,
    };
    let reloads = hangup.map(|hangup| Reloads { path, hangup });
    let signalled = Signalled::default();
    // Owned here, and ended by `done` once the gateway has stopped.
    let done = CancellationToken::new();
    let watcher = TaskTracker::new();
    watcher.spawn(watch_signals(signals, signalled.clone(), done.clone()));
    let code = run_gateway(command, config, profile, reloads, &signalled).await;
    done.cancel();
    watcher.close();
    watcher.wait().await;
    code
}

/// What the signals asked for so far.
#[derive(Clone, Default)]
struct Signalled {
    /// The first SIGTERM/SIGINT: stop, draining calls in flight.
    stop: CancellationToken,
    /// A second one: cancel the calls in flight now instead of at the end of the grace.
    hurry: CancellationToken,
}

async fn watch_signals(
    mut signals: downstream::Termination,
    signalled: Signalled,
    done: CancellationToken,
) {
    let steps = [
        (&signalled.stop, "stopping on signal"),
        (
            &signalled.hurry,
            "second signal: cancelling the calls in flight",
        ),
    ];
    for (token, message) in steps {
        tokio::select! {
            () = signals.recv() => {}
            // The gateway stopped by itself.
            () = done.cancelled() => return,
        }
        tracing::info!("{message}");
        token.cancel();
    }
}

/// Where a serving gateway reloads from, and its SIGHUP.
struct Reloads {
    path: PathBuf,
    hangup: triggers::Hangup,
}

async fn run_gateway(
    command: Command,
    config: config::Config,
    profile: ProfileName,
    reloads: Option<Reloads>,
    signalled: &Signalled,
) -> ExitCode {
    if let Command::Login {
        server,
        no_browser,
        timeout,
    } = &command
    {
        let options = toolgate::upstream::oauth::login::LoginOptions {
            open_browser: !no_browser,
            timeout: std::time::Duration::from_secs(*timeout),
            max_message_bytes: config.supervise.max_message_bytes,
        };
        return tokio::select! {
            done = toolgate::upstream::oauth::login::login(&config, server, &options) => match done {
                Ok(()) => ExitCode::SUCCESS,
                Err(error) => {
                    eprintln!("toolgate: {error}");
                    ExitCode::FAILURE
                }
            },
            () = signalled.stop.cancelled() => ExitCode::from(EXIT_INTERRUPTED),
        };
    }
    if let Command::Logout { server } = &command {
        return match toolgate::upstream::oauth::login::logout(&config, server) {
            Ok((true, path)) => {
                println!("Signed out of \"{server}\": deleted {}.", path.display());
                ExitCode::SUCCESS
            }
            Ok((false, _)) => {
                println!("No stored tokens for \"{server}\".");
                ExitCode::SUCCESS
            }
            Err(error) => {
                eprintln!("toolgate: {error}");
                ExitCode::FAILURE
            }
        };
    }
    if let Command::Pin { check } = command {
        return tokio::select! {
            code = toolgate::pinning::command::run(&config, check) => code,
            // Dropping the run kills every child started so far; nothing was written.
            () = signalled.stop.cancelled() => ExitCode::from(EXIT_INTERRUPTED),
        };
    }
    if matches!(command, Command::Serve { .. }) {
        // Before anything is spawned: connections, upstream pipes and hooks all hold
        // descriptors; children get the starting limit back (`toolgate::child`).
        toolgate::child::raise_open_file_limit();
    }
    let options = StartOptions {
        audit_log: match &command {
            Command::Serve { audit_log, .. } => audit_log.clone(),
            _ => None,
        },
        // Serving answers `initialize` at once; one-shot commands need every server.
        in_background: matches!(command, Command::Serve { .. }),
        ..StartOptions::default()
    };
    let started = tokio::select! {
        // Started (or failed to).
        started = Gateway::start_with(config, options) => started,
        // A signal during startup: dropping the start kills every child started so far.
        () = signalled.stop.cancelled() => return ExitCode::SUCCESS,
    };
    let gateway = match started {
        Ok(gateway) => gateway,
        Err(error) => {
            eprintln!("toolgate: {error}");
            return match error {
                StartError::AuditLog { .. } => ExitCode::from(EXIT_CANT_CREATE),
                _ => ExitCode::from(EXIT_CONFIG),
            };
        }
    };
    let work = async {
        let code = match command {
            Command::Serve {
                http,
                metrics,
                watch,
                ..
            } => {
                let unservable = async {
                    match gateway.ready().await {
                        Err(error) => error,
                        Ok(()) => std::future::pending().await,
                    }
                };
                // Owned here: stopped once serving is over, before the gateway shuts down.
                let stop_reloads = CancellationToken::new();
                let reloader = TaskTracker::new();
                if let Some(Reloads { path, hangup }) = reloads {
                    reloader.spawn(triggers::follow(
                        gateway.clone(),
                        path,
                        hangup,
                        watch,
                        stop_reloads.clone(),
                    ));
                }
                reloader.close();
                let code = tokio::select! {
                    code = serve(gateway.clone(), http, metrics, profile, &signalled.stop) => code,
                    // The start check failed once the servers were in: refuse, as before serving.
                    error = unservable => {
                        eprintln!("toolgate: {error}");
                        signalled.stop.cancel();
                        ExitCode::from(EXIT_CONFIG)
                    }
                };
                stop_reloads.cancel();
                reloader.wait().await;
                code
            }
            Command::Check => commands::check(&gateway),
            Command::Tools => commands::tools(&gateway, &profile),
            Command::Sdk => commands::sdk(&gateway, &profile),
            Command::Call { tool, arguments } => {
                commands::call(&gateway, &profile, tool, &arguments).await
            }
            // Served by `main` before anything else starts, or above without a gateway.
            Command::Worker(_)
            | Command::Import(_)
            | Command::Pin { .. }
            | Command::Login { .. }
            | Command::Logout { .. } => ExitCode::FAILURE,
        };
        // Drains whatever is still in flight, then stops every child.
        gateway.shutdown().await;
        code
    };
    let hurry = async {
        signalled.hurry.cancelled().await;
        gateway.drain.hurry();
        std::future::pending::<Infallible>().await
    };
    tokio::select! {
        code = work => code,
        never = hurry => match never {},
    }
}

async fn serve(
    gateway: Arc<Gateway>,
    http: Option<SocketAddr>,
    metrics: Option<SocketAddr>,
    profile: ProfileName,
    stop: &CancellationToken,
) -> ExitCode {
    let metrics_addr = metrics.or(gateway.config().http.metrics_addr);
    if let Some(Err(error)) = metrics_addr.map(|a| gateway.config().http.check_metrics_addr(a)) {
        eprintln!("toolgate: {error}");
        return ExitCode::from(EXIT_CONFIG);
    }
    let metrics = match metrics_addr {
        Some(addr) => match downstream::http::MetricsListener::bind(&gateway, addr).await {
            Ok(listener) => {
                // Tests and scripts read this line to learn the port when ADDR ends in :0.
                eprintln!(
                    "toolgate: metrics on http://{}/metrics",
                    listener.local_addr()
                );
                Some(listener)
            }
            Err(error) => {
                eprintln!("toolgate: {error:#}");
                return ExitCode::FAILURE;
            }
        },
        None => None,
    };
    // Fired once the calls in flight are drained: only then do the sessions close, so that
    // their answers still reach the clients.
    let end_sessions = CancellationToken::new();
    let stop_metrics = end_sessions.child_token();
    let mcp = async {
        let served = match http {
            Some(addr) => {
                downstream::http::serve(gateway.clone(), addr, end_sessions.clone(), |bound| {
                    // Tests and scripts read this line to learn the port when ADDR ends in :0.
                    // One write: `eprintln!` writes its pieces one by one, and another writer
                    // on the same stderr (a log line, valgrind) could land inside the line.
                    let line = format!("toolgate: listening on http://{bound}/mcp\n");
                    let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
                })
                .await
            }
            None => downstream::stdio::serve(gateway.clone(), profile, end_sessions.clone()).await,
        };
        // The metrics outlive no MCP session.
        stop_metrics.cancel();
        served
    };
    let drain_on_signal = async {
        stop.cancelled().await;
        gateway.drain.run().await;
        end_sessions.cancel();
        std::future::pending::<Infallible>().await
    };
    let mcp = async {
        tokio::select! {
            served = mcp => served,
            never = drain_on_signal => match never {},
        }
    };
    let scrapes = async {
        if let Some(listener) = metrics {
            listener.serve(gateway.clone(), stop_metrics.clone()).await;
        }
    };
    let (served, ()) = tokio::join!(mcp, scrapes);
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("toolgate: {error:#}");
            ExitCode::FAILURE
        }
    }
}
