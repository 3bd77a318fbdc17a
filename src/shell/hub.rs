//! The shell's side of many client connections (`acp-journal serve`): the network layer opens a
//! [`Connection`] per client, sends its lines in, and reads the lines for it from its
//! [`Outbox`]; the main loop reads [`HubEvent`]s and writes each connection's lines into a queue
//! that never blocks the loop.
//!
//! Bounds: the events of all connections share one channel of [`EVENTS`] (a connection whose
//! lines the core does not take is not read: backpressure to its socket); each connection's
//! outbox holds at most `limit` bytes, and a connection past it (a client that stopped reading)
//! is dropped: its outbox ends and the core hears it ended. The agent is never slowed by a
//! client.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use bytes::Bytes;
use tokio::sync::mpsc;

use crate::proto::ConnId;

/// Capacity of the channel of all connections' events.
const EVENTS: usize = 256;

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
        let out = ConnOut {
            tx,
            queued: queued.clone(),
            limit: self.limit,
        };
        self.events.send(HubEvent::Opened(id, out)).await.ok()?;
        let connection = Connection {
            id,
            events: self.events.clone(),
        };
        Some((connection, Outbox { rx, queued }))
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
}

impl Outbox {
    /// The next line; `None` when the hub dropped the connection (or is gone).
    pub async fn recv(&mut self) -> Option<Bytes> {
        let line = self.rx.recv().await?;
        self.queued.fetch_sub(line.len(), Ordering::Relaxed);
        Some(line)
    }
}

/// The main loop's handle on one connection's outbox.
#[derive(Debug)]
pub struct ConnOut {
    tx: mpsc::UnboundedSender<Bytes>,
    queued: Arc<AtomicUsize>,
    limit: usize,
}

/// The connections' outboxes, as the main loop writes them.
#[derive(Default)]
pub(super) struct Outboxes {
    open: HashMap<ConnId, ConnOut>,
    /// Connections dropped for a full outbox (or gone), for the core to hear of.
    dropped: Vec<ConnId>,
}

impl Outboxes {
    pub(super) fn opened(&mut self, conn: ConnId, out: ConnOut) {
        self.open.insert(conn, out);
    }

    /// The connection ended: true when it was open (the core has not heard of its end).
    pub(super) fn closed(&mut self, conn: ConnId) -> bool {
        self.open.remove(&conn).is_some()
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

    /// Connections dropped since the last call.
    pub(super) fn take_dropped(&mut self) -> Vec<ConnId> {
        std::mem::take(&mut self.dropped)
    }

    /// Drop every connection (the host is closing).
    pub(super) fn close_all(&mut self) {
        self.open.clear();
    }
}
