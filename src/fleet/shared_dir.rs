//! A shared directory as the store (`file:///PATH`): the `object_store` crate's
//! `LocalFileSystem`, with the one thing it lacks added — replacing an object only if it is
//! still at the version the writer read (`PutMode::Update`), which the lease needs.
//!
//! The replace holds an exclusive `flock(2)` on the object's current file while it compares
//! the file's ETag (inode, mtime, size) with the one expected and renames the new content into
//! place: two writers that read the same version are serialized on that file's lock, and the
//! second finds the name now points to another inode. Processes on one machine, and on a
//! network file system whose locks work (NFSv4), are arbitrated by it.

use std::ops::Range;

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::stream::BoxStream;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    ObjectStoreExt, PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};

/// A directory shared by the hosts, with compare-and-swap.
#[derive(Debug)]
pub struct SharedDir {
    files: LocalFileSystem,
}

impl SharedDir {
    /// The store over directory `dir` (which exists).
    ///
    /// # Errors
    /// The crate's, for a path it cannot use.
    pub fn new(dir: &std::path::Path) -> Result<SharedDir> {
        Ok(SharedDir {
            files: LocalFileSystem::new_with_prefix(dir)?,
        })
    }
}

impl std::fmt::Display for SharedDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SharedDir({})", self.files)
    }
}

fn precondition(location: &Path, why: &str) -> object_store::Error {
    object_store::Error::Precondition {
        path: location.to_string(),
        source: why.to_string().into(),
    }
}

#[async_trait]
impl ObjectStore for SharedDir {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        let PutMode::Update(expected) = &opts.mode else {
            return self.files.put_opts(location, payload, opts).await;
        };
        let Some(expected) = expected.e_tag.clone() else {
            return Err(precondition(location, "no ETag to compare"));
        };
        let file = self.files.path_to_filesystem(location)?;
        let lock = tokio::task::spawn_blocking(move || -> std::io::Result<std::fs::File> {
            let held = std::fs::File::open(&file)?;
            // SAFETY: a valid open descriptor; flock only takes a lock on it.
            if unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&held), libc::LOCK_EX) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(held)
        })
        .await
        .map_err(|e| object_store::Error::JoinError { source: e })?;
        let lock = match lock {
            Ok(lock) => lock,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(precondition(location, "absent"));
            }
            Err(e) => {
                return Err(object_store::Error::Generic {
                    store: "SharedDir",
                    source: Box::new(e),
                });
            }
        };
        // Under the lock of the file the name pointed to when it was opened: the name still
        // points to it only if no other replace went first.
        let now = self.files.head(location).await?;
        if now.e_tag.as_deref() != Some(expected.as_str()) {
            return Err(precondition(location, "changed"));
        }
        let replaced = self
            .files
            .put_opts(
                location,
                payload,
                PutOptions {
                    mode: PutMode::Overwrite,
                    ..opts
                },
            )
            .await;
        drop(lock);
        replaced
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.files.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.files.get_opts(location, options).await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.files.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.files.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.files.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.files.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.files.copy_opts(from, to, options).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::UpdateVersion;

    fn update(e_tag: Option<String>) -> PutOptions {
        PutOptions {
            mode: PutMode::Update(UpdateVersion {
                e_tag,
                version: None,
            }),
            ..PutOptions::default()
        }
    }

    #[tokio::test]
    async fn a_replace_succeeds_only_from_the_version_read() {
        let dir = tempfile::tempdir().unwrap();
        let store = SharedDir::new(dir.path()).unwrap();
        let at = Path::from("leases/k/lease");
        // Absent: nothing to replace.
        let absent = store
            .put_opts(&at, "x".into(), update(Some("\"1\"".into())))
            .await;
        assert!(matches!(
            absent,
            Err(object_store::Error::Precondition { .. })
        ));
        let first = store.put(&at, "one".into()).await.unwrap();
        // Two writers read the same version: the first replaces, the second finds it changed.
        let second = store
            .put_opts(&at, "two".into(), update(first.e_tag.clone()))
            .await
            .unwrap();
        let late = store
            .put_opts(&at, "three".into(), update(first.e_tag))
            .await;
        assert!(matches!(
            late,
            Err(object_store::Error::Precondition { .. })
        ));
        let body = store.get(&at).await.unwrap().bytes().await.unwrap();
        assert_eq!(&body[..], b"two");
        store
            .put_opts(&at, "four".into(), update(second.e_tag))
            .await
            .unwrap();
        // Create-if-absent is the crate's own.
        let again = store
            .put_opts(
                &at,
                "five".into(),
                PutOptions {
                    mode: PutMode::Create,
                    ..PutOptions::default()
                },
            )
            .await;
        assert!(matches!(
            again,
            Err(object_store::Error::AlreadyExists { .. })
        ));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn racing_replaces_from_one_version_let_exactly_one_through() {
        let dir = tempfile::tempdir().unwrap();
        let store = std::sync::Arc::new(SharedDir::new(dir.path()).unwrap());
        let at = Path::from("lease");
        for round in 0..20 {
            let base = store
                .put(&at, format!("base {round}").into())
                .await
                .unwrap();
            let racers: Vec<_> = (0..4)
                .map(|i| {
                    let (store, at, e_tag) = (store.clone(), at.clone(), base.e_tag.clone());
                    tokio::spawn(async move {
                        store
                            .put_opts(&at, format!("racer {i}").into(), update(e_tag))
                            .await
                            .is_ok()
                    })
                })
                .collect();
            let mut won = 0;
            for racer in racers {
                won += usize::from(racer.await.unwrap());
            }
            assert_eq!(won, 1, "round {round}");
        }
    }
}
