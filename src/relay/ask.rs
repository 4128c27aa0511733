//! What an upstream asks a client for, and the errors an upstream gets when no client can answer.

use rmcp::{ErrorData, RoleServer, model::ErrorCode, service::Peer};

use crate::config::ServerId;

/// What an upstream asks a client for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ask {
    Sampling,
    Elicitation,
    Roots,
}

impl Ask {
    pub fn method(self) -> &'static str {
        match self {
            Ask::Sampling => "sampling/createMessage",
            Ask::Elicitation => "elicitation/create",
            Ask::Roots => "roots/list",
        }
    }

    pub(super) fn declared_by(self, peer: &Peer<RoleServer>) -> bool {
        peer.peer_info().is_some_and(|info| {
            let caps = &info.capabilities;
            match self {
                Ask::Sampling => caps.sampling.is_some(),
                Ask::Elicitation => caps.elicitation.is_some(),
                Ask::Roots => caps.roots.is_some(),
            }
        })
    }
}

/// The only session that could answer speaks 2026-07-28 and has no call of its own waiting
/// for it.
pub(super) fn asked_between_calls(method: &str, server: &ServerId) -> ErrorData {
    ErrorData::new(
        ErrorCode::METHOD_NOT_FOUND,
        format!(
            "the only client session that could answer {method} from server \"{server}\" speaks 2026-07-28, whose clients are asked only during a call of theirs"
        ),
        None,
    )
}

/// The client that would be asked did not declare the capability for `method`.
pub(super) fn undeclared(method: &str, server: &ServerId) -> ErrorData {
    ErrorData::new(
        ErrorCode::METHOD_NOT_FOUND,
        format!(
            "the client of this session did not declare the capability for {method} (server \"{server}\")"
        ),
        None,
    )
}
