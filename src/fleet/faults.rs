//! A store that fails on cue, for the fleet's unit tests: wraps a real one (the crate's
//! `InMemory`) and, while told to, answers every request with an error (the store is down), or
//! makes the next writes fail before or after they are applied (the answer lost).

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    ObjectStoreExt, PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};
use parking_lot::Mutex;

/// What the next write does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Fails, not applied.
    Fail,
    /// Applied, but its answer is an error.
    LoseAnswer,
}

/// The wrapped store and its cues.
#[derive(Debug)]
pub struct Faulty {
    inner: Arc<dyn ObjectStore>,
    down: AtomicBool,
    /// Conditions are checked, then the write is made, with no lock between (two racing
    /// writers can both be told yes, the later one's content staying): as s3s-fs does.
    racy: AtomicBool,
    next: Mutex<VecDeque<Fault>>,
    /// Requests answered (all kinds).
    pub requests: AtomicUsize,
    /// Requests by kind and the first component of their path (`"PUT leases"`).
    counted: Mutex<std::collections::BTreeMap<String, usize>>,
}

impl Faulty {
    /// Around `inner`, working.
    pub fn new(inner: Arc<dyn ObjectStore>) -> Arc<Faulty> {
        Arc::new(Faulty {
            inner,
            down: AtomicBool::new(false),
            racy: AtomicBool::new(false),
            next: Mutex::new(VecDeque::new()),
            requests: AtomicUsize::new(0),
            counted: Mutex::default(),
        })
    }

    /// The requests answered so far, by kind and the first component of their path, and
    /// forgotten.
    pub fn take_counts(&self) -> std::collections::BTreeMap<String, usize> {
        std::mem::take(&mut *self.counted.lock())
    }

    fn count(&self, kind: &str, path: Option<&Path>) {
        let top = path
            .and_then(|p| p.parts().next())
            .map(|p| p.as_ref().to_string())
            .unwrap_or_default();
        *self
            .counted
            .lock()
            .entry(format!("{kind} {top}"))
            .or_default() += 1;
    }

    /// Every request fails while `down`.
    pub fn set_down(&self, down: bool) {
        self.down.store(down, Ordering::SeqCst);
    }

    /// Check conditions and write with a pause between (see [`Faulty::racy`]).
    pub fn set_racy(&self, racy: bool) {
        self.racy.store(racy, Ordering::SeqCst);
    }

    /// The next writes do these, in order.
    pub fn then(&self, faults: &[Fault]) {
        self.next.lock().extend(faults.iter().copied());
    }

    fn check(&self) -> Result<()> {
        self.requests.fetch_add(1, Ordering::SeqCst);
        if self.down.load(Ordering::SeqCst) {
            return Err(down());
        }
        Ok(())
    }
}

fn down() -> object_store::Error {
    object_store::Error::Generic {
        store: "Faulty",
        source: "the store is down (on cue)".into(),
    }
}

impl std::fmt::Display for Faulty {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Faulty({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for Faulty {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        self.check()?;
        self.count("PUT", Some(location));
        if self.racy.load(Ordering::SeqCst) && opts.mode != object_store::PutMode::Overwrite {
            // Check the condition against what is there now…
            let now = self.inner.head(location).await;
            let holds = match (&opts.mode, &now) {
                (object_store::PutMode::Create, Err(object_store::Error::NotFound { .. })) => true,
                (object_store::PutMode::Update(v), Ok(meta)) => v.e_tag == meta.e_tag,
                _ => false,
            };
            if !holds {
                return Err(object_store::Error::Precondition {
                    path: location.to_string(),
                    source: "condition failed".into(),
                });
            }
            // …then write, later, whatever was written meanwhile.
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            let opts = PutOptions {
                mode: object_store::PutMode::Overwrite,
                ..opts
            };
            return self.inner.put_opts(location, payload, opts).await;
        }
        let fault = self.next.lock().pop_front();
        match fault {
            Some(Fault::Fail) => Err(down()),
            Some(Fault::LoseAnswer) => {
                self.inner.put_opts(location, payload, opts).await?;
                Err(down())
            }
            None => self.inner.put_opts(location, payload, opts).await,
        }
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.check()?;
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.check()?;
        self.count(if options.head { "HEAD" } else { "GET" }, Some(location));
        self.inner.get_opts(location, options).await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.check()?;
        self.count("GET", Some(location));
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        if self.check().is_err() {
            return locations.map(|_| Err(down())).boxed();
        }
        self.count("DELETE", None);
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        if self.check().is_err() {
            return futures_util::stream::once(async { Err(down()) }).boxed();
        }
        self.count("LIST", prefix);
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.check()?;
        self.count("LIST", prefix);
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.check()?;
        self.inner.copy_opts(from, to, options).await
    }
}
