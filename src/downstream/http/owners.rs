//! Which identity-provider subject opened each MCP session: a session opened with a token for `sub` A takes no request signed for anyone else.
//!
//! An `Mcp-Session-Id` is not a credential (MCP security best practices: bind session ids to
//! the user). Without this, anyone holding a valid token for the same profile and a leaked
//! session id could send requests on another user's session, and answers and server requests
//! meant for that user (its elicitations, sampling) would reach them. Sessions opened with a
//! static profile token have no subject and are bound by their profile's endpoint alone.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, MutexGuard},
};

/// Session id → the subject that opened it (sessions with a subject only).
#[derive(Debug, Default)]
pub struct Owners {
    by_session: Mutex<HashMap<Arc<str>, Arc<str>>>,
}

/// A request on a session that another subject opened.
#[derive(Debug, thiserror::Error)]
#[error(
    "{}: this MCP session was opened by another identity: open your own session (initialize without Mcp-Session-Id)",
    Self::CODE
)]
pub struct NotYours;

impl NotYours {
    /// Stable machine code, as the other `AUTH_` refusals have ([`super::oauth::OAuthError::code`]).
    pub const CODE: &str = "AUTH_SESSION_NOT_YOURS";
}

impl Owners {
    fn map(&self) -> MutexGuard<'_, HashMap<Arc<str>, Arc<str>>> {
        self.by_session
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Records that `subject` opened `session`.
    pub fn bind(&self, session: &str, subject: Arc<str>) {
        self.map().insert(session.into(), subject);
    }

    /// Whether a request signed for `subject` may use `session`.
    pub fn check(&self, session: &str, subject: Option<&str>) -> Result<(), NotYours> {
        match self.map().get(session) {
            Some(owner) if Some(&**owner) != subject => Err(NotYours),
            _ => Ok(()),
        }
    }

    /// Forgets a closed session.
    pub fn forget(&self, session: &str) {
        self.map().remove(session);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.map().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_opening_subject_uses_a_bound_session() {
        let owners = Owners::default();
        owners.bind("s1", "alice".into());
        assert!(owners.check("s1", Some("alice")).is_ok());
        assert!(owners.check("s1", Some("bob")).is_err());
        assert!(
            owners.check("s1", None).is_err(),
            "a static token on alice's session"
        );
        // Unbound sessions (opened with a static token) are left to their endpoint.
        assert!(owners.check("s2", Some("bob")).is_ok());
        owners.forget("s1");
        assert_eq!(owners.len(), 0);
    }
}
