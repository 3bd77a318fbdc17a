//! The page's team view of the shared store (`serve --store`): four `GET` endpoints and one
//! `POST`, each needing the bearer token like `/acp` (checked, and wrong ones slowed, the same way), none
//! answered on a host that serves no store (404):
//!
//! - `/team/sessions?agent=&host=&cwd=&state=&from=&to=&page=`: the store's sessions as
//!   `list --store --json` lists them (the same reading: the index's sessions table, the hosts'
//!   catalogs where it lags), newest activity first, [`PAGE`] to a page, each with its hosts;
//!   `state` is one of [`STORE_STATES`] (`live`, `idle`, `closed`, `stranded`: see
//!   [`crate::catalog::SessionSummary::store_state`]); `from`/`to` are UTC days
//!   (`YYYY-MM-DD`, both included) of its last activity.
//! - `/team/search?q=`: the messages holding the text `q` (a literal, not a pattern), as
//!   `search --store` finds them (the index's words, then only the sessions they name).
//! - `/team/session?id=&after=`: one session as `export --format html` renders it, redacted,
//!   with its `ETag` (a tag of what it was rendered from, [`TAG_LEN`] hex digits) and, while
//!   the session is open (its host still writes it), [`FOLLOW_HEADER`]: how many milliseconds
//!   the page waits before it asks again. `after` is the tag of the render the page has: when
//!   nothing changed, the answer is 204 and no body. Following is shared by every page that
//!   asks ([`Reads::followed`]): a session is looked at (one listing of it in the store) at
//!   most every [`FRESH`] however many pages follow it, and read again (its new bytes pulled,
//!   rendered again) only when the look lists something new.
//! - `/team/usage`: tokens, turns and cost (per currency) per day per agent and per host,
//!   sessions and turns per day, the costliest sessions, the turns by stop reason, and the line
//!   that ends `stats --store`, from the index's tables as `stats --store` reads them; and those
//!   drawn as SVG charts ([`crate::render::charts`]; the costs a chart per currency) for the
//!   page to adopt.
//! - `/team/usage.csv?by=agent|host`: the numbers of one of those tables as CSV, a column of
//!   cost per currency, a download (`Content-Disposition: attachment`).
//! - `POST /team/share?id=&days=`: a new share link to one session (see [`super::share`]),
//!   lasting `days` (7 unless said, at most 30): its path and when it expires, as JSON.
//!
//! Every field is bounded ([`MAX_FIELD`] bytes, [`MAX_QUERY`] for the query string); what the
//! store answers is read on a blocking thread, one reading at a time ([`Reads`]), so a client
//! cannot make the host read the store more than once at once (a followed session's look, a
//! listing, is made beside it, so that list and search never wait behind following). The
//! answers are data for the page's script (JSON, or the export's HTML that the script parses
//! inert); each carries the page's Content-Security-Policy and is never cached.

mod follows;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode, header};
use tokio::sync::Semaphore;

use super::page::{form_field, with_page_headers};
use super::responses::{Body, full, json, plain};
use crate::catalog::STORE_STATES;

/// Sessions in a page of `/team/sessions`.
pub const PAGE: usize = 50;
/// Largest query string, in bytes.
pub const MAX_QUERY: usize = 2048;
/// Largest field of a query (a filter, the search text, a session ID), in bytes.
pub const MAX_FIELD: usize = 256;
/// Largest page number asked for.
const MAX_PAGE: usize = 100_000;
/// How long a request waits for the reading before it (503).
const WAIT: Duration = Duration::from_secs(60);
/// How long a link made by the page lasts unless it says.
const SHARE_DAYS: u64 = 7;
/// The longest a link may last, in days (the store's side refuses more too).
const MAX_SHARE_DAYS: u64 = 30;
/// Hex digits of a render's tag ([`Rendered::tag`]).
pub const TAG_LEN: usize = 24;
/// The header that says a session is open, and in how many milliseconds the page asks again.
pub const FOLLOW_HEADER: &str = "acp-journal-follow";
/// How often a page asks about a session it follows (what [`FOLLOW_HEADER`] says).
pub const FOLLOW_EVERY: Duration = Duration::from_millis(500);

/// The store's side of the team view: what `serve --store` reads for the page. Each call
/// blocks (it reads the store) and is made on a blocking thread.
pub trait Team: Send + Sync + std::fmt::Debug {
    /// The sessions `filters` select, as JSON.
    ///
    /// # Errors
    /// What went wrong.
    fn sessions(&self, filters: &Filters) -> Result<Vec<u8>, Failure>;
    /// The messages holding `text`, as JSON.
    ///
    /// # Errors
    /// What went wrong.
    fn search(&self, text: &str) -> Result<Vec<u8>, Failure>;
    /// Session `id` as the HTML export renders it, redacted.
    ///
    /// # Errors
    /// What went wrong.
    fn session(&self, id: &str) -> Result<Vec<u8>, Failure>;
    /// Session `id` read in full and rendered as [`Team::session`] renders it, and, while it is
    /// open, what follows it.
    ///
    /// # Errors
    /// What went wrong.
    fn follow(&self, id: &str) -> Result<(Rendered, Option<Box<dyn Follower>>), Failure>;
    /// The usage (by day, per agent and per host; the costliest sessions; the stop reasons)
    /// and its charts, as JSON.
    ///
    /// # Errors
    /// What went wrong.
    fn usage(&self) -> Result<Vec<u8>, Failure>;
    /// The same numbers of one group (`agent` or `host`), as CSV.
    ///
    /// # Errors
    /// What went wrong.
    fn usage_csv(&self, by: &str) -> Result<Vec<u8>, Failure>;
    /// A new share link to session `id` (its exact ID) lasting `life`, made by the page: its
    /// path (`/share/<secret>`) and expiry, as JSON.
    ///
    /// # Errors
    /// What went wrong.
    fn share(&self, id: &str, life: Duration) -> Result<Vec<u8>, Failure>;
    /// What the record of the link whose secret is `secret` says, or `None` when there is no
    /// such record.
    ///
    /// # Errors
    /// What went wrong.
    fn link(&self, secret: &str) -> Result<Option<Link>, Failure>;
}

/// A session as the team view shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rendered {
    /// As `export --format html` renders it, redacted.
    pub html: Bytes,
    /// What it was rendered from, as [`TAG_LEN`] lower-case hex digits: the same tag, the same
    /// render.
    pub tag: String,
    /// Its host still writes it: the page follows it.
    pub open: bool,
}

/// What follows one session in the store once it was read ([`Team::follow`]), kept by the
/// host between the pages' looks. Each call blocks (it reads the store).
pub trait Follower: Send + std::fmt::Debug {
    /// Whether the store holds anything of the session that the last render did not show: a
    /// cheap look (a listing), nothing read, nothing of the local copy touched.
    ///
    /// # Errors
    /// What went wrong.
    fn changed(&mut self) -> Result<bool, Failure>;
    /// The session rendered again from what the store holds now (what is new of it pulled).
    ///
    /// # Errors
    /// What went wrong.
    fn render(&mut self) -> Result<Rendered, Failure>;
}

/// A share link's record, as the server needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link {
    /// The session it shows.
    pub session: String,
    /// When it stops working (Unix microseconds).
    pub expires: i64,
    /// Whether it was revoked.
    pub revoked: bool,
    /// The host that made it (its `host-id`; empty when the record does not say).
    pub host: String,
    /// Who made it there (`page` for the page's Share button; empty when the record does not
    /// say).
    pub user: String,
}

/// Why the store's side could not answer.
#[derive(Debug)]
pub enum Failure {
    /// The request asks for something that cannot be (400).
    Bad(String),
    /// No such session (404).
    NotFound(String),
    /// The store could not be read (502).
    Store(String),
}

/// What `/team/sessions` is asked for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filters {
    /// Part of the agent's command or name.
    pub agent: Option<String>,
    /// One host that journaled it.
    pub host: Option<String>,
    /// Its working directory, or a directory above it.
    pub cwd: Option<String>,
    /// Its state, as `list --store` says it (one of [`STORE_STATES`]).
    pub state: Option<String>,
    /// Last active on or after this time (Unix microseconds).
    pub from_us: Option<i64>,
    /// Last active before this time (Unix microseconds).
    pub to_us: Option<i64>,
    /// Which page, from 0.
    pub page: usize,
}

/// The store's side, the one reading it does at a time, and the sessions followed.
#[derive(Clone, Debug)]
pub struct Reads {
    team: Arc<dyn Team>,
    one: Arc<Semaphore>,
    follows: Arc<follows::Follows<Slot>>,
}

/// 503: the store's reading is taken for longer than [`WAIT`].
fn busy() -> Response<Body> {
    plain(
        StatusCode::SERVICE_UNAVAILABLE,
        "the store is busy: try again",
    )
}

/// The response that says why the store's side could not answer (400, 404, 502).
fn refusal(failure: Failure) -> Response<Body> {
    match failure {
        Failure::Bad(why) => plain(StatusCode::BAD_REQUEST, &why),
        Failure::NotFound(why) => plain(StatusCode::NOT_FOUND, &why),
        Failure::Store(why) => {
            tracing::warn!("the team view could not read the store: {why}");
            plain(StatusCode::BAD_GATEWAY, "the store could not be read")
        }
    }
}

impl Reads {
    /// The team view over `team`.
    pub fn new(team: Arc<dyn Team>) -> Reads {
        Reads {
            team,
            one: Arc::new(Semaphore::new(1)),
            follows: Arc::default(),
        }
    }

    /// What `work` gives, run on a blocking thread, when `one` once the reading before it is
    /// done; or the response that says why not (503 after [`WAIT`], 500).
    async fn run<T: Send + 'static>(
        &self,
        one: bool,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, Response<Body>> {
        let permit = if one {
            let Ok(Ok(permit)) = tokio::time::timeout(WAIT, self.one.clone().acquire_owned()).await
            else {
                return Err(busy());
            };
            Some(permit)
        } else {
            None
        };
        let done = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            work()
        })
        .await;
        done.map_err(|e| {
            tracing::error!("the team view's reading failed: {e}");
            plain(StatusCode::INTERNAL_SERVER_ERROR, "the reading failed")
        })
    }

    /// What `read` gives of the store, read on a blocking thread once the reading before it is
    /// done; or the response that says why not (503 after [`WAIT`], 400, 404, 502, 500).
    pub(super) async fn answer<T: Send + 'static>(
        &self,
        read: impl FnOnce(&dyn Team) -> Result<T, Failure> + Send + 'static,
    ) -> Result<T, Response<Body>> {
        let team = self.team.clone();
        self.run(true, move || read(team.as_ref()))
            .await?
            .map_err(refusal)
    }

    /// The record of the link whose secret is `secret`, read on a blocking thread (not one
    /// at a time with the readings of sessions: a record is one small object).
    pub(super) async fn link(&self, secret: String) -> Result<Option<Link>, Failure> {
        let team = self.team.clone();
        tokio::task::spawn_blocking(move || team.link(&secret))
            .await
            .unwrap_or_else(|e| Err(Failure::Store(e.to_string())))
    }
}

/// Whether `path` is one of the team view's.
pub(super) fn serves(path: &str) -> bool {
    matches!(
        path,
        "/team/sessions"
            | "/team/search"
            | "/team/session"
            | "/team/usage"
            | "/team/usage.csv"
            | "/team/share"
    )
}

/// One request to a team path ([`serves`]), its token already checked.
pub(super) async fn handle(reads: Option<&Reads>, req: &Request<Incoming>) -> Response<Body> {
    let response = answer(reads, req).await;
    with_page_headers(response)
}

async fn answer(reads: Option<&Reads>, req: &Request<Incoming>) -> Response<Body> {
    // A link is made (POST, with the token in a header: no other site's form can), the rest
    // read (GET).
    let (method, name) = if req.uri().path() == "/team/share" {
        (Method::POST, "POST")
    } else {
        (Method::GET, "GET")
    };
    if req.method() != method {
        let mut response = plain(StatusCode::METHOD_NOT_ALLOWED, &format!("use {name}"));
        response
            .headers_mut()
            .insert(header::ALLOW, header::HeaderValue::from_static(name));
        return response;
    }
    let Some(reads) = reads else {
        return plain(
            StatusCode::NOT_FOUND,
            "this host serves no store: start it with --store URL",
        );
    };
    let query = req.uri().query().unwrap_or("");
    if query.len() > MAX_QUERY {
        return plain(
            StatusCode::URI_TOO_LONG,
            &format!("a query is at most {MAX_QUERY} bytes"),
        );
    }
    let asked = match Asked::parse(req.uri().path(), query) {
        Ok(asked) => asked,
        Err(why) => return plain(StatusCode::BAD_REQUEST, &why),
    };
    let kind = match asked {
        Asked::Session { id, after } => return session(reads, id, after).await,
        Asked::UsageCsv(by) => Some((
            "text/csv; charset=utf-8",
            Some(if by == "agent" {
                "attachment; filename=\"usage-agent.csv\""
            } else {
                "attachment; filename=\"usage-host.csv\""
            }),
        )),
        _ => None,
    };
    let done = reads
        .answer(move |team| match &asked {
            Asked::Sessions(filters) => team.sessions(filters),
            Asked::Search(text) => team.search(text),
            // Answered above.
            Asked::Session { .. } => Err(Failure::Bad("no session here".into())),
            Asked::Usage => team.usage(),
            Asked::UsageCsv(by) => team.usage_csv(by),
            Asked::Share(id, life) => team.share(id, *life),
        })
        .await;
    match (done, kind) {
        (Ok(body), Some((content_type, disposition))) => {
            let mut response = Response::new(full(body));
            let headers = response.headers_mut();
            headers.insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static(content_type),
            );
            if let Some(disposition) = disposition {
                headers.insert(
                    header::CONTENT_DISPOSITION,
                    header::HeaderValue::from_static(disposition),
                );
            }
            response
        }
        (Ok(body), None) => json(StatusCode::OK, body),
        (Err(response), _) => response,
    }
}

/// `/team/session`: session `id` as it stands ([`Reads::followed`]); 204 and no body when
/// its render's tag is `after` (the page has it), else the render; with its tag as the `ETag`,
/// and [`FOLLOW_HEADER`] while the session is open.
async fn session(reads: &Reads, id: String, after: Option<String>) -> Response<Body> {
    let rendered = match reads.followed(id).await {
        Ok(rendered) => rendered,
        Err(response) => return response,
    };
    let mut response = if after.as_deref() == Some(rendered.tag.as_str()) {
        let mut response = Response::new(full(Bytes::new()));
        *response.status_mut() = StatusCode::NO_CONTENT;
        response
    } else {
        let mut response = Response::new(full(rendered.html.clone()));
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            header::HeaderValue::from_static("text/html; charset=utf-8"),
        );
        response
    };
    let headers = response.headers_mut();
    // Hex digits: always a valid header value.
    if let Ok(tag) = header::HeaderValue::from_str(&format!("\"{}\"", rendered.tag)) {
        headers.insert(header::ETAG, tag);
    }
    if rendered.open {
        headers.insert(
            FOLLOW_HEADER,
            header::HeaderValue::from(FOLLOW_EVERY.as_millis() as u64),
        );
    }
    response
}

/// How long a look at a followed session answers every page that asks: a little less than
/// [`FOLLOW_EVERY`], so one page's every look reads, and many pages' together read no more
/// often.
const FRESH: Duration = Duration::from_millis(400);

/// One followed session's slot ([`follows::Follows`]): its last render, what follows it while
/// it is open, and when the store was last looked at for it.
#[derive(Debug, Default)]
struct Slot {
    rendered: Option<Arc<Rendered>>,
    follower: Option<Box<dyn Follower>>,
    looked: Option<Instant>,
}

impl Reads {
    /// Session `id` as it stands now, for `/team/session`: from the last look when it is younger
    /// than [`FRESH`]; else looked at (a listing, beside the one reading: nothing of the local
    /// copy is touched) and, when the store holds more of it, rendered again through the one
    /// reading; else (not followed, or never read) read in full through it. Pages asking at
    /// once wait for one reading (the session's slot, [`follows::Follows`]). A session not open
    /// is not followed: its render answers for [`FRESH`], then it is read in full again.
    pub(super) async fn followed(&self, id: String) -> Result<Arc<Rendered>, Response<Body>> {
        let slot = self.follows.slot(&id);
        let Ok(mut slot) = tokio::time::timeout(WAIT, slot.lock_owned()).await else {
            return Err(busy());
        };
        if let (Some(rendered), Some(looked)) = (&slot.rendered, slot.looked)
            && looked.elapsed() < FRESH
        {
            return Ok(rendered.clone());
        }
        if let (Some(mut follower), Some(rendered)) = (slot.follower.take(), slot.rendered.clone())
        {
            // The look: beside the one reading (nothing of the local copy is touched).
            let (follower, changed) = self
                .run(false, move || {
                    let changed = follower.changed();
                    (follower, changed)
                })
                .await?;
            match changed {
                Ok(false) => {
                    slot.follower = Some(follower);
                    slot.looked = Some(Instant::now());
                    return Ok(rendered);
                }
                Ok(true) => return self.render(&id, &mut slot, follower).await,
                Err(failure) => {
                    slot.follower = Some(follower);
                    return Err(refusal(failure));
                }
            }
        }
        let asked = id.clone();
        match self.answer(move |team| team.follow(&asked)).await {
            Ok((rendered, follower)) => Ok(self.keep(&id, &mut slot, rendered, follower)),
            Err(response) => {
                if slot.rendered.is_none() {
                    // Nothing to keep (no such session, say): its place is not held.
                    self.follows.forget(&id);
                }
                Err(response)
            }
        }
    }

    /// `follower`'s session rendered again (it listed something new), through the one
    /// reading.
    async fn render(
        &self,
        id: &str,
        slot: &mut Slot,
        mut follower: Box<dyn Follower>,
    ) -> Result<Arc<Rendered>, Response<Body>> {
        let (follower, rendered) = self
            .run(true, move || {
                let rendered = follower.render();
                (follower, rendered)
            })
            .await?;
        match rendered {
            Ok(rendered) => Ok(self.keep(id, slot, rendered, Some(follower))),
            Err(failure) => {
                // Kept: the next look tries again.
                slot.follower = Some(follower);
                Err(refusal(failure))
            }
        }
    }

    /// `rendered` kept as session `id`'s last render, followed by `follower` while it is open.
    fn keep(
        &self,
        id: &str,
        slot: &mut Slot,
        rendered: Rendered,
        follower: Option<Box<dyn Follower>>,
    ) -> Arc<Rendered> {
        let open = rendered.open;
        let rendered = Arc::new(rendered);
        self.follows.sized(id, rendered.html.len());
        slot.rendered = Some(rendered.clone());
        slot.follower = follower.filter(|_| open);
        slot.looked = Some(Instant::now());
        rendered
    }
}

/// What a request asks for, its fields checked.
#[derive(Debug, PartialEq, Eq)]
enum Asked {
    Sessions(Filters),
    Search(String),
    /// A session, and the tag of the render the page has of it.
    Session {
        id: String,
        after: Option<String>,
    },
    Usage,
    /// The usage of one group (`agent` or `host`) as CSV.
    UsageCsv(&'static str),
    /// A link to this session, lasting this long.
    Share(String, Duration),
}

impl Asked {
    fn parse(path: &str, query: &str) -> Result<Asked, String> {
        let field = |name: &str| field(query, name);
        match path {
            "/team/search" => field("q")?
                .filter(|q| !q.trim().is_empty())
                .map(|q| Asked::Search(q.trim().to_string()))
                .ok_or_else(|| "search for what? (q=)".to_string()),
            "/team/session" => {
                let id = field("id")?.ok_or_else(|| "which session? (id=)".to_string())?;
                let after = field("after")?;
                if after.as_deref().is_some_and(|tag| !is_tag(tag)) {
                    return Err(format!(
                        "after is the tag of a render: {TAG_LEN} lower-case hex digits"
                    ));
                }
                Ok(Asked::Session { id, after })
            }
            "/team/usage" => Ok(Asked::Usage),
            "/team/usage.csv" => match field("by")?.as_deref() {
                Some("agent") => Ok(Asked::UsageCsv("agent")),
                Some("host") => Ok(Asked::UsageCsv("host")),
                _ => Err("by is agent or host".into()),
            },
            "/team/share" => {
                let id = field("id")?.ok_or_else(|| "share which session? (id=)".to_string())?;
                let days = match field("days")? {
                    Some(text) => text
                        .parse::<u64>()
                        .ok()
                        .filter(|d| (1..=MAX_SHARE_DAYS).contains(d))
                        .ok_or_else(|| format!("days is a number from 1 to {MAX_SHARE_DAYS}"))?,
                    None => SHARE_DAYS,
                };
                Ok(Asked::Share(id, Duration::from_secs(days * 86_400)))
            }
            _ => filters(query).map(Asked::Sessions),
        }
    }
}

/// Field `name` of `query`, checked: at most [`MAX_FIELD`] bytes of text without a control
/// character; `None` when absent or empty.
fn field(query: &str, name: &str) -> Result<Option<String>, String> {
    let Some(bytes) = form_field(query, name) else {
        return Ok(None);
    };
    if bytes.len() > MAX_FIELD {
        return Err(format!("{name} is at most {MAX_FIELD} bytes"));
    }
    let text = String::from_utf8(bytes).map_err(|_| format!("{name} is not UTF-8 text"))?;
    if text.chars().any(char::is_control) {
        return Err(format!("{name} holds a control character"));
    }
    Ok(Some(text).filter(|t| !t.is_empty()))
}

/// Whether `text` is a render's tag: [`TAG_LEN`] lower-case hex digits.
fn is_tag(text: &str) -> bool {
    text.len() == TAG_LEN
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The filters of a `/team/sessions` query, checked.
fn filters(query: &str) -> Result<Filters, String> {
    let field = |name: &str| field(query, name);
    let day = |name: &str, next: bool| -> Result<Option<i64>, String> {
        let Some(text) = field(name)? else {
            return Ok(None);
        };
        let date: jiff::civil::Date = text
            .parse()
            .map_err(|_| format!("{name} is a day, YYYY-MM-DD"))?;
        let date = if next {
            date.tomorrow().map_err(|e| e.to_string())?
        } else {
            date
        };
        let at = date
            .to_zoned(jiff::tz::TimeZone::UTC)
            .map_err(|e| e.to_string())?;
        Ok(Some(at.timestamp().as_microsecond()))
    };
    let page = match field("page")? {
        Some(text) => text
            .parse::<usize>()
            .ok()
            .filter(|p| *p <= MAX_PAGE)
            .ok_or_else(|| format!("page is a number up to {MAX_PAGE}"))?,
        None => 0,
    };
    let state = field("state")?;
    if let Some(state) = &state
        && !STORE_STATES.contains(&state.as_str())
    {
        return Err(format!("state is one of {}", STORE_STATES.join(", ")));
    }
    Ok(Filters {
        agent: field("agent")?,
        host: field("host")?,
        cwd: field("cwd")?,
        state,
        from_us: day("from", false)?,
        to_us: day("to", true)?,
        page,
    })
}

#[cfg(test)]
#[path = "team_tests.rs"]
mod tests;
