//! Share links: a read-only link to one session of the store, valid on every host serving the
//! store's page until it expires or is revoked.
//!
//! A link carries a [`Secret`] of 128 random bits (the OS's CSPRNG), base64url. The store
//! never holds it: a link's [`Record`] is kept under `shares/<SHA-256 of the secret, hex>`
//! ([`Secret::key`]), so whoever reads the bucket can list the links but not use them. A
//! record says which session, when it was made and by whom, when it expires (at most
//! [`MAX_LIFE`] after) and whether it was revoked; revoking rewrites it with the time. A
//! record is small ([`MAX_RECORD`]); anything else under `shares/` is left alone. Erasing a
//! session from the store deletes its links' records ([`delete_links_to`]).

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::store::{Error, Put, Store, Write};
use crate::hex;

/// The store's directory of share records.
pub const DIR: &str = "shares";
/// How long a link lasts unless told otherwise.
pub const DEFAULT_LIFE: Duration = Duration::from_secs(7 * 86_400);
/// The longest a link may last.
pub const MAX_LIFE: Duration = Duration::from_secs(30 * 86_400);
/// The largest record read, in bytes (ours are a few hundred).
pub const MAX_RECORD: u64 = 4096;
/// The format of the records written.
const FORMAT: u32 = 1;
/// Random bytes in a secret.
const SECRET_BYTES: usize = 16;

/// A link's secret: 128 random bits, as 22 base64url characters.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl std::fmt::Debug for Secret {
    /// Never the secret itself.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(…)")
    }
}

impl Secret {
    /// A new secret from the OS's CSPRNG.
    ///
    /// # Errors
    /// The OS gave no random bytes.
    pub fn new() -> std::io::Result<Secret> {
        let mut bytes = [0u8; SECRET_BYTES];
        getrandom::fill(&mut bytes).map_err(std::io::Error::other)?;
        Ok(Secret(URL_SAFE_NO_PAD.encode(bytes)))
    }

    /// `text` as a secret, when it is one: exactly the 22 characters of 16 bytes in base64url.
    pub fn parse(text: &str) -> Option<Secret> {
        let bytes = URL_SAFE_NO_PAD.decode(text).ok()?;
        // Canonical only: one text per secret.
        (bytes.len() == SECRET_BYTES && URL_SAFE_NO_PAD.encode(&bytes) == text)
            .then(|| Secret(text.to_string()))
    }

    /// The secret as the link carries it.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The name of its record in the store: `shares/` and the SHA-256 of the secret, hex.
    pub fn key(&self) -> String {
        format!("{DIR}/{}", hex::encode(Sha256::digest(self.0.as_bytes())))
    }
}

/// Whether `rel` names a share record (`shares/` and 64 lower-case hex digits).
pub fn is_key(rel: &str) -> bool {
    rel.strip_prefix(DIR)
        .and_then(|r| r.strip_prefix('/'))
        .is_some_and(|h| {
            h.len() == 64
                && h.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        })
}

/// What the store keeps of a link (never its secret).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The record's format ([`FORMAT`]).
    pub share: u32,
    /// The session shared, its exact ID.
    pub session: String,
    /// When the link was made (Unix microseconds).
    pub created: i64,
    /// When it stops working (Unix microseconds).
    pub expires: i64,
    /// The host that made it (its `host-id`; empty in a record that does not say).
    #[serde(default)]
    pub host: String,
    /// Who made it: the user on that host, or `page` for the page's Share button (empty in a
    /// record that does not say).
    #[serde(default)]
    pub user: String,
    /// When it was revoked (Unix microseconds), if it was.
    #[serde(default)]
    pub revoked: Option<i64>,
}

/// Where a link stands at a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// It works.
    Active,
    /// Its time is up.
    Expired,
    /// It was revoked.
    Revoked,
}

impl State {
    /// As `share --list` says it.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Active => "active",
            State::Expired => "expired",
            State::Revoked => "revoked",
        }
    }
}

impl Record {
    /// A record of session `session` made at `now` (Unix microseconds) to last `life`.
    ///
    /// # Errors
    /// A life of nothing, or longer than [`MAX_LIFE`].
    pub fn new(
        session: &str,
        now: i64,
        life: Duration,
        host: &str,
        user: &str,
    ) -> Result<Record, crate::fleet::Error> {
        Ok(Record {
            share: FORMAT,
            session: session.to_string(),
            created: now,
            expires: expiry(now, life)?,
            host: host.to_string(),
            user: user.to_string(),
            revoked: None,
        })
    }

    /// Where it stands at `now` (Unix microseconds): revoked first, then expired at its
    /// `expires` (that instant included).
    pub fn state(&self, now: i64) -> State {
        if self.revoked.is_some() {
            State::Revoked
        } else if now >= self.expires {
            State::Expired
        } else {
            State::Active
        }
    }

    /// The record as stored: one JSON object.
    ///
    /// # Panics
    /// Never: the record is plain data.
    pub fn to_bytes(&self) -> Bytes {
        Bytes::from(serde_json::to_vec(self).expect("a record serializes"))
    }

    /// A record read from the store, when it is one of a format this build reads.
    pub fn parse(bytes: &[u8]) -> Option<Record> {
        serde_json::from_slice::<Record>(bytes)
            .ok()
            .filter(|r| r.share == FORMAT)
    }
}

/// When a link made at `now` (Unix microseconds) to last `life` expires.
///
/// # Errors
/// A life of nothing, or longer than [`MAX_LIFE`] ([`crate::fleet::Error::LinkLife`]).
pub fn expiry(now: i64, life: Duration) -> Result<i64, crate::fleet::Error> {
    if life.is_zero() {
        return Err(crate::fleet::Error::LinkLife { max_days: None });
    }
    if life > MAX_LIFE {
        return Err(crate::fleet::Error::LinkLife {
            max_days: Some(MAX_LIFE.as_secs() / 86_400),
        });
    }
    // At most 30 days: fits in microseconds.
    Ok(now.saturating_add(life.as_micros() as i64))
}

/// Write `record` as the record of `secret` (create-if-absent: a secret is made once).
///
/// # Errors
/// The store's, or a record of that secret already there (a secret drawn twice).
pub async fn create(store: &Store, secret: &Secret, record: &Record) -> Result<(), Error> {
    match store.put_new(&secret.key(), record.to_bytes()).await? {
        Put::Created => Ok(()),
        Put::Existed => Err(Error::Generic {
            store: "acp-journal",
            source: "a share record of that secret exists already".into(),
        }),
    }
}

/// The record named `key`, or `None` when there is none, or it is no record of ours.
///
/// # Errors
/// The store's.
pub async fn read(store: &Store, key: &str) -> Result<Option<Record>, Error> {
    Ok(read_bytes(store, key)
        .await?
        .and_then(|b| Record::parse(&b)))
}

/// The bytes of the object `key`, read up to [`MAX_RECORD`]: `None` when there is none, or
/// it is larger (no record of ours).
async fn read_bytes(store: &Store, key: &str) -> Result<Option<Bytes>, Error> {
    match store.get_versioned(key, MAX_RECORD).await {
        Ok(Some((_, bytes))) => Ok(Some(bytes)),
        Ok(None) => Ok(None),
        Err(e) if super::store::is_too_large(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Delete the record of every link to `session` (its exact ID), whatever its format or
/// state: erasing a session leaves no link to it. Each name under `shares/` that is a
/// record's is read (bounded); one naming another session, or none, is left alone. Returns
/// how many were deleted.
///
/// # Errors
/// The store's (what was deleted before the error stays deleted).
pub async fn delete_links_to(store: &Store, session: &str) -> Result<usize, Error> {
    /// What any format of a record says first: the session it shows.
    #[derive(Deserialize)]
    struct Names {
        session: String,
    }
    let mut gone = Vec::new();
    for key in store.list(DIR).await? {
        if !is_key(&key) {
            continue;
        }
        let names = read_bytes(store, &key)
            .await?
            .and_then(|b| serde_json::from_slice::<Names>(&b).ok());
        if names.is_some_and(|n| n.session == session) {
            gone.push(key);
        }
    }
    store.delete_many(&gone).await?;
    Ok(gone.len())
}

/// Every record of the store, with its key (a name under `shares/` that is not a record's is
/// left out), oldest first.
///
/// # Errors
/// The store's.
pub async fn list(store: &Store) -> Result<Vec<(String, Record)>, Error> {
    let mut out = Vec::new();
    for key in store.list(DIR).await? {
        if !is_key(&key) {
            continue;
        }
        if let Some(record) = read(store, &key).await? {
            out.push((key, record));
        }
    }
    out.sort_by_key(|(_, r)| r.created);
    Ok(out)
}

/// Revoke the link whose record is `key` at `now` (Unix microseconds); false when there is no
/// such record. A link revoked already keeps its first time.
///
/// # Errors
/// The store's.
pub async fn revoke(store: &Store, key: &str, now: i64) -> Result<bool, Error> {
    let Some(mut record) = read(store, key).await? else {
        return Ok(false);
    };
    if record.revoked.is_none() {
        record.revoked = Some(now);
        store
            .put_versioned(key, record.to_bytes(), Write::Overwrite)
            .await?;
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: i64 = 86_400_000_000;

    #[test]
    fn a_secret_is_128_random_bits_and_its_key_a_hash_of_it() {
        let a = Secret::new().unwrap();
        let b = Secret::new().unwrap();
        assert_ne!(a, b);
        assert_eq!(a.as_str().len(), 22);
        assert_eq!(Secret::parse(a.as_str()), Some(a.clone()));
        assert!(is_key(&a.key()));
        assert!(!a.key().contains(a.as_str()));
        assert_ne!(a.key(), b.key());
        assert!(!format!("{a:?}").contains(a.as_str()));
        // Anything but a canonical 16-byte base64url text is no secret.
        for text in [
            "",
            "short",
            &a.as_str()[..21],
            &format!("{}A", a.as_str()),
            "../../../../etc/passwd",
            "AAAAAAAAAAAAAAAAAAAAA/",
            "AAAAAAAAAAAAAAAAAAAAAB",
        ] {
            assert_eq!(Secret::parse(text), None, "{text:?}");
        }
        for rel in [
            "shares/x",
            "shares/../leases/x",
            &format!("shares/{}", "A".repeat(64)),
            &format!("other/{}", "a".repeat(64)),
        ] {
            assert!(!is_key(rel), "{rel}");
        }
    }

    #[test]
    fn a_link_lasts_its_life_at_most_thirty_days_then_is_expired() {
        let now = 1_795_000_000_000_000;
        assert_eq!(expiry(now, DEFAULT_LIFE).ok(), Some(now + 7 * DAY));
        assert_eq!(expiry(now, MAX_LIFE).ok(), Some(now + 30 * DAY));
        assert!(expiry(now, MAX_LIFE + Duration::from_secs(1)).is_err());
        assert!(expiry(now, Duration::ZERO).is_err());
        let record = Record::new("s1", now, Duration::from_secs(3600), "h-1", "me").unwrap();
        // On an injected clock, over its life and past it.
        let hour = 3_600_000_000;
        for (at, state) in [
            (now, State::Active),
            (now + hour - 1, State::Active),
            (now + hour, State::Expired),
            (now + 40 * DAY, State::Expired),
        ] {
            assert_eq!(record.state(at), state, "at +{}", at - now);
        }
        let revoked = Record {
            revoked: Some(now + 1),
            ..record.clone()
        };
        assert_eq!(revoked.state(now + 2), State::Revoked);
        assert_eq!(revoked.state(now + 40 * DAY), State::Revoked);
        // Stored and read back; another format, or garbage, is no record.
        assert_eq!(Record::parse(&record.to_bytes()), Some(record.clone()));
        let other = Record {
            share: 2,
            ..record.clone()
        };
        assert_eq!(Record::parse(&other.to_bytes()), None);
        assert_eq!(Record::parse(b"not json"), None);
        let text = String::from_utf8(record.to_bytes().to_vec()).unwrap();
        assert!(text.contains("\"session\":\"s1\"") && text.contains("\"revoked\":null"));
    }
}
