//! Durable per-server token files: `<dir>/<hash of the server URL>.json`, mode 0600 in a 0700 directory.
//!
//! The directory is `gateway.token_dir` (`TOOLGATE_GATEWAY__TOKEN_DIR`), else
//! `$XDG_DATA_HOME/toolgate/tokens`, else `~/.local/share/toolgate/tokens`. A file holds the server URL it belongs to, the client id
//! (and a registered client's secret, which refreshing needs), rmcp's stored credentials,
//! the scopes a server asked for that the current grant lacks (so the next login asks for
//! them), and where a registered client is valid (so the next login uses it again). Writes go to a temporary file that is renamed over the old one, so a reader never
//! sees half a file. Nothing here logs a token.

use std::{
    io::Write,
    os::unix::fs::{DirBuilderExt, OpenOptionsExt},
    path::{Path, PathBuf},
};

use rmcp::transport::auth::{AuthError, CredentialStore, StoredCredentials};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot find a directory for tokens: set `gateway.token_dir`, XDG_DATA_HOME or HOME")]
    NoDirectory,
    #[error("token file {}: {message}", .path.display())]
    File { path: PathBuf, message: String },
}

/// What one server's token file holds.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TokenFile {
    /// The server this file belongs to; a file whose URL differs is ignored.
    pub server_url: String,
    pub client_id: Option<String>,
    /// The secret a dynamic registration issued (a configured one stays in the config).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<StoredCredentials>,
    /// Scopes the server asked for (`insufficient_scope`) that the next login adds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub needed_scopes: Vec<String>,
    /// The client a dynamic registration created, which the next login uses again rather
    /// than registering one more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registration: Option<Registration>,
}

/// Where a dynamically registered client is valid: its authorization server and the
/// redirect URI it was registered with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Registration {
    pub client_id: String,
    /// The authorization server's issuer, else its registration endpoint.
    pub authorization_server: String,
    pub redirect_uri: String,
}

/// The directory token files live in: `configured` (`gateway.token_dir`), else the user's.
pub fn token_dir(configured: Option<&Path>) -> Result<PathBuf, StoreError> {
    if let Some(dir) = configured {
        return Ok(dir.to_owned());
    }
    let nonempty = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(data) = nonempty("XDG_DATA_HOME") {
        return Ok(PathBuf::from(data).join("toolgate").join("tokens"));
    }
    match nonempty("HOME") {
        Some(home) => Ok(PathBuf::from(home).join(".local/share/toolgate/tokens")),
        None => Err(StoreError::NoDirectory),
    }
}

/// One server's token file, keyed by its URL. Also rmcp's [`CredentialStore`].
#[derive(Debug, Clone)]
pub struct FileStore {
    url: String,
    path: PathBuf,
}

impl FileStore {
    /// The store of the server at `url`, in [`token_dir`].
    pub fn for_url(url: &str, configured: Option<&Path>) -> Result<Self, StoreError> {
        Ok(Self::in_dir(&token_dir(configured)?, url))
    }

    pub fn in_dir(dir: &Path, url: &str) -> Self {
        let digest = Sha256::digest(url.as_bytes());
        let name: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
        Self {
            url: url.to_owned(),
            path: dir.join(format!("{name}.json")),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn error(&self, message: impl std::fmt::Display) -> StoreError {
        StoreError::File {
            path: self.path.clone(),
            message: message.to_string(),
        }
    }

    /// The file's contents; an empty record when there is none (or it is another URL's).
    pub fn read(&self) -> Result<TokenFile, StoreError> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(self.empty()),
            Err(e) => return Err(self.error(e)),
        };
        let file: TokenFile = serde_json::from_str(&text)
            .map_err(|e| self.error(format!("not a token file: {e}")))?;
        if file.server_url != self.url {
            return Ok(self.empty());
        }
        Ok(file)
    }

    fn empty(&self) -> TokenFile {
        TokenFile {
            server_url: self.url.clone(),
            ..TokenFile::default()
        }
    }

    /// Replaces the file with `file` (0600), atomically.
    pub fn write(&self, file: &TokenFile) -> Result<(), StoreError> {
        let dir = self
            .path
            .parent()
            .ok_or_else(|| self.error("has no directory"))?;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| self.error(format!("cannot create its directory: {e}")))?;
        let text = serde_json::to_vec_pretty(file).map_err(|e| self.error(e))?;
        let temporary = self
            .path
            .with_extension(format!("json.{}.tmp", std::process::id()));
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&temporary)
            .and_then(|mut out| {
                out.write_all(&text)?;
                out.sync_all()
            });
        if let Err(e) = written.and_then(|()| std::fs::rename(&temporary, &self.path)) {
            let _ = std::fs::remove_file(&temporary);
            return Err(self.error(e));
        }
        Ok(())
    }

    /// Changes the record with `change` and writes it back.
    pub fn update(&self, change: impl FnOnce(&mut TokenFile)) -> Result<(), StoreError> {
        let mut file = self.read()?;
        change(&mut file);
        self.write(&file)
    }

    /// Deletes the file; `false` when there was none.
    pub fn remove(&self) -> Result<bool, StoreError> {
        match std::fs::remove_file(&self.path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(self.error(e)),
        }
    }
}

fn store_error(error: StoreError) -> AuthError {
    AuthError::CredentialStoreError(error.to_string())
}

#[async_trait::async_trait]
impl CredentialStore for FileStore {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        self.read()
            .map(|file| file.credentials)
            .map_err(store_error)
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        self.update(|file| {
            file.client_id = Some(credentials.client_id.clone());
            file.credentials = Some(credentials);
        })
        .map_err(store_error)
    }

    async fn clear(&self) -> Result<(), AuthError> {
        self.update(|file| file.credentials = None)
            .map_err(store_error)
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn files_are_private_keyed_by_url_and_survive_a_rewrite() {
        let dir = tempfile::tempdir().unwrap();
        let a = FileStore::in_dir(&dir.path().join("t"), "https://a.example/mcp");
        let b = FileStore::in_dir(&dir.path().join("t"), "https://b.example/mcp");
        assert_ne!(a.path(), b.path());
        a.update(|f| f.client_id = Some("client-a".into())).unwrap();
        let mode = std::fs::metadata(a.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let dir_mode = std::fs::metadata(a.path().parent().unwrap())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(dir_mode & 0o777, 0o700);
        assert_eq!(a.read().unwrap().client_id.as_deref(), Some("client-a"));
        assert_eq!(b.read().unwrap().client_id, None);
        assert!(a.remove().unwrap());
        assert!(!a.remove().unwrap());
    }
}
