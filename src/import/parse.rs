//! A client's JSON → [`Entry`]s: the `mcpServers` family (Claude Desktop, Cursor, Windsurf,
//! `.mcp.json`) and VS Code's `servers` + `inputs`.
//!
//! The shapes, as documented when this was written:
//! - Claude Desktop: `mcpServers.NAME.{command, args, env}`
//!   (modelcontextprotocol.io/quickstart/user; stdio servers only).
//! - Cursor (cursor.com/docs/mcp): `mcpServers.NAME` with `command`/`args`/`env`/`envFile` for
//!   stdio or `url`/`headers` for a remote server (streamable HTTP or SSE, told apart by the
//!   server); `${env:NAME}`, `${userHome}`, `${workspaceFolder}` interpolation.
//! - Windsurf (docs.windsurf.com/windsurf/cascade/mcp): `mcpServers.NAME` with `command`/
//!   `args`/`env`, or `serverUrl` (also `url`) + `headers` for remote servers; `disabled`;
//!   `${env:NAME}` interpolation.
//! - VS Code (code.visualstudio.com/docs/copilot/reference/mcp-configuration): `servers.NAME`
//!   with `type` `stdio` (`command`, `args`, `env`, `envFile`) or `http`/`sse` (`url`,
//!   `headers`); `inputs: [{type: "promptString", id, description, password}]` referenced as
//!   `${input:ID}`; `${env:NAME}`, `${workspaceFolder}`, `${userHome}`.
//!
//! A server this cannot carry over becomes [`Body::Skipped`] with the reason; the caller
//! lists it. Reasons name keys, never values: a value may be a secret (a URL can carry a key).

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use serde_json::{Map, Value};

use super::{ImportError, jsonc};

/// Which top-level shape a file has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `mcpServers`: Claude Desktop, Cursor, Windsurf, Claude Code's `.mcp.json`.
    McpServers,
    /// `servers` (+ `inputs`): VS Code.
    VsCode,
}

impl Format {
    pub fn key(self) -> &'static str {
        match self {
            Format::McpServers => "mcpServers",
            Format::VsCode => "servers",
        }
    }
}

/// One parsed client file.
#[derive(Debug)]
pub struct SourceFile {
    pub path: PathBuf,
    pub format: Format,
    /// The folder `${workspaceFolder}` means: the parent of `.vscode/` or `.cursor/`.
    pub workspace: Option<PathBuf>,
    /// VS Code `inputs` by id.
    pub inputs: BTreeMap<String, Input>,
    pub entries: Vec<Entry>,
    /// Unusable `inputs` items and the like, for the report.
    pub notes: Vec<String>,
}

/// A VS Code input variable (`${input:ID}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Input {
    pub description: Option<String>,
    /// `password: true`: VS Code hides what is typed; toolgate treats it as a secret.
    pub password: bool,
}

/// One server as the client declares it.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Its name in the client config (not yet normalised).
    pub name: String,
    /// `mcpServers.NAME`, for messages.
    pub key: String,
    pub body: Body,
    /// Fields that have no equivalent and are left out.
    pub ignored: Vec<String>,
}

#[derive(Debug, Clone)]
pub enum Body {
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        cwd: Option<String>,
    },
    Http {
        url: String,
        headers: BTreeMap<String, String>,
    },
    /// Not imported, for this reason.
    Skipped(String),
}

/// Reads and parses `path` (JSON or JSONC).
pub fn read(path: &Path) -> Result<SourceFile, ImportError> {
    let text = std::fs::read_to_string(path).map_err(|error| ImportError::Read {
        path: path.to_owned(),
        message: error.to_string(),
    })?;
    parse(path, &text)
}

/// Parses `text`, the content of `path`.
pub fn parse(path: &Path, text: &str) -> Result<SourceFile, ImportError> {
    let bad = |message: String| ImportError::BadInput {
        path: path.to_owned(),
        message,
    };
    let value: Value = serde_json::from_str(&jsonc::to_json(text))
        .map_err(|error| bad(format!("not valid JSON: {error}")))?;
    let Value::Object(top) = value else {
        return Err(bad("expected a JSON object at the top level".into()));
    };
    let format = match (top.get("mcpServers"), top.get("servers")) {
        (Some(_), _) => Format::McpServers,
        (None, Some(_)) => Format::VsCode,
        (None, None) => {
            return Err(bad(
                "expected a top-level `mcpServers` object (Claude Desktop, Cursor, Windsurf) \
                 or `servers` object (VS Code)"
                    .into(),
            ));
        }
    };
    let Some(Value::Object(servers)) = top.get(format.key()) else {
        return Err(bad(format!("key `{}`: expected an object", format.key())));
    };
    let mut notes = Vec::new();
    let inputs = match top.get("inputs") {
        Some(inputs) if format == Format::VsCode => parse_inputs(inputs, &mut notes),
        _ => BTreeMap::new(),
    };
    let entries = servers
        .iter()
        .map(|(name, server)| entry(format, name, server))
        .collect();
    Ok(SourceFile {
        path: path.to_owned(),
        format,
        workspace: workspace_of(path),
        inputs,
        entries,
        notes,
    })
}

/// `/p/.vscode/mcp.json` → `/p`: the folder a project-level file belongs to.
fn workspace_of(path: &Path) -> Option<PathBuf> {
    let dir = path.parent()?;
    let name = dir.file_name()?.to_str()?;
    if name != ".vscode" && name != ".cursor" {
        return None;
    }
    let workspace = dir.parent()?;
    std::path::absolute(workspace).ok()
}

fn parse_inputs(inputs: &Value, notes: &mut Vec<String>) -> BTreeMap<String, Input> {
    let mut out = BTreeMap::new();
    let Value::Array(items) = inputs else {
        notes.push("key `inputs`: expected an array; ignored".into());
        return out;
    };
    for (i, item) in items.iter().enumerate() {
        let Some(id) = item.get("id").and_then(Value::as_str) else {
            notes.push(format!("key `inputs[{i}]`: no string `id`; ignored"));
            continue;
        };
        out.insert(
            id.to_owned(),
            Input {
                description: item
                    .get("description")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                password: item.get("password").and_then(Value::as_bool) == Some(true),
            },
        );
    }
    out
}

/// Fields read by [`body`]; any other is reported as ignored.
const KNOWN: &[&str] = &[
    "type",
    "transport",
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "serverUrl",
    "headers",
    "disabled",
];

fn entry(format: Format, name: &str, server: &Value) -> Entry {
    let key = format!("{}.{name}", format.key());
    let Value::Object(fields) = server else {
        return Entry {
            name: name.to_owned(),
            key,
            body: Body::Skipped("expected an object".into()),
            ignored: Vec::new(),
        };
    };
    let ignored = fields
        .keys()
        .filter(|k| !KNOWN.contains(&k.as_str()))
        .cloned()
        .collect();
    let body = body(fields).unwrap_or_else(Body::Skipped);
    Entry {
        name: name.to_owned(),
        key,
        body,
        ignored,
    }
}

fn body(fields: &Map<String, Value>) -> Result<Body, String> {
    if fields.get("disabled").and_then(Value::as_bool) == Some(true) {
        return Err("disabled in the client (`disabled: true`)".into());
    }
    let kind = match fields.get("type").or_else(|| fields.get("transport")) {
        None => None,
        Some(Value::String(kind)) => Some(kind.as_str()),
        Some(_) => return Err("`type` is not a string".into()),
    };
    let url = match (fields.get("url"), fields.get("serverUrl")) {
        (Some(_), Some(_)) => return Err("both `url` and `serverUrl` are set".into()),
        (Some(url), None) => Some(("url", url)),
        (None, Some(url)) => Some(("serverUrl", url)),
        (None, None) => None,
    };
    let command = fields.get("command");
    match (kind, command, url) {
        (_, Some(_), Some((url_key, _))) => Err(format!("both `command` and `{url_key}` are set")),
        (None | Some("stdio"), Some(command), None) => {
            let Value::String(command) = command else {
                return Err("`command` is not a string".into());
            };
            Ok(Body::Stdio {
                command: command.clone(),
                args: list(fields.get("args"), "args")?,
                env: table(fields.get("env"), "env")?,
                cwd: match fields.get("cwd") {
                    None | Some(Value::Null) => None,
                    Some(Value::String(cwd)) => Some(cwd.clone()),
                    Some(_) => return Err("`cwd` is not a string".into()),
                },
            })
        }
        (Some("sse"), _, Some(_)) => Err(LEGACY_SSE.into()),
        (
            None | Some("http" | "streamable-http" | "streamableHttp" | "streamable_http"),
            None,
            Some((url_key, url)),
        ) => {
            let Value::String(url) = url else {
                return Err(format!("`{url_key}` is not a string"));
            };
            if kind.is_none() && looks_like_sse(url) {
                return Err(format!("{LEGACY_SSE} (guessed: the URL path ends in /sse)"));
            }
            Ok(Body::Http {
                url: url.clone(),
                headers: table(fields.get("headers"), "headers")?,
            })
        }
        (Some(kind), _, _) => Err(format!(
            "transport type {kind:?} with these fields is not one toolgate can connect to"
        )),
        (None, None, None) => Err("neither `command` nor `url` is set".into()),
    }
}

const LEGACY_SSE: &str =
    "legacy SSE transport; toolgate connects to stdio and streamable HTTP servers only";

/// Clients without a `type` (Cursor, Windsurf) tell SSE from streamable HTTP by trying;
/// an SSE endpoint is conventionally `.../sse`.
fn looks_like_sse(url: &str) -> bool {
    let path = url.split(['?', '#']).next().unwrap_or(url);
    path.trim_end_matches('/').ends_with("/sse")
}

/// A JSON array of scalars as strings (numbers and booleans as written).
fn list(value: Option<&Value>, field: &str) -> Result<Vec<String>, String> {
    match value {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, item)| scalar(item).ok_or_else(|| format!("`{field}[{i}]` is not a string")))
            .collect(),
        Some(_) => Err(format!("`{field}` is not an array")),
    }
}

/// A JSON object of scalars as strings; `null` values are left out, as clients do.
fn table(value: Option<&Value>, field: &str) -> Result<BTreeMap<String, String>, String> {
    match value {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(map)) => {
            let mut out = BTreeMap::new();
            for (name, value) in map {
                if value.is_null() {
                    continue;
                }
                let value =
                    scalar(value).ok_or_else(|| format!("`{field}.{name}` is not a string"))?;
                out.insert(name.clone(), value);
            }
            Ok(out)
        }
        Some(_) => Err(format!("`{field}` is not an object")),
    }
}

fn scalar(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(json: &str) -> Entry {
        let file = parse(Path::new("/p/.vscode/mcp.json"), json).expect("parses");
        file.entries.into_iter().next().expect("one entry")
    }

    #[test]
    fn mcp_servers_stdio_and_remote() {
        let file = parse(
            Path::new("c.json"),
            r#"{"mcpServers": {
                "fs": {"command": "npx", "args": ["-y", "pkg", 3], "env": {"A": "1", "B": null}},
                "remote": {"url": "https://x.example/mcp", "headers": {"X": "y"}},
                "wind": {"serverUrl": "https://w.example/mcp"}
            }, "globalShortcut": ""}"#,
        )
        .expect("parses");
        assert_eq!(file.format, Format::McpServers);
        assert_eq!(file.workspace, None);
        let [fs, remote, wind] = &file.entries[..] else {
            panic!("three entries: {:?}", file.entries)
        };
        let Body::Stdio { args, env, .. } = &fs.body else {
            panic!("{fs:?}")
        };
        assert_eq!(args, &["-y", "pkg", "3"]);
        assert_eq!(env.keys().collect::<Vec<_>>(), ["A"]);
        assert!(matches!(&remote.body, Body::Http { headers, .. } if headers["X"] == "y"));
        assert!(matches!(&wind.body, Body::Http { url, .. } if url == "https://w.example/mcp"));
    }

    #[test]
    fn sse_is_skipped_explicit_or_by_path() {
        assert!(
            matches!(one(r#"{"servers": {"a": {"type": "sse", "url": "https://x/events"}}}"#).body, Body::Skipped(r) if r.contains("SSE"))
        );
        assert!(
            matches!(one(r#"{"servers": {"a": {"url": "https://x/sse/"}}}"#).body, Body::Skipped(r) if r.contains("guessed"))
        );
        assert!(matches!(
            one(r#"{"servers": {"a": {"type": "http", "url": "https://x/sse"}}}"#).body,
            Body::Http { .. }
        ));
    }

    #[test]
    fn malformed_entries_are_skipped_with_a_reason_naming_the_key() {
        for (json, reason) in [
            (r#"{"servers": {"a": 3}}"#, "expected an object"),
            (
                r#"{"servers": {"a": {"command": 1}}}"#,
                "`command` is not a string",
            ),
            (
                r#"{"servers": {"a": {"command": "x", "url": "http://y"}}}"#,
                "both `command` and `url`",
            ),
            (
                r#"{"servers": {"a": {"command": "x", "args": [{}]}}}"#,
                "`args[0]`",
            ),
            (
                r#"{"servers": {"a": {"command": "x", "disabled": true}}}"#,
                "disabled",
            ),
            (
                r#"{"servers": {"a": {"type": "ws", "url": "ws://y"}}}"#,
                "\"ws\"",
            ),
            (r#"{"servers": {"a": {}}}"#, "neither"),
        ] {
            let Body::Skipped(found) = one(json).body else {
                panic!("{json} is not skipped")
            };
            assert!(found.contains(reason), "{json}: {found}");
        }
    }

    #[test]
    fn vscode_inputs_and_workspace() {
        let file = parse(
            Path::new("/p/.vscode/mcp.json"),
            r#"{"inputs": [{"type": "promptString", "id": "tok", "password": true}, {"x": 1}],
                "servers": {"a": {"type": "stdio", "command": "x", "dev": {}}}}"#,
        )
        .expect("parses");
        assert_eq!(file.format, Format::VsCode);
        assert_eq!(file.workspace.as_deref(), Some(Path::new("/p")));
        assert!(file.inputs["tok"].password);
        assert_eq!(file.notes.len(), 1, "{:?}", file.notes);
        assert_eq!(file.entries[0].ignored, ["dev"]);
    }

    #[test]
    fn wrong_top_level_is_an_error_naming_the_file() {
        for json in ["[]", "{}", r#"{"mcpServers": []}"#, "{,"] {
            let error = parse(Path::new("dir/c.json"), json).expect_err(json);
            assert!(error.to_string().contains("dir/c.json"), "{error}");
        }
    }
}
