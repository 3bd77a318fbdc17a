//! Streamable HTTP: a connection is made by `POST`ing `initialize` (answered inline, with its
//! `Acp-Connection-Id`); later messages are `POST`ed (202); what the host sends goes out on
//! Server-Sent-Event streams the client opens with `GET` — the connection's stream, and one per
//! session (`Acp-Session-Id`); `DELETE` ends the connection.
//!
//! Routing, in one task per connection ([`Dispatcher`]): a message naming a session (its
//! `params.sessionId`, or the response to a request of the client that named one) goes on that
//! session's stream when the client has it open, else on the connection's stream. So a load's
//! answer follows its replay on one stream, and a client that opens no session streams
//! (Python's, until it sees a session) still gets all.
//!
//! Bounds: what a client has not read is paced by the hub's rule whether or not it opened a
//! stream — with no stream open (or [`SOFT_LIMIT`] set aside for streams it has not opened) the
//! dispatcher stops taking lines from the outbox, so they wait there, where more than
//! [`SOFT_LIMIT`] for [`STALL`](crate::shell::hub::STALL) drops the client; and a stream holds
//! at most [`SOFT_LIMIT`] of frames hyper has not taken ([`Stream`]).
//!
//! Leniencies (each SDK's server is stricter in a way the other SDK's client trips on): a session
//! stream is made by its `GET` even for a session the connection has not named yet (the
//! TypeScript client opens it before `session/load`); `Acp-Session-Id` may be missing on any
//! `POST` (the Python client omits it on load, resume and on its answers to requests); a second
//! `GET` of a stream replaces the first instead of a 409; `Content-Type` may be missing; the
//! `Accept` header of a `GET` is not checked.

mod handle;

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Limited, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response, StatusCode, header};
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio::time::Instant;

use super::headers::{CONNECTION_ID, SESSION_ID, connection_id};
use super::message::{message_line, message_of};
use super::options::{KEEPALIVE, SEND_TIMEOUT};
use super::responses::{Body, full, json, plain};
use super::state::Host;
use crate::shell::hub::{Outbox, SOFT_LIMIT};
use crate::wire::envelope::{self, Kind};
pub(super) use handle::Handle;
use handle::{Control, Stream};

/// Frames a stream's body holds before the dispatcher waits for the client to read (and at
/// most [`SOFT_LIMIT`] bytes of them).
const STREAM_DEPTH: usize = 64;

/// `POST /acp`.
pub(super) async fn post(host: Arc<Host>, req: Request<Incoming>) -> Response<Body> {
    if let Some(kind) = req.headers().get(header::CONTENT_TYPE) {
        let media = kind.as_bytes().split(|b| *b == b';').next().unwrap_or(b"");
        if !media.trim_ascii().eq_ignore_ascii_case(b"application/json") {
            return plain(StatusCode::UNSUPPORTED_MEDIA_TYPE, "send application/json");
        }
    }
    let existing = match header_str(&req, CONNECTION_ID) {
        Some(id) => match lookup(&host, id) {
            Some(handle) => Some(handle),
            None => return plain(StatusCode::NOT_FOUND, "unknown Acp-Connection-Id"),
        },
        None => None,
    };
    let session_header = header_str(&req, SESSION_ID).map(str::to_string);
    let limit = host.options.max_message;
    let body = match Limited::new(req.into_body(), limit).collect().await {
        Ok(body) => body.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            let text = format!("a message is at most {limit} bytes");
            return plain(StatusCode::PAYLOAD_TOO_LARGE, &text);
        }
        Err(_) => return plain(StatusCode::BAD_REQUEST, "the body could not be read"),
    };
    let line = match message_line(&body) {
        Ok(line) => line,
        Err(invalid) => return json(StatusCode::BAD_REQUEST, invalid.error_json()),
    };
    let peek = envelope::peek(&line);
    let initialize = matches!(&peek.kind, Kind::Request { method, .. } if method == "initialize");
    let Some(handle) = existing else {
        if !initialize {
            return plain(
                StatusCode::BAD_REQUEST,
                "missing Acp-Connection-Id (only initialize opens a connection)",
            );
        }
        return open(host, line).await;
    };
    if initialize {
        return plain(
            StatusCode::BAD_REQUEST,
            "initialize is not allowed on an existing connection",
        );
    }
    let session = peek.session.as_deref();
    if let (Some(header), Some(named)) = (session_header.as_deref(), session)
        && header != named
    {
        return plain(
            StatusCode::BAD_REQUEST,
            "Acp-Session-Id does not match params.sessionId",
        );
    }
    if let Kind::Request { id, .. } = &peek.kind
        && let Some(s) = session.or(session_header.as_deref())
    {
        let _ = handle
            .control
            .send(Control::Request(id.to_json(), s.to_string()));
    }
    match handle.connection.send(line).await {
        true => Response::builder()
            .status(StatusCode::ACCEPTED)
            .body(full(Bytes::new()))
            .expect("a static response"),
        false => plain(StatusCode::SERVICE_UNAVAILABLE, "the host is stopping"),
    }
}

/// A connection opened by its `initialize`: answered inline once the agent's answer comes.
async fn open(host: Arc<Host>, line: Bytes) -> Response<Body> {
    let Kind::Request { id, .. } = envelope::peek(&line).kind else {
        unreachable!("only an initialize request opens a connection")
    };
    if !host.admit() {
        return plain(StatusCode::SERVICE_UNAVAILABLE, "too many connections");
    }
    let Some((connection, outbox)) = host.link.open().await else {
        host.release();
        return plain(StatusCode::SERVICE_UNAVAILABLE, "the host is stopping");
    };
    let name = connection_id();
    let connection = Arc::new(connection);
    let (control, control_rx) = mpsc::unbounded_channel();
    let (answer_tx, answer_rx) = oneshot::channel();
    let handle = Handle {
        connection: connection.clone(),
        control,
    };
    host.http.lock().insert(name.clone(), handle.clone());
    let number = connection.id().0;
    tracing::info!("HTTP connection #{number} opened");
    tracing::debug!("HTTP connection #{number} is {name}");
    let dispatcher = Dispatcher {
        outbox,
        control: control_rx,
        initialize: Some((id.to_json(), answer_tx)),
        connection_stream: None,
        session_streams: HashMap::new(),
        answers: HashMap::new(),
        waiting: VecDeque::new(),
        waiting_bytes: 0,
    };
    let idle = host.options.idle_timeout;
    let table = host.clone();
    let closing = name.clone();
    tokio::spawn(async move {
        dispatcher.run(idle).await;
        table.http.lock().remove(&closing);
        table.release();
        tracing::info!("HTTP connection #{number} ended");
    });
    if !connection.send(line).await {
        let _ = handle.control.send(Control::End);
        return plain(StatusCode::SERVICE_UNAVAILABLE, "the host is stopping");
    }
    drop(connection);
    match tokio::time::timeout(host.options.init_timeout, answer_rx).await {
        Ok(Ok(answer)) => {
            let mut response = json(StatusCode::OK, message_of(&answer));
            response.headers_mut().insert(
                CONNECTION_ID,
                header::HeaderValue::from_str(&name).expect("hex is a header value"),
            );
            response
        }
        _ => {
            let _ = handle.control.send(Control::End);
            plain(
                StatusCode::GATEWAY_TIMEOUT,
                "the agent did not answer initialize in time",
            )
        }
    }
}

/// `GET /acp`: a connection's or a session's event stream.
pub(super) fn get(host: Arc<Host>, req: Request<Incoming>) -> Response<Body> {
    let Some(id) = header_str(&req, CONNECTION_ID) else {
        return plain(StatusCode::BAD_REQUEST, "missing Acp-Connection-Id");
    };
    let Some(handle) = lookup(&host, id) else {
        return plain(StatusCode::NOT_FOUND, "unknown Acp-Connection-Id");
    };
    let session = header_str(&req, SESSION_ID).map(str::to_string);
    let (tx, rx) = mpsc::channel(STREAM_DEPTH);
    let stream = Stream {
        frames: tx,
        bytes: Arc::new(Semaphore::new(SOFT_LIMIT)),
    };
    if handle
        .control
        .send(Control::Stream(session, stream))
        .is_err()
    {
        return plain(StatusCode::NOT_FOUND, "the connection has ended");
    }
    let frames = futures_util::stream::unfold(rx, |mut rx| async move {
        // Its permit goes back as hyper takes the frame.
        let (frame, _permit) = rx.recv().await?;
        Some((Ok(Frame::data(frame)), rx))
    });
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        // nginx and its kind: do not buffer the stream.
        .header("x-accel-buffering", "no")
        .body(BodyExt::boxed(StreamBody::new(frames)))
        .expect("a static response")
}

/// `DELETE /acp`: the connection ends (its sessions live on).
pub(super) fn delete(host: &Host, req: &Request<Incoming>) -> Response<Body> {
    let Some(id) = header_str(req, CONNECTION_ID) else {
        return plain(StatusCode::BAD_REQUEST, "missing Acp-Connection-Id");
    };
    let Some(handle) = lookup(host, id) else {
        return plain(StatusCode::NOT_FOUND, "unknown Acp-Connection-Id");
    };
    let _ = handle.control.send(Control::End);
    Response::builder()
        .status(StatusCode::ACCEPTED)
        .body(full(Bytes::new()))
        .expect("a static response")
}

/// Whether `req` names a live connection by its `Acp-Connection-Id` (128 random bits only a
/// client with the token was given).
pub(super) fn names_live_connection(host: &Host, req: &Request<Incoming>) -> bool {
    header_str(req, CONNECTION_ID).is_some_and(|id| lookup(host, id).is_some())
}

fn header_str<'a>(req: &'a Request<Incoming>, name: &str) -> Option<&'a str> {
    req.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
}

fn lookup(host: &Host, id: &str) -> Option<Handle> {
    host.http.lock().get(id).cloned()
}

/// One HTTP connection's outgoing side: the host's lines onto the client's streams.
struct Dispatcher {
    outbox: Outbox,
    control: mpsc::UnboundedReceiver<Control>,
    /// The `initialize` request's id and where its answer goes (the `POST` waits for it).
    initialize: Option<(String, oneshot::Sender<Bytes>)>,
    connection_stream: Option<Stream>,
    session_streams: HashMap<String, Stream>,
    /// The client's requests that named a session: their answers go on its stream.
    answers: HashMap<String, String>,
    /// Messages taken from the outbox before a stream for them was open, and their bytes
    /// (past [`SOFT_LIMIT`], no more are taken).
    waiting: VecDeque<Bytes>,
    waiting_bytes: usize,
}

/// Why a dispatcher stops.
struct Ended;

impl Dispatcher {
    async fn run(mut self, idle: std::time::Duration) {
        let mut keepalive = tokio::time::interval(KEEPALIVE);
        keepalive.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // The idle clock runs while no stream is open, from the answer to `initialize` on: before
        // it the client has no connection id to open one with (`init_timeout` bounds that wait).
        let mut unread_since = None;
        loop {
            let deadline = unread_since.map(|since| since + idle);
            let reading = self.reading();
            let ended = self.outbox.ended();
            let step = tokio::select! {
                biased;
                control = self.control.recv() => match control {
                    Some(control) => self.control(control).await,
                    None => Err(Ended),
                },
                line = self.outbox.recv(), if reading => match line {
                    Some(line) => self.route(line).await,
                    None => Err(Ended),
                },
                // Not reading: the hub dropped it for what waits in its outbox.
                () = ended, if !reading => Err(Ended),
                _ = keepalive.tick() => self.keep_alive(),
                // Both SDKs' clients take the end of the connection's stream for the end of the
                // connection (they never open it again): so does the host, at once, so the
                // requests it was asked are asked again of the session's other clients.
                _ = closed(&self.connection_stream), if self.connection_stream.is_some() => {
                    tracing::info!("an HTTP client closed its connection stream: ending the connection");
                    Err(Ended)
                }
                _ = tokio::time::sleep_until(deadline.unwrap_or_else(far)), if deadline.is_some() => {
                    tracing::info!("an HTTP connection had no stream open for {} s: ending it", idle.as_secs());
                    Err(Ended)
                }
            };
            if step.is_err() {
                return;
            }
            let unread = self.initialize.is_none()
                && self.connection_stream.is_none()
                && self.session_streams.is_empty();
            unread_since = match (unread, unread_since) {
                (false, _) => None,
                (true, None) => Some(Instant::now()),
                (true, since) => since,
            };
        }
    }

    /// Whether to take lines from the outbox: for the `initialize` answer, and while a stream
    /// is open and little waits for another; else they wait in the outbox, paced by the hub.
    fn reading(&self) -> bool {
        let open = self.connection_stream.is_some() || !self.session_streams.is_empty();
        self.initialize.is_some() || (open && self.waiting_bytes <= SOFT_LIMIT)
    }

    async fn control(&mut self, control: Control) -> Result<(), Ended> {
        match control {
            Control::Stream(None, tx) => {
                // A second GET replaces the first (its stream ends).
                self.connection_stream = Some(tx);
                let waiting: Vec<Bytes> = self.waiting.drain(..).collect();
                self.waiting_bytes = 0;
                for line in waiting {
                    self.route(line).await?;
                }
                Ok(())
            }
            Control::Stream(Some(session), tx) => {
                self.session_streams.insert(session, tx);
                Ok(())
            }
            Control::Request(id, session) => {
                self.answers.insert(id, session);
                Ok(())
            }
            Control::End => Err(Ended),
        }
    }

    /// Send a line where it goes: see the module's text.
    async fn route(&mut self, line: Bytes) -> Result<(), Ended> {
        let peek = envelope::peek(&line);
        let session = match &peek.kind {
            Kind::Response { id, .. } => {
                let id = id.to_json();
                if let Some((init, _)) = &self.initialize
                    && *init == id
                {
                    let (_, answer) = self.initialize.take().expect("checked");
                    let _ = answer.send(line);
                    return Ok(());
                }
                self.answers.remove(&id)
            }
            _ => peek.session.as_deref().map(str::to_string),
        };
        let frame = sse_frame(&line);
        if let Some(s) = session
            && let Some(stream) = self.session_streams.get(&s)
        {
            match send(stream, frame.clone()).await {
                Sent::Yes => return Ok(()),
                Sent::Closed => {
                    self.session_streams.remove(&s);
                }
                Sent::TooSlow => return Err(Ended),
            }
        }
        if let Some(stream) = &self.connection_stream {
            match send(stream, frame).await {
                Sent::Yes => return Ok(()),
                Sent::Closed => self.connection_stream = None,
                Sent::TooSlow => return Err(Ended),
            }
        }
        // No stream open for it: it waits for one (see `reading`).
        self.waiting_bytes += line.len();
        self.waiting.push_back(line);
        Ok(())
    }

    fn keep_alive(&mut self) -> Result<(), Ended> {
        let comment = Bytes::from_static(b":\n\n");
        self.session_streams.retain(|_, s| {
            !matches!(
                s.frames.try_send((comment.clone(), None)),
                Err(mpsc::error::TrySendError::Closed(_))
            )
        });
        if let Some(stream) = &self.connection_stream
            && stream
                .frames
                .try_send((comment, None))
                .is_err_and(|e| matches!(e, mpsc::error::TrySendError::Closed(_)))
        {
            self.connection_stream = None;
        }
        Ok(())
    }
}

enum Sent {
    Yes,
    /// The client closed the stream.
    Closed,
    /// The client did not read within [`SEND_TIMEOUT`].
    TooSlow,
}

async fn send(stream: &Stream, frame: Bytes) -> Sent {
    // A frame larger than the whole allowance takes all of it.
    let share = u32::try_from(frame.len().min(SOFT_LIMIT)).unwrap_or(u32::MAX);
    let send = async {
        let permit = stream.bytes.clone().acquire_many_owned(share).await.ok();
        stream.frames.send((frame, permit)).await
    };
    match tokio::time::timeout(SEND_TIMEOUT, send).await {
        Ok(Ok(())) => Sent::Yes,
        Ok(Err(_)) => Sent::Closed,
        Err(_) => {
            tracing::warn!(
                "an HTTP client did not read its stream for {} s: ending its connection",
                SEND_TIMEOUT.as_secs()
            );
            Sent::TooSlow
        }
    }
}

/// One Server-Sent Event carrying one message (a JSON line holds no line break).
fn sse_frame(line: &Bytes) -> Bytes {
    let message = message_of(line);
    let mut frame = Vec::with_capacity(message.len() + 8);
    frame.extend_from_slice(b"data: ");
    frame.extend_from_slice(&message);
    frame.extend_from_slice(b"\n\n");
    Bytes::from(frame)
}

/// Resolves when the client closed `stream` (its body was dropped).
async fn closed(stream: &Option<Stream>) {
    match stream {
        Some(stream) => stream.frames.closed().await,
        None => std::future::pending().await,
    }
}

fn far() -> Instant {
    Instant::now() + std::time::Duration::from_secs(86_400)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_is_the_message_on_one_data_line() {
        let line = Bytes::from_static(b"{\"jsonrpc\":\"2.0\",\"method\":\"m\"}\n");
        assert_eq!(
            &sse_frame(&line)[..],
            b"data: {\"jsonrpc\":\"2.0\",\"method\":\"m\"}\n\n"
        );
    }
}
