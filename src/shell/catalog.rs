//! The store's catalog off the main loop: every catalog append and read of a run goes through
//! one thread, in order, so no `open`/`write`/`read` of `catalog.ndjson` (nor the `.git` walk
//! for a session's branch) ever blocks the relay.
//!
//! What changes with every turn (a session's `state`, its first prompt, its last turn's end,
//! its usage) is coalesced on the main loop ([`CatalogService::append`]): the latest per
//! session (the first prompt: the first), written with the next [`CatalogService::flush`] (the shell calls it once a second), before any other
//! entry, and before the catalog is read for `session/list`. A busy session thus costs at most
//! one catalog write a second, however many turns and usage reports it has, and memory stays
//! bounded by the number of sessions. Everything else (a session opened, closed, aliased,
//! titled, deleted) is written at once, in the order it happened.

use std::collections::BTreeMap;
use std::path::Path;
use std::thread::JoinHandle;

use tokio::sync::mpsc;

use crate::catalog::{Catalog, CatalogEntry, CatalogIndex, git_branch};
use crate::journal::Store;
use crate::proto::ListedSession;

/// What the catalog thread sends back to the main loop.
#[derive(Debug)]
pub(super) enum CatalogAnswer {
    /// The store's sessions for `session/list` request `request`.
    Sessions {
        /// The core's request number.
        request: u64,
        /// The sessions.
        sessions: Vec<ListedSession>,
    },
    /// The working directories of the sessions that changed since the last check.
    Changed(Vec<String>),
}

/// Work for the catalog thread, done in order.
enum Job {
    /// Append these entries with one `write(2)`.
    Write(Vec<CatalogEntry>),
    /// Read the session list and answer [`CatalogAnswer::Sessions`].
    Sessions(u64),
    /// Check for changes and answer [`CatalogAnswer::Changed`] (when there are some).
    Changed,
}

/// What `session/list` shows of the store, and for which agent.
#[derive(Clone, Debug)]
pub(super) struct ListScope {
    /// This run's agent command line, as the catalog has it.
    pub(super) agent: String,
    /// Every agent's sessions (`--list-scope all`), not only this agent's.
    pub(super) all: bool,
}

/// The latest of a session's per-turn entries, not yet written.
#[derive(Default)]
struct Live {
    prompt: Option<CatalogEntry>,
    usage: Option<CatalogEntry>,
    turn_ended: Option<CatalogEntry>,
    state: Option<CatalogEntry>,
}

/// The main loop's end of the catalog thread.
pub(super) struct CatalogService {
    jobs: Option<std::sync::mpsc::Sender<Job>>,
    thread: Option<JoinHandle<()>>,
    /// Per-turn entries waiting for the next flush, by session.
    live: BTreeMap<String, Live>,
}

impl CatalogService {
    /// Start the thread for `store`; its answers arrive on the returned receiver.
    pub(super) fn start(
        store: Store,
        scope: ListScope,
    ) -> (CatalogService, mpsc::UnboundedReceiver<CatalogAnswer>) {
        let (jobs, rx) = std::sync::mpsc::channel();
        let (answers, answers_rx) = mpsc::unbounded_channel();
        let thread = std::thread::Builder::new()
            .name("catalog".into())
            .spawn(move || serve(&store, &scope, &rx, &answers))
            .map_err(|e| tracing::error!("cannot start the catalog thread: {e}"))
            .ok();
        let service = CatalogService {
            jobs: thread.as_ref().map(|_| jobs),
            thread,
            live: BTreeMap::new(),
        };
        (service, answers_rx)
    }

    /// Record `entry`: a per-turn entry waits for the next [`CatalogService::flush`] (replacing
    /// or merging with the one waiting for its session); any other is written at once, after
    /// what waits.
    pub(super) fn append(&mut self, entry: CatalogEntry) {
        let session = match &entry {
            CatalogEntry::State { session, .. }
            | CatalogEntry::Prompt { session, .. }
            | CatalogEntry::TurnEnded { session, .. }
            | CatalogEntry::Usage { session, .. } => session,
            _ => {
                let mut entries = self.take_live();
                entries.push(entry);
                self.send(Job::Write(entries));
                return;
            }
        };
        // A session's key is allocated once per flush, not per entry.
        if !self.live.contains_key(session) {
            self.live.insert(session.clone(), Live::default());
        }
        let live = self.live.get_mut(session.as_str()).expect("inserted above");
        match entry {
            CatalogEntry::State { .. } => live.state = Some(entry),
            CatalogEntry::Prompt { .. } => {
                live.prompt.get_or_insert(entry);
            }
            CatalogEntry::TurnEnded { session, turns, t } => {
                let before = match live.turn_ended.take() {
                    Some(CatalogEntry::TurnEnded { turns, .. }) => turns,
                    _ => 0,
                };
                live.turn_ended = Some(CatalogEntry::TurnEnded {
                    session,
                    turns: before + turns,
                    t,
                });
            }
            CatalogEntry::Usage { usage, t, session } => {
                live.usage = Some(match live.usage.take() {
                    Some(CatalogEntry::Usage {
                        usage: serde_json::Value::Object(mut old),
                        ..
                    }) if usage.is_object() => {
                        if let serde_json::Value::Object(new) = usage {
                            old.extend(new);
                        }
                        CatalogEntry::Usage {
                            session,
                            usage: serde_json::Value::Object(old),
                            t,
                        }
                    }
                    _ => CatalogEntry::Usage { session, usage, t },
                });
            }
            _ => unreachable!("matched above"),
        }
    }

    /// Write the per-turn entries that wait.
    pub(super) fn flush(&mut self) {
        let entries = self.take_live();
        if !entries.is_empty() {
            self.send(Job::Write(entries));
        }
    }

    /// Ask for the session list (answered on the thread's channel), after what waits is
    /// written: the list shows every state this run has seen.
    pub(super) fn sessions(&mut self, request: u64) {
        self.flush();
        if self.jobs.is_none() {
            tracing::warn!("the catalog thread is gone: session/list sees no journal");
        }
        self.send(Job::Sessions(request));
    }

    /// Ask which working directories' sessions changed in the store since the last check.
    pub(super) fn check_changes(&mut self) {
        self.send(Job::Changed);
    }

    /// Write what waits, then let the thread finish its work and end.
    pub(super) fn close(mut self) {
        self.flush();
        self.jobs = None;
        if let Some(thread) = self.thread.take()
            && thread.join().is_err()
        {
            tracing::error!("the catalog thread panicked");
        }
    }

    fn take_live(&mut self) -> Vec<CatalogEntry> {
        std::mem::take(&mut self.live)
            .into_values()
            .flat_map(|live| [live.prompt, live.usage, live.turn_ended, live.state])
            .flatten()
            .collect()
    }

    fn send(&mut self, job: Job) {
        if let Some(jobs) = &self.jobs
            && jobs.send(job).is_err()
        {
            tracing::error!("the catalog thread stopped: the catalog is no longer updated");
            self.jobs = None;
        }
    }
}

/// The catalog thread: does the jobs in order until the main loop hangs up.
fn serve(
    store: &Store,
    scope: &ListScope,
    jobs: &std::sync::mpsc::Receiver<Job>,
    answers: &mpsc::UnboundedSender<CatalogAnswer>,
) {
    let mut index = CatalogIndex::new(store);
    for job in jobs {
        match job {
            Job::Write(mut entries) => {
                for entry in &mut entries {
                    if let CatalogEntry::Open {
                        cwd: Some(cwd),
                        git_branch: branch @ None,
                        ..
                    } = entry
                    {
                        *branch = git_branch(Path::new(cwd));
                    }
                }
                if let Err(e) = store.append_catalog_entries(&entries) {
                    tracing::warn!("cannot update the journal catalog: {e}");
                }
            }
            Job::Sessions(request) => {
                let sessions = sessions(store, scope, &mut index);
                let _ = answers.send(CatalogAnswer::Sessions { request, sessions });
            }
            Job::Changed => {
                let cwds = changed_cwds(&mut index);
                if !cwds.is_empty() {
                    let _ = answers.send(CatalogAnswer::Changed(cwds));
                }
            }
        }
    }
}

/// The store's sessions for `session/list`: deleted ones left out, and (unless `--list-scope
/// all`) those another agent recorded. A session's `state` is given only while a live proxy
/// serves it.
fn sessions(store: &Store, scope: &ListScope, index: &mut CatalogIndex) -> Vec<ListedSession> {
    if let Err(e) = index.refresh() {
        tracing::warn!("reading the journal catalog: {e}");
    }
    let iso = |us: i64| {
        jiff::Timestamp::from_microsecond(us)
            .ok()
            .map(|t| t.to_string())
    };
    index
        .sessions()
        .filter(|s| !s.deleted)
        .filter(|s| scope.all || s.agent.as_deref() == Some(scope.agent.as_str()))
        .map(|s| ListedSession {
            session: s.session.clone(),
            cwd: s.cwd.clone(),
            title: s.shown_title().map(str::to_string),
            prompted: s.has_prompt(),
            archived: s.archived,
            updated_at: s.updated_at.clone().or_else(|| iso(s.updated)),
            updated_us: s.updated,
            agent_ids: s.agent_ids.clone(),
            state: s
                .state
                .clone()
                .filter(|_| s.open && s.segments.last().is_some_and(|seg| store.writer_alive(seg))),
            last_turn_ended_at: s.last_turn_ended.and_then(iso),
            usage: s.usage.clone(),
            git_branch: s.git_branch.clone(),
            agent: scope.all.then(|| s.agent.clone()).flatten(),
        })
        .collect()
}

/// The working directories of the sessions that changed in the store since last asked.
fn changed_cwds(index: &mut CatalogIndex) -> Vec<String> {
    let changed = index.refresh().unwrap_or_else(|e| {
        tracing::warn!("reading the journal catalog: {e}");
        Vec::new()
    });
    let mut cwds: Vec<String> = changed
        .iter()
        .filter_map(|s| index.get(s)?.cwd.clone())
        .collect();
    cwds.sort_unstable();
    cwds.dedup();
    cwds
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        (dir, store)
    }

    fn lines(store: &Store) -> Vec<serde_json::Value> {
        std::fs::read_to_string(store.root().join("catalog.ndjson"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    fn state(session: &str, state: &str, t: i64) -> CatalogEntry {
        CatalogEntry::State {
            session: session.into(),
            state: state.into(),
            t,
        }
    }

    #[test]
    fn per_turn_entries_are_coalesced_until_a_flush_and_others_go_at_once_in_order() {
        let (_dir, store) = store();
        let scope = ListScope {
            agent: "a".into(),
            all: false,
        };
        let (mut service, _answers) = CatalogService::start(store.clone(), scope);
        for turn in 0..1000 {
            service.append(state("S", "running", turn * 2));
            service.append(CatalogEntry::Usage {
                session: "S".into(),
                usage: serde_json::json!({"used": turn}),
                t: turn * 2,
            });
            service.append(CatalogEntry::Usage {
                session: "S".into(),
                usage: serde_json::json!({"size": 9}),
                t: turn * 2,
            });
            service.append(CatalogEntry::TurnEnded {
                session: "S".into(),
                turns: 1,
                t: turn * 2 + 1,
            });
            service.append(state("S", "idle", turn * 2 + 1));
        }
        // A structural entry writes what waits first.
        service.append(CatalogEntry::Delete {
            session: "T".into(),
            t: 5000,
        });
        service.append(state("S", "running", 6000));
        service.close();
        let written = lines(&store);
        let kinds: Vec<&str> = written.iter().map(|l| l["ev"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            ["usage", "turnended", "state", "delete", "state"],
            "{written:?}"
        );
        assert_eq!(
            written[0]["usage"],
            serde_json::json!({"used": 999, "size": 9})
        );
        assert_eq!(written[1]["t"], 1999);
        assert_eq!(written[1]["turns"], 1000, "every turn counted");
        assert_eq!(written[2]["state"], "idle");
        assert_eq!(written[4]["state"], "running");
    }

    #[tokio::test]
    async fn a_list_sees_every_entry_appended_before_it() {
        let (_dir, store) = store();
        let scope = ListScope {
            agent: "agent".into(),
            all: false,
        };
        let (mut service, mut answers) = CatalogService::start(store.clone(), scope);
        service.append(CatalogEntry::Open {
            session: "S".into(),
            segment: "sessions/S/x.acpj.zst".into(),
            cwd: Some("/nowhere".into()),
            agent: Some("agent".into()),
            agent_name: None,
            git_branch: None,
            t: 1,
        });
        service.append(state("S", "running", 2));
        service.sessions(7);
        let Some(CatalogAnswer::Sessions { request, sessions }) = answers.recv().await else {
            panic!("no answer");
        };
        assert_eq!(request, 7);
        assert_eq!(sessions.len(), 1);
        assert_eq!(sessions[0].session, "S");
        assert_eq!(
            sessions[0].updated_us, 2,
            "the state waiting was written first"
        );
        service.close();
    }
}
