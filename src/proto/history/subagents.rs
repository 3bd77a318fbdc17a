//! A replay's child sessions (subagents): the ones the history announced, in which form, and
//! the parent's view of them for a client that does not know that form: a tool call of the
//! parent standing for each child ([`Children::collapse`]), so such a client sees that a
//! subagent ran, what it was for, how it ended and what it answered, and nothing of its own
//! timeline.

use serde_json::{Value, json};

use super::super::vocab::{ClientSupport, HashMap, HashSet};
use crate::acp::subagents::{self, Form};
use crate::acp::updates::Need;

/// The most children a replay keeps (as the core's tree: [`super::super::tree::TREE_LIMIT`]).
const CHILD_LIMIT: usize = super::super::tree::TREE_LIMIT;

/// What a replay knows of one child.
struct Child {
    form: Form,
    parent: String,
    /// Its announcements and state updates merged (the fields each set), for announcing it
    /// again where a tail replay starts.
    latest: Value,
    /// Its work is over (the last state said so).
    ended: bool,
}

/// The child sessions a replay met, in the order they were announced.
#[derive(Default)]
pub(super) struct Children {
    known: HashMap<String, Child>,
    order: Vec<String>,
    /// The children whose standing tool call the client was sent (`tool_call` first, then
    /// `tool_call_update`s).
    collapsed: HashSet<String>,
}

/// The `toolCallId` of the tool call standing for `child` in its parent's view.
pub(super) fn tool_call_id(child: &str) -> String {
    format!("acpj-subagent-{child}")
}

impl Children {
    /// `update`, a recorded update of `session` (the replay's own session, `root`, or one of
    /// its children): a child it announces joins; one known is updated.
    pub(super) fn learn(&mut self, root: &str, session: &str, update: &Value) {
        let Some(u) = subagents::child_update(update) else {
            return;
        };
        if session != root && !self.known.contains_key(session) {
            return;
        }
        if let Some(child) = self.known.get_mut(u.child) {
            merge(&mut child.latest, update);
            if let Some(state) = u.state {
                child.ended = state.is_end();
            }
            return;
        }
        if u.child == root || self.known.len() >= CHILD_LIMIT {
            return;
        }
        self.order.push(u.child.to_string());
        self.known.insert(
            u.child.to_string(),
            Child {
                form: u.form,
                parent: session.to_string(),
                latest: update.clone(),
                ended: u.state.is_some_and(|s| s.is_end()),
            },
        );
    }

    /// `s` is a child session the history announced.
    pub(super) fn is_child(&self, s: &str) -> bool {
        self.known.contains_key(s)
    }

    /// The client is shown `child`'s own updates: it knows the form its parent announced it in.
    pub(super) fn shown_to(&self, child: &str, support: ClientSupport) -> bool {
        match self.known.get(child).map(|c| c.form) {
            Some(Form::Rfd) => support.has(Need::Subagents),
            Some(Form::Air) => support.has(Need::AirSubagents),
            None => false,
        }
    }

    /// The parent's view of `update`, recorded on the replay's own session: a child's
    /// announcement or state as the tool call standing for it (a `tool_call` the first time,
    /// then `tool_call_update`s; only upserts for ACP v2), a child's message to its parent as
    /// that call's content. `None` when the parent's view has nothing of it.
    pub(super) fn collapse(&mut self, update: &Value, v2: bool) -> Option<Value> {
        if let Some(u) = subagents::child_update(update) {
            let id = tool_call_id(u.child);
            let first = self.collapsed.insert(u.child.to_string());
            let status = u.state.and_then(|s| s.tool_status());
            let mut call = json!({
                "sessionUpdate": if first && !v2 { "tool_call" } else { "tool_call_update" },
                "toolCallId": id,
            });
            if first {
                call["title"] = json!(u.title.or(u.description).unwrap_or("subagent"));
                call["kind"] = json!("other");
                call["status"] = json!(status.unwrap_or("in_progress"));
                if let Some(about) = u.description.filter(|_| u.title.is_some()) {
                    call["content"] =
                        json!([{"type": "content", "content": {"type": "text", "text": about}}]);
                }
                call["_meta"] = json!({"acpJournal": {"subagent": u.child}});
                return Some(call);
            }
            if let Some(title) = u.title {
                call["title"] = json!(title);
            }
            if let Some(status) = status {
                call["status"] = json!(status);
            }
            return (call.as_object().is_some_and(|c| c.len() > 2)).then_some(call);
        }
        // A child's message to its parent (the parent's incoming view): its answer.
        let sender = update["senderSessionId"].as_str()?;
        if update["sessionUpdate"] != "session_message" || !self.collapsed.contains(sender) {
            return None;
        }
        let content: Vec<Value> = update["content"]
            .as_array()?
            .iter()
            .map(|block| json!({"type": "content", "content": block}))
            .collect();
        Some(json!({
            "sessionUpdate": "tool_call_update",
            "toolCallId": tool_call_id(sender),
            "content": content,
        }))
    }

    /// Where a tail replay starts: each child still at work, announced again (its updates
    /// merged), so the updates that follow name a child the client knows: `(its parent, the
    /// update)` for a client that knows its form, the parent's view (the tool call standing
    /// for it) for another.
    pub(super) fn announce_again(
        &mut self,
        root: &str,
        support: ClientSupport,
    ) -> Vec<(String, Value)> {
        // The standing tool calls are new to the client from here.
        self.collapsed.clear();
        let mut out = Vec::new();
        for i in 0..self.order.len() {
            let id = &self.order[i];
            let child = &self.known[id];
            if child.ended {
                continue;
            }
            let (parent, latest) = (child.parent.clone(), child.latest.clone());
            if self.shown_to(id, support) {
                out.push((parent, latest));
            } else if parent == root
                && let Some(call) = self.collapse(&latest, support.v2)
            {
                out.push((parent, call));
            }
        }
        out
    }

    /// The children, each with the session that announced it, in order.
    pub(super) fn into_tree(self) -> Vec<(String, String)> {
        let mut known = self.known;
        self.order
            .into_iter()
            .filter_map(|id| {
                let parent = known.remove(&id)?.parent;
                Some((id, parent))
            })
            .collect()
    }
}

/// `update`'s fields over `into`'s (a patch: what it omits is kept).
fn merge(into: &mut Value, update: &Value) {
    if let (Some(into), Some(update)) = (into.as_object_mut(), update.as_object()) {
        for (k, v) in update {
            into.insert(k.clone(), v.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn announce(child: &str, state: &str) -> Value {
        json!({"sessionUpdate": "subagent_update", "sessionId": child, "title": "Explore",
            "description": "explorer", "state": {"state": state, "stopReason": "end_turn"}})
    }

    #[test]
    fn the_parents_view_is_one_tool_call_per_child_with_its_state_and_answer() {
        let mut children = Children::default();
        children.learn("S", "S", &announce("C", "running"));
        let call = children.collapse(&announce("C", "running"), false).unwrap();
        assert_eq!(call["sessionUpdate"], "tool_call");
        assert_eq!(call["toolCallId"], "acpj-subagent-C");
        assert_eq!(
            (&call["title"], &call["status"]),
            (&json!("Explore"), &json!("in_progress"))
        );
        assert_eq!(call["content"][0]["content"]["text"], "explorer");
        let reply = json!({"sessionUpdate": "session_message", "messageId": "m",
            "senderSessionId": "C", "recipientSessionId": "S",
            "content": [{"type": "text", "text": "found it"}]});
        let answer = children.collapse(&reply, false).unwrap();
        assert_eq!(answer["sessionUpdate"], "tool_call_update");
        assert_eq!(answer["content"][0]["content"]["text"], "found it");
        let done = children.collapse(&announce("C", "idle"), false).unwrap();
        assert_eq!(done["status"], "completed");
        let outgoing = json!({"sessionUpdate": "session_message", "messageId": "p",
            "senderSessionId": "S", "recipientSessionId": "C", "content": []});
        assert_eq!(children.collapse(&outgoing, false), None);
        assert_eq!(
            children.collapse(
                &json!({"sessionUpdate": "subagent_update", "sessionId": "C"}),
                false
            ),
            None,
            "nothing new"
        );
        assert_eq!(
            children.collapse(&announce("D", "running"), true).unwrap()["sessionUpdate"],
            "tool_call_update",
            "v2 upserts"
        );
    }

    #[test]
    fn a_childs_child_is_known_and_an_unannounced_session_is_not() {
        let mut children = Children::default();
        children.learn("S", "S", &announce("C", "running"));
        children.learn("S", "C", &announce("G", "running"));
        children.learn("S", "X", &announce("Y", "running"));
        children.learn("S", "S", &announce("S", "running"));
        assert!(children.is_child("C") && children.is_child("G"));
        assert!(!children.is_child("Y") && !children.is_child("S"));
        let rfd = ClientSupport {
            subagents: true,
            ..Default::default()
        };
        assert!(children.shown_to("G", rfd));
        assert!(!children.shown_to("G", ClientSupport::default()));
        assert_eq!(
            children.into_tree(),
            [("C".into(), "S".into()), ("G".into(), "C".into())]
        );
    }
}
