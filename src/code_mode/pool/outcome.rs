//! What a run produced, and the text the model reads about it.

use serde_json::Value;

use crate::code_mode::wire::FailureKind;

/// Why a run failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunFailure {
    pub kind: FailureKind,
    pub message: String,
}

/// Everything a run produced.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOutcome {
    /// Captured console lines, in order.
    pub logs: Vec<String>,
    /// The returned value (`Ok(None)` = returned `undefined`), or the failure.
    pub result: Result<Option<Value>, RunFailure>,
    /// Tool calls the program made.
    pub tool_calls: u32,
}

impl RunOutcome {
    /// The text the model reads, per spec: captured logs joined by "\n", then the returned value (a string raw,
    /// anything else 2-space JSON); "(run_code completed with no output)" when both are empty. On failure:
    /// `code run failed (<kind>): <message>`, then "\nCaptured output:\n" and the logs when there are logs.
    pub fn text(&self) -> String {
        match &self.result {
            Ok(value) => {
                let mut parts: Vec<String> = self.logs.clone();
                match value {
                    Some(Value::String(text)) => parts.push(text.clone()),
                    Some(other) => parts.push(
                        serde_json::to_string_pretty(other).unwrap_or_else(|_| other.to_string()),
                    ),
                    None => {}
                }
                let text = parts.join("\n");
                if text.is_empty() {
                    "(run_code completed with no output)".to_owned()
                } else {
                    text
                }
            }
            Err(failure) => {
                let mut text = format!(
                    "code run failed ({}): {}",
                    failure.kind.as_str(),
                    failure.message
                );
                if !self.logs.is_empty() {
                    text.push_str("\nCaptured output:\n");
                    text.push_str(&self.logs.join("\n"));
                }
                text
            }
        }
    }

    pub(super) fn failed(kind: FailureKind, message: String) -> Self {
        Self {
            logs: Vec::new(),
            result: Err(RunFailure { kind, message }),
            tool_calls: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn outcome(logs: &[&str], result: Result<Option<Value>, RunFailure>) -> RunOutcome {
        RunOutcome {
            logs: logs.iter().map(|l| (*l).to_owned()).collect(),
            result,
            tool_calls: 0,
        }
    }

    #[test]
    fn success_text_is_logs_then_the_value() {
        assert_eq!(
            outcome(&[], Ok(None)).text(),
            "(run_code completed with no output)"
        );
        assert_eq!(
            outcome(&[], Ok(Some(json!("")))).text(),
            "(run_code completed with no output)"
        );
        assert_eq!(outcome(&["a", "b"], Ok(None)).text(), "a\nb");
        assert_eq!(
            outcome(&[], Ok(Some(json!("raw\ntext")))).text(),
            "raw\ntext"
        );
        assert_eq!(
            outcome(&["x"], Ok(Some(json!({"a": [1]})))).text(),
            "x\n{\n  \"a\": [\n    1\n  ]\n}"
        );
        assert_eq!(outcome(&[], Ok(Some(json!(null)))).text(), "null");
    }

    #[test]
    fn failure_text_names_the_kind_and_keeps_the_logs() {
        let failure = |kind, message: &str| {
            Err(RunFailure {
                kind,
                message: message.to_owned(),
            })
        };
        assert_eq!(
            outcome(
                &[],
                failure(FailureKind::Timeout, "the program ran longer than 10 ms")
            )
            .text(),
            "code run failed (timeout): the program ran longer than 10 ms"
        );
        assert_eq!(
            outcome(
                &["one", "two"],
                failure(FailureKind::Limit, "output over 5 bytes")
            )
            .text(),
            "code run failed (limit): output over 5 bytes\nCaptured output:\none\ntwo"
        );
    }
}
