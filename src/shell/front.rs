//! The clients' side of the proxy ([`Front`]): one editor on a pipe ([`EDITOR`], the stdio
//! proxy) or a host's network connections; where their lines come from ([`FrontInput`], read as
//! [`Input`]) and where lines for them go ([`FrontOutput`]).

use bytes::Bytes;

use super::hub;
use super::pipes::{self, Client, Output};
use crate::proto::{ConnId, Peer};

/// The editor on stdin/stdout: the stdio proxy's one client connection.
pub(super) const EDITOR: Peer = Peer::Client(ConnId::FIRST);

/// The clients' side of the proxy.
pub enum Front {
    /// One editor on a pipe (the stdio proxy): its end is the client's end.
    Editor(Client),
    /// The network's connections (`acp-journal serve`): they come and go while the agent and
    /// its sessions live on, until the hub closes or a signal asks the host to stop.
    Hub(hub::Hub),
}

/// Where client lines come from.
pub(super) enum FrontInput {
    Editor(pipes::ClientInput),
    Hub(hub::Hub),
}

/// What the clients' side said.
pub(super) enum Input {
    Lines(ConnId, Vec<Bytes>),
    Opened(ConnId, hub::ConnOut),
    Ended(ConnId),
    /// No client can come any more (the editor's end, the hub closed).
    Over,
}

impl FrontInput {
    pub(super) async fn read(&mut self) -> Input {
        match self {
            FrontInput::Editor(input) => match input.read().await {
                Some(lines) => Input::Lines(ConnId::FIRST, lines),
                None => Input::Over,
            },
            FrontInput::Hub(hub) => match hub.next().await {
                Some(hub::HubEvent::Line(conn, line)) => Input::Lines(conn, vec![line]),
                Some(hub::HubEvent::Opened(conn, out)) => Input::Opened(conn, out),
                Some(hub::HubEvent::Closed(conn)) => Input::Ended(conn),
                None => Input::Over,
            },
        }
    }
}

/// Where lines for clients go.
pub(super) enum FrontOutput {
    Editor(Output),
    Hub(hub::Outboxes),
}

impl FrontOutput {
    pub(super) fn push(&mut self, conn: ConnId, line: Bytes) {
        match self {
            FrontOutput::Editor(out) => out.push(line),
            FrontOutput::Hub(outboxes) => outboxes.push(conn, line),
        }
    }

    pub(super) fn write_now(&mut self) {
        if let FrontOutput::Editor(out) = self {
            out.write_now();
        }
    }

    /// The editor's pipe waits to be writable (a host's outboxes never wait).
    pub(super) fn waiting(&self) -> bool {
        matches!(self, FrontOutput::Editor(out) if out.waiting())
    }

    pub(super) async fn writable(&mut self) {
        match self {
            FrontOutput::Editor(out) => out.writable().await,
            FrontOutput::Hub(_) => std::future::pending().await,
        }
    }

    /// Too much is queued for the editor, or for a host's connection (which is dropped if it
    /// stays behind: see [`hub`]). Updated by [`FrontOutput::check`].
    pub(super) fn full(&self) -> bool {
        match self {
            FrontOutput::Editor(out) => out.full(),
            FrontOutput::Hub(outboxes) => outboxes.behind,
        }
    }

    /// The editor reads nothing of [`pipes::STALLED_LIMIT`] bytes queued for it: its own lines
    /// wait, as behind a full pipe (a host's connections are dropped instead: see [`hub`]).
    pub(super) fn stalled(&self) -> bool {
        matches!(self, FrontOutput::Editor(out) if out.stalled())
    }

    /// For a host: whether a connection is behind (and drop one that stays behind).
    pub(super) fn check(&mut self) {
        if let FrontOutput::Hub(outboxes) = self {
            outboxes.behind = outboxes.full(tokio::time::Instant::now());
        }
    }
}
