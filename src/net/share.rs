//! Share links, served (`serve --store`): `GET /share/<secret>` shows its holder the one
//! session the link's record names, as `export --format html` renders it (redacted), and
//! nothing else. No token is asked: the secret (128 random bits, made by `acp-journal share`
//! or the page's Share button) is the whole of the authorization, for that session only.
//!
//! - The path is `/share/` and a secret, nothing more: a query, another segment or anything
//!   that is not a secret's shape is no link (404), whatever session it names.
//! - The record is looked up by the secret's hash in the store ([`super::team::Team::link`])
//!   and kept for at most the recheck period ([`Links`]; a minute unless `--share-recheck`
//!   says less), so a link revoked on any host stops working on every host within it. Only
//!   records found are kept, at most [`KEPT`].
//! - A secret that names no record is a wrong guess: guesses are slowed per source only
//!   ([`Throttle::per_source`]), right and wrong answered after the same delay.
//! - The session's page opens with a banner rendered here from the record ([`banner`]): a
//!   read-only shared session, who shared it from which host when the record says, and when
//!   the link stops working; nothing of the secret.
//! - An expired or revoked link gets a page saying so (410); none of the link's secret
//!   reaches a log, an error message or a referrer: every answer here carries
//!   `Referrer-Policy: no-referrer`, and the session's page loads nothing from anywhere.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode, header};
use parking_lot::Mutex;
use sha2::{Digest, Sha256};
use tokio::time::Instant;

use super::responses::{Body, full, plain};
use super::sockets::Pass;
use super::team::{Failure, Link, Reads};
use super::throttle::Throttle;
use crate::fleet::lease::shown;
use crate::render::html::escape;
use crate::render::minute;

/// The path of links, before the secret.
pub(super) const PATH: &str = "/share/";
/// The longest a host trusts a record it read (`--share-recheck` at most).
pub(super) const MAX_RECHECK: Duration = Duration::from_secs(60);
/// Records kept at once.
pub(super) const KEPT: usize = 1024;
/// Characters in a secret (16 bytes, base64url).
const SECRET_CHARS: usize = 22;

/// The policy of the refusal pages: nothing loaded, nothing run, never framed.
const REFUSAL_POLICY: &str =
    "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

/// Whether `path` is a link's.
pub(super) fn serves(path: &str) -> bool {
    path.starts_with(PATH)
}

/// The records read lately, each trusted for `recheck` from when it was read.
pub(super) struct Links {
    recheck: Duration,
    kept: Mutex<HashMap<[u8; 32], (Instant, Link)>>,
    /// Wrong secrets, per source only.
    pub(super) throttle: Throttle,
}

impl Links {
    /// Records trusted for `recheck` (at most [`MAX_RECHECK`]).
    pub(super) fn new(recheck: Duration) -> Links {
        Links {
            recheck: recheck.min(MAX_RECHECK),
            kept: Mutex::new(HashMap::new()),
            throttle: Throttle::per_source(),
        }
    }

    /// The record of `secret` as read less than the recheck period before `now`.
    fn fresh(&self, secret: &str, now: Instant) -> Option<Link> {
        let key = digest(secret);
        let mut kept = self.kept.lock();
        match kept.get(&key) {
            Some((read, link)) if now.duration_since(*read) < self.recheck => Some(link.clone()),
            Some(_) => {
                kept.remove(&key);
                None
            }
            None => None,
        }
    }

    /// Keep `link`, the record of `secret`, as read at `now` (the one read longest ago goes
    /// when [`KEPT`] are kept).
    fn keep(&self, secret: &str, link: Link, now: Instant) {
        let mut kept = self.kept.lock();
        if kept.len() >= KEPT
            && let Some(oldest) = kept
                .iter()
                .min_by_key(|(_, (read, _))| *read)
                .map(|(k, _)| *k)
        {
            kept.remove(&oldest);
        }
        kept.insert(digest(secret), (now, link));
    }
}

/// The SHA-256 of `secret`: what the table holds instead of it.
fn digest(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

/// The secret of a link's path and query, when they are a link's: `/share/` and 22 base64url
/// characters, no query.
fn secret_of<'a>(path: &'a str, query: Option<&str>) -> Option<&'a str> {
    let secret = path.strip_prefix(PATH)?;
    let shaped = secret.len() == SECRET_CHARS
        && secret
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    (shaped && query.is_none()).then_some(secret)
}

/// Where a request to a link's path comes from, and what serves it.
pub(super) struct Asker<'a> {
    /// The records read lately, and the throttle of wrong secrets.
    pub(super) links: &'a Links,
    /// The store's side, when this host serves a store.
    pub(super) reads: Option<&'a Reads>,
    /// Its source address.
    pub(super) ip: IpAddr,
    /// How long its socket may wait for an answer before it shows a secret.
    pub(super) within: Duration,
    /// Its socket's pass, authenticated once it shows a link that works.
    pub(super) pass: &'a Pass,
}

/// One request to a link's path ([`serves`]).
pub(super) async fn handle(asker: Asker<'_>, req: &Request<Incoming>) -> Response<Body> {
    let response = answer(asker, req).await;
    with_share_headers(response)
}

async fn answer(asker: Asker<'_>, req: &Request<Incoming>) -> Response<Body> {
    let Asker {
        links,
        reads,
        ip,
        within,
        pass,
    } = asker;
    if req.method() != Method::GET {
        let mut response = plain(StatusCode::METHOD_NOT_ALLOWED, "use GET");
        response
            .headers_mut()
            .insert(header::ALLOW, header::HeaderValue::from_static("GET"));
        return response;
    }
    let Some(reads) = reads else {
        return refusal(
            StatusCode::NOT_FOUND,
            "No such link",
            "This host serves no store, so no shared session.",
        );
    };
    let secret = secret_of(req.uri().path(), req.uri().query());
    // What the check found; nothing when it did not end in time.
    let mut found: Option<Result<Option<Link>, Failure>> = None;
    let check = async {
        let Some(secret) = secret else {
            found = Some(Ok(None));
            return false;
        };
        let read = match links.fresh(secret, Instant::now()) {
            Some(link) => Ok(Some(link)),
            None => {
                let read = reads.link(secret.to_string()).await;
                if let Ok(Some(link)) = &read {
                    links.keep(secret, link.clone(), Instant::now());
                }
                read
            }
        };
        // A store that could not answer is no wrong guess.
        let right = !matches!(read, Ok(None));
        found = Some(read);
        right
    };
    let answered = links.throttle.decide_on(ip, within, check).await;
    let link = match found {
        Some(Ok(Some(link))) if answered => link,
        Some(Ok(Some(_))) | None => {
            return plain(StatusCode::SERVICE_UNAVAILABLE, "busy: try again");
        }
        Some(Ok(None)) => {
            return refusal(
                StatusCode::NOT_FOUND,
                "No such link",
                "This is no share link of this store: check that it was copied whole.",
            );
        }
        Some(Err(Failure::Store(why))) => {
            tracing::warn!("a share link's record could not be read: {why}");
            return plain(StatusCode::BAD_GATEWAY, "the store could not be read");
        }
        Some(Err(Failure::Bad(why) | Failure::NotFound(why))) => {
            return plain(StatusCode::BAD_REQUEST, &why);
        }
    };
    if link.revoked {
        return refusal(
            StatusCode::GONE,
            "This link was revoked",
            "Whoever shared this session took the link back. Ask them for a new one.",
        );
    }
    if jiff::Timestamp::now().as_microsecond() >= link.expires {
        return refusal(
            StatusCode::GONE,
            "This link has expired",
            "Share links last as long as they were made to (30 days at most). Ask for a new one.",
        );
    }
    // The holder showed a secret: its socket lives as one that showed the token does.
    if !pass.authenticate() {
        return plain(StatusCode::SERVICE_UNAVAILABLE, "too many sockets");
    }
    let session = link.session.clone();
    match reads.answer(move |team| team.session(&session)).await {
        Ok(html) => {
            let mut response = Response::new(full(with_banner(html, &banner(&link))));
            let headers = response.headers_mut();
            headers.insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static("text/html; charset=utf-8"),
            );
            let policy = format!(
                "{}; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
                crate::render::html::policy()
            );
            if let Ok(value) = header::HeaderValue::from_str(&policy) {
                headers.insert(header::CONTENT_SECURITY_POLICY, value);
            }
            response
        }
        Err(response) => response,
    }
}

/// What a shared session's page says first: that it is shared and read-only, who shared it
/// from which host (when the record says: names the store gave, [`shown`] and escaped), and
/// until when. Styled inline (the export's policy allows inline style, and its sheet is left
/// as the export has it).
fn banner(link: &Link) -> String {
    let name = |text: &str| escape(&shown(text)).into_owned();
    let by = match (link.user.as_str(), link.host.as_str()) {
        ("", "") => String::new(),
        ("page", "") => " Shared from the team page.".to_string(),
        ("page", host) => format!(" Shared from the team page of host {}.", name(host)),
        (user, "") => format!(" Shared by {}.", name(user)),
        ("", host) => format!(" Shared from host {}.", name(host)),
        (user, host) => format!(" Shared by {} on host {}.", name(user), name(host)),
    };
    let until = Some(minute(link.expires))
        .filter(|t| !t.is_empty())
        .map(|t| format!(" This link works until {t}."))
        .unwrap_or_default();
    format!(
        "<aside class=\"shared-banner\" role=\"note\" aria-label=\"Shared session\" \
         style=\"margin:0 0 1rem;padding:.5rem .75rem;border:1px solid var(--warn);\
         border-radius:6px;background:var(--panel)\"><strong>A shared session, read-only.</strong>\
         {by}{until}</aside>\n"
    )
}

/// `html` (a page of the export) with `banner` first in its body (at the very start when no
/// `<body>` is found: the export always writes one, before anything of the session).
fn with_banner(html: Vec<u8>, banner: &str) -> Vec<u8> {
    const BODY: &[u8] = b"<body>\n";
    let at = memchr::memmem::find(&html, BODY).map_or(0, |i| i + BODY.len());
    let mut out = Vec::with_capacity(html.len() + banner.len());
    out.extend_from_slice(&html[..at]);
    out.extend_from_slice(banner.as_bytes());
    out.extend_from_slice(&html[at..]);
    out
}

/// A page that says why there is nothing to see, and nothing else.
fn refusal(status: StatusCode, title: &str, text: &str) -> Response<Body> {
    let page = format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{title}</title>\n</head>\n<body>\n<main>\n<h1>{title}</h1>\n<p>{text}</p>\n\
         </main>\n</body>\n</html>\n"
    );
    let mut response = Response::new(full(page));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/html; charset=utf-8"),
    );
    response
}

/// `response` with the headers of every answer to a link: no referrer, never cached or
/// indexed, `nosniff`, and the refusal pages' policy unless it has its own.
fn with_share_headers(mut response: Response<Body>) -> Response<Body> {
    let headers = response.headers_mut();
    for (name, value) in [
        (header::REFERRER_POLICY, "no-referrer"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::CACHE_CONTROL, "no-store"),
        (
            header::HeaderName::from_static("x-robots-tag"),
            "noindex, nofollow",
        ),
    ] {
        headers.insert(name, header::HeaderValue::from_static(value));
    }
    if !headers.contains_key(header::CONTENT_SECURITY_POLICY) {
        headers.insert(
            header::CONTENT_SECURITY_POLICY,
            header::HeaderValue::from_static(REFUSAL_POLICY),
        );
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "AAAAAAAAAAAAAAAAAAAAAA";

    fn link(revoked: bool) -> Link {
        Link {
            session: "s1".into(),
            expires: i64::MAX,
            revoked,
            host: "h-1".into(),
            user: "me".into(),
        }
    }

    #[test]
    fn a_shared_page_opens_with_a_banner_of_its_record_and_nothing_else_changes() {
        let expires = 1_796_580_120_000_000;
        let at = |user: &str, host: &str| {
            banner(&Link {
                expires,
                user: user.into(),
                host: host.into(),
                ..link(false)
            })
        };
        let text = at("me", "box-1");
        assert!(
            text.contains("A shared session, read-only.")
                && text.contains("Shared by &quot;me&quot; on host &quot;box-1&quot;.")
                && text.contains("until 2026-12-06 18:02 UTC."),
            "{text}"
        );
        assert!(
            at("page", "box-1").contains("Shared from the team page of host &quot;box-1&quot;.")
        );
        assert!(at("me", "").contains("Shared by &quot;me&quot;. This"));
        assert!(at("", "box-1").contains("Shared from host &quot;box-1&quot;. This"));
        let anonymous = at("", "");
        assert!(
            anonymous.contains("read-only.</strong> This link works until"),
            "{anonymous}"
        );
        // Names from the store: escaped, bounded, no control characters.
        let hostile = at("<script>x</script>\u{1b}[2J", &"h".repeat(5000));
        assert!(
            !hostile.contains("<script") && !hostile.contains('\u{1b}'),
            "{hostile}"
        );
        assert!(hostile.len() < 1000, "{hostile}");
        // An expiry past any calendar (a forged record) is not said.
        let forever = banner(&link(false));
        assert!(!forever.contains("until"), "{forever}");
        // First in the body; the page otherwise as it was; no body, at the start.
        let page = b"<head><title>&lt;body&gt;</title></head>\n<body>\n<header>x</header>".to_vec();
        let shown = with_banner(page, "<aside>B</aside>\n");
        assert_eq!(
            String::from_utf8(shown).unwrap(),
            "<head><title>&lt;body&gt;</title></head>\n<body>\n<aside>B</aside>\n<header>x</header>"
        );
        assert_eq!(with_banner(b"odd".to_vec(), "B"), b"Bodd");
    }

    #[test]
    fn only_a_secret_alone_is_a_link() {
        assert_eq!(secret_of(&format!("{PATH}{SECRET}"), None), Some(SECRET));
        for (path, query) in [
            (format!("{PATH}{SECRET}"), Some("id=other")),
            (format!("{PATH}{SECRET}"), Some("")),
            (format!("{PATH}{SECRET}/other"), None),
            (format!("{PATH}{SECRET}A"), None),
            (format!("{PATH}{}", &SECRET[1..]), None),
            (format!("{PATH}..%2F..%2Fteam%2Fsession"), None),
            (format!("{PATH}AAAAAAAAAAAAAAAAAAAA.."), None),
            (PATH.to_string(), None),
        ] {
            assert_eq!(secret_of(&path, query), None, "{path}?{query:?}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_record_is_trusted_for_the_recheck_period_then_read_again() {
        let links = Links::new(MAX_RECHECK);
        let start = Instant::now();
        assert_eq!(links.fresh(SECRET, start), None);
        links.keep(SECRET, link(false), start);
        // Over several periods, on the paused clock: a revocation read at a recheck is seen
        // at most MAX_RECHECK after it was made.
        let mut read_at = start;
        for period in 0..5 {
            assert_eq!(
                links.fresh(SECRET, read_at + MAX_RECHECK - Duration::from_millis(1)),
                Some(link(period > 0)),
                "period {period}"
            );
            let due = read_at + MAX_RECHECK;
            assert_eq!(links.fresh(SECRET, due), None, "period {period}");
            // Read again: revoked from the first recheck on.
            links.keep(SECRET, link(true), due);
            read_at = due;
        }
        // A shorter recheck is kept; a longer one is cut to the minute.
        assert_eq!(
            Links::new(Duration::from_secs(1)).recheck,
            Duration::from_secs(1)
        );
        assert_eq!(Links::new(Duration::from_secs(3600)).recheck, MAX_RECHECK);
        // The table is bounded, the one read longest ago going first.
        let links = Links::new(MAX_RECHECK);
        for i in 0..=KEPT {
            links.keep(
                &format!("s{i}"),
                link(false),
                start + Duration::from_millis(i as u64),
            );
        }
        assert_eq!(links.kept.lock().len(), KEPT);
        let now = start + Duration::from_secs(1);
        assert_eq!(links.fresh("s0", now), None);
        assert_eq!(links.fresh(&format!("s{KEPT}"), now), Some(link(false)));
    }
}
