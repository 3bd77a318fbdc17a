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
//! - `/team/session?id=`: one session as `export --format html` renders it, redacted.
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
//! cannot make the host read the store more than once at once. The answers are data for the
//! page's script (JSON, or the export's HTML that the script parses inert); each carries the
//! page's Content-Security-Policy and is never cached.

use std::sync::Arc;
use std::time::Duration;

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

/// The store's side, and the one reading it does at a time.
#[derive(Clone, Debug)]
pub struct Reads {
    team: Arc<dyn Team>,
    one: Arc<Semaphore>,
}

impl Reads {
    /// The team view over `team`.
    pub fn new(team: Arc<dyn Team>) -> Reads {
        Reads {
            team,
            one: Arc::new(Semaphore::new(1)),
        }
    }

    /// What `read` gives of the store, read on a blocking thread once the reading before it is
    /// done; or the response that says why not (503 after [`WAIT`], 400, 404, 502, 500).
    pub(super) async fn answer(
        &self,
        read: impl FnOnce(&dyn Team) -> Result<Vec<u8>, Failure> + Send + 'static,
    ) -> Result<Vec<u8>, Response<Body>> {
        let Ok(Ok(permit)) = tokio::time::timeout(WAIT, self.one.clone().acquire_owned()).await
        else {
            return Err(plain(
                StatusCode::SERVICE_UNAVAILABLE,
                "the store is busy: try again",
            ));
        };
        let team = self.team.clone();
        let done = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            read(team.as_ref())
        })
        .await;
        match done {
            Ok(Ok(body)) => Ok(body),
            Ok(Err(Failure::Bad(why))) => Err(plain(StatusCode::BAD_REQUEST, &why)),
            Ok(Err(Failure::NotFound(why))) => Err(plain(StatusCode::NOT_FOUND, &why)),
            Ok(Err(Failure::Store(why))) => {
                tracing::warn!("the team view could not read the store: {why}");
                Err(plain(
                    StatusCode::BAD_GATEWAY,
                    "the store could not be read",
                ))
            }
            Err(e) => {
                tracing::error!("the team view's reading failed: {e}");
                Err(plain(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "the reading failed",
                ))
            }
        }
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
    let kind = match &asked {
        Asked::Session(_) => Some(("text/html; charset=utf-8", None)),
        Asked::UsageCsv(by) => Some((
            "text/csv; charset=utf-8",
            Some(if *by == "agent" {
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
            Asked::Session(id) => team.session(id),
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

/// What a request asks for, its fields checked.
#[derive(Debug, PartialEq, Eq)]
enum Asked {
    Sessions(Filters),
    Search(String),
    Session(String),
    Usage,
    /// The usage of one group (`agent` or `host`) as CSV.
    UsageCsv(&'static str),
    /// A link to this session, lasting this long.
    Share(String, Duration),
}

impl Asked {
    fn parse(path: &str, query: &str) -> Result<Asked, String> {
        let field = |name: &str| -> Result<Option<String>, String> {
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
        };
        match path {
            "/team/search" => field("q")?
                .filter(|q| !q.trim().is_empty())
                .map(|q| Asked::Search(q.trim().to_string()))
                .ok_or_else(|| "search for what? (q=)".to_string()),
            "/team/session" => field("id")?
                .map(Asked::Session)
                .ok_or_else(|| "which session? (id=)".to_string()),
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
            _ => {
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
                Ok(Asked::Sessions(Filters {
                    agent: field("agent")?,
                    host: field("host")?,
                    cwd: field("cwd")?,
                    state,
                    from_us: day("from", false)?,
                    to_us: day("to", true)?,
                    page,
                }))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fields_of_a_query_are_bounded_and_checked() {
        let asked = Asked::parse(
            "/team/sessions",
            "agent=echo&host=h-1&state=stranded&from=2026-11-01&to=2026-11-01&page=2",
        )
        .unwrap();
        let Asked::Sessions(f) = asked else {
            panic!("{asked:?}")
        };
        assert_eq!(f.agent.as_deref(), Some("echo"));
        assert_eq!(f.host.as_deref(), Some("h-1"));
        assert_eq!(f.state.as_deref(), Some("stranded"));
        for state in STORE_STATES {
            let query = format!("state={state}");
            assert!(Asked::parse("/team/sessions", &query).is_ok(), "{query}");
        }
        assert_eq!(f.page, 2);
        assert_eq!(f.to_us.unwrap() - f.from_us.unwrap(), 86_400_000_000);
        assert_eq!(
            Asked::parse("/team/sessions", "").unwrap(),
            Asked::Sessions(Filters::default())
        );
        assert_eq!(
            Asked::parse("/team/search", "q=+two+words+").unwrap(),
            Asked::Search("two words".into())
        );
        let day = Duration::from_secs(86_400);
        assert_eq!(
            Asked::parse("/team/share", "id=s1").unwrap(),
            Asked::Share("s1".into(), day * 7)
        );
        assert_eq!(
            Asked::parse("/team/share", "id=s1&days=30").unwrap(),
            Asked::Share("s1".into(), day * 30)
        );
        assert_eq!(
            Asked::parse("/team/usage.csv", "by=host").unwrap(),
            Asked::UsageCsv("host")
        );
        let long = format!("q={}", "a".repeat(MAX_FIELD + 1));
        for (path, query) in [
            ("/team/search", long.as_str()),
            ("/team/search", "q=%20"),
            ("/team/search", "q=%ff"),
            ("/team/session", ""),
            ("/team/session", "id=a%0Ab"),
            ("/team/sessions", "state=torn%3Bx"),
            ("/team/sessions", "state=open"),
            ("/team/sessions", "state=LIVE"),
            ("/team/sessions", "from=yesterday"),
            ("/team/sessions", "page=-1"),
            ("/team/sessions", "page=99999999999"),
            ("/team/usage.csv", ""),
            ("/team/usage.csv", "by=week"),
            ("/team/share", "days=7"),
            ("/team/share", "id=s1&days=31"),
            ("/team/share", "id=s1&days=0"),
            ("/team/share", "id=s1&days=-1"),
        ] {
            assert!(Asked::parse(path, query).is_err(), "{path}?{query}");
        }
    }
}
