//! JSON with comments and trailing commas (VS Code's `mcp.json` dialect) made plain JSON.
//!
//! VS Code documents `mcp.json` as JSONC, and Cursor (a VS Code fork) accepts the same; a
//! `//` comment or a trailing comma would otherwise fail the whole import. Comments and
//! trailing commas become spaces (newlines are kept) so that serde_json's line and column
//! numbers still point into the user's file.

/// `text` with comments and trailing commas blanked out; everything else unchanged.
pub fn to_json(text: &str) -> String {
    let mut bytes = text.as_bytes().to_vec();
    blank_comments(&mut bytes);
    blank_trailing_commas(&mut bytes);
    // Only ASCII bytes were replaced by ASCII spaces, and only outside strings, so the
    // UTF-8 stays valid; `from_utf8_lossy` is the no-panic way to say so.
    String::from_utf8_lossy(&bytes).into_owned()
}

fn blank_comments(bytes: &mut [u8]) {
    let mut i = 0;
    let mut in_string = false;
    while i < bytes.len() {
        let b = bytes[i];
        if in_string {
            match b {
                b'\\' => i += 1,
                b'"' => in_string = false,
                _ => {}
            }
            i += 1;
            continue;
        }
        match (b, bytes.get(i + 1)) {
            (b'"', _) => {
                in_string = true;
                i += 1;
            }
            (b'/', Some(b'/')) => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    bytes[i] = b' ';
                    i += 1;
                }
            }
            (b'/', Some(b'*')) => {
                bytes[i] = b' ';
                bytes[i + 1] = b' ';
                i += 2;
                while i < bytes.len() && !(bytes[i] == b'*' && bytes.get(i + 1) == Some(&b'/')) {
                    if bytes[i] != b'\n' {
                        bytes[i] = b' ';
                    }
                    i += 1;
                }
                // The closing `*/`, when there is one (unterminated: serde reports the EOF).
                for _ in 0..2 {
                    if i < bytes.len() {
                        bytes[i] = b' ';
                        i += 1;
                    }
                }
            }
            _ => i += 1,
        }
    }
}

/// Runs after [`blank_comments`], so only whitespace can sit between a comma and a bracket.
fn blank_trailing_commas(bytes: &mut [u8]) {
    let mut i = 0;
    let mut in_string = false;
    while i < bytes.len() {
        let b = bytes[i];
        if in_string {
            match b {
                b'\\' => i += 1,
                b'"' => in_string = false,
                _ => {}
            }
        } else if b == b'"' {
            in_string = true;
        } else if b == b',' {
            let next = bytes[i + 1..]
                .iter()
                .find(|c| !c.is_ascii_whitespace())
                .copied();
            if matches!(next, Some(b'}' | b']')) {
                bytes[i] = b' ';
            }
        }
        i += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::to_json;

    #[test]
    fn comments_and_trailing_commas_go_strings_stay() {
        let text = r#"{
  // a line comment with "quotes"
  "servers": { /* block
  comment */ "a": {"command": "x // not a comment", "args": ["/* nor this */", "y",],},
  },
}"#;
        let json = to_json(text);
        let value: serde_json::Value = serde_json::from_str(&json).expect("plain JSON");
        assert_eq!(value["servers"]["a"]["command"], "x // not a comment");
        assert_eq!(
            value["servers"]["a"]["args"],
            serde_json::json!(["/* nor this */", "y"])
        );
        assert_eq!(json.lines().count(), text.lines().count(), "lines are kept");
    }

    #[test]
    fn escaped_quotes_do_not_end_a_string() {
        let json = to_json(r#"{"a": "say \"hi\", // still text", }"#);
        let value: serde_json::Value = serde_json::from_str(&json).expect("plain JSON");
        assert_eq!(value["a"], "say \"hi\", // still text");
    }

    #[test]
    fn an_unterminated_block_comment_stays_an_error() {
        let json = to_json("{\"a\": 1 /* never closed");
        assert!(serde_json::from_str::<serde_json::Value>(&json).is_err());
    }
}
