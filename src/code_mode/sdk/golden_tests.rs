//! Golden snapshots of the SDK over real captured tool lists (tests/fixtures/sdk/): the snapshots are the spec.

use rmcp::model::Tool;

use super::{Catalog, SdkDocs, SdkForm, SdkTool, declarations, run_code_description};

/// `(server, tools/list answer)` as captured; see tests/fixtures/sdk/README.md.
const FIXTURES: &[(&str, &str)] = &[
    (
        "echo",
        include_str!("../../../tests/fixtures/sdk/echo_server.json"),
    ),
    (
        "other",
        include_str!("../../../tests/fixtures/sdk/other_server.json"),
    ),
    (
        "everything",
        include_str!("../../../tests/fixtures/sdk/server-everything.json"),
    ),
    (
        "filesystem",
        include_str!("../../../tests/fixtures/sdk/server-filesystem.json"),
    ),
];

/// `(exposed name, server, tool)`, exposed as `{server}__{tool}` the way the default prefix
/// policy names them.
fn load(server: &str, json: &str) -> Vec<(String, String, Tool)> {
    let tools: Vec<Tool> = serde_json::from_str(json).expect("fixture is a tools array");
    assert!(!tools.is_empty(), "{server}: empty fixture");
    tools
        .into_iter()
        .map(|t| (format!("{server}__{}", t.name), server.to_owned(), t))
        .collect()
}

fn sdk(tools: &[(String, String, Tool)]) -> Vec<SdkTool<'_>> {
    tools
        .iter()
        .map(|(name, server, tool)| SdkTool { name, server, tool })
        .collect()
}

fn all() -> Vec<(String, String, Tool)> {
    FIXTURES
        .iter()
        .flat_map(|(server, json)| load(server, json))
        .collect()
}

#[test]
fn declarations_per_fixture() {
    for (server, json) in FIXTURES {
        let tools = load(server, json);
        let text = declarations(&sdk(&tools), SdkDocs::Full);
        insta::assert_snapshot!(format!("declarations_{server}"), text);
    }
}

#[test]
fn catalog_description_for_all_fixtures() {
    let tools = all();
    let (text, form) = run_code_description(&sdk(&tools), SdkForm::Catalog, SdkDocs::Full, 0);
    assert_eq!(form, SdkForm::Catalog);
    insta::assert_snapshot!("catalog_description_all", text);
}

/// What a model reads by default: brief docs.
#[test]
fn inline_description_for_all_fixtures() {
    let tools = all();
    let (text, form) =
        run_code_description(&sdk(&tools), SdkForm::Auto, SdkDocs::default(), usize::MAX);
    assert_eq!(form, SdkForm::Inline);
    insta::assert_snapshot!("inline_description_all", text);
}

#[test]
fn inline_description_with_full_docs_for_all_fixtures() {
    let tools = all();
    let (text, form) =
        run_code_description(&sdk(&tools), SdkForm::Inline, SdkDocs::Full, usize::MAX);
    assert_eq!(form, SdkForm::Inline);
    insta::assert_snapshot!("inline_description_all_full", text);
}

#[test]
fn catalog_search_and_describe_over_all_fixtures() {
    let tools = all();
    let catalog = Catalog::new(&sdk(&tools));
    assert_eq!(catalog.len(), tools.len());
    let searches: Vec<String> = ["read file", "sum numbers", "directory", "env"]
        .iter()
        .map(|q| {
            let hits = catalog.search(q, Some(5));
            format!(
                "{q:?} →\n{}",
                serde_json::to_string_pretty(&hits).unwrap_or_default()
            )
        })
        .collect();
    insta::assert_snapshot!("catalog_searches_all", searches.join("\n\n"));
    let described = catalog
        .describe("filesystem__edit_file")
        .expect("edit_file is in the filesystem fixture");
    insta::assert_snapshot!("catalog_describe_edit_file", described);
}
