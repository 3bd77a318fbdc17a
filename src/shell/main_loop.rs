//! The main loop of [`super::run`] as a value: [`Running`] holds the core, what its actions go
//! to, the agent as it is now (it changes with each restart) and every input the loop waits on;
//! [`Running::step`] waits for one input, hands it to the core and applies what the core then
//! asks; [`Running::finish`] ends the run once [`Running::over`].

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;

use super::actions::{Outputs, apply};
use super::agent::{Agent, Process};
use super::catalog_service;
use super::clock::RunClock;
use super::config::ShellConfig;
use super::front::{EDITOR, Front, FrontInput, FrontOutput, Input};
use super::journals::{JournalSet, RunInfo};
use super::life;
use super::lines::LineSplitter;
use super::pipes::Reader;
use super::respawn;
use super::services::Services;
use super::stderr::StderrCopy;
use crate::journal::Event;
use crate::proto::{self, HistoryChunk, Peer, Proxy, Stamp};

/// One run of the proxy: everything its main loop reads, writes and decides with.
/// Longest the end of a run waits for its journals' last bytes to reach the shared store.
const SHIP_AT_END: Duration = Duration::from_secs(5);

pub(super) struct Running<P, S> {
    core: Proxy,
    clock: RunClock,
    out: Outputs,
    /// Starts the agent again after it died.
    spawn: S,
    /// Signals to forward (the stdio proxy) or to stop on (a host).
    signals: mpsc::Receiver<i32>,
    /// The agent process as the loop follows it.
    life: life::AgentLife,
    respawn: respawn::Respawn,
    agent_out: Reader,
    agent_err: Reader,
    process: P,
    /// The agent's output split into lines.
    out_lines: LineSplitter,
    err_buf: Vec<u8>,
    agent_stderr: StderrCopy,
    from_clients: FrontInput,
    /// A host's clients (they come and go), not the one editor.
    hosted: bool,
    /// A client may still send (the editor's input is open; a host has not stopped).
    client_open: bool,
    /// The editor stopped reading (seen once).
    client_gone_seen: bool,
    /// The store's answers: journal replays, forks, the catalog's lists and changes.
    history_rx: mpsc::Receiver<(u64, HistoryChunk)>,
    /// Sessions to go on in a new segment ([`Services::next_segment_tx`]).
    next_segment_rx: mpsc::UnboundedReceiver<(String, tokio::sync::oneshot::Sender<()>)>,
    fork_rx: mpsc::Receiver<(u64, Result<(), String>)>,
    catalog_rx: mpsc::UnboundedReceiver<catalog_service::CatalogAnswer>,
    /// How often the catalog is checked for other proxies' changes, while the client wants to
    /// hear of them (`session/list_changed`).
    list_tick: tokio::time::Interval,
    /// The `interval` fsync policy's tick, which also writes the catalog's coalesced entries.
    sync_tick: tokio::time::Interval,
    /// `--grace`: also how long the editor's last lines may take to be delivered at the end.
    grace: Duration,
    /// The shared store the journals are shipped to.
    fleet: Option<crate::fleet::Fleet>,
    /// The agent is a remote host (the bridge): its end is the connection's, and its restart
    /// a connection made again.
    remote: bool,
}

impl<P: Process, S: FnMut() -> std::io::Result<Agent<P>>> Running<P, S> {
    /// Start the agent (`None`: it cannot be started, said on stderr), open the run's journals
    /// and the store's services, and set the loop up between it and `front`.
    pub(super) fn start(
        config: ShellConfig,
        front: Front,
        mut spawn: S,
        signals: mpsc::Receiver<i32>,
    ) -> Option<Self> {
        let argv: Vec<String> = config
            .agent
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let agent = match spawn() {
            Ok(agent) => agent,
            Err(e) => {
                eprintln!(
                    "acp-journal: cannot start the agent `{}`: {e}",
                    argv.join(" ")
                );
                return None;
            }
        };
        let clock = RunClock(tokio::time::Instant::now());
        let start = clock.now();
        let info = RunInfo {
            run: config.run.clone(),
            argv: if config.core.redact {
                crate::redact::redact_argv(&argv)
            } else {
                argv
            },
            pid: std::process::id(),
        };
        let agent_line = info.argv.join(" ");
        let journals = JournalSet::open(
            config.journals.clone(),
            info,
            config.fsync,
            start,
            config.fleet.clone(),
        );
        // The shell answers which IDs the store holds (`FindFreeId`).
        let core = Proxy::new(proto::Config {
            asks_free_ids: true,
            ..config.core
        });
        let (history_tx, history_rx) = mpsc::channel(4);
        let (next_segment_tx, next_segment_rx) = mpsc::unbounded_channel();
        let (fork_tx, fork_rx) = mpsc::channel(4);
        let scope = catalog_service::ListScope {
            agent: agent_line,
            all: config.list_all,
            fleet: config.fleet.clone(),
        };
        let (catalog, catalog_rx) =
            catalog_service::CatalogService::start(config.journals.clone(), scope);
        let services = Services {
            run_started_us: config.started_us,
            fork_tx,
            journals: config.journals.clone(),
            catalog,
            history_tx,
            fetches: HashMap::new(),
            fleet: config.fleet.clone(),
            next_segment_tx,
        };
        let (from_clients, to_client) = match front {
            Front::Editor(client) => (
                FrontInput::Editor(client.input),
                FrontOutput::Editor(client.output),
            ),
            Front::Hub(hub) => (FrontInput::Hub(hub), FrontOutput::Hub(Default::default())),
        };
        let out = Outputs {
            journals,
            to_agent: agent.stdin,
            to_client,
            services,
            otel: config
                .tracing
                .enabled()
                .then(|| crate::otel::live::Hook::new(config.tracing.clone())),
        };
        let tick = |period| {
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick
        };
        Some(Running {
            core,
            clock,
            out,
            spawn,
            signals,
            life: life::AgentLife::new(config.grace),
            respawn: respawn::Respawn::new(config.respawn),
            agent_out: agent.stdout,
            agent_err: agent.stderr,
            process: agent.process,
            out_lines: LineSplitter::new(),
            err_buf: vec![0u8; 64 * 1024],
            agent_stderr: StderrCopy::spawn(),
            hosted: matches!(from_clients, FrontInput::Hub(_)),
            from_clients,
            client_open: true,
            client_gone_seen: false,
            history_rx,
            next_segment_rx,
            fork_rx,
            catalog_rx,
            list_tick: tick(Duration::from_millis(250)),
            sync_tick: tick(Duration::from_secs(1)),
            grace: config.grace,
            fleet: config.fleet.clone(),
            remote: config.core.remote,
        })
    }

    /// The agent is gone for good and every journal batch is written.
    pub(super) fn over(&self) -> bool {
        self.life.over() && self.out.journals.queued() == 0
    }

    /// Wait for one input, hand it to the core, then apply what the core asks.
    ///
    /// # Errors
    /// Only a failure to wait for the agent.
    pub(super) async fn step(&mut self) -> anyhow::Result<()> {
        let far = tokio::time::Instant::now() + Duration::from_secs(3600);
        let core_timer = self.core.poll_timeout().map(|at| self.clock.at(at));
        self.out.to_client.check();
        let throttled = (self.out.to_client.full() && !self.out.to_client.waiting())
            || (self.out.to_agent.full() && !self.out.to_agent.waiting());
        tokio::select! {
            biased;
            _ = self.out.to_client.writable(), if self.out.to_client.waiting() => self.out.to_client.write_now(),
            _ = self.out.to_agent.writable(), if self.out.to_agent.waiting() => self.out.to_agent.write_now(),
            Some(batch) = self.out.journals.finished(), if self.out.journals.queued() > 0 => {
                if self.out.deliver(batch) {
                    self.life.terminate_after_grace(tokio::time::Instant::now());
                }
                for entry in self.out.journals.take_closed() {
                    self.out.services.catalog.append(entry);
                }
            }
            read = self.agent_out.read_buf(self.out_lines.buffer()), if self.life.reads_out() && !self.out.busy_for_clients() => {
                let at = self.clock.now();
                match read {
                    Ok(n) if n > 0 => {
                        while let Some(line) = self.out_lines.next_line() {
                            self.core.handle_line(at, Peer::Agent, line);
                        }
                    }
                    _ => self.agent_output_ended(at),
                }
            }
            input = self.from_clients.read(), if self.client_open && self.core.reads_client() && !self.out.busy_for(&self.out.to_agent) && !self.out.to_client.stalled() => {
                self.client_input(input);
            }
            read = self.agent_err.read(&mut self.err_buf), if self.life.reads_err() => {
                match read {
                    Ok(n) if n > 0 => {
                        let chunk = Bytes::copy_from_slice(&self.err_buf[..n]);
                        self.agent_stderr.pass(chunk.clone());
                        self.core.handle_stderr(self.clock.now(), chunk);
                    }
                    _ => self.life.errors_ended(),
                }
            }
            Some((session, made)) = self.next_segment_rx.recv() => {
                let (seq, at) = (self.core.next_seq(), self.clock.now());
                let journals = &mut self.out.journals;
                let opened = journals.next_segment(&proto::SessionId::from(session.as_str()), seq, at);
                for entry in opened.into_iter().chain(journals.take_closed()) {
                    self.out.services.catalog.append(entry);
                }
                let _ = made.send(());
            }
            Some((load, chunk)) = self.history_rx.recv(), if !self.out.to_client.full() => {
                self.core.handle_history(self.clock.now(), load, chunk);
            }
            Some((op, outcome)) = self.fork_rx.recv() => self.core.handle_forked(self.clock.now(), op, outcome),
            Some(answer) = self.catalog_rx.recv() => match answer {
                catalog_service::CatalogAnswer::Sessions { request, sessions } => {
                    self.core.handle_sessions(self.clock.now(), request, sessions);
                }
                catalog_service::CatalogAnswer::Changed(cwds) => self.core.handle_journals_changed(self.clock.now(), &cwds),
            },
            exit = self.process.wait(), if self.life.running() => {
                let code = exit?;
                self.core.handle_event(self.clock.now(), Event::AgentExit { code });
                self.life.exited(code, tokio::time::Instant::now());
            }
            _ = tokio::time::sleep_until(self.life.terminate_due().unwrap_or(far)), if self.life.terminate_due().is_some() => {
                self.terminate_now();
            }
            _ = tokio::time::sleep_until(self.life.drain_due().unwrap_or(far)), if self.life.drain_due().is_some() => {
                tracing::warn!("the agent exited but its output is still open (a child process holds it); stopping");
                if self.life.stop_draining() {
                    // As at EOF: the client's pending requests get their answers.
                    self.agent_output_ended(self.clock.now());
                }
            }
            _ = tokio::time::sleep(Duration::from_millis(5)), if throttled => {}
            _ = tokio::time::sleep_until(core_timer.unwrap_or(far)), if core_timer.is_some() => {
                self.core.handle_tick(self.clock.now());
            }
            _ = self.sync_tick.tick() => {
                self.out.journals.sync();
                self.core.handle_facts_due();
            }
            _ = self.list_tick.tick(), if self.core.wants_list_changes() => self.out.services.catalog.check_changes(),
            Some(sig) = self.signals.recv(), if !self.hosted || self.client_open => self.signal(sig),
        }
        self.settle();
        Ok(())
    }

    /// The agent's output ended (EOF, or given up on): a last line without its newline, then
    /// EOF, which answers the client's pending requests; or, when the agent may be restarted,
    /// nothing yet: it is *dying*, and [`Running::settle`] decides once its exit status is known.
    fn agent_output_ended(&mut self, at: Stamp) {
        if let Some(partial) = self.out_lines.finish() {
            self.core.handle_line(at, Peer::Agent, partial);
        }
        let dying = self.life.restartable(self.respawn.enabled()) && self.core.can_restart();
        if !dying {
            self.core.handle_eof(at, Peer::Agent);
        }
        self.life.output_ended(dying);
    }

    /// What the clients' side said.
    fn client_input(&mut self, input: Input) {
        let at = self.clock.now();
        match input {
            Input::Lines(conn, lines) => {
                for line in lines {
                    self.core.handle_line(at, Peer::Client(conn), line);
                }
            }
            Input::Opened(conn, outbox) => {
                if let FrontOutput::Hub(outboxes) = &mut self.out.to_client {
                    outboxes.opened(conn, outbox);
                }
            }
            Input::Ended(conn) => {
                if let FrontOutput::Hub(outboxes) = &mut self.out.to_client
                    && outboxes.closed(conn)
                {
                    self.core.handle_eof(at, Peer::Client(conn));
                }
            }
            Input::Over if self.hosted => {
                self.core.handle_clients_gone(at);
                self.client_open = false;
            }
            Input::Over => {
                self.core.handle_eof(at, EDITOR);
                self.client_open = false;
            }
        }
    }

    /// The agent outstayed the client: SIGTERM, then SIGKILL.
    fn terminate_now(&mut self) {
        if let Some(sig) = self.life.terminate_now(tokio::time::Instant::now()) {
            tracing::warn!("the agent did not exit after the client left; sending signal {sig}");
            self.core
                .handle_event(self.clock.now(), Event::Terminate { signal: sig });
            if sig == libc::SIGKILL {
                self.process.kill();
            } else {
                self.process.signal(sig);
            }
        }
    }

    /// A signal reached the proxy: forwarded to the agent, or (a host) the host stops.
    fn signal(&mut self, sig: i32) {
        // The agent was asked to stop: its end is no crash to recover from.
        self.life.stop();
        if self.hosted {
            // A host stops: no client may come; the agent's stdin closes.
            tracing::info!("signal {sig}: stopping (the agent's sessions are in the journal)");
            self.core
                .handle_event(self.clock.now(), Event::Signal { signal: sig });
            self.core.handle_clients_gone(self.clock.now());
            self.client_open = false;
            if let FrontOutput::Hub(outboxes) = &mut self.out.to_client {
                outboxes.close_all();
            }
        } else {
            tracing::info!("forwarding signal {sig} to the agent");
            self.core
                .handle_event(self.clock.now(), Event::Signal { signal: sig });
            if self.life.running() {
                self.process.signal(sig);
            }
        }
    }

    /// After each input: connections dropped or gone, journal failures, a dead agent started
    /// again (or its end), then the core's actions applied.
    fn settle(&mut self) {
        if let FrontOutput::Hub(outboxes) = &mut self.out.to_client {
            for conn in outboxes.take_dropped() {
                self.core.handle_eof(self.clock.now(), Peer::Client(conn));
            }
        }
        if let FrontOutput::Editor(to_client) = &self.out.to_client
            && to_client.is_gone()
            && !self.client_gone_seen
        {
            self.client_gone_seen = true;
            tracing::info!("the client stopped reading (broken pipe)");
            self.core.handle_event(self.clock.now(), Event::ClientGone);
            if self.client_open {
                self.client_open = false;
                self.core.handle_eof(self.clock.now(), EDITOR);
            }
        }
        for failure in self.out.journals.take_failures() {
            self.core.handle_event(
                self.clock.now(),
                Event::JournalError {
                    journal: failure.journal,
                    error: failure.error,
                    store_full: failure.store_full,
                },
            );
        }
        if let Some(code) = self.life.take_death() {
            self.restart_or_end(code);
        }
        let applied = apply(&mut self.core, &self.clock, &mut self.out);
        if applied.closed_agent {
            self.life.terminate_after_grace(tokio::time::Instant::now());
        }
        if applied.restart_agent && self.life.running() {
            self.process.kill();
        }
    }

    /// The agent died with `code`: started again while a client may come and restarts remain,
    /// else its end reaches the core. (A host's connection, connected again, is told of by the
    /// bridge and the core.)
    fn restart_or_end(&mut self, code: i32) {
        let at = self.clock.now();
        let ended = self.ended(code);
        let restarted = if !self.client_open {
            None
        } else if !self.respawn.take(tokio::time::Instant::now()) {
            let again = if self.remote {
                "connecting again"
            } else {
                "restarting it again"
            };
            tracing::error!(
                "{ended} after {} restarts within a minute: not {again} (--respawn {})",
                self.respawn.recent(),
                self.respawn.limit()
            );
            None
        } else {
            match (self.spawn)() {
                Ok(agent) => Some(agent),
                Err(e) => {
                    tracing::error!("{ended} and cannot be started again: {e}");
                    None
                }
            }
        };
        match restarted {
            Some(agent) => {
                if !self.remote {
                    tracing::warn!("{ended}; restarted it");
                }
                self.out.to_agent = agent.stdin;
                self.agent_out = agent.stdout;
                self.agent_err = agent.stderr;
                self.process = agent.process;
                self.out_lines = LineSplitter::new();
                self.life.restarted();
                self.core.handle_agent_restart(at, code);
            }
            None => self.core.handle_eof(at, Peer::Agent),
        }
    }

    /// How the log tells of the agent's end: a process's exit status, or the end of the
    /// connection to a host.
    fn ended(&self, code: i32) -> String {
        if self.remote {
            "the connection to the host ended".to_string()
        } else {
            format!("the agent exited with status {code}")
        }
    }

    /// End the run: the OTLP exporter given its last seconds off the runtime, the journals
    /// closed and cataloged, what is queued for the editor delivered (for at most `--grace`);
    /// returns the exit code for our process: the agent's status, else 1.
    pub(super) async fn finish(mut self) -> i32 {
        if self.client_open
            && !self.life.stopping()
            && let Some(code) = self.life.status()
        {
            let why = if self.core.agent_answered_initialize() {
                ""
            } else {
                " before answering initialize"
            };
            tracing::error!("{}{why} while the editor was connected", self.ended(code));
        }
        if let Some(hook) = self.out.otel.take() {
            // Waits up to 3 s for the exporter: on a blocking thread, not the runtime's.
            let dropped = tokio::task::spawn_blocking(move || hook.finish(Duration::from_secs(3)))
                .await
                .unwrap_or_default();
            if dropped != crate::otel::live::Dropped::default() {
                tracing::warn!(
                    "OTLP export: {} spans and {} records dropped",
                    dropped.spans,
                    dropped.records
                );
                let (spans, records) = (dropped.spans, dropped.records);
                self.core
                    .handle_event(self.clock.now(), Event::OtlpDropped { spans, records });
                apply(&mut self.core, &self.clock, &mut self.out);
            }
        }
        self.core.handle_facts_due();
        apply(&mut self.core, &self.clock, &mut self.out);
        let end = self.clock.now();
        let code = self.life.status().unwrap_or(1);
        let Outputs {
            journals,
            to_client,
            services,
            ..
        } = self.out;
        let mut catalog = services.catalog;
        for entry in journals.close(self.core.next_seq(), end).await {
            catalog.append(entry);
        }
        // Written in order after everything else this run cataloged (off the runtime's thread).
        let _ = tokio::task::spawn_blocking(move || catalog.close()).await;
        // Deliver what is queued for the client (bounded: the client may have stopped reading).
        if let FrontOutput::Editor(mut to_client) = to_client {
            to_client.close();
            let flush_deadline = tokio::time::Instant::now() + self.grace;
            while to_client.backlog() > 0
                && !to_client.is_gone()
                && tokio::time::Instant::now() < flush_deadline
            {
                if to_client.waiting() {
                    let _ = tokio::time::timeout_at(flush_deadline, to_client.writable()).await;
                    to_client.write_now();
                } else {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
        }
        // The journals' last bytes go to the shared store (bounded: it may be down; the next
        // start ships what is left).
        if let Some(fleet) = &self.fleet {
            fleet.finish(SHIP_AT_END).await;
        }
        code
    }
}
