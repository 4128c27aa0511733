//! The request ids in flight on one stdio session, shared by the fast path and rmcp's side.

use std::sync::Mutex;

use rmcp::model::RequestId;
use tokio_util::sync::CancellationToken;

/// The request ids in flight on one stdio session, whichever path took them: a request
/// reusing one is refused as a duplicate ([`crate::downstream::guard`]) by either path. A call the fast
/// path took keeps here too what cancels it. One map, so that a call costs one lookup to take
/// and one to finish (two maps took five lookups a call). Hashed with foldhash, not SipHash
/// (about 200 instructions a lookup): the ids are the client's choice, but a stdio session
/// has one client, which could slow only its own session with ids chosen to collide.
#[derive(Default)]
pub struct IdsInFlight(Mutex<crate::FastMap<RequestId, Option<Taken>>>);

/// A call the fast path took: which taking it is (an id may be reused once its request is
/// cancelled, while the cancelled call is still ending) and what cancels it.
pub(super) struct Taken {
    pub(super) taking: u64,
    pub(super) cancel: CancellationToken,
}

impl IdsInFlight {
    fn lock(&self) -> std::sync::MutexGuard<'_, crate::FastMap<RequestId, Option<Taken>>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes `id`; `false` if it is in flight already.
    pub fn claim(&self, id: &RequestId) -> bool {
        self.claim_as(id, None)
    }

    pub(super) fn claim_as(&self, id: &RequestId, taken: Option<Taken>) -> bool {
        match self.lock().entry(id.clone()) {
            std::collections::hash_map::Entry::Occupied(_) => false,
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(taken);
                true
            }
        }
    }

    pub fn release(&self, id: &RequestId) {
        self.lock().remove(id);
    }

    /// Frees `id` if it is still taking `taking` of a fast-path call; `false` when the client
    /// cancelled that call (its id may be in use again).
    pub(super) fn finish(&self, id: &RequestId, taking: u64) -> bool {
        let mut ids = self.lock();
        match ids.remove(id) {
            Some(Some(taken)) if taken.taking == taking => true,
            // Rare (cancelled, and the id reused): put back what was there.
            Some(other) => {
                ids.insert(id.clone(), other);
                false
            }
            None => false,
        }
    }

    /// Frees `id` if it is a fast-path call, and gives what cancels it.
    pub(super) fn cancel(&self, id: &RequestId) -> Option<CancellationToken> {
        let mut ids = self.lock();
        match ids.get(id) {
            Some(Some(_)) => ids.remove(id).flatten().map(|taken| taken.cancel),
            _ => None,
        }
    }

    /// Cancels every fast-path call in flight.
    pub(super) fn cancel_all(&self) {
        for taken in self.lock().values().flatten() {
            taken.cancel.cancel();
        }
    }
}
