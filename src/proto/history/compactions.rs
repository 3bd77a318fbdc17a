//! A replay's compactions: their final form, learnt by the first pass from every
//! `compaction_update` and `compaction_summary_chunk` of an ID, and materialized once, at the
//! first place the second pass meets one of them.

use bytes::Bytes;
use serde_json::{Value, json};

use super::super::vocab::{HashMap, HashSet};
use super::lines::notification;

/// The compactions of a replay.
#[derive(Default)]
pub(super) struct Compactions {
    /// The final form of each, by compaction ID.
    known: HashMap<String, Value>,
    /// The compaction IDs replayed already.
    emitted: HashSet<String>,
}

impl Compactions {
    /// First pass: a compaction `update` (one naming a `compactionId`) merged into its form.
    pub(super) fn observe(&mut self, update: &Value) {
        let Some(id) = update["compactionId"].as_str() else {
            return;
        };
        let entry = self
            .known
            .entry(id.to_string())
            .or_insert_with(|| json!({"sessionUpdate": "compaction_update", "compactionId": id}));
        match update["sessionUpdate"].as_str() {
            Some("compaction_update") => {
                for (k, v) in update.as_object().into_iter().flatten() {
                    if k != "sessionUpdate" {
                        entry[k] = v.clone();
                    }
                }
            }
            Some("compaction_summary_chunk") => {
                let summary = entry["summary"].as_array().cloned().unwrap_or_default();
                let mut summary = summary;
                summary.push(update["content"].clone());
                entry["summary"] = Value::Array(summary);
            }
            _ => {}
        }
    }

    /// Second pass: the materialized form of `update`'s compaction, at its first place (once),
    /// in `session`.
    pub(super) fn emit(&mut self, session: &str, update: &Value, out: &mut Vec<Bytes>) {
        if let Some(id) = update["compactionId"].as_str()
            && self.emitted.insert(id.to_string())
            && let Some(done) = self.known.get(id).cloned()
        {
            out.push(notification(session, done));
        }
    }
}
