//! What the server reads from a request's headers and names in its answers: ACP's
//! `Acp-Connection-Id` (a new connection's: [`connection_id`]) and `Acp-Session-Id`, the `Host`
//! a request was sent to ([`request_host`]), the `Origin` a browser sent ([`origin`],
//! [`own_origin`]).

use hyper::{Request, header};

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

/// True when `origin`'s host (and port) is the `Host` `req` was sent to: a page of this server.
pub(super) fn own_origin<B>(req: &Request<B>, origin: &str) -> bool {
    let origin_host = origin.split_once("://").map_or(origin, |(_, rest)| rest);
    request_host(req).is_some_and(|own| own.eq_ignore_ascii_case(origin_host))
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
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_ids_are_unique_hex() {
        let (a, b) = (connection_id(), connection_id());
        assert_ne!(a, b);
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
    }
}
