//! Prompts, resources and resource templates: named by the prefix policy, layered and masked like tools.
//!
//! Naming (`[gateway] prefix`):
//! - a prompt is `{server}__{prompt}` when prefixed, as a tool is;
//! - a resource URI (and a template's `uriTemplate`) is `{server}+{uri}` when prefixed, for
//!   example `files+file:///notes.md`: the server's own URI stays readable, the result is
//!   still a URI (the server's name joins the scheme, which RFC 3986 allows: `[a-z0-9-]`
//!   and `+`), and the route back is exact (split at the first `+`).
//! - `always` prefixes everything, `never` nothing (the first server in name order keeps a
//!   shared name or URI), `on-conflict` only what two servers of one layer share.
//!
//! Masks: a profile's `allow`/`deny` globs match every exposed name alike: tool names,
//! prompt names, resource URIs and URI templates.

use std::{
    collections::{BTreeMap, HashMap},
    hash::{Hash, Hasher},
    sync::Arc,
};

use rmcp::model::{Prompt, Resource, ResourceTemplate};

use super::extra::{Extra, Extras};
use crate::config::{PrefixPolicy, ProfileName, ServerId};

/// Joins a server's name to a URI it exports.
pub const URI_SEPARATOR: char = '+';

/// What one server offers besides tools, and which optional features it declared.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Offer {
    pub prompts: Vec<Prompt>,
    pub resources: Vec<Resource>,
    pub templates: Vec<ResourceTemplate>,
    pub features: Features,
    /// What the upstream listed that the typed items cannot hold ([`super::extra`]).
    pub extras: OfferExtras,
}

/// The extras of one server's prompts (by name), resources (by URI) and templates (by URI
/// template), as the upstream names them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OfferExtras {
    pub prompts: Extras,
    pub resources: Extras,
    pub templates: Extras,
}

/// The server capabilities toolgate relays, as one upstream declared them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Features {
    pub prompts: bool,
    pub resources: bool,
    pub subscribe: bool,
    pub completions: bool,
    pub logging: bool,
}

impl Features {
    /// Everything toolgate can relay.
    pub fn all() -> Features {
        Features {
            prompts: true,
            resources: true,
            subscribe: true,
            completions: true,
            logging: true,
        }
    }

    fn union(self, other: Features) -> Features {
        Features {
            prompts: self.prompts || other.prompts,
            resources: self.resources || other.resources,
            subscribe: self.subscribe || other.subscribe,
            completions: self.completions || other.completions,
            logging: self.logging || other.logging,
        }
    }
}

/// One exposed prompt, resource or template, and where it comes from.
#[derive(Debug, Clone, PartialEq)]
pub struct Named<T> {
    /// The name (prompts) or URI / URI template (resources, templates) clients see.
    pub exposed: Arc<str>,
    pub server: ServerId,
    /// What the upstream calls it: what a request is forwarded with.
    pub upstream: String,
    /// As listed downstream: the upstream's item with the exposed name or URI.
    pub item: T,
    /// What the upstream listed that `item` cannot hold: merged back into the list.
    pub extra: Extra,
}

/// A server whose offer a profile sees, and how its URIs are written for that profile.
#[derive(Debug, Clone, PartialEq)]
pub struct Source {
    pub server: ServerId,
    pub features: Features,
}

/// Everything one layer's servers offer besides tools, named.
#[derive(Debug, Default)]
pub struct Layer {
    pub prompts: Vec<Arc<Named<Prompt>>>,
    pub resources: Vec<Arc<Named<Resource>>>,
    pub templates: Vec<Arc<Named<ResourceTemplate>>>,
    pub sources: Vec<Source>,
}

/// Names one layer's offers (servers in name order) by the prefix policy.
pub fn name_layer(policy: PrefixPolicy, offers: &[(&ServerId, &Offer)]) -> Layer {
    let prompts = name_all(
        policy,
        offers,
        |offer| (&offer.prompts, &offer.extras.prompts),
        |p| p.name.as_str(),
        |server, name| format!("{}{}{name}", server.name, super::names::SEPARATOR),
        |p, exposed| p.name = exposed.to_owned(),
    );
    let resources = name_all(
        policy,
        offers,
        |offer| (&offer.resources, &offer.extras.resources),
        |r| r.uri.as_str(),
        prefixed_uri,
        |r, exposed| r.uri = exposed.to_owned(),
    );
    let templates = name_all(
        policy,
        offers,
        |offer| (&offer.templates, &offer.extras.templates),
        |t| t.uri_template.as_str(),
        prefixed_uri,
        |t, exposed| t.uri_template = exposed.to_owned(),
    );
    let sources = offers
        .iter()
        .map(|(server, offer)| Source {
            server: (*server).clone(),
            features: offer.features,
        })
        .collect();
    Layer {
        prompts,
        resources,
        templates,
        sources,
    }
}

fn prefixed_uri(server: &ServerId, uri: &str) -> String {
    format!("{}{URI_SEPARATOR}{uri}", server.name)
}

/// Splits `{server}+{uri}` into the server's short name and its own URI.
pub fn split_uri(exposed: &str) -> Option<(&str, &str)> {
    let (server, rest) = exposed.split_once(URI_SEPARATOR)?;
    let legal = !server.is_empty()
        && server
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    (legal && rest.contains(':')).then_some((server, rest))
}

fn name_all<T: Clone>(
    policy: PrefixPolicy,
    offers: &[(&ServerId, &Offer)],
    items: impl Fn(&Offer) -> (&Vec<T>, &Extras),
    key: impl Fn(&T) -> &str,
    prefix: impl Fn(&ServerId, &str) -> String,
    rename: impl Fn(&mut T, &str),
) -> Vec<Arc<Named<T>>> {
    let mut servers_per_key: HashMap<&str, usize> = HashMap::new();
    for (_, offer) in offers {
        let mut own: Vec<&str> = items(offer).0.iter().map(&key).collect();
        own.sort_unstable();
        own.dedup();
        for k in own {
            *servers_per_key.entry(k).or_default() += 1;
        }
    }
    let mut taken: BTreeMap<String, ()> = BTreeMap::new();
    let mut named = Vec::new();
    for (server, offer) in offers {
        let (list, extras) = items(offer);
        for item in list {
            let upstream = key(item);
            let prefixed = match policy {
                PrefixPolicy::Always => true,
                PrefixPolicy::Never => false,
                PrefixPolicy::OnConflict => servers_per_key.get(upstream).copied().unwrap_or(0) > 1,
            };
            let exposed = if prefixed {
                prefix(server, upstream)
            } else {
                upstream.to_owned()
            };
            if taken.insert(exposed.clone(), ()).is_some() {
                tracing::warn!(server = %server, name = %exposed, "another server of the same layer already exposes this name; set [gateway] prefix = \"always\" or \"on-conflict\" to expose both");
                continue;
            }
            let mut shown = item.clone();
            rename(&mut shown, &exposed);
            named.push(Arc::new(Named {
                exposed: exposed.into(),
                server: (*server).clone(),
                upstream: upstream.to_owned(),
                item: shown,
                extra: extras.get(upstream).cloned(),
            }));
        }
    }
    named
}

/// What one profile sees besides tools.
#[derive(Debug, Default)]
pub struct Offers {
    pub prompts: Vec<Arc<Named<Prompt>>>,
    pub resources: Vec<Arc<Named<Resource>>>,
    pub templates: Vec<Arc<Named<ResourceTemplate>>>,
    /// Every server whose offer this profile sees (masks aside), nearest layer last.
    pub sources: Vec<Source>,
    /// Whether `{server}+{uri}` names a server's URI here (every policy but `never`).
    uri_prefixes: bool,
    prompt_index: HashMap<Arc<str>, usize>,
    resource_index: HashMap<Arc<str>, usize>,
    template_index: HashMap<Arc<str>, usize>,
    prompts_fingerprint: u64,
    resources_fingerprint: u64,
}

/// Where a resource URI goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceRoute {
    pub server: ServerId,
    /// The URI the upstream knows.
    pub upstream_uri: String,
    /// What was prepended for this profile (`echo+`), to put back on URIs in the answer.
    pub prefix: Option<String>,
}

impl Offers {
    /// Builds the index of a profile's visible items.
    pub fn new(
        prompts: Vec<Arc<Named<Prompt>>>,
        resources: Vec<Arc<Named<Resource>>>,
        templates: Vec<Arc<Named<ResourceTemplate>>>,
        sources: Vec<Source>,
        policy: PrefixPolicy,
    ) -> Self {
        fn index<T>(items: &[Arc<Named<T>>]) -> HashMap<Arc<str>, usize> {
            items
                .iter()
                .enumerate()
                .map(|(i, n)| (n.exposed.clone(), i))
                .collect()
        }
        let prompts_fingerprint = fingerprint(&prompts);
        let resources_fingerprint =
            fingerprint(&resources) ^ fingerprint(&templates).rotate_left(1);
        Self {
            prompt_index: index(&prompts),
            resource_index: index(&resources),
            template_index: index(&templates),
            prompts,
            resources,
            templates,
            sources,
            uri_prefixes: policy != PrefixPolicy::Never,
            prompts_fingerprint,
            resources_fingerprint,
        }
    }

    pub fn prompt(&self, exposed: &str) -> Option<&Arc<Named<Prompt>>> {
        self.prompt_index.get(exposed).map(|&i| &self.prompts[i])
    }

    pub fn template(&self, exposed: &str) -> Option<&Arc<Named<ResourceTemplate>>> {
        self.template_index
            .get(exposed)
            .map(|&i| &self.templates[i])
    }

    /// What the profile's servers declared, together: what toolgate advertises to it.
    pub fn features(&self) -> Features {
        self.sources
            .iter()
            .fold(Features::default(), |all, s| all.union(s.features))
    }

    pub fn prompts_fingerprint(&self) -> u64 {
        self.prompts_fingerprint
    }

    pub fn resources_fingerprint(&self) -> u64 {
        self.resources_fingerprint
    }

    /// Whether `server`'s offer is part of this profile's view.
    pub fn sees(&self, server: &ServerId) -> bool {
        self.sources.iter().any(|s| &s.server == server)
    }

    /// Routes a URI a client asked for: a listed resource; else `{server}+{uri}` of a server
    /// this profile sees; else the server of the template the URI fits (longest literal
    /// start); else the only server with resources. `admits` is the profile's mask, applied
    /// to URIs that are not listed.
    pub fn route_uri(&self, uri: &str, admits: impl Fn(&str) -> bool) -> Option<ResourceRoute> {
        if let Some(&i) = self.resource_index.get(uri) {
            let named = &self.resources[i];
            return Some(ResourceRoute {
                server: named.server.clone(),
                upstream_uri: named.upstream.clone(),
                prefix: prefix_of(&named.exposed, &named.upstream),
            });
        }
        if !admits(uri) {
            return None;
        }
        if self.uri_prefixes
            && let Some((name, rest)) = split_uri(uri)
            && let Some(source) = self
                .sources
                .iter()
                .rev()
                .find(|s| s.server.name.as_str() == name && s.features.resources)
        {
            return Some(ResourceRoute {
                server: source.server.clone(),
                upstream_uri: rest.to_owned(),
                prefix: Some(format!("{name}{URI_SEPARATOR}")),
            });
        }
        let by_template = self
            .templates
            .iter()
            .filter_map(|t| {
                let head = literal_head(&t.exposed);
                uri.starts_with(head).then_some((head.len(), t))
            })
            .max_by_key(|(len, _)| *len);
        if let Some((_, template)) = by_template {
            let prefix = prefix_of(&template.exposed, &template.upstream);
            let upstream_uri = match &prefix {
                Some(p) => uri.strip_prefix(p.as_str()).unwrap_or(uri).to_owned(),
                None => uri.to_owned(),
            };
            return Some(ResourceRoute {
                server: template.server.clone(),
                upstream_uri,
                prefix,
            });
        }
        let mut with_resources = self.sources.iter().filter(|s| s.features.resources);
        match (with_resources.next(), with_resources.next()) {
            (Some(only), None) => Some(ResourceRoute {
                server: only.server.clone(),
                upstream_uri: uri.to_owned(),
                prefix: None,
            }),
            _ => None,
        }
    }
}

/// `Some("echo+")` when `exposed` is `upstream` with a server prefix.
/// Puts `layer` over `base`: an item of `layer` replaces the same-named one in place.
pub fn overlay<T>(base: &mut Vec<Arc<Named<T>>>, layer: &[Arc<Named<T>>]) {
    for item in layer {
        match base.iter().position(|b| b.exposed == item.exposed) {
            Some(at) => base[at] = item.clone(),
            None => base.push(item.clone()),
        }
    }
}

fn prefix_of(exposed: &str, upstream: &str) -> Option<String> {
    exposed
        .strip_suffix(upstream)
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
}

/// The part of a URI template before its first expression.
fn literal_head(template: &str) -> &str {
    template.split('{').next().unwrap_or(template)
}

fn fingerprint<T: serde::Serialize>(items: &[Arc<Named<T>>]) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for named in items {
        // Serializing an rmcp model type does not fail; an empty string would only make an
        // announcement more likely, never less.
        serde_json::to_string(&named.item)
            .unwrap_or_default()
            .hash(&mut hasher);
        super::extra::hash_extra(&named.extra, &mut hasher);
    }
    hasher.finish()
}

/// Each layer's offers (the global one, each profile's own), named on their own like its tools.
pub(super) fn name_layers(
    policy: PrefixPolicy,
    offers: &BTreeMap<ServerId, Offer>,
) -> HashMap<Option<ProfileName>, Layer> {
    let mut by_owner: HashMap<Option<ProfileName>, Vec<(&ServerId, &Offer)>> = HashMap::new();
    for (id, offer) in offers {
        by_owner
            .entry(id.owner.clone())
            .or_default()
            .push((id, offer));
    }
    by_owner
        .into_iter()
        .map(|(owner, offers)| (owner, name_layer(policy, &offers)))
        .collect()
}

impl super::ProfileSpec {
    /// The prompts, resources and templates this profile sees, and every name it could see
    /// before masks (for the typo check).
    pub(super) fn offers(
        &self,
        layers: &HashMap<Option<ProfileName>, Layer>,
        policy: PrefixPolicy,
    ) -> (Offers, Vec<String>) {
        let empty = Layer::default();
        let mut order: Vec<&Layer> = vec![layers.get(&None).unwrap_or(&empty)];
        for profile in self.lineage.iter().rev() {
            order.push(layers.get(&Some(profile.clone())).unwrap_or(&empty));
        }
        let (mut prompts, mut resources, mut templates, mut sources) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for layer in order {
            overlay(&mut prompts, &layer.prompts);
            overlay(&mut resources, &layer.resources);
            overlay(&mut templates, &layer.templates);
            sources.extend(layer.sources.iter().cloned());
        }
        let known = prompts
            .iter()
            .map(|n| n.exposed.to_string())
            .chain(resources.iter().map(|n| n.exposed.to_string()))
            .chain(templates.iter().map(|n| n.exposed.to_string()))
            .collect();
        prompts.retain(|n| self.admits(&n.server, &n.exposed));
        resources.retain(|n| self.admits(&n.server, &n.exposed));
        templates.retain(|n| self.admits(&n.server, &n.exposed));
        (
            Offers::new(prompts, resources, templates, sources, policy),
            known,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ServerName;

    fn server(name: &str) -> ServerId {
        ServerId::global(ServerName::parse(name).unwrap())
    }

    fn offer(uris: &[&str], prompts: &[&str]) -> Offer {
        Offer {
            resources: uris.iter().map(|u| Resource::new(*u, "r")).collect(),
            prompts: prompts
                .iter()
                .map(|p| Prompt::new(*p, None::<String>, None))
                .collect(),
            templates: vec![ResourceTemplate::new("file:///{path}", "files")],
            features: Features {
                resources: true,
                prompts: true,
                ..Features::default()
            },
            extras: Default::default(),
        }
    }

    #[test]
    fn prefixes_follow_the_policy() {
        let (a, b) = (server("a"), server("b"));
        let (oa, ob) = (
            offer(&["x://1", "x://2"], &["p"]),
            offer(&["x://2"], &["q"]),
        );
        let offers = [(&a, &oa), (&b, &ob)];

        let always = name_layer(PrefixPolicy::Always, &offers);
        let uris: Vec<&str> = always.resources.iter().map(|n| &*n.exposed).collect();
        assert_eq!(uris, ["a+x://1", "a+x://2", "b+x://2"]);
        assert_eq!(always.prompts[0].item.name, "a__p");
        assert_eq!(always.templates[1].exposed.as_ref(), "b+file:///{path}");

        let on_conflict = name_layer(PrefixPolicy::OnConflict, &offers);
        let uris: Vec<&str> = on_conflict.resources.iter().map(|n| &*n.exposed).collect();
        assert_eq!(uris, ["x://1", "a+x://2", "b+x://2"]);
        assert_eq!(on_conflict.prompts[0].exposed.as_ref(), "p");

        let never = name_layer(PrefixPolicy::Never, &offers);
        let uris: Vec<&str> = never.resources.iter().map(|n| &*n.exposed).collect();
        assert_eq!(
            uris,
            ["x://1", "x://2"],
            "the first server keeps a shared URI"
        );
    }

    #[test]
    fn uris_route_back_exactly() {
        let (a, b) = (server("a"), server("b"));
        let (oa, ob) = (offer(&["x://1"], &[]), offer(&["x://1"], &[]));
        let layer = name_layer(PrefixPolicy::Always, &[(&a, &oa), (&b, &ob)]);
        let offers = Offers::new(
            layer.prompts,
            layer.resources,
            layer.templates,
            layer.sources,
            PrefixPolicy::Always,
        );
        let all = |_: &str| true;

        let listed = offers.route_uri("b+x://1", all).unwrap();
        assert_eq!(
            (listed.server, listed.upstream_uri.as_str()),
            (b.clone(), "x://1")
        );
        assert_eq!(listed.prefix.as_deref(), Some("b+"));

        let unlisted = offers.route_uri("a+file:///etc/notes", all).unwrap();
        assert_eq!(unlisted.server, a);
        assert_eq!(unlisted.upstream_uri, "file:///etc/notes");

        assert_eq!(offers.route_uri("zz+x://1", all), None, "no such server");
        assert_eq!(offers.route_uri("a+file:///x", |_| false), None, "masked");
    }

    #[test]
    fn unprefixed_uris_route_by_template_then_by_the_only_server() {
        let a = server("a");
        let oa = offer(&[], &[]);
        let layer = name_layer(PrefixPolicy::Never, &[(&a, &oa)]);
        let offers = Offers::new(
            layer.prompts,
            layer.resources,
            layer.templates,
            layer.sources,
            PrefixPolicy::Never,
        );
        let route = offers.route_uri("file:///tmp/x", |_| true).unwrap();
        assert_eq!(
            (route.server, route.upstream_uri.as_str()),
            (a.clone(), "file:///tmp/x")
        );
        let route = offers.route_uri("other://y", |_| true).unwrap();
        assert_eq!(route.server, a, "the only server with resources");
    }

    #[test]
    fn split_uri_needs_a_server_name_and_a_uri() {
        assert_eq!(split_uri("echo+file:///x"), Some(("echo", "file:///x")));
        assert_eq!(split_uri("svn+ssh://host/repo").map(|s| s.0), Some("svn"));
        assert_eq!(split_uri("file:///a+b"), None);
        assert_eq!(split_uri("echo+nothing"), None);
    }
}
