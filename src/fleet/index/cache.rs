//! A reader's bounded local cache of index parts: the byte ranges a query read (a footer, a row
//! group) kept on disk, private, keyed by part and range — parts never change, so what is
//! cached never goes stale — and the ranges read longest ago dropped first once the cache
//! passes its size. And the reader of a part's footer and row groups through it, each checked
//! ([`super::bounds`]) before it is decoded.

use std::io::Write;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;

use super::bounds::{self, Footer, Totals};
use super::columns::Chunk;
use super::table::Table;
use crate::fleet::Error;
use crate::fleet::store::Store;
use crate::hex;
use crate::journal::private::{create_private_dir, create_private_file};
use crate::lru;

/// The byte ranges of parts read, on disk, at most `limit` bytes.
#[derive(Clone, Debug)]
pub struct Cache {
    dir: PathBuf,
    limit: u64,
}

impl Cache {
    /// A cache in `dir` (made private when missing) of at most `limit` bytes.
    pub fn new(dir: PathBuf, limit: u64) -> Cache {
        Cache { dir, limit }
    }

    fn file(&self, part: &str, range: &Range<u64>) -> PathBuf {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(format!("{part}\n{}-{}", range.start, range.end));
        self.dir.join(hex::encode(&digest[..16]))
    }

    /// The bytes cached for `range` of `part` (their time is set to now: used).
    fn get(&self, part: &str, range: &Range<u64>) -> Option<Bytes> {
        let file = self.file(part, range);
        let bytes = std::fs::read(&file).ok()?;
        (bytes.len() as u64 == range.end - range.start).then(|| {
            let _ = std::fs::File::options()
                .write(true)
                .open(&file)
                .and_then(|f| f.set_modified(std::time::SystemTime::now()));
            Bytes::from(bytes)
        })
    }

    /// Keep `bytes` for `range` of `part`, then drop the ranges read longest ago past the
    /// limit (a range larger than the whole cache is not kept).
    fn put(&self, part: &str, range: &Range<u64>, bytes: &Bytes) {
        if bytes.len() as u64 > self.limit || create_private_dir(&self.dir).is_err() {
            return;
        }
        let file = self.file(part, range);
        let tmp = file.with_extension(format!("{}.tmp", std::process::id()));
        let written = create_private_file(&tmp)
            .and_then(|mut f| f.write_all(bytes))
            .and_then(|()| std::fs::rename(&tmp, &file));
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
            return;
        }
        self.trim();
    }

    fn trim(&self) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let files: Vec<lru::Entry> = entries
            .flatten()
            .filter_map(|e| {
                let meta = e.metadata().ok()?;
                Some(lru::Entry {
                    used: meta.modified().ok()?,
                    bytes: meta.len(),
                    path: e.path(),
                })
            })
            .collect();
        let total = files.iter().map(|f| f.bytes).sum();
        lru::trim(
            files,
            total,
            self.limit,
            |_| false,
            |path| std::fs::remove_file(path).is_ok(),
        );
    }
}

/// One part of the index read by ranges: its footer and the row groups a query needs, through
/// the cache when there is one.
pub struct PartReader {
    store: Store,
    path: String,
    size: u64,
    cache: Option<Arc<Cache>>,
}

impl PartReader {
    /// Part `path` (of `size` bytes) of `store`.
    pub fn new(store: Store, path: String, size: u64, cache: Option<Arc<Cache>>) -> PartReader {
        PartReader {
            store,
            path,
            size,
            cache,
        }
    }

    async fn range(&self, range: Range<u64>) -> Result<Bytes, Error> {
        if let Some(bytes) = self.cache.as_ref().and_then(|c| c.get(&self.path, &range)) {
            return Ok(bytes);
        }
        let bytes = self.store.get_range(&self.path, range.clone()).await?;
        if bytes.len() as u64 != range.end - range.start {
            return Err(Error::invalid(format!(
                "{} bytes read of the {} asked",
                bytes.len(),
                range.end - range.start
            )));
        }
        if let Some(cache) = &self.cache {
            cache.put(&self.path, &range, &bytes);
        }
        Ok(bytes)
    }

    /// Its footer, as a part of `table`: read (at most [`bounds::MAX_FOOTER_BYTES`]) and
    /// checked, its reads counted in `totals`.
    ///
    /// # Errors
    /// The store's, or a footer past the bounds.
    pub async fn footer(&self, table: Table, totals: &mut Totals) -> Result<Footer, Error> {
        if self.size < 12 {
            return Err(Error::invalid(format!("{} bytes: not Parquet", self.size)));
        }
        let tail = self.size - 8..self.size;
        totals.fetch(&tail)?;
        let len = bounds::footer_len(&self.range(tail).await?, self.size)?;
        let footer = self.size - 8 - len..self.size - 8;
        totals.fetch(&footer)?;
        Footer::parse(&self.range(footer).await?, self.size, &table.schema())
    }

    /// The column chunks of row group `group`, each read and its pages checked.
    ///
    /// # Errors
    /// The store's, or a column chunk past the bounds.
    pub async fn row_group(
        &self,
        footer: &Footer,
        group: usize,
        totals: &mut Totals,
    ) -> Result<Vec<Chunk>, Error> {
        let mut chunks = Vec::new();
        for column in 0..footer.metadata().row_group(group).num_columns() {
            let range = footer.chunk(group, column);
            totals.fetch(&range)?;
            let bytes = self.range(range.clone()).await?;
            totals.check(footer, group, column, &bytes)?;
            chunks.push(Chunk::new(range.start, bytes));
        }
        Ok(chunks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_keeps_what_was_read_last_within_its_size() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::new(dir.path().join("c"), 100);
        let bytes = Bytes::from(vec![7u8; 40]);
        for i in 0..5u64 {
            cache.put("p", &(i * 40..(i + 1) * 40), &bytes);
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let kept: Vec<bool> = (0..5u64)
            .map(|i| cache.get("p", &(i * 40..(i + 1) * 40)).is_some())
            .collect();
        assert_eq!(kept, [false, false, false, true, true]);
        // Larger than the whole cache: not kept.
        cache.put("p", &(0..200), &Bytes::from(vec![1u8; 200]));
        assert!(cache.get("p", &(0..200)).is_none());
    }
}
