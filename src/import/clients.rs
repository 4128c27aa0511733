//! The MCP clients: where each keeps its config, and the snippet that points it at toolgate.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::child::BASE_ENV;

/// A client whose config `toolgate import` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Client {
    Claude,
    Cursor,
    Vscode,
    Windsurf,
}

impl Client {
    pub const ALL: [Client; 4] = [
        Client::Claude,
        Client::Cursor,
        Client::Vscode,
        Client::Windsurf,
    ];

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.id() == name)
    }

    pub fn id(self) -> &'static str {
        match self {
            Client::Claude => "claude",
            Client::Cursor => "cursor",
            Client::Vscode => "vscode",
            Client::Windsurf => "windsurf",
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            Client::Claude => "Claude Desktop",
            Client::Cursor => "Cursor",
            Client::Vscode => "VS Code",
            Client::Windsurf => "Windsurf",
        }
    }

    /// Where the client reads its servers, user-level first, project-level last (a
    /// project's entry replaces a user-level one of the same name, as in the clients).
    ///
    /// - Claude Desktop: `~/Library/Application Support/Claude/claude_desktop_config.json`
    ///   on macOS; on Linux `$XDG_CONFIG_HOME/Claude/claude_desktop_config.json`, by
    ///   default `~/.config/Claude/...` (modelcontextprotocol.io/quickstart/user).
    /// - Cursor: `~/.cursor/mcp.json`, then the project's `.cursor/mcp.json`
    ///   (cursor.com/docs/mcp).
    /// - VS Code: the user profile's `mcp.json` (`~/Library/Application Support/Code/User/`
    ///   on macOS, `$XDG_CONFIG_HOME/Code/User/` on Linux), then the workspace's
    ///   `.vscode/mcp.json` (code.visualstudio.com/docs/copilot/reference/mcp-configuration).
    /// - Windsurf: `~/.codeium/windsurf/mcp_config.json` (docs.windsurf.com/windsurf/cascade/mcp).
    pub fn locations(self, env: &Env) -> Vec<PathBuf> {
        let home = env.home.as_deref();
        let app_config = if env.macos {
            home.map(|h| h.join("Library/Application Support"))
        } else {
            env.xdg_config_home
                .clone()
                .or_else(|| home.map(|h| h.join(".config")))
        };
        let mut out = Vec::new();
        match self {
            Client::Claude => {
                out.extend(app_config.map(|d| d.join("Claude/claude_desktop_config.json")));
            }
            Client::Cursor => {
                out.extend(home.map(|h| h.join(".cursor/mcp.json")));
                out.push(env.cwd.join(".cursor/mcp.json"));
            }
            Client::Vscode => {
                out.extend(app_config.map(|d| d.join("Code/User/mcp.json")));
                out.push(env.cwd.join(".vscode/mcp.json"));
            }
            Client::Windsurf => {
                out.extend(home.map(|h| h.join(".codeium/windsurf/mcp_config.json")));
            }
        }
        out
    }
}

/// What [`Client::locations`] depends on, so that tests can pass their own.
#[derive(Debug, Clone)]
pub struct Env {
    pub home: Option<PathBuf>,
    pub xdg_config_home: Option<PathBuf>,
    pub cwd: PathBuf,
    pub macos: bool,
}

impl Env {
    pub fn current() -> Self {
        let var = |name| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        Self {
            home: var("HOME"),
            xdg_config_home: var("XDG_CONFIG_HOME"),
            cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
            macos: cfg!(target_os = "macos"),
        }
    }
}

/// A client `--print-client-config` writes a snippet for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Target {
    Claude,
    Cursor,
    Vscode,
}

/// How the client reaches toolgate.
pub enum Reach<'a> {
    /// It spawns `toolgate --config CONFIG [--profile P] serve`.
    Stdio {
        program: &'a Path,
        config: &'a Path,
        profile: Option<&'a str>,
        /// The variables the config expands: MCP clients start a stdio server with a
        /// small base environment plus the entry's `env` (as toolgate does), so each must
        /// be passed in the entry.
        variables: &'a [String],
    },
    /// It connects to a running `toolgate serve --http`.
    Http { url: &'a str },
}

/// The JSON to paste into the client's config, or why there is none.
///
/// The variables reach toolgate the client's own way: VS Code asks for a password input once
/// and keeps it in its secret storage; Cursor reads `${env:NAME}` from its environment;
/// Claude Desktop has no interpolation, so its entry gets `<NAME>` placeholders to fill in.
pub fn snippet(target: Target, reach: &Reach<'_>) -> Result<Value, String> {
    let mut inputs = Vec::new();
    let server = match reach {
        Reach::Stdio {
            program,
            config,
            profile,
            variables,
        } => {
            let mut args = vec!["--config".to_owned(), config.display().to_string()];
            if let Some(profile) = profile {
                args.extend(["--profile".to_owned(), (*profile).to_owned()]);
            }
            args.push("serve".to_owned());
            let mut server = json!({ "command": program.display().to_string(), "args": args });
            if target == Target::Vscode {
                server["type"] = json!("stdio");
            }
            let mut env = serde_json::Map::new();
            for name in variables.iter().filter(|v| !BASE_ENV.contains(&v.as_str())) {
                let value = match target {
                    Target::Claude => format!("<{name}>"),
                    Target::Cursor => format!("${{env:{name}}}"),
                    Target::Vscode => {
                        inputs.push(json!({
                            "type": "promptString",
                            "id": name,
                            "description": format!("{name} for toolgate"),
                            "password": true,
                        }));
                        format!("${{input:{name}}}")
                    }
                };
                env.insert(name.clone(), Value::String(value));
            }
            if !env.is_empty() {
                server["env"] = Value::Object(env);
            }
            server
        }
        // Claude Desktop's file holds stdio servers only; remote ones are added in the app
        // (Settings > Connectors).
        Reach::Http { .. } if target == Target::Claude => {
            return Err(
                "Claude Desktop's claude_desktop_config.json takes stdio servers only: \
                 leave out --http to get the stdio snippet, or add the URL in Claude Desktop \
                 under Settings > Connectors"
                    .into(),
            );
        }
        Reach::Http { url } if target == Target::Vscode => json!({ "type": "http", "url": url }),
        Reach::Http { url } => json!({ "url": url }),
    };
    let key = match target {
        Target::Vscode => "servers",
        Target::Claude | Target::Cursor => "mcpServers",
    };
    let mut snippet = json!({ key: { "toolgate": server } });
    if !inputs.is_empty() {
        snippet["inputs"] = Value::Array(inputs);
    }
    Ok(snippet)
}

/// Where the snippet goes, for the hint on stderr.
pub fn destination(target: Target) -> &'static str {
    match target {
        Target::Claude => {
            "claude_desktop_config.json (Claude Desktop: Settings > Developer > Edit Config)"
        }
        Target::Cursor => "~/.cursor/mcp.json or the project's .cursor/mcp.json",
        Target::Vscode => ".vscode/mcp.json (or MCP: Open User Configuration)",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(macos: bool) -> Env {
        Env {
            home: Some(PathBuf::from("/h")),
            xdg_config_home: None,
            cwd: PathBuf::from("/p"),
            macos,
        }
    }

    #[test]
    fn locations_per_os() {
        assert_eq!(
            Client::Claude.locations(&env(false)),
            [PathBuf::from(
                "/h/.config/Claude/claude_desktop_config.json"
            )]
        );
        assert_eq!(
            Client::Claude.locations(&env(true)),
            [PathBuf::from(
                "/h/Library/Application Support/Claude/claude_desktop_config.json"
            )]
        );
        let xdg = Env {
            xdg_config_home: Some(PathBuf::from("/x")),
            ..env(false)
        };
        assert_eq!(
            Client::Vscode.locations(&xdg),
            [
                PathBuf::from("/x/Code/User/mcp.json"),
                PathBuf::from("/p/.vscode/mcp.json")
            ]
        );
        assert_eq!(
            Client::Cursor.locations(&env(true)),
            [
                PathBuf::from("/h/.cursor/mcp.json"),
                PathBuf::from("/p/.cursor/mcp.json")
            ]
        );
        assert_eq!(
            Client::Windsurf.locations(&env(false)),
            [PathBuf::from("/h/.codeium/windsurf/mcp_config.json")]
        );
    }

    #[test]
    fn snippets() {
        let stdio = Reach::Stdio {
            program: Path::new("/bin/toolgate"),
            config: Path::new("/etc/servers.toml"),
            profile: Some("ops"),
            variables: &[],
        };
        assert_eq!(
            snippet(Target::Claude, &stdio),
            Ok(
                json!({"mcpServers": {"toolgate": {"command": "/bin/toolgate",
                "args": ["--config", "/etc/servers.toml", "--profile", "ops", "serve"]}}})
            )
        );
        let http = Reach::Http {
            url: "http://127.0.0.1:8080/mcp",
        };
        assert_eq!(
            snippet(Target::Vscode, &http),
            Ok(
                json!({"servers": {"toolgate": {"type": "http", "url": "http://127.0.0.1:8080/mcp"}}})
            )
        );
        assert_eq!(
            snippet(Target::Cursor, &http),
            Ok(json!({"mcpServers": {"toolgate": {"url": "http://127.0.0.1:8080/mcp"}}}))
        );
        assert!(snippet(Target::Claude, &http).is_err());
        let variables = ["GH_TOKEN".to_owned(), "HOME".to_owned()];
        let with_env = |target| {
            snippet(
                target,
                &Reach::Stdio {
                    program: Path::new("/bin/toolgate"),
                    config: Path::new("/etc/servers.toml"),
                    profile: None,
                    variables: &variables,
                },
            )
            .expect("a snippet")
        };
        let claude = with_env(Target::Claude);
        assert_eq!(
            claude["mcpServers"]["toolgate"]["env"],
            json!({"GH_TOKEN": "<GH_TOKEN>"}),
            "HOME is passed by every client anyway"
        );
        let cursor = with_env(Target::Cursor);
        assert_eq!(
            cursor["mcpServers"]["toolgate"]["env"],
            json!({"GH_TOKEN": "${env:GH_TOKEN}"})
        );
        let vscode = with_env(Target::Vscode);
        assert_eq!(
            vscode["servers"]["toolgate"]["env"],
            json!({"GH_TOKEN": "${input:GH_TOKEN}"})
        );
        assert_eq!(vscode["inputs"][0]["id"], "GH_TOKEN");
        assert_eq!(vscode["inputs"][0]["password"], true);
    }
}
