//! Exposed-name policy: `{server}__{tool}`, on-conflict or bare, always legal for model providers.

use std::collections::HashMap;

use sha2::{Digest, Sha256};

use crate::config::{PrefixPolicy, ServerName};

/// Providers accept `^[A-Za-z0-9_-]{1,64}$`; every exposed name fits it.
pub const MAX_NAME_LEN: usize = 64;
const HASH_LEN: usize = 8;

/// The separator between server and tool in a prefixed name.
pub const SEPARATOR: &str = "__";

/// One upstream tool to be named: which server exports it, under which name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upstream<'a> {
    pub server: &'a ServerName,
    pub tool: &'a str,
}

/// Why a tool got no exposed name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NameClash {
    /// Under `prefix = "never"` (or by coincidence of mapping), two servers want one name.
    /// The first server in order keeps it.
    Shared {
        exposed: String,
        kept: ServerName,
        dropped: ServerName,
    },
    /// The name the gateway reserves for code mode.
    Reserved { server: ServerName, tool: String },
}

impl std::fmt::Display for NameClash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NameClash::Shared {
                exposed,
                kept,
                dropped,
            } => write!(
                f,
                "tool name {exposed:?} is exported by both server \"{kept}\" and server \"{dropped}\"; \
                 set [gateway] prefix = \"always\" or \"on-conflict\" (the tool of \"{dropped}\" is not exposed)"
            ),
            NameClash::Reserved { server, tool } => write!(
                f,
                "server \"{server}\" exports a tool that would be exposed as {tool:?}, a name reserved by toolgate"
            ),
        }
    }
}

/// Names reserved for the gateway's own tools.
pub const RESERVED: &[&str] = &["run_code"];

/// Assigns exposed names to `tools` (in listing order). Returns, for each input, its exposed
/// name or `None` when it clashes; clashes are described in the second vector.
pub fn assign(
    policy: PrefixPolicy,
    tools: &[Upstream<'_>],
) -> (Vec<Option<String>>, Vec<NameClash>) {
    let mut servers_per_name: HashMap<&str, usize> = HashMap::new();
    if policy == PrefixPolicy::OnConflict {
        let mut seen: HashMap<&str, &ServerName> = HashMap::new();
        for t in tools {
            if seen.insert(t.tool, t.server).is_none_or(|s| s != t.server) {
                *servers_per_name.entry(t.tool).or_default() += 1;
            }
        }
    }
    let wanted: Vec<String> = tools
        .iter()
        .map(|t| {
            let prefixed = match policy {
                PrefixPolicy::Always => true,
                PrefixPolicy::OnConflict => servers_per_name.get(t.tool).copied().unwrap_or(0) > 1,
                PrefixPolicy::Never => false,
            };
            if prefixed {
                format!("{}{SEPARATOR}{}", t.server, t.tool)
            } else {
                t.tool.to_owned()
            }
        })
        .collect();

    // First pass: the plain legal form. Second pass: names that had to be mapped and still
    // collide get a hash of their original, so two different originals never share a name.
    let mut legal: Vec<String> = wanted.iter().map(|w| legalize(w, false)).collect();
    let mut count: HashMap<&str, usize> = HashMap::new();
    for name in &legal {
        *count.entry(name.as_str()).or_default() += 1;
    }
    let colliding: Vec<bool> = legal
        .iter()
        .zip(&wanted)
        .map(|(l, w)| count.get(l.as_str()).copied().unwrap_or(0) > 1 && l != w)
        .collect();
    for (i, collides) in colliding.into_iter().enumerate() {
        if collides {
            legal[i] = legalize(&wanted[i], true);
        }
    }

    let mut owner: HashMap<&str, &ServerName> = HashMap::new();
    let mut clashes = Vec::new();
    let mut names = Vec::with_capacity(tools.len());
    for (t, name) in tools.iter().zip(&legal) {
        if RESERVED.contains(&name.as_str()) {
            clashes.push(NameClash::Reserved {
                server: t.server.clone(),
                tool: name.clone(),
            });
            names.push(None);
            continue;
        }
        match owner.get(name.as_str()) {
            Some(kept) => {
                // The same server listing one name twice is its own bug: keep the first quietly.
                if *kept != t.server {
                    clashes.push(NameClash::Shared {
                        exposed: name.clone(),
                        kept: (*kept).clone(),
                        dropped: t.server.clone(),
                    });
                }
                names.push(None);
            }
            None => {
                owner.insert(name, t.server);
                names.push(Some(name.clone()));
            }
        }
    }
    (names, clashes)
}

/// Maps characters outside `[A-Za-z0-9_-]` to `_`; a name that is too long (or `force_hash`)
/// keeps a prefix and ends in `_` plus 8 hex digits of the SHA-256 of the original.
pub fn legalize(name: &str, force_hash: bool) -> String {
    let mapped: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if !force_hash && !mapped.is_empty() && mapped.len() <= MAX_NAME_LEN {
        return mapped;
    }
    let digest = Sha256::digest(name.as_bytes());
    let hash: String = digest
        .iter()
        .take(HASH_LEN / 2)
        .map(|b| format!("{b:02x}"))
        .collect();
    // `mapped` is ASCII, so any byte index is a char boundary.
    let keep = mapped.len().min(MAX_NAME_LEN - HASH_LEN - 1);
    format!("{}_{hash}", &mapped[..keep])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(name: &str) -> ServerName {
        ServerName::parse(name).unwrap()
    }

    fn legal(name: &str) -> bool {
        (1..=MAX_NAME_LEN).contains(&name.len())
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    }

    #[test]
    fn always_prefixes_every_tool() {
        let (a, b) = (server("a"), server("b"));
        let tools = [
            Upstream {
                server: &a,
                tool: "echo",
            },
            Upstream {
                server: &b,
                tool: "x",
            },
        ];
        let (names, clashes) = assign(PrefixPolicy::Always, &tools);
        assert_eq!(names, [Some("a__echo".into()), Some("b__x".into())]);
        assert!(clashes.is_empty());
    }

    #[test]
    fn on_conflict_prefixes_only_shared_names() {
        let (a, b) = (server("a"), server("b"));
        let tools = [
            Upstream {
                server: &a,
                tool: "echo",
            },
            Upstream {
                server: &a,
                tool: "add",
            },
            Upstream {
                server: &b,
                tool: "echo",
            },
        ];
        let (names, _) = assign(PrefixPolicy::OnConflict, &tools);
        assert_eq!(
            names,
            [
                Some("a__echo".into()),
                Some("add".into()),
                Some("b__echo".into())
            ]
        );
    }

    #[test]
    fn never_reports_the_shared_name_with_both_servers() {
        let (a, b) = (server("a"), server("b"));
        let tools = [
            Upstream {
                server: &a,
                tool: "echo",
            },
            Upstream {
                server: &b,
                tool: "echo",
            },
        ];
        let (names, clashes) = assign(PrefixPolicy::Never, &tools);
        assert_eq!(names, [Some("echo".into()), None]);
        assert_eq!(
            clashes,
            [NameClash::Shared {
                exposed: "echo".into(),
                kept: a.clone(),
                dropped: b.clone()
            }]
        );
        let text = clashes[0].to_string();
        assert!(
            text.contains("both server \"a\" and server \"b\""),
            "{text}"
        );
    }

    #[test]
    fn illegal_characters_are_mapped_and_long_names_hashed() {
        let a = server("a");
        let long = "x".repeat(100);
        let tools = [
            Upstream {
                server: &a,
                tool: "dotted.name/with spaces",
            },
            Upstream {
                server: &a,
                tool: &long,
            },
        ];
        let (names, _) = assign(PrefixPolicy::Always, &tools);
        let names: Vec<String> = names.into_iter().map(Option::unwrap).collect();
        assert_eq!(names[0], "a__dotted_name_with_spaces");
        assert_eq!(names[1].len(), MAX_NAME_LEN);
        assert!(names.iter().all(|n| legal(n)), "{names:?}");
        // Deterministic: the same input always gives the same name.
        assert_eq!(
            assign(PrefixPolicy::Always, &tools).0[1].as_deref(),
            Some(names[1].as_str())
        );
    }

    #[test]
    fn mapped_names_that_collide_get_distinct_hashes() {
        let a = server("a");
        let tools = [
            Upstream {
                server: &a,
                tool: "a.b",
            },
            Upstream {
                server: &a,
                tool: "a_b",
            },
            Upstream {
                server: &a,
                tool: "a b",
            },
        ];
        let (names, clashes) = assign(PrefixPolicy::Always, &tools);
        assert!(clashes.is_empty(), "{clashes:?}");
        let names: Vec<String> = names.into_iter().map(Option::unwrap).collect();
        assert_eq!(names[1], "a__a_b", "the unmapped name keeps its plain form");
        assert_ne!(names[0], names[2]);
        assert!(names.iter().all(|n| legal(n)));
    }

    #[test]
    fn long_names_sharing_a_prefix_stay_distinct() {
        let a = server("a");
        let one = format!("{}1", "y".repeat(90));
        let two = format!("{}2", "y".repeat(90));
        let tools = [
            Upstream {
                server: &a,
                tool: &one,
            },
            Upstream {
                server: &a,
                tool: &two,
            },
        ];
        let (names, _) = assign(PrefixPolicy::Always, &tools);
        assert_ne!(names[0], names[1]);
    }

    #[test]
    fn reserved_name_is_refused() {
        let a = server("a");
        let tools = [Upstream {
            server: &a,
            tool: "run_code",
        }];
        let (names, clashes) = assign(PrefixPolicy::Never, &tools);
        assert_eq!(names, [None]);
        assert!(matches!(clashes[0], NameClash::Reserved { .. }));
    }
}
