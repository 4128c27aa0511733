//! The `${VAR}`s of the generated file: where each comes from, and client interpolation
//! (`${env:X}`, `${input:ID}`, `${userHome}`, ...) rewritten into toolgate's `${VAR}` syntax.
//!
//! toolgate expands `${NAME}` (NAME of `[A-Za-z0-9_]`) from its environment and reads `$$` as
//! a literal `$` (`config::validate::expand_vars`), so every literal `$` of a client value is
//! written as `$$`.

use std::{collections::BTreeMap, path::Path};

use crate::config::Secret;

use super::parse::Input;

/// Why the generated file references a variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A literal secret of the client config, now only in the user's environment. The value
    /// is kept in memory to share one variable between identical secrets; it is never written.
    Secret(Secret),
    /// A VS Code `${input:ID}`: VS Code asked the user; toolgate reads the environment.
    Input {
        id: String,
        description: Option<String>,
        password: bool,
    },
    /// `${env:NAME}` or `${NAME}` in the client config: already an environment variable.
    Reference,
}

#[derive(Debug, Clone)]
pub struct Var {
    pub origin: Origin,
    /// Where it is used: for a secret, where the value was in the client's file (so the user
    /// can find it); otherwise the keys of the generated file.
    pub used_at: Vec<String>,
}

/// Every variable the generated file references, by name.
#[derive(Debug, Clone, Default)]
pub struct Vars {
    pub vars: BTreeMap<String, Var>,
}

impl Vars {
    /// Reserves the names the client config already references, before any secret is given
    /// a name: those cannot be renamed, new ones can.
    pub fn reserve_references(&mut self, value: &str) {
        for token in tokens(value) {
            if let Token::Interpolation(inner) = token
                && !PREDEFINED.contains(&inner)
                && let Some(name) = reference(inner)
            {
                self.vars.entry(name.to_owned()).or_insert(Var {
                    origin: Origin::Reference,
                    used_at: Vec::new(),
                });
            }
        }
    }

    /// A name for `origin`: `preferred` as a variable name, else prefixed with the server,
    /// else numbered; a name already given to the same secret or input is reused.
    pub fn claim(&mut self, preferred: &str, server: &str, origin: Origin, at: &str) -> String {
        let base = var_name(preferred);
        let prefixed = prefixed(server, preferred);
        let numbered = (2..).map(|n| format!("{prefixed}_{n}"));
        for name in [base, prefixed.clone()].into_iter().chain(numbered) {
            match self.vars.get_mut(&name) {
                None => {
                    self.vars.insert(
                        name.clone(),
                        Var {
                            origin,
                            used_at: vec![at.to_owned()],
                        },
                    );
                    return name;
                }
                Some(var) if var.origin != Origin::Reference && var.origin == origin => {
                    var.used_at.push(at.to_owned());
                    return name;
                }
                Some(_) => {}
            }
        }
        unreachable!("the numbered names never run out")
    }

    /// Rewrites a client value with interpolations into toolgate syntax; a literal value
    /// comes back with its `$` escaped. `at` is the generated key, for the report.
    pub fn translate(&mut self, value: &str, cx: &Context<'_>, at: &str) -> Result<String, String> {
        let mut out = String::with_capacity(value.len());
        for token in tokens(value) {
            match token {
                Token::Literal(text) => out.push_str(&escape(text)),
                Token::Interpolation(inner) => {
                    let replacement = self.interpolation(inner, cx, at)?;
                    out.push_str(&replacement);
                }
            }
        }
        Ok(out)
    }

    fn interpolation(&mut self, inner: &str, cx: &Context<'_>, at: &str) -> Result<String, String> {
        let workspace = || {
            cx.workspace.ok_or_else(|| {
                format!(
                    "`${{{inner}}}` in a file that belongs to no workspace (not in .vscode/ or .cursor/)"
                )
            })
        };
        match inner {
            "userHome" => return Ok(self.use_reference("HOME", at)),
            "pathSeparator" | "/" => return Ok("/".to_owned()),
            "workspaceFolder" => return Ok(escape(&workspace()?.display().to_string())),
            "workspaceFolderBasename" => {
                let base = workspace()?
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                return Ok(escape(&base));
            }
            _ => {}
        }
        if let Some(name) = reference(inner) {
            return Ok(self.use_reference(name, at));
        }
        if let Some(id) = inner.strip_prefix("input:") {
            let input = cx.inputs.get(id);
            let origin = Origin::Input {
                id: id.to_owned(),
                description: input.and_then(|i| i.description.clone()),
                password: input.is_some_and(|i| i.password),
            };
            let name = self.claim(id, cx.server, origin, at);
            return Ok(format!("${{{name}}}"));
        }
        Err(format!("`${{{inner}}}` has no equivalent in servers.toml"))
    }

    fn use_reference(&mut self, name: &str, at: &str) -> String {
        let var = self.vars.entry(name.to_owned()).or_insert(Var {
            origin: Origin::Reference,
            used_at: Vec::new(),
        });
        var.used_at.push(at.to_owned());
        format!("${{{name}}}")
    }
}

/// What [`Vars::translate`] needs to know about where a value comes from.
pub struct Context<'a> {
    /// The toolgate name of the server, to prefix new variable names.
    pub server: &'a str,
    /// The client file, for messages.
    pub file: &'a Path,
    pub workspace: Option<&'a Path>,
    pub inputs: &'a BTreeMap<String, Input>,
}

/// Does the value contain a client interpolation (so it is not a literal to judge)?
pub fn has_interpolation(value: &str) -> bool {
    tokens(value)
        .iter()
        .any(|t| matches!(t, Token::Interpolation(_)))
}

/// A literal for toolgate: `$` → `$$`.
pub fn escape(text: &str) -> String {
    text.replace('$', "$$")
}

/// `HELLO_world-1` → `HELLO_WORLD_1`: upper case, `_` between words, never empty.
pub fn var_name(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_uppercase());
        } else if !out.is_empty() && !out.ends_with('_') {
            out.push('_');
        }
    }
    let out = out.trim_end_matches('_');
    match out.chars().next() {
        None => "SECRET".to_owned(),
        // A shell cannot `export` a name that starts with a digit.
        Some(c) if c.is_ascii_digit() => format!("_{out}"),
        Some(_) => out.to_owned(),
    }
}

/// VS Code's and Cursor's own variables, handled by [`Vars::translate`] before references.
const PREDEFINED: &[&str] = &[
    "userHome",
    "pathSeparator",
    "/",
    "workspaceFolder",
    "workspaceFolderBasename",
];

/// `name` as a variable name, after the server's name unless it already starts with it:
/// `context7` + `CONTEXT7_API_KEY` → `CONTEXT7_API_KEY`, `stripe` + `X-API-Key` →
/// `STRIPE_X_API_KEY`.
pub fn prefixed(server: &str, name: &str) -> String {
    let server = var_name(server);
    let name = var_name(name);
    if name == server || name.starts_with(&format!("{server}_")) {
        name
    } else {
        format!("{server}_{name}")
    }
}

/// `env:NAME` or `NAME`: an environment variable toolgate can expand as it is.
fn reference(inner: &str) -> Option<&str> {
    let name = inner.strip_prefix("env:").unwrap_or(inner);
    let legal = !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    legal.then_some(name)
}

#[derive(Debug, PartialEq, Eq)]
enum Token<'a> {
    Literal(&'a str),
    /// The text between `${` and `}`.
    Interpolation(&'a str),
}

fn tokens(value: &str) -> Vec<Token<'_>> {
    let mut out = Vec::new();
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        let Some(len) = rest[start + 2..].find('}') else {
            break;
        };
        if start > 0 {
            out.push(Token::Literal(&rest[..start]));
        }
        out.push(Token::Interpolation(&rest[start + 2..start + 2 + len]));
        rest = &rest[start + 3 + len..];
    }
    if !rest.is_empty() {
        out.push(Token::Literal(rest));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cx<'a>(inputs: &'a BTreeMap<String, Input>, workspace: Option<&'a Path>) -> Context<'a> {
        Context {
            server: "github",
            file: Path::new("mcp.json"),
            workspace,
            inputs,
        }
    }

    #[test]
    fn interpolations_become_toolgate_syntax() {
        let inputs = BTreeMap::from([(
            "gh-token".to_owned(),
            Input {
                description: Some("GitHub token".into()),
                password: true,
            },
        )]);
        let mut vars = Vars::default();
        let cx = cx(&inputs, Some(Path::new("/work/app")));
        for (from, to) in [
            ("${env:API_HOST}/v1", "${API_HOST}/v1"),
            ("${userHome}/data", "${HOME}/data"),
            ("${workspaceFolder}${/}src", "/work/app/src"),
            ("${workspaceFolderBasename}", "app"),
            ("Bearer ${input:gh-token}", "Bearer ${GH_TOKEN}"),
            ("cost: $5 ${", "cost: $$5 $${"),
            ("${PLAIN}", "${PLAIN}"),
        ] {
            assert_eq!(vars.translate(from, &cx, "k").as_deref(), Ok(to), "{from}");
        }
        assert!(matches!(
            &vars.vars["GH_TOKEN"].origin,
            Origin::Input { password: true, .. }
        ));
        assert_eq!(vars.vars["HOME"].origin, Origin::Reference);
        let error = vars.translate("${command:pick}", &cx, "k").unwrap_err();
        assert!(error.contains("${command:pick}"), "{error}");
    }

    #[test]
    fn workspace_folder_needs_a_workspace() {
        let inputs = BTreeMap::new();
        let mut vars = Vars::default();
        assert!(
            vars.translate("${workspaceFolder}", &cx(&inputs, None), "k")
                .is_err()
        );
    }

    #[test]
    fn claims_share_identical_secrets_and_never_take_a_reference() {
        let mut vars = Vars::default();
        vars.reserve_references("${env:API_KEY} ${userHome}");
        assert!(
            !vars.vars.contains_key("userHome"),
            "a predefined name is no reference"
        );
        let secret = |v: &str| Origin::Secret(Secret::new(v.to_owned()));
        assert_eq!(
            vars.claim("API_KEY", "brave", secret("a"), "k1"),
            "BRAVE_API_KEY"
        );
        assert_eq!(
            vars.claim("API_KEY", "brave", secret("a"), "k2"),
            "BRAVE_API_KEY"
        );
        assert_eq!(
            vars.claim("API_KEY", "brave", secret("b"), "k3"),
            "BRAVE_API_KEY_2"
        );
        assert_eq!(
            vars.claim("github_token", "github", secret("c"), "k4"),
            "GITHUB_TOKEN"
        );
        assert_eq!(vars.vars["BRAVE_API_KEY"].used_at, ["k1", "k2"]);
    }

    #[test]
    fn var_names() {
        assert_eq!(var_name("x-api-key"), "X_API_KEY");
        assert_eq!(var_name("--token"), "TOKEN");
        assert_eq!(var_name("9lives"), "_9LIVES");
        assert_eq!(var_name("!!"), "SECRET");
        assert_eq!(prefixed("context7", "CONTEXT7_API_KEY"), "CONTEXT7_API_KEY");
        assert_eq!(prefixed("stripe-mcp", "X-API-Key"), "STRIPE_MCP_X_API_KEY");
    }
}
