//! Unit tests for config parsing, validation and `${VAR}` expansion.

use super::{validate::expand_vars, *};

fn env(name: &str) -> Option<String> {
    match name {
        "TOKEN" => Some("s3cret".into()),
        "EMPTY" => Some(String::new()),
        _ => None,
    }
}

fn parse(text: &str) -> Result<Config, ConfigError> {
    let raw: RawConfig = Figment::new()
        .merge(Toml::string(text))
        .extract()
        .map_err(|error| ConfigError::Parse {
            file: "test.toml".into(),
            message: describe_figment_error(error),
        })?;
    validate(raw, "test.toml", &env)
}

#[test]
fn stdio_and_http_servers_validate_into_transports() {
    let config = parse(
        r#"
        [gateway]
        prefix = "on-conflict"
        [servers.b-remote]
        url = "https://example.com/mcp"
        headers = { Authorization = "Bearer ${TOKEN}" }
        [servers.a-local]
        command = "run"
        args = ["--x", "${TOKEN}"]
        env = { Mixed_Case = "v" }
        "#,
    )
    .unwrap();
    assert_eq!(config.prefix, PrefixPolicy::OnConflict);
    assert_eq!(config.servers[0].id.to_string(), "a-local");
    assert_eq!(
        config.servers[0].transport,
        Transport::Stdio {
            command: "run".into(),
            args: vec!["--x".into(), "s3cret".into()],
            env: [("Mixed_Case".to_owned(), "v".to_owned())].into(),
            cwd: None
        }
    );
    assert_eq!(
        config.servers[1].transport,
        Transport::Http {
            url: "https://example.com/mcp".into(),
            headers: [("Authorization".to_owned(), "Bearer s3cret".to_owned())].into(),
            auth: None,
        }
    );
}

#[test]
fn unknown_key_names_the_key() {
    let error = parse("[servers.x]\ncomand = \"a\"\n")
        .unwrap_err()
        .to_string();
    assert!(error.contains("comand"), "{error}");
    assert!(error.contains("servers.x"), "{error}");
    assert!(error.starts_with("test.toml"), "{error}");
}

#[test]
fn both_or_neither_transport_is_an_error() {
    let both = parse("[servers.x]\ncommand = \"a\"\nurl = \"http://h\"\n").unwrap_err();
    assert!(both.to_string().contains("found both"), "{both}");
    let neither = parse("[servers.x]\nargs = []\n").unwrap_err();
    assert!(neither.to_string().contains("found neither"), "{neither}");
    assert!(neither.to_string().contains("key `servers.x`"), "{neither}");
}

#[test]
fn bad_server_names_are_rejected() {
    for name in ["Upper", "under_score", "dot.ted"] {
        let error = parse(&format!("[servers.\"{name}\"]\ncommand = \"a\"\n")).unwrap_err();
        assert!(error.to_string().contains("[a-z0-9-]"), "{error}");
    }
}

#[test]
fn unset_variable_names_the_key_and_variable() {
    let error = parse("[servers.x]\ncommand = \"a\"\nenv = { K = \"${NOPE}\" }\n")
        .unwrap_err()
        .to_string();
    assert!(error.contains("servers.x.env.K"), "{error}");
    assert!(error.contains("NOPE is not set"), "{error}");
}

#[test]
fn expansion_handles_literals_and_escapes() {
    assert_eq!(expand_vars("a${TOKEN}b", &env).unwrap(), "as3cretb");
    assert_eq!(expand_vars("$$HOME", &env).unwrap(), "$HOME");
    assert_eq!(expand_vars("cost $5", &env).unwrap(), "cost $5");
    assert_eq!(expand_vars("${EMPTY}", &env).unwrap(), "");
    assert!(expand_vars("${", &env).is_err());
    assert!(expand_vars("${A-B}", &env).is_err());
}

#[test]
fn env_keys_keep_case_only_under_env_and_headers() {
    assert_eq!(
        env_key_to_path("SERVERS__ECHO__ENV__Log_Level"),
        "servers.echo.env.Log_Level"
    );
    assert_eq!(
        env_key_to_path("SERVERS__R__HEADERS__X-Api-Key"),
        "servers.r.headers.X-Api-Key"
    );
    assert_eq!(env_key_to_path("GATEWAY__PREFIX"), "gateway.prefix");
}

#[test]
fn profiles_validate_parents_cycles_and_reserved_names() {
    let ok = parse(
        "[profiles.reviewer]\nallow = [\"a__*\"]\n[profiles.ops]\nextends = \"reviewer\"\ndeny = [\"a__b\"]\n",
    )
    .unwrap();
    let names: Vec<&str> = ok.profiles.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["default", "ops", "reviewer"], "default is implied");

    let unknown = parse("[profiles.ops]\nextends = \"nobody\"\n")
        .unwrap_err()
        .to_string();
    assert!(
        unknown.contains("profiles.ops.extends") && unknown.contains("nobody"),
        "{unknown}"
    );

    let cycle = parse("[profiles.a]\nextends = \"b\"\n[profiles.b]\nextends = \"a\"\n")
        .unwrap_err()
        .to_string();
    assert!(cycle.contains("cycle: a -> b -> a"), "{cycle}");

    let reserved = parse("[profiles.a]\ndeny = [\"run_code\"]\n")
        .unwrap_err()
        .to_string();
    assert!(
        reserved.contains("profiles.a.deny[0]") && reserved.contains("run_code"),
        "{reserved}"
    );
}

#[test]
fn hooks_and_limits_validate_with_defaults() {
    let config = parse(
        "[gateway]\ncall_timeout_ms = 1000\n\
         [servers.gh]\ncommand = \"gh\"\ntimeout_ms = 500\nretry = { attempts = 2 }\n\
         [servers.gh.tools.create]\ntimeout_ms = 100\n\
         [[hooks]]\nstage = \"pre\"\nhttp = \"http://127.0.0.1:9/hook\"\n\
         [[hooks]]\nstage = \"post\"\ncommand = [\"policy\", \"--strict\"]\non_error = \"allow\"\ntimeout_ms = 50\n",
    )
    .unwrap();
    assert_eq!(config.call_timeout_ms, 1000);
    assert_eq!(config.drain_grace_ms, 5000, "the default grace");
    assert_eq!(config.servers[0].timeout_ms, Some(500));
    assert_eq!(
        config.servers[0].retry,
        Some(Retry {
            attempts: 2,
            backoff_ms: 0
        })
    );
    assert_eq!(config.servers[0].tools["create"].timeout_ms, Some(100));
    assert_eq!(config.hooks[0].tools, ["*"], "all tools by default");
    assert_eq!(
        config.hooks[0].on_error,
        OnError::Deny,
        "fail closed by default"
    );
    assert_eq!(config.hooks[0].timeout_ms, DEFAULT_HOOK_TIMEOUT_MS);
    assert_eq!(
        config.hooks[1].transport,
        HookTransport::Command {
            program: "policy".into(),
            args: vec!["--strict".into()],
            env: BTreeMap::new(),
        }
    );
}

#[test]
fn bad_hooks_name_their_key() {
    let both =
        parse("[[hooks]]\nstage = \"pre\"\nhttp = \"http://h\"\ncommand = [\"x\"]\n").unwrap_err();
    assert!(both.to_string().contains("key `hooks[0]`"), "{both}");
    let stage = parse("[[hooks]]\nstage = \"during\"\nhttp = \"http://h\"\n").unwrap_err();
    assert!(stage.to_string().contains("during"), "{stage}");
    let profile =
        parse("[[hooks]]\nstage = \"pre\"\nhttp = \"http://h\"\nprofiles = [\"ghost\"]\n")
            .unwrap_err();
    assert!(
        profile.to_string().contains("hooks[0].profiles[0]"),
        "{profile}"
    );
    let retry = parse("[servers.a]\ncommand = \"a\"\nretry = { attempts = 0 }\n").unwrap_err();
    assert!(
        retry.to_string().contains("servers.a.retry.attempts"),
        "{retry}"
    );
}

#[test]
fn passthrough_resolves_named_variables_only() {
    let config = parse(
        "[servers.x]\ncommand = \"a\"\nenv = { OWN = \"1\" }\nenv_passthrough = [\"TOKEN\", \"UNSET_ONE\"]\n\n[[hooks]]\nstage = \"pre\"\ncommand = [\"h\"]\nenv_passthrough = [\"TOKEN\"]\n",
    )
    .unwrap();
    let Transport::Stdio { env, .. } = &config.servers[0].transport else {
        panic!("stdio expected");
    };
    let expected: BTreeMap<String, String> = [
        ("OWN".to_owned(), "1".to_owned()),
        ("TOKEN".to_owned(), "s3cret".to_owned()),
    ]
    .into();
    assert_eq!(env, &expected, "an unset passthrough name is skipped");
    let HookTransport::Command { env, .. } = &config.hooks[0].transport else {
        panic!("command hook expected");
    };
    assert_eq!(env.get("TOKEN").map(String::as_str), Some("s3cret"));
    let bad = parse("[servers.x]\ncommand = \"a\"\nenv_passthrough = [\"A-B\"]\n").unwrap_err();
    assert!(
        bad.to_string().contains("servers.x.env_passthrough[0]"),
        "{bad}"
    );
    let http =
        parse("[[hooks]]\nstage = \"pre\"\nhttp = \"http://h\"\nenv_passthrough = [\"TOKEN\"]\n")
            .unwrap_err();
    assert!(
        http.to_string().contains("hooks[0].env_passthrough"),
        "{http}"
    );
}

#[test]
fn pinning_defaults_and_an_explicit_section() {
    let config = parse("[servers.x]\ncommand = \"a\"\n").unwrap();
    assert_eq!(config.pinning, PinningSettings::default());
    assert!(
        !config.pinning.required,
        "no section: on only if the lock exists"
    );
    assert_eq!(config.pinning.lock, PathBuf::from(DEFAULT_LOCK));
    assert_eq!(config.pinning.on_change, OnChange::Block);
    assert_eq!(config.pinning.on_new, OnNew::Block);

    let config =
        parse("[gateway.pinning]\nlock = \"pins/${TOKEN}.lock\"\non_change = \"warn\"\non_new = \"allow\"\n")
            .unwrap();
    let mut pinning = config.pinning;
    assert!(pinning.required);
    assert_eq!(pinning.lock, PathBuf::from("pins/s3cret.lock"));
    assert_eq!(pinning.on_change, OnChange::Warn);
    assert_eq!(pinning.on_new, OnNew::Allow);
    pinning.resolve_in(Path::new("/etc/toolgate"));
    assert_eq!(
        pinning.lock,
        PathBuf::from("/etc/toolgate/pins/s3cret.lock")
    );
    pinning.resolve_in(Path::new("/elsewhere"));
    assert_eq!(
        pinning.lock,
        PathBuf::from("/etc/toolgate/pins/s3cret.lock"),
        "an absolute path stays"
    );

    let section_only = parse("[gateway.pinning]\n").unwrap();
    assert!(section_only.pinning.required);
    assert_eq!(section_only.pinning.lock, PathBuf::from(DEFAULT_LOCK));

    for (text, key) in [
        (
            "[gateway.pinning]\nlock = \"\"\n",
            "key `gateway.pinning.lock`",
        ),
        (
            "[gateway.pinning]\nlock = \"${UNSET_ONE}\"\n",
            "key `gateway.pinning.lock`",
        ),
        ("[gateway.pinning]\non_change = \"allow\"\n", "on_change"),
        ("[gateway.pinning]\nextra = 1\n", "extra"),
    ] {
        let error = parse(text).unwrap_err().to_string();
        assert!(error.starts_with("test.toml: "), "{error}");
        assert!(error.contains(key), "{text}: {error}");
    }
}

#[test]
fn the_drain_grace_is_read_and_zero_is_allowed() {
    assert_eq!(
        parse("[gateway]\ndrain_grace_ms = 250\n")
            .unwrap()
            .drain_grace_ms,
        250
    );
    assert_eq!(
        parse("[gateway]\ndrain_grace_ms = 0\n")
            .unwrap()
            .drain_grace_ms,
        0
    );
    let bad = parse("[gateway]\ndrain_grace = 250\n")
        .unwrap_err()
        .to_string();
    assert!(bad.contains("drain_grace"), "{bad}");
}

#[test]
fn oauth_and_client_credentials_auth_tables_are_checked() {
    let config = parse(
        "[servers.a]\nurl = \"https://a.example/mcp\"\n[servers.a.auth]\ntype = \"oauth\"\nscopes = [\"read\"]\n\
         [servers.b]\nurl = \"https://b.example/mcp\"\n[servers.b.auth]\ntype = \"client_credentials\"\nclient_id = \"tg\"\nclient_secret = \"s3cret\"\n\
         [gateway]\ntoken_dir = \"/tmp/tg-tokens\"\n",
    )
    .unwrap();
    let Transport::Http {
        auth: Some(crate::config::UpstreamAuth::OAuth(oauth)),
        ..
    } = &config.servers[0].transport
    else {
        panic!("{:?}", config.servers[0].transport);
    };
    assert_eq!(oauth.scopes, ["read"]);
    assert_eq!(
        oauth.token_dir.as_deref(),
        Some(std::path::Path::new("/tmp/tg-tokens"))
    );
    assert!(matches!(
        &config.servers[1].transport,
        Transport::Http {
            auth: Some(crate::config::UpstreamAuth::ClientCredentials(_)),
            ..
        }
    ));
    for (table, key, says) in [
        ("scopes = []", "servers.x.auth.type", "missing"),
        ("type = \"magic\"", "servers.x.auth.type", "magic"),
        (
            "type = \"oauth\"\nclient_secret = \"s\"",
            "servers.x.auth.client_secret",
            "client_id",
        ),
        (
            "type = \"oauth\"\nclient_metadata_url = \"http://x/doc.json\"",
            "servers.x.auth.client_metadata_url",
            "https://",
        ),
        (
            "type = \"client_credentials\"\nclient_id = \"tg\"",
            "servers.x.auth",
            "client_secret",
        ),
    ] {
        let error = parse(&format!(
            "[servers.x]\nurl = \"https://x.example/mcp\"\n[servers.x.auth]\n{table}\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(error.contains(&format!("key `{key}`")), "{table}: {error}");
        assert!(error.contains(says), "{table}: {error}");
    }
    let error = parse("[servers.x]\ncommand = \"run\"\n[servers.x.auth]\ntype = \"oauth\"\n")
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("`auth` applies to `url` servers only"),
        "{error}"
    );
}
