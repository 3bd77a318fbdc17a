//! The recording played as an agent: a pure state machine the `replay` command drives.
//!
//! The client's lines go in ([`Player::client_line`]); lines to send come out, each with the
//! recorded delay before it ([`Player::next_out`] / [`Player::take_out`]). A re-issued agent
//! request holds back what follows it until the client answers, as a real agent waits for a
//! permission. Answers to requests that nothing else is playing before go out at once
//! ([`Player::take_immediate`]).
//!
//! Matching is sequential per session and method: the n-th live `session/prompt` of a session is
//! served by its n-th recorded one, whatever its content; differences in the content (volatile
//! fields aside, see [`super::matching`]) are reported. With `strict`, a request that differs is
//! answered with an error instead of being served.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::rc::Rc;

use bytes::Bytes;
use serde_json::{Value, json};

use super::matching::{self, Difference};
use super::recording::{AgentStep, Exchange, Recording};
use crate::proto::ClientSupport;
use crate::proto::history::Replay;
use crate::wire::envelope::{self, Kind, RequestId};
use crate::wire::rewrite;

/// A line to send to the client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Out {
    /// Recorded time between the previous line of the same exchange and this one.
    pub delay_us: u64,
    /// The line, with its `\n`.
    pub line: Vec<u8>,
    /// The id of the request this line is, when the client must answer it before more is sent.
    awaits: Option<String>,
}

/// A divergence of the live client from the recording.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// The session, when the message had one.
    pub session: Option<String>,
    /// The prompt turn (0 before the first prompt).
    pub turn: usize,
    /// What was compared, e.g. `session/prompt` or `answer to session/request_permission`.
    pub what: String,
    /// The differing fields, or empty when `problem` says it all.
    pub differences: Vec<Difference>,
    /// A problem that is not a field difference (nothing recorded left, unknown session…).
    pub problem: Option<String>,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "turn {}, {}", self.turn, self.what)?;
        if let Some(session) = &self.session {
            write!(f, " (session {session})")?;
        }
        if let Some(problem) = &self.problem {
            write!(f, ": {problem}")?;
        }
        for d in &self.differences {
            write!(f, "\n    {d}")?;
        }
        Ok(())
    }
}

/// What a re-issued agent request waits for.
struct Awaited {
    session: String,
    turn: usize,
    method: String,
    answer: Option<Value>,
}

/// The replaying agent.
pub struct Player {
    /// Shared so an exchange can be played while `self` changes (never modified).
    recording: Rc<Recording>,
    strict: bool,
    /// Per recorded session: which exchanges were served.
    used: Vec<Vec<bool>>,
    /// Per recorded session: whether a live `session/new` or `session/load` took it.
    bound: Vec<bool>,
    support: ClientSupport,
    queue: VecDeque<Out>,
    immediate: VecDeque<Vec<u8>>,
    blocked: Option<String>,
    awaiting: HashMap<String, Awaited>,
    next_id: u64,
    reports: Vec<Report>,
    served: usize,
    errors: usize,
}

/// Append `\n`.
fn with_newline(mut line: Vec<u8>) -> Vec<u8> {
    line.push(b'\n');
    line
}

/// A JSON-RPC error response line.
fn error_line(id: &RequestId, code: i64, message: &str, data: Option<Value>) -> Vec<u8> {
    envelope::response_line(id, Err(&envelope::error_json(code, message, data))).to_vec()
}

/// A JSON-RPC result response line.
fn result_line(id: &RequestId, result: &Value) -> Vec<u8> {
    envelope::response_line(id, Ok(&result.to_string())).to_vec()
}

/// `line` with its `id` member set to `id` (raw JSON), other bytes unchanged.
fn with_id(line: &[u8], id: &str) -> Vec<u8> {
    let edited = rewrite::edit_line(line, |o| o.set("id", id.to_string()));
    with_newline(edited.unwrap_or_else(|| line.to_vec()))
}

impl Player {
    /// A player of `recording`.
    pub fn new(recording: Recording, strict: bool) -> Player {
        let used = recording
            .sessions
            .iter()
            .map(|s| vec![false; s.exchanges.len()])
            .collect();
        let bound = vec![false; recording.sessions.len()];
        Player {
            recording: Rc::new(recording),
            strict,
            used,
            bound,
            support: ClientSupport::default(),
            queue: VecDeque::new(),
            immediate: VecDeque::new(),
            blocked: None,
            awaiting: HashMap::new(),
            next_id: 0,
            reports: Vec::new(),
            served: 0,
            errors: 0,
        }
    }

    /// The next line to send after its delay, unless playback waits for a client answer.
    pub fn next_out(&self) -> Option<&Out> {
        if self.blocked.is_some() {
            return None;
        }
        self.queue.front()
    }

    /// Take the line [`Player::next_out`] returned.
    pub fn take_out(&mut self) -> Option<Out> {
        if self.blocked.is_some() {
            return None;
        }
        let out = self.queue.pop_front()?;
        self.blocked.clone_from(&out.awaits);
        Some(out)
    }

    /// A line to send at once (answers nothing else is playing before).
    pub fn take_immediate(&mut self) -> Option<Vec<u8>> {
        self.immediate.pop_front()
    }

    /// Divergences found since the last call.
    pub fn take_reports(&mut self) -> Vec<Report> {
        std::mem::take(&mut self.reports)
    }

    /// Client requests served from the recording so far.
    pub fn served(&self) -> usize {
        self.served
    }

    /// Divergences found, in all.
    pub fn divergences(&self) -> usize {
        self.errors
    }

    /// Whether anything is still to be sent or answered.
    pub fn idle(&self) -> bool {
        self.queue.is_empty() && self.immediate.is_empty() && self.blocked.is_none()
    }

    fn report(&mut self, report: Report) {
        self.errors += 1;
        self.reports.push(report);
    }

    /// Handle one line from the client.
    pub fn client_line(&mut self, line: &[u8]) {
        let peek = envelope::peek(line);
        let params: Value = peek
            .params
            .and_then(|p| serde_json::from_str(p.get()).ok())
            .unwrap_or(Value::Null);
        let session = peek.session.as_deref().map(str::to_owned);
        match peek.kind.clone() {
            Kind::Request { id, method } => self.request(id, &method, session, params),
            Kind::Notification { method } => self.notification(&method, session, params),
            Kind::Response { id, .. } => {
                let live: Value = serde_json::from_slice(line).unwrap_or(Value::Null);
                self.answer(&id.to_json(), live);
            }
            Kind::OtherJson | Kind::Invalid => self.report(Report {
                session: None,
                turn: 0,
                what: "client line".into(),
                differences: Vec::new(),
                problem: Some(format!(
                    "not a JSON-RPC message: {}",
                    String::from_utf8_lossy(line).trim_end()
                )),
            }),
        }
    }

    fn request(&mut self, id: RequestId, method: &str, session: Option<String>, params: Value) {
        match method {
            "initialize" => self.initialize(&id, &params),
            "session/new" => {
                let found = (0..self.recording.sessions.len())
                    .find(|&s| !self.bound[s] && self.next_exchange(s, "session/new").is_some());
                match found {
                    Some(s) => {
                        self.bound[s] = true;
                        self.serve(s, &id, method, &params);
                    }
                    None => self.not_recorded(&id, None, 0, method, "no more recorded sessions"),
                }
            }
            "session/load" => self.load(&id, session, &params),
            "session/list" => {
                let sessions: Vec<Value> = self
                    .recording
                    .sessions
                    .iter()
                    .map(|s| json!({"sessionId": s.id, "cwd": s.cwd.clone().unwrap_or_default()}))
                    .collect();
                self.immediate
                    .push_back(result_line(&id, &json!({"sessions": sessions})));
            }
            _ => match session
                .as_deref()
                .and_then(|s| self.recording.session_index(s))
            {
                Some(s) => {
                    self.bound[s] = true;
                    self.serve(s, &id, method, &params);
                }
                None => {
                    let problem = match &session {
                        Some(_) => "this session is not in the recording",
                        None => "this request is not in the recording",
                    };
                    self.not_recorded(&id, session, 0, method, problem);
                }
            },
        }
    }

    fn initialize(&mut self, id: &RequestId, params: &Value) {
        self.support = ClientSupport::from_capabilities(&params["clientCapabilities"]);
        if let Some(recorded) = self.recording.initialize_request.as_ref() {
            let differences = matching::compare(&recorded["params"], params);
            if !differences.is_empty() {
                // Reported, never refused: a different client is the point of a replay.
                self.report(Report {
                    session: None,
                    turn: 0,
                    what: "initialize".into(),
                    differences,
                    problem: None,
                });
            }
        }
        match self.recording.initialize_response.as_ref() {
            Some(response) => {
                let line = serde_json::to_vec(response).expect("JSON serializes");
                self.served += 1;
                self.immediate.push_back(with_id(&line, &id.to_json()));
            }
            None => self.not_recorded(id, None, 0, "initialize", "the recording has no initialize"),
        }
    }

    /// The first exchange of `method` in session `s` not served yet.
    fn next_exchange(&self, s: usize, method: &str) -> Option<usize> {
        let exchanges = &self.recording.sessions[s].exchanges;
        (0..exchanges.len()).find(|&i| !self.used[s][i] && exchanges[i].method == method)
    }

    fn not_recorded(
        &mut self,
        id: &RequestId,
        session: Option<String>,
        turn: usize,
        method: &str,
        problem: &str,
    ) {
        self.report(Report {
            session,
            turn,
            what: method.to_string(),
            differences: Vec::new(),
            problem: Some(problem.to_string()),
        });
        self.immediate.push_back(error_line(
            id,
            -32603,
            &format!("acp-journal replay: {method}: {problem}"),
            None,
        ));
    }

    /// Serve the next recorded `method` exchange of session `s` to request `id`.
    fn serve(&mut self, s: usize, id: &RequestId, method: &str, params: &Value) {
        let session = self.recording.sessions[s].id.clone();
        let Some(index) = self.next_exchange(s, method) else {
            let turn = self.recording.sessions[s].turns() + usize::from(method == "session/prompt");
            let recorded = self.recording.sessions[s]
                .exchanges
                .iter()
                .filter(|e| e.method == method)
                .count();
            let problem = format!("the recording has no more of these (it has {recorded})");
            self.not_recorded(id, Some(session), turn, method, &problem);
            return;
        };
        let exchange = &self.recording.sessions[s].exchanges[index];
        let turn = exchange.turn;
        let differences = matching::compare(&exchange.params, params);
        if !differences.is_empty() {
            let first = differences[0].to_string();
            self.report(Report {
                session: Some(session.clone()),
                turn,
                what: method.to_string(),
                differences,
                problem: None,
            });
            if self.strict {
                self.immediate.push_back(error_line(
                    id,
                    -32602,
                    &format!("acp-journal replay --strict: turn {turn}, {method} differs: {first}"),
                    None,
                ));
                return;
            }
        }
        self.used[s][index] = true;
        self.served += 1;
        let recording = Rc::clone(&self.recording);
        self.play(
            &session,
            &recording.sessions[s].exchanges[index],
            id,
            Vec::new(),
        );
    }

    /// Schedule an exchange: `prelude` lines (a loaded history), what the agent sent while it
    /// was pending, its response (with the live id), and what followed.
    fn play(&mut self, session: &str, exchange: &Exchange, id: &RequestId, prelude: Vec<Bytes>) {
        let holds = exchange.during.iter().any(|s| s.request.is_some());
        // Answers that nothing is playing before go out at once; anything else keeps its order
        // behind what is playing.
        let at_once = !self.queue.is_empty() && !holds && self.blocked.is_none();
        let mut lines = Vec::new();
        let mut clock = exchange.at_us;
        for line in prelude {
            lines.push(Out {
                delay_us: 0,
                line: line.to_vec(),
                awaits: None,
            });
        }
        self.steps(
            session,
            exchange.turn,
            &exchange.during,
            &mut clock,
            &mut lines,
        );
        let response = match &exchange.response {
            Some((at, line)) => Out {
                delay_us: at.saturating_sub(clock),
                line: with_id(line, &id.to_json()),
                awaits: None,
            },
            None => Out {
                delay_us: 0,
                line: error_line(
                    id,
                    -32603,
                    "acp-journal replay: the recording ends before the agent answered this",
                    None,
                ),
                awaits: None,
            },
        };
        if let Some((at, _)) = &exchange.response {
            clock = *at;
        }
        lines.push(response);
        self.steps(
            session,
            exchange.turn,
            &exchange.after,
            &mut clock,
            &mut lines,
        );
        if at_once {
            self.immediate.extend(lines.into_iter().map(|o| o.line));
        } else {
            self.queue.extend(lines);
        }
    }

    fn steps(
        &mut self,
        session: &str,
        turn: usize,
        steps: &[AgentStep],
        clock: &mut u64,
        out: &mut Vec<Out>,
    ) {
        for step in steps {
            let delay_us = step.at_us.saturating_sub(*clock);
            *clock = step.at_us;
            let Some(request) = &step.request else {
                out.push(Out {
                    delay_us,
                    line: with_newline(step.line.to_vec()),
                    awaits: None,
                });
                continue;
            };
            let id = self.next_id.to_string();
            self.next_id += 1;
            self.awaiting.insert(
                id.clone(),
                Awaited {
                    session: session.to_string(),
                    turn,
                    method: request.method.clone(),
                    answer: request.answer.clone(),
                },
            );
            if let Some(answered) = request.answered_us {
                *clock = answered;
            }
            out.push(Out {
                delay_us,
                line: with_id(&step.line, &id),
                awaits: Some(id),
            });
        }
    }

    fn load(&mut self, id: &RequestId, session: Option<String>, params: &Value) {
        let Some(s) = session
            .as_deref()
            .and_then(|id| self.recording.session_index(id))
        else {
            self.report(Report {
                session: session.clone(),
                turn: 0,
                what: "session/load".into(),
                differences: Vec::new(),
                problem: Some("this session is not in the recording".into()),
            });
            self.immediate.push_back(error_line(
                id,
                -32002,
                "acp-journal replay: this session is not in the recording",
                session.map(|s| json!({"sessionId": s})),
            ));
            return;
        };
        self.bound[s] = true;
        let recorded = self.next_exchange(s, "session/load");
        let record_end = match recorded {
            // A native load journaled its own history: play it as recorded.
            Some(i) if !self.recording.sessions[s].exchanges[i].during.is_empty() => {
                return self.serve(s, id, "session/load", params);
            }
            // An emulated load (its history was not journaled again): rebuild the history from
            // what was recorded before it, then play the recorded answer.
            Some(i) => self.recording.sessions[s].exchanges[i].record,
            None => self.recording.sessions[s].records.len(),
        };
        let history = self.history(s, record_end);
        match recorded {
            Some(i) => {
                // Everything before the recorded load is history now.
                for j in 0..i {
                    self.used[s][j] = true;
                }
                self.used[s][i] = true;
                self.served += 1;
                let recording = Rc::clone(&self.recording);
                let session = &recording.sessions[s];
                self.play(&session.id, &session.exchanges[i], id, history);
            }
            None => {
                // Answer as the recorded session/new did (modes, config options), minus its ID.
                let mut result = self.recording.sessions[s]
                    .exchanges
                    .iter()
                    .find(|e| e.method == "session/new")
                    .and_then(Exchange::response_value)
                    .map(|v| v["result"].clone())
                    .filter(Value::is_object)
                    .unwrap_or_else(|| json!({}));
                if let Some(object) = result.as_object_mut() {
                    object.remove("sessionId");
                }
                self.served += 1;
                let mut lines: Vec<Out> = history
                    .into_iter()
                    .map(|l| Out {
                        delay_us: 0,
                        line: l.to_vec(),
                        awaits: None,
                    })
                    .collect();
                lines.push(Out {
                    delay_us: 0,
                    line: result_line(id, &result),
                    awaits: None,
                });
                self.queue.extend(lines);
            }
        }
    }

    /// The history of session `s` up to record `end`, as `session/update` lines.
    fn history(&self, s: usize, end: usize) -> Vec<Bytes> {
        let recorded = &self.recording.sessions[s];
        let records = &recorded.records[..end];
        let mut replay = Replay::new(&recorded.id, self.support, 0);
        for record in records {
            replay.observe(record);
        }
        let mut out = Vec::new();
        for record in records {
            replay.emit(record, &mut out);
        }
        replay.finish(&mut out);
        out
    }

    fn notification(&mut self, method: &str, session: Option<String>, params: Value) {
        let found = session
            .as_deref()
            .and_then(|id| self.recording.session_index(id));
        let Some(s) = found else {
            return;
        };
        match self.next_exchange(s, method) {
            Some(i) => {
                self.used[s][i] = true;
                let recorded = self.recording.sessions[s].exchanges[i].params.clone();
                let differences = matching::compare(&recorded, &params);
                if !differences.is_empty() {
                    let turn = self.recording.sessions[s].exchanges[i].turn;
                    self.report(Report {
                        session,
                        turn,
                        what: method.to_string(),
                        differences,
                        problem: None,
                    });
                }
            }
            None => {
                let turn = self.recording.sessions[s].turns();
                self.report(Report {
                    session,
                    turn,
                    what: method.to_string(),
                    differences: Vec::new(),
                    problem: Some("the recorded client did not send this".into()),
                });
            }
        }
    }

    fn answer(&mut self, id: &str, mut live: Value) {
        let Some(awaited) = self.awaiting.remove(id) else {
            self.report(Report {
                session: None,
                turn: 0,
                what: "client response".into(),
                differences: Vec::new(),
                problem: Some(format!("an answer to id {id}, which was never asked")),
            });
            return;
        };
        if self.blocked.as_deref() == Some(id) {
            self.blocked = None;
        }
        if let Some(object) = live.as_object_mut() {
            object.remove("jsonrpc");
            object.remove("id");
        }
        // A recording torn before the answer has nothing to compare with.
        let Some(recorded) = &awaited.answer else {
            return;
        };
        let differences = matching::compare(recorded, &live);
        if !differences.is_empty() {
            self.report(Report {
                session: Some(awaited.session),
                turn: awaited.turn,
                what: format!("answer to {}", awaited.method),
                differences,
                problem: None,
            });
        }
    }
}
