//! Unit tests for the registry's merged view.

use std::sync::Arc;

use rmcp::model::Tool;
use serde_json::json;

use super::*;
use crate::config::ServerName;

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

fn server(name: &str) -> ServerId {
    ServerId::global(ServerName::parse(name).unwrap())
}

/// Server `name` owned by profile `owner`.
fn owned(owner: &str, name: &str) -> ServerId {
    ServerId {
        owner: Some(ProfileName::parse(owner).unwrap()),
        name: ServerName::parse(name).unwrap(),
    }
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
        mode: None,
        allow: list(allow),
        deny: list(deny),
        tokens: Vec::new(),
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
    view.listed_entries()
        .map(|e| e.tool.name.as_ref())
        .collect()
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
        .map(|u| (u.key.as_str(), u.entry.as_str()))
        .collect();
    assert_eq!(
        entries,
        [
            ("profiles.typo.allow", "gh__get_isue"),
            ("profiles.typo.deny", "nothing*")
        ]
    );
    assert_eq!(
        registry.known_names(&ProfileName::parse("typo").unwrap()),
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
    let names: Vec<&str> = view
        .listed_entries()
        .map(|e| e.tool.name.as_ref())
        .collect();
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

#[test]
fn a_profile_server_shadows_a_global_tool_in_place_for_that_profile_only() {
    let mut registry = with_profiles(&[default_profile(), profile("ops", None, None, None)]);
    let mut variant = tool("echo");
    variant.description = Some("ops variant".into());
    registry.replace(&owned("ops", "echo"), vec![variant, tool("shell")]);

    let ops = view_of(&registry, "ops");
    assert_eq!(
        names(&ops),
        [
            "echo__echo",
            "gh__get_issue",
            "gh__get_pr",
            "gh__create_issue",
            "echo__shell"
        ]
    );
    let shadowed = ops.get("echo__echo").unwrap();
    assert_eq!(shadowed.server, owned("ops", "echo"));
    assert_eq!(shadowed.tool.description.as_deref(), Some("ops variant"));

    let default = view_of(&registry, "default");
    assert_eq!(default.get("echo__echo").unwrap().server, server("echo"));
    assert!(
        default.get("echo__shell").is_none(),
        "profile tools are invisible to others"
    );
}

#[test]
fn shadowing_holds_whichever_layer_is_imported_first() {
    let mut registry = Registry::new(
        PrefixPolicy::Always,
        &[default_profile(), profile("ops", None, None, None)],
    );
    registry.replace(&owned("ops", "echo"), vec![tool("echo")]);
    registry.replace(&server("echo"), vec![tool("echo")]);
    assert_eq!(
        view_of(&registry, "ops").get("echo__echo").unwrap().server,
        owned("ops", "echo")
    );
    assert_eq!(
        view_of(&registry, "default")
            .get("echo__echo")
            .unwrap()
            .server,
        server("echo")
    );
}

#[test]
fn own_tools_are_exempt_from_restrictions_and_inherited_by_children() {
    let mut registry = with_profiles(&[
        default_profile(),
        profile("ops", None, Some(&["gh__get_issue"]), None),
        profile("junior", Some("ops"), None, Some(&["shell__run"])),
    ]);
    registry.replace(&owned("ops", "shell"), vec![tool("run")]);
    assert_eq!(
        names(&view_of(&registry, "ops")),
        ["gh__get_issue", "shell__run"]
    );
    // Inherited from ops' layer, so junior's deny applies to it.
    assert_eq!(names(&view_of(&registry, "junior")), ["gh__get_issue"]);
    assert!(
        registry
            .known_names(&ProfileName::parse("junior").unwrap())
            .contains(&"shell__run".to_owned())
    );
}

#[test]
fn run_code_is_reserved_in_every_layer() {
    let mut registry = Registry::new(
        PrefixPolicy::Never,
        &[default_profile(), profile("ops", None, None, None)],
    );
    registry.replace(&owned("ops", "x"), vec![tool("run_code")]);
    assert!(view_of(&registry, "ops").get("run_code").is_none());
    assert!(matches!(registry.clashes()[0], NameClash::Reserved { .. }));
}

#[test]
fn a_view_keeps_the_call_policy_it_was_built_with() {
    // A call resolved on a view is validated and timed by that view's entry, even after a
    // re-import published new rules (no side table keyed by name to race with).
    let mut registry = Registry::new(PrefixPolicy::Always, &[default_profile()]);
    let first = Arc::new(CallPolicy {
        timeout_ms: 1_000,
        ..CallPolicy::default()
    });
    registry.replace(
        &server("s"),
        vec![Imported {
            tool: tool("a"),
            policy: first.clone(),
            extra: None,
        }],
    );
    let old = view(&registry);
    registry.replace(
        &server("s"),
        vec![Imported {
            tool: tool("a"),
            policy: Arc::new(CallPolicy {
                timeout_ms: 2_000,
                ..CallPolicy::default()
            }),
            extra: None,
        }],
    );
    let new = view(&registry);
    assert!(Arc::ptr_eq(&old.get("s__a").unwrap().policy, &first));
    assert_eq!(new.get("s__a").unwrap().policy.timeout_ms, 2_000);
}

#[test]
fn a_parents_own_tools_reach_its_children_past_the_parents_allow() {
    // `lead` allows only one global tool; its own server's tools are never masked, for it
    // and for `junior`, which masks them with its own restrictions only.
    let mut registry = with_profiles(&[
        default_profile(),
        profile("lead", None, Some(&["gh__get_issue"]), None),
        profile("junior", Some("lead"), None, Some(&["ops__deploy"])),
    ]);
    registry.replace(&owned("lead", "ops"), vec![tool("status"), tool("deploy")]);
    assert_eq!(
        names(&view_of(&registry, "lead")),
        ["gh__get_issue", "ops__status", "ops__deploy"]
    );
    assert_eq!(
        names(&view_of(&registry, "junior")),
        ["gh__get_issue", "ops__status"]
    );
}

#[test]
fn a_down_server_is_withdrawn_and_its_names_are_kept_until_it_returns() {
    let mut registry = Registry::new(PrefixPolicy::OnConflict, &[default_profile()]);
    registry.replace(&server("a"), vec![tool("echo"), tool("only_a")]);
    registry.replace(&server("b"), vec![tool("echo")]);
    let before = view(&registry);
    assert_eq!(names(&before), ["a__echo", "only_a", "b__echo"]);

    registry.mark_down(&server("b"));
    let down = view(&registry);
    // `a__echo` keeps its prefix: the clash with the down server still names it.
    assert_eq!(names(&down), ["a__echo", "only_a"]);
    assert_eq!(down.withdrawn("b__echo"), Some(&server("b")));
    assert!(down.get("b__echo").is_none());
    assert_ne!(down.fingerprint(), before.fingerprint());

    registry.replace(&server("b"), vec![tool("echo")]);
    let back = view(&registry);
    assert_eq!(names(&back), names(&before));
    assert_eq!(back.withdrawn("b__echo"), None);
    assert_eq!(back.fingerprint(), before.fingerprint());
}

/// Tools serialized to be hashed on this thread so far.
fn serialized() -> usize {
    layers::SERIALIZED.with(std::cell::Cell::get)
}

#[test]
fn a_rebuild_hashes_only_the_reimported_servers_tools_and_reuses_the_rest() {
    // Issue 10: every rebuild used to copy and re-serialize every tool of every server.
    let mut registry = with_profiles(&[default_profile()]);
    let before = view(&registry);
    let start = serialized();
    registry.replace(&server("echo"), vec![tool("echo"), tool("shout")]);
    assert_eq!(serialized() - start, 2, "only echo's two tools, once each");
    let after = view(&registry);
    for name in ["gh__get_issue", "gh__get_pr", "gh__create_issue"] {
        let (old, new) = (before.get(name).unwrap(), after.get(name).unwrap());
        assert!(
            Arc::ptr_eq(old, new),
            "{name}: a new entry for an unchanged tool"
        );
    }
    assert_ne!(after.fingerprint(), before.fingerprint());

    // Rebuilds that import no tool hash none.
    let start = serialized();
    registry.replace_offer(&server("echo"), passthrough::Offer::default());
    registry.mark_down(&server("gh"));
    registry.remove(&server("echo"));
    assert_eq!(serialized(), start);
}

#[test]
fn a_tool_renamed_by_another_servers_import_is_renamed_without_serializing() {
    // Under `on-conflict` b's `echo` prefixes a's too: a's entry gets a new name and
    // fingerprint from its stored hash; a's other tool keeps its entry.
    let mut registry = Registry::new(PrefixPolicy::OnConflict, &[default_profile()]);
    registry.replace(&server("a"), vec![tool("echo"), tool("only_a")]);
    let alone = view(&registry);
    let start = serialized();
    registry.replace(&server("b"), vec![tool("echo")]);
    assert_eq!(serialized() - start, 1, "only b's tool");
    let shared = view(&registry);
    assert_eq!(names(&shared), ["a__echo", "only_a", "b__echo"]);
    let renamed = shared.get("a__echo").unwrap();
    assert_eq!(renamed.tool.name, "a__echo");
    assert_eq!(renamed.upstream_name, "echo");
    let (old, new) = (alone.get("only_a").unwrap(), shared.get("only_a").unwrap());
    assert!(Arc::ptr_eq(old, new));
    assert_ne!(shared.fingerprint(), alone.fingerprint());

    registry.remove(&server("b"));
    let back = view(&registry);
    assert_eq!(names(&back), ["echo", "only_a"]);
    assert_eq!(
        back.fingerprint(),
        alone.fingerprint(),
        "same names, same hash"
    );
    assert_eq!(serialized() - start, 1);
}

#[test]
fn run_code_is_made_again_only_for_views_whose_tools_changed() {
    let mut code = profile("code", None, Some(&["echo__*"]), None);
    code.mode = Some(Mode::Code);
    let mut registry = with_profiles(&[default_profile(), code]);
    let before = view_of(&registry, "code").get(RUN_CODE).unwrap().clone();
    let start = serialized();
    registry.replace(&server("gh"), vec![tool("get_issue")]);
    assert_eq!(serialized() - start, 1, "gh's tool; `code` does not see gh");
    let kept = view_of(&registry, "code").get(RUN_CODE).unwrap().clone();
    assert!(Arc::ptr_eq(&before, &kept));

    let start = serialized();
    registry.replace(&server("echo"), vec![tool("echo"), tool("shout")]);
    assert_eq!(
        serialized() - start,
        3,
        "echo's two tools and the new `run_code`"
    );
    let made = view_of(&registry, "code").get(RUN_CODE).unwrap().clone();
    assert!(!Arc::ptr_eq(&before, &made));
    assert!(
        made.tool
            .description
            .as_deref()
            .unwrap_or("")
            .contains("shout")
    );
    assert_ne!(made.fingerprint, before.fingerprint);
}

#[test]
fn extras_travel_with_their_items_and_a_change_in_them_is_a_change() {
    let extra = |value: serde_json::Value| match value {
        serde_json::Value::Object(map) => Some(Arc::new(map)),
        _ => None,
    };
    let mut registry = Registry::new(PrefixPolicy::Always, &[default_profile()]);
    let imported = |task_support: &str| Imported {
        tool: tool("a"),
        policy: Arc::default(),
        extra: extra(json!({"execution": {"taskSupport": task_support}})),
    };
    registry.replace(&server("s"), vec![imported("optional")]);
    let first = view(&registry);
    let entry = first.get("s__a").unwrap();
    assert_eq!(
        extra::faithful(&entry.tool, &entry.extra)["execution"],
        json!({"taskSupport": "optional"})
    );
    assert_eq!(extra::faithful(&entry.tool, &entry.extra)["name"], "s__a");
    registry.replace(&server("s"), vec![imported("required")]);
    assert_ne!(view(&registry).fingerprint(), first.fingerprint());

    let mut offer = passthrough::Offer {
        prompts: vec![rmcp::model::Prompt::new("p", None::<String>, None)],
        ..Default::default()
    };
    offer.features.prompts = true;
    offer.extras.prompts.insert(
        "p".into(),
        Arc::new(serde_json::Map::from_iter([("x".to_owned(), json!(1))])),
    );
    registry.replace_offer(&server("s"), offer);
    let view = view(&registry);
    let named = &view.offers().prompts[0];
    assert_eq!(&*named.exposed, "s__p");
    assert_eq!(extra::faithful(&named.item, &named.extra)["x"], 1);
}

#[test]
fn a_reload_applies_new_profiles_and_naming_over_what_is_imported() {
    let mut registry = Registry::new(PrefixPolicy::Always, &[default_profile()]);
    registry.replace(&server("a"), vec![tool("x"), tool("y")]);
    assert_eq!(names(&view(&registry)), ["a__x", "a__y"]);

    let narrowed = profile("default", None, None, Some(&["a__y"]));
    registry.reconfigure(PrefixPolicy::Always, &[narrowed], CodeSettings::default());
    assert_eq!(names(&view(&registry)), ["a__x"]);

    registry.reconfigure(
        PrefixPolicy::Never,
        &[
            default_profile(),
            profile("added", None, Some(&["y"]), None),
        ],
        CodeSettings::default(),
    );
    assert_eq!(names(&view(&registry)), ["x", "y"]);
    assert_eq!(names(&view_of(&registry, "added")), ["y"]);
}

#[test]
fn new_limits_change_policies_but_not_what_clients_are_told() {
    let mut registry = Registry::new(PrefixPolicy::Always, &[default_profile()]);
    registry.replace(&server("a"), vec![tool("x")]);
    let before = view(&registry);
    assert_eq!(
        before.get("a__x").unwrap().policy.timeout_ms,
        crate::config::DEFAULT_CALL_TIMEOUT_MS
    );

    let retry = Retry {
        attempts: 3,
        backoff_ms: 0,
    };
    registry.retime(|server, tool| {
        assert_eq!(server.name.as_str(), "a");
        assert_eq!(tool.name, "x");
        (5, Some(retry))
    });
    let after = view(&registry);
    let entry = after.get("a__x").unwrap();
    assert_eq!(
        (entry.policy.timeout_ms, entry.policy.retry),
        (5, Some(retry))
    );
    // A view handed out before keeps its own.
    assert_eq!(
        before.get("a__x").unwrap().policy.timeout_ms,
        crate::config::DEFAULT_CALL_TIMEOUT_MS
    );
    // The list is the same: no `list_changed` for a limit.
    assert_eq!(after.fingerprint(), before.fingerprint());
}
