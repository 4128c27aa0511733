//! Text hygiene for the SDK: upstream strings made safe inside JSDoc, identifiers, and quoting.

use std::fmt::Write as _;

/// Upstream text with line breaks normalised to `\n` and everything invisible or
/// layout-breaking removed: other control characters, bidi overrides (which can make text
/// read differently from what it is) and byte-order marks. Trailing spaces are trimmed per
/// line, runs of blank lines collapse to one, and leading/trailing blank lines go.
pub fn clean(text: &str) -> String {
    let mut normalised = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' => {
                if chars.peek() == Some(&'\n') {
                    chars.next();
                }
                normalised.push('\n');
            }
            '\n' | '\u{2028}' | '\u{2029}' | '\u{85}' => normalised.push('\n'),
            '\t' => normalised.push(' '),
            c if is_invisible(c) => {}
            c => normalised.push(c),
        }
    }
    let mut out = String::with_capacity(normalised.len());
    let mut blank_run = 0usize;
    for line in normalised.split('\n') {
        let line = line.trim_end();
        if line.is_empty() {
            blank_run += 1;
            continue;
        }
        if !out.is_empty() {
            out.push('\n');
            if blank_run > 0 {
                out.push('\n');
            }
        }
        blank_run = 0;
        out.push_str(line);
    }
    out
}

/// The gateway's one definition of invisible text (tools are already cleaned at import;
/// this keeps the SDK safe for text that reaches it another way).
fn is_invisible(c: char) -> bool {
    crate::clean::is_hidden(c)
}

/// [`clean`] text that may sit inside a `/* */` comment: `*/` can no longer close it.
pub fn comment_safe(text: &str) -> String {
    clean(text).replace("*/", "*\\/")
}

/// One line of [`clean`] text: line breaks become spaces.
pub fn one_line(text: &str) -> String {
    let cleaned = clean(text);
    let mut out = String::with_capacity(cleaned.len());
    for word in cleaned.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

/// At most `max` characters of `text`, cut at a char boundary with `…` when shortened.
pub fn truncate(text: &str, max: usize) -> String {
    if text.chars().nth(max).is_none() {
        return text.to_owned();
    }
    // Keep `max - 1` characters so that, with the ellipsis, the result is `max` long.
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// Words after which a period does not end a sentence.
const ABBREVIATIONS: &[&str] = &["e.g", "i.e", "etc", "vs", "cf", "approx", "incl", "no"];

/// The first sentence of [`clean`] text on one line, at most `max` characters (cut with
/// `…`). A sentence ends at `.`, `!` or `?` before whitespace (not after a common
/// abbreviation such as `e.g.`), or at a line break. No mark says that more was left out:
/// the usage text says every description is cut so, and one mark per cut cost 1% of a
/// native `tools/list` on the benchmark surface.
pub fn brief(text: &str, max: usize) -> String {
    let cleaned = clean(text);
    let first_line = cleaned.split('\n').next().unwrap_or_default();
    let mut end = first_line.len();
    let mut chars = first_line.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        if !matches!(c, '.' | '!' | '?') {
            continue;
        }
        let before_space = chars.peek().is_some_and(|(_, next)| next.is_whitespace());
        if !before_space {
            continue;
        }
        let word = first_line[..at]
            .rsplit(|c: char| c.is_whitespace() || c == '(')
            .next()
            .unwrap_or_default();
        if c == '.' && ABBREVIATIONS.iter().any(|a| word.eq_ignore_ascii_case(a)) {
            continue;
        }
        end = at + c.len_utf8();
        break;
    }
    truncate(&one_line(&first_line[..end]), max)
}

/// JSDoc for `lines` (already [`comment_safe`]) at `indent` levels of two spaces, ending in a
/// newline; nothing when there are no lines. One line (`/** a @tag */`) when every line is
/// one line: a block's ` * ` prefixes and own `/**`, `*/` lines cost tokens and say nothing.
/// A block otherwise, so that multi-line text keeps its layout.
pub fn jsdoc(out: &mut String, lines: &[String], indent: usize) {
    let pad = "  ".repeat(indent);
    if let Some(line) = one_line_doc(lines) {
        let _ = writeln!(out, "{pad}/** {line} */");
        return;
    }
    let lines: Vec<&str> = lines.iter().flat_map(|l| l.split('\n')).collect();
    if lines.is_empty() {
        return;
    }
    let _ = writeln!(out, "{pad}/**");
    for line in lines {
        if line.is_empty() {
            let _ = writeln!(out, "{pad} *");
        } else {
            let _ = writeln!(out, "{pad} * {line}");
        }
    }
    let _ = writeln!(out, "{pad} */");
}

/// `lines` (already [`comment_safe`]) joined into one line by spaces, or `None` when there
/// are none or one of them spans lines. Safe after `//` too: [`clean`] has turned every
/// JavaScript line terminator into `\n`, so the text cannot end the comment early.
pub fn one_line_doc(lines: &[String]) -> Option<String> {
    if lines.is_empty() || lines.iter().any(|l| l.contains('\n')) {
        return None;
    }
    Some(lines.join(" "))
}

/// Whether `name` can be written bare as a property name (and read as `tools.name`).
/// ASCII only: reserved words are fine as property names, and the rare Unicode identifier
/// costs nothing to quote.
pub fn is_ident(name: &str) -> bool {
    let mut bytes = name.bytes();
    match bytes.next() {
        Some(b) if b.is_ascii_alphabetic() || b == b'_' || b == b'$' => {}
        _ => return false,
    }
    bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'$')
}

/// A JS string literal for `text`: JSON's escaping (valid JS), plus the two line
/// separators JSON leaves raw, which would break the line for a reader. A failure is
/// impossible for a `str`, but falls back to a literal of the cleaned text.
pub fn quote(text: &str) -> String {
    serde_json::to_string(text)
        .unwrap_or_else(|_| format!("\"{}\"", one_line(text).replace(['"', '\\'], "")))
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}

/// `name` bare when it is an identifier, else quoted: a property key.
pub fn key(name: &str) -> String {
    if is_ident(name) {
        name.to_owned()
    } else {
        quote(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn brief_keeps_the_first_sentence() {
        assert_eq!(brief("Adds two numbers.", 100), "Adds two numbers.");
        assert_eq!(brief("Adds. Then more.", 100), "Adds.");
        assert_eq!(brief("No stop here", 100), "No stop here");
        assert_eq!(brief("First line\nsecond line", 100), "First line");
        assert_eq!(
            brief("Use a glob, e.g. *.rs or i.e. this. Rest.", 100),
            "Use a glob, e.g. *.rs or i.e. this."
        );
        assert_eq!(
            brief("Version 1.2 is fine. Rest", 100),
            "Version 1.2 is fine."
        );
        assert_eq!(
            brief("See https://x.y/a.b for more", 100),
            "See https://x.y/a.b for more"
        );
        assert_eq!(brief("Really? Yes.", 100), "Really?");
        assert_eq!(brief("abcdefghij. Rest", 5), "abcd…");
        assert_eq!(brief("", 10), "");
        assert_eq!(brief("\u{202E}Hidden. Rest", 100), "Hidden.");
    }

    #[test]
    fn clean_normalises_breaks_and_strips_invisible_characters() {
        let raw = "a\r\nb\rc\u{2028}d\te\u{0007}f\u{202E}g\u{FEFF}h   \n\n\n\ni\n\n";
        assert_eq!(clean(raw), "a\nb\nc\nd efgh\n\ni");
    }

    #[test]
    fn comments_cannot_be_closed_from_inside() {
        let text = comment_safe("evil */ code(); /* more");
        assert!(!text.contains("*/"), "{text}");
        assert_eq!(text, "evil *\\/ code(); /* more");
    }

    #[test]
    fn jsdoc_is_one_line_unless_a_line_spans_lines() {
        let mut out = String::new();
        jsdoc(&mut out, &["one".to_owned()], 1);
        assert_eq!(out, "  /** one */\n");
        out.clear();
        jsdoc(&mut out, &["Reads.".to_owned(), "@readOnly".to_owned()], 1);
        assert_eq!(out, "  /** Reads. @readOnly */\n");
        out.clear();
        jsdoc(&mut out, &["a\n\nb".to_owned(), "@readOnly".to_owned()], 0);
        assert_eq!(out, "/**\n * a\n *\n * b\n * @readOnly\n */\n");
        out.clear();
        jsdoc(&mut out, &[], 0);
        assert_eq!(out, "");
        assert_eq!(one_line_doc(&[]), None);
        assert_eq!(one_line_doc(&["a\nb".to_owned()]), None);
        assert_eq!(
            one_line_doc(&["d".to_owned(), "@default 1".to_owned()]).as_deref(),
            Some("d @default 1")
        );
    }

    #[test]
    fn identifiers_and_quoting() {
        for ok in ["a", "echo__add", "$x", "_", "delete", "A1"] {
            assert!(is_ident(ok), "{ok}");
            assert_eq!(key(ok), ok);
        }
        for bad in ["", "my-tool", "1a", "a b", "dotted.name", "é", "a\"b"] {
            assert!(!is_ident(bad), "{bad}");
        }
        assert_eq!(key("my-tool"), "\"my-tool\"");
        assert_eq!(key("a\"b\n"), "\"a\\\"b\\n\"");
        assert_eq!(quote("a\u{2028}b\u{2029}"), "\"a\\u2028b\\u2029\"");
    }

    #[test]
    fn truncate_counts_characters() {
        assert_eq!(truncate("héllo", 10), "héllo");
        assert_eq!(truncate("héllo", 5), "héllo");
        assert_eq!(truncate("héllo wörld", 5), "héll…");
        assert_eq!(truncate("héllo wörld", 5).chars().count(), 5);
    }
}
