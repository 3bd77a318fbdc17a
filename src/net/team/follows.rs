//! The sessions the team view's pages follow (`/team/session?id=&after=`): for each, the last
//! render and what follows it in the store ([`Follower`]), shared by every page that asks.
//!
//! A session is read in full once (through the store's one reading, [`Reads`]), then looked at
//! again at most once per [`FRESH`] however many pages ask: a page asking within it is answered
//! from the last look. A look is one listing of the session in the store, made beside the one
//! reading (it touches nothing of the local copy, so list and search never wait for it); only
//! when it lists something new is the session pulled and rendered again, through the one
//! reading. A session that is not open any more is not followed: its render is kept for
//! [`FRESH`], then read in full again if asked. At most [`MAX_FOLLOWED`] sessions and
//! [`MAX_KEPT`] bytes of renders are kept, the one asked about longest ago dropped first; one
//! no page asked about for [`FORGET`] is dropped.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper::Response;
use parking_lot::Mutex;

use super::{Follower, Reads, Rendered, refusal};
use crate::net::responses::Body;

/// How long a look answers every page that asks: a little less than the page's
/// [`super::FOLLOW_EVERY`], so one page's every look reads, and many pages' together read no
/// more often.
pub(super) const FRESH: Duration = Duration::from_millis(400);
/// Sessions followed at once, at most.
pub(super) const MAX_FOLLOWED: usize = 32;
/// Bytes of renders kept at once, at most (a larger render is kept alone).
pub(super) const MAX_KEPT: usize = 64 << 20;
/// A session no page asked about for this long is dropped.
pub(super) const FORGET: Duration = Duration::from_secs(30);

/// One session: its last render, what follows it while it is open, and when the store was
/// last looked at for it.
#[derive(Debug, Default)]
struct Slot {
    rendered: Option<Arc<Rendered>>,
    follower: Option<Box<dyn Follower>>,
    looked: Option<Instant>,
}

/// A session's slot in [`Follows`]: when a page last asked, its render's size.
#[derive(Debug)]
struct Kept {
    asked: Instant,
    bytes: usize,
    slot: Arc<tokio::sync::Mutex<Slot>>,
}

/// The sessions followed, by ID.
#[derive(Debug, Default)]
pub(super) struct Follows {
    kept: Mutex<HashMap<String, Kept>>,
}

impl Follows {
    /// Session `id`'s slot (made when there is none), asked about now; the sessions past the
    /// bounds dropped.
    fn slot(&self, id: &str) -> Arc<tokio::sync::Mutex<Slot>> {
        let now = Instant::now();
        let mut kept = self.kept.lock();
        kept.retain(|key, k| key == id || now.duration_since(k.asked) < FORGET);
        if !kept.contains_key(id) {
            while kept.len() >= MAX_FOLLOWED && drop_oldest(&mut kept, id) {}
        }
        let k = kept.entry(id.to_string()).or_insert_with(|| Kept {
            asked: now,
            bytes: 0,
            slot: Arc::default(),
        });
        k.asked = now;
        k.slot.clone()
    }

    /// Session `id`'s render is `bytes` long now: the oldest others dropped past [`MAX_KEPT`].
    fn sized(&self, id: &str, bytes: usize) {
        let mut kept = self.kept.lock();
        if let Some(k) = kept.get_mut(id) {
            k.bytes = bytes;
        }
        while kept.values().map(|k| k.bytes).sum::<usize>() > MAX_KEPT && drop_oldest(&mut kept, id)
        {
        }
    }

    /// Session `id` kept no more.
    fn forget(&self, id: &str) {
        self.kept.lock().remove(id);
    }

    /// How many sessions are kept (for the tests).
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.kept.lock().len()
    }
}

/// Drop the session asked about longest ago, other than `id`; false when there is none.
fn drop_oldest(kept: &mut HashMap<String, Kept>, id: &str) -> bool {
    let oldest = kept
        .iter()
        .filter(|(key, _)| key.as_str() != id)
        .min_by_key(|(_, k)| k.asked)
        .map(|(key, _)| key.clone());
    oldest.is_some_and(|key| kept.remove(&key).is_some())
}

impl Reads {
    /// Session `id` as it stands now: from the last look when it is younger than [`FRESH`];
    /// else looked at (a listing) and rendered again when the store holds more of it; else
    /// (not followed, or never read) read in full. Pages asking at once wait for one reading.
    pub(super) async fn followed(&self, id: String) -> Result<Arc<Rendered>, Response<Body>> {
        let slot = self.follows.slot(&id);
        let Ok(mut slot) = tokio::time::timeout(super::WAIT, slot.lock_owned()).await else {
            return Err(super::busy());
        };
        if let (Some(rendered), Some(looked)) = (&slot.rendered, slot.looked)
            && looked.elapsed() < FRESH
        {
            return Ok(rendered.clone());
        }
        if let (Some(mut follower), Some(rendered)) = (slot.follower.take(), slot.rendered.clone())
        {
            // The look: beside the one reading (nothing of the local copy is touched).
            let (follower, changed) = self
                .run(false, move || {
                    let changed = follower.changed();
                    (follower, changed)
                })
                .await?;
            match changed {
                Ok(false) => {
                    slot.follower = Some(follower);
                    slot.looked = Some(Instant::now());
                    return Ok(rendered);
                }
                Ok(true) => return self.render(&id, &mut slot, follower).await,
                Err(failure) => {
                    slot.follower = Some(follower);
                    return Err(refusal(failure));
                }
            }
        }
        let asked = id.clone();
        match self.answer(move |team| team.follow(&asked)).await {
            Ok((rendered, follower)) => Ok(self.keep(&id, &mut slot, rendered, follower)),
            Err(response) => {
                if slot.rendered.is_none() {
                    // Nothing to keep (no such session, say): its place is not held.
                    self.follows.forget(&id);
                }
                Err(response)
            }
        }
    }

    /// `follower`'s session rendered again (it listed something new), through the one
    /// reading.
    async fn render(
        &self,
        id: &str,
        slot: &mut Slot,
        mut follower: Box<dyn Follower>,
    ) -> Result<Arc<Rendered>, Response<Body>> {
        let (follower, rendered) = self
            .run(true, move || {
                let rendered = follower.render();
                (follower, rendered)
            })
            .await?;
        match rendered {
            Ok(rendered) => Ok(self.keep(id, slot, rendered, Some(follower))),
            Err(failure) => {
                // Kept: the next look tries again.
                slot.follower = Some(follower);
                Err(refusal(failure))
            }
        }
    }

    /// `rendered` kept as session `id`'s last render, followed by `follower` while it is open.
    fn keep(
        &self,
        id: &str,
        slot: &mut Slot,
        rendered: Rendered,
        follower: Option<Box<dyn Follower>>,
    ) -> Arc<Rendered> {
        let open = rendered.open;
        let rendered = Arc::new(rendered);
        self.follows.sized(id, rendered.html.len());
        slot.rendered = Some(rendered.clone());
        slot.follower = follower.filter(|_| open);
        slot.looked = Some(Instant::now());
        rendered
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    use super::*;
    use crate::net::team::{Failure, Filters, Link, Team};

    /// What the fake store's side was asked, and what it answers.
    #[derive(Debug, Default)]
    struct Counts {
        reads: AtomicUsize,
        looks: AtomicUsize,
        renders: AtomicUsize,
        /// The next look finds something new.
        grown: AtomicBool,
        /// The next render finds the session closed.
        closes: AtomicBool,
    }

    #[derive(Debug)]
    struct Fake(Arc<Counts>);

    fn rendered(n: usize, open: bool) -> Rendered {
        Rendered {
            html: format!("<p>{n}</p>").into(),
            tag: format!("{n:024x}"),
            open,
        }
    }

    impl Follower for Fake {
        fn changed(&mut self) -> Result<bool, Failure> {
            self.0.looks.fetch_add(1, Ordering::SeqCst);
            // A look takes a while, as a listing does: pages asking meanwhile wait for it.
            std::thread::sleep(Duration::from_millis(20));
            Ok(self.0.grown.swap(false, Ordering::SeqCst))
        }
        fn render(&mut self) -> Result<Rendered, Failure> {
            let n = 100 + self.0.renders.fetch_add(1, Ordering::SeqCst);
            Ok(rendered(n, !self.0.closes.load(Ordering::SeqCst)))
        }
    }

    impl Team for Fake {
        fn sessions(&self, _: &Filters) -> Result<Vec<u8>, Failure> {
            unreachable!()
        }
        fn search(&self, _: &str) -> Result<Vec<u8>, Failure> {
            unreachable!()
        }
        fn session(&self, _: &str) -> Result<Vec<u8>, Failure> {
            unreachable!()
        }
        fn follow(&self, id: &str) -> Result<(Rendered, Option<Box<dyn Follower>>), Failure> {
            if id == "missing" {
                return Err(Failure::NotFound("no such session".into()));
            }
            let n = self.0.reads.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(20));
            Ok((rendered(n, true), Some(Box::new(Fake(self.0.clone())))))
        }
        fn usage(&self) -> Result<Vec<u8>, Failure> {
            unreachable!()
        }
        fn usage_csv(&self, _: &str) -> Result<Vec<u8>, Failure> {
            unreachable!()
        }
        fn share(&self, _: &str, _: Duration) -> Result<Vec<u8>, Failure> {
            unreachable!()
        }
        fn link(&self, _: &str) -> Result<Option<Link>, Failure> {
            unreachable!()
        }
    }

    /// `pages` pages asking about session `id` at once: the tags they were answered.
    async fn ask(reads: &Reads, id: &str, pages: usize) -> Vec<String> {
        let asks = (0..pages).map(|_| {
            let (reads, id) = (reads.clone(), id.to_string());
            tokio::spawn(async move { reads.followed(id).await.map(|r| r.tag.clone()) })
        });
        let mut tags = Vec::new();
        for ask in asks {
            tags.push(ask.await.unwrap().expect("answered"));
        }
        tags
    }

    fn count(c: &AtomicUsize) -> usize {
        c.load(Ordering::SeqCst)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn many_pages_following_one_session_make_one_reading_per_look() {
        let counts = Arc::new(Counts::default());
        let reads = Reads::new(Arc::new(Fake(counts.clone())));
        // Eight pages open it at once: one reading in full.
        let tags = ask(&reads, "s", 8).await;
        assert!(tags.iter().all(|t| *t == tags[0]), "{tags:?}");
        assert_eq!((count(&counts.reads), count(&counts.looks)), (1, 0));
        // Asked again within FRESH: answered from it, the store not looked at.
        ask(&reads, "s", 8).await;
        assert_eq!((count(&counts.reads), count(&counts.looks)), (1, 0));
        // Then one look for all of them; nothing new, nothing rendered.
        tokio::time::sleep(FRESH).await;
        assert_eq!(ask(&reads, "s", 8).await, tags);
        assert_eq!(
            (
                count(&counts.reads),
                count(&counts.looks),
                count(&counts.renders)
            ),
            (1, 1, 0)
        );
        // Something new: one render, every page answered with it.
        counts.grown.store(true, Ordering::SeqCst);
        tokio::time::sleep(FRESH).await;
        let grown = ask(&reads, "s", 8).await;
        assert!(
            grown.iter().all(|t| *t == format!("{:024x}", 100)),
            "{grown:?}"
        );
        assert_eq!((count(&counts.looks), count(&counts.renders)), (2, 1));
        // A look is made beside the store's one reading: a long reading (a list, a search)
        // holds it, and the look is not kept waiting; nor does it take the reading from them.
        let held = reads.one.clone().acquire_owned().await.unwrap();
        tokio::time::sleep(FRESH).await;
        let looked = tokio::time::timeout(Duration::from_secs(5), ask(&reads, "s", 2)).await;
        assert!(looked.is_ok(), "a look waited for the store's reading");
        assert_eq!(count(&counts.looks), 3);
        drop(held);
        // The session closes: rendered once more, then not followed; read in full if asked.
        counts.grown.store(true, Ordering::SeqCst);
        counts.closes.store(true, Ordering::SeqCst);
        tokio::time::sleep(FRESH).await;
        ask(&reads, "s", 1).await;
        assert_eq!((count(&counts.looks), count(&counts.renders)), (4, 2));
        tokio::time::sleep(FRESH).await;
        ask(&reads, "s", 1).await;
        assert_eq!((count(&counts.reads), count(&counts.looks)), (2, 4));
        // A session the store lacks is refused, and takes no place.
        let missing = reads.followed("missing".into()).await.unwrap_err();
        assert_eq!(missing.status(), hyper::StatusCode::NOT_FOUND);
        assert_eq!(reads.follows.len(), 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_sessions_followed_are_bounded() {
        let counts = Arc::new(Counts::default());
        let reads = Reads::new(Arc::new(Fake(counts.clone())));
        for n in 0..MAX_FOLLOWED + 5 {
            ask(&reads, &format!("s{n}"), 1).await;
        }
        assert_eq!(reads.follows.len(), MAX_FOLLOWED);
        // The one asked about longest ago went first: asked again, it is read again.
        ask(&reads, "s0", 1).await;
        assert_eq!(count(&counts.reads), MAX_FOLLOWED + 6);
        // The last asked is still kept: answered without reading.
        ask(&reads, &format!("s{}", MAX_FOLLOWED + 4), 1).await;
        assert_eq!(count(&counts.reads), MAX_FOLLOWED + 6);
    }
}
