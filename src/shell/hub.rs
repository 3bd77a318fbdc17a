//! The shell's side of many client connections (`acp-journal serve`): the network layer opens a
//! [`Connection`] per client, sends its lines in, and reads the lines for it from its
//! [`Outbox`]; the main loop reads [`HubEvent`]s and writes each connection's lines into a queue
//! that never blocks the loop.
//!
//! Bounds: the events of all connections share one channel of [`EVENTS`] (a connection whose
//! lines the core does not take is not read: backpressure to its socket). For lines out, a
//! connection whose outbox holds more than [`SOFT_LIMIT`] makes the loop stop reading the agent
//! for a moment ([`Outboxes::full`]: a burst is paced to the clients that read it, as a pipe
//! would); one that stays past it for [`STALL`] (a client that stopped reading), or passes its
//! hard `limit`, is dropped: its outbox ends and the core hears it ended. So a client slows the
//! agent for [`STALL`] at most, once.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{Notify, mpsc};

use crate::proto::ConnId;

/// Capacity of the channel of all connections' events.
const EVENTS: usize = 256;

/// Bytes queued for a connection past which the agent is not read until it catches up.
pub const SOFT_LIMIT: usize = 1 << 20;

/// How long a connection may stay past [`SOFT_LIMIT`] before it is dropped.
pub const STALL: Duration = Duration::from_secs(2);

/// What the network layer tells the main loop.
#[derive(Debug)]
pub enum HubEvent {
    /// A connection opened; its lines go to `out`.
    Opened(ConnId, ConnOut),
    /// A whole line (one JSON-RPC message) from a connection.
    Line(ConnId, Bytes),
    /// A connection ended.
    Closed(ConnId),
}

/// The network layer's handle on the hub: opens connections.
#[derive(Clone)]
pub struct HubLink {
    events: mpsc::Sender<HubEvent>,
    next: Arc<AtomicU32>,
    limit: usize,
}

/// The main loop's end: the events of every connection.
pub struct Hub {
    events: mpsc::Receiver<HubEvent>,
}

/// A hub of connections whose outboxes hold at most `limit` bytes each.
pub fn hub(limit: usize) -> (HubLink, Hub) {
    let (tx, rx) = mpsc::channel(EVENTS);
    let link = HubLink {
        events: tx,
        // Connection 0 is the stdio proxy's editor; a host's connections are all renumbered.
        next: Arc::new(AtomicU32::new(1)),
        limit,
    };
    (link, Hub { events: rx })
}

impl HubLink {
    /// Open a connection; `None` once the main loop is gone.
    pub async fn open(&self) -> Option<(Connection, Outbox)> {
        let id = ConnId(self.next.fetch_add(1, Ordering::Relaxed));
        let (tx, rx) = mpsc::unbounded_channel();
        let queued = Arc::new(AtomicUsize::new(0));
        let ended = Arc::new(Notify::new());
        let out = ConnOut {
            tx,
            queued: queued.clone(),
            limit: self.limit,
            behind_since: None,
            ended: ended.clone(),
        };
        self.events.send(HubEvent::Opened(id, out)).await.ok()?;
        let connection = Connection {
            id,
            events: self.events.clone(),
        };
        Some((connection, Outbox { rx, queued, ended }))
    }
}

impl Hub {
    /// The next event; `None` once every [`HubLink`] and [`Connection`] is dropped.
    pub async fn next(&mut self) -> Option<HubEvent> {
        self.events.recv().await
    }
}

/// A client connection as the network layer holds it. Dropping it ends the connection.
#[derive(Debug)]
pub struct Connection {
    id: ConnId,
    events: mpsc::Sender<HubEvent>,
}

impl Connection {
    /// Its number.
    pub fn id(&self) -> ConnId {
        self.id
    }

    /// A line from the client (waits while the core takes no lines); false once the main loop
    /// is gone.
    pub async fn send(&self, line: Bytes) -> bool {
        self.events
            .send(HubEvent::Line(self.id, line))
            .await
            .is_ok()
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        // After its lines, in the same channel; from a task, since the channel may be full.
        let (events, id) = (self.events.clone(), self.id);
        if let Err(mpsc::error::TrySendError::Full(event)) =
            self.events.try_send(HubEvent::Closed(id))
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(async move { events.send(event).await });
        }
    }
}

/// The lines for one connection, as the network layer reads them.
#[derive(Debug)]
pub struct Outbox {
    rx: mpsc::UnboundedReceiver<Bytes>,
    queued: Arc<AtomicUsize>,
    /// Told when the hub drops the connection.
    ended: Arc<Notify>,
}

impl Outbox {
    /// The next line; `None` when the hub dropped the connection (or is gone).
    pub async fn recv(&mut self) -> Option<Bytes> {
        let line = self.rx.recv().await?;
        self.queued.fetch_sub(line.len(), Ordering::Relaxed);
        Some(line)
    }

    /// The next line if one is queued now (an ended outbox shows at the next [`Outbox::recv`]).
    pub fn ready(&mut self) -> Option<Bytes> {
        let line = self.rx.try_recv().ok()?;
        self.queued.fetch_sub(line.len(), Ordering::Relaxed);
        Some(line)
    }

    /// Resolves once the hub has dropped the connection (lines queued before may still be read):
    /// for a reader that is not taking lines and would not see the end in [`Outbox::recv`].
    pub fn ended(&self) -> impl Future<Output = ()> + use<> {
        let ended = self.ended.clone();
        async move { ended.notified().await }
    }
}

/// The main loop's handle on one connection's outbox.
#[derive(Debug)]
pub struct ConnOut {
    tx: mpsc::UnboundedSender<Bytes>,
    queued: Arc<AtomicUsize>,
    limit: usize,
    /// Since when it has been past [`SOFT_LIMIT`].
    behind_since: Option<tokio::time::Instant>,
    /// Told when this is dropped (the connection with it).
    ended: Arc<Notify>,
}

impl Drop for ConnOut {
    fn drop(&mut self) {
        self.ended.notify_one();
    }
}

/// The connections' outboxes, as the main loop writes them.
#[derive(Default)]
pub(super) struct Outboxes {
    open: HashMap<ConnId, ConnOut>,
    /// Connections dropped for a full outbox (or gone), for the core to hear of.
    dropped: Vec<ConnId>,
    /// A connection is past [`SOFT_LIMIT`] (as of the loop's last check).
    pub(super) behind: bool,
}

impl Outboxes {
    pub(super) fn opened(&mut self, conn: ConnId, out: ConnOut) {
        self.open.insert(conn, out);
    }

    /// The connection ended: true when it was open (the core has not heard of its end).
    pub(super) fn closed(&mut self, conn: ConnId) -> bool {
        self.open.remove(&conn).is_some()
    }

    /// End `conn` (the core asks it): its outbox closes, and the core hears it ended.
    pub(super) fn end(&mut self, conn: ConnId) {
        if self.open.remove(&conn).is_some() {
            self.dropped.push(conn);
        }
    }

    /// Queue `line` for `conn`; a connection whose outbox would pass its limit is dropped.
    pub(super) fn push(&mut self, conn: ConnId, line: Bytes) {
        let Some(out) = self.open.get(&conn) else {
            return;
        };
        let queued = out.queued.fetch_add(line.len(), Ordering::Relaxed) + line.len();
        if queued > out.limit || out.tx.send(line).is_err() {
            if queued > out.limit {
                tracing::warn!(
                    "client connection {} does not read what it is sent ({queued} bytes queued): dropping it",
                    conn.0
                );
            }
            self.open.remove(&conn);
            self.dropped.push(conn);
        }
    }

    /// True while a connection is past [`SOFT_LIMIT`]: the agent waits for it. One that has
    /// been past it for [`STALL`] is dropped here.
    pub(super) fn full(&mut self, now: tokio::time::Instant) -> bool {
        let mut full = false;
        let mut stalled = Vec::new();
        for (conn, out) in &mut self.open {
            let queued = out.queued.load(Ordering::Relaxed);
            if queued <= SOFT_LIMIT {
                out.behind_since = None;
                continue;
            }
            let since = *out.behind_since.get_or_insert(now);
            if now.duration_since(since) >= STALL {
                tracing::warn!(
                    "client connection {} does not read what it is sent ({queued} bytes queued for {} s): dropping it",
                    conn.0,
                    STALL.as_secs()
                );
                stalled.push(*conn);
            } else {
                full = true;
            }
        }
        for conn in stalled {
            self.open.remove(&conn);
            self.dropped.push(conn);
        }
        full
    }

    /// Connections dropped since the last call.
    pub(super) fn take_dropped(&mut self) -> Vec<ConnId> {
        std::mem::take(&mut self.dropped)
    }

    /// Drop every connection (the host is closing).
    pub(super) fn close_all(&mut self) {
        self.open.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(limit: usize) -> (Outboxes, Outbox) {
        let (link, _hub) = hub(limit);
        let (tx, rx) = mpsc::unbounded_channel();
        let queued = Arc::new(AtomicUsize::new(0));
        let ended = Arc::new(Notify::new());
        let mut outboxes = Outboxes::default();
        let out = ConnOut {
            tx,
            queued: queued.clone(),
            limit: link.limit,
            behind_since: None,
            ended: ended.clone(),
        };
        outboxes.opened(ConnId(1), out);
        (outboxes, Outbox { rx, queued, ended })
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_behind_pauses_the_agent_and_one_that_stays_behind_is_dropped() {
        let (mut outboxes, mut outbox) = one(64 << 20);
        let t0 = tokio::time::Instant::now();
        let line = Bytes::from(vec![b'x'; 64 << 10]);
        for _ in 0..20 {
            outboxes.push(ConnId(1), line.clone());
        }
        assert!(outboxes.full(t0), "past the soft limit: the agent waits");
        // It reads: the agent goes on.
        while outbox.ready().is_some() {}
        assert!(!outboxes.full(t0 + STALL / 2));
        // It stops reading: dropped once behind for STALL.
        for _ in 0..20 {
            outboxes.push(ConnId(1), line.clone());
        }
        assert!(outboxes.full(t0 + STALL));
        assert!(outboxes.take_dropped().is_empty());
        assert!(
            !outboxes.full(t0 + STALL * 2),
            "dropped: it holds nothing up"
        );
        assert_eq!(outboxes.take_dropped(), [ConnId(1)]);
        tokio::time::timeout(Duration::from_millis(1), outbox.ended())
            .await
            .expect("a reader that takes nothing hears of it");
        assert_eq!(
            outbox.recv().await.map(|l| l.len()),
            Some(line.len()),
            "what was queued"
        );
        while outbox.ready().is_some() {}
        assert_eq!(outbox.recv().await, None, "then its end");
    }

    #[test]
    fn past_the_hard_limit_a_connection_is_dropped_at_once() {
        let (mut outboxes, _outbox) = one(1000);
        outboxes.push(ConnId(1), Bytes::from(vec![b'x'; 600]));
        assert!(outboxes.take_dropped().is_empty());
        outboxes.push(ConnId(1), Bytes::from(vec![b'x'; 600]));
        assert_eq!(outboxes.take_dropped(), [ConnId(1)]);
        assert!(
            !outboxes.closed(ConnId(1)),
            "the core has heard of it already"
        );
    }
}
