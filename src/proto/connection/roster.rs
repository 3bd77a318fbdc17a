//! The client connections themselves: which came and have not ended, and what each declared in
//! its `initialize`. How each takes part in a session is the session's
//! ([`super::super::membership::Membership`]).

use serde_json::{Value, json};

use super::super::sessions::SessionTable;
use super::super::vocab::{ConnId, HashMap, SessionId};
use super::client_view::ClientView;

/// The connections the core has seen.
#[derive(Debug, Default)]
pub(super) struct Roster {
    /// Connections that came and have not ended, in the order they came.
    live: Vec<ConnId>,
    /// What each connection declared in its `initialize`.
    views: HashMap<ConnId, ClientView>,
}

impl Roster {
    /// A line from connection `conn`: true the first time it is seen.
    pub(super) fn arrive(&mut self, conn: ConnId) -> bool {
        if self.live.contains(&conn) {
            return false;
        }
        self.live.push(conn);
        true
    }

    /// Connection `conn` ended: true when no connection is left.
    pub(super) fn end(&mut self, conn: ConnId) -> bool {
        self.live.retain(|c| *c != conn);
        self.views.remove(&conn);
        self.live.is_empty()
    }

    /// The connections that came and have not ended, in the order they came.
    pub(super) fn live(&self) -> &[ConnId] {
        &self.live
    }

    /// True while connection `conn` has not ended.
    pub(super) fn is_live(&self, conn: ConnId) -> bool {
        self.live.contains(&conn)
    }

    /// Connection `conn` declared `view` in its `initialize`.
    pub(super) fn declare(&mut self, conn: ConnId, view: ClientView) {
        self.views.insert(conn, view);
    }

    /// What connection `conn` declared in its `initialize`.
    pub(super) fn view(&self, conn: ConnId) -> Option<&ClientView> {
        self.views.get(&conn)
    }

    /// The live connections attached to session `s`.
    pub(super) fn attached_live(&self, sessions: &SessionTable, s: &str) -> Vec<ConnId> {
        let attached = sessions.get(s).map_or(&[][..], |x| x.members().attached());
        attached
            .iter()
            .copied()
            .filter(|c| self.live.contains(c))
            .collect()
    }

    /// The live connections attached to session `s` other than `conn`.
    pub(super) fn others_attached(
        &self,
        sessions: &SessionTable,
        s: &str,
        conn: ConnId,
    ) -> Vec<ConnId> {
        let mut others = self.attached_live(sessions, s);
        others.retain(|c| *c != conn);
        others
    }

    /// The live connections attached to session `s` that do not observe it.
    pub(super) fn controllers(&self, sessions: &SessionTable, s: &str) -> Vec<ConnId> {
        self.attached_live(sessions, s)
            .into_iter()
            .filter(|c| !sessions.get(s).is_some_and(|x| x.members().observes(*c)))
            .collect()
    }

    /// Why a prompt of `conn` in session `s` is refused: it observes the session, or another
    /// connection's turn runs there (prompts are not queued: see docs/SERVING.md).
    pub(super) fn prompt_refused(
        &self,
        conn: ConnId,
        s: &SessionId,
        sessions: &SessionTable,
    ) -> Option<&'static str> {
        let session = sessions.get(s);
        if session.is_some_and(|x| x.members().observes(conn)) {
            return Some("this connection observes the session: observers cannot prompt");
        }
        // The turn runs on the agent whether or not its connection is still there.
        match session.and_then(|x| x.prompter()) {
            Some(turn) if turn.conn != conn => Some(
                "session busy: a turn another client started is running; cancel it (session/cancel) or wait for it to end",
            ),
            _ => None,
        }
    }

    /// The draft's `connectedClients` of session `s` for connection `conn`: the other live
    /// connections that declared who they are, with their role in the session.
    pub(super) fn connected_clients(
        &self,
        conn: ConnId,
        s: &SessionId,
        sessions: &SessionTable,
    ) -> Vec<Value> {
        let session = sessions.get(s);
        self.live
            .iter()
            .filter(|c| **c != conn)
            .filter_map(|c| {
                let view = self.views.get(c)?;
                let observer = session.is_some_and(|x| x.members().observes(*c));
                Some(json!({"name": view.name, "version": view.version, "role": role(observer)}))
            })
            .collect()
    }
}

/// The draft's name of a connection's role in a session.
pub(super) fn role(observer: bool) -> &'static str {
    if observer { "observer" } else { "controller" }
}
