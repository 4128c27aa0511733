//! The catalog behind `catalog.search` / `catalog.describe`: an owned word index over tool names and descriptions.

use std::collections::HashSet;

use rmcp::model::Tool;
use serde_json::{Value, json};

use super::{SdkTool, describe, sorted, text};

const DEFAULT_LIMIT: usize = 10;
const MAX_LIMIT: usize = 50;
/// Longest summary, in characters.
const MAX_SUMMARY_CHARS: usize = 160;

/// Owned search index over names and descriptions, built once per view.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    /// By name, one per name.
    entries: Vec<Entry>,
}

#[derive(Debug, Clone)]
struct Entry {
    name: String,
    server: String,
    summary: String,
    /// Kept to render its declaration on demand: most tools are never described.
    tool: Tool,
    name_lower: String,
    name_words: Vec<String>,
    server_lower: String,
    /// Title and description, lowercased.
    text_lower: String,
    text_words: HashSet<String>,
}

impl Catalog {
    pub fn new(tools: &[SdkTool]) -> Self {
        let entries = sorted(tools)
            .into_iter()
            .map(|t| {
                let title = t
                    .tool
                    .title
                    .as_deref()
                    .or_else(|| t.tool.annotations.as_ref().and_then(|a| a.title.as_deref()));
                let description = t.tool.description.as_deref().unwrap_or("");
                let text_lower = format!("{} {description}", title.unwrap_or("")).to_lowercase();
                Entry {
                    name: t.name.to_owned(),
                    server: t.server.to_owned(),
                    summary: summary(description, title),
                    tool: t.tool.clone(),
                    name_lower: t.name.to_lowercase(),
                    name_words: words(t.name),
                    server_lower: t.server.to_lowercase(),
                    text_words: words(&text_lower).into_iter().collect(),
                    text_lower,
                }
            })
            .collect();
        Self { entries }
    }

    /// Ranked matches: a JSON array of `{name, server, summary}`, best first, ties by name.
    /// `limit` defaults to 10 and is kept within 1..=50. A query without words returns the
    /// first `limit` tools by name; otherwise only tools matching at least one word.
    pub fn search(&self, query: &str, limit: Option<usize>) -> Value {
        let limit = limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT);
        let mut terms = words(query);
        terms.sort();
        terms.dedup();
        let hits: Vec<&Entry> = if terms.is_empty() {
            self.entries.iter().take(limit).collect()
        } else {
            let whole = query.trim().to_lowercase();
            let mut scored: Vec<(u32, &Entry)> = self
                .entries
                .iter()
                .filter_map(|e| {
                    let score = e.score(&whole, &terms);
                    (score > 0).then_some((score, e))
                })
                .collect();
            // Entries are in name order and the sort is stable: ties stay by name.
            scored.sort_by_key(|&(score, _)| std::cmp::Reverse(score));
            scored.into_iter().take(limit).map(|(_, e)| e).collect()
        };
        Value::Array(
            hits.into_iter()
                .map(|e| json!({"name": e.name, "server": e.server, "summary": e.summary}))
                .collect(),
        )
    }

    /// The tool's TS declaration (same text as [`describe`]), or `None` for an unknown name.
    pub fn describe(&self, name: &str) -> Option<String> {
        let at = self
            .entries
            .binary_search_by(|e| e.name.as_str().cmp(name))
            .ok()?;
        let e = self.entries.get(at)?;
        Some(describe(&SdkTool {
            name: &e.name,
            server: &e.server,
            tool: &e.tool,
        }))
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl Entry {
    /// Name matches outweigh server matches, which outweigh description matches; a query
    /// matched in full, or every word of it matched, ranks above a partial match.
    fn score(&self, whole: &str, terms: &[String]) -> u32 {
        let mut score = 0;
        let mut matched = 0;
        for term in terms {
            let mut best = self.term_score(term);
            // A plural query word finds the singular (`files` → `read_file`).
            if let Some(stem) = term.strip_suffix('s').filter(|s| s.len() >= 3) {
                best = best.max(self.term_score(stem).saturating_sub(1));
            }
            if best > 0 {
                matched += 1;
            }
            score += best;
        }
        if score == 0 {
            return 0;
        }
        if matched == terms.len() {
            score += 15;
        }
        if self.name_lower == whole {
            score += 1000;
        }
        score
    }

    fn term_score(&self, term: &str) -> u32 {
        let in_name = if self.name_words.iter().any(|w| w == term) {
            20
        } else if self.name_words.iter().any(|w| w.starts_with(term)) {
            12
        } else if self.name_lower.contains(term) {
            8
        } else {
            0
        };
        let in_server = if self.server_lower == term {
            5
        } else if self.server_lower.contains(term) {
            3
        } else {
            0
        };
        let in_text = if self.text_words.contains(term) {
            4
        } else if term.len() >= 3 && self.text_lower.contains(term) {
            2
        } else {
            0
        };
        in_name + in_server + in_text
    }
}

/// Lowercase words: runs of letters and digits, also split where camelCase turns upper.
pub(super) fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut prev_lower = false;
    for c in text.chars() {
        if c.is_alphanumeric() {
            if c.is_uppercase() && prev_lower && !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
            prev_lower = c.is_lowercase() || c.is_numeric();
            word.extend(c.to_lowercase());
        } else {
            prev_lower = false;
            if !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

/// The first sentence (or line) of the description, one line, bounded; the title when
/// there is no description.
fn summary(description: &str, title: Option<&str>) -> String {
    let cleaned = text::clean(description);
    let first_line = cleaned.lines().next().unwrap_or("");
    let sentence = match first_line.find(". ") {
        Some(end) => &first_line[..=end],
        None => first_line,
    };
    let sentence = if sentence.is_empty() {
        title.unwrap_or("")
    } else {
        sentence
    };
    text::truncate(&text::one_line(sentence), MAX_SUMMARY_CHARS)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn tool(name: &str, description: &str) -> Tool {
        serde_json::from_value(json!({
            "name": name,
            "description": description,
            "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
        }))
        .unwrap_or_default()
    }

    fn catalog(tools: &[(&str, &str, Tool)]) -> Catalog {
        let sdk: Vec<SdkTool> = tools
            .iter()
            .map(|(name, server, tool)| SdkTool { name, server, tool })
            .collect();
        Catalog::new(&sdk)
    }

    fn names(hits: &Value) -> Vec<&str> {
        hits.as_array()
            .map(|a| a.iter().filter_map(|h| h["name"].as_str()).collect())
            .unwrap_or_default()
    }

    fn sample() -> Catalog {
        catalog(&[
            (
                "fs__write_file",
                "fs",
                tool("write_file", "Create or overwrite a file."),
            ),
            (
                "fs__read_file",
                "fs",
                tool(
                    "read_file",
                    "Read the complete contents of a file. Handles text.",
                ),
            ),
            (
                "fs__list_directory",
                "fs",
                tool("list_directory", "List files and directories in a path."),
            ),
            (
                "web__fetch",
                "web",
                tool("fetch", "Fetch a URL and return its body as markdown."),
            ),
            (
                "web__readability",
                "web",
                tool("readability", "Extract the readable article from HTML."),
            ),
            (
                "echo__getTinyImage",
                "echo",
                tool("getTinyImage", "Returns a tiny image."),
            ),
        ])
    }

    #[test]
    fn name_matches_rank_above_description_matches() {
        let c = sample();
        let hits = c.search("read file", None);
        assert_eq!(
            names(&hits),
            [
                "fs__read_file",
                "fs__write_file",
                "web__readability",
                "fs__list_directory"
            ]
        );
        assert_eq!(
            hits[0],
            json!({"name": "fs__read_file", "server": "fs",
                   "summary": "Read the complete contents of a file."})
        );
    }

    #[test]
    fn exact_names_plurals_camel_case_and_servers() {
        let c = sample();
        assert_eq!(names(&c.search("web__fetch", None))[0], "web__fetch");
        // `files` is in list_directory's description, but `file` in the names wins.
        assert_eq!(
            names(&c.search("files", Some(3))),
            ["fs__read_file", "fs__write_file", "fs__list_directory"]
        );
        assert_eq!(names(&c.search("tiny image", None)), ["echo__getTinyImage"]);
        assert_eq!(
            names(&c.search("WEB", None)),
            ["web__fetch", "web__readability"]
        );
        assert_eq!(names(&c.search("zebra", None)), Vec::<&str>::new());
    }

    #[test]
    fn ties_break_by_name_and_limits_hold() {
        let tools: Vec<(String, Tool)> = (0..80)
            .rev()
            .map(|i| (format!("t{i:02}"), tool("x", "Same words here.")))
            .collect();
        let sdk: Vec<SdkTool> = tools
            .iter()
            .map(|(name, t)| SdkTool {
                name,
                server: "s",
                tool: t,
            })
            .collect();
        let c = Catalog::new(&sdk);
        assert_eq!(c.len(), 80);
        let hits = c.search("words", None);
        assert_eq!(
            names(&hits),
            (0..10).map(|i| format!("t{i:02}")).collect::<Vec<_>>()
        );
        assert_eq!(
            c.search("words", Some(500)).as_array().map(Vec::len),
            Some(50)
        );
        assert_eq!(c.search("words", Some(0)).as_array().map(Vec::len), Some(1));
        assert_eq!(names(&c.search("", Some(3))), ["t00", "t01", "t02"]);
        assert_eq!(names(&c.search("  --  ", Some(2))), ["t00", "t01"]);
    }

    #[test]
    fn describe_matches_the_sdk_text() {
        let c = sample();
        let t = tool(
            "read_file",
            "Read the complete contents of a file. Handles text.",
        );
        let expected = describe(&SdkTool {
            name: "fs__read_file",
            server: "fs",
            tool: &t,
        });
        assert_eq!(c.describe("fs__read_file"), Some(expected));
        assert_eq!(c.describe("fs__nope"), None);
        assert_eq!(c.describe(""), None);
        assert!(!c.is_empty());
        assert!(Catalog::new(&[]).is_empty());
    }

    #[test]
    fn summaries_are_first_sentences_one_line_and_bounded() {
        assert_eq!(summary("First. Second.", None), "First.");
        assert_eq!(summary("Line one\nline two", None), "Line one");
        assert_eq!(summary("", Some("A title")), "A title");
        assert_eq!(summary("  \n\n", None), "");
        assert_eq!(summary("bad\u{0007} */ bell", None), "bad */ bell");
        let long = "word ".repeat(100);
        assert_eq!(summary(&long, None).chars().count(), MAX_SUMMARY_CHARS);
    }

    #[test]
    fn words_split_on_case_and_punctuation() {
        assert_eq!(words("getTinyImage"), ["get", "tiny", "image"]);
        assert_eq!(
            words("read_file-v2 HTTPServer"),
            ["read", "file", "v2", "httpserver"]
        );
        assert_eq!(words("Élan déjà"), ["élan", "déjà"]);
    }
}
