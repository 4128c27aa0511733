//! Parsed client entries → the `[servers.*]` tables of a `servers.toml`, plus what the user
//! must hear: renames, moved secrets, skipped servers, ignored fields, variables to set.

use std::{collections::BTreeMap, ops::Range};

use serde::Serialize;

use crate::config::Secret;

use super::{
    names::Names,
    parse::{Body, Entry, SourceFile},
    secrets::{is_secret_header, is_secret_name, looks_secret, url_password},
    vars::{Context, Origin, Vars, escape, has_interpolation, prefixed},
};

/// The generated file: serialized by the `toml` crate.
#[derive(Debug, Default, Serialize)]
pub struct Generated {
    pub servers: BTreeMap<String, Server>,
}

/// One `[servers.NAME]` table, in the shape `config::RawServer` reads.
#[derive(Debug, Default, Serialize)]
pub struct Server {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    // Tables last: TOML puts them after the plain keys.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
}

/// What happened to the client config, for stderr. Never holds a secret value.
#[derive(Debug, Default)]
pub struct Report {
    /// (client name, toolgate name)
    pub renames: Vec<(String, String)>,
    /// (generated key, variable)
    pub moved: Vec<(String, String)>,
    /// (client key, file, reason)
    pub skipped: Vec<(String, String, String)>,
    /// Fields left out and other lossy conversions.
    pub notes: Vec<String>,
    pub vars: Vars,
}

/// Converts the entries of `files`; a server named in a later file replaces the earlier one
/// (a project's `.cursor/mcp.json` over `~/.cursor/mcp.json`), as the clients do.
pub fn convert(files: &[SourceFile]) -> (Generated, Report) {
    let mut report = Report::default();
    let mut chosen: BTreeMap<&str, (&SourceFile, &Entry)> = BTreeMap::new();
    for file in files {
        for note in &file.notes {
            report
                .notes
                .push(format!("{}: {note}", file.path.display()));
        }
        for entry in &file.entries {
            if let Some((earlier, _)) = chosen.insert(&entry.name, (file, entry)) {
                report.notes.push(format!(
                    "{} in {} replaces the one in {}",
                    entry.key,
                    file.path.display(),
                    earlier.path.display()
                ));
            }
        }
    }
    let mut vars = Vars::default();
    for (_, entry) in chosen.values() {
        for value in values(&entry.body) {
            vars.reserve_references(value);
        }
    }
    let mut names = Names::default();
    names.reserve_legal(
        chosen
            .values()
            .filter(|(_, e)| !matches!(e.body, Body::Skipped(_)))
            .map(|(_, e)| e.name.as_str()),
    );
    let mut generated = Generated::default();
    for (file, entry) in chosen.values() {
        let path = file.path.display().to_string();
        if let Body::Skipped(reason) = &entry.body {
            report
                .skipped
                .push((entry.key.clone(), path, reason.clone()));
            continue;
        }
        let name = names.assign(&entry.name).to_string();
        let cx = Context {
            server: &name,
            file: &file.path,
            workspace: file.workspace.as_deref(),
            inputs: &file.inputs,
        };
        // A server that fails half-way must leave no variable behind in the report.
        let mut scratch = vars.clone();
        let mut moved = Vec::new();
        match server(entry, &cx, &mut scratch, &mut moved) {
            Ok(server) => {
                vars = scratch;
                report.moved.append(&mut moved);
                if name != entry.name {
                    report.renames.push((entry.name.clone(), name.clone()));
                }
                for field in &entry.ignored {
                    report.notes.push(format!(
                        "{}.{field} ({path}): not carried over: {}",
                        entry.key,
                        hint(field)
                    ));
                }
                generated.servers.insert(name, server);
            }
            Err(reason) => report.skipped.push((entry.key.clone(), path, reason)),
        }
    }
    report.vars = vars;
    (generated, report)
}

/// What to do instead of a field servers.toml has no equivalent for.
fn hint(field: &str) -> &'static str {
    match field {
        "envFile" => {
            "servers.toml reads no env files; export its variables and name them in `env_passthrough`"
        }
        "autoApprove" | "alwaysAllow" | "disabledTools" => {
            "toolgate has no per-client approval list; a profile's `allow`/`deny` or a hook decides"
        }
        "timeout" => "set `timeout_ms` on the server (milliseconds)",
        _ => "servers.toml has no equivalent",
    }
}

/// Every string of a server that may hold an interpolation.
fn values(body: &Body) -> Vec<&str> {
    match body {
        Body::Stdio {
            command,
            args,
            env,
            cwd,
        } => [command.as_str()]
            .into_iter()
            .chain(args.iter().map(String::as_str))
            .chain(env.values().map(String::as_str))
            .chain(cwd.as_deref())
            .collect(),
        Body::Http { url, headers } => [url.as_str()]
            .into_iter()
            .chain(headers.values().map(String::as_str))
            .collect(),
        Body::Skipped(_) => Vec::new(),
    }
}

/// Converts one server, moving literal secrets into variables.
fn server(
    entry: &Entry,
    cx: &Context<'_>,
    vars: &mut Vars,
    moved: &mut Vec<(String, String)>,
) -> Result<Server, String> {
    let key = format!("servers.{}", cx.server);
    // The export list points at the value in the client's file, where the user finds it.
    let mut secret = |preferred: &str, value: &str, what: &str, at: String, vars: &mut Vars| {
        let origin = Origin::Secret(Secret::new(value.to_owned()));
        let field = at.strip_prefix(&key).unwrap_or_default();
        let source = format!("{what} {}{field} in {}", entry.key, cx.file.display());
        let name = vars.claim(preferred, cx.server, origin, &source);
        moved.push((at, name.clone()));
        name
    };
    match &entry.body {
        Body::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let mut out = Server {
                command: Some(vars.translate(command, cx, &format!("{key}.command"))?),
                cwd: match cwd {
                    Some(cwd) => Some(vars.translate(cwd, cx, &format!("{key}.cwd"))?),
                    None => None,
                },
                ..Server::default()
            };
            let mut secret_flag: Option<&str> = None;
            for (i, arg) in args.iter().enumerate() {
                let at = format!("{key}.args[{i}]");
                let flag = arg.strip_prefix('-').map(|f| f.trim_start_matches('-'));
                let value = if has_interpolation(arg) {
                    vars.translate(arg, cx, &at)?
                } else if let Some((name, value)) = flag.and_then(|f| f.split_once('='))
                    && is_secret_name(name)
                    && !value.is_empty()
                {
                    let var = secret(
                        &prefixed(cx.server, name),
                        value,
                        "the part after `=` of",
                        at,
                        vars,
                    );
                    format!("{}${{{var}}}", escape(&arg[..arg.len() - value.len()]))
                } else if let Some(name) = secret_flag.filter(|_| flag.is_none() && !arg.is_empty())
                {
                    let var = secret(&prefixed(cx.server, name), arg, VALUE_OF, at, vars);
                    format!("${{{var}}}")
                } else {
                    literal(arg, cx.server, at, vars, &mut secret)
                };
                secret_flag = flag.filter(|f| !f.contains('=') && is_secret_name(f));
                out.args.push(value);
            }
            for (name, value) in env {
                let at = format!("{key}.env.{name}");
                let value = if value.is_empty() {
                    String::new()
                } else if has_interpolation(value) {
                    vars.translate(value, cx, &at)?
                } else if is_secret_name(name) || looks_secret(value) {
                    format!("${{{}}}", secret(name, value, VALUE_OF, at, vars))
                } else {
                    escape(value)
                };
                out.env.insert(name.clone(), value);
            }
            Ok(out)
        }
        Body::Http { url, headers } => {
            let at = format!("{key}.url");
            let url = if has_interpolation(url) {
                vars.translate(url, cx, &at)?
            } else {
                let mut ranges: Vec<(Range<usize>, String)> = Vec::new();
                if let Some(range) = url_password(url) {
                    ranges.push((range, "PASSWORD".to_owned()));
                }
                // The password comes before the query, so the ranges are in order.
                ranges.extend(secret_query_values(url));
                let mut out = String::new();
                let mut done = 0;
                for (range, name) in ranges {
                    out.push_str(&escape(&url[done..range.start]));
                    let preferred = prefixed(cx.server, &name);
                    let what = if name == "PASSWORD" {
                        "the password in".to_owned()
                    } else {
                        format!("the `{name}` parameter of")
                    };
                    let var = secret(&preferred, &url[range.clone()], &what, at.clone(), vars);
                    out.push_str(&format!("${{{var}}}"));
                    done = range.end;
                }
                out.push_str(&escape(&url[done..]));
                out
            };
            let mut out = Server {
                url: Some(url),
                ..Server::default()
            };
            for (name, value) in headers {
                let at = format!("{key}.headers.{name}");
                let preferred = prefixed(cx.server, name);
                let value = if value.is_empty() {
                    String::new()
                } else if has_interpolation(value) {
                    vars.translate(value, cx, &at)?
                } else if name.eq_ignore_ascii_case("authorization")
                    || name.eq_ignore_ascii_case("proxy-authorization")
                {
                    match auth_scheme(value) {
                        Some((scheme, credential)) => {
                            let preferred = prefixed(cx.server, "TOKEN");
                            let what = format!("the part after `{scheme} ` of");
                            let var = secret(&preferred, credential, &what, at, vars);
                            format!("{} ${{{var}}}", escape(scheme))
                        }
                        None => format!("${{{}}}", secret(&preferred, value, VALUE_OF, at, vars)),
                    }
                } else if is_secret_header(name) || looks_secret(value) {
                    format!("${{{}}}", secret(&preferred, value, VALUE_OF, at, vars))
                } else {
                    escape(value)
                };
                out.headers.insert(name.clone(), value);
            }
            Ok(out)
        }
        Body::Skipped(reason) => Err(reason.clone()),
    }
}

/// How the export list describes a whole value that moved.
const VALUE_OF: &str = "the value of";

/// A literal argument: a URL's password or a whole token-looking value moves out.
fn literal(
    arg: &str,
    server: &str,
    at: String,
    vars: &mut Vars,
    secret: &mut impl FnMut(&str, &str, &str, String, &mut Vars) -> String,
) -> String {
    if let Some(range) = url_password(arg) {
        let var = secret(
            &prefixed(server, "PASSWORD"),
            &arg[range.clone()],
            "the password in",
            at,
            vars,
        );
        format!(
            "{}${{{var}}}{}",
            escape(&arg[..range.start]),
            escape(&arg[range.end..])
        )
    } else if looks_secret(arg) {
        format!(
            "${{{}}}",
            secret(&prefixed(server, "SECRET"), arg, VALUE_OF, at, vars)
        )
    } else {
        escape(arg)
    }
}

/// `Bearer abc` → (`Bearer`, `abc`): the scheme stays readable, the credential moves.
fn auth_scheme(value: &str) -> Option<(&str, &str)> {
    let (scheme, credential) = value.split_once(' ')?;
    let credential = credential.trim();
    let is_scheme = !scheme.is_empty() && scheme.chars().all(|c| c.is_ascii_alphanumeric());
    (is_scheme && !credential.is_empty()).then_some((scheme, credential))
}

/// Ranges of query values whose parameter name is secret-like (`?api_key=...`), each with
/// the parameter name.
fn secret_query_values(url: &str) -> Vec<(Range<usize>, String)> {
    let Some(query_start) = url.find('?').map(|i| i + 1) else {
        return Vec::new();
    };
    let query_end = url[query_start..]
        .find('#')
        .map_or(url.len(), |i| query_start + i);
    let mut out = Vec::new();
    let mut offset = query_start;
    for pair in url[query_start..query_end].split('&') {
        if let Some((name, value)) = pair.split_once('=')
            && is_secret_name(name)
            && !value.is_empty()
        {
            let start = offset + name.len() + 1;
            out.push((start..start + value.len(), name.to_owned()));
        }
        offset += pair.len() + 1;
    }
    out
}

#[cfg(test)]
mod tests;
