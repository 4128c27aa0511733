//! Naming one layer's tools by the prefix policy, and overlaying layers (a nearer layer replaces a same-named entry in place).

use std::{collections::HashMap, sync::Arc};

use super::{Imported, NameClash, Target, ToolEntry, fingerprint, names};
use crate::config::{PrefixPolicy, ProfileName, ServerId};

pub(super) fn layer_of<'a>(
    layers: &'a HashMap<Option<ProfileName>, Vec<Arc<ToolEntry>>>,
    profile: Option<&ProfileName>,
) -> &'a [Arc<ToolEntry>] {
    layers.get(&profile.cloned()).map_or(&[][..], Vec::as_slice)
}

/// Names one layer's tools by the prefix policy.
pub(super) fn name_layer(
    policy: PrefixPolicy,
    sources: Vec<(&ServerId, &Imported)>,
) -> (Vec<Arc<ToolEntry>>, Vec<NameClash>) {
    let wanted: Vec<names::Upstream<'_>> = sources
        .iter()
        .map(|(id, imported)| names::Upstream {
            server: &id.name,
            tool: imported.tool.name.as_ref(),
        })
        .collect();
    let (exposed, clashes) = names::assign(policy, &wanted);
    let entries = sources
        .into_iter()
        .zip(exposed)
        .filter_map(|((id, imported), exposed)| {
            let exposed = exposed?;
            let tool = &imported.tool;
            let mut shown = tool.clone();
            shown.name = exposed.clone().into();
            Some(Arc::new(ToolEntry {
                exposed: exposed.into(),
                server: id.clone(),
                upstream_name: tool.name.to_string(),
                fingerprint: fingerprint(&shown),
                tool: shown,
                policy: imported.policy.clone(),
                target: Target::Upstream,
            }))
        })
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
