//! What the core does, as [`Action`]s in order: records numbered and redacted, lines forwarded,
//! and the lines the proxy writes itself (answers, its own requests, notices).
//!
//! Every component of the core emits through one [`Effects`], so the record sequence and the
//! order of actions are those of the calls. Lines for clients are queued unaddressed
//! ([`Queued::ToClients`]): the proxy routes them to connections as they are polled
//! ([`super::connection`]).

use std::collections::VecDeque;

use bytes::Bytes;
use serde_json::{Value, json};

use super::vocab::{Action, Peer, SessionId, Stamp, Target};
use crate::journal::Event;
use crate::journal::format::Body;
use crate::journal::format::Payload;
use crate::journal::format::Record;
use crate::redact;
use crate::wire::Side;
use crate::wire::envelope::{self, Peek, RequestId, response_line};
use crate::wire::rewrite::json_string;

/// An entry of the output queue.
#[derive(Debug)]
pub(super) enum Queued {
    /// An action, as it is.
    Action(Action),
    /// A line for clients, to be routed to connections.
    ToClients(Bytes),
    /// A line for the connection that sent this request (as the agent knows its id): a
    /// load's replay.
    ToAsker(RequestId, Bytes),
}

/// The core's output queue and record numbering.
#[derive(Debug)]
pub(super) struct Effects {
    redact: bool,
    seq: u64,
    actions: VecDeque<Queued>,
}

impl Effects {
    pub(super) fn new(redact: bool) -> Effects {
        Effects {
            redact,
            seq: 0,
            actions: VecDeque::new(),
        }
    }

    pub(super) fn pop(&mut self) -> Option<Queued> {
        self.actions.pop_front()
    }

    pub(super) fn push(&mut self, action: Action) {
        self.actions.push_back(Queued::Action(action));
    }

    /// An action to go out next, ahead of everything queued.
    pub(super) fn push_front(&mut self, action: Action) {
        self.actions.push_front(Queued::Action(action));
    }

    /// Sequence number of the next record.
    pub(super) fn next_seq(&self) -> u64 {
        self.seq
    }

    /// A numbered record.
    pub(super) fn record(&mut self, at: Stamp, body: Body) -> Record {
        let seq = self.seq;
        self.seq += 1;
        Record {
            seq,
            unix_us: at.unix_us,
            mono_us: at.mono_us,
            body,
        }
    }

    /// Queue a record. Every record passes here: events (which may quote a prompt) are
    /// redacted here, messages by [`Effects::payload`] and stderr by its flush.
    pub(super) fn journal(&mut self, target: Target, mut record: Record) {
        if self.redact
            && let Body::Event(event) = &mut record.body
        {
            redact::redact_event(event);
        }
        self.push(Action::Journal { target, record });
    }

    /// Journal an event.
    pub(super) fn event(&mut self, at: Stamp, target: Target, event: Event) {
        let record = self.record(at, Body::Event(event));
        self.journal(target, record);
    }

    /// Forward `line` to the agent, or to the clients it is for.
    pub(super) fn forward(&mut self, to: Side, line: Bytes) {
        self.actions.push_back(match to {
            Side::Agent => Queued::Action(Action::Forward {
                to: Peer::Agent,
                line,
            }),
            Side::Client => Queued::ToClients(line),
        });
    }

    /// Queue `line` for the connection that sent request `id` (a load's replay).
    pub(super) fn forward_to_asker(&mut self, id: &RequestId, line: Bytes) {
        self.actions.push_back(Queued::ToAsker(id.clone(), line));
    }

    /// How a line is stored: classified, and redacted when configured.
    pub(super) fn payload(&self, peek: &Peek<'_>, line: Bytes) -> Payload {
        let mut payload = Payload::from_line_classified(line, peek.is_json());
        if self.redact
            && let Some(redacted) = redact::redact_line(peek, &payload.bytes)
        {
            payload.bytes = Bytes::from(redacted);
            payload.redacted = true;
        }
        payload
    }

    /// Redact agent stderr as configured.
    pub(super) fn stderr_text(&self, text: Vec<u8>) -> Vec<u8> {
        match self.redact {
            true => redact::redact_tokens(&text).unwrap_or(text),
            false => text,
        }
    }

    /// The record of a line the proxy made or consumed itself (redacted as configured: a
    /// `session/new` it sends carries the load's `mcpServers`).
    pub(super) fn proxy_record(&mut self, at: Stamp, from: Side, line: Bytes) -> Record {
        let mut payload = self.payload(&envelope::peek(&line), line.clone());
        payload.proxy = true;
        self.record(at, Body::Message { from, payload })
    }

    /// The record of an agent line the proxy forwards as it came.
    pub(super) fn agent_record(&mut self, at: Stamp, line: Bytes) -> Record {
        let payload = self.payload(&envelope::peek(&line), line.clone());
        self.record(
            at,
            Body::Message {
                from: Side::Agent,
                payload,
            },
        )
    }

    /// The record of a client line the proxy consumes.
    pub(super) fn client_record(&mut self, at: Stamp, peek: &Peek<'_>, line: &Bytes) -> Record {
        let payload = self.payload(peek, line.clone());
        self.record(
            at,
            Body::Message {
                from: Side::Client,
                payload,
            },
        )
    }

    /// Journal a consumed client line to `target`.
    pub(super) fn journal_client(
        &mut self,
        at: Stamp,
        target: Target,
        peek: &Peek<'_>,
        line: &Bytes,
    ) {
        let record = self.client_record(at, peek, line);
        self.journal(target, record);
    }

    /// Answer a client request ourselves: journal (to `target`) and forward.
    pub(super) fn answer(
        &mut self,
        at: Stamp,
        target: Target,
        id: &RequestId,
        outcome: Result<&str, &str>,
    ) {
        let line = response_line(id, outcome);
        let record = self.proxy_record(at, Side::Agent, line.clone());
        self.journal(target, record);
        self.forward(Side::Client, line);
    }

    /// Send a request or notification of the proxy's own to the agent, journaled to `target`.
    /// `id` is `None` for a notification.
    pub(super) fn send_agent(
        &mut self,
        at: Stamp,
        target: Target,
        id: Option<&RequestId>,
        method: &str,
        params: &str,
    ) {
        let line = request_line(id, method, params);
        let record = self.proxy_record(at, Side::Client, line.clone());
        self.journal(target, record);
        self.forward(Side::Agent, line);
    }

    /// Send the client a `session/update` of the proxy's own, journaled with `session`.
    pub(super) fn notify_client(&mut self, at: Stamp, session: &SessionId, update: Value) {
        let msg = json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": &**session, "update": update}});
        let mut line = msg.to_string().into_bytes();
        line.push(b'\n');
        let line = Bytes::from(line);
        let record = self.proxy_record(at, Side::Agent, line.clone());
        self.journal(Target::Session(session.clone()), record);
        self.forward(Side::Client, line);
    }
}

/// The line of a request of the proxy's own to the agent (a notification without `id`).
pub(super) fn request_line(id: Option<&RequestId>, method: &str, params: &str) -> Bytes {
    Bytes::from(
        match id {
            Some(id) => format!(
                r#"{{"jsonrpc":"2.0","id":{},"method":{},"params":{params}}}"#,
                id.to_json(),
                json_string(method)
            ),
            None => format!(
                r#"{{"jsonrpc":"2.0","method":{},"params":{params}}}"#,
                json_string(method)
            ),
        } + "\n",
    )
}
