//! `bench_tokens`: o200k token counts of a native `tools/list` against code mode's `run_code` description.
//!
//! Run: `cargo run --example bench_tokens` (`--quick` is accepted for CI's smoke run and does
//! the same work: it takes well under a second). Offline: `tiktoken-rs` embeds its BPE files.
//!
//! The tools are the real captured lists in `tests/fixtures/sdk/` (see its README), exposed as
//! `{server}__{tool}` the way the default prefix policy names them. The goal is stated
//! on a 100-tool surface, and the fixtures hold 35 tools, so the headline surface repeats them
//! under further server names (`echo_2`, …) in fixture order until 100: it keeps the mix of
//! real descriptions and schemas. Two more rows show how much the answer depends on that
//! choice: the 35 fixture tools once, and the fixtures padded with 65 of `echo_server`'s
//! `ECHO_EXTRA_TOOLS` tools (tiny one-argument tools, the cheapest case for the native list).

use anyhow::Context;
use rmcp::model::{ListToolsResult, Tool};
use tiktoken_rs::CoreBPE;
use toolgate::code_mode::sdk::{
    SdkDocs, SdkForm, SdkTool, estimate_tokens, run_code_description, usage,
};

/// `(server, tools/list answer)` as captured.
const FIXTURES: &[(&str, &str)] = &[
    (
        "echo",
        include_str!("../tests/fixtures/sdk/echo_server.json"),
    ),
    (
        "other",
        include_str!("../tests/fixtures/sdk/other_server.json"),
    ),
    (
        "everything",
        include_str!("../tests/fixtures/sdk/server-everything.json"),
    ),
    (
        "filesystem",
        include_str!("../tests/fixtures/sdk/server-filesystem.json"),
    ),
];

/// The surface size the goals are stated for.
const SURFACE: usize = 100;
/// The goals, as fractions of the native `tools/list`.
const INLINE_GOAL: f64 = 0.40;
const CATALOG_GOAL: f64 = 0.05;

/// One exposed tool: `(exposed name, server, tool as listed)`.
type Exposed = (String, String, Tool);

fn fixtures() -> anyhow::Result<Vec<(&'static str, Vec<Tool>)>> {
    FIXTURES
        .iter()
        .map(|(server, json)| {
            let tools: Vec<Tool> =
                serde_json::from_str(json).with_context(|| format!("fixture {server}"))?;
            Ok((*server, tools))
        })
        .collect()
}

/// `tool` as the gateway lists it from `server`: renamed `{server}__{name}`, otherwise as is.
fn expose(server: &str, tool: &Tool) -> Exposed {
    let name = format!("{server}__{}", tool.name);
    let mut shown = tool.clone();
    shown.name = name.clone().into();
    (name, server.to_owned(), shown)
}

/// The fixtures once, in fixture order.
fn fixtures_once(fixtures: &[(&str, Vec<Tool>)]) -> Vec<Exposed> {
    fixtures
        .iter()
        .flat_map(|(server, tools)| tools.iter().map(move |t| expose(server, t)))
        .collect()
}

/// The fixtures again and again (servers `echo`, …, then `echo_2`, …) until `n` tools.
fn fixtures_repeated(fixtures: &[(&str, Vec<Tool>)], n: usize) -> Vec<Exposed> {
    let once: Vec<(&str, &Tool)> = fixtures
        .iter()
        .flat_map(|(server, tools)| tools.iter().map(move |t| (*server, t)))
        .collect();
    if once.is_empty() {
        return Vec::new();
    }
    (0..n)
        .map(|i| {
            let (server, tool) = once[i % once.len()];
            match i / once.len() + 1 {
                1 => expose(server, tool),
                round => expose(&format!("{server}_{round}"), tool),
            }
        })
        .collect()
}

/// The fixtures, then `echo_server`'s `ECHO_EXTRA_TOOLS` tools (`tool_0000`, …: the `echo`
/// tool's schema under a numbered description, no title or annotations) until `n` tools.
fn fixtures_with_echo_extras(
    fixtures: &[(&str, Vec<Tool>)],
    n: usize,
) -> anyhow::Result<Vec<Exposed>> {
    let mut out = fixtures_once(fixtures);
    let echo = fixtures
        .iter()
        .find(|(server, _)| *server == "echo")
        .and_then(|(_, tools)| tools.iter().find(|t| t.name == "echo"))
        .context("the echo fixture has an `echo` tool")?;
    for i in 0..n.saturating_sub(out.len()) {
        let mut extra = echo.clone();
        extra.name = format!("tool_{i:04}").into();
        extra.title = None;
        extra.annotations = None;
        extra.description =
            Some(format!("Extra echo tool number {i}: returns the given text").into());
        out.push(expose("echo", &extra));
    }
    Ok(out)
}

struct Row {
    surface: &'static str,
    tools: usize,
    native: usize,
    /// The default inline form: brief docs.
    inline: usize,
    /// Inline with `sdk_docs = "full"`.
    inline_full: usize,
    catalog: usize,
    inline_estimate: usize,
    /// The words no lossless SDK can drop, bare: see [`essentials`].
    essentials: usize,
}

/// Each tool's exposed name and description, and each top-level argument's name and
/// description, one per line with no syntax at all: a lower bound for any inline form that
/// keeps them (types, enums, defaults, annotations and instructions come on top).
fn essentials(exposed: &[Exposed]) -> String {
    let mut out = String::new();
    for (name, _, tool) in exposed {
        out.push_str(name);
        out.push('\n');
        out.push_str(tool.description.as_deref().unwrap_or(""));
        out.push('\n');
        if let Some(serde_json::Value::Object(properties)) = tool.input_schema.get("properties") {
            for (key, schema) in properties {
                out.push_str(key);
                out.push(' ');
                let description = schema.get("description").and_then(|d| d.as_str());
                out.push_str(description.unwrap_or(""));
                out.push('\n');
            }
        }
    }
    out
}

fn measure(bpe: &CoreBPE, surface: &'static str, exposed: &[Exposed]) -> anyhow::Result<Row> {
    let listed: Vec<Tool> = exposed.iter().map(|(_, _, t)| t.clone()).collect();
    // The `result` of the `tools/list` response, serialized the way rmcp sends it.
    let native = serde_json::to_string(&ListToolsResult::with_all_items(listed))?;
    let sdk: Vec<SdkTool> = exposed
        .iter()
        .map(|(name, server, tool)| SdkTool { name, server, tool })
        .collect();
    let (inline, _) = run_code_description(&sdk, SdkForm::Inline, SdkDocs::Brief, 0);
    let (inline_full, _) = run_code_description(&sdk, SdkForm::Inline, SdkDocs::Full, 0);
    let (catalog, _) = run_code_description(&sdk, SdkForm::Catalog, SdkDocs::Brief, 0);
    let count = |text: &str| bpe.encode_ordinary(text).len();
    Ok(Row {
        surface,
        tools: exposed.len(),
        native: count(&native),
        inline: count(&inline),
        inline_full: count(&inline_full),
        catalog: count(&catalog),
        inline_estimate: estimate_tokens(&inline),
        essentials: count(&essentials(exposed)),
    })
}

fn percent(part: usize, whole: usize) -> f64 {
    100.0 * part as f64 / whole.max(1) as f64
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    if let Some(arg) = args.find(|a| a != "--quick") {
        anyhow::bail!("unknown argument {arg:?}; usage: bench_tokens [--quick]");
    }
    let bpe = tiktoken_rs::o200k_base()?;
    let fixtures = fixtures()?;
    let rows = [
        measure(
            &bpe,
            "fixtures repeated to 100 (headline)",
            &fixtures_repeated(&fixtures, SURFACE),
        )?,
        measure(&bpe, "fixtures once", &fixtures_once(&fixtures))?,
        measure(
            &bpe,
            "fixtures + echo_server extra tools",
            &fixtures_with_echo_extras(&fixtures, SURFACE)?,
        )?,
    ];

    println!("o200k tokens: native `tools/list` result JSON vs `run_code`'s description\n");
    println!(
        "| surface | tools | native | inline (brief) | inline (full) | catalog | inline/native | inline full/native | catalog/native | essentials/native | estimate_tokens/inline |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in &rows {
        println!(
            "| {} | {} | {} | {} | {} | {} | {:.1}% | {:.1}% | {:.1}% | {:.1}% | {:.2}× |",
            r.surface,
            r.tools,
            r.native,
            r.inline,
            r.inline_full,
            r.catalog,
            percent(r.inline, r.native),
            percent(r.inline_full, r.native),
            percent(r.catalog, r.native),
            percent(r.essentials, r.native),
            r.inline_estimate as f64 / r.inline.max(1) as f64,
        );
    }
    println!(
        "\nessentials: tool names and descriptions and top-level argument names and \
         descriptions, bare, one per line: what an inline SDK with full docs cannot go below.\n\
         inline (brief), the default (`sdk_docs = \"brief\"`): each description's first sentence; \
         only the @readOnly and @destructive hints; no titles; no defaults over 24 characters or \
         equal to false, [] or {{}}; members not indented. `catalog.describe(name)` gives the full \
         declaration. \
         inline (full): `sdk_docs = \"full\"`."
    );
    println!(
        "Fixed part: the usage instructions, {} tokens inline (brief), {} inline (full), {} in the catalog form.",
        bpe.encode_ordinary(usage(SdkForm::Inline, SdkDocs::Brief))
            .len(),
        bpe.encode_ordinary(usage(SdkForm::Inline, SdkDocs::Full))
            .len(),
        bpe.encode_ordinary(usage(SdkForm::Catalog, SdkDocs::Brief))
            .len(),
    );
    let head = &rows[0];
    let verdict = |ok: bool| if ok { "met" } else { "MISSED" };
    println!(
        "Goals on the headline surface: inline (default, brief) ≤ {:.0}% of native: {} ({:.2}%); catalog ≤ {:.0}%: {} ({:.2}%).",
        INLINE_GOAL * 100.0,
        verdict(head.inline as f64 <= INLINE_GOAL * head.native as f64),
        percent(head.inline, head.native),
        CATALOG_GOAL * 100.0,
        verdict(head.catalog as f64 <= CATALOG_GOAL * head.native as f64),
        percent(head.catalog, head.native),
    );
    println!(
        "Surfaces: the headline repeats the {} real fixture tools (tests/fixtures/sdk) under further \
         server names until {SURFACE}, keeping their mix of descriptions and schemas; the last row pads \
         the fixtures with echo_server's ECHO_EXTRA_TOOLS tools, which are tiny and alike.",
        rows[1].tools
    );
    Ok(())
}
