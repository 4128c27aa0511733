//! Which literal values of a client config are secrets: a heuristic, documented here and in
//! the README, that errs on the side of moving a value out.
//!
//! A value is a secret when it is not empty and
//! - its name (an `env` key, a header name, a `--flag`, a URL query parameter) contains
//!   `TOKEN`, `SECRET`, `PASSWORD`, `PASSWD`, `PASSPHRASE`, `KEY`, `CREDENTIAL`, `AUTH`,
//!   `COOKIE` or `PRIVATE`, or has a word `PWD`, `PASS` or `PAT` (case-insensitive; a
//!   name ending in the word `FILE`, `PATH` or `DIR` names a file, not a secret; `PWD`
//!   alone is the working directory);
//! - or it is the value of an `Authorization`, `Proxy-Authorization` or `Cookie` header;
//! - or it looks like one whatever its name: it starts with a well-known token prefix
//!   (`ghp_`, `github_pat_`, `glpat-`, `sk-`, `xoxb-`, `AKIA`, `AIza`, `eyJ`, ...) or an
//!   auth scheme (`Bearer `, `Basic `), or it is a URL with a password (`scheme://user:pw@`).
//!
//! Moving a value that was not secret costs one variable to set; leaving a secret in a file
//! costs more.

/// Substrings of a name that mark its value as secret.
const NAME_PARTS: &[&str] = &[
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "KEY",
    "CREDENTIAL",
    "AUTH",
    "COOKIE",
    "PRIVATE",
];

/// Whole words (between `_`, `-`, `.`) of a name that mark its value as secret.
const NAME_WORDS: &[&str] = &["PWD", "PASS", "PAT"];

/// A last word that makes the value a location rather than the secret itself.
const LOCATION_WORDS: &[&str] = &["FILE", "PATH", "DIR"];

/// Prefixes of well-known token formats (GitHub, GitLab, OpenAI/Anthropic/Stripe, Slack,
/// AWS, Google, JWTs, npm, PyPI, Hugging Face).
const VALUE_PREFIXES: &[&str] = &[
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "sk-",
    "sk_live_",
    "sk_test_",
    "rk_live_",
    "xoxb-",
    "xoxp-",
    "xoxa-",
    "xapp-",
    "AKIA",
    "ASIA",
    "AIza",
    "ya29.",
    "eyJ",
    "npm_",
    "pypi-",
    "hf_",
    "Bearer ",
    "Basic ",
];

/// Headers whose whole value is a credential.
const SECRET_HEADERS: &[&str] = &["authorization", "proxy-authorization", "cookie"];

/// Does this name (an env key, header, flag or query parameter) hold a secret?
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    let words: Vec<&str> = upper
        .split(['_', '-', '.'])
        .filter(|w| !w.is_empty())
        .collect();
    if words.last().is_some_and(|w| LOCATION_WORDS.contains(w)) {
        return false;
    }
    if upper == "PWD" {
        return false;
    }
    NAME_PARTS.iter().any(|part| upper.contains(part))
        || words.iter().any(|w| NAME_WORDS.contains(w))
}

pub fn is_secret_header(name: &str) -> bool {
    SECRET_HEADERS.contains(&name.to_ascii_lowercase().as_str()) || is_secret_name(name)
}

/// Does the value itself look like a credential, whatever it is called?
pub fn looks_secret(value: &str) -> bool {
    VALUE_PREFIXES.iter().any(|p| value.starts_with(p)) || url_password(value).is_some()
}

/// The byte range of the password in `scheme://user:password@host...`, if there is one.
pub fn url_password(value: &str) -> Option<std::ops::Range<usize>> {
    let scheme_end = value.find("://")?;
    let scheme = &value[..scheme_end];
    if scheme.is_empty()
        || !scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
    {
        return None;
    }
    let authority_start = scheme_end + 3;
    let rest = &value[authority_start..];
    let authority_len = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_len];
    let at = authority.rfind('@')?;
    let colon = authority[..at].find(':')?;
    let range = authority_start + colon + 1..authority_start + at;
    (!range.is_empty()).then_some(range)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for secret in [
            "GITHUB_PERSONAL_ACCESS_TOKEN",
            "api_key",
            "apiKey",
            "X-API-Key",
            "DB_PASSWORD",
            "CLIENT_SECRET",
            "GOOGLE_APPLICATION_CREDENTIALS_JSON",
            "DB_PWD",
            "SMTP_PASS",
            "GITLAB_PAT",
            "--auth-token",
        ] {
            assert!(is_secret_name(secret), "{secret}");
        }
        for plain in [
            "PWD",
            "HOME",
            "LOG_LEVEL",
            "ALLOWED_DIRECTORIES",
            "SSH_KEY_FILE",
            "GOOGLE_APPLICATION_CREDENTIALS_PATH",
            "PATH",
            "PATTERN",
        ] {
            assert!(!is_secret_name(plain), "{plain}");
        }
        assert!(is_secret_header("Authorization"));
        assert!(is_secret_header("cookie"));
        assert!(!is_secret_header("Accept"));
    }

    #[test]
    fn values() {
        assert!(looks_secret("ghp_abc"));
        assert!(looks_secret("Bearer abc"));
        assert!(looks_secret("postgresql://me:pw@db.local:5432/app"));
        assert!(!looks_secret("postgresql://me@db.local/app"));
        assert!(
            !looks_secret("https://example.com/a:b@c"),
            "the @ is in the path"
        );
        assert!(!looks_secret("/home/me/projects"));
        assert!(!looks_secret("info"));
    }

    #[test]
    fn password_range() {
        let url = "redis://user:s3cret@cache:6379/0";
        let range = url_password(url).expect("has a password");
        assert_eq!(&url[range], "s3cret");
        assert_eq!(url_password("https://user@host/"), None);
        assert_eq!(url_password("https://user:@host/"), None);
    }
}
