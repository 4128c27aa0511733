//! The tool registry: what each upstream exports, named and merged into one view. Pure: no I/O, no async.
//!
//! Upstream supervisors report tool lists; the owner calls [`Registry::replace`] or
//! [`Registry::remove`], which rebuilds the [`View`] once. Listing and dispatch both read that
//! one immutable view, so what a client sees and what executes can never disagree. Profiles
//! (per-agent layers and masks) will add one view per profile over the same global layer.

pub mod names;

use std::{
    collections::{BTreeMap, HashMap},
    hash::{Hash, Hasher},
    sync::Arc,
};

use rmcp::model::Tool;

use crate::config::{PrefixPolicy, ServerName};
pub use names::NameClash;

/// One exposed tool and where it goes.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolEntry {
    pub exposed: String,
    pub server: ServerName,
    /// The name the upstream knows it by: what a call is forwarded with.
    pub upstream_name: String,
    /// The tool as listed downstream: the upstream's definition with `name` = `exposed`.
    pub tool: Tool,
}

/// An immutable snapshot of the visible tools, shared by every reader until the next change.
#[derive(Debug, Default)]
pub struct View {
    /// Bumped on every rebuild.
    pub generation: u64,
    entries: Vec<Arc<ToolEntry>>,
    by_name: HashMap<String, Arc<ToolEntry>>,
    /// The `tools/list` answer, built once per change rather than per request.
    listed: Arc<Vec<Tool>>,
    /// Hash of `listed`: sessions compare it to decide whether to announce a change.
    fingerprint: u64,
}

impl View {
    pub fn get(&self, exposed: &str) -> Option<&Arc<ToolEntry>> {
        self.by_name.get(exposed)
    }

    pub fn entries(&self) -> &[Arc<ToolEntry>] {
        &self.entries
    }

    pub fn tools(&self) -> &Arc<Vec<Tool>> {
        &self.listed
    }

    pub fn fingerprint(&self) -> u64 {
        self.fingerprint
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// The global layer: each server's imported tools, in server-name order.
#[derive(Debug)]
pub struct Registry {
    policy: PrefixPolicy,
    servers: BTreeMap<ServerName, Vec<Tool>>,
    generation: u64,
    view: Arc<View>,
    clashes: Vec<NameClash>,
}

impl Registry {
    pub fn new(policy: PrefixPolicy) -> Self {
        Self {
            policy,
            servers: BTreeMap::new(),
            generation: 0,
            view: Arc::new(View::default()),
            clashes: Vec::new(),
        }
    }

    /// Sets what `server` exports (its whole list: imports are never partial) and rebuilds.
    pub fn replace(&mut self, server: &ServerName, tools: Vec<Tool>) {
        self.servers.insert(server.clone(), tools);
        self.rebuild();
    }

    /// Forgets `server`'s tools and rebuilds.
    pub fn remove(&mut self, server: &ServerName) {
        if self.servers.remove(server).is_some() {
            self.rebuild();
        }
    }

    pub fn view(&self) -> Arc<View> {
        self.view.clone()
    }

    /// Names that could not be exposed in the current view, with why.
    pub fn clashes(&self) -> &[NameClash] {
        &self.clashes
    }

    fn rebuild(&mut self) {
        let sources: Vec<(&ServerName, &Tool)> = self
            .servers
            .iter()
            .flat_map(|(server, tools)| tools.iter().map(move |tool| (server, tool)))
            .collect();
        let wanted: Vec<names::Upstream<'_>> = sources
            .iter()
            .map(|(server, tool)| names::Upstream {
                server,
                tool: tool.name.as_ref(),
            })
            .collect();
        let (exposed, clashes) = names::assign(self.policy, &wanted);

        let mut entries = Vec::with_capacity(sources.len());
        let mut by_name = HashMap::with_capacity(sources.len());
        let mut listed = Vec::with_capacity(sources.len());
        for ((server, tool), exposed) in sources.into_iter().zip(exposed) {
            let Some(exposed) = exposed else { continue };
            let mut shown = tool.clone();
            shown.name = exposed.clone().into();
            let entry = Arc::new(ToolEntry {
                exposed: exposed.clone(),
                server: server.clone(),
                upstream_name: tool.name.to_string(),
                tool: shown.clone(),
            });
            listed.push(shown);
            by_name.insert(exposed, entry.clone());
            entries.push(entry);
        }
        self.generation += 1;
        let fingerprint = fingerprint(&listed);
        self.clashes = clashes;
        self.view = Arc::new(View {
            generation: self.generation,
            entries,
            by_name,
            listed: Arc::new(listed),
            fingerprint,
        });
    }
}

fn fingerprint(tools: &[Tool]) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for tool in tools {
        // Serialization of a tool we built ourselves cannot fail; an empty string would only
        // make a change announcement more likely, never less.
        serde_json::to_string(tool)
            .unwrap_or_default()
            .hash(&mut hasher);
    }
    hasher.finish()
}

#[cfg(test)]
mod tests;
