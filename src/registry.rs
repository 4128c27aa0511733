//! The tool registry: what each upstream exports, named and merged into one view. Pure: no I/O, no async.
//!
//! Upstream supervisors report tool lists; the owner calls [`Registry::replace`] or
//! [`Registry::remove`], which rebuilds every profile's [`View`] once. Listing and dispatch
//! both read that one immutable view, so what a client sees and what executes can never
//! disagree. A profile's view is the global layer masked by the restrictions of every
//! profile in its `extends` chain ([`restrict`]).

pub mod names;
pub mod restrict;

use std::{
    collections::{BTreeMap, HashMap},
    hash::{Hash, Hasher},
    sync::Arc,
};

use rmcp::model::Tool;

use crate::config::{PrefixPolicy, Profile, ProfileName, ServerName};
pub use names::NameClash;
use restrict::Restriction;
pub use restrict::UnmatchedEntry;

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

/// Every profile's view, published together: one change event rebuilds them all.
#[derive(Debug, Default)]
pub struct Views {
    by_profile: HashMap<ProfileName, Arc<View>>,
}

impl Views {
    /// `None` for a profile that is not configured.
    pub fn get(&self, profile: &ProfileName) -> Option<&Arc<View>> {
        self.by_profile.get(profile)
    }
}

/// A profile as the registry needs it: its restriction chain, resolved once.
#[derive(Debug)]
struct ProfileSpec {
    name: ProfileName,
    /// This profile's restriction and every ancestor's, nearest first.
    chain: Vec<Arc<Restriction>>,
}

/// The global layer (each server's imported tools, in server-name order) and the profiles
/// that mask it.
#[derive(Debug)]
pub struct Registry {
    policy: PrefixPolicy,
    servers: BTreeMap<ServerName, Vec<Tool>>,
    profiles: Vec<ProfileSpec>,
    generation: u64,
    /// Every exposed name before restrictions: what restriction entries are checked against.
    known: Vec<String>,
    views: Arc<Views>,
    clashes: Vec<NameClash>,
}

impl Registry {
    /// `profiles` must be validated (parents exist, no cycles), as [`crate::config`] does.
    pub fn new(policy: PrefixPolicy, profiles: &[Profile]) -> Self {
        let restrictions: HashMap<&ProfileName, Arc<Restriction>> = profiles
            .iter()
            .map(|p| (&p.name, Arc::new(Restriction::new(p))))
            .collect();
        let specs = profiles
            .iter()
            .map(|profile| {
                let mut chain = Vec::new();
                let mut next = Some(profile);
                // Bounded by the profile count, so a cycle that slipped past validation
                // cannot loop forever.
                while let Some(p) = next.filter(|_| chain.len() <= profiles.len()) {
                    if let Some(r) = restrictions.get(&p.name) {
                        chain.push(r.clone());
                    }
                    next = p
                        .extends
                        .as_ref()
                        .and_then(|parent| profiles.iter().find(|q| &q.name == parent));
                }
                ProfileSpec {
                    name: profile.name.clone(),
                    chain,
                }
            })
            .collect();
        let mut registry = Self {
            policy,
            servers: BTreeMap::new(),
            profiles: specs,
            generation: 0,
            known: Vec::new(),
            views: Arc::new(Views::default()),
            clashes: Vec::new(),
        };
        registry.rebuild();
        registry
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

    /// The view of `profile`, or `None` if no such profile is configured.
    pub fn view(&self, profile: &ProfileName) -> Option<Arc<View>> {
        self.views.get(profile).cloned()
    }

    /// All views, to publish.
    pub fn views(&self) -> Arc<Views> {
        self.views.clone()
    }

    /// Exposed names before restrictions, sorted: what allow/deny entries may name.
    pub fn known_names(&self) -> &[String] {
        &self.known
    }

    /// Restriction entries that match no known name: typos to report loudly.
    pub fn unmatched_entries(&self) -> Vec<UnmatchedEntry> {
        self.profiles
            .iter()
            .filter_map(|spec| spec.chain.first())
            .flat_map(|restriction| restriction.unmatched(&self.known))
            .collect()
    }

    /// Names that could not be exposed, with why.
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

        let global: Vec<Arc<ToolEntry>> = sources
            .into_iter()
            .zip(exposed)
            .filter_map(|((server, tool), exposed)| {
                let exposed = exposed?;
                let mut shown = tool.clone();
                shown.name = exposed.clone().into();
                Some(Arc::new(ToolEntry {
                    exposed,
                    server: server.clone(),
                    upstream_name: tool.name.to_string(),
                    tool: shown,
                }))
            })
            .collect();
        self.generation += 1;
        let mut known: Vec<String> = global.iter().map(|e| e.exposed.clone()).collect();
        known.sort();
        self.known = known;
        self.clashes = clashes;
        let by_profile = self
            .profiles
            .iter()
            .map(|spec| {
                let visible = global
                    .iter()
                    .filter(|entry| spec.chain.iter().all(|r| r.admits(&entry.exposed)))
                    .cloned()
                    .collect();
                (
                    spec.name.clone(),
                    Arc::new(View::new(self.generation, visible)),
                )
            })
            .collect();
        self.views = Arc::new(Views { by_profile });
    }
}

impl View {
    fn new(generation: u64, entries: Vec<Arc<ToolEntry>>) -> Self {
        let by_name = entries
            .iter()
            .map(|e| (e.exposed.clone(), e.clone()))
            .collect();
        let listed: Vec<Tool> = entries.iter().map(|e| e.tool.clone()).collect();
        Self {
            generation,
            fingerprint: fingerprint(&listed),
            entries,
            by_name,
            listed: Arc::new(listed),
        }
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
