//! The core's actions applied in order ([`apply`]): a batch journaled, then forwarded once
//! written ([`Batch`], [`Outputs::deliver`]); what applying asks of the loop ([`Applied`]).

use bytes::Bytes;

use super::catalog_service::catalog_entry;
use super::clock::RunClock;
use super::front::FrontOutput;
use super::history::{HistoryRequest, Until};
use super::journals::{Commit, JournalSet};
use super::pipes::Output;
use super::services::Services;
use crate::proto::{Action, ConnId, Peer, Proxy, first_free};

/// Where the core's actions go.
pub(super) struct Outputs {
    pub(super) journals: JournalSet<Batch>,
    pub(super) to_agent: Output,
    pub(super) to_client: FrontOutput,
    pub(super) services: Services,
    /// `--otlp`, `--trace-context`: sees every action before it is applied.
    pub(super) otel: Option<crate::otel::live::Hook>,
}

/// What a batch of actions releases once its records are written.
#[derive(Default)]
pub(super) struct Batch {
    pub(super) forwards: Vec<(Peer, Bytes)>,
    pub(super) close_agent: bool,
    /// History reads, started once the records before them are written (a live session's
    /// replay must find every record the core numbered before it).
    pub(super) fetches: Vec<HistoryRequest>,
    /// Client connections to end.
    pub(super) end_clients: Vec<ConnId>,
}

impl Outputs {
    /// Forward a written batch; returns true when it closed the agent's stdin.
    pub(super) fn deliver(&mut self, batch: Batch) -> bool {
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
    pub(super) fn busy_for(&self, destination: &Output) -> bool {
        destination.full() || self.journals.queued() >= 2
    }

    /// The same, for the clients' side.
    pub(super) fn busy_for_clients(&self) -> bool {
        self.to_client.full() || self.journals.queued() >= 2
    }
}

/// What applying the core's actions asks of the loop.
#[derive(Default)]
pub(super) struct Applied {
    /// The agent's stdin was closed.
    pub(super) closed_agent: bool,
    /// Kill the agent (it stalled): it is restarted as after a crash.
    pub(super) restart_agent: bool,
}

/// Apply the core's actions in order: journal the batch, then forward it once written.
pub(super) fn apply(core: &mut Proxy, clock: &RunClock, out: &mut Outputs) -> Applied {
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
                agent,
            } => batch.fetches.push(HistoryRequest {
                load,
                session: session.to_string(),
                support,
                transcript_limit,
                agent: out.journals.agent(agent.as_deref()),
                until: until.map(|seq| Until {
                    run: out.journals.run().to_owned(),
                    seq,
                }),
            }),
            Action::EndClient(conn) => batch.end_clients.push(conn),
            Action::CancelHistory { load } => out.services.cancel_history(load),
            Action::FetchSessions { request, agent } => {
                let response = agent.and_then(|r| serde_json::from_slice(&r).ok());
                out.services.catalog.sessions(request, response);
            }
            Action::FindFreeId { ask, session } => {
                // One stat per session the agent creates (rare), to keep an ID it reuses apart.
                let free = first_free(&session, |id| out.journals.holds(id));
                core.handle_free_id(clock.now(), ask, free);
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
