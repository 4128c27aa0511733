//! The tool registry: what each upstream exports, named and merged into one view. Pure: no I/O, no async.
//!
//! Upstream supervisors report tool lists; the owner calls [`Registry::replace`] or
//! [`Registry::remove`], which rebuilds every profile's [`View`] once. Listing and dispatch
//! both read that one immutable view, so what a client sees and what executes can never
//! disagree. A profile's view is the global layer masked by the restrictions of every
//! profile in its `extends` chain ([`restrict`]).

pub mod extra;
mod layers;
pub mod names;
pub mod passthrough;
mod reconfigure;
pub mod restrict;
mod run_code;
mod view;

use std::{
    collections::{BTreeMap, HashMap},
    sync::Arc,
};

use rmcp::model::Tool;

use crate::config::{CodeSettings, Mode, PrefixPolicy, Profile, ProfileName, Retry, ServerId};
use layers::{Layered, Slot, layer_of, name_layer};
pub use names::NameClash;
use passthrough::Offer;
use restrict::Restriction;
pub use restrict::UnmatchedEntry;
use run_code::run_code_entry;
pub use run_code::sdk_text;
pub use view::{ListAnswer, View, Views};

/// What a call of one tool is checked, timed and retried by: prepared once per import and
/// carried by every view's entry, so a call resolved on a view runs by that view's rules even
/// while a newer import is being published.
pub struct CallPolicy {
    /// `None`: no schema, or one that does not compile (warned at import).
    pub input: Option<jsonschema::Validator>,
    pub output: Option<jsonschema::Validator>,
    /// Tool, then server, then gateway default.
    pub timeout_ms: u64,
    /// The tool's own retry, or the server's for tools annotated `idempotentHint`.
    pub retry: Option<Retry>,
    /// Whether its input schema annotates an argument with `x-mcp-header` ([`annotates_headers`]):
    /// a 2026-07-28 call over HTTP then carries `Mcp-Param-*` headers that rmcp checks against
    /// the arguments, so HTTP's modern fast path leaves such a call to rmcp.
    pub header_params: bool,
}

/// Whether any property reached from the root through `properties` keys has an
/// `x-mcp-header` key (where rmcp looks for SEP-2243 annotations).
pub fn annotates_headers(schema: &rmcp::model::JsonObject) -> bool {
    fn properties(value: Option<&serde_json::Value>) -> bool {
        let Some(serde_json::Value::Object(properties)) = value else {
            return false;
        };
        properties
            .values()
            .any(|property| property.get("x-mcp-header").is_some() || properties_of(property))
    }
    fn properties_of(value: &serde_json::Value) -> bool {
        properties(value.get("properties"))
    }
    properties(schema.get("properties"))
}

impl Default for CallPolicy {
    /// Unvalidated, the gateway's default timeout, no retry.
    fn default() -> Self {
        Self {
            input: None,
            output: None,
            timeout_ms: crate::config::DEFAULT_CALL_TIMEOUT_MS,
            retry: None,
            header_params: false,
        }
    }
}

impl std::fmt::Debug for CallPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallPolicy")
            .field("input", &self.input.is_some())
            .field("output", &self.output.is_some())
            .field("timeout_ms", &self.timeout_ms)
            .field("retry", &self.retry)
            .field("header_params", &self.header_params)
            .finish()
    }
}

impl PartialEq for CallPolicy {
    /// Validators follow from the tool's schemas, which entries compare anyway.
    fn eq(&self, other: &Self) -> bool {
        self.timeout_ms == other.timeout_ms
            && self.retry == other.retry
            && self.header_params == other.header_params
            && self.input.is_some() == other.input.is_some()
            && self.output.is_some() == other.output.is_some()
    }
}

/// A tool as an upstream exports it, with its call policy.
#[derive(Debug, Clone)]
pub struct Imported {
    pub tool: Tool,
    pub policy: Arc<CallPolicy>,
    /// What the upstream listed that `tool` cannot hold ([`extra`]).
    pub extra: extra::Extra,
}

impl From<Tool> for Imported {
    /// No validation, no timeout: for tests and tools whose policy is set elsewhere.
    fn from(tool: Tool) -> Self {
        Self {
            policy: Arc::new(CallPolicy {
                header_params: annotates_headers(&tool.input_schema),
                ..CallPolicy::default()
            }),
            tool,
            extra: None,
        }
    }
}

/// Where a call of an entry goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// Forwarded to `server` as `upstream_name`.
    Upstream,
    /// The gateway's own `run_code`: a program run in a code-mode worker.
    RunCode,
}

/// The name of the code-mode tool; reserved, no upstream tool may take it.
pub const RUN_CODE: &str = "run_code";

/// One exposed tool and where it goes.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolEntry {
    /// Shared, not copied, by every profile's view.
    pub exposed: Arc<str>,
    pub server: ServerId,
    /// The name the upstream knows it by: what a call is forwarded with.
    pub upstream_name: String,
    /// The tool as listed downstream: the upstream's definition with `name` = `exposed`.
    pub tool: Tool,
    /// What the upstream listed that `tool` cannot hold: merged back into `tools/list`.
    pub extra: extra::Extra,
    /// Hash of the definition (serialized once, when imported) and of `exposed`: views
    /// combine these to notice a change without serializing anything.
    pub fingerprint: u64,
    pub policy: Arc<CallPolicy>,
    pub target: Target,
}

/// A profile as the registry needs it: its restriction chain, resolved once.
#[derive(Debug)]
struct ProfileSpec {
    name: ProfileName,
    /// Its own mode, else the nearest ancestor's; `None`: the gateway's.
    mode: Option<Mode>,
    /// This profile and its ancestors, nearest first.
    lineage: Vec<ProfileName>,
    /// This profile's restriction and every ancestor's, nearest first.
    chain: Vec<Arc<Restriction>>,
}

/// The layers (global servers in server-name order; each profile's own servers) and the
/// profiles that mask them.
#[derive(Debug)]
pub struct Registry {
    policy: PrefixPolicy,
    /// Each server's tools, hashed when imported and kept with the entries last made of them.
    servers: BTreeMap<ServerId, Vec<Slot>>,
    /// What each server offers besides tools.
    offers: BTreeMap<ServerId, Offer>,
    /// Servers that are down: still named (so names do not shift under `on-conflict`), but
    /// their tools and offers are withdrawn from every view until they are imported again.
    down: std::collections::BTreeSet<ServerId>,
    profiles: Vec<ProfileSpec>,
    generation: u64,
    /// Per profile, every name it could see before restrictions, sorted: what its
    /// allow/deny entries are checked against.
    known: HashMap<ProfileName, Vec<String>>,
    views: Arc<Views>,
    clashes: Vec<NameClash>,
    code: CodeSettings,
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
                let mut lineage = Vec::new();
                let mut next = Some(profile);
                // Bounded by the profile count, so a cycle that slipped past validation
                // cannot loop forever.
                while let Some(p) = next.filter(|_| lineage.len() <= profiles.len()) {
                    lineage.push(p.name.clone());
                    if let Some(r) = restrictions.get(&p.name) {
                        chain.push(r.clone());
                    }
                    next = p
                        .extends
                        .as_ref()
                        .and_then(|parent| profiles.iter().find(|q| &q.name == parent));
                }
                let mode = lineage.iter().find_map(|name| {
                    profiles
                        .iter()
                        .find(|p| &p.name == name)
                        .and_then(|p| p.mode)
                });
                ProfileSpec {
                    name: profile.name.clone(),
                    mode,
                    lineage,
                    chain,
                }
            })
            .collect();
        let mut registry = Self {
            policy,
            servers: BTreeMap::new(),
            offers: BTreeMap::new(),
            down: std::collections::BTreeSet::new(),
            profiles: specs,
            generation: 0,
            known: HashMap::new(),
            views: Arc::new(Views::default()),
            clashes: Vec::new(),
            code: CodeSettings::default(),
        };
        registry.rebuild();
        registry
    }

    /// Sets the gateway's default mode, the SDK form and the `run_code` limits, and rebuilds.
    pub fn with_code(mut self, code: CodeSettings) -> Self {
        self.code = code;
        // The old views' `run_code` descriptions follow the old settings: none may be reused.
        self.views = Arc::default();
        self.rebuild();
        self
    }

    /// Sets what `server` exports (its whole list: imports are never partial) and rebuilds.
    /// Only these tools are hashed; other servers' entries are reused as they are.
    pub fn replace<T: Into<Imported>>(&mut self, server: &ServerId, tools: Vec<T>) {
        self.down.remove(server);
        let slots = tools.into_iter().map(|t| Slot::new(t.into())).collect();
        self.servers.insert(server.clone(), slots);
        self.rebuild();
    }

    /// Withdraws `server`'s tools and offers until its next [`Registry::replace`], and rebuilds.
    pub fn mark_down(&mut self, server: &ServerId) {
        if self.down.insert(server.clone()) {
            self.rebuild();
        }
    }

    /// Sets what `server` offers besides tools (whole lists) and rebuilds.
    pub fn replace_offer(&mut self, server: &ServerId, offer: Offer) {
        if self.offers.get(server) != Some(&offer) {
            self.offers.insert(server.clone(), offer);
            self.rebuild();
        }
    }

    /// Forgets `server`'s tools and offer, and rebuilds.
    pub fn remove(&mut self, server: &ServerId) {
        let tools = self.servers.remove(server).is_some();
        let offer = self.offers.remove(server).is_some();
        if tools || offer {
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

    /// The names `profile` could see before restrictions (inherited and its own), sorted:
    /// what its allow/deny entries may name.
    pub fn known_names(&self, profile: &ProfileName) -> &[String] {
        self.known.get(profile).map_or(&[], Vec::as_slice)
    }

    /// Restriction entries that match no name their profile could see: typos to report loudly.
    pub fn unmatched_entries(&self) -> Vec<UnmatchedEntry> {
        self.profiles
            .iter()
            .filter_map(|spec| Some((spec.chain.first()?, self.known_names(&spec.name))))
            .flat_map(|(restriction, known)| restriction.unmatched(known))
            .collect()
    }

    /// Entries of a hook's `tools` (written at `key`) that match no name any of `profiles`
    /// (every profile when empty) could see. The bare `*` of a hook without `tools` is exempt:
    /// it means "every tool", even when there is none yet.
    pub fn unmatched_globs(
        &self,
        key: &str,
        globs: &[String],
        profiles: &[ProfileName],
    ) -> Vec<UnmatchedEntry> {
        let mut known: Vec<String> = self
            .known
            .iter()
            .filter(|(profile, _)| profiles.is_empty() || profiles.contains(profile))
            .flat_map(|(_, names)| names.iter().cloned())
            .collect();
        known.sort();
        known.dedup();
        globs
            .iter()
            .filter(|glob| glob.as_str() != "*")
            .filter(|glob| !known.iter().any(|name| restrict::glob_match(glob, name)))
            .map(|glob| UnmatchedEntry {
                key: key.to_owned(),
                entry: glob.clone(),
                known: known.clone(),
            })
            .collect()
    }

    /// Whether `entry` could name a tool of the server `server` once it is up: under
    /// `prefix = "always"` only an entry that can start with `{server}__`; under the other
    /// policies a tool may keep its bare name, so any entry could.
    pub fn could_name_server(&self, entry: &str, server: &crate::config::ServerName) -> bool {
        match self.policy {
            PrefixPolicy::Always => {
                let prefix = format!("{}{}", server.as_str(), names::SEPARATOR);
                let head = entry.split('*').next().unwrap_or_default();
                let has_glob = entry.contains('*');
                head.starts_with(&prefix) || (has_glob && prefix.starts_with(head))
            }
            PrefixPolicy::OnConflict | PrefixPolicy::Never => true,
        }
    }

    /// Names that could not be exposed, with why.
    pub fn clashes(&self) -> &[NameClash] {
        &self.clashes
    }

    fn rebuild(&mut self) {
        // Each layer is named on its own, so a profile's server may take a name a global
        // server has: that is how a profile gets its own variant of a tool (shadowing).
        let mut layers: HashMap<Option<ProfileName>, Vec<Arc<ToolEntry>>> = HashMap::new();
        let mut clashes = Vec::new();
        // Owned: naming updates the slots (their kept entries) while the owners are walked.
        let mut owners: Vec<Option<ProfileName>> =
            self.servers.keys().map(|id| id.owner.clone()).collect();
        owners.dedup();
        for owner in owners {
            let sources: Vec<(&ServerId, &mut Slot)> = self
                .servers
                .iter_mut()
                .filter(|(id, _)| id.owner == owner)
                .flat_map(|(id, slots)| slots.iter_mut().map(move |slot| (id, slot)))
                .collect();
            let (entries, layer_clashes) = name_layer(self.policy, sources);
            clashes.extend(layer_clashes);
            layers.insert(owner, entries);
        }
        self.generation += 1;
        self.clashes = clashes;
        let live_offers: BTreeMap<ServerId, Offer>;
        let offers = if self.down.is_empty() {
            &self.offers
        } else {
            live_offers = self
                .offers
                .iter()
                .filter(|(id, _)| !self.down.contains(*id))
                .map(|(id, offer)| (id.clone(), offer.clone()))
                .collect();
            &live_offers
        };
        let offer_layers = passthrough::name_layers(self.policy, offers);

        let mut known = HashMap::with_capacity(self.profiles.len());
        let mut by_profile =
            crate::FastMap::with_capacity_and_hasher(self.profiles.len(), Default::default());
        for spec in &self.profiles {
            let layer = |profile: Option<&ProfileName>| layer_of(&layers, profile);
            // Global, then each ancestor's own layer, farthest first: nearer replaces farther.
            let mut inherited = Layered::new(layer(None));
            for ancestor in spec.lineage.iter().skip(1).rev() {
                inherited.overlay(layer(Some(ancestor)));
            }
            let own = layer(Some(&spec.name));
            let offers = spec.offers(&offer_layers, self.policy);
            let mut names: Vec<String> = inherited
                .entries
                .iter()
                .chain(own)
                .map(|e| e.exposed.to_string())
                .chain(offers.1)
                .collect();
            let mode = spec.mode.unwrap_or(self.code.mode);
            if mode.has_run_code() {
                // Hooks may name it.
                names.push(RUN_CODE.to_owned());
            }
            names.sort();
            names.dedup();
            known.insert(spec.name.clone(), names);

            // Restrictions mask what is inherited; a profile's own tools are explicit grants,
            // for it and for the profiles extending it: an ancestor's own tool is masked only
            // by the profiles between it and this one, never by the ancestor's own mask.
            let admitted = inherited
                .entries
                .into_iter()
                .filter(|entry| spec.admits(&entry.server, &entry.exposed));
            let mut visible = Layered::new(&[]);
            visible.entries.extend(admitted);
            visible.reindex();
            visible.overlay(own);
            let (mut entries, withdrawn): (Vec<_>, Vec<_>) = visible
                .entries
                .into_iter()
                .partition(|entry| !self.down.contains(&entry.server));
            if mode.has_run_code() {
                let previous = self.views.get(&spec.name).map(Arc::as_ref);
                entries.push(run_code_entry(&entries, &self.code, previous));
            }
            let mut view = View::new(self.generation, entries, mode);
            view.offers = offers.0;
            view.mask = spec.chain.clone();
            view.withdrawn = withdrawn
                .into_iter()
                .map(|entry| (entry.exposed.clone(), entry.server.clone()))
                .collect();
            by_profile.insert(spec.name.clone(), Arc::new(view));
        }
        self.known = known;
        self.views = Arc::new(Views { by_profile });
    }
}

impl ProfileSpec {
    /// Whether this profile's masks let an item of `server` named `exposed` through. A
    /// profile's own items are explicit grants, for it and for the profiles extending it: an
    /// ancestor's own item is masked only by the profiles between it and this one.
    fn admits(&self, server: &ServerId, exposed: &str) -> bool {
        let masks = match &server.owner {
            Some(owner) => self
                .lineage
                .iter()
                .position(|p| p == owner)
                .unwrap_or(self.chain.len()),
            None => self.chain.len(),
        };
        self.chain[..masks.min(self.chain.len())]
            .iter()
            .all(|r| r.admits(exposed))
    }
}

#[cfg(test)]
mod tests;
