//! The shared object store named by `--store`, opened from its URL and the standard
//! environment through the Apache Arrow project's `object_store` crate, and the few operations
//! acp-journal does on it: create an object only if it is absent, list a file's parts, read a
//! range, delete.

use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{StreamExt, TryStreamExt};
use object_store::ClientConfigKey::{ConnectTimeout, Timeout};
use object_store::aws::AmazonS3ConfigKey;
use object_store::azure::AzureConfigKey;
use object_store::gcp::GoogleConfigKey;
use object_store::path::Path;
use object_store::prefix::PrefixStore;
use object_store::{
    GetOptions, ObjectStore, ObjectStoreExt, ObjectStoreScheme, PutMode, PutOptions, PutPayload,
    RetryConfig, UpdateVersion,
};

use super::layout::{self, Entry};

/// The store name of the error for an object larger than a reader allows.
const TOO_LARGE: &str = "acp-journal: object over its size limit";

/// Whether `e` says an object was larger than the reader allows (its body was not read).
pub fn is_too_large(e: &Error) -> bool {
    matches!(e, Error::Generic { store, .. } if *store == TOO_LARGE)
}

/// How long one request may take before it is given up (and retried, within [`retry`]); set
/// over the environment's, which only adds to the client's options.
const TIMEOUT: &str = "10s";
/// How long connecting may take.
const CONNECT_TIMEOUT: &str = "5s";

/// An error of the store, as the user should read it.
pub type Error = object_store::Error;

/// The shared store, seen under the prefix acp-journal keeps its objects under (the URL's
/// path).
#[derive(Clone)]
pub struct Store {
    store: PrefixStore<Arc<dyn ObjectStore>>,
    url: String,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.url)
    }
}

/// The version of an object a conditional replace names (S3 and Azure compare the ETag, GCS
/// the generation; both are kept).
pub type Version = UpdateVersion;

/// How [`Store::put_versioned`] writes.
#[derive(Clone, Debug)]
pub enum Write {
    /// Only if absent (`If-None-Match: *`).
    Create,
    /// Only if the object is still at this version (`If-Match`).
    Replace(Version),
    /// Whatever is there (for stores that ignore conditions anyway, with `--takeover`).
    Overwrite,
}

/// What [`Store::put_versioned`] did.
#[derive(Clone, Debug)]
pub enum Written {
    /// Written: the object's new version.
    Yes(Version),
    /// The condition failed: the object exists (create) or changed (replace).
    Conflict,
}

/// What [`Store::put_new`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Put {
    /// The object was created.
    Created,
    /// An object of that name was there already; nothing was written.
    Existed,
}

/// Bounded retries: a store that is down is found out within seconds, and the caller (the
/// shipper, a reader) decides when to try again.
fn retry() -> RetryConfig {
    RetryConfig {
        max_retries: 2,
        retry_timeout: Duration::from_secs(20),
        ..RetryConfig::default()
    }
}

/// Object `rel`'s path (under the prefix, which the store adds). Names acp-journal makes never
/// hold `.`/`..` components or control characters, so parsing cannot fail on them; anything
/// else is refused by the caller's own check first.
fn object_path(rel: &str) -> Result<Path, Error> {
    Path::parse(rel).map_err(|e| Error::Generic {
        store: "acp-journal",
        source: Box::new(e),
    })
}

impl Store {
    /// Open the store at `url`: `s3://BUCKET[/PREFIX]` (credentials, region and endpoint from
    /// the `AWS_*` variables), `gs://BUCKET[/PREFIX]` (`GOOGLE_*`), `az://CONTAINER[/PREFIX]`
    /// (`AZURE_*`), or `file:///PATH` (created, private, when missing). Nothing is sent yet.
    ///
    /// # Errors
    /// A URL this build cannot open, or a configuration the crate refuses.
    pub fn open(url: &str) -> anyhow::Result<Store> {
        // The HTTP client's TLS takes the process's default provider, installed first thing
        // in `main` (`net::tls::crypto_provider`).
        let parsed = url::Url::parse(url)
            .map_err(|e| anyhow::anyhow!("--store {url:?} is not a URL ({e})"))?;
        let unknown = || {
            anyhow::anyhow!(
                "--store {url:?}: unknown scheme {:?} (use s3://, gs://, az:// or file://)",
                parsed.scheme()
            )
        };
        let (scheme, prefix) = ObjectStoreScheme::parse(&parsed).map_err(|_| unknown())?;
        let store: Arc<dyn ObjectStore> = match scheme {
            ObjectStoreScheme::AmazonS3 => Arc::new(
                object_store::aws::AmazonS3Builder::from_env()
                    .with_url(url)
                    .with_retry(retry())
                    .with_config(AmazonS3ConfigKey::Client(Timeout), TIMEOUT)
                    .with_config(AmazonS3ConfigKey::Client(ConnectTimeout), CONNECT_TIMEOUT)
                    .build()?,
            ),
            ObjectStoreScheme::GoogleCloudStorage => Arc::new(
                object_store::gcp::GoogleCloudStorageBuilder::from_env()
                    .with_url(url)
                    .with_retry(retry())
                    .with_config(GoogleConfigKey::Client(Timeout), TIMEOUT)
                    .with_config(GoogleConfigKey::Client(ConnectTimeout), CONNECT_TIMEOUT)
                    .build()?,
            ),
            ObjectStoreScheme::MicrosoftAzure => Arc::new(
                object_store::azure::MicrosoftAzureBuilder::from_env()
                    .with_url(url)
                    .with_retry(retry())
                    .with_config(AzureConfigKey::Client(Timeout), TIMEOUT)
                    .with_config(AzureConfigKey::Client(ConnectTimeout), CONNECT_TIMEOUT)
                    .build()?,
            ),
            ObjectStoreScheme::Local => {
                let dir = parsed
                    .to_file_path()
                    .map_err(|()| anyhow::anyhow!("--store {url:?}: not a local path"))?;
                crate::journal::private::create_private_dir(&dir).map_err(|e| {
                    anyhow::anyhow!("--store {url:?}: cannot create {}: {e}", dir.display())
                })?;
                // The directory is the store's root: no prefix within it.
                return Ok(Store::over(
                    Arc::new(super::shared_dir::SharedDir::new(&dir)?),
                    "",
                    url,
                ));
            }
            _ => return Err(unknown()),
        };
        Ok(Store {
            store: PrefixStore::new(store, prefix),
            url: url.to_string(),
        })
    }

    /// A store already made (`prefix` is prepended to every name; `url` names it in messages):
    /// how the fleet's unit tests run on `object_store::memory::InMemory`.
    pub fn over(store: Arc<dyn ObjectStore>, prefix: &str, url: &str) -> Store {
        Store {
            store: PrefixStore::new(store, prefix),
            url: url.to_string(),
        }
    }

    /// The URL it was opened with.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Create `rel` holding `bytes`, unless it exists (create-if-absent: `If-None-Match: *`).
    /// A store that ignores the condition overwrites instead; the caller knows from the probe.
    ///
    /// # Errors
    /// The store's.
    pub async fn put_new(&self, rel: &str, bytes: Bytes) -> Result<Put, Error> {
        let options = PutOptions {
            mode: PutMode::Create,
            ..PutOptions::default()
        };
        match self
            .store
            .put_opts(&object_path(rel)?, PutPayload::from_bytes(bytes), options)
            .await
        {
            Ok(_) => Ok(Put::Created),
            Err(Error::AlreadyExists { .. }) => Ok(Put::Existed),
            Err(e) => Err(e),
        }
    }

    /// Write `rel` as `how` says.
    ///
    /// # Errors
    /// The store's (a store that cannot replace conditionally says `NotImplemented`).
    pub async fn put_versioned(
        &self,
        rel: &str,
        bytes: Bytes,
        how: Write,
    ) -> Result<Written, Error> {
        let mode = match how {
            Write::Create => PutMode::Create,
            Write::Replace(version) => PutMode::Update(version),
            Write::Overwrite => PutMode::Overwrite,
        };
        let options = PutOptions {
            mode,
            ..PutOptions::default()
        };
        match self
            .store
            .put_opts(&object_path(rel)?, PutPayload::from_bytes(bytes), options)
            .await
        {
            Ok(put) => Ok(Written::Yes(put.into())),
            Err(Error::AlreadyExists { .. } | Error::Precondition { .. }) => Ok(Written::Conflict),
            Err(e) => Err(e),
        }
    }

    /// The object `rel` and its version, read whole unless larger than `limit` (then `Err`),
    /// or `None` when absent.
    ///
    /// # Errors
    /// The store's, or an object over `limit` bytes.
    pub async fn get_versioned(
        &self,
        rel: &str,
        limit: u64,
    ) -> Result<Option<(Version, Bytes)>, Error> {
        let got = match self
            .store
            .get_opts(&object_path(rel)?, GetOptions::default())
            .await
        {
            Ok(got) => got,
            Err(Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        let version = Version {
            e_tag: got.meta.e_tag.clone(),
            version: got.meta.version.clone(),
        };
        if got.meta.size > limit {
            return Err(Error::Generic {
                store: TOO_LARGE,
                source: format!(
                    "{rel}: {} bytes, more than the {limit} allowed",
                    got.meta.size
                )
                .into(),
            });
        }
        Ok(Some((version, got.bytes().await?)))
    }

    /// The version of object `rel`, or `None` when absent.
    ///
    /// # Errors
    /// The store's.
    pub async fn head(&self, rel: &str) -> Result<Option<Version>, Error> {
        match self.store.head(&object_path(rel)?).await {
            Ok(meta) => Ok(Some(Version {
                e_tag: meta.e_tag,
                version: meta.version,
            })),
            Err(Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The whole object `rel`.
    ///
    /// # Errors
    /// The store's (`NotFound` when absent).
    pub async fn get(&self, rel: &str) -> Result<Bytes, Error> {
        self.store.get(&object_path(rel)?).await?.bytes().await
    }

    /// The whole object `rel`, unless it is larger than `limit`: refused on the size the store
    /// announces, before its body is read, and on the body itself if it runs past that
    /// ([`is_too_large`]).
    ///
    /// # Errors
    /// The store's (`NotFound` when absent), or an object over `limit` bytes.
    pub async fn get_bounded(&self, rel: &str, limit: u64) -> Result<Bytes, Error> {
        let too_large = |size: u64| Error::Generic {
            store: TOO_LARGE,
            source: format!("{rel}: {size} bytes, more than the {limit} allowed").into(),
        };
        let got = self
            .store
            .get_opts(&object_path(rel)?, GetOptions::default())
            .await?;
        let size = got.meta.size;
        if size > limit {
            return Err(too_large(size));
        }
        let mut body = Vec::with_capacity(size as usize);
        let mut stream = got.into_stream();
        while let Some(chunk) = stream.try_next().await? {
            if (body.len() + chunk.len()) as u64 > limit {
                return Err(too_large((body.len() + chunk.len()) as u64));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(Bytes::from(body))
    }

    /// Bytes `range` of object `rel`.
    ///
    /// # Errors
    /// The store's.
    pub async fn get_range(&self, rel: &str, range: Range<u64>) -> Result<Bytes, Error> {
        self.store.get_range(&object_path(rel)?, range).await
    }

    /// Delete `rel` (absent is fine).
    ///
    /// # Errors
    /// The store's.
    pub async fn delete(&self, rel: &str) -> Result<(), Error> {
        match self.store.delete(&object_path(rel)?).await {
            Err(Error::NotFound { .. }) | Ok(()) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Delete every object of `rels` (absent ones are fine), in as few requests as the store
    /// allows (S3's DeleteObjects takes a thousand at once).
    ///
    /// # Errors
    /// The store's, for the first object it could not delete.
    pub async fn delete_many(&self, rels: &[String]) -> Result<(), Error> {
        let paths: Vec<Result<Path, Error>> = rels.iter().map(|r| object_path(r)).collect();
        let mut deleted = self
            .store
            .delete_stream(futures_util::stream::iter(paths).boxed());
        while let Some(outcome) = deleted.next().await {
            match outcome {
                Ok(_) | Err(Error::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Every object under directory `dir` (recursively), relative to the prefix.
    ///
    /// # Errors
    /// The store's.
    pub async fn list(&self, dir: &str) -> Result<Vec<String>, Error> {
        let prefix = object_path(dir)?;
        let metas: Vec<_> = self.store.list(Some(&prefix)).try_collect().await?;
        Ok(metas.iter().map(|m| m.location.to_string()).collect())
    }

    /// Every object under directory `dir` (recursively), relative to the prefix, with its size
    /// and when it was last written (Unix microseconds, the store's clock).
    ///
    /// # Errors
    /// The store's.
    pub async fn list_sized(&self, dir: &str) -> Result<Vec<(String, u64, i64)>, Error> {
        let prefix = object_path(dir)?;
        let metas: Vec<_> = self.store.list(Some(&prefix)).try_collect().await?;
        Ok(metas
            .into_iter()
            .map(|m| {
                let at = m.last_modified.timestamp_micros();
                (m.location.to_string(), m.size, at)
            })
            .collect())
    }

    /// The names directly under directory `dir` that are directories themselves.
    ///
    /// # Errors
    /// The store's.
    pub async fn subdirs(&self, dir: &str) -> Result<Vec<String>, Error> {
        let prefix = object_path(dir)?;
        let listed = self.store.list_with_delimiter(Some(&prefix)).await?;
        Ok(listed
            .common_prefixes
            .iter()
            .filter_map(|p| p.filename().map(str::to_string))
            .collect())
    }

    /// The parts and fences of file `file` (see [`layout`]).
    ///
    /// # Errors
    /// The store's.
    pub async fn entries(&self, file: &str) -> Result<Vec<Entry>, Error> {
        Ok(self
            .list(file)
            .await?
            .iter()
            .filter_map(|rel| layout::split_object(rel))
            .filter(|(f, _)| *f == file)
            .map(|(_, e)| e)
            .collect())
    }
}
