//! Imported tools, hashed once per import; naming one layer's tools by the prefix policy; overlaying layers (a nearer layer replaces a same-named entry in place).

use std::{
    collections::HashMap,
    hash::{Hash, Hasher},
    sync::Arc,
};

use rmcp::model::Tool;

use super::{Imported, NameClash, Target, ToolEntry, names};
use crate::config::{PrefixPolicy, ProfileName, ServerId};

/// One imported tool as the registry keeps it between rebuilds: serialized and hashed once,
/// when its server's list is imported, so a rebuild for another server's change (or for an
/// offer, or a server going down) neither copies nor hashes it again.
#[derive(Debug)]
pub(super) struct Slot {
    imported: Imported,
    /// Hash of the definition as the upstream sent it.
    hash: u64,
    /// The entry the last rebuild made of it: still right while its exposed name is the same,
    /// because everything else it carries comes from this import.
    entry: Option<Arc<ToolEntry>>,
}

impl Slot {
    pub(super) fn new(imported: Imported) -> Self {
        Self {
            hash: {
                let mut hasher = std::collections::hash_map::DefaultHasher::new();
                hasher.write_u64(fingerprint(&imported.tool));
                super::extra::hash_extra(&imported.extra, &mut hasher);
                hasher.finish()
            },
            imported,
            entry: None,
        }
    }

    /// Gives the tool a new timeout and retry (a reload changed the limits); its validators
    /// are kept. Returns whether anything changed.
    pub(super) fn retime(&mut self, timeout_ms: u64, retry: Option<crate::config::Retry>) -> bool {
        let old = &self.imported.policy;
        if old.timeout_ms == timeout_ms && old.retry == retry {
            return false;
        }
        self.imported.policy = Arc::new(super::CallPolicy {
            input: old.input.clone(),
            output: old.output.clone(),
            timeout_ms,
            retry,
            header_params: old.header_params,
        });
        // The kept entry carries the old policy.
        self.entry = None;
        true
    }

    /// The tool as its upstream exported it (cleaned), under its upstream name.
    pub(super) fn tool(&self) -> &rmcp::model::Tool {
        &self.imported.tool
    }

    /// The entry exposing this tool as `exposed`: the last one if its name is unchanged
    /// (the same `Arc`), else a renamed copy whose fingerprint combines the stored hash with
    /// the new name, so nothing is serialized.
    fn entry(&mut self, server: &ServerId, exposed: String) -> Arc<ToolEntry> {
        if let Some(entry) = self.entry.as_ref().filter(|e| *e.exposed == *exposed) {
            return entry.clone();
        }
        let tool = &self.imported.tool;
        let mut shown = tool.clone();
        shown.name = exposed.clone().into();
        let entry = Arc::new(ToolEntry {
            fingerprint: with_name(self.hash, &exposed),
            exposed: exposed.into(),
            server: server.clone(),
            upstream_name: tool.name.to_string(),
            tool: shown,
            extra: self.imported.extra.clone(),
            policy: self.imported.policy.clone(),
            target: Target::Upstream,
        });
        self.entry = Some(entry.clone());
        entry
    }
}

/// Hash of `tool` as serialized: the only place a tool is serialized to be hashed, once per
/// imported tool and once per `run_code` description made.
pub(super) fn fingerprint(tool: &Tool) -> u64 {
    #[cfg(test)]
    SERIALIZED.with(|n| n.set(n.get() + 1));
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    // Serialization of an rmcp model type cannot fail; an empty string would only make a
    // change announcement more likely, never less.
    serde_json::to_string(tool)
        .unwrap_or_default()
        .hash(&mut hasher);
    hasher.finish()
}

/// An entry's fingerprint: its definition's hash and the name it is listed under, which the
/// definition (named as the upstream names it) does not tell.
fn with_name(hash: u64, exposed: &str) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    hasher.write_u64(hash);
    exposed.hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
thread_local! {
    /// Tools serialized by [`fingerprint`] on this thread: what the tests count to show that
    /// a rebuild hashes only what changed. Per thread, because tests run in parallel.
    pub(super) static SERIALIZED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

pub(super) fn layer_of<'a>(
    layers: &'a HashMap<Option<ProfileName>, Vec<Arc<ToolEntry>>>,
    profile: Option<&ProfileName>,
) -> &'a [Arc<ToolEntry>] {
    layers.get(&profile.cloned()).map_or(&[][..], Vec::as_slice)
}

/// Names one layer's tools by the prefix policy. Names depend on the whole layer (a clash
/// under `on-conflict` prefixes both sides), so they are assigned anew each time, which needs
/// only the names; each slot then keeps or renames its entry.
pub(super) fn name_layer(
    policy: PrefixPolicy,
    sources: Vec<(&ServerId, &mut Slot)>,
) -> (Vec<Arc<ToolEntry>>, Vec<NameClash>) {
    let wanted: Vec<names::Upstream<'_>> = sources
        .iter()
        .map(|(id, slot)| names::Upstream {
            server: &id.name,
            tool: slot.imported.tool.name.as_ref(),
        })
        .collect();
    let (exposed, clashes) = names::assign(policy, &wanted);
    let entries = sources
        .into_iter()
        .zip(exposed)
        .filter_map(|((id, slot), exposed)| Some(slot.entry(id, exposed?)))
        .collect();
    (entries, clashes)
}

/// A list of entries in which a later layer replaces a same-named entry in place.
pub(super) struct Layered {
    pub(super) entries: Vec<Arc<ToolEntry>>,
    index: HashMap<Arc<str>, usize>,
}

impl Layered {
    pub(super) fn new(base: &[Arc<ToolEntry>]) -> Self {
        let mut layered = Self {
            entries: base.to_vec(),
            index: HashMap::new(),
        };
        layered.reindex();
        layered
    }

    pub(super) fn reindex(&mut self) {
        self.index = self
            .entries
            .iter()
            .enumerate()
            .map(|(i, e)| (e.exposed.clone(), i))
            .collect();
    }

    pub(super) fn overlay(&mut self, layer: &[Arc<ToolEntry>]) {
        for entry in layer {
            match self.index.get(&entry.exposed) {
                Some(&at) => self.entries[at] = entry.clone(),
                None => {
                    self.index.insert(entry.exposed.clone(), self.entries.len());
                    self.entries.push(entry.clone());
                }
            }
        }
    }
}
