//! What the index holds, read off a session segment record by record (pure): a row per prompt
//! turn when it ends, the session's row as it stands, and the words the session's messages
//! hold (for search).
//!
//! A turn begins with the client's `session/prompt` and ends with the agent's answer to it (v1)
//! or an `idle` `state_update` with a `stopReason` (v2). What the agent said in between
//! (`agent_message_chunk`), the tool calls it made (`tool_call`: kind, title, paths) and the
//! usage it reported are kept with the turn, bounded: every text a row keeps that is not an
//! identifier (session, host) is at most [`TEXT_CHARS`] characters, and readers refuse a part
//! whose cells are past their bounds (`bounds`).

use std::collections::BTreeSet;

use serde_json::Value;

use crate::journal::format::{Body, Header, Record};
use crate::provenance::edits::{Derived, Deriver};
use crate::wire::Side;

/// Most characters of a turn's prompt and of the agent's text kept in its row, and of any
/// other text a row keeps (a title, a tool call, a path, a working directory, a stop reason).
pub const TEXT_CHARS: usize = 4096;
/// Most tool calls (and paths) kept in a turn's row.
pub const TOOLS: usize = 64;
/// Longest word indexed, in bytes.
pub const WORD_BYTES: usize = 64;

/// A prompt turn, as its row.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TurnRow {
    /// The session ID.
    pub session: String,
    /// Its number in the session, from 1.
    pub turn: u32,
    /// The host that journaled it.
    pub host: String,
    /// When the prompt was read (Unix microseconds).
    pub started_us: i64,
    /// Until the turn ended, milliseconds.
    pub duration_ms: Option<u64>,
    /// The prompt's text (bounded).
    pub prompt: String,
    /// What the agent said (bounded).
    pub agent_text: String,
    /// The tool calls: `kind: title`.
    pub tools: Vec<String>,
    /// The paths the tool calls named.
    pub paths: Vec<String>,
    /// Why it ended (`end_turn`, `cancelled`…).
    pub stop_reason: Option<String>,
    /// Tokens the agent reported for the turn.
    pub input_tokens: Option<u64>,
    /// Tokens the agent reported for the turn.
    pub output_tokens: Option<u64>,
    /// What the session's cumulative cost (`usage_update`'s `cost`) grew by during the turn:
    /// from the last amount known before it to the last known at its end ([`Spending`]);
    /// `None` when the agent reported no cost, or changed currency during the turn.
    pub cost: Option<f64>,
    /// The currency (or other unit) of `cost`, as the agent named it (bounded).
    pub currency: Option<String>,
}

/// A session, as its row (the latest `version` of a session wins).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SessionRow {
    /// The session ID.
    pub session: String,
    /// Its title: the agent's, else its first prompt's first line.
    pub title: Option<String>,
    /// The agent as a person knows it: its `agentInfo` title (else name), else its command
    /// line.
    pub agent: Option<String>,
    /// The host that journaled this part of it.
    pub host: String,
    /// Its working directory.
    pub cwd: Option<String>,
    /// When its segment began (Unix microseconds).
    pub started_us: i64,
    /// Its last record (Unix microseconds).
    pub last_activity_us: i64,
    /// Prompt turns.
    pub turns: u32,
    /// `running` while a turn is in progress, `closed` once its segment ended, else `idle`.
    pub state: String,
    /// Tokens reported over its turns.
    pub input_tokens: u64,
    /// Tokens reported over its turns.
    pub output_tokens: u64,
    /// The latest cost the agent reported (`usage_update`), in its currency's units.
    pub cost: Option<f64>,
    /// The session it was forked from, when it was.
    pub parent: Option<String>,
    /// Deleted by its client (`session/delete`): left out of lists.
    pub hidden: bool,
    /// Which row of the session is the latest (its last activity).
    pub version: i64,
    /// The agent's `agentInfo.name` (what identifies it: [`crate::acp::AgentId`]).
    pub agent_name: Option<String>,
    /// The agent's `agentInfo.version`.
    pub agent_version: Option<String>,
    /// The agent's command line (as journaled, redacted).
    pub agent_command: Option<String>,
    /// Bytes of its segments (as journaled: zstd).
    pub bytes: Option<u64>,
    /// When its last prompt turn ended (Unix microseconds).
    pub last_turn_ended_us: Option<i64>,
    /// The edits and commands derived from it so far (`None`: a row of a host that did not
    /// index them; `blame` reads such a session's journal).
    pub edits: Option<u64>,
}

/// What a session's earlier segments said, for the row of a later one: the session's turns so
/// far, its title (a later segment's first prompt does not retitle it), and when it began.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Earlier {
    /// Prompt turns in the earlier segments.
    pub turns: u32,
    /// The title they gave it.
    pub title: Option<String>,
    /// When its first segment began.
    pub started_us: Option<i64>,
    /// Bytes of the earlier segments.
    pub bytes: u64,
    /// When a turn of theirs last ended.
    pub last_turn_ended_us: Option<i64>,
    /// The edits and commands derived from them.
    pub edits: u64,
    /// The last cost they reported (the session's cumulative amount, and its currency).
    pub cost: Option<Reported>,
}

/// Most characters of a currency's name kept (ISO 4217 codes have 3; `credits` 7).
pub const CURRENCY_CHARS: usize = 32;

/// A cost the agent reported: the session's cumulative amount, and its currency.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reported {
    /// The amount: finite, not negative.
    pub amount: f64,
    /// Its currency (or other unit), at most [`CURRENCY_CHARS`] characters.
    pub currency: String,
}

impl Reported {
    /// The cost of a `usage_update` (its `cost`); `None` when it has none, or one that is no
    /// amount a session can have spent (not a number, negative, infinite: a hostile or broken
    /// agent's, skipped).
    pub fn of(update: &Value) -> Option<Reported> {
        let amount = update["cost"]["amount"].as_f64()?;
        let currency = update["cost"]["currency"].as_str()?;
        (amount.is_finite() && amount >= 0.0).then(|| Reported {
            amount,
            currency: currency.chars().take(CURRENCY_CHARS).collect(),
        })
    }
}

/// What a turn spent so far, by the costs reported during it.
///
/// A turn's cost is what the session's cumulative cost grew by from the last amount known
/// before the turn (across the session's segments: [`Earlier::cost`]; none known: from 0) to
/// the last one known at its end, summed report by report. An amount below the one before it is
/// taken as the agent counting again from 0 (a restarted agent), so the growth is the amount
/// itself. A report in another currency than the one before it makes the turn's cost unknown
/// (`None`): amounts of two currencies are not mixed. A turn during which nothing was reported
/// spent 0 when an amount was known before it, else its cost is unknown too.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Spending {
    /// The growth so far, and its currency (`None`: nothing reported nor known before).
    spent: Option<(f64, String)>,
    /// A report changed currency.
    mixed: bool,
}

impl Spending {
    /// A turn that begins when `known` was the session's last cost.
    pub fn from(known: Option<&Reported>) -> Spending {
        Spending {
            spent: known.map(|k| (0.0, k.currency.clone())),
            mixed: false,
        }
    }

    /// The agent reported `now` during the turn, when `before` was the session's last cost.
    pub fn report(&mut self, before: Option<&Reported>, now: &Reported) {
        let grown = match before {
            Some(b) if b.currency != now.currency => {
                self.mixed = true;
                return;
            }
            Some(b) if now.amount >= b.amount => now.amount - b.amount,
            // Counted again from 0, or first known: the amount itself.
            _ => now.amount,
        };
        let so_far = self.spent.as_ref().map_or(0.0, |s| s.0);
        // Each growth is at most f64::MAX; their sum is held there.
        self.spent = Some(((so_far + grown).min(f64::MAX), now.currency.clone()));
    }

    /// The turn's cost and its currency.
    pub fn cost(self) -> (Option<f64>, Option<String>) {
        match self.spent {
            Some((amount, currency)) if !self.mixed => (Some(amount), Some(currency)),
            _ => (None, None),
        }
    }
}

/// A turn under way.
#[derive(Debug, Default)]
struct Open {
    id: Value,
    row: TurnRow,
    spending: Spending,
}

/// Follows one segment of a session.
#[derive(Debug)]
pub struct Follower {
    session: SessionRow,
    /// Bytes of the session's earlier segments.
    earlier_bytes: u64,
    turn: Option<Open>,
    words: BTreeSet<String>,
    /// The session's edits and commands (`provenance::edits`).
    deriver: Deriver,
    /// The last cost the agent reported in this segment or those before.
    cost: Option<Reported>,
}

impl Follower {
    /// A segment with this header, of `host`, of a session its `earlier` segments said that
    /// of.
    pub fn new(header: &Header, host: &str, earlier: Earlier) -> Follower {
        let response = header.initialize.as_ref().and_then(|i| i.response_value());
        let agent_title = response.as_ref().and_then(crate::acp::agent_title);
        let id = crate::acp::AgentId::of(response.as_ref(), Some(header.argv.join(" ")));
        let session = header.session.clone().unwrap_or_default();
        let mut deriver = Deriver::continuing(&session, u64::from(earlier.turns));
        deriver.header(header);
        Follower {
            deriver,
            earlier_bytes: earlier.bytes,
            session: SessionRow {
                agent_name: id.name.as_deref().map(bounded),
                agent_version: id.version.as_deref().map(bounded),
                agent_command: id.command.as_deref().map(bounded),
                bytes: Some(earlier.bytes),
                last_turn_ended_us: earlier.last_turn_ended_us,
                edits: Some(earlier.edits),
                session,
                agent: Some(bounded(
                    &agent_title.unwrap_or_else(|| header.argv.join(" ")),
                )),
                host: host.to_string(),
                cwd: header.cwd.as_deref().map(bounded),
                started_us: earlier.started_us.unwrap_or(header.started),
                last_activity_us: header.started,
                turns: earlier.turns,
                title: earlier.title,
                state: "idle".into(),
                version: header.started,
                ..SessionRow::default()
            },
            turn: None,
            words: BTreeSet::new(),
            cost: earlier.cost,
        }
    }

    /// The session's row as it stands.
    pub fn session(&self) -> &SessionRow {
        &self.session
    }

    /// What this segment and those before it said, for the next one.
    pub fn earlier(&self) -> Earlier {
        Earlier {
            turns: self.session.turns,
            title: self.session.title.clone(),
            started_us: Some(self.session.started_us),
            bytes: self.session.bytes.unwrap_or(self.earlier_bytes),
            last_turn_ended_us: self.session.last_turn_ended_us,
            edits: self.session.edits.unwrap_or_default(),
            cost: self.cost.clone(),
        }
    }

    /// The edits and commands derived since the last call (`end`: the segment ended, so a
    /// write the client never answered counts too), counted in the session's row.
    pub fn take_derived(&mut self, end: bool) -> Derived {
        let derived = match end {
            true => std::mem::take(&mut self.deriver).finish(),
            false => self.deriver.take(),
        };
        let n = (derived.edits.len() + derived.commands.len()) as u64;
        self.session.edits = Some(self.session.edits.unwrap_or_default() + n);
        derived
    }

    /// The segment holds `bytes` so far (as journaled: zstd).
    pub fn segment_bytes(&mut self, bytes: u64) {
        self.session.bytes = Some(self.earlier_bytes + bytes);
    }

    /// The segment ended (closed): the session's row says so.
    pub fn close(&mut self) -> &SessionRow {
        if self.turn.is_none() {
            self.session.state = "closed".into();
        }
        &self.session
    }

    /// The words seen since the last call (for search).
    pub fn take_words(&mut self) -> BTreeSet<String> {
        std::mem::take(&mut self.words)
    }

    /// Take in the next record; a turn row when it ended one.
    pub fn record(&mut self, record: &Record) -> Option<TurnRow> {
        self.session.last_activity_us = self.session.last_activity_us.max(record.unix_us);
        self.session.version = self.session.last_activity_us;
        if let Body::Event(crate::journal::Event::ForkedFrom { parent, .. }) = &record.body {
            self.session.parent = Some(parent.clone());
        }
        let Body::Message { from, payload } = &record.body else {
            return None;
        };
        words(&payload.bytes, &mut self.words);
        if Deriver::wants(&payload.bytes) {
            self.deriver.record(record);
        }
        let message: Value = serde_json::from_slice(&payload.bytes).ok()?;
        match (from, message["method"].as_str()) {
            (Side::Client, Some("session/prompt")) => {
                self.begin(&message, record.unix_us);
                None
            }
            (Side::Client, Some("session/delete")) => {
                self.session.hidden = true;
                None
            }
            (Side::Agent, Some("session/update")) => self.update(&message["params"], record),
            (Side::Agent, None) => self.answer(&message, record.unix_us),
            _ => None,
        }
    }

    fn begin(&mut self, message: &Value, at: i64) {
        let params = &message["params"];
        if self.session.title.is_none() {
            self.session.title = crate::acp::prompt_title(&params["prompt"]);
        }
        self.session.turns += 1;
        self.session.state = "running".into();
        self.turn = Some(Open {
            id: message["id"].clone(),
            row: TurnRow {
                session: self.session.session.clone(),
                turn: self.session.turns,
                host: self.session.host.clone(),
                started_us: at,
                prompt: bounded(&crate::acp::prompt_text(&params["prompt"])),
                ..TurnRow::default()
            },
            spending: Spending::from(self.cost.as_ref()),
        });
    }

    fn update(&mut self, params: &Value, record: &Record) -> Option<TurnRow> {
        let update = &params["update"];
        match update["sessionUpdate"].as_str() {
            Some("session_info_update") => {
                // A title the agent made of a re-prime is not the session's.
                if let Some(title) = update["title"]
                    .as_str()
                    .filter(|t| !t.is_empty() && !crate::acp::is_reprime_title(t))
                {
                    self.session.title = Some(bounded(title));
                }
            }
            Some("usage_update") => {
                if let Some(cost) = update["cost"]["amount"].as_f64() {
                    self.session.cost = Some(cost);
                }
                // A child session's (a subagent's, whose lines its root's segment holds) cost is
                // its own: not the session's.
                let own = params["sessionId"].as_str() == Some(&self.session.session);
                if let Some(cost) = Reported::of(update).filter(|_| own) {
                    if let Some(open) = self.turn.as_mut() {
                        open.spending.report(self.cost.as_ref(), &cost);
                    }
                    self.cost = Some(cost);
                }
            }
            Some("state_update") => {
                if update["state"] == "idle"
                    && let Some(reason) = update["stopReason"].as_str()
                {
                    return self.end(Some(reason), &update["usage"], record.unix_us);
                }
            }
            _ => {}
        }
        let turn = &mut self.turn.as_mut()?.row;
        match update["sessionUpdate"].as_str() {
            Some("agent_message_chunk") => {
                if let Some(text) = update["content"]["text"].as_str() {
                    append_bounded(&mut turn.agent_text, text);
                }
            }
            Some("tool_call") if turn.tools.len() < TOOLS => {
                let kind = update["kind"].as_str().unwrap_or("other");
                let title = update["title"].as_str().unwrap_or_default();
                turn.tools.push(bounded(&format!("{kind}: {title}")));
                for location in update["locations"].as_array().into_iter().flatten() {
                    if let Some(path) = location["path"].as_str().map(bounded)
                        && turn.paths.len() < TOOLS
                        && !turn.paths.contains(&path)
                    {
                        turn.paths.push(path);
                    }
                }
            }
            _ => {}
        }
        None
    }

    fn answer(&mut self, message: &Value, at: i64) -> Option<TurnRow> {
        let open = self.turn.as_ref()?;
        if message["id"] != open.id {
            return None;
        }
        let result = &message["result"];
        self.end(result["stopReason"].as_str(), &result["usage"], at)
    }

    fn end(&mut self, reason: Option<&str>, usage: &Value, at: i64) -> Option<TurnRow> {
        let Open {
            mut row, spending, ..
        } = self.turn.take()?;
        (row.cost, row.currency) = spending.cost();
        row.stop_reason = reason.map(bounded);
        row.duration_ms = u64::try_from((at - row.started_us) / 1000).ok();
        row.input_tokens = usage["inputTokens"].as_u64();
        row.output_tokens = usage["outputTokens"].as_u64();
        self.session.input_tokens += row.input_tokens.unwrap_or(0);
        self.session.output_tokens += row.output_tokens.unwrap_or(0);
        self.session.state = "idle".into();
        self.session.last_turn_ended_us = Some(at);
        Some(row)
    }
}

/// `text` cut to [`TEXT_CHARS`] characters.
fn bounded(text: &str) -> String {
    text.chars().take(TEXT_CHARS).collect()
}

/// Add `text` to `to`, up to [`TEXT_CHARS`] characters in all.
fn append_bounded(to: &mut String, text: &str) {
    let room = TEXT_CHARS.saturating_sub(to.chars().count());
    to.extend(text.chars().take(room));
}

/// The words of a line as the index keeps them: runs of ASCII letters and digits, `_`, and any
/// non-ASCII bytes (UTF-8 letters), lower-cased, from 2 to 64 bytes.
pub fn words(bytes: &[u8], into: &mut BTreeSet<String>) {
    for word in bytes.split(|b| !is_word_byte(*b)) {
        if (2..=WORD_BYTES).contains(&word.len())
            && let Ok(word) = std::str::from_utf8(word)
        {
            into.insert(word.to_ascii_lowercase());
        }
    }
}

/// Whether `b` is part of a word (see [`words`]).
pub fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::format::{FORMAT_VERSION, Payload, SegmentKind};

    fn header() -> Header {
        Header {
            acpj: FORMAT_VERSION,
            kind: SegmentKind::Session,
            session: Some("s".into()),
            run: "r".into(),
            proxy: "test".into(),
            started: 10,
            pid: 1,
            argv: vec!["agent".into()],
            cwd: Some("/w".into()),
            connection: None,
            initialize: None,
        }
    }

    fn line(from: Side, at: i64, json: &str) -> Record {
        Record {
            seq: 0,
            unix_us: at,
            mono_us: 0,
            body: Body::Message {
                from,
                payload: Payload::from_line(json.as_bytes().to_vec().into()),
            },
        }
    }

    #[test]
    fn a_turn_is_its_prompt_what_the_agent_said_and_did_and_how_it_ended() {
        let mut f = Follower::new(
            &header(),
            "h",
            Earlier {
                turns: 2,
                ..Earlier::default()
            },
        );
        let lines = [
            line(
                Side::Client,
                1_000_000,
                r#"{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"Fix the flaky test\nin payments"}]}}"#,
            ),
            line(
                Side::Agent,
                1_100_000,
                r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Looking at "}}}}"#,
            ),
            line(
                Side::Agent,
                1_200_000,
                r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call","toolCallId":"t","kind":"edit","title":"Edit test.rs","locations":[{"path":"/w/payments/test.rs"}]}}}"#,
            ),
            line(
                Side::Agent,
                1_300_000,
                r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"it."}}}}"#,
            ),
        ];
        for l in &lines {
            assert_eq!(f.record(l), None);
        }
        assert_eq!(f.session().state, "running");
        let end = line(
            Side::Agent,
            3_000_000,
            r#"{"jsonrpc":"2.0","id":7,"result":{"stopReason":"end_turn","usage":{"inputTokens":100,"outputTokens":20}}}"#,
        );
        let row = f.record(&end).expect("the turn ended");
        assert_eq!(row.turn, 3);
        assert_eq!(row.prompt, "Fix the flaky test\nin payments");
        assert_eq!(row.agent_text, "Looking at it.");
        assert_eq!(row.tools, ["edit: Edit test.rs"]);
        assert_eq!(row.paths, ["/w/payments/test.rs"]);
        assert_eq!(row.stop_reason.as_deref(), Some("end_turn"));
        assert_eq!(row.duration_ms, Some(2000));
        assert_eq!((row.input_tokens, row.output_tokens), (Some(100), Some(20)));
        let s = f.session();
        assert_eq!(s.title.as_deref(), Some("Fix the flaky test"));
        assert_eq!((s.turns, s.state.as_str()), (3, "idle"));
        assert_eq!(s.last_activity_us, 3_000_000);
        let words = f.take_words();
        assert!(words.contains("flaky") && words.contains("payments") && words.contains("test"));
        assert!(f.take_words().is_empty(), "taken");
    }

    #[test]
    fn a_later_segment_keeps_the_sessions_title_start_and_turns() {
        let mut first = Follower::new(&header(), "h", Earlier::default());
        first.record(&line(Side::Client, 20, r#"{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"The first prompt"}]}}"#));
        first.record(&line(
            Side::Agent,
            30,
            r#"{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}"#,
        ));
        let later_header = Header {
            started: 1000,
            ..header()
        };
        let mut later = Follower::new(&later_header, "h2", first.earlier());
        later.record(&line(Side::Client, 1010, r#"{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"Continued elsewhere"}]}}"#));
        let row = later.session();
        assert_eq!(row.title.as_deref(), Some("The first prompt"));
        assert_eq!(
            (row.turns, row.started_us, row.host.as_str()),
            (2, 10, "h2")
        );
    }

    #[test]
    fn an_answer_to_another_request_ends_no_turn() {
        let mut f = Follower::new(&header(), "h", Earlier::default());
        f.record(&line(Side::Client, 1, r#"{"jsonrpc":"2.0","id":"p","method":"session/prompt","params":{"sessionId":"s","prompt":[]}}"#));
        assert_eq!(
            f.record(&line(
                Side::Agent,
                2,
                r#"{"jsonrpc":"2.0","id":"other","result":{}}"#
            )),
            None
        );
        assert!(
            f.record(&line(
                Side::Agent,
                3,
                r#"{"jsonrpc":"2.0","id":"p","result":{"stopReason":"cancelled"}}"#
            ))
            .is_some()
        );
    }

    #[test]
    fn every_text_a_row_keeps_is_bounded() {
        let long = "x".repeat(3 * TEXT_CHARS);
        let mut h = header();
        h.cwd = Some(long.clone());
        h.argv = vec![long.clone()];
        let mut f = Follower::new(&h, "h", Earlier::default());
        let update = |update: serde_json::Value| {
            let message = serde_json::json!({"jsonrpc": "2.0", "method": "session/update",
                "params": {"sessionId": "s", "update": update}});
            line(Side::Agent, 2, &message.to_string())
        };
        f.record(&line(Side::Client, 1, r#"{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}"#));
        f.record(&update(
            serde_json::json!({"sessionUpdate": "session_info_update", "title": long}),
        ));
        f.record(&update(
            serde_json::json!({"sessionUpdate": "tool_call", "kind": "edit",
            "title": long, "locations": [{"path": long}, {"path": format!("{long}y")}]}),
        ));
        let answer = serde_json::json!({"jsonrpc": "2.0", "id": 1, "result": {"stopReason": long}});
        let turn = f
            .record(&line(Side::Agent, 3, &answer.to_string()))
            .unwrap();
        let s = f.session();
        for text in [&s.title, &s.agent, &s.cwd, &turn.stop_reason] {
            assert_eq!(text.as_ref().map(|t| t.chars().count()), Some(TEXT_CHARS));
        }
        assert_eq!(turn.tools[0].chars().count(), TEXT_CHARS);
        // Two paths alike in their first TEXT_CHARS characters are one.
        assert_eq!(turn.paths.len(), 1);
        assert_eq!(turn.paths[0].chars().count(), TEXT_CHARS);
    }

    /// A session's prompt `id` at `at`, as the client sends it.
    fn prompt(id: u32, at: i64) -> Record {
        let json = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"session/prompt","params":{{"sessionId":"s","prompt":[]}}}}"#
        );
        line(Side::Client, at, &json)
    }

    /// The answer ending prompt `id`.
    fn answered(id: u32, at: i64) -> Record {
        let json = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"stopReason":"end_turn"}}}}"#);
        line(Side::Agent, at, &json)
    }

    /// A `usage_update` of `session` reporting `cost` (its JSON).
    fn usage(session: &str, cost: &str, at: i64) -> Record {
        let json = format!(
            r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"{session}","update":{{"sessionUpdate":"usage_update","used":1,"size":9,"cost":{cost}}}}}}}"#
        );
        line(Side::Agent, at, &json)
    }

    /// The cost and currency of each turn of `records`, read by one follower.
    fn costs(f: &mut Follower, records: &[Record]) -> Vec<(Option<f64>, Option<String>)> {
        records
            .iter()
            .filter_map(|r| f.record(r))
            .map(|t| (t.cost, t.currency))
            .collect()
    }

    fn usd(amount: f64) -> (Option<f64>, Option<String>) {
        (Some(amount), Some("USD".into()))
    }

    #[test]
    fn a_turn_s_cost_is_what_the_session_s_cumulative_cost_grew_by_during_it() {
        let mut f = Follower::new(&header(), "h", Earlier::default());
        let records = [
            // Turn 1 reports twice: 0.5 then 1.25 (from nothing known: from 0).
            prompt(1, 10),
            usage("s", r#"{"amount":0.5,"currency":"USD"}"#, 11),
            usage("s", r#"{"amount":1.25,"currency":"USD"}"#, 12),
            answered(1, 13),
            // Between turns: 1.5, which turn 2 starts from.
            usage("s", r#"{"amount":1.5,"currency":"USD"}"#, 14),
            prompt(2, 20),
            usage("s", r#"{"amount":2.0,"currency":"USD"}"#, 21),
            answered(2, 22),
            // Turn 3 reports nothing: it spent nothing more.
            prompt(3, 30),
            answered(3, 31),
            // Turn 4: a restarted agent counts from 0 again: 0.25, then 0.75.
            prompt(4, 40),
            usage("s", r#"{"amount":0.25,"currency":"USD"}"#, 41),
            usage("s", r#"{"amount":0.75,"currency":"USD"}"#, 42),
            answered(4, 43),
        ];
        assert_eq!(
            costs(&mut f, &records),
            [usd(1.25), usd(0.5), usd(0.0), usd(0.75)]
        );
        assert_eq!(f.session().cost, Some(0.75));
        // A later segment of the session starts from what the earlier ones knew.
        let mut later = Follower::new(&header(), "h2", f.earlier());
        let records = [
            prompt(1, 50),
            usage("s", r#"{"amount":1.0,"currency":"USD"}"#, 51),
            answered(1, 52),
        ];
        assert_eq!(costs(&mut later, &records), [usd(0.25)]);
    }

    #[test]
    fn no_cost_reported_is_none_and_a_change_of_currency_makes_the_turn_s_cost_unknown() {
        let mut f = Follower::new(&header(), "h", Earlier::default());
        let records = [
            // No cost reported, nor known before: unknown.
            prompt(1, 10),
            usage("s", "null", 11),
            answered(1, 12),
            prompt(2, 20),
            usage("s", r#"{"amount":3,"currency":"USD"}"#, 21),
            answered(2, 22),
            // From USD to EUR during turn 3: neither 2 EUR nor anything else.
            prompt(3, 30),
            usage("s", r#"{"amount":2,"currency":"EUR"}"#, 31),
            answered(3, 32),
            // Turn 4 grows from the 2 EUR known before it.
            prompt(4, 40),
            usage("s", r#"{"amount":2.5,"currency":"EUR"}"#, 41),
            answered(4, 42),
        ];
        let eur = |amount: f64| (Some(amount), Some("EUR".into()));
        assert_eq!(
            costs(&mut f, &records),
            [(None, None), usd(3.0), (None, None), eur(0.5)]
        );
    }

    #[test]
    fn a_hostile_agent_s_amounts_are_skipped_or_held_and_a_subagent_s_cost_is_its_own() {
        let mut f = Follower::new(&header(), "h", Earlier::default());
        let huge = format!(r#"{{"amount":{:e},"currency":"USD"}}"#, f64::MAX);
        let long = format!(r#"{{"amount":1,"currency":"{}"}}"#, "X".repeat(100));
        let records = [
            prompt(1, 10),
            // Skipped: negative, not a number, no currency, too large for JSON's doubles.
            usage("s", r#"{"amount":-5,"currency":"USD"}"#, 11),
            usage("s", r#"{"amount":"NaN","currency":"USD"}"#, 12),
            usage("s", r#"{"amount":1}"#, 13),
            usage("s", r#"{"amount":1e999,"currency":"USD"}"#, 14),
            // A child session's report is not the session's.
            usage("child", r#"{"amount":7,"currency":"USD"}"#, 15),
            usage("s", r#"{"amount":1,"currency":"USD"}"#, 16),
            answered(1, 17),
            // f64::MAX, then counted again from 0 to f64::MAX: held at f64::MAX.
            prompt(2, 20),
            usage("s", &huge, 21),
            usage("s", r#"{"amount":0,"currency":"USD"}"#, 22),
            usage("s", &huge, 23),
            answered(2, 24),
            prompt(3, 30),
            usage("s", &long, 31),
            answered(3, 32),
        ];
        let got = costs(&mut f, &records);
        assert_eq!(got[..2], [usd(1.0), usd(f64::MAX)]);
        // Its currency cut to CURRENCY_CHARS (and a change from USD: unknown).
        assert_eq!(got[2], (None, None));
        assert_eq!(
            f.earlier().cost.unwrap().currency.chars().count(),
            CURRENCY_CHARS
        );
    }

    #[test]
    fn words_are_lower_cased_runs_of_letters_digits_and_utf8() {
        let mut w = BTreeSet::new();
        words("Ärger: run cargo-test x FLAKY_1 é".as_bytes(), &mut w);
        for word in ["cargo", "flaky_1", "run", "test", "Ärger", "é"] {
            assert!(w.contains(word), "{word} in {w:?}");
        }
        assert!(!w.contains("x"), "too short");
    }
}
