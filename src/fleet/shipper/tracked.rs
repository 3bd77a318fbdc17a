//! A file the shipper follows ([`Tracked`]): where it is, what the store holds of it, the lease
//! it is shipped under ([`Leased`]), and what a round asks of the store about it
//! ([`FileRequest`]), within the bounds on a part and on a compaction.

use std::path::PathBuf;
use std::time::Duration;

use crate::fleet::layout::SessionKey;

/// Largest part shipped at once; a bigger backlog goes as several.
pub(super) const MAX_PART: u64 = 8 << 20;
/// Largest file compacted into one object.
pub(super) const MAX_COMPACT: u64 = 64 << 20;
/// A live file with this many parts has them compacted.
pub(super) const COMPACT_AT: usize = 64;
/// A closed file of more parts than this has them compacted into one; a closed file of this
/// many or fewer stays as it is: merging would cost two requests (the object, the deletes) to
/// spare a reader at most three reads, which S3 prices at a twelfth of a write each.
pub(super) const KEPT_AS_SHIPPED: usize = 4;
/// Which lease a file is shipped under.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Leased {
    /// None: the catalog, a connection segment.
    No,
    /// A session segment this process writes: under the session's lease (its key; the session
    /// ID is read from the segment's header).
    Mine(SessionKey),
    /// A session segment a run that is gone left: under the epoch its run took, found in the
    /// store (its key).
    Left(SessionKey),
}

/// A file the shipper follows.
pub(super) struct Tracked {
    /// Absolute local path.
    pub(super) local: PathBuf,
    /// Its name in the store.
    pub(super) file: String,
    /// Bytes known to be in the store from the first on (`None`: ask the store first).
    pub(super) shipped: Option<u64>,
    /// Parts known to be in the store (for compaction).
    pub(super) parts: Vec<(u64, u64)>,
    /// No more bytes will come.
    pub(super) closed: bool,
    /// The earliest the bytes waiting to be shipped may have been written: the start of the
    /// last round that found none waiting (so the lag reported is an upper bound), on the
    /// fleet's clock.
    pub(super) waiting_since: Option<Duration>,
    /// The local file's inode when last seen (a catalog rewritten in place gets a new one).
    pub(super) inode: u64,
    pub(super) leased: Leased,
    /// The epoch the segment is written under in the store (its marker), once known.
    pub(super) epoch: Option<u64>,
    /// Shipped no more: the session is another host's now (its name, when known).
    pub(super) stranded: Option<String>,
    /// The store lacks the segment's epoch marker: written before its next part.
    pub(super) unmarked: bool,
}

impl Tracked {
    /// A file followed from now on: at `local`, named `file` in the store, of which the store
    /// holds `shipped` bytes (`None`: not known yet), shipped under `leased`.
    pub(super) fn new(
        local: PathBuf,
        file: String,
        shipped: Option<u64>,
        leased: Leased,
    ) -> Tracked {
        Tracked {
            local,
            file,
            shipped,
            parts: Vec::new(),
            closed: false,
            waiting_since: None,
            inode: 0,
            leased,
            epoch: None,
            stranded: None,
            unmarked: false,
        }
    }
}

/// What a round asks of the store about one file (one request, or a few).
#[derive(Debug, PartialEq, Eq)]
pub(super) enum FileRequest {
    /// Learn what the store holds of the file.
    Ask,
    /// Ship bytes `[start, end)`, first recording the lease's epoch when `epoch` is given.
    Ship {
        start: u64,
        end: u64,
        epoch: Option<u64>,
    },
    /// Replace `parts` with one object over `[start, end)`.
    Compact { start: u64, end: u64 },
}
