//! Conversion of parsed entries: secrets out, names legal, skips reported.

use std::path::Path;

use super::*;
use crate::import::parse::parse;

fn run(path: &str, json: &str) -> (Generated, Report) {
    let file = parse(Path::new(path), json).expect("parses");
    convert(&[file])
}

#[test]
fn literal_secrets_move_to_variables_and_plain_values_stay() {
    let (generated, report) = run(
        "c.json",
        r#"{"mcpServers": {
            "gh": {"command": "npx", "args": ["-y", "srv", "--api-key", "k1", "--token=t1",
                   "postgresql://me:pw1@db/app", "ghp_abc"],
                   "env": {"GITHUB_TOKEN": "t2", "LOG_LEVEL": "debug", "DATABASE_URL": "mysql://u:pw2@h/d"}},
            "api": {"url": "https://api.example.com/mcp?api_key=k2&region=eu",
                    "headers": {"Authorization": "Bearer t3", "X-Api-Key": "k3", "Accept": "json"}}
        }}"#,
    );
    let gh = &generated.servers["gh"];
    assert_eq!(
        gh.args,
        [
            "-y",
            "srv",
            "--api-key",
            "${GH_API_KEY}",
            "--token=${GH_TOKEN}",
            "postgresql://me:${GH_PASSWORD}@db/app",
            "${GH_SECRET}"
        ]
    );
    assert_eq!(gh.env["GITHUB_TOKEN"], "${GITHUB_TOKEN}");
    assert_eq!(gh.env["LOG_LEVEL"], "debug");
    assert_eq!(gh.env["DATABASE_URL"], "${DATABASE_URL}");
    let api = &generated.servers["api"];
    assert_eq!(
        api.url.as_deref(),
        Some("https://api.example.com/mcp?api_key=${API_KEY}&region=eu")
    );
    assert_eq!(api.headers["Authorization"], "Bearer ${API_TOKEN}");
    assert_eq!(api.headers["X-Api-Key"], "${API_X_API_KEY}");
    assert_eq!(api.headers["Accept"], "json");
    let text = format!("{generated:?} {report:?}");
    for secret in ["k1", "t1", "pw1", "ghp_abc", "t2", "pw2", "k2", "t3", "k3"] {
        assert!(
            !text.contains(&format!("\"{secret}\"")) && !text.contains(&format!(":{secret}@")),
            "{secret} leaked: {text}"
        );
    }
    assert_eq!(report.moved.len(), 9, "{:?}", report.moved);
}

#[test]
fn identical_secrets_share_one_variable_different_ones_do_not() {
    let (generated, _) = run(
        "c.json",
        r#"{"mcpServers": {
            "a": {"command": "x", "env": {"API_KEY": "same"}},
            "b": {"command": "x", "env": {"API_KEY": "same"}},
            "c": {"command": "x", "env": {"API_KEY": "other"}}
        }}"#,
    );
    assert_eq!(generated.servers["a"].env["API_KEY"], "${API_KEY}");
    assert_eq!(generated.servers["b"].env["API_KEY"], "${API_KEY}");
    assert_eq!(generated.servers["c"].env["API_KEY"], "${C_API_KEY}");
}

#[test]
fn names_are_normalised_and_reported() {
    let (generated, report) = run(
        "c.json",
        r#"{"mcpServers": {"GitHub Tools": {"command": "x"}, "fs": {"command": "y"}}}"#,
    );
    assert_eq!(
        generated.servers.keys().collect::<Vec<_>>(),
        ["fs", "github-tools"]
    );
    assert_eq!(
        report.renames,
        [("GitHub Tools".to_owned(), "github-tools".to_owned())]
    );
}

#[test]
fn unsupported_interpolation_skips_the_server_and_leaves_no_variable() {
    let (generated, report) = run(
        "c.json",
        r#"{"mcpServers": {"a": {"command": "x", "env": {"TOKEN": "t", "P": "${file:/etc/x}"}}}}"#,
    );
    assert!(generated.servers.is_empty());
    assert_eq!(report.skipped.len(), 1);
    assert!(report.skipped[0].2.contains("${file:/etc/x}"), "{report:?}");
    assert!(report.vars.vars.is_empty(), "{:?}", report.vars);
}

#[test]
fn vscode_inputs_and_references() {
    let (generated, report) = run(
        "/w/.vscode/mcp.json",
        r#"{"inputs": [{"type": "promptString", "id": "pat", "password": true}],
            "servers": {"gh": {"type": "http", "url": "https://api.githubcopilot.com/mcp/",
                               "headers": {"Authorization": "Bearer ${input:pat}"}},
                        "fs": {"command": "npx", "args": ["${workspaceFolder}"], "env": {"K": "${env:K}"}}}}"#,
    );
    assert_eq!(
        generated.servers["gh"].headers["Authorization"],
        "Bearer ${PAT}"
    );
    assert_eq!(generated.servers["fs"].args, ["/w"]);
    assert_eq!(generated.servers["fs"].env["K"], "${K}");
    assert!(matches!(
        report.vars.vars["PAT"].origin,
        Origin::Input { password: true, .. }
    ));
    assert_eq!(report.vars.vars["K"].origin, Origin::Reference);
}

#[test]
fn later_files_replace_earlier_entries() {
    let global = parse(
        Path::new("/home/u/.cursor/mcp.json"),
        r#"{"mcpServers": {"a": {"command": "global"}, "b": {"command": "b"}}}"#,
    )
    .expect("parses");
    let project = parse(
        Path::new("/p/.cursor/mcp.json"),
        r#"{"mcpServers": {"a": {"command": "project"}}}"#,
    )
    .expect("parses");
    let (generated, report) = convert(&[global, project]);
    assert_eq!(generated.servers["a"].command.as_deref(), Some("project"));
    assert!(generated.servers.contains_key("b"));
    assert!(
        report.notes.iter().any(|n| n.contains("replaces")),
        "{report:?}"
    );
}

#[test]
fn ignored_fields_are_noted_and_dollars_escaped() {
    let (generated, report) = run(
        "c.json",
        r#"{"mcpServers": {"a": {"command": "x", "args": ["$HOME"], "autoApprove": []}}}"#,
    );
    assert_eq!(generated.servers["a"].args, ["$$HOME"]);
    assert!(
        report.notes.iter().any(|n| n.contains("autoApprove")),
        "{report:?}"
    );
}
