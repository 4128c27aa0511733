//! The names a config gives (servers, profiles, server ids) with their rules, and the bearer token type that never prints.

use std::{fmt, sync::Arc};

/// A validated server name: `[a-z0-9-]+`, so that `{server}__{tool}` is always a legal tool name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ServerName(Arc<str>);

impl ServerName {
    /// The gateway itself, as the "server" of `run_code` in hooks, audit and metrics. Not a
    /// legal configured name (it has parentheses), so it can never be mistaken for one.
    pub fn gateway() -> Self {
        Self(Arc::from("(toolgate)"))
    }

    /// The longest legal name, in bytes.
    pub const MAX_LEN: usize = 32;

    pub fn parse(name: &str) -> Result<Self, String> {
        let legal = !name.is_empty()
            && name.len() <= Self::MAX_LEN
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if legal {
            Ok(Self(Arc::from(name)))
        } else {
            Err(format!(
                "server name {name:?} must be 1 to {} characters of [a-z0-9-]",
                Self::MAX_LEN
            ))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ServerName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A validated profile name: `[a-z0-9-]+`, usable in a URL path (`/mcp/{profile}`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProfileName(Arc<str>);

impl ProfileName {
    /// The profile of a caller that selects none.
    pub const DEFAULT: &'static str = "default";

    pub fn parse(name: &str) -> Result<Self, String> {
        ServerName::parse(name)
            .map(|n| Self(n.0))
            .map_err(|_| format!("profile name {name:?} must be 1 to 32 characters of [a-z0-9-]"))
    }

    pub fn default_profile() -> Self {
        Self(Arc::from(Self::DEFAULT))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ProfileName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Identifies one configured server: `echo` for a global one, `ops/shell` for the server
/// `shell` owned by profile `ops` (which may share its short name with a global server).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ServerId {
    /// `None` for the global layer; sorts first.
    pub owner: Option<ProfileName>,
    pub name: ServerName,
}

impl ServerId {
    pub fn global(name: ServerName) -> Self {
        Self { owner: None, name }
    }
}

impl fmt::Display for ServerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.owner {
            Some(owner) => write!(f, "{owner}/{}", self.name),
            None => write!(f, "{}", self.name),
        }
    }
}

/// A bearer token. Never printed: `Debug` hides it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: String) -> Self {
        Self(value)
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}
