//! A live HTTP connection as the request handlers and the server's table reach it
//! ([`Handle`]), what they tell its dispatcher ([`Control`]), and the dispatcher's end of one
//! event stream ([`Stream`]).

use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

use crate::shell::hub::Connection;

/// The dispatcher's end of one event stream: frames, each with its share of the stream's
/// [`SOFT_LIMIT`](crate::shell::hub::SOFT_LIMIT) bytes, given back once hyper takes it.
#[derive(Clone)]
pub(super) struct Stream {
    pub(super) frames: mpsc::Sender<(Bytes, Option<OwnedSemaphorePermit>)>,
    pub(super) bytes: Arc<Semaphore>,
}

/// A live HTTP connection, as request handlers reach it.
#[derive(Clone)]
pub(in crate::net) struct Handle {
    pub(super) connection: Arc<Connection>,
    pub(super) control: mpsc::UnboundedSender<Control>,
}

/// What request handlers tell a connection's dispatcher.
pub(super) enum Control {
    /// The client opened a stream (`None`: the connection's).
    Stream(Option<String>, Stream),
    /// The client sent request `id` (its JSON) for `session`: the answer goes on its stream.
    Request(String, String),
    /// `DELETE`.
    End,
}
