//! The server's shared state ([`Host`]): what every socket's task reads (the options, the
//! names admitted, the wrong-token throttle) and the ACP connections it counts and looks up.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;

use super::hosts::Hosts;
use super::http::Handle;
use super::options::Options;
use super::share::Links;
use super::throttle::Throttle;
use crate::shell::hub::HubLink;

/// The server's shared state.
pub(super) struct Host {
    pub(super) options: Options,
    pub(super) link: HubLink,
    /// The `Host` values admitted.
    pub(super) names: Hosts,
    /// Wrong tokens, per source.
    pub(super) throttle: Throttle,
    /// Share links' records read lately, and wrong secrets per source.
    pub(super) shares: Links,
    /// HTTP connections by `Acp-Connection-Id`.
    pub(super) http: Mutex<HashMap<String, Handle>>,
    /// ACP connections open (HTTP and WebSocket).
    pub(super) open: AtomicUsize,
}

impl Host {
    /// Count a new ACP connection in; false (nothing counted) at the limit.
    pub(super) fn admit(&self) -> bool {
        self.open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.options.max_connections).then_some(n + 1)
            })
            .is_ok()
    }

    pub(super) fn release(&self) {
        self.open.fetch_sub(1, Ordering::AcqRel);
    }
}
