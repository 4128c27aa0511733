//! Validation: [`RawConfig`] → [`Config`], with `${VAR}` expansion and errors naming file and key.

use std::{collections::BTreeMap, path::PathBuf};

use super::{
    Config, ConfigError, DEFAULT_CALL_TIMEOUT_MS, DEFAULT_DRAIN_GRACE_MS, DEFAULT_HOOK_TIMEOUT_MS,
    DEFAULT_MAX_RESULT_BYTES, HookConfig, HookTransport, Profile, ProfileName, RawConfig, RawHook,
    RawProfile, RawServer, Retry, Secret, ServerConfig, ServerId, ServerName, Transport,
};

/// Turns what the user wrote into what the gateway runs on. `lookup` reads variables for
/// `${VAR}`, so tests can pass their own environment.
pub fn validate(
    raw: RawConfig,
    file: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Config, ConfigError> {
    let invalid = |key: String, message: String| ConfigError::Invalid {
        file: file.to_owned(),
        key,
        message,
    };
    let mut servers = Vec::with_capacity(raw.servers.len());
    for (name, server) in raw.servers {
        servers.push(server_config(None, &name, server, &invalid, lookup)?);
    }
    for (profile, raw_profile) in &raw.profiles {
        let owner =
            ProfileName::parse(profile).map_err(|m| invalid(format!("profiles.{profile}"), m))?;
        for (name, server) in &raw_profile.servers {
            let config =
                server_config(Some(owner.clone()), name, server.clone(), &invalid, lookup)?;
            servers.push(config);
        }
    }
    let profiles = profiles(raw.profiles, &invalid, lookup)?;
    let hooks = raw
        .hooks
        .into_iter()
        .enumerate()
        .map(|(i, hook)| hook_config(i, hook, &profiles, &invalid, lookup))
        .collect::<Result<Vec<_>, _>>()?;
    let gateway = raw.gateway;
    // Every `oauth` server keeps its tokens there ([`crate::upstream::oauth::store`]).
    if let Some(dir) = &gateway.token_dir {
        let dir = PathBuf::from(
            expand_vars(dir, lookup).map_err(|m| invalid("gateway.token_dir".into(), m))?,
        );
        for server in &mut servers {
            if let Transport::Http {
                auth: Some(super::UpstreamAuth::OAuth(settings)),
                ..
            } = &mut server.transport
            {
                settings.token_dir = Some(dir.clone());
            }
        }
    }
    let call_timeout_ms = gateway.call_timeout_ms.unwrap_or(DEFAULT_CALL_TIMEOUT_MS);
    if call_timeout_ms == 0 {
        return Err(invalid(
            "gateway.call_timeout_ms".into(),
            "expected a positive number of milliseconds".into(),
        ));
    }
    let code = super::CodeSettings::from_raw(
        gateway.mode,
        gateway.sdk,
        gateway.sdk_docs,
        gateway.sdk_inline_max_tokens,
        &gateway.code,
        &invalid,
    )?;
    let http = super::http::settings(gateway.http, &profiles, &invalid, &|value| {
        expand_vars(value, lookup)
    })?;
    let mut supervise = super::SuperviseSettings::from_raw(&gateway.supervise, &invalid)?;
    match gateway.max_message_bytes {
        Some(0) => {
            return Err(invalid(
                "gateway.max_message_bytes".into(),
                "expected a positive number of bytes".into(),
            ));
        }
        Some(bytes) => supervise.max_message_bytes = bytes,
        None => {}
    }
    let pinning = super::PinningSettings::from_raw(gateway.pinning, &invalid, &|value| {
        expand_vars(value, lookup)
    })?;
    let tracing = super::TracingSettings::from_raw(gateway.tracing, &invalid, &|value| {
        expand_vars(value, lookup)
    })?;
    let auth = gateway
        .auth
        .map(|raw| super::AuthSettings::from_raw(raw, &profiles, &invalid))
        .transpose()?;
    Ok(Config {
        auth,
        tracing,
        pinning,
        code,
        http,
        supervise,
        call_timeout_ms,
        max_result_bytes: gateway.max_result_bytes.unwrap_or(DEFAULT_MAX_RESULT_BYTES),
        audit_arguments: gateway.audit_arguments,
        // 0 is allowed: cancel whatever is in flight at once.
        drain_grace_ms: gateway.drain_grace_ms.unwrap_or(DEFAULT_DRAIN_GRACE_MS),
        fast_path: gateway.fast_path.unwrap_or(true),
        hooks,
        source: file.to_owned(),
        prefix: gateway.prefix,
        servers,
        profiles,
        require_profile: gateway.require_profile,
    })
}

/// Names, parents (known, acyclic) and restriction entries (well-formed, not `run_code`).
/// Whether an entry matches a real tool is checked at start, once tools are imported.
fn profiles(
    raw: BTreeMap<String, RawProfile>,
    invalid: &dyn Fn(String, String) -> ConfigError,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<Profile>, ConfigError> {
    let mut profiles = Vec::with_capacity(raw.len() + 1);
    // Which profile each token selects: a token may select one profile only.
    let mut token_owner: Vec<(String, &str)> = Vec::new();
    for (name, profile) in &raw {
        let key = format!("profiles.{name}");
        let parsed = ProfileName::parse(name).map_err(|m| invalid(key.clone(), m))?;
        let extends = match &profile.extends {
            Some(parent) if !raw.contains_key(parent) => {
                return Err(invalid(
                    format!("{key}.extends"),
                    format!(
                        "expected the name of a declared profile, found {parent:?} (declared: {})",
                        raw.keys().cloned().collect::<Vec<_>>().join(", ")
                    ),
                ));
            }
            Some(parent) => {
                Some(ProfileName::parse(parent).map_err(|m| invalid(format!("{key}.extends"), m))?)
            }
            None => None,
        };
        for (field, entries) in [("allow", &profile.allow), ("deny", &profile.deny)] {
            for (i, entry) in entries.iter().flatten().enumerate() {
                let at = format!("{key}.{field}[{i}]");
                if entry.is_empty() {
                    return Err(invalid(
                        at,
                        "expected a tool name or glob, found an empty string".into(),
                    ));
                }
                if entry == "run_code" {
                    return Err(invalid(
                        at,
                        "`run_code` is the gateway's own code-mode tool and cannot be allowed or denied".into(),
                    ));
                }
            }
        }
        let mut tokens = Vec::with_capacity(profile.tokens.len());
        for (i, token) in profile.tokens.iter().enumerate() {
            let at = format!("{key}.tokens[{i}]");
            // Errors name the key, never the value: it is a secret.
            let token = expand_vars(token, lookup).map_err(|m| invalid(at.clone(), m))?;
            if token.trim().is_empty() {
                return Err(invalid(
                    at,
                    "expected a bearer token, found an empty string".into(),
                ));
            }
            if let Some((_, other)) = token_owner.iter().find(|(t, _)| *t == token) {
                return Err(invalid(
                    at,
                    format!(
                        "this token is also listed for profile {other:?}; a token selects one profile"
                    ),
                ));
            }
            token_owner.push((token.clone(), name.as_str()));
            tokens.push(Secret::new(token));
        }
        profiles.push(Profile {
            name: parsed,
            extends,
            mode: profile.mode,
            allow: profile.allow.clone(),
            deny: profile.deny.clone(),
            tokens,
        });
    }
    for profile in &profiles {
        let mut seen = vec![&profile.name];
        let mut next = profile.extends.as_ref();
        while let Some(parent) = next {
            if seen.contains(&parent) {
                let chain: Vec<&str> = seen
                    .iter()
                    .map(|p| p.as_str())
                    .chain([parent.as_str()])
                    .collect();
                return Err(invalid(
                    format!("profiles.{}.extends", profile.name),
                    format!(
                        "profiles extend each other in a cycle: {}",
                        chain.join(" -> ")
                    ),
                ));
            }
            seen.push(parent);
            next = profiles
                .iter()
                .find(|p| &p.name == parent)
                .and_then(|p| p.extends.as_ref());
        }
    }
    if !profiles
        .iter()
        .any(|p| p.name.as_str() == ProfileName::DEFAULT)
    {
        profiles.push(Profile {
            name: ProfileName::default_profile(),
            extends: None,
            mode: None,
            allow: None,
            deny: None,
            tokens: Vec::new(),
        });
        profiles.sort_by(|a, b| a.name.cmp(&b.name));
    }
    Ok(profiles)
}

fn server_config(
    owner: Option<ProfileName>,
    name: &str,
    server: RawServer,
    invalid: &dyn Fn(String, String) -> ConfigError,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<ServerConfig, ConfigError> {
    let key = match &owner {
        Some(owner) => format!("profiles.{owner}.servers.{name}"),
        None => format!("servers.{name}"),
    };
    let name = ServerName::parse(name).map_err(|message| invalid(key.clone(), message))?;
    if server.timeout_ms == Some(0) {
        return Err(invalid(
            format!("{key}.timeout_ms"),
            "expected a positive number of milliseconds".into(),
        ));
    }
    check_retry(server.retry, &format!("{key}.retry"), invalid)?;
    for (tool, policy) in &server.tools {
        if policy.timeout_ms == Some(0) {
            return Err(invalid(
                format!("{key}.tools.{tool}.timeout_ms"),
                "expected a positive number of milliseconds".into(),
            ));
        }
        check_retry(policy.retry, &format!("{key}.tools.{tool}.retry"), invalid)?;
    }
    Ok(ServerConfig {
        id: ServerId { owner, name },
        timeout_ms: server.timeout_ms,
        retry: server.retry,
        tools: server.tools.clone(),
        transport: transport(server, &key, invalid, lookup)?,
    })
}

fn check_retry(
    retry: Option<Retry>,
    key: &str,
    invalid: &dyn Fn(String, String) -> ConfigError,
) -> Result<(), ConfigError> {
    match retry {
        Some(retry) if !(1..=10).contains(&retry.attempts) => Err(invalid(
            format!("{key}.attempts"),
            format!("expected 1 to 10 attempts, found {}", retry.attempts),
        )),
        _ => Ok(()),
    }
}

fn hook_config(
    index: usize,
    hook: RawHook,
    profiles: &[Profile],
    invalid: &dyn Fn(String, String) -> ConfigError,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<HookConfig, ConfigError> {
    let key = format!("hooks[{index}]");
    let transport = match (hook.http, hook.command) {
        (Some(url), None) => {
            for (field, present) in [
                ("env", !hook.env.is_empty()),
                ("env_passthrough", !hook.env_passthrough.is_empty()),
            ] {
                if present {
                    return Err(invalid(
                        format!("{key}.{field}"),
                        format!("`{field}` applies to `command` hooks only"),
                    ));
                }
            }
            let url = expand_vars(&url, lookup).map_err(|m| invalid(format!("{key}.http"), m))?;
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(invalid(
                    format!("{key}.http"),
                    format!("expected an http:// or https:// URL, found {url:?}"),
                ));
            }
            HookTransport::Http { url }
        }
        (None, Some(command)) => {
            let mut parts = command
                .iter()
                .enumerate()
                .map(|(i, part)| {
                    expand_vars(part, lookup).map_err(|m| invalid(format!("{key}.command[{i}]"), m))
                })
                .collect::<Result<Vec<_>, _>>()?
                .into_iter();
            let Some(program) = parts.next().filter(|p| !p.trim().is_empty()) else {
                return Err(invalid(
                    format!("{key}.command"),
                    "expected a program and its arguments, found an empty list".into(),
                ));
            };
            let mut env = BTreeMap::new();
            for (name, value) in &hook.env {
                let value = expand_vars(value, lookup)
                    .map_err(|m| invalid(format!("{key}.env.{name}"), m))?;
                env.insert(name.clone(), value);
            }
            pass_through(&mut env, &hook.env_passthrough, &key, invalid, lookup)?;
            HookTransport::Command {
                program,
                args: parts.collect(),
                env,
            }
        }
        (Some(_), Some(_)) => {
            return Err(invalid(
                key,
                "expected exactly one of `http` or `command`, found both".into(),
            ));
        }
        (None, None) => {
            return Err(invalid(
                key,
                "expected exactly one of `http` or `command`, found neither".into(),
            ));
        }
    };
    let mut hook_profiles = Vec::new();
    for (i, name) in hook.profiles.iter().flatten().enumerate() {
        let Some(profile) = profiles.iter().find(|p| p.name.as_str() == name) else {
            let known: Vec<&str> = profiles.iter().map(|p| p.name.as_str()).collect();
            return Err(invalid(
                format!("{key}.profiles[{i}]"),
                format!(
                    "expected a configured profile, found {name:?} (configured: {})",
                    known.join(", ")
                ),
            ));
        };
        hook_profiles.push(profile.name.clone());
    }
    let timeout_ms = hook.timeout_ms.unwrap_or(DEFAULT_HOOK_TIMEOUT_MS);
    if timeout_ms == 0 {
        return Err(invalid(
            format!("{key}.timeout_ms"),
            "expected a positive number of milliseconds".into(),
        ));
    }
    Ok(HookConfig {
        key,
        stage: hook.stage,
        tools: hook.tools.unwrap_or_else(|| vec!["*".to_owned()]),
        profiles: hook_profiles,
        transport,
        timeout_ms,
        on_error: hook.on_error,
    })
}

fn transport(
    server: RawServer,
    key: &str,
    invalid: &dyn Fn(String, String) -> ConfigError,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Transport, ConfigError> {
    let expand = |value: &str, at: String| {
        expand_vars(value, lookup).map_err(|message| invalid(at, message))
    };
    let expand_map = |map: &BTreeMap<String, String>, field: &str| {
        map.iter()
            .map(|(k, v)| Ok((k.clone(), expand(v, format!("{key}.{field}.{k}"))?)))
            .collect::<Result<BTreeMap<_, _>, ConfigError>>()
    };
    match (&server.command, &server.url) {
        (Some(command), None) => {
            if !server.headers.is_empty() {
                return Err(invalid(
                    format!("{key}.headers"),
                    "`headers` applies to `url` servers only".into(),
                ));
            }
            if server.auth.is_some() {
                return Err(invalid(
                    format!("{key}.auth"),
                    "`auth` applies to `url` servers only".into(),
                ));
            }
            let command = expand(command, format!("{key}.command"))?;
            if command.trim().is_empty() {
                return Err(invalid(
                    format!("{key}.command"),
                    "expected a program to run, found an empty string".into(),
                ));
            }
            let args = server
                .args
                .iter()
                .enumerate()
                .map(|(i, arg)| expand(arg, format!("{key}.args[{i}]")))
                .collect::<Result<Vec<_>, _>>()?;
            let cwd = match &server.cwd {
                Some(cwd) => Some(PathBuf::from(expand(cwd, format!("{key}.cwd"))?)),
                None => None,
            };
            let mut env = expand_map(&server.env, "env")?;
            pass_through(&mut env, &server.env_passthrough, key, invalid, lookup)?;
            Ok(Transport::Stdio {
                command,
                args,
                env,
                cwd,
            })
        }
        (None, Some(url)) => {
            for (field, present) in [
                ("args", !server.args.is_empty()),
                ("env", !server.env.is_empty()),
                ("env_passthrough", !server.env_passthrough.is_empty()),
                ("cwd", server.cwd.is_some()),
            ] {
                if present {
                    return Err(invalid(
                        format!("{key}.{field}"),
                        format!("`{field}` applies to `command` servers only"),
                    ));
                }
            }
            let url = expand(url, format!("{key}.url"))?;
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(invalid(
                    format!("{key}.url"),
                    format!("expected an http:// or https:// URL, found {url:?}"),
                ));
            }
            let auth = match &server.auth {
                Some(raw) => Some(super::upstream_auth::validate(
                    raw,
                    &format!("{key}.auth"),
                    invalid,
                    &expand,
                )?),
                None => None,
            };
            Ok(Transport::Http {
                url,
                headers: expand_map(&server.headers, "headers")?,
                auth,
            })
        }
        (Some(_), Some(_)) => Err(invalid(
            key.to_owned(),
            "expected exactly one of `command` (stdio) or `url` (streamable HTTP), found both"
                .into(),
        )),
        (None, None) => Err(invalid(
            key.to_owned(),
            "expected exactly one of `command` (stdio) or `url` (streamable HTTP), found neither"
                .into(),
        )),
    }
}

/// Adds the named variables of the gateway's environment to `env` (an explicit `env` entry
/// wins). An unset one is skipped: passing through means "if the gateway has it".
fn pass_through(
    env: &mut BTreeMap<String, String>,
    names: &[String],
    key: &str,
    invalid: &dyn Fn(String, String) -> ConfigError,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<(), ConfigError> {
    for (i, name) in names.iter().enumerate() {
        let legal = !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !legal {
            return Err(invalid(
                format!("{key}.env_passthrough[{i}]"),
                format!("expected an environment variable name, found {name:?}"),
            ));
        }
        if let Some(value) = lookup(name) {
            env.entry(name.clone()).or_insert(value);
        }
    }
    Ok(())
}

/// Replaces each `${NAME}` with the variable's value; `$$` is a literal `$`. An unset
/// variable is an error rather than an empty string, so a missing secret is caught at start.
pub(crate) fn expand_vars(
    value: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<String, String> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(body) = after.strip_prefix('{') {
            let Some(end) = body.find('}') else {
                return Err(format!("unterminated `${{` in {value:?}"));
            };
            let name = &body[..end];
            let legal =
                !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
            if !legal {
                return Err(format!("`${{{name}}}` is not a variable name"));
            }
            match lookup(name) {
                Some(v) => out.push_str(&v),
                None => return Err(format!("environment variable {name} is not set")),
            }
            rest = &body[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    Ok(out)
}
