//! `toolgate import`: an existing MCP client config (Claude Desktop, Cursor, VS Code,
//! Windsurf) → an equivalent `servers.toml`, and the snippet that points the client at toolgate.
//!
//! [`parse`] reads a client's JSON into entries, [`convert`] turns them into `[servers.*]`
//! tables (names made legal by [`names`], literal secrets moved to `${VAR}`s by [`secrets`] and
//! [`vars`]), and the `toml` crate writes the file, which is validated like any config before
//! it is written. Everything lossy is reported on stderr; secret values never are.
//!
//! Exit codes: 0 every server imported; 3 the file was written but some servers were skipped
//! (listed on stderr); 64 a bad argument, or (for the snippet) a `servers.toml` that does not
//! load; 65 the client config is not valid; 66 no client config found; 70 internal error (the
//! generated file did not validate); 73 the output file exists (without `--force`) or cannot
//! be written.

mod clients;
mod convert;
mod jsonc;
mod names;
mod parse;
mod secrets;
mod vars;

use std::{
    io::Write,
    path::{Path, PathBuf},
    process::ExitCode,
};

use figment::{
    Figment,
    providers::{Format, Toml},
};

pub use clients::{Client, Target};

use crate::config::{self, RawConfig};

/// Exit code when the file was written but some servers could not be carried over.
pub const EXIT_SKIPPED: u8 = 3;

/// `toolgate import`'s arguments (`--config` and `--profile` are the global ones).
#[derive(Debug, clap::Args)]
pub struct Options {
    /// The config to read: `claude`, `cursor`, `vscode`, `windsurf` (their usual places), or a
    /// file. Default: the one client whose config exists.
    #[arg(long, value_name = "CLIENT|FILE")]
    pub from: Option<String>,
    /// Write the servers.toml here instead of stdout (an existing file needs --force).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Overwrite the --out file.
    #[arg(long, requires = "out")]
    pub force: bool,
    /// Print the JSON that points this client at toolgate (stdio with --config and
    /// --profile, or --http URL) instead of importing.
    #[arg(long, value_name = "CLIENT", value_enum, conflicts_with_all = ["from", "out"])]
    pub print_client_config: Option<Target>,
    /// With --print-client-config: the URL of a running `toolgate serve --http`; with
    /// --profile, a URL ending in `/mcp` gets `/PROFILE` appended.
    #[arg(long, value_name = "URL", requires = "print_client_config")]
    pub http: Option<String>,
}

/// Everything that stops an import; each names the file or argument at fault.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("{0}")]
    Usage(String),
    /// The servers.toml a snippet would point at does not load.
    #[error("{0}")]
    Config(String),
    #[error("no {client} config found; looked for: {tried}")]
    NotFound { client: String, tried: String },
    #[error("cannot read {}: {message}", path.display())]
    Read { path: PathBuf, message: String },
    #[error("{}: {message}", path.display())]
    BadInput { path: PathBuf, message: String },
    #[error("{} exists; pass --force to overwrite it", .0.display())]
    OutExists(PathBuf),
    #[error("cannot write {}: {message}", path.display())]
    Write { path: PathBuf, message: String },
    #[error("the generated servers.toml does not validate (a toolgate bug): {0}")]
    Internal(String),
}

impl ImportError {
    /// sysexits codes, as for the rest of the command line.
    pub fn exit_code(&self) -> u8 {
        match self {
            ImportError::Usage(_) | ImportError::Config(_) => 64,
            ImportError::BadInput { .. } => 65,
            ImportError::NotFound { .. } | ImportError::Read { .. } => 66,
            ImportError::Internal(_) => 70,
            ImportError::OutExists(_) | ImportError::Write { .. } => 73,
        }
    }
}

/// Runs `toolgate import`; `config` and `profile` are the global `--config` and `--profile`.
pub fn run(options: &Options, config: &Path, profile: Option<&str>) -> ExitCode {
    let outcome = match options.print_client_config {
        Some(target) => print_client_config(target, options.http.as_deref(), config, profile),
        None => import(options),
    };
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            eprintln!("toolgate: {error}");
            ExitCode::from(error.exit_code())
        }
    }
}

fn import(options: &Options) -> Result<u8, ImportError> {
    let env = clients::Env::current();
    let paths = match options.from.as_deref() {
        Some(from) => match Client::parse(from) {
            Some(client) => existing(client, &env)?,
            None => vec![(PathBuf::from(from), None)],
        },
        None => detect(&env)?,
    };
    let mut files = Vec::with_capacity(paths.len());
    for (path, client) in paths {
        let file = parse::read(&path)?;
        eprintln!(
            "toolgate: read {} ({}: {} server(s) under `{}`)",
            path.display(),
            client.map_or("file", Client::title),
            file.entries.len(),
            file.format.key()
        );
        files.push(file);
    }
    let (generated, report) = convert::convert(&files);
    let text = toml::to_string(&generated)
        .map_err(|error| ImportError::Internal(format!("cannot serialize: {error}")))?;
    check_generated(&text)?;
    match &options.out {
        Some(out) => write_out(out, &text, options.force)?,
        None => print!("{text}"),
    }
    print_report(&report, generated.servers.len(), options.out.as_deref());
    Ok(if report.skipped.is_empty() {
        0
    } else {
        EXIT_SKIPPED
    })
}

/// The existing files of `client`, in the order they merge.
fn existing(
    client: Client,
    env: &clients::Env,
) -> Result<Vec<(PathBuf, Option<Client>)>, ImportError> {
    let locations = client.locations(env);
    let found: Vec<_> = locations
        .iter()
        .filter(|p| p.is_file())
        .map(|p| (p.clone(), Some(client)))
        .collect();
    if found.is_empty() {
        return Err(ImportError::NotFound {
            client: client.title().to_owned(),
            tried: join_paths(&locations),
        });
    }
    Ok(found)
}

/// Without `--from`: the one client that has a config here.
fn detect(env: &clients::Env) -> Result<Vec<(PathBuf, Option<Client>)>, ImportError> {
    let mut found = Vec::new();
    let mut tried = Vec::new();
    for client in Client::ALL {
        match existing(client, env) {
            Ok(paths) => found.push((client, paths)),
            Err(_) => tried.extend(client.locations(env)),
        }
    }
    match found.len() {
        0 => Err(ImportError::NotFound {
            client: "MCP client".to_owned(),
            tried: join_paths(&tried),
        }),
        1 => Ok(found.remove(0).1),
        _ => Err(ImportError::Usage(format!(
            "configs of several clients found ({}): choose one with --from",
            found
                .iter()
                .map(|(c, paths)| format!(
                    "{}: {}",
                    c.id(),
                    join_paths(&paths.iter().map(|p| p.0.clone()).collect::<Vec<_>>())
                ))
                .collect::<Vec<_>>()
                .join("; ")
        ))),
    }
}

fn join_paths(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The generated text must load like any `servers.toml` (every `${VAR}` given a value that
/// passes, since the real ones are the user's to set).
fn check_generated(text: &str) -> Result<(), ImportError> {
    let raw: RawConfig = Figment::new()
        .merge(Toml::string(text))
        .extract()
        .map_err(|error| ImportError::Internal(error.to_string()))?;
    config::validate(raw, "generated servers.toml", &|_| {
        Some("http://placeholder.invalid".to_owned())
    })
    .map(|_| ())
    .map_err(|error| ImportError::Internal(error.to_string()))
}

fn write_out(path: &Path, text: &str, force: bool) -> Result<(), ImportError> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true);
    if force {
        options.create(true).truncate(true);
    } else {
        // Atomic: no window between checking and creating.
        options.create_new(true);
    }
    let write_error = |error: std::io::Error| ImportError::Write {
        path: path.to_owned(),
        message: error.to_string(),
    };
    let mut file = options.open(path).map_err(|error| {
        if error.kind() == std::io::ErrorKind::AlreadyExists {
            ImportError::OutExists(path.to_owned())
        } else {
            write_error(error)
        }
    })?;
    file.write_all(text.as_bytes()).map_err(write_error)
}

/// Renames, moved secrets, skipped servers, notes and the variables to set, on stderr.
fn print_report(report: &convert::Report, imported: usize, out: Option<&Path>) {
    for (from, to) in &report.renames {
        eprintln!(
            "toolgate: renamed server {from:?} to {to:?} (names are 1 to {} characters of [a-z0-9-])",
            config::ServerName::MAX_LEN
        );
    }
    for (at, var) in &report.moved {
        eprintln!("toolgate: {at}: literal secret moved to ${{{var}}}");
    }
    for note in &report.notes {
        eprintln!("toolgate: note: {note}");
    }
    for (key, file, reason) in &report.skipped {
        eprintln!("toolgate: skipped {key} ({file}): {reason}");
    }
    let dest = out.map_or_else(|| "stdout".to_owned(), |p| p.display().to_string());
    eprintln!(
        "toolgate: wrote {imported} server(s) to {dest}; skipped {}",
        report.skipped.len()
    );
    let used: Vec<_> = report
        .vars
        .vars
        .iter()
        .filter(|(_, var)| !var.used_at.is_empty())
        .collect();
    if used.is_empty() {
        return;
    }
    eprintln!(
        "toolgate: set these variables where toolgate runs (no secret value was written or printed):"
    );
    let width = used.iter().map(|(n, _)| n.len() + 4).max().unwrap_or(0);
    for (name, var) in used {
        let why = match &var.origin {
            vars::Origin::Secret(_) => var.used_at.join("; "),
            vars::Origin::Input {
                id,
                description,
                password,
            } => format!(
                "VS Code input {id:?}{}{}",
                if *password { " (password)" } else { "" },
                description
                    .as_ref()
                    .map(|d| format!(": {d}"))
                    .unwrap_or_default()
            ),
            vars::Origin::Reference => "already a variable in the client config".to_owned(),
        };
        eprintln!("  export {:width$}  # {why}", format!("{name}=..."));
    }
}

fn print_client_config(
    target: Target,
    http: Option<&str>,
    config: &Path,
    profile: Option<&str>,
) -> Result<u8, ImportError> {
    let program = std::env::current_exe()
        .and_then(|p| p.canonicalize())
        .map_err(|error| {
            ImportError::Internal(format!("cannot find the toolgate binary: {error}"))
        })?;
    let (absolute, url, variables);
    let reach = match http {
        Some(given) => {
            if !(given.starts_with("http://") || given.starts_with("https://")) {
                return Err(ImportError::Usage(format!(
                    "--http: expected an http:// or https:// URL, found {given:?}"
                )));
            }
            url = match profile {
                Some(profile) if given.trim_end_matches('/').ends_with("/mcp") => {
                    format!("{}/{profile}", given.trim_end_matches('/'))
                }
                _ => given.to_owned(),
            };
            clients::Reach::Http { url: &url }
        }
        None => {
            absolute = config.canonicalize().map_err(|error| ImportError::Read {
                path: config.to_owned(),
                message: format!("{error} (write one first: toolgate import --out servers.toml)"),
            })?;
            variables = needed_variables(&absolute)?;
            clients::Reach::Stdio {
                program: &program,
                config: &absolute,
                profile,
                variables: &variables,
            }
        }
    };
    let snippet = clients::snippet(target, &reach).map_err(ImportError::Usage)?;
    let text = serde_json::to_string_pretty(&snippet)
        .map_err(|error| ImportError::Internal(error.to_string()))?;
    println!("{text}");
    eprintln!("toolgate: paste into {}", clients::destination(target));
    if target == Target::Claude && snippet["mcpServers"]["toolgate"].get("env").is_some() {
        eprintln!(
            "toolgate: then replace each <NAME> in `env` with its value: Claude Desktop starts \
             toolgate with only that `env` (and HOME, PATH, ...), not your shell's variables"
        );
    }
    Ok(0)
}

/// The environment variables `config` expands, found by validating it with a lookup that
/// records every name asked for (`env_passthrough` names included).
fn needed_variables(config: &Path) -> Result<Vec<String>, ImportError> {
    let raw: RawConfig = Figment::new()
        .merge(Toml::file_exact(config))
        .extract()
        .map_err(|error| ImportError::Config(error.to_string()))?;
    let asked = std::cell::RefCell::new(std::collections::BTreeSet::new());
    config::validate(raw, &config.display().to_string(), &|name| {
        asked.borrow_mut().insert(name.to_owned());
        Some("http://placeholder.invalid".to_owned())
    })
    .map_err(|error| ImportError::Config(error.to_string()))?;
    Ok(asked.into_inner().into_iter().collect())
}
