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

#[test]
fn view_lists_servers_in_name_order_with_upstream_mapping() {
    let mut registry = Registry::new(PrefixPolicy::Always);
    registry.replace(&server("zeta"), vec![tool("b"), tool("a")]);
    registry.replace(&server("alpha"), vec![tool("x")]);
    let view = registry.view();
    let names: Vec<&str> = view.tools().iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["alpha__x", "zeta__b", "zeta__a"]);
    let entry = view.get("zeta__a").unwrap();
    assert_eq!(entry.server, server("zeta"));
    assert_eq!(entry.upstream_name, "a");
    assert_eq!(entry.tool.description.as_deref(), Some("a does things"));
}

#[test]
fn replace_and_remove_bump_generation_and_fingerprint() {
    let mut registry = Registry::new(PrefixPolicy::Always);
    registry.replace(&server("s"), vec![tool("a")]);
    let first = registry.view();
    registry.replace(&server("s"), vec![tool("a")]);
    let same = registry.view();
    assert!(same.generation > first.generation);
    assert_eq!(
        same.fingerprint(),
        first.fingerprint(),
        "same tools, same fingerprint"
    );
    registry.replace(&server("s"), vec![tool("a"), tool("b")]);
    assert_ne!(registry.view().fingerprint(), first.fingerprint());
    registry.remove(&server("s"));
    assert!(registry.view().is_empty());
    assert!(registry.view().get("s__a").is_none());
}

#[test]
fn never_policy_keeps_first_server_and_reports_clash() {
    let mut registry = Registry::new(PrefixPolicy::Never);
    registry.replace(&server("a"), vec![tool("echo")]);
    registry.replace(&server("b"), vec![tool("echo"), tool("other")]);
    let view = registry.view();
    assert_eq!(view.get("echo").unwrap().server, server("a"));
    assert!(view.get("other").is_some());
    assert_eq!(registry.clashes().len(), 1);
}
