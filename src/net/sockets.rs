//! The socket budget. A socket is unauthenticated until a request on it shows the token; until
//! then it lives at most the handshake limit, and unauthenticated sockets have a share of the
//! budget of their own: when it is full, the oldest of them is shed to make room for the new
//! one. So sockets that never authenticate — slow headers, a body that never ends, an HTTP/2
//! connection that only answers pings — cannot keep a client with the token out: its socket is
//! the newest, and authenticates with its first request. Authenticated sockets have their own
//! share (a new one past it gets 503). When a pile of unauthenticated sockets is gone, the
//! memory their buffers took is handed back to the system ([`give_back_memory`]): the
//! allocator would keep it for the process otherwise.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;

/// Every socket the server holds.
pub(super) struct Sockets {
    state: Mutex<State>,
    /// Unauthenticated sockets at once (the oldest is shed past it).
    unauthenticated: usize,
    /// Authenticated sockets at once.
    authenticated: usize,
    /// How long a socket may stay unauthenticated.
    deadline: Duration,
}

/// Unauthenticated sockets that make a pile (their memory is given back once it is gone).
const PILE: usize = 64;

#[derive(Default)]
struct State {
    next: u64,
    /// Unauthenticated sockets, oldest first, each with its signal to end.
    waiting: BTreeMap<u64, Arc<Notify>>,
    authenticated: usize,
    /// Unauthenticated sockets have piled up past [`PILE`] since memory was last given back.
    piled: bool,
}

/// One socket's place in the budget; dropping it gives the place back.
pub(super) struct Pass {
    sockets: Arc<Sockets>,
    id: u64,
    shed: Arc<Notify>,
    authenticated: AtomicBool,
}

impl Sockets {
    pub(super) fn new(unauthenticated: usize, authenticated: usize, deadline: Duration) -> Self {
        Sockets {
            state: Mutex::new(State::default()),
            unauthenticated: unauthenticated.max(1),
            authenticated,
            deadline,
        }
    }

    /// A place for a new (unauthenticated) socket, and whether the oldest unauthenticated one
    /// was shed for it.
    pub(super) fn admit(self: &Arc<Self>) -> (Pass, bool) {
        let shed = Arc::new(Notify::new());
        let mut state = self.state.lock();
        let mut full = false;
        if state.waiting.len() >= self.unauthenticated
            && let Some((_, oldest)) = state.waiting.pop_first()
        {
            // Stored if its socket is not waiting for it yet.
            oldest.notify_one();
            full = true;
        }
        let id = state.next;
        state.next += 1;
        state.waiting.insert(id, shed.clone());
        state.piled |= state.waiting.len() >= PILE;
        drop(state);
        let pass = Pass {
            sockets: self.clone(),
            id,
            shed,
            authenticated: AtomicBool::new(false),
        };
        (pass, full)
    }

    /// Unauthenticated and authenticated sockets held now.
    #[cfg(test)]
    fn held(&self) -> (usize, usize) {
        let state = self.state.lock();
        (state.waiting.len(), state.authenticated)
    }
}

impl Pass {
    /// A request on this socket showed the token: it leaves the unauthenticated share for the
    /// authenticated one. False when that share is full (the socket stays unauthenticated).
    pub(super) fn authenticate(&self) -> bool {
        if self.authenticated.load(Ordering::Acquire) {
            return true;
        }
        let mut state = self.sockets.state.lock();
        if state.authenticated >= self.sockets.authenticated {
            return false;
        }
        if state.waiting.remove(&self.id).is_none() {
            // Shed a moment ago: its socket is ending.
            return false;
        }
        state.authenticated += 1;
        self.authenticated.store(true, Ordering::Release);
        true
    }

    /// Whether a request on this socket has shown the token.
    pub(super) fn is_authenticated(&self) -> bool {
        self.authenticated.load(Ordering::Acquire)
    }

    /// Resolves when the socket must end: shed, or still unauthenticated at the deadline.
    /// Never for a socket that authenticated.
    pub(super) async fn ended(&self) {
        tokio::select! {
            () = tokio::time::sleep(self.sockets.deadline) => {}
            () = self.shed.notified() => {}
        }
        if self.authenticated.load(Ordering::Acquire) {
            std::future::pending::<()>().await;
        }
    }
}

impl Drop for Pass {
    fn drop(&mut self) {
        let mut state = self.sockets.state.lock();
        if self.authenticated.load(Ordering::Acquire) {
            state.authenticated -= 1;
        } else {
            state.waiting.remove(&self.id);
            if state.piled && state.waiting.len() < PILE / 8 {
                state.piled = false;
                give_back_memory();
            }
        }
    }
}

/// Hand the allocator's free memory back to the system (glibc keeps freed chunks in its arenas;
/// `malloc_trim` returns every free page), off the runtime's thread.
fn give_back_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        runtime.spawn_blocking(|| {
            // SAFETY: malloc_trim only walks the allocator's own free lists.
            unsafe { libc::malloc_trim(0) };
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_oldest_unauthenticated_socket_is_shed_and_an_authenticated_one_is_kept() {
        let sockets = Arc::new(Sockets::new(2, 1, Duration::from_secs(10)));
        let (first, shed) = sockets.admit();
        assert!(!shed);
        let (second, _) = sockets.admit();
        let (third, shed) = sockets.admit();
        assert!(shed, "the share was full");
        // The first was shed: it ends at once; the others do not.
        tokio::time::timeout(Duration::from_millis(1), first.ended())
            .await
            .expect("the oldest ends");
        assert!(
            tokio::time::timeout(Duration::from_secs(1), second.ended())
                .await
                .is_err()
        );
        assert!(!first.authenticate(), "a shed socket cannot authenticate");
        assert!(third.authenticate());
        assert_eq!(sockets.held(), (1, 1));
        let (fourth, _) = sockets.admit();
        assert!(!fourth.authenticate(), "the authenticated share is full");
        // Past the deadline: the unauthenticated end, the authenticated one does not.
        tokio::time::timeout(Duration::from_secs(10), second.ended())
            .await
            .expect("the deadline ends an unauthenticated socket");
        assert!(
            tokio::time::timeout(Duration::from_secs(60), third.ended())
                .await
                .is_err()
        );
        drop((first, second, third, fourth));
        assert_eq!(sockets.held(), (0, 0), "every place given back");
    }
}
