//! A profile's view: the immutable snapshot of what it sees, with the answers built from it on first use.

use std::{
    collections::HashMap,
    hash::Hasher,
    sync::{Arc, OnceLock},
};

use super::{Target, ToolEntry, passthrough::Offers, restrict::Restriction, run_code::sdk_tool};
use crate::{
    code_mode::sdk::{self, SdkTool},
    config::{Mode, ProfileName, ServerId},
};

/// A list answer's result, kept both as JSON text (written as is by the stdio fast path)
/// and as a value (for rmcp's typed path, which takes a value).
#[derive(Debug)]
pub struct ListAnswer {
    pub value: Arc<serde_json::Value>,
    pub json: Arc<str>,
}

/// An immutable snapshot of the visible tools, shared by every reader until the next change.
#[derive(Debug, Default)]
pub struct View {
    /// Bumped on every rebuild.
    pub generation: u64,
    entries: Vec<Arc<ToolEntry>>,
    by_name: crate::FastMap<Arc<str>, Arc<ToolEntry>>,
    /// The `tools/list` answer as sent, per protocol era (before and since 2026-07-28),
    /// built on the first list after a change rather than per request, and only for
    /// profiles someone lists.
    listed: [OnceLock<ListAnswer>; 2],
    /// Combined hash of the entries: sessions compare it to decide whether to announce a change.
    fingerprint: u64,
    mode: Mode,
    /// The code-mode search index over the upstream tools, built on first use.
    catalog: OnceLock<Arc<sdk::Catalog>>,
    /// Names this profile would see but whose server is down: withdrawn from the list, and
    /// a call to one names the server rather than calling the tool unknown.
    pub(super) withdrawn: HashMap<Arc<str>, ServerId>,
    /// Prompts, resources and templates.
    pub(super) offers: Offers,
    /// The profile's restrictions, nearest first: applied to URIs that are read but not listed.
    pub(super) mask: Vec<Arc<Restriction>>,
}

impl View {
    /// `native`, `code` (only `run_code` is listed and directly callable) or `both`.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The upstream tools (no `run_code`): what a program may call.
    pub fn upstream_entries(&self) -> impl Iterator<Item = &Arc<ToolEntry>> {
        self.entries.iter().filter(|e| e.target == Target::Upstream)
    }

    /// `catalog.search` / `catalog.describe` for programs.
    pub fn catalog(&self) -> &Arc<sdk::Catalog> {
        self.catalog.get_or_init(|| {
            let tools: Vec<SdkTool<'_>> = self.upstream_entries().map(|e| sdk_tool(e)).collect();
            Arc::new(sdk::Catalog::new(&tools))
        })
    }

    pub fn get(&self, exposed: &str) -> Option<&Arc<ToolEntry>> {
        self.by_name.get(exposed)
    }

    /// The server of a tool withdrawn from this view because that server is down.
    pub fn withdrawn(&self, exposed: &str) -> Option<&ServerId> {
        self.withdrawn.get(exposed)
    }

    pub fn entries(&self) -> &[Arc<ToolEntry>] {
        &self.entries
    }

    /// The `tools/list` answer for a client of era `modern` (see [`View::listed_entries`]),
    /// built by `build` the first time; a failed build is not kept.
    pub fn tools_answer<E>(
        &self,
        modern: bool,
        build: impl FnOnce(&View) -> Result<serde_json::Value, E>,
    ) -> Result<&ListAnswer, E> {
        let slot = &self.listed[usize::from(modern)];
        if let Some(answer) = slot.get() {
            return Ok(answer);
        }
        let value = build(self)?;
        let json = Arc::from(value.to_string());
        Ok(slot.get_or_init(|| ListAnswer {
            value: Arc::new(value),
            json,
        }))
    }

    /// The entries `tools/list` shows, in its order.
    pub fn listed_entries(&self) -> impl Iterator<Item = &Arc<ToolEntry>> {
        let code_only = self.mode == Mode::Code;
        self.entries
            .iter()
            .filter(move |e| !code_only || e.target == Target::RunCode)
    }

    /// What `tools/list` shows under `name`, if anything (hidden in `code` mode: upstream tools).
    pub fn listed(&self, name: &str) -> Option<&Arc<ToolEntry>> {
        self.get(name)
            .filter(|e| self.mode != Mode::Code || e.target == Target::RunCode)
    }

    pub fn fingerprint(&self) -> u64 {
        self.fingerprint
    }

    /// Prompts, resources and templates this profile sees.
    pub fn offers(&self) -> &Offers {
        &self.offers
    }

    /// Whether any of `server`'s tools, prompts or resources is part of this view.
    pub fn shows_server(&self, server: &ServerId) -> bool {
        self.offers.sees(server) || self.entries.iter().any(|e| &e.server == server)
    }

    /// Whether this profile's masks let `name` (a tool, prompt, URI or template) through.
    pub fn admits(&self, name: &str) -> bool {
        self.mask.iter().all(|r| r.admits(name))
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
    pub(super) by_profile: crate::FastMap<ProfileName, Arc<View>>,
}

impl Views {
    /// `None` for a profile that is not configured.
    pub fn get(&self, profile: &ProfileName) -> Option<&Arc<View>> {
        self.by_profile.get(profile)
    }
}

impl View {
    pub(super) fn new(generation: u64, entries: Vec<Arc<ToolEntry>>, mode: Mode) -> Self {
        let by_name = entries
            .iter()
            .map(|e| (e.exposed.clone(), e.clone()))
            .collect();
        // Only the entries' stored hashes: building a view serializes nothing.
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        for entry in &entries {
            hasher.write_u64(entry.fingerprint);
        }
        Self {
            generation,
            fingerprint: hasher.finish(),
            entries,
            by_name,
            listed: Default::default(),
            mode,
            catalog: OnceLock::new(),
            withdrawn: HashMap::new(),
            offers: Offers::default(),
            mask: Vec::new(),
        }
    }
}
