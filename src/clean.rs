//! Clean descriptions: invisible format and control characters stripped from what a model reads (descriptions, titles).
//!
//! An upstream can hide instructions from a human reviewer in text a model still reads:
//! zero-width characters, bidi overrides that make the text display in another order, tag
//! characters that spell ASCII invisibly. Every tool, prompt, resource and template is cleaned
//! at import, before it is listed; each cleaning is logged with what was removed, so the
//! upstream's behaviour is visible rather than silently fixed.
//!
//! Only descriptive text is touched: names, URIs and the instance data of schemas (`enum`,
//! `const`, `default`, `examples`) are left alone, so what a tool accepts never changes.

use std::borrow::Cow;

use rmcp::model::{JsonObject, Tool};
use serde_json::Value;

use crate::{config::ServerId, registry::passthrough::Offer};

/// Whether `c` is stripped from descriptions and titles: every control character (Unicode
/// category Cc) except line feed and tab, every format character (Cf: soft hyphen,
/// zero-width space / joiners / marks, bidi embeddings, overrides and isolates, word joiner
/// and invisible operators, BOM, interlinear annotations, tag characters...), and the
/// variation selectors supplement (U+E0100–U+E01EF), which carries hidden payloads and has
/// no use in tool text. The Cf list is that of Unicode 15.1.
pub fn is_hidden(c: char) -> bool {
    match c {
        '\n' | '\t' => false,
        // Cc: C0 controls, DEL, C1 controls.
        c if c.is_control() => true,
        '\u{00AD}'
        | '\u{0600}'..='\u{0605}'
        | '\u{061C}'
        | '\u{06DD}'
        | '\u{070F}'
        | '\u{0890}'..='\u{0891}'
        | '\u{08E2}'
        | '\u{180E}'
        | '\u{200B}'..='\u{200F}'
        | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{2064}'
        | '\u{2066}'..='\u{206F}'
        | '\u{FEFF}'
        | '\u{FFF9}'..='\u{FFFB}'
        | '\u{110BD}'
        | '\u{110CD}'
        | '\u{13430}'..='\u{1343F}'
        | '\u{1BCA0}'..='\u{1BCA3}'
        | '\u{1D173}'..='\u{1D17A}'
        // Tags (E0001, E0020–E007F are Cf; the unassigned rest of the block goes too).
        | '\u{E0000}'..='\u{E007F}'
        | '\u{E0100}'..='\u{E01EF}' => true,
        _ => false,
    }
}

/// Removes the hidden characters from `text`; how many there were.
pub fn strip(text: &mut String) -> usize {
    let hidden = text.chars().filter(|&c| is_hidden(c)).count();
    if hidden > 0 {
        text.retain(|c| !is_hidden(c));
    }
    hidden
}

fn strip_cow(text: &mut Cow<'static, str>) -> usize {
    let hidden = text.chars().filter(|&c| is_hidden(c)).count();
    if hidden > 0 {
        *text = Cow::Owned(text.chars().filter(|&c| !is_hidden(c)).collect());
    }
    hidden
}

/// What was removed from one item: the total and the fields it was in.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Removed {
    pub chars: usize,
    pub fields: Vec<&'static str>,
}

impl Removed {
    fn add(&mut self, field: &'static str, chars: usize) {
        if chars > 0 {
            self.chars += chars;
            self.fields.push(field);
        }
    }
}

/// Cleans one tool's description, title, annotation title, and the `description` / `title`
/// annotations inside its schemas (models read those too).
pub fn tool(tool: &mut Tool) -> Removed {
    let mut removed = Removed::default();
    if let Some(description) = tool.description.as_mut() {
        removed.add("description", strip_cow(description));
    }
    if let Some(title) = tool.title.as_mut() {
        removed.add("title", strip(title));
    }
    if let Some(title) = tool.annotations.as_mut().and_then(|a| a.title.as_mut()) {
        removed.add("annotations.title", strip(title));
    }
    // Counted on the shared schema first: most tools have nothing to clean, and `make_mut`
    // would copy a schema that is shared.
    if schema_hidden(&tool.input_schema) > 0 {
        removed.add(
            "inputSchema",
            clean_schema_object(std::sync::Arc::make_mut(&mut tool.input_schema)),
        );
    }
    if let Some(output) = tool.output_schema.as_mut()
        && schema_hidden(output) > 0
    {
        removed.add(
            "outputSchema",
            clean_schema_object(std::sync::Arc::make_mut(output)),
        );
    }
    removed
}

/// Cleans every tool `server` exports, logging each one that needed it.
pub fn tools(server: &ServerId, tools: &mut [Tool]) {
    for tool in tools {
        let removed = self::tool(tool);
        if removed.chars > 0 {
            tracing::warn!(
                server = %server,
                tool = %tool.name,
                removed = removed.chars,
                fields = %removed.fields.join(", "),
                "removed {} hidden character(s) (zero-width, bidi, control or tag) from the tool's {}",
                removed.chars,
                removed.fields.join(", ")
            );
        }
    }
}

/// Cleans the descriptions and titles of what `server` offers besides tools, logging each
/// item that needed it.
pub fn offer(server: &ServerId, offer: &mut Offer) {
    let log = |kind: &str, name: &str, removed: usize| {
        if removed > 0 {
            tracing::warn!(
                server = %server,
                removed,
                "removed {removed} hidden character(s) (zero-width, bidi, control or tag) from {kind} {name:?}"
            );
        }
    };
    for prompt in &mut offer.prompts {
        let mut removed = strip_opt(&mut prompt.description) + strip_opt(&mut prompt.title);
        for argument in prompt.arguments.iter_mut().flatten() {
            removed += strip_opt(&mut argument.description) + strip_opt(&mut argument.title);
        }
        log("prompt", &prompt.name, removed);
    }
    for resource in &mut offer.resources {
        let removed = strip_opt(&mut resource.description) + strip_opt(&mut resource.title);
        log("resource", &resource.uri, removed);
    }
    for template in &mut offer.templates {
        let removed = strip_opt(&mut template.description) + strip_opt(&mut template.title);
        log("resource template", &template.uri_template, removed);
    }
}

fn strip_opt(text: &mut Option<String>) -> usize {
    text.as_mut().map_or(0, strip)
}

/// Keys whose values are instance data, not annotations: cleaning them would change what a
/// schema accepts or proposes.
const INSTANCE_KEYS: [&str; 4] = ["enum", "const", "default", "examples"];

fn clean_schema_object(schema: &mut JsonObject) -> usize {
    schema
        .iter_mut()
        .map(|(key, value)| match (key.as_str(), value) {
            ("description" | "title", Value::String(text)) => strip(text),
            (key, _) if INSTANCE_KEYS.contains(&key) => 0,
            (_, value) => clean_schema(value),
        })
        .sum()
}

fn clean_schema(value: &mut Value) -> usize {
    match value {
        Value::Object(map) => clean_schema_object(map),
        Value::Array(items) => items.iter_mut().map(clean_schema).sum(),
        _ => 0,
    }
}

/// How many characters [`clean_schema_object`] would remove, without changing anything.
fn schema_hidden(schema: &JsonObject) -> usize {
    fn count(value: &Value) -> usize {
        match value {
            Value::Object(map) => object(map),
            Value::Array(items) => items.iter().map(count).sum(),
            _ => 0,
        }
    }
    fn object(map: &JsonObject) -> usize {
        map.iter()
            .map(|(key, value)| match (key.as_str(), value) {
                ("description" | "title", Value::String(text)) => {
                    text.chars().filter(|&c| is_hidden(c)).count()
                }
                (key, _) if INSTANCE_KEYS.contains(&key) => 0,
                (_, value) => count(value),
            })
            .sum()
    }
    object(schema)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rmcp::model::{Prompt, PromptArgument, Tool, ToolAnnotations};
    use serde_json::{Value, json};

    use super::*;

    fn object(value: Value) -> Arc<JsonObject> {
        match value {
            Value::Object(map) => Arc::new(map),
            _ => Arc::new(JsonObject::new()),
        }
    }

    #[test]
    fn the_usual_suspects_are_hidden() {
        for c in [
            '\u{0000}',
            '\u{0007}',
            '\u{000D}',
            '\u{001B}',
            '\u{007F}',
            '\u{0085}',
            '\u{009F}',
            '\u{00AD}',
            '\u{061C}',
            '\u{180E}',
            '\u{200B}',
            '\u{200C}',
            '\u{200D}',
            '\u{200E}',
            '\u{200F}',
            '\u{202A}',
            '\u{202E}',
            '\u{2060}',
            '\u{2064}',
            '\u{2066}',
            '\u{2069}',
            '\u{FEFF}',
            '\u{FFF9}',
            '\u{E0001}',
            '\u{E0041}',
            '\u{E007F}',
            '\u{E0100}',
        ] {
            assert!(is_hidden(c), "U+{:04X} should be hidden", c as u32);
        }
    }

    #[test]
    fn visible_text_and_layout_stay() {
        for c in [
            '\n', '\t', ' ', 'a', 'é', 'ß', '中', '→', '😀', '\u{00A0}', '\u{FE0F}', '\u{2028}',
        ] {
            assert!(!is_hidden(c), "U+{:04X} should stay", c as u32);
        }
        let mut text = "Line one\n\tLine two: naïve café → 😀".to_owned();
        let before = text.clone();
        assert_eq!(strip(&mut text), 0);
        assert_eq!(text, before);
    }

    #[test]
    fn strip_counts_and_removes() {
        let mut text =
            "Re\u{200B}turn\u{202E}txet\u{202C} the \u{E0049}\u{E0047}text\u{FEFF}\r".to_owned();
        assert_eq!(strip(&mut text), 7);
        assert_eq!(text, "Returntxet the text");
    }

    #[test]
    fn a_tool_is_cleaned_in_description_titles_and_schema_annotations_only() {
        let schema = object(json!({
            "type": "object",
            "title": "Ar\u{200B}gs",
            "properties": {
                "text": {
                    "type": "string",
                    "description": "Te\u{2066}xt\u{2069}",
                    "enum": ["a\u{200B}b"],
                    "default": "c\u{200B}d"
                },
                "description": {"type": "string", "pattern": "^x\u{200B}$"}
            }
        }));
        let mut tool = Tool::new("t\u{200B}", "De\u{200B}scribe\u{202E}d", schema)
            .with_title("Ti\u{00AD}tle")
            .with_annotations(ToolAnnotations::with_title("An\u{FEFF}no"));
        let removed = super::tool(&mut tool);
        assert_eq!(removed.chars, 7);
        assert_eq!(
            removed.fields,
            ["description", "title", "annotations.title", "inputSchema"]
        );
        assert_eq!(tool.description.as_deref(), Some("Described"));
        assert_eq!(tool.title.as_deref(), Some("Title"));
        assert_eq!(
            tool.annotations.and_then(|a| a.title).as_deref(),
            Some("Anno")
        );
        let schema = Value::Object((*tool.input_schema).clone());
        assert_eq!(schema["title"], "Args");
        assert_eq!(schema["properties"]["text"]["description"], "Text");
        // Instance data and names are what the tool accepts: untouched.
        assert_eq!(schema["properties"]["text"]["enum"][0], "a\u{200B}b");
        assert_eq!(schema["properties"]["text"]["default"], "c\u{200B}d");
        assert_eq!(
            schema["properties"]["description"]["pattern"],
            "^x\u{200B}$"
        );
        assert_eq!(tool.name, "t\u{200B}");
    }

    #[test]
    fn a_clean_tool_is_left_as_it_was() {
        let schema = object(json!({"type": "object", "description": "fine"}));
        let mut tool = Tool::new("t", "Fine", schema.clone());
        assert_eq!(super::tool(&mut tool), Removed::default());
        // Not even copied.
        assert!(Arc::ptr_eq(&tool.input_schema, &schema));
    }

    #[test]
    fn prompts_and_their_arguments_are_cleaned() {
        let mut offer = Offer {
            prompts: vec![Prompt::new(
                "p",
                Some("Pro\u{200B}mpt"),
                Some(vec![
                    PromptArgument::new("a").with_description("Ar\u{202E}g"),
                ]),
            )],
            ..Offer::default()
        };
        let server = ServerId::global(crate::config::ServerName::parse("s").unwrap());
        super::offer(&server, &mut offer);
        assert_eq!(offer.prompts[0].description.as_deref(), Some("Prompt"));
        let arguments = offer.prompts[0].arguments.as_ref().unwrap();
        assert_eq!(arguments[0].description.as_deref(), Some("Arg"));
    }
}
