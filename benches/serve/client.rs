//! An ACP client over each transport the bench measures: pipes (a direct agent or the stdio
//! proxy), WebSocket and Streamable HTTP (over HTTP/1.1: `POST`s on one keep-alive socket, the
//! connection's Server-Sent-Event stream on another; over HTTP/2 by prior knowledge: both on one
//! socket, the stream paced by serve's 64 KiB flow-control windows). All are async, on the caller's Tokio runtime, so every
//! path pays the same client-side scheduling.

use std::time::Duration;

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::{http1, http2};
use hyper::{Request, StatusCode, header};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::{ChildStdin, ChildStdout};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::traffic::INIT_REQUEST;

/// How long a client waits for any one message before the bench gives up on the path.
const PATIENCE: Duration = Duration::from_secs(60);

/// The request that creates the client's session (every agent role answers it).
pub const SESSION_NEW: &str = r#"{"jsonrpc":"2.0","id":"new","method":"session/new","params":{"cwd":"/tmp/bench","mcpServers":[]}}"#;

pub struct Client {
    inner: Inner,
    /// The session `session/new` made.
    pub session: String,
}

enum Inner {
    Pipe {
        stdin: ChildStdin,
        stdout: BufReader<ChildStdout>,
    },
    Ws(Box<WebSocketStream<TcpStream>>),
    Http(Box<Http>),
}

/// A Streamable HTTP connection: over HTTP/1.1, `POST`s on one socket, the connection's event
/// stream on another; over HTTP/2, both on one.
struct Http {
    post: Sender,
    events: Incoming,
    /// Event-stream bytes not parsed yet (from `start`).
    buf: Vec<u8>,
    start: usize,
    authority: String,
    bearer: String,
    connection: String,
}

/// Where requests go: an HTTP/1.1 socket, or an HTTP/2 connection.
enum Sender {
    H1(http1::SendRequest<Full<Bytes>>),
    H2(http2::SendRequest<Full<Bytes>>),
}

impl Sender {
    /// Send `request` once the connection is ready for it.
    async fn send(
        &mut self,
        request: Request<Full<Bytes>>,
    ) -> hyper::Result<hyper::Response<Incoming>> {
        match self {
            Sender::H1(s) => {
                s.ready().await?;
                s.send_request(request).await
            }
            Sender::H2(s) => {
                s.ready().await?;
                s.send_request(request).await
            }
        }
    }
}

/// Where a serve process listens, and its token.
#[derive(Clone)]
pub struct Endpoint {
    pub authority: String,
    pub token: String,
}

impl Client {
    /// Over pipes to a process (a direct agent, or the stdio proxy): initialized, a session made.
    pub async fn pipe(stdin: ChildStdin, stdout: ChildStdout) -> Client {
        let mut client = Client {
            inner: Inner::Pipe {
                stdin,
                stdout: BufReader::with_capacity(1 << 16, stdout),
            },
            session: String::new(),
        };
        client.send(INIT_REQUEST.trim_end()).await;
        client.response("0").await;
        client.new_session().await;
        client
    }

    /// A WebSocket connection to `serve`: initialized, a session made.
    pub async fn ws(at: &Endpoint) -> Client {
        let mut client = Client::ws_bare(at).await;
        client.new_session().await;
        client
    }

    /// A WebSocket connection to `serve`, initialized, no session yet (see [`Client::join`]).
    pub async fn ws_bare(at: &Endpoint) -> Client {
        let socket = connect(&at.authority).await;
        let mut request = format!("ws://{}/acp", at.authority)
            .into_client_request()
            .expect("a WebSocket request");
        request.headers_mut().insert(
            header::AUTHORIZATION,
            format!("Bearer {}", at.token)
                .parse()
                .expect("a header value"),
        );
        let (ws, response) = tokio_tungstenite::client_async(request, socket)
            .await
            .expect("the WebSocket handshake");
        assert_eq!(response.status(), StatusCode::SWITCHING_PROTOCOLS);
        let mut client = Client {
            inner: Inner::Ws(Box::new(ws)),
            session: String::new(),
        };
        client.send(INIT_REQUEST.trim_end()).await;
        client.response("0").await;
        client
    }

    /// A Streamable HTTP connection to `serve` (`initialize` answered inline, then the
    /// connection's event stream opened): initialized, a session made.
    pub async fn http(at: &Endpoint) -> Client {
        let mut client = Client::http_bare(at).await;
        client.new_session().await;
        client
    }

    /// A Streamable HTTP connection to `serve` over HTTP/2 by prior knowledge (h2c): `POST`s and
    /// the event stream on one socket. Initialized, a session made.
    pub async fn http2(at: &Endpoint) -> Client {
        let mut client = Client::http_over(at, true).await;
        client.new_session().await;
        client
    }

    /// A Streamable HTTP connection to `serve`, initialized, no session yet (see
    /// [`Client::join`]).
    pub async fn http_bare(at: &Endpoint) -> Client {
        Client::http_over(at, false).await
    }

    /// A Streamable HTTP connection over HTTP/1.1, or HTTP/2 (`h2`), initialized.
    async fn http_over(at: &Endpoint, h2: bool) -> Client {
        let bearer = format!("Bearer {}", at.token);
        let mut post = handshake(&at.authority, h2).await;
        let request = Request::post("/acp")
            .header(header::HOST, &at.authority)
            .header(header::AUTHORIZATION, &bearer)
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT, "application/json, text/event-stream")
            .body(Full::new(Bytes::from_static(
                INIT_REQUEST.trim_end().as_bytes(),
            )))
            .expect("a request");
        let response = post.send(request).await.expect("POST initialize");
        assert_eq!(response.status(), StatusCode::OK, "POST initialize");
        let connection = response
            .headers()
            .get("acp-connection-id")
            .and_then(|v| v.to_str().ok())
            .expect("an Acp-Connection-Id")
            .to_string();
        let body = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        assert!(
            memchr::memmem::find(&body, br#""result""#).is_some(),
            "initialize: {}",
            String::from_utf8_lossy(&body)
        );
        let mut get = match &post {
            Sender::H2(h2) => Sender::H2(h2.clone()),
            Sender::H1(_) => handshake(&at.authority, false).await,
        };
        let request = Request::get("/acp")
            .header(header::HOST, &at.authority)
            .header(header::AUTHORIZATION, &bearer)
            .header(header::ACCEPT, "text/event-stream")
            .header("acp-connection-id", &connection)
            .body(Full::new(Bytes::new()))
            .expect("a request");
        let response = get.send(request).await.expect("GET the stream");
        assert_eq!(response.status(), StatusCode::OK, "GET the stream");
        // The GET's socket lives as long as its body is read; `get` itself may go.
        Client {
            inner: Inner::Http(Box::new(Http {
                post,
                events: response.into_body(),
                buf: Vec::with_capacity(1 << 16),
                start: 0,
                authority: at.authority.clone(),
                bearer,
                connection,
            })),
            session: String::new(),
        }
    }

    async fn new_session(&mut self) {
        self.send(SESSION_NEW).await;
        let answer = self.response(r#""new""#).await;
        let msg: serde_json::Value = serde_json::from_slice(&answer).expect("JSON");
        self.session = msg["result"]["sessionId"]
            .as_str()
            .expect("a sessionId")
            .to_string();
    }

    /// Join `session`, live on serve's agent (another connection made it), by `session/load`:
    /// the host answers from the journal (the history, then the answer); from then on this
    /// connection gets every live line of the session too.
    pub async fn join(&mut self, session: &str) {
        let load = serde_json::json!({
            "jsonrpc": "2.0",
            "id": "load",
            "method": "session/load",
            "params": {"sessionId": session, "cwd": "/tmp/bench", "mcpServers": []},
        });
        self.send(&load.to_string()).await;
        self.response(r#""load""#).await;
        self.session = session.to_string();
    }

    /// Send one message (JSON text, no line break).
    pub async fn send(&mut self, msg: &str) {
        match &mut self.inner {
            Inner::Pipe { stdin, .. } => {
                let mut line = Vec::with_capacity(msg.len() + 1);
                line.extend_from_slice(msg.as_bytes());
                line.push(b'\n');
                stdin.write_all(&line).await.expect("write to the pipe");
            }
            Inner::Ws(ws) => ws.send(Message::text(msg)).await.expect("WebSocket send"),
            Inner::Http(h) => {
                let request = Request::post("/acp")
                    .header(header::HOST, &h.authority)
                    .header(header::AUTHORIZATION, &h.bearer)
                    .header(header::CONTENT_TYPE, "application/json")
                    .header("acp-connection-id", &h.connection)
                    .body(Full::new(Bytes::copy_from_slice(msg.as_bytes())))
                    .expect("a request");
                let response = h.post.send(request).await.expect("POST");
                let status = response.status();
                let body = response.into_body().collect().await.expect("body");
                assert_eq!(
                    status,
                    StatusCode::ACCEPTED,
                    "POST: {}",
                    String::from_utf8_lossy(&body.to_bytes())
                );
            }
        }
    }

    /// The next message (JSON text).
    pub async fn recv(&mut self) -> Bytes {
        tokio::time::timeout(PATIENCE, self.next())
            .await
            .expect("no message for a minute")
    }

    async fn next(&mut self) -> Bytes {
        match &mut self.inner {
            Inner::Pipe { stdout, .. } => {
                let mut line = Vec::with_capacity(256);
                let n = stdout.read_until(b'\n', &mut line).await.expect("read");
                assert!(n > 0, "EOF from the pipe");
                line.pop();
                Bytes::from(line)
            }
            Inner::Ws(ws) => loop {
                match ws.next().await {
                    Some(Ok(Message::Text(text))) => return Bytes::from(text),
                    Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => {}
                    other => panic!("WebSocket: {other:?}"),
                }
            },
            Inner::Http(h) => loop {
                if let Some(event) = h.event() {
                    return event;
                }
                h.fill().await;
            },
        }
    }

    /// Messages until the response to request `id` (JSON text); its bytes.
    pub async fn response(&mut self, id: &str) -> Bytes {
        let want: serde_json::Value = serde_json::from_str(id).expect("an id in JSON");
        loop {
            let msg = self.recv().await;
            if memchr::memmem::find(&msg, b"\"result\"").is_none()
                && memchr::memmem::find(&msg, b"\"error\"").is_none()
            {
                continue;
            }
            let value: serde_json::Value = serde_json::from_slice(&msg).expect("JSON");
            if value.get("id") == Some(&want) {
                assert!(
                    value.get("result").is_some(),
                    "request {id} failed: {value}"
                );
                return msg;
            }
        }
    }

    /// Read `n` messages as fast as they come (counted, not parsed); the last one's bytes.
    pub async fn count(&mut self, n: usize) -> Bytes {
        tokio::time::timeout(PATIENCE * 5, self.count_inner(n))
            .await
            .expect("the flood stalled")
    }

    async fn count_inner(&mut self, n: usize) -> Bytes {
        match &mut self.inner {
            Inner::Pipe { stdout, .. } => {
                // Whole reads, their line breaks counted; the tail kept for the last line.
                let mut seen = 0usize;
                let mut tail: Vec<u8> = Vec::new();
                while seen < n {
                    let buf = stdout.fill_buf().await.expect("read");
                    assert!(!buf.is_empty(), "EOF after {seen} of {n} messages");
                    // Never past the n-th line break: what follows is not the flood's.
                    let mut take = buf.len();
                    for (k, i) in memchr::memchr_iter(b'\n', buf).enumerate() {
                        if seen + k + 1 == n {
                            take = i + 1;
                            break;
                        }
                    }
                    seen += memchr::memchr_iter(b'\n', &buf[..take]).count();
                    tail.extend_from_slice(&buf[..take]);
                    if tail.len() > 4096 {
                        tail.drain(..tail.len() - 1024);
                    }
                    stdout.consume(take);
                }
                tail.pop();
                let last = tail
                    .iter()
                    .rposition(|&b| b == b'\n')
                    .map_or(&tail[..], |i| &tail[i + 1..]);
                Bytes::copy_from_slice(last)
            }
            _ => {
                let mut last = Bytes::new();
                for _ in 0..n {
                    last = self.next().await;
                }
                last
            }
        }
    }

    /// Close the connection (for a pipe: the process's stdin).
    pub async fn close(self) {
        match self.inner {
            Inner::Pipe { stdin, stdout } => {
                drop(stdin);
                let mut rest = Vec::new();
                let _ = stdout.into_inner().read_to_end(&mut rest).await;
            }
            Inner::Ws(mut ws) => {
                let _ = WebSocketStream::close(&mut ws, None).await;
            }
            Inner::Http(mut h) => {
                let request = Request::delete("/acp")
                    .header(header::HOST, &h.authority)
                    .header(header::AUTHORIZATION, &h.bearer)
                    .header("acp-connection-id", &h.connection)
                    .body(Full::new(Bytes::new()))
                    .expect("a request");
                let _ = h.post.send(request).await;
            }
        }
    }
}

impl Http {
    /// The next whole event's data, if the buffer holds one (comments skipped).
    fn event(&mut self) -> Option<Bytes> {
        loop {
            let rest = &self.buf[self.start..];
            let end = memchr::memmem::find(rest, b"\n\n")?;
            let event = &rest[..end];
            self.start += end + 2;
            if let Some(data) = event.strip_prefix(b"data: ") {
                return Some(Bytes::copy_from_slice(data));
            }
            assert!(
                event.starts_with(b":"),
                "an event that is not one data line: {}",
                String::from_utf8_lossy(event)
            );
        }
    }

    /// Read more of the event stream.
    async fn fill(&mut self) {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        loop {
            let frame = self
                .events
                .frame()
                .await
                .expect("the event stream ended")
                .expect("the event stream");
            if let Ok(data) = frame.into_data() {
                self.buf.extend_from_slice(&data);
                return;
            }
        }
    }
}

async fn connect(authority: &str) -> TcpStream {
    let socket = TcpStream::connect(authority).await.expect("connect");
    socket.set_nodelay(true).expect("nodelay");
    socket
}

/// An HTTP/1.1 client socket, or an HTTP/2 connection by prior knowledge (`h2`); its
/// connection task runs on the runtime.
async fn handshake(authority: &str, h2: bool) -> Sender {
    let io = TokioIo::new(connect(authority).await);
    if h2 {
        let (sender, connection) = http2::handshake(TokioExecutor::new(), io)
            .await
            .expect("HTTP/2 handshake");
        tokio::spawn(async move {
            let _ = connection.await;
        });
        return Sender::H2(sender);
    }
    let (sender, connection) = http1::handshake(io).await.expect("HTTP handshake");
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Sender::H1(sender)
}
