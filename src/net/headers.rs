//! What the server reads from a request's headers and names in its answers: ACP's
//! `Acp-Connection-Id` (a new connection's: [`connection_id`]) and `Acp-Session-Id`, the `Host`
//! a request was sent to ([`request_host`]), the `Origin` a browser sent ([`origin`]) and
//! whether it is the server's own, scheme, host and port ([`own_origin`]).

use hyper::{Request, header};

use crate::hex;

/// The header naming a connection.
pub(super) const CONNECTION_ID: &str = "acp-connection-id";
/// The header naming a session.
pub(super) const SESSION_ID: &str = "acp-session-id";

/// The `Host` a request was sent to (HTTP/2: its `:authority`).
pub(super) fn request_host<B>(req: &Request<B>) -> Option<&str> {
    req.headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| req.uri().authority().map(|a| a.as_str()))
}

/// The `Origin` a browser sent with `req` (`None`: none, or not text).
pub(super) fn origin<B>(req: &Request<B>) -> Option<&str> {
    req.headers()
        .get(header::ORIGIN)
        .and_then(|v| v.to_str().ok())
}

/// True when `origin` is this server's own: its scheme (`https` when it serves `tls`, else
/// `http`), host and port (the scheme's default when not written) those of the `Host` `req` was
/// sent to — a page of this server. An origin is `scheme://host[:port]`, nothing more.
pub(super) fn own_origin<B>(req: &Request<B>, origin: &str, tls: bool) -> bool {
    let (scheme, default_port) = if tls { ("https", 443) } else { ("http", 80) };
    let Some((given, authority)) = origin.split_once("://") else {
        return false;
    };
    if !given.eq_ignore_ascii_case(scheme) {
        return false;
    }
    let (Some(origin), Some(own)) = (
        host_and_port(authority, default_port),
        request_host(req).and_then(|h| host_and_port(h, default_port)),
    ) else {
        return false;
    };
    origin == own
}

/// `host[:port]` (an IPv6 address in brackets) as its host, lower case, and port (`default`
/// when not written); `None` for anything else (a path, user info, an empty host or port).
fn host_and_port(authority: &str, default: u16) -> Option<(String, u16)> {
    if authority.contains(['/', '@', '?', '#']) || authority.ends_with(':') {
        return None;
    }
    let parsed: hyper::http::uri::Authority = authority.parse().ok()?;
    let host = parsed.host().to_ascii_lowercase();
    (!host.is_empty()).then(|| (host, parsed.port_u16().unwrap_or(default)))
}

/// A new connection's `Acp-Connection-Id`: 128 random bits, hex.
pub(super) fn connection_id() -> String {
    let mut bytes = [0u8; 16];
    // No randomness is a broken machine; the id is no secret (the token is), only unique.
    if getrandom::fill(&mut bytes).is_err() {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        bytes = t.to_le_bytes();
    }
    hex::encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_own_origin_has_the_scheme_host_and_port_of_the_server() {
        let to = |host: &str| {
            Request::builder()
                .header(header::HOST, host)
                .body(())
                .unwrap()
        };
        let req = to("127.0.0.1:8080");
        assert!(own_origin(&req, "http://127.0.0.1:8080", false));
        assert!(own_origin(&req, "HTTP://127.0.0.1:8080", false));
        for foreign in [
            "https://127.0.0.1:8080",
            "x://127.0.0.1:8080",
            "ws://127.0.0.1:8080",
            "127.0.0.1:8080",
            "http://127.0.0.1:8081",
            "http://127.0.0.1",
            "http://127.0.0.1:8080/",
            "http://u@127.0.0.1:8080",
            "http://127.0.0.1:8080:",
            "http://127.0.0.1.evil.example:8080",
            "null",
            "",
        ] {
            assert!(!own_origin(&req, foreign, false), "{foreign}");
        }
        assert!(own_origin(&req, "https://127.0.0.1:8080", true));
        assert!(!own_origin(&req, "http://127.0.0.1:8080", true));
        // Default ports, written or not; names in any case; IPv6.
        assert!(own_origin(
            &to("box.example"),
            "https://Box.Example:443",
            true
        ));
        assert!(own_origin(
            &to("box.example:443"),
            "https://box.example",
            true
        ));
        assert!(own_origin(&to("box.example"), "http://box.example", false));
        assert!(!own_origin(
            &to("box.example"),
            "http://box.example:8080",
            false
        ));
        assert!(own_origin(&to("[::1]:8080"), "http://[::1]:8080", false));
        assert!(!own_origin(&to("[::1]:8080"), "http://[::2]:8080", false));
    }

    #[test]
    fn connection_ids_are_unique_hex() {
        let (a, b) = (connection_id(), connection_id());
        assert_ne!(a, b);
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
    }
}
