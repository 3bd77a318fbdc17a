//! ACP-aware comparison of a recorded message with a live one.
//!
//! Volatile fields never count as a difference: JSON-RPC ids, session IDs, `cwd`, `_meta`, and
//! timestamps. A recorded string that was redacted (`[REDACTED]`, whole or inside a longer
//! string) matches whatever the live peer sent in its place.

use std::fmt;

use serde_json::Value;

use crate::redact::REDACTED;

/// Object keys whose values are volatile: different in every run by design.
const VOLATILE: &[&str] = &[
    "_meta",
    "id",
    "jsonrpc",
    "sessionId",
    "cwd",
    "timestamp",
    "createdAt",
    "updatedAt",
    "startedAt",
    "endedAt",
];

/// Longest value text shown in a report.
const SHOWN: usize = 120;

/// One difference between a recorded value and a live one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Difference {
    /// Where, as a path like `prompt[0].text` (empty for the whole value).
    pub path: String,
    /// The recorded value (compact JSON, shortened), or `(absent)`.
    pub recorded: String,
    /// The live value, the same way.
    pub live: String,
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = if self.path.is_empty() {
            "(whole value)"
        } else {
            &self.path
        };
        write!(f, "{path}: recorded {}, live {}", self.recorded, self.live)
    }
}

/// Show a value for a report: compact JSON, cut at a readable length.
pub fn shown(value: Option<&Value>) -> String {
    let Some(value) = value else {
        return "(absent)".to_string();
    };
    let text = value.to_string();
    if text.chars().count() <= SHOWN {
        return text;
    }
    let cut: String = text.chars().take(SHOWN).collect();
    format!("{cut}…")
}

/// Whether two texts are the same but for redaction (on either side).
pub fn same_text(a: &str, b: &str) -> bool {
    redacted_matches(a, b) || redacted_matches(b, a)
}

/// The differences between `recorded` and `live`, ignoring volatile fields.
pub fn compare(recorded: &Value, live: &Value) -> Vec<Difference> {
    let mut out = Vec::new();
    walk(String::new(), Some(recorded), Some(live), &mut out);
    out
}

fn walk(path: String, recorded: Option<&Value>, live: Option<&Value>, out: &mut Vec<Difference>) {
    match (recorded, live) {
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            let keys = a.keys().chain(b.keys().filter(|k| !a.contains_key(*k)));
            for key in keys {
                if VOLATILE.contains(&key.as_str()) {
                    continue;
                }
                let sub = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                walk(sub, a.get(key), b.get(key), out);
            }
        }
        (Some(Value::Array(a)), Some(Value::Array(b))) => {
            for i in 0..a.len().max(b.len()) {
                walk(format!("{path}[{i}]"), a.get(i), b.get(i), out);
            }
        }
        (Some(Value::String(a)), Some(Value::String(b))) if redacted_matches(a, b) => {}
        (a, b) if a == b => {}
        (a, b) => out.push(Difference {
            path,
            recorded: shown(a),
            live: shown(b),
        }),
    }
}

/// Whether live string `b` fits recorded string `a`, where each `[REDACTED]` in `a` stands for
/// any text.
pub fn redacted_matches(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    let mut parts = a.split(REDACTED);
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = b.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    if parts.is_empty() {
        return false;
    }
    for (i, part) in parts.iter().enumerate() {
        if i + 1 == parts.len() {
            return rest.ends_with(part);
        }
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn volatile_fields_are_ignored() {
        let a = json!({"sessionId": "a", "cwd": "/x", "_meta": {"t": 1},
            "prompt": [{"type": "text", "text": "hi"}]});
        let b = json!({"sessionId": "b", "cwd": "/y", "prompt": [{"type": "text", "text": "hi"}]});
        assert!(compare(&a, &b).is_empty());
    }

    #[test]
    fn a_difference_names_the_path_and_both_values() {
        let a = json!({"prompt": [{"type": "text", "text": "hi"}]});
        let b = json!({"prompt": [{"type": "text", "text": "ho"}, {"type": "text", "text": "x"}]});
        let d = compare(&a, &b);
        assert_eq!(d.len(), 2);
        assert_eq!(
            d[0].to_string(),
            r#"prompt[0].text: recorded "hi", live "ho""#
        );
        assert_eq!(d[1].recorded, "(absent)");
        assert_eq!(d[1].path, "prompt[1]");
    }

    #[test]
    fn redacted_text_matches_any_secret() {
        assert!(redacted_matches("[REDACTED]", "ghp_abc"));
        assert!(redacted_matches("key [REDACTED] end", "key sk-123 end"));
        assert!(redacted_matches("a [REDACTED] b [REDACTED]", "a x b y"));
        assert!(!redacted_matches("key [REDACTED] end", "key sk-123 END"));
        assert!(!redacted_matches("plain", "other"));
        let a = json!({"env": [{"name": "T", "value": "[REDACTED]"}]});
        let b = json!({"env": [{"name": "T", "value": "secret"}]});
        assert!(compare(&a, &b).is_empty());
    }

    #[test]
    fn long_values_are_shortened() {
        let long = Value::String("x".repeat(500));
        assert!(shown(Some(&long)).ends_with('…'));
        assert!(shown(Some(&long)).chars().count() <= SHOWN + 1);
    }
}
