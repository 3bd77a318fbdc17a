//! `watch`: follow live sessions while their proxies write them, rendered as `show` renders
//! them (or the wire records, or NDJSON).
//!
//! Each segment is read by a [`SegmentTail`], which decodes what is complete and waits for
//! more. The loop wakes on inotify events of the session directories (a segment written to, a
//! new segment or session directory), and at least every [`RECHECK`] to see whether a writer
//! was killed (a dead proxy writes nothing, so no event would say so). A segment is done at its
//! end marker, or when its writer is gone; a watch ends when every segment it follows is done
//! (never with `--all` or `--follow`).

use std::collections::{HashMap, HashSet};
use std::io::{BufWriter, IsTerminal, StdoutLock, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime};

use super::inotify::{CREATED, Inotify};
use super::list::shortest_prefixes;
use super::show::raw;
use crate::catalog::Catalog;
use crate::cli::WatchArgs;
use crate::journal::dir::segments_in;
use crate::journal::reader::is_end_marker;
use crate::journal::tail::{Next, SegmentTail};
use crate::journal::{Body, JournalDir, Record, Tail};
use crate::render::{Style, Transcript};

/// The longest wait for a file change before the writers are checked again.
const RECHECK: Duration = Duration::from_secs(1);

#[derive(Clone, Copy, PartialEq, Eq)]
enum Format {
    Text(Style),
    Raw,
    Json,
}

/// One segment being followed.
struct Feed {
    tail: SegmentTail,
    /// Its file name, for [`JournalDir::writer_alive`].
    name: String,
    /// Decode what is there without printing it, up to the first wait (`--from-now`).
    skip: bool,
    /// Its first record was seen (the session's transcript was told of a new run).
    begun: bool,
    done: bool,
}

/// One session being followed.
struct Watched {
    /// Its ID once a segment header named it.
    id: Option<String>,
    /// The start of each line, when several sessions share the output.
    prefix: Option<String>,
    /// Its session directory, where new segments appear.
    dir: Option<PathBuf>,
    known: HashSet<PathBuf>,
    feeds: Vec<Feed>,
    transcript: Option<Transcript<Vec<u8>>>,
    /// With a prefix: the start of a line not yet printed.
    partial: Vec<u8>,
}

struct Watcher<'a> {
    journals: &'a JournalDir,
    format: Format,
    /// Segments there when the watch began are read from their start (else from their end).
    from_start: bool,
    /// Keep going when every segment is done.
    endless: bool,
    all: bool,
    prefixed: bool,
    sessions: Vec<Watched>,
    /// Session directories → their index in `sessions`.
    by_dir: HashMap<PathBuf, usize>,
    inotify: Inotify,
    watched_dirs: HashSet<PathBuf>,
    out: BufWriter<StdoutLock<'static>>,
    scratch: Vec<u8>,
}

/// Follow the sessions until they end (or forever with `--all` / `--follow`).
pub(super) fn run(journals: &JournalDir, args: WatchArgs) -> anyhow::Result<ExitCode> {
    let stdout = std::io::stdout();
    let format = if args.json {
        Format::Json
    } else if args.raw {
        Format::Raw
    } else if stdout.is_terminal() && std::env::var_os("NO_COLOR").is_none() {
        Format::Text(Style::Color)
    } else {
        Format::Text(Style::Plain)
    };
    let from_start = if args.all {
        args.from_start
    } else {
        !args.from_now
    };
    let mut w = Watcher {
        journals,
        format,
        from_start,
        endless: args.all || args.follow,
        all: args.all,
        prefixed: args.all || args.sessions.len() > 1,
        sessions: Vec::new(),
        by_dir: HashMap::new(),
        inotify: Inotify::new()?,
        watched_dirs: HashSet::new(),
        out: BufWriter::new(stdout.lock()),
        scratch: Vec::new(),
    };
    // Watches first, then the scan: nothing created in between is missed.
    if args.all {
        if !journals.root().join("sessions").is_dir() {
            journals.create_dirs()?;
        }
        w.watch_dir(&journals.root().join("sessions"))?;
        w.scan_sessions(true)?;
    } else {
        let named = if args.sessions.is_empty() {
            let (id, segments) = most_recent_live(journals)?;
            eprintln!("acp-journal: watching {id} (the most recently active live session)");
            vec![segments]
        } else {
            args.sessions
                .iter()
                .map(|arg| journals.resolve(arg).map_err(anyhow::Error::msg))
                .collect::<anyhow::Result<_>>()?
        };
        for segments in named {
            w.add_named(&segments)?;
        }
    }
    // Said once what was there is read, so a script can start what it wants to see.
    let mut ready = if args.all {
        Some(format!(
            "watching every session in {}, from {}; Ctrl-C ends",
            journals.root().display(),
            if from_start { "their start" } else { "now" }
        ))
    } else if !from_start {
        Some("watching from now".to_string())
    } else {
        None
    };
    let mut checked = Instant::now();
    loop {
        w.pump()?;
        if let Some(note) = ready.take() {
            eprintln!("acp-journal: {note}");
        }
        if !w.endless && w.sessions.iter().all(|s| s.feeds.iter().all(|f| f.done)) {
            break;
        }
        let changes = w.inotify.wait(RECHECK.as_millis() as i32)?;
        for change in &changes {
            if change.mask & CREATED != 0 {
                w.rescan(&change.dir)?;
            }
        }
        if changes.is_empty() || checked.elapsed() >= RECHECK {
            w.check_writers()?;
            checked = Instant::now();
        }
    }
    w.finish()?;
    Ok(ExitCode::SUCCESS)
}

/// The live session whose segments were written to last: its ID and segments.
fn most_recent_live(journals: &JournalDir) -> anyhow::Result<(String, Vec<PathBuf>)> {
    let mut best: Option<(SystemTime, String)> = None;
    for s in journals.sessions_with(false)? {
        if s.deleted || !s.open {
            continue;
        }
        for seg in s.segments.iter().filter(|seg| journals.writer_alive(seg)) {
            let modified = std::fs::metadata(journals.root().join(seg))
                .and_then(|m| m.modified())
                .unwrap_or(SystemTime::UNIX_EPOCH);
            if best.as_ref().is_none_or(|(t, _)| modified > *t) {
                best = Some((modified, s.session.clone()));
            }
        }
    }
    let Some((_, id)) = best else {
        anyhow::bail!(
            "no live session in {}: name one (`acp-journal list` shows them), or use --all to wait for new ones",
            journals.root().display()
        );
    };
    let segments = journals.resolve(&id).map_err(anyhow::Error::msg)?;
    Ok((id, segments))
}

impl Watcher<'_> {
    fn watch_dir(&mut self, dir: &Path) -> anyhow::Result<()> {
        if self.watched_dirs.insert(dir.to_path_buf()) {
            self.inotify.watch(dir).map_err(|e| {
                anyhow::anyhow!("watching {} for changes (inotify): {e}", dir.display())
            })?;
        }
        Ok(())
    }

    fn new_session(&mut self, dir: Option<PathBuf>) -> usize {
        let transcript = match self.format {
            Format::Text(style) => Some(Transcript::new(Vec::new(), style).live()),
            _ => None,
        };
        self.sessions.push(Watched {
            id: None,
            prefix: None,
            dir: dir.clone(),
            known: HashSet::new(),
            feeds: Vec::new(),
            transcript,
            partial: Vec::new(),
        });
        let index = self.sessions.len() - 1;
        if let Some(dir) = dir {
            self.by_dir.insert(dir, index);
        }
        index
    }

    /// A session named on the command line: its segments (from `resolve`); new ones are looked
    /// for in its directory when that is one of the journal directory's session directories.
    fn add_named(&mut self, segments: &[PathBuf]) -> anyhow::Result<()> {
        let sessions_dir = self.journals.root().join("sessions");
        let parent = segments
            .first()
            .and_then(|p| p.parent())
            .map(Path::to_path_buf);
        let dir = parent.clone().filter(|p| {
            p.parent() == Some(sessions_dir.as_path())
                && segments.iter().all(|s| s.parent() == Some(p.as_path()))
        });
        if let Some(existing) = dir.as_ref().and_then(|d| self.by_dir.get(d)) {
            let _ = existing; // named twice: followed once
            return Ok(());
        }
        for seg_dir in segments.iter().filter_map(|s| s.parent()) {
            self.watch_dir(seg_dir)?;
        }
        let index = self.new_session(dir.clone());
        for path in segments {
            self.add_segment(index, path, true);
        }
        if dir.is_some() {
            self.scan_dir(index, true)?;
        }
        Ok(())
    }

    /// Look again after `dir` got a new entry (an empty `dir`: everything).
    fn rescan(&mut self, dir: &Path) -> anyhow::Result<()> {
        let sessions_dir = self.journals.root().join("sessions");
        if self.all && (dir == sessions_dir || dir.as_os_str().is_empty()) {
            self.scan_sessions(false)?;
        }
        if dir.as_os_str().is_empty() {
            for index in 0..self.sessions.len() {
                self.scan_dir(index, false)?;
            }
        } else if let Some(&index) = self.by_dir.get(dir) {
            self.scan_dir(index, false)?;
        }
        Ok(())
    }

    /// `--all`: every session directory of the journal directory (`sessions/*`).
    fn scan_sessions(&mut self, at_start: bool) -> anyhow::Result<()> {
        let sessions_dir = self.journals.root().join("sessions");
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(&sessions_dir)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_dir() && !self.by_dir.contains_key(p))
            .collect();
        dirs.sort();
        for dir in dirs {
            self.watch_dir(&dir)?;
            let index = self.new_session(Some(dir));
            self.scan_dir(index, at_start)?;
        }
        Ok(())
    }

    /// The segments of a session directory not followed yet. At the start of a watch with
    /// `--all`, only those whose proxy is running.
    fn scan_dir(&mut self, index: usize, at_start: bool) -> anyhow::Result<()> {
        let Some(dir) = self.sessions[index].dir.clone() else {
            return Ok(());
        };
        let segments = match segments_in(&dir) {
            Ok(s) => s,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        for path in segments {
            if self.sessions[index].known.contains(&path) {
                continue;
            }
            if at_start && self.all && !self.journals.writer_alive(&self.journals.relative(&path)) {
                self.sessions[index].known.insert(path);
                continue;
            }
            self.add_segment(index, &path, at_start);
        }
        Ok(())
    }

    fn add_segment(&mut self, index: usize, path: &Path, at_start: bool) {
        let session = &mut self.sessions[index];
        if !session.known.insert(path.to_path_buf()) {
            return;
        }
        match SegmentTail::open(path) {
            Ok(tail) => session.feeds.push(Feed {
                tail,
                name: self.journals.relative(path),
                skip: at_start && !self.from_start,
                begun: false,
                done: false,
            }),
            Err(e) => eprintln!("acp-journal: {e}; not followed"),
        }
    }

    /// Print everything complete in every segment followed, then flush.
    fn pump(&mut self) -> anyhow::Result<()> {
        for index in 0..self.sessions.len() {
            for feed in 0..self.sessions[index].feeds.len() {
                self.drain(index, feed)?;
            }
        }
        self.out.flush()?;
        Ok(())
    }

    /// Print what is complete in one segment.
    fn drain(&mut self, index: usize, feed: usize) -> anyhow::Result<()> {
        if self.sessions[index].feeds[feed].done {
            return Ok(());
        }
        loop {
            let next = self.sessions[index].feeds[feed].tail.poll();
            match next {
                Next::Record(record) => {
                    if is_end_marker(&record) {
                        continue;
                    }
                    let f = &mut self.sessions[index].feeds[feed];
                    if !std::mem::replace(&mut f.begun, true) && feed > 0 {
                        // A new run of the session: forget what the last one left pending.
                        let skip = f.skip;
                        if let Some(t) = self.sessions[index].transcript.as_mut() {
                            t.new_run()?;
                        }
                        self.emit_rendered(index, skip)?;
                    }
                    if self.sessions[index].id.is_none() {
                        self.name(index);
                    }
                    let skip = self.sessions[index].feeds[feed].skip;
                    self.record(index, &record, skip)?;
                }
                Next::Pending => {
                    self.sessions[index].feeds[feed].skip = false;
                    return Ok(());
                }
                Next::End(tail) => {
                    let f = &mut self.sessions[index].feeds[feed];
                    f.done = true;
                    report(f.tail.path(), &tail);
                    return Ok(());
                }
            }
        }
    }

    /// The session's ID from a segment header, and its prefix when lines carry one.
    fn name(&mut self, index: usize) {
        let id = self.sessions[index]
            .feeds
            .iter()
            .find_map(|f| f.tail.header().and_then(|h| h.session.clone()));
        let Some(id) = id else { return };
        if self.prefixed {
            let mut ids: Vec<String> = self
                .journals
                .sessions_with(false)
                .map(|all| all.into_iter().map(|s| s.session).collect())
                .unwrap_or_default();
            ids.extend(self.sessions.iter().filter_map(|s| s.id.clone()));
            ids.push(id.clone());
            ids.sort();
            ids.dedup();
            self.sessions[index].prefix = Some(shortest_prefixes(&ids)[id.as_str()].clone());
        }
        self.sessions[index].id = Some(id);
    }

    fn record(&mut self, index: usize, record: &Record, skip: bool) -> anyhow::Result<()> {
        match self.format {
            Format::Text(_) => {
                if let Some(t) = self.sessions[index].transcript.as_mut() {
                    t.record(record)?;
                }
                self.emit_rendered(index, skip)
            }
            _ if skip => Ok(()),
            Format::Json => match &record.body {
                Body::Message { payload, .. } => {
                    self.scratch.clear();
                    self.scratch.extend_from_slice(&payload.bytes);
                    self.scratch.push(b'\n');
                    self.emit_scratch(index)
                }
                _ => Ok(()),
            },
            Format::Raw => {
                self.scratch.clear();
                raw(&mut self.scratch, record)?;
                self.emit_scratch(index)
            }
        }
    }

    /// Hand over what the session's transcript rendered so far.
    fn emit_rendered(&mut self, index: usize, skip: bool) -> anyhow::Result<()> {
        let Some(t) = self.sessions[index].transcript.as_mut() else {
            return Ok(());
        };
        let rendered = t.buffer();
        if skip {
            rendered.clear();
            return Ok(());
        }
        std::mem::swap(&mut self.scratch, rendered);
        rendered.clear();
        self.emit_scratch(index)
    }

    /// Write `scratch` for session `index`: as it is, or whole lines behind its prefix.
    fn emit_scratch(&mut self, index: usize) -> anyhow::Result<()> {
        let session = &mut self.sessions[index];
        let Some(prefix) = session.prefix.as_deref() else {
            self.out.write_all(&self.scratch)?;
            return Ok(());
        };
        session.partial.extend_from_slice(&self.scratch);
        let mut start = 0;
        while let Some(i) = memchr::memchr(b'\n', &session.partial[start..]) {
            let end = start + i + 1;
            write!(self.out, "{prefix}  ")?;
            self.out.write_all(&session.partial[start..end])?;
            start = end;
        }
        session.partial.drain(..start);
        Ok(())
    }

    /// Segments whose proxy is gone are done once what it wrote is read.
    fn check_writers(&mut self) -> anyhow::Result<()> {
        for index in 0..self.sessions.len() {
            for feed in 0..self.sessions[index].feeds.len() {
                let f = &self.sessions[index].feeds[feed];
                if f.done || self.journals.writer_alive(&f.name) {
                    continue;
                }
                // Gone: what it wrote is all there is.
                self.drain(index, feed)?;
                let f = &mut self.sessions[index].feeds[feed];
                if !f.done {
                    f.done = true;
                    let tail = f.tail.give_up();
                    report(f.tail.path(), &tail);
                }
            }
        }
        self.out.flush()?;
        Ok(())
    }

    /// Close each transcript's open paragraph and print what a prefix still holds.
    fn finish(&mut self) -> anyhow::Result<()> {
        for index in 0..self.sessions.len() {
            if let Some(t) = self.sessions[index].transcript.take() {
                self.scratch = t.finish()?;
                self.emit_scratch(index)?;
            }
            if !self.sessions[index].partial.is_empty() {
                self.scratch.clear();
                self.scratch.push(b'\n');
                self.emit_scratch(index)?;
            }
        }
        self.out.flush()?;
        Ok(())
    }
}

/// Say on stderr where a segment ended other than cleanly, as `show` does.
fn report(path: &Path, tail: &Tail) {
    if !matches!(tail, Tail::Clean | Tail::Unfinished) {
        eprintln!(
            "acp-journal: {}: {tail}; everything before it is shown",
            path.display()
        );
    }
}
