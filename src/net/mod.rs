//! `acp-journal serve`'s network side: ACP's remote transports on one URL (`/acp`), as the
//! SDKs speak them (see `docs/SERVING.md` for the wire and every leniency): Streamable HTTP
//! (`POST` of one JSON-RPC message, the answer to `initialize` inline with `Acp-Connection-Id`,
//! everything else on `GET` Server-Sent-Event streams, `DELETE` to end) in [`http`], and
//! WebSocket (one message per text frame) in [`ws`]. HTTP/1.1 and HTTP/2 (h2c by prior
//! knowledge, h2 by ALPN with TLS). At `/`, a page for the browser ([`page`]): an ACP client of
//! its own over the WebSocket, which shows the token as a subprotocol.
//!
//! Each client connection is a [`crate::shell::hub::Connection`]: its lines go to the one
//! protocol core in front of the one agent, and the core's lines for it come back through its
//! outbox. A connection's end never ends a session.
//!
//! Every request must name this server in its `Host` ([`hosts`]); every request to `/acp` needs
//! the bearer [`token::Token`] (a WebSocket may show it as a subprotocol instead), checked before
//! anything is allocated; a wrong one is answered late ([`throttle`]).
//! Limits: a socket that has not shown the token lives at most [`Options::handshake`] and the
//! oldest such is shed past its share ([`sockets`]); request headers at most [`MAX_HEAD`]; a
//! message of at most [`Options::max_message`] bytes (413), at most
//! [`Options::max_connections`] ACP connections (503); a client that does not take what it is
//! sent within [`SEND_TIMEOUT`] (or lets its queue pass the hub's limits) is dropped.

pub mod bridge;
pub mod hosts;
mod http;
mod page;
mod sockets;
mod summary;
mod throttle;
pub mod tls;
pub mod token;
mod ws;

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode, header};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;

use crate::shell::hub::HubLink;
use hosts::Hosts;
use sockets::{Pass, Sockets};
use summary::Summary;
use throttle::Throttle;
use token::Token;

/// Largest request head (HTTP/1.1 headers; an HTTP/2 header list), in bytes.
pub const MAX_HEAD: usize = 32 * 1024;

/// HTTP/2 streams open at once on one socket.
const MAX_STREAMS: u32 = 32;

/// HTTP/2 flow-control windows (bytes a client may send ahead), per stream and per socket: what
/// a socket that has not shown the token can make the server hold.
const H2_WINDOW: u32 = 64 * 1024;

/// `Strict-Transport-Security` under TLS (no `includeSubDomains`: the name may hold others).
const HSTS: &str = "max-age=31536000";

/// How long a client may take to accept one message before it is dropped.
pub const SEND_TIMEOUT: Duration = Duration::from_secs(30);

/// How often an idle stream or socket gets a keep-alive (an SSE comment, a WebSocket ping).
pub const KEEPALIVE: Duration = Duration::from_secs(15);

/// The header naming a connection.
const CONNECTION_ID: &str = "acp-connection-id";
/// The header naming a session.
const SESSION_ID: &str = "acp-session-id";

/// What the server allows.
#[derive(Clone, Debug)]
pub struct Options {
    /// The bearer token.
    pub token: Token,
    /// Largest message, in bytes (a bigger body gets 413; a bigger WebSocket frame closes).
    pub max_message: usize,
    /// ACP connections open at once (HTTP and WebSocket).
    pub max_connections: usize,
    /// An HTTP connection with no stream open for this long, or a WebSocket that answers no
    /// ping for this long, is ended (its sessions live on).
    pub idle_timeout: Duration,
    /// How long `initialize` may wait for the agent's answer (then 504).
    pub init_timeout: Duration,
    /// Browser origins allowed to open a WebSocket besides the server's own host.
    pub allowed_origins: Vec<String>,
    /// `--allow-host`: names admitted in `Host` besides loopback and the listening address.
    pub allowed_hosts: Vec<String>,
    /// How long a socket may go without showing the token (TLS, request headers and bodies,
    /// HTTP/2 frames and pings included; 10 s by default).
    pub handshake: Duration,
    /// TLS, when given a certificate and key.
    pub tls: Option<Arc<rustls::ServerConfig>>,
}

/// A response body: whole, or a stream of Server-Sent Events.
type Body = BoxBody<Bytes, Infallible>;

/// The server's shared state.
struct Host {
    options: Options,
    link: HubLink,
    /// The `Host` values admitted.
    names: Hosts,
    /// Wrong tokens, per source.
    throttle: Throttle,
    /// HTTP connections by `Acp-Connection-Id`.
    http: Mutex<HashMap<String, http::Handle>>,
    /// ACP connections open (HTTP and WebSocket).
    open: AtomicUsize,
}

impl Host {
    /// Count a new ACP connection in; false (nothing counted) at the limit.
    fn admit(&self) -> bool {
        self.open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.options.max_connections).then_some(n + 1)
            })
            .is_ok()
    }

    fn release(&self) {
        self.open.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Serve ACP on `listener` until the hub's main loop is gone. Each socket runs on its own task.
///
/// # Errors
/// The listener's address cannot be read.
pub async fn serve(listener: TcpListener, options: Options, link: HubLink) -> std::io::Result<()> {
    let address = listener.local_addr()?;
    // Sockets that have not shown the token: as many as ACP connections, and some; the oldest
    // is shed for a new one. Those that have: four per connection, as before.
    let sockets = Arc::new(Sockets::new(
        options.max_connections + 16,
        options.max_connections * 4 + 16,
        options.handshake,
    ));
    let host = Arc::new(Host {
        names: Hosts::new(address, &options.allowed_hosts),
        options,
        link,
        throttle: Throttle::new(),
        http: Mutex::new(HashMap::new()),
        open: AtomicUsize::new(0),
    });
    let shed = Summary::new(
        "an unauthenticated socket shed for a new one",
        "unauthenticated sockets shed for new ones",
    );
    let failed = Summary::new("an accept error", "accept errors");
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of descriptors and the like: wait, do not spin.
                failed.count(format_args!("({e})"));
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let (pass, full) = sockets.admit();
        if full {
            shed.count(format_args!("from {}", peer.ip()));
        }
        let _ = stream.set_nodelay(true);
        let host = host.clone();
        tokio::spawn(async move {
            let pass = Arc::new(pass);
            tokio::select! {
                () = socket(host, stream, peer, pass.clone()) => {}
                () = pass.ended() => tracing::debug!("{peer} did not show the token in time"),
            }
        });
    }
}

/// One socket: TLS if configured, then HTTP/1.1 or HTTP/2 until it closes.
async fn socket(host: Arc<Host>, stream: tokio::net::TcpStream, peer: SocketAddr, pass: Arc<Pass>) {
    match host.options.tls.clone() {
        Some(tls) => {
            let acceptor = tokio_rustls::TlsAcceptor::from(tls);
            let stream = match acceptor.accept(stream).await {
                Ok(stream) => stream,
                Err(e) => return tracing::debug!("TLS handshake with {peer}: {e}"),
            };
            let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
            serve_http(host, stream, peer, pass, h2).await;
        }
        None => {
            // h2c or HTTP/1.1, told by the first bytes.
            let mut first = [0u8; 24];
            let h2 = match stream.peek(&mut first).await {
                Ok(n) if n > 0 => first[..n] == b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"[..n],
                _ => return tracing::debug!("{peer} sent no request"),
            };
            serve_http(host, stream, peer, pass, h2).await;
        }
    }
}

/// HTTP on one socket, each buffer bounded: a head of at most [`MAX_HEAD`], HTTP/2 windows of
/// [`H2_WINDOW`] and [`MAX_STREAMS`] streams.
async fn serve_http<S>(host: Arc<Host>, stream: S, peer: SocketAddr, pass: Arc<Pass>, h2: bool)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let io = TokioIo::new(stream);
    let handshake = host.options.handshake;
    let service = hyper::service::service_fn(move |req| {
        let (host, pass) = (host.clone(), pass.clone());
        async move { Ok::<_, Infallible>(handle(host, peer, pass, req).await) }
    });
    let result = if h2 {
        hyper::server::conn::http2::Builder::new(TokioExecutor::new())
            .timer(TokioTimer::new())
            .keep_alive_interval(KEEPALIVE)
            .max_header_list_size(MAX_HEAD as u32)
            .max_concurrent_streams(MAX_STREAMS)
            .initial_stream_window_size(H2_WINDOW)
            .initial_connection_window_size(H2_WINDOW)
            .serve_connection(io, service)
            .await
    } else {
        hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(handshake)
            .max_buf_size(MAX_HEAD)
            .serve_connection(io, service)
            .with_upgrades()
            .await
    };
    if let Err(e) = result {
        tracing::debug!("HTTP connection: {e}");
    }
}

/// One request: its `Host` first; `/acp`, the token first; the page's paths; nothing else.
async fn handle(
    host: Arc<Host>,
    peer: SocketAddr,
    pass: Arc<Pass>,
    req: Request<Incoming>,
) -> Response<Body> {
    let mut response = route(&host, peer, pass, req).await;
    if host.options.tls.is_some() {
        response.headers_mut().insert(
            header::STRICT_TRANSPORT_SECURITY,
            header::HeaderValue::from_static(HSTS),
        );
    }
    response
}

async fn route(
    host: &Arc<Host>,
    peer: SocketAddr,
    pass: Arc<Pass>,
    req: Request<Incoming>,
) -> Response<Body> {
    if !request_host(&req).is_some_and(|name| host.names.admits(name)) {
        return plain(
            StatusCode::MISDIRECTED_REQUEST,
            "this server does not answer to that Host (see --allow-host)",
        );
    }
    match req.uri().path() {
        "/acp" => {}
        path if page::serves(path) => return page::handle(req),
        _ => return plain(StatusCode::NOT_FOUND, "not found: ACP is served at /acp"),
    }
    let upgrade = ws::is_upgrade(&req);
    let protocols = req.headers().get_all(header::SEC_WEBSOCKET_PROTOCOL);
    let shown = token::presented(
        req.headers()
            .get(header::AUTHORIZATION)
            .map(|v| v.as_bytes()),
        protocols.iter().filter(|_| upgrade).map(|v| v.as_bytes()),
    );
    match shown {
        Some(given) if host.options.token.is(&given) => {
            if !pass.authenticate() {
                return plain(StatusCode::SERVICE_UNAVAILABLE, "too many sockets");
            }
        }
        Some(_) => {
            let http1 = req.version() < hyper::Version::HTTP_2;
            drop(req);
            host.throttle.wrong(peer.ip(), host.options.handshake).await;
            let mut response = unauthorized();
            if http1 {
                // One guess per socket.
                response.headers_mut().insert(
                    header::CONNECTION,
                    header::HeaderValue::from_static("close"),
                );
            }
            return response;
        }
        None => return unauthorized(),
    }
    if upgrade {
        return ws::accept(host.clone(), pass, req);
    }
    match *req.method() {
        hyper::Method::POST => http::post(host.clone(), req).await,
        hyper::Method::GET => http::get(host.clone(), req),
        hyper::Method::DELETE => http::delete(host, &req),
        _ => {
            let mut response = plain(StatusCode::METHOD_NOT_ALLOWED, "use POST, GET or DELETE");
            response.headers_mut().insert(
                header::ALLOW,
                header::HeaderValue::from_static("POST, GET, DELETE"),
            );
            response
        }
    }
}

/// 401, with `WWW-Authenticate: Bearer`.
fn unauthorized() -> Response<Body> {
    let mut response = plain(StatusCode::UNAUTHORIZED, "a bearer token is required");
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static("Bearer"),
    );
    response
}

/// The `Host` a request was sent to (HTTP/2: its `:authority`).
fn request_host<B>(req: &Request<B>) -> Option<&str> {
    req.headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| req.uri().authority().map(|a| a.as_str()))
}

/// The `Origin` a browser sent with `req` (`None`: none, or not text).
fn origin<B>(req: &Request<B>) -> Option<&str> {
    req.headers()
        .get(header::ORIGIN)
        .and_then(|v| v.to_str().ok())
}

/// True when `origin`'s host (and port) is the `Host` `req` was sent to: a page of this server.
fn own_origin<B>(req: &Request<B>, origin: &str) -> bool {
    let origin_host = origin.split_once("://").map_or(origin, |(_, rest)| rest);
    request_host(req).is_some_and(|own| own.eq_ignore_ascii_case(origin_host))
}

/// A new connection's `Acp-Connection-Id`: 128 random bits, hex.
fn connection_id() -> String {
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

/// Why a client's message is refused.
#[derive(Debug, PartialEq, Eq)]
enum Invalid {
    /// Not JSON (JSON-RPC -32700).
    Parse,
    /// JSON, but not one JSON-RPC object: a batch, a scalar (-32600).
    NotAnObject,
}

impl Invalid {
    /// The JSON-RPC error a client gets for it (`id` null: the message had none we can trust).
    fn error_json(&self) -> String {
        let (code, message) = match self {
            Invalid::Parse => (-32700, "Parse error: not JSON"),
            Invalid::NotAnObject => (
                -32600,
                "Invalid Request: one JSON-RPC object per message (no batches)",
            ),
        };
        serde_json::json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}})
            .to_string()
    }
}

/// A client's message as the core takes it: one line. The bytes pass as sent, except that line
/// breaks (whitespace between JSON tokens: a JSON string cannot hold one raw) become spaces, and
/// a newline ends the line.
fn message_line(body: &[u8]) -> Result<Bytes, Invalid> {
    let body = body.trim_ascii();
    if serde_json::from_slice::<serde::de::IgnoredAny>(body).is_err() {
        return Err(Invalid::Parse);
    }
    if body.first() != Some(&b'{') {
        return Err(Invalid::NotAnObject);
    }
    let mut line = Vec::with_capacity(body.len() + 1);
    line.extend(body.iter().map(|&b| match b {
        b'\n' | b'\r' => b' ',
        b => b,
    }));
    line.push(b'\n');
    Ok(Bytes::from(line))
}

/// A line the core sent, as one message (its line break off).
fn message_of(line: &Bytes) -> Bytes {
    let mut message = line.clone();
    while message.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
        message.truncate(message.len() - 1);
    }
    message
}

fn full(body: impl Into<Bytes>) -> Body {
    Full::new(body.into()).boxed()
}

/// A plain-text response.
fn plain(status: StatusCode, text: &str) -> Response<Body> {
    let mut response = Response::new(full(format!("{text}\n")));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// A JSON response.
fn json(status: StatusCode, body: impl Into<Bytes>) -> Response<Body> {
    let mut response = Response::new(full(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_becomes_one_line_with_its_bytes_kept() {
        let pretty = b" {\n  \"jsonrpc\": \"2.0\",\r\n  \"method\": \"x\", \"params\": {\"t\": \"a\\nb\"}\n}\n";
        let line = message_line(pretty).unwrap();
        assert_eq!(
            &line[..],
            b"{   \"jsonrpc\": \"2.0\",    \"method\": \"x\", \"params\": {\"t\": \"a\\nb\"} }\n"
        );
        let compact = br#"{"jsonrpc":"2.0","id":1,"method":"m"}"#;
        assert_eq!(&message_line(compact).unwrap()[..compact.len()], compact);
        assert_eq!(message_of(&line).last(), Some(&b'}'));
    }

    #[test]
    fn garbage_batches_and_scalars_are_refused() {
        assert_eq!(message_line(b"not json"), Err(Invalid::Parse));
        assert_eq!(message_line(b"{\"a\":"), Err(Invalid::Parse));
        assert_eq!(message_line(b""), Err(Invalid::Parse));
        assert_eq!(
            message_line(b"[{\"jsonrpc\":\"2.0\"}]"),
            Err(Invalid::NotAnObject)
        );
        assert_eq!(message_line(b"42"), Err(Invalid::NotAnObject));
        let error: serde_json::Value = serde_json::from_str(&Invalid::Parse.error_json()).unwrap();
        assert_eq!(error["error"]["code"], -32700);
        assert!(error["id"].is_null());
    }

    #[test]
    fn connection_ids_are_unique_hex() {
        let (a, b) = (connection_id(), connection_id());
        assert_ne!(a, b);
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
    }
}
