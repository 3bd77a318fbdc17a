//! The journal store: directory layout, session keys, private files and the catalog.
//!
//! ```text
//! <root>/                        0700
//!   sessions/<key>/<segment>     one segment per proxy run that touched the session
//!   connections/<segment>        one per proxy run
//!   catalog.ndjson               derived index: one JSON line per segment opened / closed
//! ```
//!
//! `<key>` is an injective, filesystem-safe encoding of the session ID ([`session_key`]): no ID
//! can name a path outside `sessions/`, and two distinct IDs never share a key, even on
//! case-insensitive file systems. The catalog is append-only (each entry is one `write(2)` on an
//! `O_APPEND` file, so concurrent proxies never interleave inside a line) and can be rebuilt from
//! the segments, which are the truth.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::event::Event;
use super::format::{Body, Header};
use super::reader::SegmentReader;
use super::writer::SegmentWriter;
use crate::wire::Side;

/// File name suffix of segments.
pub const SEGMENT_SUFFIX: &str = ".acpj.zst";
/// Longest encoded session ID kept readable; longer ones are hashed.
const MAX_READABLE_KEY: usize = 120;

/// Encode a session ID as a directory name.
///
/// Bytes `[a-z0-9_-]` are kept, every other byte becomes `%XX` (upper-case hex), and the
/// result is prefixed with `s`: `"sess_1"` → `ssess_1`, `"../x"` → `s%2E%2E%2Fx`, `""` → `s`,
/// `"ABC"` → `s%41%42%43`. Keys that would be longer than 120 bytes become `h` + the SHA-256 of
/// the ID in hex. Both forms are injective and never contain `/`, `.` or upper-case letters.
pub fn session_key(id: &str) -> String {
    let mut key = String::with_capacity(id.len() + 1);
    key.push('s');
    for &b in id.as_bytes() {
        if b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-' {
            key.push(b as char);
        } else {
            key.push_str(&format!("%{b:02X}"));
        }
        if key.len() > MAX_READABLE_KEY {
            let digest = Sha256::digest(id.as_bytes());
            let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
            return format!("h{hex}");
        }
    }
    key
}

/// Create a directory (and parents) with mode 0700, tightening it if it already exists.
///
/// # Errors
/// I/O errors.
pub fn create_private_dir(path: &Path) -> io::Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)?;
    let perms = fs::metadata(path)?.permissions();
    if perms.mode() & 0o077 != 0 {
        fs::set_permissions(path, fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// Create a new file (it must not exist) with mode 0600 whatever the umask.
///
/// # Errors
/// I/O errors; `AlreadyExists` when the path is taken.
pub fn create_private_file(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.set_permissions(fs::Permissions::from_mode(0o600))?;
    Ok(file)
}

/// The names a segment of run `stem` may take, in order: `<stem>.acpj.zst`,
/// `<stem>.1.acpj.zst`, …
fn segment_names(stem: &str) -> impl Iterator<Item = String> + '_ {
    (0u32..).map(move |n| match n {
        0 => format!("{stem}{SEGMENT_SUFFIX}"),
        n => format!("{stem}.{n}{SEGMENT_SUFFIX}"),
    })
}

/// A new unnamed file in `dir`, mode 0600 (`O_TMPFILE`); `None` where the file system or the
/// kernel cannot make one.
#[cfg(target_os = "linux")]
fn unnamed_private_file(dir: &Path) -> io::Result<Option<File>> {
    match OpenOptions::new()
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_TMPFILE)
        .open(dir)
    {
        Ok(file) => {
            file.set_permissions(fs::Permissions::from_mode(0o600))?;
            Ok(Some(file))
        }
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::EOPNOTSUPP | libc::EISDIR | libc::EINVAL)
            ) =>
        {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// Give an unnamed file the name `to` (`AlreadyExists` when it is taken).
#[cfg(target_os = "linux")]
fn link_unnamed(file: &File, to: &Path) -> io::Result<()> {
    use std::ffi::CString;
    use std::os::fd::AsRawFd;
    use std::os::unix::ffi::OsStrExt;
    let from = CString::new(format!("/proc/self/fd/{}", file.as_raw_fd()))?;
    let to = CString::new(to.as_os_str().as_bytes())?;
    // SAFETY: both paths are valid NUL-terminated strings that outlive the call.
    let linked = unsafe {
        libc::linkat(
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            libc::AT_SYMLINK_FOLLOW,
        )
    };
    if linked == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// One line of the catalog.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(tag = "ev", rename_all = "lowercase")]
pub enum CatalogEntry {
    /// A session segment was created.
    Open {
        /// The session ID.
        session: String,
        /// The segment's path relative to the store root.
        segment: String,
        /// Working directory, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cwd: Option<String>,
        /// The agent command line (as in the segment header).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agent: Option<String>,
        /// Unix microseconds.
        t: i64,
    },
    /// The proxy continued the session on a new agent-side session (`session/new` underneath
    /// a `session/load`): the agent knows it as `agent`.
    Alias {
        /// The client-facing session ID.
        session: String,
        /// The agent-side session ID.
        agent: String,
        /// Unix microseconds.
        t: i64,
    },
    /// Session metadata from a `session_info_update` (a patch: absent fields are unchanged).
    Info {
        /// The session ID.
        session: String,
        /// New title.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        /// New `updatedAt` (ISO 8601, as the agent sent it).
        #[serde(default, rename = "updatedAt", skip_serializing_if = "Option::is_none")]
        updated_at: Option<String>,
        /// Unix microseconds.
        t: i64,
    },
    /// The client deleted the session (`session/delete`): hidden from lists, kept on disk.
    Delete {
        /// The session ID.
        session: String,
        /// Unix microseconds.
        t: i64,
    },
    /// A session segment was closed cleanly.
    Close {
        /// The segment's path relative to the store root.
        segment: String,
        /// Records in the segment (the end marker included).
        records: u64,
        /// File size.
        bytes: u64,
        /// Prompt turns in the segment.
        #[serde(default)]
        turns: u64,
        /// Unix microseconds.
        t: i64,
    },
}

/// What `list` shows for one session.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SessionSummary {
    /// The session ID.
    pub session: String,
    /// Working directory, when known.
    pub cwd: Option<String>,
    /// When its first segment was opened, Unix microseconds.
    pub started: i64,
    /// When its last segment was opened or closed, Unix microseconds.
    pub updated: i64,
    /// Records across its segments (from the catalog, or counted for unclosed segments).
    pub records: u64,
    /// Bytes on disk across its segments.
    pub bytes: u64,
    /// Segment paths relative to the store root, oldest first.
    pub segments: Vec<String>,
    /// True while a segment has no close entry (being written, or its proxy was killed).
    pub open: bool,
    /// The latest title from the agent's `session_info_update`.
    pub title: Option<String>,
    /// The latest `updatedAt` from the agent, if it sent one.
    pub updated_at: Option<String>,
    /// Agent-side IDs the session was continued under.
    pub agent_ids: Vec<String>,
    /// Deleted by the client (`session/delete`).
    pub deleted: bool,
    /// The agent command line of its latest segment.
    pub agent: Option<String>,
    /// Prompt turns across its segments.
    pub turns: u64,
}

/// A journal store rooted at a directory.
#[derive(Clone, Debug)]
pub struct Store {
    root: PathBuf,
}

impl Store {
    /// A store at `root` (nothing is created until [`Store::create_dirs`]).
    pub fn new(root: impl Into<PathBuf>) -> Store {
        Store { root: root.into() }
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Create the store's directories with private permissions.
    ///
    /// # Errors
    /// I/O errors.
    pub fn create_dirs(&self) -> io::Result<()> {
        create_private_dir(&self.root)?;
        create_private_dir(&self.root.join("sessions"))?;
        create_private_dir(&self.root.join("connections"))
    }

    /// The directory holding a session's segments.
    pub fn session_dir(&self, session: &str) -> PathBuf {
        self.root.join("sessions").join(session_key(session))
    }

    /// Create a new, unique segment path in `dir` named after `stem`; creates `dir` if needed.
    /// Returns the path and the open file.
    ///
    /// # Errors
    /// I/O errors.
    pub fn create_segment(&self, dir: &Path, stem: &str) -> io::Result<(PathBuf, File)> {
        create_private_dir(dir)?;
        for name in segment_names(stem) {
            let path = dir.join(name);
            match create_private_file(&path) {
                Ok(file) => return Ok((path, file)),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
        unreachable!("u32 range exhausted")
    }

    /// Create a new segment in `dir` (created if needed) named after `stem` and write its
    /// header, so that the file appears under its name only with a whole header: on Linux it
    /// is made unnamed (`O_TMPFILE`) and linked once the header is written, so a proxy killed
    /// meanwhile (even with SIGKILL) or a failed write (disk full) leaves nothing behind.
    /// Elsewhere, or where the file system cannot make or link unnamed files, a file whose
    /// header could not be written is removed.
    ///
    /// # Errors
    /// I/O errors; nothing is left in `dir` then.
    pub fn create_segment_writer(
        &self,
        dir: &Path,
        stem: &str,
        header: &Header,
    ) -> io::Result<SegmentWriter> {
        create_private_dir(dir)?;
        #[cfg(target_os = "linux")]
        if let Some(file) = unnamed_private_file(dir)? {
            let handle = file.try_clone()?;
            let mut writer = SegmentWriter::with_file(file, dir, header)?;
            for name in segment_names(stem) {
                let path = dir.join(name);
                match link_unnamed(&handle, &path) {
                    Ok(()) => {
                        writer.set_path(path);
                        return Ok(writer);
                    }
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                    // No /proc, or linking refused: make it the plain way below.
                    Err(_) => break,
                }
            }
        }
        let (path, file) = self.create_segment(dir, stem)?;
        SegmentWriter::with_file(file, &path, header).inspect_err(|_| {
            let _ = fs::remove_file(&path);
        })
    }

    /// `path` relative to the root, as stored in the catalog.
    pub fn relative(&self, path: &Path) -> String {
        path.strip_prefix(&self.root)
            .unwrap_or(path)
            .to_string_lossy()
            .into_owned()
    }

    /// Append one entry to the catalog with a single `write(2)`.
    ///
    /// # Errors
    /// I/O errors.
    pub fn append_catalog(&self, entry: &CatalogEntry) -> io::Result<()> {
        let mut line = serde_json::to_vec(entry).expect("catalog entries serialize");
        line.push(b'\n');
        let mut file = OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .open(self.root.join("catalog.ndjson"))?;
        file.write_all(&line)
    }

    /// Every session in the store, newest first, from the catalog (rebuilt from the segments if
    /// the catalog is missing). Segments never closed are read to count their records.
    ///
    /// # Errors
    /// I/O errors reading the catalog.
    pub fn sessions(&self) -> io::Result<Vec<SessionSummary>> {
        self.sessions_with(true)
    }

    /// Like [`Store::sessions`]; with `count_open` false, segments never closed are not read
    /// (their record counts are then 0), which keeps this fast on a busy store.
    ///
    /// # Errors
    /// I/O errors reading the catalog.
    pub fn sessions_with(&self, count_open: bool) -> io::Result<Vec<SessionSummary>> {
        let entries = match fs::read(self.root.join("catalog.ndjson")) {
            Ok(bytes) => bytes
                .split(|b| *b == b'\n')
                .filter_map(|line| serde_json::from_slice::<CatalogEntry>(line).ok())
                .collect(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => self.scan_segments()?,
            Err(e) => return Err(e),
        };
        let mut by_id: BTreeMap<String, SessionSummary> = BTreeMap::new();
        let mut closed: BTreeMap<String, (u64, u64, u64, i64)> = BTreeMap::new();
        for entry in entries {
            match entry {
                CatalogEntry::Open {
                    session,
                    segment,
                    cwd,
                    agent,
                    t,
                } => {
                    let s = by_id
                        .entry(session.clone())
                        .or_insert_with(|| SessionSummary {
                            session,
                            cwd: None,
                            started: t,
                            updated: t,
                            records: 0,
                            bytes: 0,
                            segments: vec![],
                            open: false,
                            title: None,
                            updated_at: None,
                            agent_ids: vec![],
                            deleted: false,
                            agent: None,
                            turns: 0,
                        });
                    if agent.is_some() {
                        s.agent = agent;
                    }
                    if cwd.is_some() {
                        s.cwd = cwd;
                    }
                    // A session opened again after a delete (the client loaded it) is back.
                    s.deleted = false;
                    s.updated = s.updated.max(t);
                    s.segments.push(segment);
                }
                CatalogEntry::Close {
                    segment,
                    records,
                    bytes,
                    turns,
                    t,
                } => {
                    closed.insert(segment, (records, bytes, turns, t));
                }
                CatalogEntry::Alias { session, agent, .. } => {
                    if let Some(s) = by_id.get_mut(&session) {
                        s.agent_ids.push(agent);
                    }
                }
                CatalogEntry::Info {
                    session,
                    title,
                    updated_at,
                    t,
                } => {
                    if let Some(s) = by_id.get_mut(&session) {
                        s.title = title.or(s.title.take());
                        s.updated_at = updated_at.or(s.updated_at.take());
                        s.updated = s.updated.max(t);
                    }
                }
                CatalogEntry::Delete { session, .. } => {
                    if let Some(s) = by_id.get_mut(&session) {
                        s.deleted = true;
                    }
                }
            }
        }
        // Segments removed by `prune` (or by hand) are gone from the list.
        by_id.retain(|_, s| {
            s.segments.retain(|seg| self.root.join(seg).exists());
            !s.segments.is_empty()
        });
        for s in by_id.values_mut() {
            for segment in &s.segments {
                let path = self.root.join(segment);
                if let Some((records, bytes, turns, t)) = closed.get(segment) {
                    s.records += records;
                    s.bytes += bytes;
                    s.turns += turns;
                    s.updated = s.updated.max(*t);
                } else {
                    s.open = true;
                    s.bytes += fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
                    if !count_open {
                        continue;
                    }
                    if let Ok(reader) = SegmentReader::open(&path) {
                        let scan = SegmentScan::of(reader);
                        s.records += scan.records;
                        s.turns += scan.turns;
                        s.updated = s.updated.max(scan.last);
                    }
                }
            }
        }
        let mut list: Vec<SessionSummary> = by_id.into_values().collect();
        list.sort_by(|a, b| b.started.cmp(&a.started).then(a.session.cmp(&b.session)));
        Ok(list)
    }

    /// Catalog entries rebuilt from the session segments themselves (headers, and records for
    /// counts, titles and aliases).
    fn scan_segments(&self) -> io::Result<Vec<CatalogEntry>> {
        let mut entries = Vec::new();
        let dirs = match fs::read_dir(self.root.join("sessions")) {
            Ok(d) => d,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(entries),
            Err(e) => return Err(e),
        };
        for dir in dirs {
            let Ok(files) = segments_in(&dir?.path()) else {
                continue;
            };
            for path in files {
                let Ok(reader) = SegmentReader::open(&path) else {
                    continue;
                };
                let header = reader.header().clone();
                let Some(session) = header.session.clone() else {
                    continue;
                };
                let segment = self.relative(&path);
                entries.push(CatalogEntry::Open {
                    session: session.clone(),
                    segment: segment.clone(),
                    cwd: header.cwd.clone(),
                    agent: Some(header.argv.join(" ")),
                    t: header.started,
                });
                let scan = SegmentScan::of(reader);
                if let Some(title) = scan.title {
                    entries.push(CatalogEntry::Info {
                        session: session.clone(),
                        title: Some(title),
                        updated_at: None,
                        t: scan.last,
                    });
                }
                for agent in scan.aliases {
                    entries.push(CatalogEntry::Alias {
                        session: session.clone(),
                        agent,
                        t: scan.last,
                    });
                }
                if scan.clean {
                    let bytes = fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
                    entries.push(CatalogEntry::Close {
                        segment,
                        records: scan.records,
                        bytes,
                        turns: scan.turns,
                        t: scan.last,
                    });
                }
            }
        }
        Ok(entries)
    }

    /// Rewrite the catalog from the segments (after it was lost or damaged). Deletions recorded
    /// only in the old catalog are forgotten.
    ///
    /// # Errors
    /// I/O errors.
    pub fn rebuild_catalog(&self) -> io::Result<usize> {
        let entries = self.scan_segments()?;
        let tmp = self
            .root
            .join(format!("catalog.ndjson.{}.tmp", std::process::id()));
        let _ = fs::remove_file(&tmp);
        let mut file = create_private_file(&tmp)?;
        for entry in &entries {
            let mut line = serde_json::to_vec(entry).expect("catalog entries serialize");
            line.push(b'\n');
            file.write_all(&line)?;
        }
        file.sync_all()?;
        fs::rename(&tmp, self.root.join("catalog.ndjson"))?;
        Ok(entries.len())
    }

    /// True while the proxy that writes `segment` (relative to the root) is running: the pid in
    /// the segment's name (`<time>-<pid>[.n].acpj.zst`) is an `acp-journal` process.
    pub fn writer_alive(&self, segment: &str) -> bool {
        let name = segment.rsplit('/').next().unwrap_or(segment);
        let stem = name.strip_suffix(SEGMENT_SUFFIX).unwrap_or(name);
        let run = stem.split('.').take(2).collect::<Vec<_>>().join(".");
        let Some(pid) = run.rsplit('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            return false;
        };
        fs::read_to_string(format!("/proc/{pid}/comm"))
            .is_ok_and(|comm| comm.trim() == "acp-journal")
    }

    /// Resolve a command-line `<session>` argument: a session ID, a path to a segment file or
    /// a directory of segments, or a unique prefix of a session ID, in that order. Returns the
    /// segment paths. A session ID always means that session, even when a file of the same
    /// name exists: an agent-chosen ID such as `../../etc/passwd` never names a file.
    ///
    /// # Errors
    /// A message naming the problem: no match, or an ambiguous prefix with its candidates.
    pub fn resolve(&self, arg: &str) -> Result<Vec<PathBuf>, String> {
        let sessions = self.sessions_with(false);
        let pick = |s: &SessionSummary| -> Vec<PathBuf> {
            s.segments.iter().map(|seg| self.root.join(seg)).collect()
        };
        if let Some(s) = sessions.iter().flatten().find(|s| s.session == arg) {
            return Ok(pick(s));
        }
        let path = Path::new(arg);
        if path.is_file() {
            return Ok(vec![path.to_path_buf()]);
        }
        if path.is_dir() {
            return segments_in(path).map_err(|e| format!("{arg}: {e}"));
        }
        let sessions =
            sessions.map_err(|e| format!("reading the store {}: {e}", self.root.display()))?;
        let matches: Vec<&SessionSummary> = sessions
            .iter()
            .filter(|s| s.session.starts_with(arg))
            .collect();
        match matches.as_slice() {
            [] => Err(format!(
                "no session or journal file {arg:?} in {} (see `acp-journal list`)",
                self.root.display()
            )),
            [one] => Ok(pick(one)),
            many => Err(format!(
                "session prefix {arg:?} is ambiguous ({} matches: {}); use more characters",
                many.len(),
                many.iter()
                    .map(|s| s.session.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }
}

/// What reading a whole segment tells about it.
struct SegmentScan {
    records: u64,
    turns: u64,
    last: i64,
    title: Option<String>,
    aliases: Vec<String>,
    clean: bool,
}

impl SegmentScan {
    /// Read the rest of a segment whose header `reader` has read.
    fn of(mut reader: SegmentReader<fs::File>) -> SegmentScan {
        let mut scan = SegmentScan {
            records: 0,
            turns: 0,
            last: reader.header().started,
            title: None,
            aliases: vec![],
            clean: false,
        };
        for record in reader.by_ref() {
            scan.last = scan.last.max(record.unix_us);
            match &record.body {
                Body::Event(Event::SegmentEnd { .. }) => continue,
                Body::Event(Event::SessionMapped { agent_session }) => {
                    scan.aliases.push(agent_session.clone());
                }
                Body::Message { from, payload } if !payload.proxy => {
                    let finder =
                        |needle: &[u8]| memchr::memmem::find(&payload.bytes, needle).is_some();
                    if crate::wire::envelope::is_prompt_turn(*from, false, &payload.bytes) {
                        scan.turns += 1;
                    }
                    if *from == Side::Agent && finder(b"\"session_info_update\"") {
                        let msg: serde_json::Value =
                            serde_json::from_slice(&payload.bytes).unwrap_or_default();
                        if let Some(title) = msg["params"]["update"]["title"].as_str() {
                            scan.title = Some(title.to_string());
                        }
                    }
                }
                _ => {}
            }
            scan.records += 1;
        }
        scan.clean = reader.tail() == Some(&super::reader::Tail::Clean);
        scan
    }
}

/// Every segment file directly inside `dir`, sorted by name.
///
/// # Errors
/// I/O errors.
pub fn segments_in(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut out: Vec<PathBuf> = fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(SEGMENT_SUFFIX))
        .collect();
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_safe_and_injective() {
        let ids = [
            "", "a", "A", "../../x", "..", ".", "a/b", "a%2Fb", "s", "sess_1", "x\0y", "x\ny", "é",
            "aB", "ab",
        ];
        let mut seen = std::collections::HashSet::new();
        for id in ids {
            let key = session_key(id);
            assert!(
                !key.contains('/') && !key.contains('.') && !key.contains('\0'),
                "{key}"
            );
            assert!(
                seen.insert(key.to_lowercase()),
                "collision for {id:?}: {key}"
            );
        }
        let long = "x".repeat(10_000);
        let key = session_key(&long);
        assert!(key.starts_with('h') && key.len() == 65);
        assert_ne!(key, session_key(&"x".repeat(10_001)));
    }

    #[test]
    fn private_permissions_even_with_permissive_umask() {
        let dir = tempfile::tempdir().unwrap();
        let old = unsafe { libc::umask(0) };
        let store = Store::new(dir.path().join("store"));
        store.create_dirs().unwrap();
        let (path, _) = store
            .create_segment(&store.session_dir("x"), "seg")
            .unwrap();
        let header = crate::journal::writer::tests::header();
        let made = store
            .create_segment_writer(&store.session_dir("y"), "seg", &header)
            .unwrap();
        let again = store
            .create_segment_writer(&store.session_dir("y"), "seg", &header)
            .unwrap();
        unsafe { libc::umask(old) };
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(store.root()), 0o700);
        assert_eq!(mode(&store.session_dir("x")), 0o700);
        assert_eq!(mode(&path), 0o600);
        // Segments made whole: named as asked (the next free name when taken), private, and
        // already holding their header.
        assert_eq!(made.path(), store.session_dir("y").join("seg.acpj.zst"));
        assert_eq!(again.path(), store.session_dir("y").join("seg.1.acpj.zst"));
        for writer in [made, again] {
            assert_eq!(mode(writer.path()), 0o600);
            let reader = SegmentReader::open(writer.path()).unwrap();
            assert_eq!(reader.header().run, header.run);
        }
        assert_eq!(segments_in(&store.session_dir("y")).unwrap().len(), 2);
    }
}
