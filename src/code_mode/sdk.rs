//! The code-mode SDK: visible tools → the TypeScript text of `run_code`'s description, and a catalog for large sets. Pure.
//!
//! Inline form: fixed usage instructions, then `declare const tools` with one JSDoc'd member
//! per tool, its args and result types written in place. Catalog form (for tool sets too
//! large to list): the same instructions, the `catalog` API, and one line per server; the
//! program then finds tools with `catalog.search` and reads one's declaration with
//! `catalog.describe`. `examples/bench_tokens.rs` measures both against a native `tools/list`.
//! Everything is sorted by tool name, so an unchanged set gives byte-identical text.

mod catalog;
mod schema_ts;
mod text;

use std::collections::BTreeMap;
use std::fmt::Write as _;

pub use catalog::Catalog;
pub use schema_ts::schema_to_ts;

/// One tool as the SDK shows it. Built by the caller from the registry view.
#[derive(Debug, Clone, Copy)]
pub struct SdkTool<'a> {
    /// Exposed name, e.g. `echo__add` or `my-tool`.
    pub name: &'a str,
    /// The server the tool comes from (for the catalog).
    pub server: &'a str,
    /// Description, input and output schemas, annotations.
    pub tool: &'a rmcp::model::Tool,
}

/// How `run_code`'s description presents the tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum SdkForm {
    /// Every declaration in the description.
    Inline,
    /// Servers and the `catalog` API only.
    Catalog,
    /// Inline unless that would exceed the token budget.
    #[default]
    Auto,
}

/// How much of each description the inline form shows. `catalog.describe` always gives the
/// full text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum SdkDocs {
    /// First sentences, and the two hints that matter to a program: `@readOnly` (may run in
    /// parallel) and `@destructive`.
    #[default]
    Brief,
    /// Descriptions, titles and every annotation, as the tools give them.
    Full,
}

/// Longest brief tool description.
const MAX_BRIEF_CHARS: usize = 200;

/// Servers listed by name in the catalog form; the rest are summed up in one line, so the
/// description stays the same size however many servers there are.
const MAX_CATALOG_SERVERS: usize = 30;
/// Longest server name shown in the catalog form.
const MAX_SERVER_NAME_CHARS: usize = 64;

/// The instructions common to both forms.
macro_rules! usage_common {
    () => {
        "Run a JavaScript program that calls tools and returns what you need. \
TypeScript type annotations are accepted (stripped, not checked).
- The program is the body of an async function: use `await`, and `return` the result.
- Call `await tools.name(args)`, or `tools[\"my-tool\"](args)` for other names; `args` may be \
left out when none is required.
- A call resolves to the tool's structured content, else its single text block (JSON-parsed \
when JSON), else its content array. It rejects with a `ToolCallError` \
{toolName, code, message}; catch it to carry on.
- `@readOnly` tools may run in parallel (`await Promise.all([...])`); other calls run one at a \
time, in order.
- You get what the program logs (`console.log`, info, warn, error, debug), then the returned \
value: a string as is, else JSON. Return only what you need.
- Nothing else exists: no import/require, fetch, file system, process or timers.
"
    };
}

const USAGE_INLINE: &str = concat!(usage_common!(), "\nThe tools:");

const USAGE_INLINE_BRIEF: &str = concat!(
    usage_common!(),
    "- Descriptions are cut to their first sentence; `await catalog.describe(name)` returns a \
tool's full declaration.

The tools:"
);

const USAGE_CATALOG: &str = concat!(
    usage_common!(),
    "
There are too many tools to list here: find them with `catalog`. \
`await catalog.search(\"words\")` returns the best matches; \
`await catalog.describe(name)` returns one tool's TypeScript declaration (its args and result \
types), so that you can call it correctly, in the same program or the next."
);

const CATALOG_API: &str = "declare const catalog: {
  /** Tools whose name or description match the words of `query`, best first. `limit`: default 10, at most 50. An empty query lists tools by name. */
  search(query: string, limit?: number): Promise<{ name: string; server: string; summary: string }[]>;
  /** The TypeScript declaration of one tool, or null when no tool has that name. */
  describe(name: string): Promise<string | null>;
};
declare const tools: { [name: string]: (args?: object) => Promise<unknown> };
";

/// Fixed usage instructions (the text shown before the declarations). Deterministic.
/// `Auto` is not a form the text can take; it gets the inline text.
pub fn usage(form: SdkForm, docs: SdkDocs) -> &'static str {
    match (form, docs) {
        (SdkForm::Catalog, _) => USAGE_CATALOG,
        (SdkForm::Inline | SdkForm::Auto, SdkDocs::Full) => USAGE_INLINE,
        (SdkForm::Inline | SdkForm::Auto, SdkDocs::Brief) => USAGE_INLINE_BRIEF,
    }
}

/// TS declarations for all tools: `declare const tools: {...}` with one member per tool, its
/// JSDoc from description and annotations, its args type and its result type (from
/// `outputSchema`, else `unknown`) written in place: each type is used once, so a named alias
/// would only cost its name twice. Sorted by name, byte-identical for the same input whatever
/// its order. Of two tools with one name, the first by server name is kept.
pub fn declarations(tools: &[SdkTool], docs: SdkDocs) -> String {
    let mut out = String::from("declare const tools: {\n");
    for tool in sorted(tools) {
        write_member(&mut out, tool, docs);
    }
    out.push_str("};\n");
    out
}

/// The declaration of one tool (its `tools` member), as `catalog.describe(name)` returns it:
/// valid TypeScript on its own, with full docs.
pub fn describe(tool: &SdkTool) -> String {
    let mut out = String::from("declare const tools: {\n");
    write_member(&mut out, tool, SdkDocs::Full);
    out.push_str("};\n");
    out
}

/// `run_code`'s whole description: usage, then either the inline declarations or (catalog
/// form) the `catalog` API and one line per server with its tool count. `Auto` picks the
/// catalog when the inline text's estimated tokens exceed `inline_max_tokens`. Returns the
/// text and the form used (never `Auto`).
pub fn run_code_description(
    tools: &[SdkTool],
    form: SdkForm,
    docs: SdkDocs,
    inline_max_tokens: usize,
) -> (String, SdkForm) {
    if form != SdkForm::Catalog {
        let inline = inline_description(tools, docs);
        if form == SdkForm::Inline || estimate_tokens(&inline) <= inline_max_tokens {
            return (inline, SdkForm::Inline);
        }
    }
    (catalog_description(tools), SdkForm::Catalog)
}

fn inline_description(tools: &[SdkTool], docs: SdkDocs) -> String {
    let declarations = declarations(tools, docs);
    let fence = fence_for(&declarations);
    format!(
        "{}\n{fence}ts\n{declarations}{fence}",
        usage(SdkForm::Inline, docs)
    )
}

fn catalog_description(tools: &[SdkTool]) -> String {
    let mut per_server: BTreeMap<String, usize> = BTreeMap::new();
    for tool in sorted(tools) {
        let server = text::truncate(&text::one_line(tool.server), MAX_SERVER_NAME_CHARS);
        *per_server.entry(server).or_default() += 1;
    }
    let total: usize = per_server.values().sum();
    let mut out = format!(
        "{}\n```ts\n{CATALOG_API}```\n",
        usage(SdkForm::Catalog, SdkDocs::Full)
    );
    let _ = writeln!(out, "Servers ({}):", count(total, "tool"));
    for (server, n) in per_server.iter().take(MAX_CATALOG_SERVERS) {
        let _ = writeln!(out, "- {server}: {}", count(*n, "tool"));
    }
    if per_server.len() > MAX_CATALOG_SERVERS {
        let rest: usize = per_server.values().skip(MAX_CATALOG_SERVERS).sum();
        let servers = per_server.len() - MAX_CATALOG_SERVERS;
        let plural = if servers == 1 { "" } else { "s" };
        let _ = writeln!(
            out,
            "- and {servers} more server{plural} ({})",
            count(rest, "tool")
        );
    }
    out.pop();
    out
}

fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// A markdown fence longer than any backtick run in `body`, so that a description quoting
/// markdown cannot end the code block early.
fn fence_for(body: &str) -> String {
    let longest = body
        .split(|c: char| c != '`')
        .map(str::len)
        .max()
        .unwrap_or(0);
    "`".repeat(longest.max(2) + 1)
}

/// Cheap deterministic token estimate used by `Auto`.
///
/// Counts runs the way BPE tokenizers merge them: ASCII letters about 6 to a token, digits
/// 3, ASCII punctuation 3 (`/**`, `};`, `?:` are one or two tokens), other characters (CJK,
/// accents) 3 to 2 tokens; whitespace merges into its neighbours. On the inline texts of
/// `examples/bench_tokens` it gives 1.05–1.13× o200k's count; it leans high on prose and
/// JSON (about 1.2×), the safe side for a budget.
pub fn estimate_tokens(text: &str) -> usize {
    #[derive(Clone, Copy, PartialEq)]
    enum Run {
        Letters,
        Digits,
        Punctuation,
        Other,
        Space,
    }
    fn cost(run: Run, len: usize) -> usize {
        match run {
            Run::Letters => len.div_ceil(6),
            Run::Digits | Run::Punctuation => len.div_ceil(3),
            Run::Other => (len * 2).div_ceil(3),
            Run::Space => 0,
        }
    }
    let mut tokens = 0;
    let mut current = Run::Space;
    let mut len = 0;
    for c in text.chars() {
        let run = if c.is_ascii_alphabetic() {
            Run::Letters
        } else if c.is_ascii_digit() {
            Run::Digits
        } else if c.is_whitespace() {
            Run::Space
        } else if c.is_ascii() {
            Run::Punctuation
        } else {
            Run::Other
        };
        if run != current {
            tokens += cost(current, len);
            current = run;
            len = 0;
        }
        len += 1;
    }
    tokens + cost(current, len)
}

/// Tools by name (then server), one per name.
fn sorted<'t, 'a>(tools: &'t [SdkTool<'a>]) -> Vec<&'t SdkTool<'a>> {
    let mut sorted: Vec<&SdkTool> = tools.iter().collect();
    sorted.sort_by(|a, b| (a.name, a.server).cmp(&(b.name, b.server)));
    sorted.dedup_by(|b, a| a.name == b.name);
    sorted
}

/// One tool's member of `declare const tools`, with its JSDoc: at indentation 1, or 0 for
/// brief docs, where the two spaces per line cost about a token per tool (o200k).
fn write_member(out: &mut String, tool: &SdkTool, docs: SdkDocs) {
    let indent = match docs {
        SdkDocs::Full => 1,
        SdkDocs::Brief => 0,
    };
    let input = &tool.tool.input_schema;
    // `()` says "no arguments" more plainly than any type; `{ [key: string]: unknown }`
    // would invite the model to invent some.
    let params = if takes_nothing(input) {
        String::new()
    } else {
        let args = schema_ts::object_schema_to_ts_at(input, indent, docs);
        let optional = args.starts_with('{')
            && !matches!(input.get("required"), Some(serde_json::Value::Array(r)) if !r.is_empty());
        format!("args{}: {args}", if optional { "?" } else { "" })
    };
    let result = match &tool.tool.output_schema {
        Some(schema) => schema_ts::object_schema_to_ts_at(schema, indent, docs),
        None => "unknown".to_owned(),
    };
    text::jsdoc(out, &tool_doc(tool.tool, docs), indent);
    let _ = writeln!(
        out,
        "{}{}({params}): Promise<{result}>;",
        "  ".repeat(indent),
        text::key(tool.name)
    );
}

/// Whether an input schema declares no arguments at all: an object schema without
/// properties, extra keys or alternatives (`{"type": "object"}`, `"properties": {}`).
fn takes_nothing(schema: &serde_json::Map<String, serde_json::Value>) -> bool {
    let no_properties = match schema.get("properties") {
        None => true,
        Some(serde_json::Value::Object(p)) => p.is_empty(),
        Some(_) => false,
    };
    let open = [
        "additionalProperties",
        "patternProperties",
        "$ref",
        "anyOf",
        "oneOf",
        "allOf",
    ]
    .iter()
    .any(|k| {
        schema
            .get(*k)
            .is_some_and(|v| v != &serde_json::Value::Bool(false))
    });
    no_properties && !open && schema.get("type").is_none_or(|t| t == "object")
}

/// Whether a title only restates the tool's name (`Get Sum Tool` for `get-sum`): it would
/// cost tokens and say nothing.
fn title_restates_name(title: &str, name: &str) -> bool {
    let mut title_words = catalog::words(title);
    if title_words.last().is_some_and(|w| w == "tool") {
        title_words.pop();
    }
    title_words == catalog::words(name)
}

/// JSDoc lines for a tool: its description, its title (unless it restates the name), then
/// its annotation hints in a fixed order. Hints the spec calls meaningless for read-only
/// tools are left out for them. Brief docs keep the first sentence and the hints that matter
/// to a program (`@readOnly` decides what may run in parallel; `@destructive` warns): no
/// title, no other hint.
fn tool_doc(tool: &rmcp::model::Tool, docs: SdkDocs) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(description) = tool.description.as_deref() {
        let description = match docs {
            SdkDocs::Full => text::comment_safe(description),
            SdkDocs::Brief => text::comment_safe(&text::brief(description, MAX_BRIEF_CHARS)),
        };
        if !description.is_empty() {
            lines.push(description);
        }
    }
    let brief = docs == SdkDocs::Brief;
    let annotations = tool.annotations.as_ref();
    let title = tool
        .title
        .as_deref()
        .or_else(|| annotations.and_then(|a| a.title.as_deref()));
    if let Some(title) = title.filter(|t| !brief && !title_restates_name(t, &tool.name)) {
        let title = text::comment_safe(&text::one_line(title));
        if !title.is_empty() {
            lines.push(format!("@title {title}"));
        }
    }
    if let Some(a) = annotations {
        let read_only = a.read_only_hint == Some(true);
        let mut tags = Vec::new();
        if read_only {
            tags.push("@readOnly");
        } else {
            match a.destructive_hint {
                Some(true) => tags.push("@destructive"),
                Some(false) if !brief => tags.push("@nonDestructive"),
                _ => {}
            }
            if a.idempotent_hint == Some(true) && !brief {
                tags.push("@idempotent");
            }
        }
        match a.open_world_hint {
            _ if brief => {}
            Some(true) => tags.push("@openWorld"),
            Some(false) => tags.push("@closedWorld"),
            None => {}
        }
        if !tags.is_empty() {
            lines.push(tags.join(" "));
        }
    }
    lines
}

#[cfg(test)]
mod golden_tests;
#[cfg(test)]
mod tests;
