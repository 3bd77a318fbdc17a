//! Request ids the proxy owns: the ids of its own requests to the agent (`"acp-journal:N"`,
//! never one the client has pending), the client ids it renumbers because they collide with
//! one of those while it is pending (`"acp-journal:client:N"`, restored on the way back), and
//! the ids of a restarted agent's requests that collide with a request of the agent before it
//! that the client may still answer (`"acp-journal:agent:N"`, restored on the way back).

use super::pending::Purpose;
use super::vocab::{HashMap, OwnId};
use crate::wire::envelope::RequestId;

/// The proxy's own requests in flight and the ids it renumbered.
#[derive(Debug, Default)]
pub(super) struct OwnIds {
    /// Requests the proxy sent to the agent: id → why.
    ours: HashMap<OwnId, Purpose>,
    next: u64,
    /// Renumbered client ids: sent id → the client's id.
    aliases: HashMap<RequestId, RequestId>,
    /// The same, the other way: the client's id → sent id.
    renumbered: HashMap<RequestId, RequestId>,
    /// Renumbered agent ids: sent id → the agent's id.
    agent_aliases: HashMap<RequestId, RequestId>,
}

impl OwnIds {
    /// A fresh id for a request of the proxy's own, not one `taken` by the client.
    pub(super) fn request(
        &mut self,
        purpose: Purpose,
        taken: impl Fn(&RequestId) -> bool,
    ) -> OwnId {
        let id = loop {
            let id = RequestId::String(format!("acp-journal:{}", self.next));
            self.next += 1;
            if !taken(&id) {
                break OwnId(id);
            }
        };
        self.ours.insert(id.clone(), purpose);
        id
    }

    /// The agent answered request `id`: why the proxy sent it, if it was the proxy's own.
    pub(super) fn answered(&mut self, id: &RequestId) -> Option<Purpose> {
        self.ours.remove(id)
    }

    /// The id to send an agent request under (it collides with a dead agent's request).
    pub(super) fn renumber_agent(&mut self, agent_id: &RequestId) -> RequestId {
        let alias = RequestId::String(format!("acp-journal:agent:{}", self.next));
        self.next += 1;
        self.agent_aliases.insert(alias.clone(), agent_id.clone());
        alias
    }

    /// The client answered a renumbered agent request: the agent's id, to restore.
    pub(super) fn restore_agent(&mut self, id: &RequestId) -> Option<RequestId> {
        self.agent_aliases.remove(id)
    }

    /// The id to send a client request under when it collides with one of ours.
    pub(super) fn renumber(&mut self, client_id: &RequestId) -> Option<RequestId> {
        if !self.ours.contains_key(client_id) {
            return None;
        }
        let alias = RequestId::String(format!("acp-journal:client:{}", self.next));
        self.next += 1;
        self.aliases.insert(alias.clone(), client_id.clone());
        self.renumbered.insert(client_id.clone(), alias.clone());
        Some(alias)
    }

    /// The id a client request was sent under, when renumbered (for `$/cancel_request`).
    pub(super) fn sent_as(&self, client_id: &RequestId) -> Option<&RequestId> {
        self.renumbered.get(client_id)
    }

    /// The client's own id for a response the agent sent to `id`.
    pub(super) fn client_id(&self, id: &RequestId) -> RequestId {
        self.aliases.get(id).cloned().unwrap_or_else(|| id.clone())
    }

    /// The response to a renumbered request came: the client's id, to restore.
    pub(super) fn restore(&mut self, id: &RequestId) -> Option<RequestId> {
        let original = self.aliases.remove(id)?;
        self.renumbered.remove(&original);
        Some(original)
    }

    /// The agent is gone: nothing it was asked will be answered, nothing it asked matters.
    pub(super) fn forget_agent(&mut self) {
        self.ours.clear();
        self.aliases.clear();
        self.renumbered.clear();
        self.agent_aliases.clear();
    }
}
