//! Clients coming and going on a host's sessions: the core's transitions for connections
//! ([`super::connection`] routes; these act). A later connection's requests and `initialize`
//! (`take_later`), a host's client joining or leaving a session (`join_or_leave`), what routing
//! leaves for the core (`settle_connections`), and the agent requests a connection leaves
//! unanswered: asked again, made to wait for someone to attach, or answered for the client
//! (`ask_again`, `expire_waiting`, `answer_unasked`).

use bytes::Bytes;
use serde_json::json;

use super::Proxy;
use super::connection;
use super::native::replay_from;
use super::vocab::{Action, ConnId, LoadMode, SessionId, Stamp, Target};
use crate::wire::Side;
use crate::wire::envelope::{self, Kind, Peek, RequestId, error_json};

impl Proxy {
    /// What routing left for the core: attachments (a session created for a connection, a
    /// connection joining one), connections to end, attachments that ended (a failed join),
    /// agent requests nobody is left to answer.
    pub(super) fn settle_connections(&mut self) {
        for (s, conn) in self.connections.take_created() {
            self.sessions.attach(&s, conn);
        }
        for conn in self.connections.take_to_end() {
            self.fx.push(Action::EndClient(conn));
        }
        for (conn, s) in self.connections.take_detached() {
            self.sessions.detach_from(&s, conn);
        }
        let at = Stamp {
            unix_us: self.unix_now,
            mono_us: self.now,
        };
        for (id, line) in self.connections.take_orphaned() {
            self.ask_again(at, id, line);
        }
    }

    /// A request of a connection other than the first, under the id it is renumbered to (its
    /// answer gets the connection's own id back when routed). Its `initialize` is answered
    /// with the agent's recorded answer: the agent is initialized once.
    pub(super) fn take_later(&mut self, at: Stamp, conn: ConnId, line: Bytes) {
        let peek = envelope::peek(&line);
        if conn != ConnId::FIRST
            && let Kind::Request { id, method } = &peek.kind
            && method == "initialize"
            && let Some(answer) = self.initialize.response.as_deref()
            && let Some(result) = envelope::peek(answer).result
        {
            self.fx.journal_client(at, Target::Run, &peek, &line);
            self.fx.answer(at, Target::Run, id, Ok(result.get()));
            return;
        }
        self.take(at, Side::Client, &peek, &line);
    }

    /// An agent request whose connection ended unanswered: asked again of another connection
    /// attached to its session (or, for a host, of the next to attach), else answered for the
    /// client (a permission request as cancelled, anything else with an error), so the agent
    /// is never left waiting.
    pub(super) fn ask_again(&mut self, at: Stamp, id: RequestId, line: Bytes) {
        let peek = envelope::peek(&line);
        if peek
            .session
            .as_deref()
            .is_some_and(|s| self.connections.is_hosted() || !self.sessions.attached(s).is_empty())
        {
            // Routed again: to an attached connection, or (a host's) to wait for one.
            self.fx.forward(Side::Client, line);
            return;
        }
        self.answer_unasked(
            at,
            id,
            &line,
            "the client connection this request went to has ended",
        );
    }

    /// A host's agent requests that waited for a client longer than
    /// [`Config::unattended_timeout_us`] are answered.
    pub(super) fn expire_waiting(&mut self, at: Stamp) {
        let before = at.mono_us.saturating_sub(self.config.unattended_timeout_us);
        for waiting in self.connections.expired(before) {
            let why = "no client attached to the session in time to answer this request";
            self.answer_unasked(at, waiting.id, &waiting.line, why);
        }
    }

    /// Answer the agent's request `id` (its `line`) for the client, which cannot (`why`): a
    /// permission request as cancelled, anything else with error -32603.
    pub(super) fn answer_unasked(&mut self, at: Stamp, id: RequestId, line: &Bytes, why: &str) {
        let peek = envelope::peek(line);
        if !self.pending.contains_key(&(Side::Agent, id.clone())) {
            // Not the current agent's, or answered meanwhile: nobody waits.
            return;
        }
        let error;
        let outcome = match peek.method() {
            Some("session/request_permission") => Ok(r#"{"outcome":{"outcome":"cancelled"}}"#),
            _ => {
                error = error_json(-32603, why, None);
                Err(error.as_str())
            }
        };
        let answer = envelope::response_line(&id, outcome);
        let record = self.fx.proxy_record(at, Side::Client, answer.clone());
        let target = self.attribute(Side::Client, &envelope::peek(&answer), &record);
        self.fx.journal(target, record);
        self.fx.forward(Side::Agent, answer);
    }

    /// A host's client joins or leaves session `s` (true when the request was taken here).
    /// A load or resume of a session live on the agent joins it: served from the journal,
    /// never passed to the agent, so the other connections' turn goes on untouched; the
    /// history replayed is what the journal held when the request came and every live line
    /// follows it once ([`Connections::joins_live`]). `session/attach` (the multi-client
    /// draft) joins likewise, bringing the session up first when it is not live, with the
    /// history its `historyPolicy` asks for. `session/detach`, and `session/close` while other
    /// connections stay attached, detach this connection only.
    pub(super) fn join_or_leave(
        &mut self,
        at: Stamp,
        id: &RequestId,
        method: &str,
        s: &SessionId,
        peek: &Peek<'_>,
        line: &Bytes,
    ) -> bool {
        // `--load off` serves nothing from the journal: joins go to the agent as they came.
        let live = self.sessions.is_live(s) && self.config.load != LoadMode::Off;
        let conn = self.connections.conn_of(id);
        match method {
            "session/load" | "session/resume" if live && !self.agent.v2 => {
                self.connections.joins_live(id);
                self.start_load(at, id, peek, line, method == "session/load", true);
                true
            }
            // ACP v2: a resume replays with `replayFrom: {type: "start"}`, else nothing; another
            // cursor is the agent's to take.
            "session/resume" if live => match replay_from(peek.params).as_deref() {
                None | Some("start") => {
                    let replay = replay_from(peek.params).is_some();
                    self.connections.joins_live(id);
                    self.start_load(at, id, peek, line, replay, true);
                    true
                }
                Some(_) => false,
            },
            "session/attach" if self.config.load != LoadMode::Off => {
                let full = connection::Attach::parse(peek.params)
                    .is_ok_and(|a| a.history == connection::HistoryPolicy::Full);
                if live {
                    self.connections.joins_live(id);
                }
                self.start_load(at, id, peek, line, full, live);
                true
            }
            "session/detach" | "session/close" => {
                let others = self
                    .sessions
                    .attached(s)
                    .iter()
                    .any(|c| *c != conn && self.connections.is_live(*c));
                if method == "session/close" && !others {
                    return false;
                }
                self.fx.journal_client(at, Target::Run, peek, line);
                self.sessions.detach_from(s, conn);
                let unanswered = self.connections.detach(conn, s);
                let answer = match method {
                    "session/detach" => json!({"sessionId": &**s, "status": "detached"}),
                    _ => json!({}),
                };
                self.fx.answer(at, Target::Run, id, Ok(&answer.to_string()));
                for (id, line) in unanswered {
                    self.ask_again(at, id, line);
                }
                true
            }
            _ => false,
        }
    }
}
