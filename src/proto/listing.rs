//! `session/list`: answered from the journal's catalog for agents that lack it, or merged with
//! the agent's own answer for agents that have it.
//!
//! Merged, the agent's rows (agent-side IDs of mapped sessions shown as the client-facing ones)
//! and the journal's sessions the agent does not list make one order, newest activity first: each
//! page of the agent's gets the journal's rows that fall between it and the page before, and the
//! agent's `nextCursor` goes to the client wrapped with that place ([`Cursor::Merged`]), unwrapped
//! on the way back. After the agent's last page, the journal's older rows follow in pages of
//! their own.
//!
//! Served from the journal it follows the "session list for history views" draft: rows ordered
//! by last activity, newest first (ties by session ID), pages of `limit` rows (default [`PAGE`],
//! at most [`MAX_PAGE`]) with an opaque cursor naming the last row's place in that order, and per
//! row, besides `sessionId`, `cwd`, `title` and `updatedAt`: `gitBranch`, `state` (while a proxy
//! serves the session), `lastTurnEndedAt` and `cost`. What no schema has a field for (token
//! usage, the agent that recorded the session) goes in `_meta.acpJournal`. Sessions the client
//! never prompted are left out (the agent's own rows are its to choose), and a row's title is
//! the agent's, else the first line of its first prompt.

use bytes::Bytes;
use serde_json::{Value, json};

use super::context::Cx;
use super::ids::OwnIds;
use super::sessions::{Session, SessionTable};
use super::vocab::{Action, HashMap, HashSet, Line, ListedSession, Stamp, Target};
use crate::wire::Side;
use crate::wire::envelope::{self, Kind, Peek};
use crate::wire::envelope::{RequestId, error_json};
use crate::wire::rewrite::edit_line;

/// Sessions per `session/list` page served from the journal, without `limit`.
pub(super) const PAGE: usize = 50;

/// The largest page served, whatever `limit` asks.
pub(super) const MAX_PAGE: usize = 1000;

/// A `session/list` the proxy answers or merges.
#[derive(Debug)]
pub(super) struct List {
    pub(super) client_id: RequestId,
    pub(super) cwd: Option<String>,
    pub(super) cursor: Option<String>,
    /// The client's `limit`.
    pub(super) limit: Option<usize>,
    /// Forwarded to the agent (which has `list`): merge its answer.
    pub(super) forwarded: bool,
    /// Forwarded under the agent's own cursor, unwrapped from the client's.
    pub(super) agent_cursor: Option<String>,
    /// Merged: the journal's rows shown are after this place (the previous page's last row).
    after: Option<(i64, String)>,
    /// Which sessions, by archive state.
    archived: ArchiveFilter,
    /// The journals' sessions, once fetched.
    pub(super) listed: Option<Vec<ListedSession>>,
    /// The agent's answer, held until `listed` arrives.
    pub(super) response: Option<Bytes>,
    /// A host's sessions live on its agent (`_meta.acpJournal.live` on their rows).
    live: HashSet<String>,
}

impl List {
    /// The journals' sessions this list shows: in its cwd, prompted (an editor opens a session
    /// for every chat it opens: one left without a prompt is not history), and archived or
    /// not as it asks.
    fn wanted<'a>(
        &'a self,
        listed: &'a [ListedSession],
    ) -> impl Iterator<Item = &'a ListedSession> {
        listed.iter().filter(|s| {
            s.prompted
                && (self.cwd.is_none() || s.cwd == self.cwd)
                && self.archived.keeps(s.archived)
        })
    }

    /// The answer served from the journal: `Ok(result)` or `Err(error)`, as JSON.
    pub(super) fn page(&self) -> Result<String, String> {
        let cursor = match self.cursor.as_deref().map(decode_cursor) {
            None => None,
            Some(Some(cursor)) => Some(cursor),
            Some(None) => return Err(error_json(-32602, "Invalid params: unknown cursor", None)),
        };
        let listed = self.listed.as_deref().unwrap_or_default();
        // Only rows the schema accepts (a cwd is required).
        let mut rows: Vec<&ListedSession> =
            self.wanted(listed).filter(|s| s.cwd.is_some()).collect();
        rows.sort_unstable_by(|a, b| order(a).cmp(&order(b)));
        let start = match &cursor {
            Some(Cursor::After(updated, session) | Cursor::Merged(_, updated, session)) => rows
                .partition_point(|s| order(s) <= (std::cmp::Reverse(*updated), session.as_str())),
            Some(Cursor::Offset(n)) => *n,
            None => 0,
        };
        let limit = self.limit.unwrap_or(PAGE).clamp(1, MAX_PAGE);
        let page = &rows[start.min(rows.len())..];
        let (page, more) = (&page[..page.len().min(limit)], page.len() > limit);
        let sessions: Vec<Value> = page
            .iter()
            .filter_map(|s| session_info(s, self.live.contains(&s.session)))
            .collect();
        let mut result = json!({"sessions": sessions});
        if more && let Some(last) = page.last() {
            result["nextCursor"] = json!(encode_cursor(last.updated.us, &last.session));
        }
        Ok(result.to_string())
    }

    /// The agent's answer merged with the journal's sessions, once both are here.
    /// `mapped` gives the client-facing ID of each agent-side ID mapped in this connection.
    pub(super) fn merged<'a>(
        &self,
        mapped: impl Iterator<Item = (&'a str, &'a str)>,
    ) -> Option<Bytes> {
        let (Some(listed), Some(response)) = (&self.listed, &self.response) else {
            return None;
        };
        let mut to_client: HashMap<&str, &str> = mapped.collect();
        for s in listed {
            for a in &s.agent_ids {
                to_client.insert(a, &s.session);
            }
        }
        let journal: HashMap<&str, &ListedSession> =
            listed.iter().map(|s| (s.session.as_str(), s)).collect();
        let merged = edit_line(response, |msg| {
            let Some(mut result) = msg
                .get("result")
                .and_then(|r| serde_json::from_str::<Value>(r).ok())
            else {
                return;
            };
            let (mut rows, seen) = self.agent_rows(&result, &to_client, &journal);
            let agent_next = result["nextCursor"].as_str().map(str::to_string);
            let oldest_agent = rows
                .iter()
                .map(|(updated, info)| (*updated, info["sessionId"].as_str().unwrap_or_default()))
                .max_by(|a, b| place(a).cmp(&place(b)))
                .map(|(updated, id)| (updated, id.to_string()));
            let (extra, journal_more) =
                self.journal_rows(listed, &seen, agent_next.is_some(), oldest_agent.as_ref());
            rows.extend(extra);
            rows.sort_by(|(ua, a), (ub, b)| {
                let id = |v: &Value| v["sessionId"].as_str().unwrap_or_default().to_string();
                place(&(*ua, id(a).as_str())).cmp(&place(&(*ub, id(b).as_str())))
            });
            let last = rows
                .last()
                .map(|(u, v)| (*u, v["sessionId"].as_str().unwrap_or_default().to_string()));
            let next = match (agent_next, last) {
                (Some(agent), Some((u, id))) => Some(encode_merged(&agent, u, &id)),
                (None, Some((u, id))) if journal_more => Some(encode_cursor(u, &id)),
                _ => None,
            };
            result["sessions"] = Value::Array(rows.into_iter().map(|(_, v)| v).collect());
            match next {
                Some(next) => result["nextCursor"] = json!(next),
                None => {
                    if let Some(r) = result.as_object_mut() {
                        r.remove("nextCursor");
                    }
                }
            }
            msg.set("result", result.to_string());
        });
        Some(merged.map(Bytes::from).unwrap_or_else(|| response.clone()))
    }

    /// The agent's rows of its answer `result`, client-facing (`to_client`: the client-facing
    /// ID of each agent-side one), once each, a session the `journal` holds as the journal has
    /// it, and each with its place in the order; and the client-facing IDs of those rows.
    fn agent_rows(
        &self,
        result: &Value,
        to_client: &HashMap<&str, &str>,
        journal: &HashMap<&str, &ListedSession>,
    ) -> (Vec<(i64, Value)>, HashSet<String>) {
        let mut seen = HashSet::default();
        let mut rows: Vec<(i64, Value)> = Vec::new();
        let mut previous = i64::MAX;
        for mut info in result["sessions"].as_array().cloned().unwrap_or_default() {
            if let Some(id) = info["sessionId"].as_str()
                && let Some(client) = to_client.get(id)
            {
                info["sessionId"] = json!(client);
            }
            let Some(id) = info["sessionId"].as_str().map(str::to_string) else {
                continue;
            };
            if !seen.insert(id.clone()) {
                continue;
            }
            if let Some(s) = journal.get(id.as_str()) {
                // The journal's session: the agent's row of it (under its own ID, or an
                // agent-side session the proxy made for it, whose title and time are the
                // agent copy's, not the session's) is merged into the journal's entry, never
                // shown beside it.
                if !self.archived.keeps(s.archived) {
                    continue;
                }
                let Some(mut ours) = session_info(s, self.live.contains(&id)) else {
                    continue;
                };
                if let (Some(theirs), Some(meta)) =
                    (info["_meta"].as_object(), ours["_meta"].as_object_mut())
                {
                    for (k, v) in theirs {
                        meta.entry(k.clone()).or_insert_with(|| v.clone());
                    }
                } else if ours["_meta"].is_null() && info["_meta"].is_object() {
                    ours["_meta"] = info["_meta"].take();
                }
                info = ours;
                rows.push((s.updated.us, info));
                previous = s.updated.us;
                continue;
            }
            // Its `updatedAt`, else the row before's.
            let updated = info["updatedAt"]
                .as_str()
                .and_then(|t| t.parse::<jiff::Timestamp>().ok())
                .map(|t| t.as_microsecond())
                .unwrap_or(previous);
            previous = updated;
            rows.push((updated, info));
        }
        (rows, seen)
    }

    /// The journal's rows merged into the agent's page, each with its place in the order: those
    /// the agent did not list (`seen`) between the previous page and the page's oldest agent
    /// row (`oldest_agent`); after the agent's last page (`agent_more` false), all that follow,
    /// up to the page's limit, and whether more follow.
    fn journal_rows(
        &self,
        listed: &[ListedSession],
        seen: &HashSet<String>,
        agent_more: bool,
        oldest_agent: Option<&(i64, String)>,
    ) -> (Vec<(i64, Value)>, bool) {
        let mut extra: Vec<&ListedSession> = self
            .wanted(listed)
            .filter(|s| !seen.contains(&s.session))
            .filter(|s| {
                self.after
                    .as_ref()
                    .is_none_or(|(u, id)| order(s) > (std::cmp::Reverse(*u), id.as_str()))
            })
            .filter(|s| match (agent_more, oldest_agent) {
                (true, Some((u, id))) => order(s) < (std::cmp::Reverse(*u), id.as_str()),
                (true, None) => false,
                (false, _) => true,
            })
            .collect();
        extra.sort_unstable_by(|a, b| order(a).cmp(&order(b)));
        let limit = self.limit.unwrap_or(PAGE).clamp(1, MAX_PAGE);
        let journal_more = !agent_more && extra.len() > limit;
        extra.truncate(if agent_more { extra.len() } else { limit });
        let rows = extra.iter().filter_map(|s| {
            let live = self.live.contains(&s.session);
            Some((s.updated.us, session_info(s, live)?))
        });
        (rows.collect(), journal_more)
    }
}

/// Which sessions a list shows by archive state: `_meta.jetbrains.air.list.archived` of the
/// request, as the adapters that have `_session/archive` read it (default `unarchived`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ArchiveFilter {
    Unarchived,
    Archived,
    All,
}

impl ArchiveFilter {
    fn of(params: Option<crate::wire::envelope::Raw<'_>>) -> ArchiveFilter {
        let params: Value = params
            .filter(|p| p.get().contains("\"archived\""))
            .and_then(|p| serde_json::from_str(p.get()).ok())
            .unwrap_or_default();
        match params["_meta"]["jetbrains"]["air"]["list"]["archived"].as_str() {
            Some("archived") => ArchiveFilter::Archived,
            Some("all") => ArchiveFilter::All,
            _ => ArchiveFilter::Unarchived,
        }
    }

    fn keeps(self, archived: bool) -> bool {
        match self {
            ArchiveFilter::Unarchived => !archived,
            ArchiveFilter::Archived => archived,
            ArchiveFilter::All => true,
        }
    }
}

/// A place in the order (last activity, session ID): newest first, then by ID.
fn place<'a>(&(updated, session): &(i64, &'a str)) -> (std::cmp::Reverse<i64>, &'a str) {
    (std::cmp::Reverse(updated), session)
}

/// A row's place in the list: newest activity first, then by session ID.
fn order(s: &ListedSession) -> (std::cmp::Reverse<i64>, &str) {
    (std::cmp::Reverse(s.updated.us), &s.session)
}

/// The `SessionInfo` of a listed session (`None` without a cwd, which the schema requires);
/// `live`: a host's session live on its agent, which a client joins as it runs.
fn session_info(s: &ListedSession, live: bool) -> Option<Value> {
    let mut info = json!({"sessionId": s.session, "cwd": s.cwd.as_ref()?});
    if let Some(title) = &s.title {
        info["title"] = json!(title);
    }
    if let Some(at) = &s.updated.at {
        info["updatedAt"] = json!(at);
    }
    if let Some(branch) = &s.git_branch {
        info["gitBranch"] = json!(branch);
    }
    if let Some(state) = &s.state {
        info["state"] = json!(state);
    }
    if let Some(at) = &s.last_turn_ended_at {
        info["lastTurnEndedAt"] = json!(at);
    }
    let cost = s.usage.as_ref().map(|u| &u["cost"]);
    if let Some(cost) = cost.filter(|c| c["amount"].is_number() && c["currency"].is_string()) {
        info["cost"] = cost.clone();
    }
    add_ours(&mut info, s, live);
    Some(info)
}

/// What the journal knows of a listed session that the schema has no field for, as
/// `_meta.acpJournal` of its row (`agent`, `usage`, `live`): on the journal's own rows and on
/// the agent's rows of sessions the journal holds, beside the agent's own `_meta` keys (a row
/// whose `_meta` is not an object is left as the agent sent it).
fn add_ours(info: &mut Value, s: &ListedSession, live: bool) {
    let mut ours = serde_json::Map::new();
    if let Some(agent) = &s.agent {
        ours.insert("agent".into(), json!(agent));
    }
    if let Some(usage) = &s.usage {
        ours.insert("usage".into(), usage.clone());
    }
    if live {
        ours.insert("live".into(), json!(true));
    }
    if ours.is_empty() {
        return;
    }
    if info["_meta"].is_null() {
        info["_meta"] = json!({});
    }
    if let Some(meta) = info["_meta"].as_object_mut() {
        meta.insert("acpJournal".into(), Value::Object(ours));
    }
}

/// The cursor after the row of `session` last active at `updated` (microseconds).
fn encode_cursor(updated: i64, session: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("acpj2:{updated}:{session}"))
}

/// The agent's cursor `agent`, for a merged list whose last row was `session`, last active at
/// `updated`.
fn encode_merged(agent: &str, updated: i64, session: &str) -> String {
    use base64::Engine;
    let raw = json!(["acpjm", agent, updated, session]).to_string();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
}

/// Where a page starts.
pub(super) enum Cursor {
    /// After the row of this session, last active at this time.
    After(i64, String),
    /// A merged list's: the agent's own cursor, and the place of the last row shown.
    Merged(String, i64, String),
    /// At this position (cursors of earlier versions).
    Offset(usize),
}

pub(super) fn decode_cursor(cursor: &str) -> Option<Cursor> {
    use base64::Engine;
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(cursor)
        .ok()?;
    if let Ok((tag, agent, updated, session)) =
        serde_json::from_slice::<(String, String, i64, String)>(&raw)
        && tag == "acpjm"
    {
        return Some(Cursor::Merged(agent, updated, session));
    }
    let text = String::from_utf8(raw).ok()?;
    if let Some(offset) = text.strip_prefix("acpj:") {
        return Some(Cursor::Offset(offset.parse().ok()?));
    }
    let (updated, session) = text.strip_prefix("acpj2:")?.split_once(':')?;
    Some(Cursor::After(updated.parse().ok()?, session.to_string()))
}

/// How long a `session/list` for a working directory keeps its changes announced
/// (`session/list_changed`), as the history-list draft says.
const LIST_WATCH_US: u64 = 10 * 60 * 1_000_000;

/// The lists in progress, and the working directories whose changes are announced.
#[derive(Debug, Default)]
pub(super) struct Lists {
    by_op: HashMap<u64, List>,
    /// Client request id → a list the proxy answers itself; agent-facing id → a forwarded
    /// list whose answer it merges.
    by_request: HashMap<RequestId, u64>,
    /// The working directories the client listed sessions of, and when (monotonic
    /// microseconds): changes there are announced with `session/list_changed` for 10 minutes.
    watched: HashMap<String, u64>,
}

impl Lists {
    /// List `op`.
    pub(super) fn get(&self, op: u64) -> Option<&List> {
        self.by_op.get(&op)
    }

    /// The list request `id` started, if it is still going.
    pub(super) fn of_request(&self, id: &RequestId) -> Option<(u64, &List)> {
        let op = *self.by_request.get(id)?;
        Some((op, self.by_op.get(&op)?))
    }

    fn insert(&mut self, op: u64, list: List) {
        self.by_request.insert(list.client_id.clone(), op);
        self.by_op.insert(op, list);
    }

    /// Stop list `op`.
    pub(super) fn remove(&mut self, op: u64) -> Option<List> {
        let list = self.by_op.remove(&op)?;
        if self.by_request.get(&list.client_id) == Some(&op) {
            self.by_request.remove(&list.client_id);
        }
        Some(list)
    }

    /// The lists forwarded to the agent (answered through the pending table should it go).
    pub(super) fn forwarded(&self) -> Vec<u64> {
        let mut ops: Vec<u64> = self
            .by_op
            .iter()
            .filter_map(|(op, l)| l.forwarded.then_some(*op))
            .collect();
        ops.sort_unstable();
        ops
    }

    /// The agent's answer to forwarded list `op` (the client's id restored), to merge.
    fn answered(&mut self, op: u64, line: Bytes) {
        if let Some(l) = self.by_op.get_mut(&op) {
            l.response = Some(line);
        }
    }

    /// Announce changes in `cwd`, listed at `at` (monotonic microseconds), for a while.
    fn watch(&mut self, cwd: String, at: u64) {
        self.watched.insert(cwd, at);
    }

    /// When the oldest watch ends (monotonic microseconds), if any is on.
    pub(super) fn watch_end(&self) -> Option<u64> {
        self.watched
            .values()
            .min()
            .map(|listed| listed + LIST_WATCH_US)
    }

    /// The watches over by `now` (monotonic microseconds) end.
    pub(super) fn end_watches(&mut self, now: u64) {
        self.watched
            .retain(|_, listed| now.saturating_sub(*listed) < LIST_WATCH_US);
    }
}

impl Lists {
    /// True while the client wants `session/list_changed` for some working directory (it
    /// declared `session.listChanged` and listed one in the last 10 minutes).
    pub(super) fn watching(&self) -> bool {
        !self.watched.is_empty()
    }

    /// Sessions of these working directories changed in the journals: tell the client, for each
    /// it watches.
    pub(super) fn journals_changed(&mut self, cx: &mut Cx, at: Stamp, cwds: &[String]) {
        self.end_watches(at.mono_us);
        for cwd in cwds.iter().filter(|c| self.watched.contains_key(*c)) {
            let line = Bytes::from(format!(
                "{}\n",
                json!({"jsonrpc": "2.0", "method": "session/list_changed", "params": {"cwd": cwd}})
            ));
            let record = cx.fx().proxy_record(at, Side::Agent, line.clone());
            cx.fx().journal(Target::Run, record);
            cx.fx().forward(Side::Client, line);
        }
    }

    /// The journals' sessions for list `op` (`hosted`: the rows live on the host are marked):
    /// the page is answered, or, for a list the agent answers too, the merged answer is
    /// returned once both are here, to go out as the agent's.
    pub(super) fn listed(
        &mut self,
        cx: &mut Cx,
        sessions: &mut SessionTable,
        hosted: bool,
        at: Stamp,
        op: u64,
        rows: Vec<ListedSession>,
    ) -> Option<Bytes> {
        let list = self.by_op.get_mut(&op)?;
        if hosted {
            list.live = rows
                .iter()
                .filter(|s| sessions.get(&s.session).is_some_and(Session::is_live))
                .map(|s| s.session.clone())
                .collect();
        }
        list.listed = Some(rows);
        if list.forwarded {
            return self.try_merge(sessions, op);
        }
        let list = self.remove(op)?;
        cx.fx().answer(
            at,
            Target::Run,
            &list.client_id,
            list.page().as_deref().map_err(String::as_str),
        );
        None
    }

    /// A client's `session/list`: the journals are asked for its sessions; with an agent that
    /// lists, the request goes on to it too (false: the line passes), else it is taken here.
    pub(super) fn start(
        &mut self,
        cx: &mut Cx,
        at: Stamp,
        id: &RequestId,
        peek: &Peek<'_>,
        line: &Bytes,
    ) -> bool {
        let op = cx.next_op();
        let cursor = envelope::str_field(peek.params, "cursor");
        // With an agent that lists: the first page and the merged ones go to it; a page of the
        // journal's rows after the agent's last is served here.
        let (forwarded, agent_cursor, after) = match cursor.as_deref().map(decode_cursor) {
            _ if !cx.peers_mut().agent.list => (false, None, None),
            Some(Some(Cursor::Merged(agent, updated, session))) => {
                (true, Some(agent), Some((updated, session)))
            }
            Some(Some(Cursor::After(..) | Cursor::Offset(_))) => (false, None, None),
            // A cursor of the agent's own, never wrapped: the journal's rows were on the first
            // page, none goes on this one.
            Some(None) => (true, None, Some((i64::MIN, String::new()))),
            None => (true, None, None),
        };
        if !forwarded
            && cx.peers().client.list_changed
            && let Some(cwd) = envelope::str_field(peek.params, "cwd")
        {
            self.watch(cwd, at.mono_us);
        }
        self.insert(
            op,
            List {
                client_id: id.clone(),
                cwd: envelope::str_field(peek.params, "cwd"),
                cursor,
                limit: peek
                    .params
                    .and_then(|p| serde_json::from_str::<serde_json::Value>(p.get()).ok())
                    .and_then(|p| p["limit"].as_u64())
                    .map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
                forwarded,
                agent_cursor,
                after,
                archived: ArchiveFilter::of(peek.params),
                listed: None,
                response: None,
                live: HashSet::default(),
            },
        );
        let agent = cx.peers().initialize.response.clone();
        cx.fx().push(Action::FetchSessions { request: op, agent });
        if forwarded {
            return false;
        }
        cx.fx().journal_client(at, Target::Run, peek, line);
        true
    }

    /// Cancel list `op` if it is one served here (true): answered -32800, the notification
    /// `line` journaled.
    pub(super) fn cancel(&mut self, cx: &mut Cx, at: Stamp, op: u64, line: &Bytes, why: &str) {
        let Some(list) = self.remove(op) else {
            return;
        };
        cx.fx()
            .journal_client(at, Target::Run, &envelope::peek(line), line);
        let error = error_json(-32800, "Request cancelled", Some(json!({"reason": why})));
        cx.fx()
            .answer(at, Target::Run, &list.client_id, Err(&error));
    }

    /// The agent answered (`msg`) list `op`, forwarded to it: the answer is kept (under the
    /// client's own id, should it have been renumbered) to merge with the journal's; the merged
    /// answer once both are here.
    pub(super) fn agent_answered(
        &mut self,
        ids: &mut OwnIds,
        sessions: &SessionTable,
        op: u64,
        msg: Line<'_>,
    ) -> Option<Bytes> {
        let (Kind::Response { id, .. }, line) = (&msg.peek.kind, msg.bytes) else {
            return None;
        };
        let line = match ids.restore(id) {
            Some(original) => edit_line(line, |m| m.set("id", original.to_json()))
                .map_or_else(|| line.clone(), Bytes::from),
            None => line.clone(),
        };
        self.answered(op, line);
        self.try_merge(sessions, op)
    }

    /// The agent's `session/list` answer merged with the journal's, once both are here (the
    /// list ends).
    pub(super) fn try_merge(&mut self, sessions: &SessionTable, op: u64) -> Option<Bytes> {
        let mapped = sessions
            .agent_ids()
            .map(|(agent, client)| (agent.as_str(), &**client));
        let line = self.get(op).and_then(|l| l.merged(mapped))?;
        self.remove(op);
        Some(line)
    }
}
