//! The page `serve` shows a browser at `/`: the sessions, one session's transcript live, its
//! permission requests answerable, a prompt box and a cancel button. The page is an ACP client
//! of its own (`page/page.js`) over a WebSocket to `/acp`, with the team view of a store in
//! `page/team.js`, its tool calls' cards in `page/tools.js`, their diffs in `page/diff.js` and
//! its subagents' timelines in `page/subagents.js`; this module serves its seven files.
//!
//! Signing in needs no cookie, nothing the browser would send by itself. The token comes in the
//! address's fragment, `/#token=TOKEN` (a fragment never reaches the server, its logs or a proxy
//! in front), or typed into the page's sign-in form; the script keeps it in the tab's
//! `sessionStorage` (this origin, this tab, gone with it), takes it out of the address bar at
//! once, and shows it on its own WebSocket only, as a `Sec-WebSocket-Protocol` value
//! ([`Token::protocol`](super::token::Token::protocol): browsers cannot set `Authorization` on a
//! WebSocket), where it is checked like the bearer header, wrong ones slowed alike, and the
//! `Origin` check applies. `GET /?token=TOKEN` (older links) answers `303` to `/#token=TOKEN`.
//! The page itself holds no session data: anyone may load it.
//!
//! Every response here carries a Content-Security-Policy that loads nothing from anywhere but
//! this server, runs no inline script, and lets no other site frame the page ([`CSP`]); HTML is
//! never cached, the script and the stylesheet are (revalidated by `ETag`).

use std::sync::LazyLock;

use bytes::Bytes;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode, header};
use sha2::{Digest, Sha256};

use super::responses::{Body, full, plain};
use crate::hex;

/// The page (no data of its own: its script fetches everything over the WebSocket).
const INDEX: &str = include_str!("page/index.html");
/// Where the page says which version of acp-journal serves it (its `clientInfo`).
const VERSION_MARK: &str = "%VERSION%";
/// The page's ACP client.
const SCRIPT: &str = include_str!("page/page.js");
/// The page's team view (`serve --store`), loaded before [`SCRIPT`], which calls it.
const TEAM_SCRIPT: &str = include_str!("page/team.js");
/// The page's diffs (`diff` content blocks as the export draws them), loaded before [`SCRIPT`],
/// which calls it.
const DIFF_SCRIPT: &str = include_str!("page/diff.js");
/// The page's tool calls' cards, loaded before [`SCRIPT`], which calls it.
const TOOLS_SCRIPT: &str = include_str!("page/tools.js");
/// The page's subagents (child sessions drawn as timelines in their parent's), loaded before
/// [`SCRIPT`], which calls it.
const SUBAGENTS_SCRIPT: &str = include_str!("page/subagents.js");
/// What the page adds to the HTML export's stylesheet (layout, list, buttons, prompt box).
const PAGE_STYLE: &str = include_str!("page/page.css");

/// Where the page says whether this host serves the team view of a store (`on`, or nothing).
const TEAM_MARK: &str = "%TEAM%";

/// The page as served: by a host without a store, and by one with (`--store`: the page shows
/// its Team button, and asks nothing it would be refused).
static INDEX_HTML: LazyLock<[String; 2]> = LazyLock::new(|| {
    let page = INDEX.replacen(VERSION_MARK, env!("CARGO_PKG_VERSION"), 1);
    [
        page.replacen(TEAM_MARK, "", 1),
        page.replacen(TEAM_MARK, "on", 1),
    ]
});

/// The stylesheet: the HTML export's (the transcript's cards are the export's), then the page's.
static STYLE: LazyLock<String> =
    LazyLock::new(|| format!("{}\n{PAGE_STYLE}", crate::render::html::STYLE));

/// Every page response's Content-Security-Policy.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     connect-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; \
     base-uri 'none'";

/// The paths this module answers.
pub(super) fn serves(path: &str) -> bool {
    matches!(
        path,
        "/" | "/page.js" | "/team.js" | "/diff.js" | "/tools.js" | "/subagents.js" | "/page.css"
    )
}

/// One request to one of the page's paths ([`serves`]), on a host that serves the team view
/// of a store (`team`) or not.
pub(super) fn handle(req: Request<Incoming>, team: bool) -> Response<Body> {
    let response = match (req.method(), req.uri().path()) {
        (&Method::GET, "/") => root(&req, team),
        (&Method::GET, "/page.js") => asset(&req, SCRIPT, "text/javascript; charset=utf-8"),
        (&Method::GET, "/team.js") => asset(&req, TEAM_SCRIPT, "text/javascript; charset=utf-8"),
        (&Method::GET, "/diff.js") => asset(&req, DIFF_SCRIPT, "text/javascript; charset=utf-8"),
        (&Method::GET, "/tools.js") => asset(&req, TOOLS_SCRIPT, "text/javascript; charset=utf-8"),
        (&Method::GET, "/subagents.js") => {
            asset(&req, SUBAGENTS_SCRIPT, "text/javascript; charset=utf-8")
        }
        (&Method::GET, "/page.css") => asset(&req, &STYLE, "text/css; charset=utf-8"),
        _ => {
            let mut response = plain(StatusCode::METHOD_NOT_ALLOWED, "use GET");
            response
                .headers_mut()
                .insert(header::ALLOW, header::HeaderValue::from_static("GET"));
            response
        }
    };
    with_page_headers(response)
}

/// `response` with the headers of every page response: [`CSP`], `nosniff`, no referrer, and
/// `no-store` unless it says how it is cached.
pub(super) fn with_page_headers(mut response: Response<Body>) -> Response<Body> {
    let headers = response.headers_mut();
    for (name, value) in [
        (header::CONTENT_SECURITY_POLICY, CSP),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
    ] {
        headers.insert(name, header::HeaderValue::from_static(value));
    }
    if !headers.contains_key(header::CACHE_CONTROL) {
        headers.insert(
            header::CACHE_CONTROL,
            header::HeaderValue::from_static("no-store"),
        );
    }
    response
}

/// `GET /`: the page; with `?token=`, a `303` that moves the token into the fragment (checked
/// there by the page's WebSocket, like any token).
fn root(req: &Request<Incoming>, team: bool) -> Response<Body> {
    let Some(given) = req.uri().query().and_then(|q| form_field(q, "token")) else {
        return html(StatusCode::OK, INDEX_HTML[usize::from(team)].clone());
    };
    let mut location = String::from("/#token=");
    for b in given {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            location.push(char::from(b));
        } else {
            location.push_str(&format!("%{b:02X}"));
        }
    }
    let mut response = html(StatusCode::SEE_OTHER, String::new());
    // Percent-encoded ASCII: always a valid header value.
    if let Ok(value) = header::HeaderValue::from_str(&location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    response
}

/// An HTML response, never cached.
fn html(status: StatusCode, body: String) -> Response<Body> {
    let mut response = Response::new(full(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/html; charset=utf-8"),
    );
    response
}

/// A static file: cached, revalidated by its `ETag` (a hash of its content), `304` when the
/// browser has it.
fn asset(req: &Request<Incoming>, body: &'static str, kind: &'static str) -> Response<Body> {
    let digest = Sha256::digest(body.as_bytes());
    let etag = format!("\"{}\"", hex::encode(&digest[..12]));
    let fresh = req
        .headers()
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim() == etag || t.trim() == "*");
    let mut response = if fresh {
        let mut response = Response::new(full(Bytes::new()));
        *response.status_mut() = StatusCode::NOT_MODIFIED;
        response
    } else {
        let mut response = Response::new(full(Bytes::from_static(body.as_bytes())));
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, header::HeaderValue::from_static(kind));
        response
    };
    let headers = response.headers_mut();
    if let Ok(value) = header::HeaderValue::from_str(&etag) {
        headers.insert(header::ETAG, value);
    }
    headers.insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-cache"),
    );
    response
}

/// The value of field `name` in `form` (`a=1&b=2`, as a query string or a form body),
/// `+` and `%XX` decoded; `None` when it is not there.
pub(super) fn form_field(form: &str, name: &str) -> Option<Vec<u8>> {
    form.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        (decode(key) == name.as_bytes()).then(|| decode(value))
    })
}

/// `application/x-www-form-urlencoded` decoding: `+` is a space, `%XX` a byte; a `%` not
/// followed by two hex digits stands for itself.
fn decode(text: &str) -> Vec<u8> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |at: usize| bytes.get(at).and_then(|b| (*b as char).to_digit(16));
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => match (hex(i + 1), hex(i + 2)) {
                (Some(high), Some(low)) => {
                    // Two hex digits: at most 255.
                    out.push((high * 16 + low) as u8);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn form_fields_are_found_and_decoded() {
        assert_eq!(
            form_field("a=1&token=ab%2Bc+d%2f&b=2", "token"),
            Some(b"ab+c d/".to_vec())
        );
        assert_eq!(form_field("token=", "token"), Some(Vec::new()));
        assert_eq!(form_field("token", "token"), Some(Vec::new()));
        assert_eq!(form_field("tokens=x", "token"), None);
        assert_eq!(form_field("", "token"), None);
        assert_eq!(decode("%zz%4"), b"%zz%4");
        assert_eq!(decode("%e2%9c%93"), "✓".as_bytes());
    }

    #[test]
    fn the_page_has_its_files_and_its_sign_in_form() {
        for page in INDEX_HTML.iter() {
            assert!(page.contains(env!("CARGO_PKG_VERSION")));
            assert!(!page.contains(TEAM_MARK));
        }
        assert!(INDEX_HTML[0].contains("data-team=\"\""));
        assert!(INDEX_HTML[1].contains("data-team=\"on\""));
        assert!(INDEX.contains("id=\"sign-in\""));
        for file in [
            "/page.js",
            "/team.js",
            "/diff.js",
            "/tools.js",
            "/subagents.js",
            "/page.css",
        ] {
            assert!(INDEX.contains(file), "{file}");
            assert!(serves(file));
        }
        // The team view and the diffs first: the page's script calls them.
        assert!(INDEX.find("/team.js") < INDEX.find("/page.js"));
        assert!(INDEX.find("/diff.js") < INDEX.find("/page.js"));
        assert!(INDEX.find("/tools.js") < INDEX.find("/page.js"));
        assert!(INDEX.find("/subagents.js") < INDEX.find("/page.js"));
        assert!(STYLE.starts_with(crate::render::html::STYLE));
        assert!(!serves("/acp") && !serves("/index.html") && !serves("/login"));
    }
}
