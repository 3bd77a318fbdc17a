//! What the process tells the index's task: the fleet and the shipper send, [`super::indexer`]
//! receives (its own module so that the senders need nothing of the task).

use crate::fleet::layout::SessionKey;
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;

/// What the process tells the index.
#[derive(Debug)]
pub enum IndexerMessage {
    /// A session segment of this process was created (absolute path).
    Follow(PathBuf),
    /// The sessions erased from the store (their rows are never written), as last listed.
    Erased(Arc<HashSet<SessionKey>>),
    /// Commit what can be committed until the deadline, then answer and stop.
    Finish(Duration, oneshot::Sender<()>),
}
