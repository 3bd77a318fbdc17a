//! Which processes of this host are running, injected as the clock is: the lease's decision
//! asks it of a holder on this host (one whose process is gone is not waited for), the shipper
//! and the index of a segment's writer (a gone run's segments are picked up at start); none
//! reads `/proc` itself.

/// Where the fleet learns whether a process of this host still runs.
pub trait Liveness: Send + Sync + std::fmt::Debug {
    /// Whether an acp-journal process numbered `pid` runs on this host (never for 0, which
    /// names no process).
    fn running(&self, pid: u32) -> bool;
}

/// The machine's process table (`/proc`).
#[derive(Debug, Default, Clone, Copy)]
pub struct ProcessTable;

impl Liveness for ProcessTable {
    fn running(&self, pid: u32) -> bool {
        crate::journal::dir::acp_journal_running(pid) && pid != 0
    }
}
