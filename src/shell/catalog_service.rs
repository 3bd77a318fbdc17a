//! The journal directory's catalog off the main loop: every catalog append and read of a run goes
//! through one thread, in order, so no `open`/`write`/`read` of `catalog.ndjson` (nor the `.git`
//! walk for a session's branch) ever blocks the relay.
//!
//! What changes with every turn (a session's state, first prompt, turn ends, usage) is coalesced
//! in the core, which lets it out as [`crate::proto::Action::TurnFacts`] about once a second
//! (the shell's sync tick calls [`crate::proto::Proxy::handle_facts_due`]) and before any other
//! entry or a read for `session/list`; the shell writes it with [`CatalogService::write`].
//! Everything else (a session opened, closed, aliased, titled, deleted) is written at once, in
//! the order it happened. [`catalog_entry`] makes the entry of a core's [`CatalogUpdate`].

use std::path::Path;
use std::thread::JoinHandle;

use tokio::sync::mpsc;

use crate::acp::AgentId;
use crate::catalog::{Catalog, CatalogEntry, CatalogIndex, SessionSummary, git_branch};
use crate::journal::JournalDir;
use crate::proto::{Activity, CatalogUpdate, ListedSession};

/// What the catalog thread sends back to the main loop.
#[derive(Debug)]
pub(super) enum CatalogAnswer {
    /// The journal directory's sessions for `session/list` request `request`.
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
    /// Read the session list (for the agent that answered `initialize` with this) and answer
    /// [`CatalogAnswer::Sessions`].
    Sessions(u64, Option<serde_json::Value>),
    /// Check for changes and answer [`CatalogAnswer::Changed`] (when there are some).
    Changed,
}

/// What `session/list` shows of the journal directory, and for which agent.
#[derive(Clone, Debug)]
pub(super) struct ListScope {
    /// This run's agent command line, as the catalog has it.
    pub(super) agent: String,
    /// Every agent's sessions (`--list-scope all`), not only this agent's; with a shared store,
    /// every host's too.
    pub(super) all: bool,
    /// The shared store whose sessions `all` adds (`--store`).
    pub(super) fleet: Option<crate::fleet::Fleet>,
}

/// The main loop's end of the catalog thread.
pub(super) struct CatalogService {
    jobs: Option<std::sync::mpsc::Sender<Job>>,
    thread: Option<JoinHandle<()>>,
}

impl CatalogService {
    /// Start the thread for `journals`; its answers arrive on the returned receiver.
    pub(super) fn start(
        journals: JournalDir,
        scope: ListScope,
    ) -> (CatalogService, mpsc::UnboundedReceiver<CatalogAnswer>) {
        let (jobs, rx) = std::sync::mpsc::channel();
        let (answers, answers_rx) = mpsc::unbounded_channel();
        let thread = std::thread::Builder::new()
            .name("catalog".into())
            .spawn(move || serve(&journals, &scope, &rx, &answers))
            .map_err(|e| tracing::error!("cannot start the catalog thread: {e}"))
            .ok();
        let service = CatalogService {
            jobs: thread.as_ref().map(|_| jobs),
            thread,
        };
        (service, answers_rx)
    }

    /// Write `entry` (with one `write(2)`, in order after what was asked before).
    pub(super) fn append(&mut self, entry: CatalogEntry) {
        self.write(vec![entry]);
    }

    /// Write `entries` with one `write(2)`, in order after what was asked before.
    pub(super) fn write(&mut self, entries: Vec<CatalogEntry>) {
        self.send(Job::Write(entries));
    }

    /// Ask for the session list (answered on the thread's channel), after what was written
    /// before.
    pub(super) fn sessions(&mut self, request: u64, agent: Option<serde_json::Value>) {
        if self.jobs.is_none() {
            tracing::warn!("the catalog thread is gone: session/list sees no journal");
        }
        self.send(Job::Sessions(request, agent));
    }

    /// Ask which working directories' sessions changed in the journal directory since the last
    /// check.
    pub(super) fn check_changes(&mut self) {
        self.send(Job::Changed);
    }

    /// Let the thread finish its work and end.
    pub(super) fn close(mut self) {
        self.jobs = None;
        if let Some(thread) = self.thread.take()
            && thread.join().is_err()
        {
            tracing::error!("the catalog thread panicked");
        }
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
    journals: &JournalDir,
    scope: &ListScope,
    jobs: &std::sync::mpsc::Receiver<Job>,
    answers: &mpsc::UnboundedSender<CatalogAnswer>,
) {
    let mut index = CatalogIndex::new(journals);
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
                if let Err(e) = journals.append_catalog_entries(&entries) {
                    tracing::warn!("cannot update the journal catalog: {e}");
                }
            }
            Job::Sessions(request, agent) => {
                let sessions = sessions(journals, scope, agent.as_ref(), &mut index);
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

/// The journal directory's sessions for `session/list` (with a shared store, every host's):
/// deleted ones left out, and (unless `--list-scope all`) those another agent recorded. A
/// session's `state` is given only while a live proxy serves it.
fn sessions(
    journals: &JournalDir,
    scope: &ListScope,
    agent: Option<&serde_json::Value>,
    index: &mut CatalogIndex,
) -> Vec<ListedSession> {
    if let Err(e) = index.refresh() {
        tracing::warn!("reading the journal catalog: {e}");
    }
    let iso = |us: i64| {
        jiff::Timestamp::from_microsecond(us)
            .ok()
            .map(|t| t.to_string())
    };
    // With a shared store, every host's sessions too (this agent's, unless `--list-scope all`):
    // of a session known here and there, the copy updated last.
    let listing = match &scope.fleet {
        Some(fleet) => fleet.listing().unwrap_or_else(|e| {
            tracing::warn!("listing the sessions of {}: {e}", fleet.url());
            Default::default()
        }),
        None => Default::default(),
    };
    let shared = &listing.sessions;
    let mut merged: Vec<&SessionSummary> = index.sessions().collect();
    let at: std::collections::HashMap<&str, usize> = merged
        .iter()
        .enumerate()
        .map(|(i, s)| (s.session.as_str(), i))
        .collect();
    // The agent-side IDs this host continued a session under are in its own catalog only (the
    // index has none): they stay the session's when another host's copy is newer.
    let mut aliases: std::collections::HashMap<&str, Vec<String>> = Default::default();
    for s in shared {
        match at.get(s.session.as_str()) {
            Some(&i) if merged[i].updated < s.updated => {
                aliases.insert(&s.session, merged[i].agent_ids.clone());
                merged[i] = s;
            }
            Some(_) => {}
            None => merged.push(s),
        }
    }
    let this = AgentId::of(agent, Some(scope.agent.clone()));
    let title = agent.and_then(crate::acp::agent_title);
    merged
        .into_iter()
        .filter(|s| !s.deleted)
        .filter(|s| scope.all || of_agent(s, &this, title.as_deref()))
        .map(|s| ListedSession {
            session: s.session.clone(),
            cwd: s.cwd.clone(),
            title: s.shown_title().map(str::to_string),
            prompted: s.has_prompt(),
            archived: s.archived,
            updated: Activity {
                at: s.updated_at.clone().or_else(|| iso(s.updated)),
                us: s.updated,
            },
            agent_ids: {
                let mut ids = s.agent_ids.clone();
                ids.extend(
                    aliases
                        .get(s.session.as_str())
                        .into_iter()
                        .flatten()
                        .cloned(),
                );
                ids
            },
            state: s.state.clone().filter(|_| {
                s.open
                    && s.segments
                        .last()
                        .is_some_and(|seg| journals.writer_alive(seg))
            }),
            last_turn_ended_at: s.last_turn_ended.and_then(iso),
            usage: s.usage.clone(),
            git_branch: s.git_branch.clone(),
            agent: scope.all.then(|| s.agent.clone()).flatten(),
        })
        .collect()
}

/// Whether session `s` was recorded with agent `this` (whose `agentInfo` title or name is
/// `title`): by its `agentInfo` name when both have one (whatever the versions), else by the
/// command line; a row that names the agent only by its title (the team index's, and catalogs
/// written before `agent_info`) by that title.
fn of_agent(s: &SessionSummary, this: &AgentId, title: Option<&str>) -> bool {
    let name = s.agent_info.as_ref().and_then(|i| i.name.as_ref());
    if let (Some(theirs), Some(ours)) = (name, &this.name) {
        return theirs == ours;
    }
    if s.agent.is_some() && s.agent == this.command {
        return true;
    }
    title.is_some_and(|t| s.agent.as_deref() == Some(t) || s.agent_name.as_deref() == Some(t))
}

/// The working directories of the sessions that changed in the journal directory since last asked.
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

/// The catalog entry of a core's update learned at `t` (Unix microseconds).
pub(super) fn catalog_entry(update: CatalogUpdate, t: i64) -> CatalogEntry {
    match update {
        CatalogUpdate::Alias { session, agent } => CatalogEntry::Alias {
            session: session.to_string(),
            agent: agent.to_string(),
            t,
        },
        CatalogUpdate::Info {
            session,
            title,
            updated_at,
        } => CatalogEntry::Info {
            session: session.to_string(),
            title,
            updated_at,
            t,
        },
        CatalogUpdate::Rename { session, title } => CatalogEntry::Rename {
            session: session.to_string(),
            title,
            t,
        },
        CatalogUpdate::Archive { session, archived } => CatalogEntry::Archive {
            session: session.to_string(),
            archived,
            t,
        },
        CatalogUpdate::Prompt { session, title } => CatalogEntry::Prompt {
            session: session.to_string(),
            title,
            t,
        },
        CatalogUpdate::Delete { session } => CatalogEntry::Delete {
            session: session.to_string(),
            t,
        },
        CatalogUpdate::State { session, state } => CatalogEntry::State {
            session: session.to_string(),
            state: state.to_string(),
            t,
        },
        CatalogUpdate::TurnEnded { session, turns } => CatalogEntry::TurnEnded {
            session: session.to_string(),
            turns,
            t,
        },
        CatalogUpdate::Usage { session, usage } => CatalogEntry::Usage {
            session: session.to_string(),
            usage,
            t,
        },
        CatalogUpdate::Child {
            session,
            child,
            parent,
        } => CatalogEntry::Child {
            session: session.to_string(),
            child: child.to_string(),
            parent: parent.to_string(),
            t,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn journals() -> (tempfile::TempDir, JournalDir) {
        let dir = tempfile::tempdir().unwrap();
        let journals = JournalDir::new(dir.path());
        (dir, journals)
    }

    fn lines(journals: &JournalDir) -> Vec<serde_json::Value> {
        std::fs::read_to_string(journals.root().join("catalog.ndjson"))
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
    fn entries_are_written_in_the_order_asked() {
        let (_dir, journals) = journals();
        let scope = ListScope {
            agent: "a".into(),
            all: false,
            fleet: None,
        };
        let (mut service, _answers) = CatalogService::start(journals.clone(), scope);
        service.write(vec![state("S", "running", 1), state("S", "idle", 2)]);
        service.append(CatalogEntry::Delete {
            session: "T".into(),
            t: 3,
        });
        service.append(state("S", "running", 4));
        service.close();
        let written = lines(&journals);
        let kinds: Vec<(&str, i64)> = written
            .iter()
            .map(|l| (l["ev"].as_str().unwrap(), l["t"].as_i64().unwrap()))
            .collect();
        assert_eq!(
            kinds,
            [("state", 1), ("state", 2), ("delete", 3), ("state", 4)]
        );
    }

    #[tokio::test]
    async fn a_list_sees_every_entry_appended_before_it() {
        let (_dir, journals) = journals();
        let scope = ListScope {
            agent: "agent".into(),
            all: false,
            fleet: None,
        };
        let (mut service, mut answers) = CatalogService::start(journals.clone(), scope);
        service.append(CatalogEntry::Open {
            session: "S".into(),
            segment: format!(
                "sessions/{}/x.acpj.zst",
                crate::journal::dir::session_key("S")
            ),
            cwd: Some("/nowhere".into()),
            agent: Some("agent".into()),
            agent_name: None,
            git_branch: None,
            t: 1,
            agent_info: None,
        });
        service.append(state("S", "running", 2));
        service.sessions(7, None);
        let Some(CatalogAnswer::Sessions { request, sessions }) = answers.recv().await else {
            panic!("no answer");
        };
        assert_eq!(request, 7);
        assert_eq!(sessions.len(), 1);
        assert_eq!(sessions[0].session, "S");
        assert_eq!(
            sessions[0].updated.us, 2,
            "the state waiting was written first"
        );
        service.close();
    }
}
