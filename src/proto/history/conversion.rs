//! What replaying a session in the other version of ACP than the one it was recorded in keeps
//! ([`Conversion`]).

use serde_json::Value;

use super::super::vocab::HashSet;
use super::made_up_ids::MadeUpIds;

/// What replaying a session in the other version of ACP than the one it was recorded in keeps
/// (and the `messageId`s made up for messages recorded without one, in either).
#[derive(Default)]
pub(super) struct Conversion {
    /// v1, for a session recorded under v2: the tool calls replayed so far (v2 has no
    /// `tool_call`: its first `tool_call_update` of an ID becomes one).
    pub(super) tools_seen: HashSet<String>,
    /// v2: the last recorded prompt (the `messageId` made up for it, and its content),
    /// replayed as a `user_message` under the `messageId` of the agent's echo of it when one
    /// follows.
    pub(super) prompt: Option<(String, Value)>,
    /// v2, for a session recorded under v1: the session and chunk kind being replayed and
    /// the `messageId` given to its run of chunks.
    pub(super) message: Option<(String, String, String)>,
    /// The `messageId`s made up for messages recorded without one.
    pub(super) ids: MadeUpIds,
}

impl Conversion {
    /// The `messageId` of a chunk of `kind` in `session` recorded at `seq` without one: that of
    /// the run of chunks it goes on, else a new one, its run's.
    pub(super) fn chunk_id(&mut self, session: &str, kind: &str, seq: u64) -> String {
        let id = match &self.message {
            Some((s, k, id)) if s == session && k == kind => id.clone(),
            _ => self.ids.made(kind.trim_end_matches("_chunk"), seq),
        };
        self.message = Some((session.to_string(), kind.to_string(), id.clone()));
        id
    }
}
