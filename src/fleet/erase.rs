//! Erasing a session from the store (`erase`, and `prune` with `--store`): its lease and lease
//! history go first, then a marker (`erased/<key>`: every host's shipper then ships nothing of
//! it again, its lines blanked in the catalogs it ships and its rows left out of the index it
//! writes), then its segments go, its lines in every host's catalog are blanked in place
//! (spaces of the same length: a catalog's parts keep their byte ranges, so its chain stays
//! whole), and its rows and words leave the index (the parts that held them replaced at once).
//! Its share links' records go right after the marker: a link to it stops working on every
//! host at once.
//! What hosts keep on their own disks is theirs: `prune` there.
//!
//! **A marker is honoured only once the session's lease is gone** ([`honoured`]): `erase`
//! deletes the lease before it writes the marker, and a bucket writer who can only write
//! objects cannot delete it, so a planted marker stops nothing — the hosts go on shipping and
//! say loudly that they refused it.

use std::collections::HashSet;

use bytes::Bytes;

use super::Error;
use super::index::{bounds, reader, snapshot, table, table::Table, writer};
use super::layout::{self, Entry};
use super::store::{self, Store};
use crate::catalog::CatalogEntry;
use crate::fleet::layout::{SessionId, SessionKey};

/// The markers' directory.
const ERASED: &str = "erased";

/// What an erasure removed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Erased {
    /// Objects deleted.
    pub objects: usize,
    /// Catalog lines blanked.
    pub catalog_lines: usize,
    /// Index rows (and postings) removed.
    pub index_rows: u64,
    /// Share links' records deleted (counted in `objects` too).
    pub share_links: usize,
}

/// The session keys erased from the store (names that are no session key — `..`, a path —
/// are not taken: a reader removes what a key names from its copy).
///
/// # Errors
/// The store's.
pub async fn erased_keys(store: &Store) -> Result<HashSet<SessionKey>, store::Error> {
    let is_key = |k: &str| {
        (k.starts_with('s') || k.starts_with('h'))
            && k.bytes().all(|b| {
                b.is_ascii_lowercase()
                    || b.is_ascii_digit()
                    || matches!(b, b'_' | b'-' | b'%' | b'A'..=b'F')
            })
    };
    Ok(store
        .list(ERASED)
        .await?
        .into_iter()
        .filter_map(|rel| rel.strip_prefix(&format!("{ERASED}/")).map(str::to_string))
        .filter(|k| is_key(k))
        .map(|k| SessionKey::named(&k))
        .collect())
}

/// Of the erasure markers for `keys`, those to honour — the session's lease is gone from the
/// store, as `erase` leaves it — and those refused (a lease is there: no `erase` wrote the
/// marker). Keys in `known` were honoured before and are not asked about again (a lease object
/// is never deleted but by an erasure).
///
/// # Errors
/// The store's.
pub async fn honoured(
    store: &Store,
    keys: impl IntoIterator<Item = SessionKey>,
    known: &HashSet<SessionKey>,
) -> Result<(HashSet<SessionKey>, Vec<SessionKey>), store::Error> {
    let (mut honoured, mut refused) = (HashSet::new(), Vec::new());
    for key in keys {
        if known.contains(&key) || store.head(&layout::lease_object(&key)).await?.is_none() {
            honoured.insert(key);
        } else {
            refused.push(key);
        }
    }
    Ok((honoured, refused))
}

/// The session key a catalog entry speaks of.
fn key_of(entry: &CatalogEntry) -> Option<SessionKey> {
    match entry {
        CatalogEntry::Close { segment, .. } => segment
            .strip_prefix("sessions/")
            .and_then(|r| r.split('/').next())
            .map(SessionKey::named),
        other => other.session().map(|s| SessionKey::of(SessionId::new(s))),
    }
}

/// Blank, in place, the catalog lines of `bytes` about the sessions whose keys are `keys`
/// (spaces, the newline kept); returns how many.
pub fn blank_lines(bytes: &mut [u8], keys: &HashSet<SessionKey>) -> usize {
    if keys.is_empty() {
        return 0;
    }
    let mut blanked = 0;
    let mut start = 0;
    while start < bytes.len() {
        let end = memchr::memchr(b'\n', &bytes[start..]).map_or(bytes.len(), |i| start + i);
        let about = serde_json::from_slice::<CatalogEntry>(&bytes[start..end])
            .ok()
            .and_then(|e| key_of(&e))
            .is_some_and(|k| keys.contains(&k));
        if about {
            bytes[start..end].fill(b' ');
            blanked += 1;
        }
        start = end + 1;
    }
    blanked
}

/// Erase `session` from the store. A session a host continues now takes its lease's time
/// more: what that host ships before it stops is swept then.
///
/// # Errors
/// The store's (what was removed before the error stays removed; erasing again finishes).
pub async fn erase(store: &Store, session: SessionId<'_>) -> Result<Erased, Error> {
    let key = SessionKey::of(session);
    let mut erased = Erased::default();
    // A host continuing the session now stops at its next renewal (its lease gone), or at its
    // next look at the markers; what it ships until then is swept once its lease would have
    // run out.
    let live = match super::lease::read_lease(store, &key).await? {
        super::lease::Seen::Lease(_, lease) if !lease.released => Some(lease),
        _ => None,
    };
    // The lease first: its absence is what makes the marker count (see [`honoured`]).
    let leases = store.list(&layout::lease_dir(&key)).await?;
    store.delete_many(&leases).await?;
    store
        .put_versioned(
            &format!("{ERASED}/{key}"),
            Bytes::from(session.to_string()),
            super::store::Write::Overwrite,
        )
        .await?;
    // Its links: no host finds their records again (one that read a record lately finds the
    // session gone from its copy).
    erased.share_links = super::share::delete_links_to(store, session.as_str()).await?;
    let segments = store.list(&format!("sessions/{key}")).await?;
    store.delete_many(&segments).await?;
    erased.objects += leases.len() + erased.share_links + segments.len();
    if let Some(lease) = live {
        let ttl = lease.ttl();
        tokio::time::sleep(ttl + super::lease::margin(ttl)).await;
        let late = store.list(&format!("sessions/{key}")).await?;
        store.delete_many(&late).await?;
        erased.objects += late.len();
    }
    let keys = HashSet::from([key.clone()]);
    for host in store.subdirs("hosts").await? {
        erased.catalog_lines += blank_catalog(store, &layout::host_catalog(&host), &keys).await?;
    }
    erased.index_rows = unindex(store, session.as_str()).await?;
    Ok(erased)
}

/// Blank the lines about `keys` in every part of the catalog `file`: the whole chain is read,
/// blanked, and each part that changed is written again at its own range.
async fn blank_catalog(
    store: &Store,
    file: &str,
    keys: &HashSet<SessionKey>,
) -> Result<usize, Error> {
    let entries = store.entries(file).await?;
    let (steps, end) = layout::parts_to_read(&entries, 0);
    let mut whole = Vec::new();
    for step in &steps {
        let part = fetch_catalog_part(store, file, step.start, step.end).await?;
        let from = usize::try_from(step.from - step.start).unwrap_or(0);
        whole.extend_from_slice(&part[from..]);
    }
    let before = whole.clone();
    let blanked = blank_lines(&mut whole, keys);
    if blanked == 0 {
        return Ok(0);
    }
    for entry in &entries {
        let Entry::Part {
            start,
            end: part_end,
        } = *entry
        else {
            continue;
        };
        if part_end > end {
            continue;
        }
        let range = usize::try_from(start).unwrap_or(0)..usize::try_from(part_end).unwrap_or(0);
        if before[range.clone()] == whole[range.clone()] {
            continue;
        }
        let packed = zstd::bulk::compress(&whole[range], 3).map_err(Error::Compress)?;
        store
            .put_versioned(
                &format!("{file}/{}", layout::part_name(start, part_end)),
                Bytes::from(packed),
                super::store::Write::Overwrite,
            )
            .await?;
    }
    Ok(blanked)
}

/// The uncompressed bytes of a catalog part.
async fn fetch_catalog_part(
    store: &Store,
    file: &str,
    start: u64,
    end: u64,
) -> Result<Vec<u8>, Error> {
    let name = format!("{file}/{}", layout::part_name(start, end));
    let packed = store.get(&name).await?;
    let size = usize::try_from(end - start).unwrap_or(0);
    let plain = zstd::bulk::decompress(&packed, size).map_err(|source| {
        Error::Decompress {
            expected: None,
            source,
        }
        .at(&name)
    })?;
    if plain.len() != size {
        return Err(Error::invalid(format!("{} bytes, not {size}", plain.len())).at(name));
    }
    Ok(plain)
}

/// Take `session`'s rows and words out of the index: each part that holds any is replaced at
/// once by one without them (or by nothing), and deleted. Returns the rows removed.
async fn unindex(store: &Store, session: &str) -> Result<u64, Error> {
    let reader::Found::Index(snap) = reader::open(store).await? else {
        return Ok(0);
    };
    let mut removed = 0;
    for part in &snap.parts {
        let bytes = match store.get_bounded(&part.path, bounds::MAX_PART_BYTES).await {
            Ok(bytes) => bytes,
            // Not a part any reader reads: it holds nothing of the session to remove.
            Err(e) if super::store::is_too_large(&e) => continue,
            Err(e) => return Err(e.into()),
        };
        let Ok((kept, rows, words)) = cut_out(part, bytes, session) else {
            // Not readable as a part of its table: the same.
            continue;
        };
        if rows == 0 {
            continue;
        }
        removed += rows;
        let replacement = match kept {
            Some(bytes) => Some(
                writer::put_part(
                    store,
                    part.table,
                    part.day.as_deref(),
                    "erase",
                    part.rows.saturating_sub(rows),
                    words,
                    bytes,
                )
                .await?,
            ),
            None => None,
        };
        let old = part.path.clone();
        snapshot::commit(store, |s| {
            let Some(at) = s.parts.iter().position(|p| p.path == old) else {
                return false;
            };
            match &replacement {
                Some(new) => s.parts[at] = new.clone(),
                None => {
                    s.parts.remove(at);
                }
            }
            true
        })
        .await?;
        store.delete(&old).await?;
    }
    Ok(removed)
}

/// `part` (its `bytes`) without `session`'s rows: the part to write instead (`None`: nothing
/// left), how many rows went, and the new part's word range (postings).
#[allow(clippy::type_complexity)]
fn cut_out(
    part: &snapshot::Part,
    bytes: Bytes,
    session: &str,
) -> Result<(Option<Bytes>, u64, Option<(String, String)>), Error> {
    Ok(match part.table {
        Table::Sessions => {
            let all = table::decode_sessions(bytes)?;
            let (bytes, n) = without(all, |r| r.session == session, table::encode_sessions)?;
            (bytes, n, None)
        }
        Table::Turns => {
            let all = table::decode_turns(bytes)?;
            let (bytes, n) = without(all, |r| r.session == session, table::encode_turns)?;
            (bytes, n, None)
        }
        Table::Edits => {
            let all = table::decode_edits(bytes)?;
            let (bytes, n) = without(all, |r| r.session == session, table::encode_edits)?;
            (bytes, n, None)
        }
        Table::Postings => {
            let all = table::decode_all_postings(bytes)?;
            let kept: Vec<_> = all.iter().filter(|r| r.1 != session).cloned().collect();
            let n = (all.len() - kept.len()) as u64;
            let words = kept
                .first()
                .zip(kept.last())
                .map(|(a, b)| (a.0.clone(), b.0.clone()));
            let bytes = (!kept.is_empty())
                .then(|| table::encode_postings(&kept))
                .transpose()?;
            (bytes, n, words)
        }
    })
}

/// `all` without the rows `gone` names: the rest encoded (none when nothing is left), and how
/// many went.
fn without<T>(
    mut all: Vec<T>,
    gone: impl Fn(&T) -> bool,
    encode: impl Fn(&[T]) -> parquet::errors::Result<Bytes>,
) -> parquet::errors::Result<(Option<Bytes>, u64)> {
    let before = all.len();
    all.retain(|r| !gone(r));
    let n = (before - all.len()) as u64;
    let bytes = (!all.is_empty()).then(|| encode(&all)).transpose()?;
    Ok((bytes, n))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::share::{self, Record, Secret};

    /// Links to `s1` of every kind go with it; links to `s2`, and what under `shares/` is no
    /// record (another name, too large, not JSON), stay.
    #[tokio::test]
    async fn erasing_a_session_deletes_every_link_to_it_and_nothing_else() {
        let store = Store::over(
            std::sync::Arc::new(object_store::memory::InMemory::new()),
            "team",
            "memory://team",
        );
        let now = 1_795_000_000_000_000;
        let week = std::time::Duration::from_secs(7 * 86_400);
        let link = |session: &str| {
            let store = store.clone();
            let record = Record::new(session, now, week, "h-1", "me").unwrap();
            async move {
                let secret = Secret::new().unwrap();
                share::create(&store, &secret, &record).await.unwrap();
                secret.key()
            }
        };
        let (active, revoked, kept) = (link("s1").await, link("s1").await, link("s2").await);
        assert!(share::revoke(&store, &revoked, now + 1).await.unwrap());
        let later = Secret::new().unwrap().key();
        let put = |key: String, bytes: Vec<u8>| {
            let store = store.clone();
            async move { store.put_new(&key, Bytes::from(bytes)).await.unwrap() }
        };
        put(
            later.clone(),
            br#"{"share":2,"session":"s1","more":[]}"#.to_vec(),
        )
        .await;
        let named_s1 = br#"{"share":1,"session":"s1"}"#.to_vec();
        let mut large = named_s1.clone();
        large.resize(share::MAX_RECORD as usize + 1, b' ');
        let (other, too_large, garbage) = (
            format!("{}/notes.json", share::DIR),
            Secret::new().unwrap().key(),
            Secret::new().unwrap().key(),
        );
        put(other.clone(), named_s1).await;
        put(too_large.clone(), large).await;
        put(garbage.clone(), b"\xff{ not json".to_vec()).await;

        let erased = erase(&store, SessionId::new("s1")).await.unwrap();
        assert_eq!(erased.share_links, 3, "{erased:?}");
        let mut left = store.list(share::DIR).await.unwrap();
        left.sort();
        let mut expected = vec![kept.clone(), other, too_large, garbage];
        expected.sort();
        assert_eq!(left, expected);
        for gone in [&active, &revoked, &later] {
            assert_eq!(share::read(&store, gone).await.unwrap(), None);
        }
        assert_eq!(share::list(&store).await.unwrap().len(), 1);
        assert_eq!(
            share::read(&store, &kept).await.unwrap().unwrap().session,
            "s2"
        );
        // Erased again (an erasure finished after an error): nothing more to delete.
        assert_eq!(
            erase(&store, SessionId::new("s1"))
                .await
                .unwrap()
                .share_links,
            0
        );
    }

    #[test]
    fn an_erased_sessions_catalog_lines_are_blanked_in_place() {
        let lines = [
            format!(
                r#"{{"ev":"open","session":"s1","segment":"sessions/{}/r.acpj.zst","t":1}}"#,
                SessionKey::of(SessionId::new("s1"))
            ),
            r#"{"ev":"prompt","session":"s1","title":"SECRET","t":2}"#.to_string(),
            r#"{"ev":"prompt","session":"s2","title":"keep","t":3}"#.to_string(),
            format!(
                r#"{{"ev":"close","segment":"sessions/{}/r.acpj.zst","records":1,"bytes":1,"t":4}}"#,
                SessionKey::of(SessionId::new("s1"))
            ),
        ];
        let mut bytes = (lines.join("\n") + "\n").into_bytes();
        let len = bytes.len();
        let n = blank_lines(
            &mut bytes,
            &HashSet::from([SessionKey::of(SessionId::new("s1"))]),
        );
        assert_eq!(n, 3);
        assert_eq!(bytes.len(), len, "ranges kept");
        let text = String::from_utf8(bytes).unwrap();
        assert!(!text.contains("SECRET") && text.contains("keep"), "{text}");
    }
}
