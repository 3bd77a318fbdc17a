//! The page `serve` shows a browser at `/`: the sessions, one session's transcript live, its
//! permission requests answerable, a prompt box and a cancel button. The page is an ACP client
//! of its own (`page/page.js`) over a WebSocket to `/acp`; this module serves it (and its login
//! form, script and stylesheet) and signs the browser in.
//!
//! Signing in exchanges the token, once, for a cookie: `GET /?token=TOKEN` (a link the user
//! opens) or the login form's `POST /login` answer `303 See Other` to `/` with
//! `Set-Cookie: acp_journal=…; HttpOnly; SameSite=Strict; Path=/` (`; Secure` under TLS), so the
//! token stays neither in the address bar nor anywhere the page's script can read. The cookie's
//! value is [`Token::cookie`](super::token::Token::cookie), an HMAC of the token, not the token.
//! Without the cookie `/` is a login form that holds no session data; with it the page's
//! WebSocket is admitted to `/acp` in place of the bearer header (browsers cannot set one), and
//! only with an `Origin` the Origin check admits. Streamable HTTP on `/acp` stays bearer-only.
//!
//! Every response here carries a Content-Security-Policy that loads nothing from anywhere but
//! this server, runs no inline script, and lets no other site frame the page ([`CSP`]); HTML is
//! never cached, the script and the stylesheet are (revalidated by `ETag`).

use std::sync::LazyLock;

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode, header};
use sha2::{Digest, Sha256};

use super::token::COOKIE;
use super::{Body, Host, full, origin, own_origin, plain, ws};

/// The page (no data of its own: its script fetches everything over the WebSocket).
const INDEX: &str = include_str!("page/index.html");
/// Where the page says which version of acp-journal serves it (its `clientInfo`).
const VERSION_MARK: &str = "%VERSION%";
/// The login form (no script, no session data).
const LOGIN: &str = include_str!("page/login.html");
/// Where the login form says a token was wrong: [`LOGIN_ERROR`] takes its place then.
const LOGIN_ERROR_MARK: &str = "<!-- error -->";
/// What it says.
const LOGIN_ERROR: &str = "<p class=\"error\" role=\"alert\">That is not the token. Try again.</p>";
/// The page's ACP client.
const SCRIPT: &str = include_str!("page/page.js");
/// What the page adds to the HTML export's stylesheet (layout, list, buttons, prompt box).
const PAGE_STYLE: &str = include_str!("page/page.css");

/// The page as served.
static INDEX_HTML: LazyLock<String> =
    LazyLock::new(|| INDEX.replacen(VERSION_MARK, env!("CARGO_PKG_VERSION"), 1));

/// The stylesheet: the HTML export's (the transcript's cards are the export's), then the page's.
static STYLE: LazyLock<String> =
    LazyLock::new(|| format!("{}\n{PAGE_STYLE}", crate::render::html::STYLE));

/// Every page response's Content-Security-Policy.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     connect-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; \
     base-uri 'none'";

/// Largest login form body, in bytes.
const LOGIN_BODY: usize = 4 * 1024;

/// The paths this module answers.
pub(super) fn serves(path: &str) -> bool {
    matches!(path, "/" | "/login" | "/page.js" | "/page.css")
}

/// One request to one of the page's paths ([`serves`]).
pub(super) async fn handle(host: &Host, req: Request<Incoming>) -> Response<Body> {
    let mut response = match (req.method(), req.uri().path()) {
        (&Method::GET, "/") => root(host, &req),
        (&Method::POST, "/login") => login(host, req).await,
        (&Method::GET, "/page.js") => asset(&req, SCRIPT, "text/javascript; charset=utf-8"),
        (&Method::GET, "/page.css") => asset(&req, &STYLE, "text/css; charset=utf-8"),
        (_, path) => {
            let allow = if path == "/login" { "POST" } else { "GET" };
            let mut response = plain(StatusCode::METHOD_NOT_ALLOWED, &format!("use {allow}"));
            response
                .headers_mut()
                .insert(header::ALLOW, header::HeaderValue::from_static(allow));
            response
        }
    };
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

/// True for a WebSocket upgrade the page opens: its cookie, and an `Origin` (a browser always
/// sends one) that the Origin check admits.
pub(super) fn admits_socket(host: &Host, req: &Request<Incoming>) -> bool {
    origin(req).is_some() && ws::origin_allowed(host, req) && signed_in(host, req)
}

/// True when `req` carries the page's cookie.
fn signed_in(host: &Host, req: &Request<Incoming>) -> bool {
    let cookies = req.headers().get_all(header::COOKIE);
    host.options
        .token
        .admits_cookie(cookies.iter().map(|v| v.as_bytes()))
}

/// `GET /`: with `?token=`, the exchange for the cookie; else the page with the cookie, the
/// login form without.
fn root(host: &Host, req: &Request<Incoming>) -> Response<Body> {
    if let Some(given) = req.uri().query().and_then(|q| form_field(q, "token")) {
        return exchange(host, &given);
    }
    if signed_in(host, req) {
        html(StatusCode::OK, INDEX_HTML.clone())
    } else {
        login_form(StatusCode::OK, false)
    }
}

/// `POST /login`: the login form's token (`application/x-www-form-urlencoded`, at most
/// [`LOGIN_BODY`] bytes), from a page of this server when the browser says where from.
async fn login(host: &Host, req: Request<Incoming>) -> Response<Body> {
    if origin(&req).is_some_and(|o| !own_origin(&req, o)) {
        return plain(StatusCode::FORBIDDEN, "sign in from this server's own page");
    }
    let form = req.headers().get(header::CONTENT_TYPE).is_some_and(|kind| {
        let media = kind.as_bytes().split(|b| *b == b';').next().unwrap_or(b"");
        media
            .trim_ascii()
            .eq_ignore_ascii_case(b"application/x-www-form-urlencoded")
    });
    if !form {
        return plain(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "send application/x-www-form-urlencoded",
        );
    }
    let body = match Limited::new(req.into_body(), LOGIN_BODY).collect().await {
        Ok(body) => body.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            let text = format!("a login form is at most {LOGIN_BODY} bytes");
            return plain(StatusCode::PAYLOAD_TOO_LARGE, &text);
        }
        Err(_) => return plain(StatusCode::BAD_REQUEST, "the body could not be read"),
    };
    let given = std::str::from_utf8(&body)
        .ok()
        .and_then(|form| form_field(form, "token"))
        .unwrap_or_default();
    exchange(host, &given)
}

/// The token `given` for the cookie: `303` to `/` with it when right, the login form again
/// (401) when wrong.
fn exchange(host: &Host, given: &[u8]) -> Response<Body> {
    if !host.options.token.is(given) {
        tracing::info!("the page: a wrong token was given");
        return login_form(StatusCode::UNAUTHORIZED, true);
    }
    tracing::info!("the page: a browser signed in");
    let secure = if host.options.tls.is_some() {
        "; Secure"
    } else {
        ""
    };
    let cookie = format!(
        "{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/{secure}",
        host.options.token.cookie()
    );
    let mut response = html(StatusCode::SEE_OTHER, String::new());
    let headers = response.headers_mut();
    headers.insert(header::LOCATION, header::HeaderValue::from_static("/"));
    // Hex and fixed words: always a valid header value.
    if let Ok(value) = header::HeaderValue::from_str(&cookie) {
        headers.insert(header::SET_COOKIE, value);
    }
    response
}

fn login_form(status: StatusCode, wrong: bool) -> Response<Body> {
    let error = if wrong { LOGIN_ERROR } else { "" };
    html(status, LOGIN.replacen(LOGIN_ERROR_MARK, error, 1))
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
    let tag: String = digest[..12].iter().map(|b| format!("{b:02x}")).collect();
    let etag = format!("\"{tag}\"");
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
fn form_field(form: &str, name: &str) -> Option<Vec<u8>> {
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
    fn the_login_form_has_its_error_mark_and_the_page_its_files() {
        assert!(LOGIN.contains(LOGIN_ERROR_MARK));
        assert!(INDEX_HTML.contains(env!("CARGO_PKG_VERSION")));
        for file in ["/page.js", "/page.css"] {
            assert!(
                INDEX.contains(file) && LOGIN.contains("/page.css"),
                "{file}"
            );
            assert!(serves(file));
        }
        assert!(STYLE.starts_with(crate::render::html::STYLE));
        assert!(!serves("/acp") && !serves("/index.html"));
    }
}
