//! A session's members: the client connections attached to it (that sent a line naming it,
//! or were answered with its creation), in the order they came, and how those that joined by
//! the multi-client draft's `session/attach` take part: they take the draft's own updates, and
//! an observer may not prompt.

use super::vocab::ConnId;

/// The connections attached to one session.
#[derive(Debug, Default)]
pub(super) struct Membership {
    attached: Vec<ConnId>,
    /// The connections that joined by `session/attach`, each with whether it observes.
    drafted: Vec<(ConnId, bool)>,
}

impl Membership {
    /// Connection `conn` uses the session.
    pub(super) fn attach(&mut self, conn: ConnId) {
        if !self.attached.contains(&conn) {
            self.attached.push(conn);
        }
    }

    /// The connections attached, in the order they came.
    pub(super) fn attached(&self) -> &[ConnId] {
        &self.attached
    }

    /// Connection `conn` left the session (or ended).
    pub(super) fn detach(&mut self, conn: ConnId) {
        self.attached.retain(|c| *c != conn);
        self.drafted.retain(|(c, _)| *c != conn);
    }

    /// Connection `conn` joined by `session/attach` (`observer`: in that role).
    pub(super) fn join_draft(&mut self, conn: ConnId, observer: bool) {
        self.drafted.retain(|(c, _)| *c != conn);
        self.drafted.push((conn, observer));
    }

    /// True when connection `conn` takes the draft's own updates of the session.
    pub(super) fn is_drafted(&self, conn: ConnId) -> bool {
        self.drafted.iter().any(|(c, _)| *c == conn)
    }

    /// True when connection `conn` observes the session.
    pub(super) fn observes(&self, conn: ConnId) -> bool {
        self.drafted
            .iter()
            .any(|(c, observer)| *c == conn && *observer)
    }
}
