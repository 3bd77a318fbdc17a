//! `net::team`'s tests: the fields of a query; the sessions followed, shared by the pages.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::follows::MAX_FOLLOWED;
use super::*;

#[test]
fn the_fields_of_a_query_are_bounded_and_checked() {
    let asked = Asked::parse(
        "/team/sessions",
        "agent=echo&host=h-1&state=stranded&from=2026-11-01&to=2026-11-01&page=2",
    )
    .unwrap();
    let Asked::Sessions(f) = asked else {
        panic!("{asked:?}")
    };
    assert_eq!(f.agent.as_deref(), Some("echo"));
    assert_eq!(f.host.as_deref(), Some("h-1"));
    assert_eq!(f.state.as_deref(), Some("stranded"));
    for state in STORE_STATES {
        let query = format!("state={state}");
        assert!(Asked::parse("/team/sessions", &query).is_ok(), "{query}");
    }
    assert_eq!(f.page, 2);
    assert_eq!(f.to_us.unwrap() - f.from_us.unwrap(), 86_400_000_000);
    assert_eq!(
        Asked::parse("/team/sessions", "").unwrap(),
        Asked::Sessions(Filters::default())
    );
    assert_eq!(
        Asked::parse("/team/search", "q=+two+words+").unwrap(),
        Asked::Search("two words".into())
    );
    let day = Duration::from_secs(86_400);
    assert_eq!(
        Asked::parse("/team/share", "id=s1").unwrap(),
        Asked::Share("s1".into(), day * 7)
    );
    assert_eq!(
        Asked::parse("/team/share", "id=s1&days=30").unwrap(),
        Asked::Share("s1".into(), day * 30)
    );
    assert_eq!(
        Asked::parse("/team/usage.csv", "by=host").unwrap(),
        Asked::UsageCsv("host")
    );
    // A session, and the tag of the render the page has (an empty one: none).
    let tag = "0123456789abcdef01234567";
    assert_eq!(
        Asked::parse("/team/session", &format!("id=s%201&after={tag}")).unwrap(),
        Asked::Session {
            id: "s 1".into(),
            after: Some(tag.into())
        }
    );
    for query in ["id=s1", "id=s1&after=", "after=&id=s1"] {
        assert_eq!(
            Asked::parse("/team/session", query).unwrap(),
            Asked::Session {
                id: "s1".into(),
                after: None
            },
            "{query}"
        );
    }
    let long = format!("q={}", "a".repeat(MAX_FIELD + 1));
    for (path, query) in [
        ("/team/search", long.as_str()),
        ("/team/search", "q=%20"),
        ("/team/search", "q=%ff"),
        ("/team/session", ""),
        ("/team/session", "id=a%0Ab"),
        ("/team/session", "after=0123456789abcdef01234567"),
        ("/team/session", "id=s1&after=0123456789ABCDEF01234567"),
        ("/team/session", "id=s1&after=0123456789abcdef0123456"),
        ("/team/session", "id=s1&after=0123456789abcdef012345678"),
        ("/team/session", "id=s1&after=0123456789abcdef0123456g"),
        ("/team/session", "id=s1&after=%220123456789abcdef0123456%22"),
        ("/team/session", "id=s1&after=0123456789abcdef0123456%0A"),
        ("/team/sessions", "state=torn%3Bx"),
        ("/team/sessions", "state=open"),
        ("/team/sessions", "state=LIVE"),
        ("/team/sessions", "from=yesterday"),
        ("/team/sessions", "page=-1"),
        ("/team/sessions", "page=99999999999"),
        ("/team/usage.csv", ""),
        ("/team/usage.csv", "by=week"),
        ("/team/share", "days=7"),
        ("/team/share", "id=s1&days=31"),
        ("/team/share", "id=s1&days=0"),
        ("/team/share", "id=s1&days=-1"),
    ] {
        assert!(Asked::parse(path, query).is_err(), "{path}?{query}");
    }
}

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
