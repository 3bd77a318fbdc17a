//! WebSocket on the same URL: a socket is a connection, one JSON-RPC message per text frame both
//! ways (its `Acp-Connection-Id` is a header of the 101). Binary frames are refused (close 1003,
//! as the Remote drafts require; the SDKs ignore them); a text frame that is not one JSON-RPC
//! object gets a JSON-RPC error frame and harms nothing else. The host pings every
//! [`KEEPALIVE`]; a socket that sends nothing (pongs included) for the idle timeout is
//! closed (1001). `Origin`, when a browser sends it, must be the server's own host or allowed.
//! A client that offers the [`PROTOCOL`] subprotocol (the page, which shows its token as another
//! one) gets it back; the one carrying the token is never echoed.

use std::sync::Arc;

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode, header};
use hyper_util::rt::TokioIo;
use tokio::time::Instant;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};

use super::headers::{CONNECTION_ID, connection_id, origin, own_origin};
use super::message::{message_line, message_of};
use super::options::{KEEPALIVE, SEND_TIMEOUT};
use super::responses::{Body, full, plain};
use super::sockets::Pass;
use super::state::Host;
use super::token::PROTOCOL;
use crate::shell::hub::{Connection, Outbox};

/// True for a WebSocket upgrade request.
pub(super) fn is_upgrade(req: &Request<Incoming>) -> bool {
    req.headers()
        .get(header::UPGRADE)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"websocket"))
}

/// Answer the upgrade (101) and run the socket on its own task (which keeps its `pass`).
pub(super) fn accept(host: Arc<Host>, pass: Arc<Pass>, req: Request<Incoming>) -> Response<Body> {
    let headers = req.headers();
    let Some(key) = headers.get(header::SEC_WEBSOCKET_KEY) else {
        return plain(StatusCode::BAD_REQUEST, "missing Sec-WebSocket-Key");
    };
    if headers
        .get(header::SEC_WEBSOCKET_VERSION)
        .is_none_or(|v| v.as_bytes() != b"13")
    {
        return plain(StatusCode::BAD_REQUEST, "WebSocket version 13 only");
    }
    if !origin_allowed(&host, &req) {
        return plain(
            StatusCode::FORBIDDEN,
            "this Origin may not open a WebSocket here",
        );
    }
    if !host.admit() {
        return plain(StatusCode::SERVICE_UNAVAILABLE, "too many connections");
    }
    let accept = derive_accept_key(key.as_bytes());
    let offered = headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .flat_map(|v| v.as_bytes().split(|b| *b == b','))
        .any(|p| p.trim_ascii() == PROTOCOL.as_bytes());
    let name = connection_id();
    let mut config = WebSocketConfig::default();
    config.max_message_size = Some(host.options.max_message);
    config.max_frame_size = Some(host.options.max_message);
    // An idle socket keeps this much (the default, 128 KiB, is zeroed on its first read).
    config.read_buffer_size = 8 * 1024;
    let (task_host, task_name) = (host.clone(), name.clone());
    tokio::spawn(async move {
        let upgraded = hyper::upgrade::on(req).await;
        let link = task_host.link.open().await;
        if let (Ok(upgraded), Some((connection, outbox))) = (upgraded, link) {
            let number = connection.id().0;
            tracing::info!("WebSocket connection #{number} opened");
            tracing::debug!("WebSocket connection #{number} is {task_name}");
            let socket = WebSocketStream::from_raw_socket(
                TokioIo::new(upgraded),
                Role::Server,
                Some(config),
            )
            .await;
            run(socket, connection, outbox, task_host.options.idle_timeout).await;
            tracing::info!("WebSocket connection #{number} ended");
        }
        task_host.release();
        drop(pass);
    });
    let mut response = Response::builder()
        .status(StatusCode::SWITCHING_PROTOCOLS)
        .header(header::UPGRADE, "websocket")
        .header(header::CONNECTION, "Upgrade")
        .header(header::SEC_WEBSOCKET_ACCEPT, accept)
        .header(CONNECTION_ID, name);
    if offered {
        response = response.header(header::SEC_WEBSOCKET_PROTOCOL, PROTOCOL);
    }
    response
        .body(full(Bytes::new()))
        .expect("a static response")
}

/// No `Origin` (not a browser), or the server's own (scheme, host and port: the `Host` the
/// request was sent to), or one of `--allow-origin`.
pub(super) fn origin_allowed(host: &Host, req: &Request<Incoming>) -> bool {
    let Some(origin) = origin(req) else {
        return true;
    };
    host.options.allowed_origins.iter().any(|o| o == origin)
        || own_origin(req, origin, host.options.tls.is_some())
}

/// Messages written with one flush, at most.
const BATCH: usize = 256;

async fn run<S>(
    socket: WebSocketStream<S>,
    connection: Connection,
    mut outbox: Outbox,
    idle: std::time::Duration,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let (mut sink, mut frames) = socket.split();
    let mut ping = tokio::time::interval(KEEPALIVE);
    ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut heard = Instant::now();
    let close = |code: CloseCode, reason: &'static str| {
        Message::Close(Some(CloseFrame {
            code,
            reason: reason.into(),
        }))
    };
    loop {
        tokio::select! {
            frame = frames.next() => {
                heard = Instant::now();
                match frame {
                    Some(Ok(Message::Text(text))) => match message_line(text.as_bytes()) {
                        Ok(line) => {
                            if !connection.send(line).await {
                                let _ = sink.send(close(CloseCode::Away, "the host is stopping")).await;
                                return;
                            }
                        }
                        Err(invalid) => {
                            if sink.send(Message::text(invalid.error_json())).await.is_err() {
                                return;
                            }
                        }
                    },
                    Some(Ok(Message::Binary(_))) => {
                        let _ = sink.send(close(CloseCode::Unsupported, "ACP messages are text frames")).await;
                        return;
                    }
                    Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => {}
                    Some(Ok(Message::Close(_))) | Some(Err(_)) | None => return,
                }
            }
            line = outbox.recv() => {
                let Some(line) = line else {
                    let _ = sink.send(close(CloseCode::Policy, "the client did not read what it was sent")).await;
                    return;
                };
                // What is queued goes out in one write: one frame per message, one flush.
                let batch: Vec<Bytes> = std::iter::once(line)
                    .chain(std::iter::from_fn(|| outbox.ready()).take(BATCH))
                    .collect();
                let send = async {
                    for line in batch {
                        let text = String::from_utf8_lossy(&message_of(&line)).into_owned();
                        sink.feed(Message::text(text)).await?;
                    }
                    sink.flush().await
                };
                match tokio::time::timeout(SEND_TIMEOUT, send).await {
                    Ok(Ok(())) => {}
                    Ok(Err(_)) => return,
                    Err(_) => {
                        tracing::warn!("a WebSocket client did not read for {} s: closing it", SEND_TIMEOUT.as_secs());
                        return;
                    }
                }
            }
            _ = ping.tick() => {
                if heard.elapsed() > idle {
                    let _ = sink.send(close(CloseCode::Away, "idle")).await;
                    return;
                }
                if sink.send(Message::Ping(Bytes::new())).await.is_err() {
                    return;
                }
            }
        }
    }
}
