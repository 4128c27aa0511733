//! Unit tests for the registry's merged view.

use std::sync::Arc;

use rmcp::model::Tool;
use serde_json::json;

use super::*;

fn tool(name: &str) -> Tool {
    let schema = json!({"type": "object"});
    let serde_json::Value::Object(schema) = schema else {
        unreachable!()
    };
    Tool::new(
        name.to_owned(),
        format!("{name} does things"),
        Arc::new(schema),
    )
}

fn server(name: &str) -> ServerName {
    ServerName::parse(name).unwrap()
}

fn default_profile() -> Profile {
    profile("default", None, None, None)
}

fn profile(
    name: &str,
    extends: Option<&str>,
    allow: Option<&[&str]>,
    deny: Option<&[&str]>,
) -> Profile {
    let list = |l: Option<&[&str]>| l.map(|l| l.iter().map(|s| s.to_string()).collect());
    Profile {
        name: ProfileName::parse(name).unwrap(),
        extends: extends.map(|p| ProfileName::parse(p).unwrap()),
        allow: list(allow),
        deny: list(deny),
    }
}

fn view(registry: &Registry) -> Arc<View> {
    view_of(registry, "default")
}

fn view_of(registry: &Registry, profile: &str) -> Arc<View> {
    registry
        .view(&ProfileName::parse(profile).unwrap())
        .unwrap()
}

fn names(view: &View) -> Vec<&str> {
    view.tools().iter().map(|t| t.name.as_ref()).collect()
}

/// Servers `gh` (get_issue, get_pr, create_issue) and `echo` (echo), with `profiles`.
fn with_profiles(profiles: &[Profile]) -> Registry {
    let mut registry = Registry::new(PrefixPolicy::Always, profiles);
    registry.replace(
        &server("gh"),
        vec![tool("get_issue"), tool("get_pr"), tool("create_issue")],
    );
    registry.replace(&server("echo"), vec![tool("echo")]);
    registry
}

#[test]
fn allow_keeps_only_listed_and_deny_removes() {
    let registry = with_profiles(&[
        default_profile(),
        profile("reviewer", None, Some(&["gh__get_*", "echo__echo"]), None),
        profile("noecho", None, None, Some(&["echo__*"])),
    ]);
    assert_eq!(
        names(&view_of(&registry, "reviewer")),
        ["echo__echo", "gh__get_issue", "gh__get_pr"]
    );
    assert_eq!(
        names(&view_of(&registry, "noecho")),
        ["gh__get_issue", "gh__get_pr", "gh__create_issue"]
    );
    assert_eq!(view_of(&registry, "default").len(), 4);
}

#[test]
fn extends_intersects_the_chain() {
    let registry = with_profiles(&[
        default_profile(),
        profile("reviewer", None, Some(&["gh__get_*", "echo__echo"]), None),
        profile("ops", Some("reviewer"), None, Some(&["echo__echo"])),
    ]);
    assert_eq!(
        names(&view_of(&registry, "ops")),
        ["gh__get_issue", "gh__get_pr"]
    );
}

#[test]
fn empty_allow_hides_everything() {
    let registry = with_profiles(&[default_profile(), profile("none", None, Some(&[]), None)]);
    assert!(view_of(&registry, "none").is_empty());
}

#[test]
fn hidden_tool_is_absent_from_get_like_an_unknown_one() {
    let registry = with_profiles(&[
        default_profile(),
        profile("r", None, Some(&["echo__echo"]), None),
    ]);
    let view = view_of(&registry, "r");
    assert!(view.get("gh__create_issue").is_none());
    assert!(view.get("no_such_tool").is_none());
    assert!(view.get("echo__echo").is_some());
}

#[test]
fn later_imports_are_hidden_by_allow_and_admitted_by_deny() {
    let mut registry = with_profiles(&[
        default_profile(),
        profile("allowing", None, Some(&["gh__get_*"]), None),
        profile("denying", None, None, Some(&["gh__create_*"])),
    ]);
    registry.replace(&server("late"), vec![tool("new")]);
    assert!(view_of(&registry, "allowing").get("late__new").is_none());
    assert!(view_of(&registry, "denying").get("late__new").is_some());
}

#[test]
fn unmatched_entries_are_reported_with_sorted_known_names() {
    let registry = with_profiles(&[
        default_profile(),
        profile(
            "typo",
            None,
            Some(&["gh__get_isue", "gh__get_*"]),
            Some(&["nothing*"]),
        ),
    ]);
    let unmatched = registry.unmatched_entries();
    let entries: Vec<(&str, &str)> = unmatched
        .iter()
        .map(|u| (u.field, u.entry.as_str()))
        .collect();
    assert_eq!(entries, [("allow", "gh__get_isue"), ("deny", "nothing*")]);
    assert_eq!(
        registry.known_names(),
        [
            "echo__echo",
            "gh__create_issue",
            "gh__get_issue",
            "gh__get_pr"
        ]
    );
}

#[test]
fn a_change_alters_only_the_fingerprints_of_views_that_see_it() {
    let mut registry = with_profiles(&[
        default_profile(),
        profile("echo-only", None, Some(&["echo__*"]), None),
    ]);
    let before_default = view_of(&registry, "default").fingerprint();
    let before_echo = view_of(&registry, "echo-only").fingerprint();
    registry.replace(&server("gh"), vec![tool("get_issue")]);
    assert_ne!(view_of(&registry, "default").fingerprint(), before_default);
    assert_eq!(view_of(&registry, "echo-only").fingerprint(), before_echo);
}

#[test]
fn view_lists_servers_in_name_order_with_upstream_mapping() {
    let mut registry = Registry::new(PrefixPolicy::Always, &[default_profile()]);
    registry.replace(&server("zeta"), vec![tool("b"), tool("a")]);
    registry.replace(&server("alpha"), vec![tool("x")]);
    let view = view(&registry);
    let names: Vec<&str> = view.tools().iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["alpha__x", "zeta__b", "zeta__a"]);
    let entry = view.get("zeta__a").unwrap();
    assert_eq!(entry.server, server("zeta"));
    assert_eq!(entry.upstream_name, "a");
    assert_eq!(entry.tool.description.as_deref(), Some("a does things"));
}

#[test]
fn replace_and_remove_bump_generation_and_fingerprint() {
    let mut registry = Registry::new(PrefixPolicy::Always, &[default_profile()]);
    registry.replace(&server("s"), vec![tool("a")]);
    let first = view(&registry);
    registry.replace(&server("s"), vec![tool("a")]);
    let same = view(&registry);
    assert!(same.generation > first.generation);
    assert_eq!(
        same.fingerprint(),
        first.fingerprint(),
        "same tools, same fingerprint"
    );
    registry.replace(&server("s"), vec![tool("a"), tool("b")]);
    assert_ne!(view(&registry).fingerprint(), first.fingerprint());
    registry.remove(&server("s"));
    assert!(view(&registry).is_empty());
    assert!(view(&registry).get("s__a").is_none());
}

#[test]
fn never_policy_keeps_first_server_and_reports_clash() {
    let mut registry = Registry::new(PrefixPolicy::Never, &[default_profile()]);
    registry.replace(&server("a"), vec![tool("echo")]);
    registry.replace(&server("b"), vec![tool("echo"), tool("other")]);
    let view = view(&registry);
    assert_eq!(view.get("echo").unwrap().server, server("a"));
    assert!(view.get("other").is_some());
    assert_eq!(registry.clashes().len(), 1);
}
