//! Object names in the shared store, and how a file is read back from its parts (pure).
//!
//! ```text
//! <prefix>/
//!   sessions/<key>/<segment>/<start>-<end>   the bytes [start, end) of a session segment
//!   sessions/<key>/<segment>/fence-<end>     its writer was fenced: nothing past `end` counts
//!   sessions/<key>/<segment>/epoch-<epoch>   the lease epoch it was written under
//!   connections/<segment>/<start>-<end>      the bytes of a connection segment
//!   hosts/<host>/catalog.ndjson/<start>-<end>  a host's catalog, zstd-compressed per part
//!   leases/<key>/lease                        the session's lease, replaced by compare-and-swap
//!   leases/<key>/epoch-<n>                    who took epoch n, create-only
//!   leases/<key>/<seq>                        (the earlier layout's lease records: read for epochs)
//!   probe/<host>-<nonce>                      the start-up check of conditional writes
//!   erased/<key>                              the session was erased: shipped and read no more
//!   index/…                                   the team index (`fleet::index`)
//! ```
//!
//! A local file (`sessions/<key>/<run>.acpj.zst`, relative to the journal directory) is kept as
//! the *directory* of the same name in the store, holding immutable **parts**, each named by the
//! byte range of the local file it holds (16 hex digits each side). Parts may overlap (a
//! compaction writes one part over several, then deletes them; two processes may ship the same
//! range) — every copy of a byte is the same byte, since the local file only grows. [`parts_to_read`]
//! picks, from whatever parts a listing returns, a run of parts that covers the file from its
//! first byte as far as it goes.

use std::fmt;

/// A session's ID: the name its client and its agent use (`sessionId`), which a segment's
/// header and the catalog record; any text, so never an object's name itself — its
/// [`SessionKey`] is. Borrowed: made where an ID is read, at no cost.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionId<'a>(&'a str);

impl<'a> SessionId<'a> {
    /// The session whose ID is `id`.
    pub fn new(id: &'a str) -> SessionId<'a> {
        SessionId(id)
    }

    /// The ID as the client and the agent write it.
    pub fn as_str(self) -> &'a str {
        self.0
    }
}

/// As the ID's text is (`{:?}` quotes it, as messages always have).
impl fmt::Debug for SessionId<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.0, f)
    }
}

impl fmt::Display for SessionId<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

/// A session's key: its name in the store (`sessions/<key>/…`, `leases/<key>/…`,
/// `erased/<key>`) and in a journal directory, made from its ID ([`SessionKey::of`]) — the ID
/// itself, the name its client and agent use, is no object name (it may hold any character).
/// Neither converts into the other by mistake: a key is neither a `str` nor a [`SessionId`].
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionKey(String);

impl SessionKey {
    /// The key of the session whose ID is `session` (`journal::dir::session_key`).
    pub fn of(session: SessionId<'_>) -> SessionKey {
        SessionKey(crate::journal::dir::session_key(session.as_str()))
    }

    /// A key as a name in the store gives it (`erased/<key>`): unchecked, it names the session
    /// whose key it is, if any.
    pub fn named(name: &str) -> SessionKey {
        SessionKey(name.to_string())
    }

    /// The key as it is written in names.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SessionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Whether `session` (an ID) is one of the erased sessions `keys` (the `erased/<key>` markers
/// listed).
pub fn is_erased(keys: &std::collections::HashSet<SessionKey>, session: SessionId<'_>) -> bool {
    !keys.is_empty() && keys.contains(&SessionKey::of(session))
}

/// Hex digits of an offset in a part name.
const OFFSET_DIGITS: usize = 16;

/// The part of a file holding bytes `[start, end)`, relative to the file's directory.
pub fn part_name(start: u64, end: u64) -> String {
    format!("{start:016x}-{end:016x}")
}

/// The name of the fence of a segment whose writer lost its lease at `end` bytes.
pub fn fence_name(end: u64) -> String {
    format!("fence-{end:016x}")
}

/// The marker recording the lease epoch under which a session segment was written.
pub fn epoch_name(epoch: u64) -> String {
    format!("epoch-{epoch:016x}")
}

/// Where a host's catalog lives in the store, as a file name relative to the prefix.
pub fn host_catalog(host: &str) -> String {
    format!("hosts/{host}/catalog.ndjson")
}

/// The directory of a session's lease records.
pub fn lease_dir(key: &SessionKey) -> String {
    format!("leases/{key}")
}

/// The name of a session's lease object in its lease directory.
pub const LEASE_OBJECT: &str = "lease";

/// A session's lease object.
pub fn lease_object(key: &SessionKey) -> String {
    format!("leases/{key}/{LEASE_OBJECT}")
}

/// The record of who took epoch `epoch` of a session.
pub fn epoch_record(key: &SessionKey, epoch: u64) -> String {
    format!("leases/{key}/{}", epoch_name(epoch))
}

/// The epoch an epoch record's name gives (the same form as a segment's marker).
pub fn parse_epoch_record(name: &str) -> Option<u64> {
    parse_epoch_marker(name)
}

/// The epoch a segment's `epoch-<n>` marker names.
pub fn parse_epoch_marker(name: &str) -> Option<u64> {
    let hex = name.strip_prefix("epoch-")?;
    (hex.len() == OFFSET_DIGITS)
        .then(|| u64::from_str_radix(hex, 16).ok())
        .flatten()
}

/// The run that wrote a segment, from its name: `<run>.acpj.zst`, or `<run>.<n>.acpj.zst`
/// when the run has several segments of the session.
pub fn run_of_segment(name: &str) -> Option<&str> {
    let stem = name.strip_suffix(crate::journal::dir::SEGMENT_SUFFIX)?;
    match stem.rsplit_once('.') {
        Some((run, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => Some(run),
        _ => Some(stem),
    }
}

/// A lease record's name: its sequence number, so that names sort in order.
pub fn lease_name(seq: u64) -> String {
    format!("{seq:016x}")
}

/// Parse a lease record's name.
pub fn parse_lease_name(name: &str) -> Option<u64> {
    (name.len() == OFFSET_DIGITS)
        .then(|| u64::from_str_radix(name, 16).ok())
        .flatten()
}

/// Whether parts of this file are compressed by the shipper (the catalog is plain text; the
/// segments are zstd already).
pub fn compressed(file: &str) -> bool {
    file.ends_with(".ndjson")
}

/// One object under a file's directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    /// Bytes `[start, end)`.
    Part {
        /// First byte.
        start: u64,
        /// One past the last byte.
        end: u64,
    },
    /// The file ends at `end` for readers: its writer was fenced there.
    Fence {
        /// Where the file ends.
        end: u64,
    },
    /// The file was written under lease epoch `epoch`.
    Epoch {
        /// The epoch.
        epoch: u64,
    },
}

/// Parse the last component of an object under a file's directory.
pub fn parse_entry(name: &str) -> Option<Entry> {
    let hex = |s: &str| {
        (s.len() == OFFSET_DIGITS)
            .then(|| u64::from_str_radix(s, 16).ok())
            .flatten()
    };
    if let Some(end) = name.strip_prefix("fence-") {
        return hex(end).map(|end| Entry::Fence { end });
    }
    if let Some(epoch) = parse_epoch_marker(name) {
        return Some(Entry::Epoch { epoch });
    }
    let (start, end) = name.split_once('-')?;
    let (start, end) = (hex(start)?, hex(end)?);
    (start < end).then_some(Entry::Part { start, end })
}

/// Split an object's path (relative to the prefix) into its file and its entry.
pub fn split_object(path: &str) -> Option<(&str, Entry)> {
    let (file, name) = path.rsplit_once('/')?;
    Some((file, parse_entry(name)?))
}

/// One step of [`parts_to_read`]: read part `[start, end)` from byte `from` (`start <= from < end`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    /// The part's first byte.
    pub start: u64,
    /// One past the part's last byte.
    pub end: u64,
    /// The first byte wanted from it.
    pub from: u64,
}

/// The parts to read, in order, for the file's bytes from `from` on: at each position the
/// part reaching furthest among those that hold it. Stops at the first gap and at the earliest
/// fence. Returns the steps and where the readable file ends.
pub fn parts_to_read(entries: &[Entry], from: u64) -> (Vec<Step>, u64) {
    let fence = entries
        .iter()
        .filter_map(|e| match e {
            Entry::Fence { end } => Some(*end),
            Entry::Part { .. } | Entry::Epoch { .. } => None,
        })
        .min();
    let mut parts: Vec<(u64, u64)> = entries
        .iter()
        .filter_map(|e| match e {
            Entry::Part { start, end } => Some((*start, *end)),
            Entry::Fence { .. } | Entry::Epoch { .. } => None,
        })
        .collect();
    parts.sort_unstable();
    let limit = fence.unwrap_or(u64::MAX);
    let mut steps = Vec::new();
    let mut at = from;
    // Sweep the parts by start, keeping the one reaching furthest among those begun by `at`.
    let mut best: Option<(u64, u64)> = None;
    let mut i = 0;
    while at < limit {
        while i < parts.len() && parts[i].0 <= at {
            if best.is_none_or(|b| parts[i].1 > b.1) {
                best = Some(parts[i]);
            }
            i += 1;
        }
        let Some((start, end)) = best.filter(|b| b.1 > at) else {
            break;
        };
        let end = end.min(limit);
        steps.push(Step {
            start,
            end,
            from: at,
        });
        at = end;
    }
    (steps, at.max(from))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(start: u64, end: u64) -> Entry {
        Entry::Part { start, end }
    }

    #[test]
    fn names_parse_back() {
        assert_eq!(part_name(0, 0x1f), "0000000000000000-000000000000001f");
        assert_eq!(parse_entry(&part_name(5, 9)), Some(part(5, 9)));
        assert_eq!(parse_entry(&fence_name(7)), Some(Entry::Fence { end: 7 }));
        for bad in [
            "",
            "x",
            "0-1",
            "0000000000000009-0000000000000005",
            "fence-1",
        ] {
            assert_eq!(parse_entry(bad), None, "{bad}");
        }
        assert_eq!(
            split_object("sessions/sa/r.acpj.zst/0000000000000000-0000000000000004"),
            Some(("sessions/sa/r.acpj.zst", part(0, 4)))
        );
        assert_eq!(parse_lease_name(&lease_name(42)), Some(42));
        assert_eq!(parse_entry(&epoch_name(3)), Some(Entry::Epoch { epoch: 3 }));
        assert_eq!(parse_epoch_record(&epoch_name(7)), Some(7));
        assert_eq!(parse_epoch_record("epoch-7"), None);
        assert_eq!(
            run_of_segment("20261121T214153.123456Z-4242.acpj.zst"),
            Some("20261121T214153.123456Z-4242")
        );
        assert_eq!(
            run_of_segment("20261121T214153.123456Z-4242.1.acpj.zst"),
            Some("20261121T214153.123456Z-4242")
        );
        assert_eq!(run_of_segment("catalog.ndjson"), None);
    }

    #[test]
    fn a_chain_covers_from_the_start_taking_the_longest_part() {
        let parts = [part(0, 10), part(10, 20), part(0, 15), part(20, 30)];
        let (steps, end) = parts_to_read(&parts, 0);
        assert_eq!(end, 30);
        assert_eq!(
            steps,
            [
                Step {
                    start: 0,
                    end: 15,
                    from: 0
                },
                Step {
                    start: 10,
                    end: 20,
                    from: 15
                },
                Step {
                    start: 20,
                    end: 30,
                    from: 20
                },
            ]
        );
        // From the middle, and past the end.
        assert_eq!(
            parts_to_read(&parts, 25).0,
            [Step {
                start: 20,
                end: 30,
                from: 25
            }]
        );
        assert_eq!(parts_to_read(&parts, 30), (vec![], 30));
    }

    #[test]
    fn a_chain_stops_at_a_gap_and_at_a_fence() {
        let (steps, end) = parts_to_read(&[part(0, 10), part(12, 20)], 0);
        assert_eq!((steps.len(), end), (1, 10));
        assert_eq!(parts_to_read(&[part(5, 10)], 0), (vec![], 0));
        let fenced = [part(0, 10), part(10, 20), Entry::Fence { end: 14 }];
        let (steps, end) = parts_to_read(&fenced, 0);
        assert_eq!(end, 14);
        assert_eq!(
            steps[1],
            Step {
                start: 10,
                end: 14,
                from: 10
            }
        );
        // A part wholly past the fence is never read.
        assert_eq!(
            parts_to_read(&[part(0, 4), part(4, 8), Entry::Fence { end: 4 }], 0).1,
            4
        );
    }

    #[test]
    fn unsorted_overlapping_parts_read_the_same() {
        let parts = [part(20, 30), part(0, 25), part(0, 10), part(10, 20)];
        let (steps, end) = parts_to_read(&parts, 0);
        assert_eq!(end, 30);
        assert_eq!(steps.len(), 2);
        assert_eq!(
            steps[0],
            Step {
                start: 0,
                end: 25,
                from: 0
            }
        );
        assert_eq!(
            steps[1],
            Step {
                start: 20,
                end: 30,
                from: 25
            }
        );
    }
}
