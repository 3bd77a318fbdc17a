//! Events an attacker can cause at will (a wrong token, a shed socket) are logged as one line
//! per [`INTERVAL`], never one per event: whoever sends them cannot fill the log.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

/// How often a summary line is written, at most.
pub(super) const INTERVAL: Duration = Duration::from_secs(60);

/// A count of one kind of event, written as a summary line.
pub(crate) struct Summary {
    /// One event, as the first line says it (`"a wrong token"`).
    one: &'static str,
    /// What is counted, plural (`"wrong tokens"`).
    many: &'static str,
    state: Mutex<Counted>,
}

#[derive(Default)]
struct Counted {
    count: u64,
    /// The last event's detail.
    last: String,
    /// A line is due (its timer runs).
    due: bool,
}

impl Summary {
    pub(crate) fn new(one: &'static str, many: &'static str) -> Arc<Summary> {
        Arc::new(Summary {
            one,
            many,
            state: Mutex::new(Counted::default()),
        })
    }

    /// Count one event (`detail` follows its name in the line: `from 192.0.2.1`). The first of a
    /// quiet spell is written at once; the rest, counted, in one line [`INTERVAL`] later.
    pub(crate) fn count(self: &Arc<Self>, detail: impl std::fmt::Display) {
        let mut state = self.state.lock();
        if state.due {
            state.count += 1;
            state.last = detail.to_string();
            return;
        }
        state.due = true;
        drop(state);
        tracing::warn!(
            "{} {detail} (more are summed up every {} s)",
            self.one,
            INTERVAL.as_secs()
        );
        let summary = self.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(INTERVAL).await;
                let mut state = summary.state.lock();
                if state.count == 0 {
                    state.due = false;
                    return;
                }
                let (count, last) = (state.count, std::mem::take(&mut state.last));
                state.count = 0;
                drop(state);
                tracing::warn!(
                    "{count} {} in the last {} s (the last {last})",
                    summary.many,
                    INTERVAL.as_secs()
                );
            }
        });
    }
}
