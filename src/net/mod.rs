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
//! anything is allocated; guessing it is bounded ([`throttle`]: a new connection's answer, right
//! or wrong, comes after its source's delay). A share link (`/share/<secret>`, [`share`]) needs
//! no token: its secret shows one session, and guessing secrets is slowed per source only.
//! Limits: a socket that has not shown the token lives at most [`Options::handshake`], sends at
//! most its [`budget`] (bytes, HTTP/2 frames), and the oldest such is shed past its share
//! ([`sockets`]); request headers at most [`MAX_HEAD`]; a
//! message of at most [`Options::max_message`] bytes (413), at most
//! [`Options::max_connections`] ACP connections (503); a client that does not take what it is
//! sent within [`SEND_TIMEOUT`] (or lets its queue pass the hub's limits) is dropped.

pub mod bridge;
mod budget;
mod headers;
pub mod hosts;
mod http;
mod message;
mod options;
mod page;
mod responses;
mod share;
mod sockets;
mod state;
pub(crate) mod summary;
pub mod team;
mod throttle;
pub mod tls;
pub mod token;
mod ws;

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode, header};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;

use crate::shell::hub::HubLink;
use budget::Budget;
use headers::request_host;
use hosts::Hosts;
pub use options::{KEEPALIVE, Options, SEND_TIMEOUT};
use responses::{Body, plain};
use sockets::{Pass, Sockets};
use state::Host;
use summary::Summary;
use throttle::Throttle;

/// Largest request head (HTTP/1.1 headers; an HTTP/2 header list), in bytes.
pub const MAX_HEAD: usize = 32 * 1024;

/// HTTP/2 streams open at once on one socket.
const MAX_STREAMS: u32 = 32;

/// HTTP/2 flow-control windows (bytes a client may send ahead), per stream and per socket: what
/// a socket that has not shown the token can make the server hold.
const H2_WINDOW: u32 = 64 * 1024;

/// `Strict-Transport-Security` under TLS (no `includeSubDomains`: the name may hold others).
const HSTS: &str = "max-age=31536000";

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
        shares: share::Links::new(options.share_recheck),
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

/// One socket: TLS if configured, then HTTP/1.1 or HTTP/2 until it closes; what it sends before
/// it shows the token counted against its [`budget`] (TLS records, and the bytes and HTTP/2
/// frames inside).
async fn socket(host: Arc<Host>, stream: tokio::net::TcpStream, peer: SocketAddr, pass: Arc<Pass>) {
    match host.options.tls.clone() {
        Some(tls) => {
            let acceptor = tokio_rustls::TlsAcceptor::from(tls);
            let counted = Budget::new(stream, pass.clone(), false);
            let stream = match acceptor.accept(counted).await {
                Ok(stream) => stream,
                Err(e) => return tracing::debug!("TLS handshake with {peer}: {e}"),
            };
            let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
            let counted = Budget::new(stream, pass.clone(), h2);
            serve_http(host, counted, peer, pass, h2).await;
        }
        None => {
            // h2c or HTTP/1.1, told by the first bytes.
            let mut first = [0u8; 24];
            let h2 = match stream.peek(&mut first).await {
                Ok(n) if n > 0 => first[..n] == b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"[..n],
                _ => return tracing::debug!("{peer} sent no request"),
            };
            let counted = Budget::new(stream, pass.clone(), h2);
            serve_http(host, counted, peer, pass, h2).await;
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

/// One request: its `Host` first; `/acp` and the team view's paths ([`team`]), the token
/// first; the page's paths; share links ([`share`]), their secret first; nothing else.
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
    let team = match req.uri().path() {
        "/acp" => false,
        path if page::serves(path) => return page::handle(req, host.options.team.is_some()),
        // A share link's secret is its own authorization, for its one session.
        path if share::serves(path) => {
            let asker = share::Asker {
                links: &host.shares,
                reads: host.options.team.as_ref(),
                ip: peer.ip(),
                within: host.options.handshake,
                pass: &pass,
            };
            return share::handle(asker, &req).await;
        }
        path if team::serves(path) => true,
        _ => return plain(StatusCode::NOT_FOUND, "not found: ACP is served at /acp"),
    };
    let upgrade = !team && ws::is_upgrade(&req);
    let protocols = req.headers().get_all(header::SEC_WEBSOCKET_PROTOCOL);
    let shown = token::presented(
        req.headers()
            .get(header::AUTHORIZATION)
            .map(|v| v.as_bytes()),
        protocols.iter().filter(|_| upgrade).map(|v| v.as_bytes()),
    );
    let Some(given) = shown else {
        return unauthorized();
    };
    let right = host.options.token.is(&given);
    let within = host.options.handshake;
    let right = if http::names_live_connection(host, &req) {
        if !right {
            host.throttle.wrong(peer.ip(), within).await;
        }
        right
    } else {
        // Right or wrong, answered after the same delay: the time tells a guesser nothing.
        host.throttle.decide(peer.ip(), within, right).await
    };
    if !right {
        let mut response = unauthorized();
        if req.version() < hyper::Version::HTTP_2 {
            // One guess per socket.
            response.headers_mut().insert(
                header::CONNECTION,
                header::HeaderValue::from_static("close"),
            );
        }
        return response;
    }
    if !pass.authenticate() {
        return plain(StatusCode::SERVICE_UNAVAILABLE, "too many sockets");
    }
    if team {
        return team::handle(host.options.team.as_ref(), &req).await;
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
