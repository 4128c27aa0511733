//! Restrictions: a profile's `allow` / `deny` lists of exact names and `*` globs.

use crate::config::{Profile, ProfileName};

/// One profile's own mask. A name passes when it is in `allow` (if given) and not in `deny`;
/// a chain of profiles intersects their masks.
#[derive(Debug)]
pub struct Restriction {
    profile: ProfileName,
    allow: Option<Vec<String>>,
    deny: Vec<String>,
}

/// A name list entry (a profile's `allow`/`deny`, a hook's `tools`) that matches nothing
/// the servers it could apply to export.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnmatchedEntry {
    /// Where it is written, e.g. `profiles.ops.allow` or `hooks[0].tools`.
    pub key: String,
    pub entry: String,
    /// The names it could have matched, sorted.
    pub known: Vec<String>,
}

impl Restriction {
    pub fn new(profile: &Profile) -> Self {
        Self {
            profile: profile.name.clone(),
            allow: profile.allow.clone(),
            deny: profile.deny.clone().unwrap_or_default(),
        }
    }

    pub fn admits(&self, name: &str) -> bool {
        let allowed = self
            .allow
            .as_ref()
            .is_none_or(|allow| allow.iter().any(|p| glob_match(p, name)));
        allowed && !self.deny.iter().any(|p| glob_match(p, name))
    }

    /// Entries of this profile's own lists that match none of `known`.
    pub fn unmatched(&self, known: &[String]) -> Vec<UnmatchedEntry> {
        let allow = self.allow.iter().flatten().map(|e| ("allow", e));
        let deny = self.deny.iter().map(|e| ("deny", e));
        allow
            .chain(deny)
            .filter(|(_, entry)| !known.iter().any(|name| glob_match(entry, name)))
            .map(|(field, entry)| UnmatchedEntry {
                key: format!("profiles.{}.{field}", self.profile),
                entry: entry.clone(),
                known: known.to_vec(),
            })
            .collect()
    }
}

/// `*` matches any run of characters (including none); everything else matches itself.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let Some(first) = parts.next() else {
        return name.is_empty();
    };
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        // No `*` at all: exact match.
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn globs_match_as_expected() {
        assert!(glob_match("echo__echo", "echo__echo"));
        assert!(!glob_match("echo__echo", "echo__echoes"));
        assert!(glob_match("github__get_*", "github__get_issue"));
        assert!(glob_match("github__get_*", "github__get_"));
        assert!(!glob_match("github__get_*", "github__list"));
        assert!(glob_match("*__echo", "other__echo"));
        assert!(glob_match("*", "anything"));
        assert!(glob_match("a*b*c", "aXXbYYc"));
        assert!(!glob_match("a*b*c", "aXXbYY"));
        assert!(
            !glob_match("ab*ba", "aba"),
            "prefix and suffix may not overlap"
        );
    }
}
