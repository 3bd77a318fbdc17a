//! The I/O shell around the protocol core: pumps whole lines both ways, applies the core's
//! actions in order, and exits with the agent's status.
//!
//! [`run`] is handed its three ends: the [`Client`] (our stdin/stdout in production, built by
//! [`Client::stdio`]), the [`Agent`] (the spawned subprocess: [`agent::spawn`],
//! [`Agent::from_child`]) and a channel of signals to forward ([`unix_signals`]); tests hand it
//! in-memory pipes, a fake process and a channel of their own.
//!
//! One tokio task (the main loop, on the main thread) reads the client's and the agent's lines,
//! runs the core, writes the journals, then writes the lines to their destinations — so a record
//! is written before its line is forwarded. Destinations are written without blocking
//! ([`pipes::Output`]): a peer that stops reading never blocks the other direction, and a
//! destination with more than [`pipes::BACKLOG_LIMIT`] bytes queued stops the reading of its
//! source, as a pipe would. When our stdin/stdout are pipes (as editors connect them) no other
//! thread is involved in relaying; otherwise a std thread reads or writes them.
//!
//! Nothing here writes to stdout except [`pipes::Output::stdout`], and only forwarded lines.

pub mod agent;
mod catalog;
pub mod history;
pub mod hub;
pub mod journals;
mod life;
pub mod lines;
mod main_loop;
pub mod pipes;
pub mod reaper;
pub mod respawn;
#[cfg(test)]
mod tests;

use std::ffi::OsString;
use std::io::{self, Write};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;

use crate::catalog::CatalogEntry;
use crate::journal::Store;
use crate::proto::{self, Action, CatalogUpdate, ConnId, HistoryChunk, Peer, Proxy, Stamp};
use crate::replay::fork::{ForkPoint, fork_session};
pub use agent::{Agent, Process};
use history::{HistoryRequest, Until};
use journals::{Commit, FsyncPolicy, JournalSet};
use main_loop::Running;
pub use pipes::Client;
use pipes::Output;

/// The editor on stdin/stdout: the stdio proxy's one client connection.
const EDITOR: Peer = Peer::Client(ConnId::FIRST);

/// The clients' side of the proxy.
pub enum Front {
    /// One editor on a pipe (the stdio proxy): its end is the client's end.
    Editor(Client),
    /// The network's connections (`acp-journal serve`): they come and go while the agent and
    /// its sessions live on, until the hub closes or a signal asks the host to stop.
    Hub(hub::Hub),
}

/// Where client lines come from.
enum FrontInput {
    Editor(pipes::ClientInput),
    Hub(hub::Hub),
}

/// What the clients' side said.
enum Input {
    Lines(ConnId, Vec<Bytes>),
    Opened(ConnId, hub::ConnOut),
    Ended(ConnId),
    /// No client can come any more (the editor's end, the hub closed).
    Over,
}

impl FrontInput {
    async fn read(&mut self) -> Input {
        match self {
            FrontInput::Editor(input) => match input.read().await {
                Some(lines) => Input::Lines(ConnId::FIRST, lines),
                None => Input::Over,
            },
            FrontInput::Hub(hub) => match hub.next().await {
                Some(hub::HubEvent::Line(conn, line)) => Input::Lines(conn, vec![line]),
                Some(hub::HubEvent::Opened(conn, out)) => Input::Opened(conn, out),
                Some(hub::HubEvent::Closed(conn)) => Input::Ended(conn),
                None => Input::Over,
            },
        }
    }
}

/// Where lines for clients go.
enum FrontOutput {
    Editor(Output),
    Hub(hub::Outboxes),
}

impl FrontOutput {
    fn push(&mut self, conn: ConnId, line: Bytes) {
        match self {
            FrontOutput::Editor(out) => out.push(line),
            FrontOutput::Hub(outboxes) => outboxes.push(conn, line),
        }
    }

    fn write_now(&mut self) {
        if let FrontOutput::Editor(out) = self {
            out.write_now();
        }
    }

    /// The editor's pipe waits to be writable (a host's outboxes never wait).
    fn waiting(&self) -> bool {
        matches!(self, FrontOutput::Editor(out) if out.waiting())
    }

    async fn writable(&mut self) {
        match self {
            FrontOutput::Editor(out) => out.writable().await,
            FrontOutput::Hub(_) => std::future::pending().await,
        }
    }

    /// Too much is queued for the editor, or for a host's connection (which is dropped if it
    /// stays behind: see [`hub`]). Updated by [`FrontOutput::check`].
    fn full(&self) -> bool {
        match self {
            FrontOutput::Editor(out) => out.full(),
            FrontOutput::Hub(outboxes) => outboxes.behind,
        }
    }

    /// The editor reads nothing of [`pipes::STALLED_LIMIT`] bytes queued for it: its own lines
    /// wait, as behind a full pipe (a host's connections are dropped instead: see [`hub`]).
    fn stalled(&self) -> bool {
        matches!(self, FrontOutput::Editor(out) if out.stalled())
    }

    /// For a host: whether a connection is behind (and drop one that stays behind).
    fn check(&mut self) {
        if let FrontOutput::Hub(outboxes) = self {
            outboxes.behind = outboxes.full(tokio::time::Instant::now());
        }
    }
}

/// Everything the shell needs to run one proxy session.
#[derive(Clone, Debug)]
pub struct ShellConfig {
    /// The agent command and its arguments (for the journal headers).
    pub agent: Vec<OsString>,
    /// The journal store.
    pub store: Store,
    /// When to fdatasync.
    pub fsync: FsyncPolicy,
    /// The protocol core's settings (redaction, session loading).
    pub core: proto::Config,
    /// How long to wait for the agent to exit after the client goes away, before SIGTERM
    /// (and as long again before SIGKILL).
    pub grace: Duration,
    /// Restarts of a dead agent allowed per minute (`0`: the proxy ends with the agent).
    pub respawn: u32,
    /// `session/list` shows every agent's sessions (`--list-scope all`), not only this agent's.
    pub list_all: bool,
    /// Live OTLP export and `traceparent` injection ([`crate::otel::live`]).
    pub tracing: crate::otel::live::Options,
}

/// Clock for stamps: wall clock plus monotonic time since the run started. The monotonic part
/// is tokio's clock, so a test that pauses time drives every timer of the loop and the core.
#[derive(Clone, Copy)]
struct Clock(tokio::time::Instant);

impl Clock {
    fn now(&self) -> Stamp {
        let unix_us = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_micros() as i64)
            .unwrap_or(0);
        Stamp {
            unix_us,
            mono_us: self.0.elapsed().as_micros() as u64,
        }
    }

    /// The instant of a core deadline (monotonic microseconds, as in [`Stamp::mono_us`]).
    fn at(&self, mono_us: u64) -> tokio::time::Instant {
        self.0 + Duration::from_micros(mono_us)
    }
}

/// SIGINT, SIGTERM and SIGHUP as they reach the proxy, for [`run`] to forward to the agent.
///
/// # Errors
/// Failures to set up signal handling.
pub fn unix_signals() -> io::Result<mpsc::Receiver<i32>> {
    let mut sigint = signal(SignalKind::interrupt())?;
    let mut sigterm = signal(SignalKind::terminate())?;
    let mut sighup = signal(SignalKind::hangup())?;
    let (tx, rx) = mpsc::channel(16);
    tokio::spawn(async move {
        loop {
            let sig = tokio::select! {
                Some(()) = sigint.recv() => libc::SIGINT,
                Some(()) = sigterm.recv() => libc::SIGTERM,
                Some(()) = sighup.recv() => libc::SIGHUP,
                else => return,
            };
            if tx.send(sig).await.is_err() {
                return;
            }
        }
    });
    Ok(rx)
}

/// Run the proxy between the clients of `front` and the agent that `spawn` starts, until the
/// agent exits for good, forwarding the signals that arrive on `signals` (a host stops instead:
/// the agent's stdin is closed, then it is ended after the grace period); returns the exit code
/// for our process (the agent's, or 127 when it cannot be started). An agent that dies while a
/// client may come is started again by `spawn` (at most `config.respawn` times a minute) and its
/// sessions restored ([`Proxy::handle_agent_restart`]).
///
/// # Errors
/// Only a failure to wait for the agent.
pub async fn run<P: Process>(
    config: ShellConfig,
    front: Front,
    spawn: impl FnMut() -> std::io::Result<Agent<P>>,
    signals: mpsc::Receiver<i32>,
) -> anyhow::Result<i32> {
    let Some(mut running) = Running::start(config, front, spawn, signals) else {
        return Ok(127);
    };
    while !running.over() {
        running.step().await?;
    }
    Ok(running.finish().await)
}

/// Copies the agent's stderr to ours on its own thread, so an editor that does not drain our
/// stderr never stalls the relay (chunks are dropped while that thread is behind).
struct StderrCopy(std::sync::mpsc::SyncSender<Bytes>);

impl StderrCopy {
    fn spawn() -> StderrCopy {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Bytes>(256);
        std::thread::Builder::new()
            .name("stderr".into())
            .spawn(move || {
                let mut err = std::io::stderr();
                for chunk in rx {
                    let _ = err.write_all(&chunk);
                }
            })
            .expect("spawning the stderr thread");
        StderrCopy(tx)
    }

    fn pass(&self, chunk: Bytes) {
        let _ = self.0.try_send(chunk);
    }
}

/// The store-side services the core asks for: history reads, the catalog, forks.
struct Services {
    store: Store,
    /// When this run started (Unix microseconds).
    run_started_us: i64,
    /// Forks made in the store, answered to the main loop.
    fork_tx: mpsc::Sender<(u64, Result<(), String>)>,
    /// Catalog appends and reads (`session/list`, its change notifications), on their thread.
    catalog: catalog::CatalogService,
    history_tx: mpsc::Sender<(u64, HistoryChunk)>,
    /// Running history reads and their cancel flags.
    fetches: HashMap<u64, Arc<AtomicBool>>,
}

impl Services {
    fn fetch_history(&mut self, request: HistoryRequest) {
        let cancel = Arc::new(AtomicBool::new(false));
        self.fetches.insert(request.load, cancel.clone());
        let store = self.store.clone();
        let tx = self.history_tx.clone();
        tokio::task::spawn_blocking(move || history::read(&store, request, cancel, tx));
    }

    fn cancel_history(&mut self, load: u64) {
        if let Some(flag) = self.fetches.remove(&load) {
            flag.store(true, Ordering::Relaxed);
        }
    }

    /// Fork `parent` into a new session `fork` in the store (through the turn of `message`,
    /// or all of it) on a blocking thread; the outcome goes to the main loop. The copy is
    /// stamped just before this run started, so it comes before the fork's own segment of this
    /// run, wherever segments are read in order.
    fn fork(&self, op: u64, parent: &str, fork: &str, message: Option<String>) {
        let unix_us = self.run_started_us - 1;
        let (store, tx) = (self.store.clone(), self.fork_tx.clone());
        let (parent, fork) = (parent.to_string(), fork.to_string());
        tokio::task::spawn_blocking(move || {
            let point = message.map_or(ForkPoint::All, ForkPoint::Message);
            let outcome = fork_session(&store, &parent, point, &fork, unix_us)
                .map(|_| ())
                .map_err(|e| format!("{e:#}"));
            let _ = tx.blocking_send((op, outcome));
        });
    }

    /// Write what the core learned with the turns (before anything else it asks of the
    /// catalog), unless the store is full.
    fn turn_facts(&mut self, facts: Vec<(CatalogUpdate, i64)>, store_full: bool) {
        if !facts.is_empty() && !store_full {
            let entries = facts
                .into_iter()
                .map(|(u, t)| catalog_entry(u, t))
                .collect();
            self.catalog.write(entries);
        }
    }
}

/// The catalog entry of a core's update learned at `t` (Unix microseconds).
fn catalog_entry(update: CatalogUpdate, t: i64) -> CatalogEntry {
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
    }
}

/// Where the core's actions go.
struct Outputs {
    journals: JournalSet<Batch>,
    to_agent: Output,
    to_client: FrontOutput,
    services: Services,
    /// `--otlp`, `--trace-context`: sees every action before it is applied.
    otel: Option<crate::otel::live::Hook>,
}

/// What a batch of actions releases once its records are written.
#[derive(Default)]
struct Batch {
    forwards: Vec<(Peer, Bytes)>,
    close_agent: bool,
    /// History reads, started once the records before them are written (a live session's
    /// replay must find every record the core numbered before it).
    fetches: Vec<HistoryRequest>,
    /// Client connections to end.
    end_clients: Vec<ConnId>,
}

impl Outputs {
    /// Forward a written batch; returns true when it closed the agent's stdin.
    fn deliver(&mut self, batch: Batch) -> bool {
        for (to, line) in batch.forwards {
            match to {
                Peer::Agent => self.to_agent.push(line),
                Peer::Client(conn) => self.to_client.push(conn, line),
            }
        }
        self.to_client.write_now();
        self.to_agent.write_now();
        for request in batch.fetches {
            self.services.fetch_history(request);
        }
        if let FrontOutput::Hub(outboxes) = &mut self.to_client {
            for conn in batch.end_clients {
                outboxes.end(conn);
            }
        }
        if batch.close_agent {
            self.to_agent.close();
        }
        batch.close_agent
    }

    /// Stop reading sources while a destination or the compressor is behind.
    fn busy_for(&self, destination: &Output) -> bool {
        destination.full() || self.journals.queued() >= 2
    }

    /// The same, for the clients' side.
    fn busy_for_clients(&self) -> bool {
        self.to_client.full() || self.journals.queued() >= 2
    }
}

/// What applying the core's actions asks of the loop.
#[derive(Default)]
struct Applied {
    /// The agent's stdin was closed.
    closed_agent: bool,
    /// Kill the agent (it stalled): it is restarted as after a crash.
    restart_agent: bool,
}

/// Apply the core's actions in order: journal the batch, then forward it once written.
fn apply(core: &mut Proxy, clock: &Clock, out: &mut Outputs) -> Applied {
    let mut applied = Applied::default();
    let mut batch = Batch::default();
    while let Some(mut action) = core.poll_action() {
        if let Some(hook) = out.otel.as_mut() {
            hook.action(&mut action);
        }
        match action {
            Action::OpenSession {
                session,
                cwd,
                initialize,
            } => {
                let entry = out
                    .journals
                    .open_session(&session, cwd, &initialize, clock.now());
                if let Some(entry) = entry {
                    out.services.catalog.append(entry);
                }
            }
            Action::Journal { target, record } => out.journals.append(&target, &record),
            Action::Forward { to, line } => batch.forwards.push((to, line)),
            Action::CloseAgentStdin => batch.close_agent = true,
            Action::FetchHistory {
                load,
                session,
                support,
                transcript_limit,
                until,
            } => batch.fetches.push(HistoryRequest {
                load,
                session: session.to_string(),
                support,
                transcript_limit,
                until: until.map(|seq| Until {
                    run: out.journals.run().to_owned(),
                    seq,
                }),
            }),
            Action::EndClient(conn) => batch.end_clients.push(conn),
            Action::CancelHistory { load } => out.services.cancel_history(load),
            Action::FetchSessions { request } => out.services.catalog.sessions(request),
            Action::FindFreeId { ask, session } => {
                // One stat per session the agent creates (rare), to keep an ID it reuses apart.
                let free = proto::reuse_candidates(&session).find(|id| !out.journals.holds(id));
                core.handle_free_id(clock.now(), ask, free.unwrap_or(session));
            }
            Action::TurnFacts(facts) => {
                let full = out.journals.store_full();
                out.services.turn_facts(facts, full);
            }
            Action::Catalog(update) if !out.journals.store_full() => {
                let entry = catalog_entry(update, clock.now().unix_us);
                out.services.catalog.append(entry);
            }
            Action::Catalog(_) => {}
            Action::Log(message) => tracing::info!("{message}"),
            Action::RestartAgent => applied.restart_agent = true,
            Action::ForkJournal {
                op,
                parent,
                fork,
                message,
            } => out.services.fork(op, &parent, &fork, message),
        }
    }
    let empty = batch.forwards.is_empty()
        && !batch.close_agent
        && batch.fetches.is_empty()
        && batch.end_clients.is_empty();
    match out.journals.commit(batch, empty) {
        Commit::Done(batch) => applied.closed_agent = out.deliver(batch),
        Commit::Queued => {}
    }
    applied
}
