//! Client server names → toolgate server names, checked by [`ServerName::parse`] itself.

use std::collections::BTreeSet;

use crate::config::ServerName;

/// Hands out unique legal names: names that are already legal first, so that a client's
/// `github` keeps its name even when its `GitHub` normalises to the same.
#[derive(Debug, Default)]
pub struct Names {
    taken: BTreeSet<String>,
}

impl Names {
    /// Reserves every name in `originals` that is legal as it is.
    pub fn reserve_legal<'a>(&mut self, originals: impl IntoIterator<Item = &'a str>) {
        for name in originals {
            if ServerName::parse(name).is_ok() {
                self.taken.insert(name.to_owned());
            }
        }
    }

    /// The name `original` gets: itself when legal (reserved by [`Names::reserve_legal`]),
    /// else its normal form, made unique with `-2`, `-3`, ...
    pub fn assign(&mut self, original: &str) -> ServerName {
        if let Ok(name) = ServerName::parse(original) {
            self.taken.insert(original.to_owned());
            return name;
        }
        let base = normalise(original);
        let mut candidate = base.clone();
        let mut n = 2;
        while self.taken.contains(&candidate) {
            let suffix = format!("-{n}");
            let keep = ServerName::MAX_LEN.saturating_sub(suffix.len());
            candidate = format!(
                "{}{suffix}",
                base[..base.len().min(keep)].trim_end_matches('-')
            );
            n += 1;
        }
        self.taken.insert(candidate.clone());
        // `normalise` only keeps characters `ServerName::parse` accepts; the fallback is
        // for the impossible case, so that a bug cannot become a panic.
        ServerName::parse(&candidate).unwrap_or_else(|_| ServerName::gateway())
    }
}

/// Lower case; every character [`ServerName::parse`] refuses becomes `-`; runs of `-`
/// collapse; no `-` at either end; cut to [`ServerName::MAX_LEN`]; `server` if nothing is left.
pub fn normalise(original: &str) -> String {
    let mut out = String::with_capacity(original.len());
    for c in original.chars().flat_map(char::to_lowercase) {
        let mut buf = [0; 4];
        let legal = ServerName::parse(c.encode_utf8(&mut buf)).is_ok();
        let c = if legal { c } else { '-' };
        if !(c == '-' && (out.is_empty() || out.ends_with('-'))) {
            out.push(c);
        }
    }
    // Every kept character is ASCII, so byte truncation is on a character boundary.
    out.truncate(ServerName::MAX_LEN);
    let out = out.trim_end_matches('-');
    if out.is_empty() {
        "server".to_owned()
    } else {
        out.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normal_forms() {
        for (from, to) in [
            ("GitHub Tools", "github-tools"),
            ("my_server", "my-server"),
            ("@scope/pkg.v2", "scope-pkg-v2"),
            ("--x--", "x"),
            ("Ünïcode", "n-code"),
            ("???", "server"),
            (
                "a-very-long-server-name-that-goes-past-the-limit",
                "a-very-long-server-name-that-goe",
            ),
        ] {
            assert_eq!(normalise(from), to, "{from}");
            assert!(ServerName::parse(to).is_ok(), "{to}");
        }
    }

    #[test]
    fn legal_names_keep_theirs_and_collisions_get_suffixes() {
        let originals = ["GitHub", "github", "Git_Hub", "fs"];
        let mut names = Names::default();
        names.reserve_legal(originals);
        let assigned: Vec<String> = originals
            .iter()
            .map(|o| names.assign(o).to_string())
            .collect();
        assert_eq!(assigned, ["github-2", "github", "git-hub", "fs"]);
    }

    #[test]
    fn suffixes_fit_the_limit() {
        let long = "X".repeat(40);
        let mut names = Names::default();
        let first = names.assign(&long);
        let second = names.assign(&long);
        assert_eq!(first.as_str().len(), ServerName::MAX_LEN);
        assert!(second.as_str().ends_with("-2"), "{second}");
        assert_eq!(second.as_str().len(), ServerName::MAX_LEN);
    }
}
