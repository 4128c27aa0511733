//! Names in the config that match no tool: a hook's `tools` like a profile's `allow`/`deny`, under every prefix policy.

mod common;

use common::*;

/// `toolgate tools` on `toml`: (exit code, stderr).
fn tools(work: &Workdir) -> (Option<i32>, String) {
    let config = work.config().display().to_string();
    let (code, _, stderr) = run_toolgate(&["--config", &config, "tools"]);
    (code, stderr)
}

fn hook(tools: &str) -> String {
    format!(
        "[[hooks]]\nstage = \"pre\"\ncommand = [{}]\ntools = [{tools}]\n",
        toml_string(&example("policy_hook").display().to_string())
    )
}

#[test]
fn a_hook_glob_matching_no_tool_is_an_error_listing_known_names() {
    let work = Workdir::new(&format!(
        "{}{}",
        server_toml("other", "other_server", &[]),
        hook("\"ecko__*\", \"other__echo\"")
    ));
    let (code, stderr) = tools(&work);
    assert_eq!(code, Some(64), "{stderr}");
    assert!(
        stderr.contains("key `hooks[0].tools`: entry \"ecko__*\" matches no tool"),
        "{stderr}"
    );
    assert!(!stderr.contains("\"other__echo\" matches"), "{stderr}");
    assert!(
        stderr.contains("known tools: other__echo, other__reverse"),
        "{stderr}"
    );
}

#[test]
fn a_hook_scoped_to_a_profile_is_checked_against_that_profiles_names() {
    // A name that only another profile's own server exports is unknown to `p`.
    let work = Workdir::new(&format!(
        "{}[profiles.p]\n[profiles.q.servers.mine]\ncommand = {}\n{}profiles = [\"p\"]\n",
        server_toml("other", "other_server", &[]),
        toml_string(&example("echo_server").display().to_string()),
        hook("\"mine__echo\"")
    ));
    let (code, stderr) = tools(&work);
    assert_eq!(code, Some(64), "{stderr}");
    assert!(
        stderr.contains("key `hooks[0].tools`: entry \"mine__echo\" matches no tool"),
        "{stderr}"
    );
}

#[test]
fn an_entry_for_a_down_server_is_a_warning_under_every_prefix_policy() {
    for (policy, entry) in [
        ("always", "echo__add"),
        ("on-conflict", "add"),
        ("never", "add"),
    ] {
        let work = Workdir::new(&format!(
            "[gateway]\nprefix = \"{policy}\"\n{}{}[profiles.p]\nallow = [\"{entry}\"]\n{}",
            server_toml("echo", "echo_server", &[("ECHO_EXIT_AT_START", "3")]),
            server_toml("other", "other_server", &[]),
            hook(&format!("\"{entry}\""))
        ));
        let (code, stderr) = tools(&work);
        assert_eq!(code, Some(0), "prefix = {policy}: {stderr}");
        assert!(
            stderr.contains("may name a server that is down (echo)"),
            "prefix = {policy}: {stderr}"
        );
    }
}

#[test]
fn with_every_server_up_a_typo_is_an_error_under_every_prefix_policy() {
    for policy in ["always", "on-conflict", "never"] {
        let work = Workdir::new(&format!(
            "[gateway]\nprefix = \"{policy}\"\n{}{}",
            server_toml("other", "other_server", &[]),
            hook("\"revers\"")
        ));
        let (code, stderr) = tools(&work);
        assert_eq!(code, Some(64), "prefix = {policy}: {stderr}");
        assert!(
            stderr.contains("entry \"revers\" matches no tool"),
            "{stderr}"
        );
    }
}
