//! The journal directory: its layout, session keys and segment creation.
//!
//! ```text
//! <root>/                        0700
//!   sessions/<key>/<segment>     one segment per proxy run that touched the session
//!   connections/<segment>        one per proxy run
//!   catalog.ndjson               derived index of the sessions (kept above the journal)
//! ```
//!
//! `<key>` is an injective, filesystem-safe encoding of the session ID ([`session_key`]): no ID
//! can name a path outside `sessions/`, and two distinct IDs never share a key, even on
//! case-insensitive file systems.

use std::collections::HashSet;
use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::RwLock;
use sha2::{Digest, Sha256};

use super::format::Header;
use super::private::{create_private_dir, create_private_file};
#[cfg(target_os = "linux")]
use super::private::{link_unnamed, unnamed_private_file};
use super::writer::SegmentWriter;
use crate::hex;

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
            return format!("h{}", hex::encode(digest));
        }
    }
    key
}

/// The names a segment of run `stem` may take, in order: `<stem>.acpj.zst`,
/// `<stem>.1.acpj.zst`, …
fn segment_names(stem: &str) -> impl Iterator<Item = String> + '_ {
    (0u32..).map(move |n| match n {
        0 => format!("{stem}{SEGMENT_SUFFIX}"),
        n => format!("{stem}.{n}{SEGMENT_SUFFIX}"),
    })
}

/// A journal directory: its segments (`sessions/`, `connections/`) and `catalog.ndjson` under
/// one root.
#[derive(Clone, Debug)]
pub struct JournalDir {
    root: PathBuf,
    mirror: bool,
    /// In a mirror kept up to date, the segments whose writers (on other hosts) are live.
    live: Option<Arc<RwLock<HashSet<String>>>>,
}

impl JournalDir {
    /// The journal directory at `root` (nothing is created until [`JournalDir::create_dirs`]).
    pub fn new(root: impl Into<PathBuf>) -> JournalDir {
        JournalDir {
            root: root.into(),
            mirror: false,
            live: None,
        }
    }

    /// A local copy of part of a shared store (`--store`): its catalog lists every host's
    /// sessions, whose segments are here only once pulled, and whose writers run elsewhere.
    pub fn mirror(root: impl Into<PathBuf>) -> JournalDir {
        JournalDir {
            root: root.into(),
            mirror: true,
            live: None,
        }
    }

    /// This mirror, its live segments told by `live` (segment paths relative to the root, kept
    /// up to date by whoever refreshes the copy): what [`JournalDir::writer_alive`] answers.
    pub fn with_live(mut self, live: Arc<RwLock<HashSet<String>>>) -> JournalDir {
        self.live = Some(live);
        self
    }

    /// Whether this is a local copy of a shared store ([`JournalDir::mirror`]).
    pub fn is_mirror(&self) -> bool {
        self.mirror
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Create the journal directory and its subdirectories with private permissions.
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

    /// True while the proxy that writes `segment` (relative to the root) is running: the pid in
    /// the segment's name (`<time>-<pid>[.n].acpj.zst`) is an `acp-journal` process (in a
    /// [`JournalDir::mirror`]: what [`JournalDir::with_live`] was given says, else never).
    pub fn writer_alive(&self, segment: &str) -> bool {
        self.writer_alive_by(segment, acp_journal_running)
    }

    /// [`JournalDir::writer_alive`], whether a process of this host runs asked of `running`
    /// (given its pid) instead of `/proc`.
    pub fn writer_alive_by(&self, segment: &str, running: impl Fn(u32) -> bool) -> bool {
        if self.mirror {
            // Written on another host: no process here tells; the store's catalogs may.
            return self
                .live
                .as_ref()
                .is_some_and(|live| live.read().contains(segment));
        }
        let name = segment.rsplit('/').next().unwrap_or(segment);
        let stem = name.strip_suffix(SEGMENT_SUFFIX).unwrap_or(name);
        let run = stem.split('.').take(2).collect::<Vec<_>>().join(".");
        run.rsplit('-')
            .next()
            .and_then(|p| p.parse::<u32>().ok())
            .is_some_and(running)
    }
}

/// Whether process `pid` is an `acp-journal` on this machine.
pub fn acp_journal_running(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|comm| comm.trim() == "acp-journal")
}

/// A run's name, `<UTC time>-<pid>` (e.g. `20261121T214153.123456Z-4242`): sortable, unique
/// per process, and the stem of the run's segment files.
pub fn run_id(unix_us: i64, pid: u32) -> String {
    let ts = jiff::Timestamp::from_microsecond(unix_us).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    format!("{}-{pid}", ts.strftime("%Y%m%dT%H%M%S.%6fZ"))
}

/// Whether `name` is a plain segment file name: one component, printable, not hidden, ending
/// in `.acpj.zst`.
pub fn segment_name_ok(name: &str) -> bool {
    name.len() > SEGMENT_SUFFIX.len()
        && name.ends_with(SEGMENT_SUFFIX)
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_graphic() && b != b'/' && b != b'\\')
}

/// Whether `rel` (as a catalog or the shared store names it) is a segment of session
/// `session` in a journal directory: `sessions/<its key>/<segment name>`, nothing else — no
/// absolute path, no `..`, no other session's directory.
pub fn is_segment_of(rel: &str, session: &str) -> bool {
    let mut parts = rel.split('/');
    matches!(
        (parts.next(), parts.next(), parts.next(), parts.next()),
        (Some("sessions"), Some(key), Some(name), None)
            if key == session_key(session) && segment_name_ok(name)
    )
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
    #[test]
    fn a_segment_of_a_session_is_only_its_own_plain_file() {
        let key = super::session_key("sess_1");
        let ok = format!("sessions/{key}/20261127T100000.000000Z-7.acpj.zst");
        assert!(super::is_segment_of(&ok, "sess_1"));
        for bad in [
            "/proc/self/fd/18".to_string(),
            "/dev/stdin".to_string(),
            format!("/home/u/.local/share/acp-journal/{ok}"),
            format!("sessions/{key}/../{key}/x.acpj.zst"),
            format!("sessions/{}/x.acpj.zst", super::session_key("other")),
            format!("sessions/{key}/.x.acpj.zst"),
            format!("sessions/{key}/x.txt"),
            format!("sessions/{key}/a/x.acpj.zst"),
            "connections/x.acpj.zst".to_string(),
        ] {
            assert!(!super::is_segment_of(&bad, "sess_1"), "{bad}");
        }
    }

    use super::*;
    use crate::journal::SegmentReader;
    use std::os::unix::fs::PermissionsExt;

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
        let journals = JournalDir::new(dir.path().join("store"));
        journals.create_dirs().unwrap();
        let (path, _) = journals
            .create_segment(&journals.session_dir("x"), "seg")
            .unwrap();
        let header = crate::journal::writer::tests::header();
        let made = journals
            .create_segment_writer(&journals.session_dir("y"), "seg", &header)
            .unwrap();
        let again = journals
            .create_segment_writer(&journals.session_dir("y"), "seg", &header)
            .unwrap();
        unsafe { libc::umask(old) };
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(journals.root()), 0o700);
        assert_eq!(mode(&journals.session_dir("x")), 0o700);
        assert_eq!(mode(&path), 0o600);
        // Segments made whole: named as asked (the next free name when taken), private, and
        // already holding their header.
        assert_eq!(made.path(), journals.session_dir("y").join("seg.acpj.zst"));
        assert_eq!(
            again.path(),
            journals.session_dir("y").join("seg.1.acpj.zst")
        );
        for writer in [made, again] {
            assert_eq!(mode(writer.path()), 0o600);
            let reader = SegmentReader::open(writer.path()).unwrap();
            assert_eq!(reader.header().run, header.run);
        }
        assert_eq!(segments_in(&journals.session_dir("y")).unwrap().len(), 2);
    }
}
