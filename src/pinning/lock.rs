//! `toolgate.lock`: pinned tool definitions by server and upstream tool name, as sorted, stable JSON.
//!
//! ```json
//! {
//!   "servers": {
//!     "echo": {
//!       "echo": {
//!         "hash": "sha256:…",
//!         "tool": { "description": "…", "inputSchema": {…}, "name": "echo", … }
//!       }
//!     }
//!   },
//!   "version": 1
//! }
//! ```
//!
//! The definition is kept beside its hash so that a drift can be shown as a diff, and so
//! that a review of the lock in version control sees the text a model will read. Hidden
//! characters are written as `\uXXXX` escapes, so that review sees those too. The hash is
//! what is compared; a lock whose hash and definition disagree (edited by hand) is refused.

use std::{
    collections::BTreeMap,
    io,
    path::{Path, PathBuf},
};

use rmcp::model::Tool;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::hash;
use crate::clean;

/// The format version this build reads and writes.
pub const VERSION: u32 = 1;

/// Every pinned tool: server (`echo`, or `ops/shell` for a profile's own server) → upstream
/// tool name → pin.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lock {
    pub version: u32,
    #[serde(default)]
    pub servers: BTreeMap<String, BTreeMap<String, Pinned>>,
}

/// One pinned tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pinned {
    /// [`hash::hash`] of `tool`.
    pub hash: String,
    /// [`hash::definition`] of the tool as it was pinned.
    pub tool: Value,
}

impl Pinned {
    pub fn of(tool: &Tool) -> Self {
        let definition = hash::definition(tool);
        Self {
            hash: hash::hash(&definition),
            tool: definition,
        }
    }
}

/// What can be wrong with a lock file; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// `[gateway.pinning]` is configured but its lock is not there.
    #[error(
        "{config}: key `gateway.pinning.lock`: the lock file {} does not exist; run `toolgate pin` to create it",
        .path.display()
    )]
    Missing { config: String, path: PathBuf },
    #[error("cannot read the lock file {}: {error}", .path.display())]
    Read { path: PathBuf, error: io::Error },
    #[error("the lock file {} is not valid: {message}", .path.display())]
    Parse { path: PathBuf, message: String },
    #[error("the lock file {}: key `{key}`: {message}", .path.display())]
    Invalid {
        path: PathBuf,
        key: String,
        message: String,
    },
    #[error("cannot write the lock file {}: {error}", .path.display())]
    Write { path: PathBuf, error: io::Error },
}

impl Lock {
    /// A lock of exactly these tools, by server.
    pub fn of<'a>(servers: impl IntoIterator<Item = (String, &'a [Tool])>) -> Self {
        let servers = servers
            .into_iter()
            .map(|(server, tools)| {
                let pins = tools
                    .iter()
                    .map(|tool| (tool.name.to_string(), Pinned::of(tool)))
                    .collect();
                (server, pins)
            })
            .collect();
        Self {
            version: VERSION,
            servers,
        }
    }

    pub fn get(&self, server: &str, tool: &str) -> Option<&Pinned> {
        self.servers.get(server)?.get(tool)
    }

    pub fn tool_count(&self) -> usize {
        self.servers.values().map(BTreeMap::len).sum()
    }

    /// Reads and checks `path`; `Ok(None)` when it does not exist.
    pub fn read(path: &Path) -> Result<Option<Self>, LockError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(error) => {
                return Err(LockError::Read {
                    path: path.to_owned(),
                    error,
                });
            }
        };
        Self::parse(&text, path).map(Some)
    }

    /// Parses and checks a lock's text; `path` is for messages.
    pub fn parse(text: &str, path: &Path) -> Result<Self, LockError> {
        let lock: Lock = serde_json::from_str(text).map_err(|error| LockError::Parse {
            path: path.to_owned(),
            message: error.to_string(),
        })?;
        let invalid = |key: String, message: String| LockError::Invalid {
            path: path.to_owned(),
            key,
            message,
        };
        if lock.version != VERSION {
            return Err(invalid(
                "version".into(),
                format!(
                    "expected version {VERSION}, found {}; re-run `toolgate pin` with this toolgate",
                    lock.version
                ),
            ));
        }
        for (server, tools) in &lock.servers {
            for (name, pinned) in tools {
                let key = format!("servers.{server:?}.{name:?}");
                if pinned.tool.get("name").and_then(Value::as_str) != Some(name.as_str()) {
                    return Err(invalid(
                        format!("{key}.tool.name"),
                        format!("expected the tool's name {name:?}"),
                    ));
                }
                let actual = hash::hash(&pinned.tool);
                if actual != pinned.hash {
                    return Err(invalid(
                        format!("{key}.hash"),
                        format!(
                            "the hash does not match the pinned definition (it hashes to {actual}); the lock was edited by hand: re-run `toolgate pin`"
                        ),
                    ));
                }
            }
        }
        Ok(lock)
    }

    /// The file's text: pretty JSON, keys sorted at every level, hidden characters escaped,
    /// a final newline. The same tools always give the same bytes.
    pub fn to_text(&self) -> String {
        // Built as `Value`s inserted in sorted order, so the bytes do not depend on
        // serde_json's `preserve_order` feature, which any dependency could switch on.
        let servers = self
            .servers
            .iter()
            .map(|(server, tools)| {
                let tools = tools
                    .iter()
                    .map(|(name, pinned)| {
                        let mut pin = serde_json::Map::new();
                        pin.insert("hash".into(), Value::String(pinned.hash.clone()));
                        pin.insert("tool".into(), hash::sorted(&pinned.tool));
                        (name.clone(), Value::Object(pin))
                    })
                    .collect();
                (server.clone(), Value::Object(tools))
            })
            .collect();
        let mut value = serde_json::Map::new();
        value.insert("servers".into(), Value::Object(servers));
        value.insert("version".into(), Value::from(self.version));
        let value = Value::Object(value);
        // Printing a `Value` cannot fail: its keys are strings.
        let pretty = serde_json::to_string_pretty(&value).unwrap_or_default();
        let mut text = escape_hidden(&pretty);
        text.push('\n');
        text
    }

    /// Writes the lock to `path` atomically (a temporary file beside it, then a rename), so
    /// that a gateway starting meanwhile never reads half a lock.
    pub fn write(&self, path: &Path) -> Result<(), LockError> {
        let failed = |error| LockError::Write {
            path: path.to_owned(),
            error,
        };
        let mut temporary = path.as_os_str().to_owned();
        temporary.push(".tmp");
        let temporary = PathBuf::from(temporary);
        std::fs::write(&temporary, self.to_text()).map_err(failed)?;
        std::fs::rename(&temporary, path).map_err(|error| {
            let _ = std::fs::remove_file(&temporary);
            failed(error)
        })
    }
}

/// `json` with every hidden character written as a `\uXXXX` escape. Outside strings JSON
/// text is ASCII punctuation, digits, literals and whitespace (`\n` and space, which are not
/// hidden), so every hidden character is inside a string, where an escape means the same.
fn escape_hidden(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if clean::is_hidden(c) {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rmcp::model::{JsonObject, Tool};
    use serde_json::{Value, json};

    use super::*;

    fn tool(name: &'static str, description: &'static str) -> Tool {
        let Value::Object(schema) = json!({"type": "object", "properties": {"b": {}, "a": {}}})
        else {
            unreachable!()
        };
        Tool::new(name, description, Arc::new(schema as JsonObject))
    }

    fn path() -> &'static Path {
        Path::new("toolgate.lock")
    }

    #[test]
    fn text_is_sorted_stable_and_round_trips() {
        let tools = [tool("zeta", "Z"), tool("alpha", "A")];
        let others = [tool("one", "1")];
        let lock = Lock::of([
            ("other".to_owned(), &others[..]),
            ("echo".to_owned(), &tools[..]),
        ]);
        let text = lock.to_text();
        assert_eq!(text, lock.to_text());
        assert!(text.ends_with("}\n"));
        let at = |needle: &str| text.find(needle).unwrap_or_else(|| panic!("{needle}"));
        assert!(at("\"echo\"") < at("\"other\""));
        assert!(at("\"alpha\"") < at("\"zeta\""));
        assert!(at("\"servers\"") < at("\"version\""));
        assert_eq!(Lock::parse(&text, path()).unwrap(), lock);
        assert_eq!(lock.tool_count(), 3);
        assert!(lock.get("echo", "alpha").is_some());
        assert!(lock.get("echo", "one").is_none());
    }

    #[test]
    fn hidden_characters_are_escaped_in_the_file_and_kept_in_the_pin() {
        let tools = [tool("t", "Re\u{200B}turn \u{202E}x\u{E0041}")];
        let lock = Lock::of([("s".to_owned(), &tools[..])]);
        let text = lock.to_text();
        assert!(
            text.contains(r#""Re\u200bturn \u202ex\udb40\udc41""#),
            "{text}"
        );
        assert!(!text.contains('\u{200B}'));
        let read = Lock::parse(&text, path()).unwrap();
        assert_eq!(
            read.get("s", "t").unwrap().tool["description"],
            "Re\u{200B}turn \u{202E}x\u{E0041}"
        );
    }

    #[test]
    fn a_hand_edited_definition_is_refused() {
        let tools = [tool("t", "Honest")];
        let text = Lock::of([("s".to_owned(), &tools[..])])
            .to_text()
            .replace("Honest", "Edited");
        let error = Lock::parse(&text, path()).unwrap_err().to_string();
        assert!(
            error.contains("toolgate.lock: key `servers.\"s\".\"t\".hash`"),
            "{error}"
        );
        assert!(error.contains("edited by hand"), "{error}");
    }

    #[test]
    fn another_version_or_unknown_keys_are_refused() {
        let error = Lock::parse(r#"{"version": 2, "servers": {}}"#, path())
            .unwrap_err()
            .to_string();
        assert!(error.contains("key `version`"), "{error}");
        let error = Lock::parse(r#"{"version": 1, "servers": {}, "extra": 1}"#, path())
            .unwrap_err()
            .to_string();
        assert!(error.contains("unknown field `extra`"), "{error}");
    }

    #[test]
    fn a_missing_file_is_none() {
        let dir = std::env::temp_dir().join(format!("toolgate-lock-test-{}", std::process::id()));
        assert!(Lock::read(&dir.join("absent.lock")).unwrap().is_none());
    }
}
