//! Children (upstreams and command hooks) see a base environment plus their own `env`, never the gateway's secrets.

mod common;

use common::{Workdir, example, toml_string, toolgate};

/// Every `NAME=` line of an `env` dump.
fn names(dump: &str) -> Vec<&str> {
    dump.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, _)| k)
        .collect()
}

#[test]
fn upstreams_and_hooks_get_only_base_env_their_own_and_passthrough() {
    let work = Workdir::new("");
    let server_dump = work.path("server.env");
    let hook_dump = work.path("hook.env");
    // `sh` writes its environment, then becomes the real server / hook: what they would see.
    let wrap = |dump: &std::path::Path, program: &str| {
        format!(
            "env > '{}'; exec '{}'",
            dump.display(),
            example(program).display()
        )
    };
    let toml = format!(
        "[servers.echo]\ncommand = \"sh\"\nargs = [\"-c\", {}]\nenv = {{ OWN = \"mine\", TOKEN_REF = \"${{OTHER_SECRET}}\" }}\nenv_passthrough = [\"PASSED\"]\n\n\
         [profiles.ops]\ntokens = [\"${{OPS_TOKEN}}\"]\n\n\
         [[hooks]]\nstage = \"pre\"\ncommand = [\"sh\", \"-c\", {}]\nenv = {{ HOOK_OWN = \"h\" }}\n",
        toml_string(&wrap(&server_dump, "echo_server")),
        toml_string(&wrap(&hook_dump, "policy_hook")),
    );
    std::fs::write(work.config(), toml).expect("write config");
    let output = std::process::Command::new(toolgate())
        .arg("--config")
        .arg(work.config())
        .args(["call", "echo__echo", r#"{"text": "hi"}"#])
        .env("OTHER_SECRET", "hunter2")
        .env("OPS_TOKEN", "ops-token-value")
        .env("UNRELATED_SECRET", "do-not-leak")
        .env("PASSED", "passed-value")
        .env("TOOLGATE_GATEWAY__CALL_TIMEOUT_MS", "20000")
        .output()
        .expect("run toolgate call");
    assert!(
        output.status.success(),
        "call failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );

    let server = std::fs::read_to_string(&server_dump).expect("the server dumped its env");
    let server_names = names(&server);
    for leaked in ["UNRELATED_SECRET", "OPS_TOKEN", "OTHER_SECRET"] {
        assert!(
            !server_names.contains(&leaked),
            "{leaked} leaked to the upstream:\n{server}"
        );
    }
    assert!(
        !server_names.iter().any(|n| n.starts_with("TOOLGATE_")),
        "TOOLGATE_* leaked to the upstream:\n{server}"
    );
    assert!(server.contains("OWN=mine\n"), "{server}");
    assert!(
        server.contains("TOKEN_REF=hunter2\n"),
        "its own ${{VAR}} reaches it: {server}"
    );
    assert!(server.contains("PASSED=passed-value\n"), "{server}");
    assert!(
        server_names.contains(&"PATH"),
        "the base set is kept: {server}"
    );

    let hook = std::fs::read_to_string(&hook_dump).expect("the hook dumped its env");
    let hook_names = names(&hook);
    for leaked in [
        "UNRELATED_SECRET",
        "OPS_TOKEN",
        "OTHER_SECRET",
        "PASSED",
        "OWN",
    ] {
        assert!(
            !hook_names.contains(&leaked),
            "{leaked} leaked to the hook:\n{hook}"
        );
    }
    assert!(
        !hook_names.iter().any(|n| n.starts_with("TOOLGATE_")),
        "TOOLGATE_* leaked to the hook:\n{hook}"
    );
    assert!(hook.contains("HOOK_OWN=h\n"), "{hook}");
    assert!(hook_names.contains(&"PATH"), "{hook}");
}
