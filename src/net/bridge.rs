//! The bridge (`acp-journal --connect URL`): for editors that speak only stdio, a remote ACP
//! endpoint, the [`Upstream`] (an `acp-journal serve`, an SDK's server), stands where the agent
//! process would, over one WebSocket (`http(s)://` URLs are taken as `ws(s)://` on the same
//! path). The proxy runs as ever — journals, session loading — and a dropped socket is the end
//! of its agent, which the shell "restarts": the bridge connects again (trying with backoff
//! until the proxy gives up on it: `--init-timeout`, then again within `--respawn`),
//! re-initializes with the editor's `initialize` and restores the editor's sessions on the new
//! connection by `session/load` or `session/resume`, which a host like `acp-journal serve`
//! answers from its journal. The core knows its agent is a host (`proto::Config::remote`) and
//! tells the editor and the log so.
//!
//! Over `wss://` it trusts the system's CA certificates and `--ca-file` ([`tls::client_config`]);
//! a certificate it cannot trust ends it at once with the fix named (trying again would not
//! help). A `ws://` URL to another host than this one is warned about, as `serve` warns of a
//! listening address without TLS: the token and every message would travel in clear.

use std::io;
use std::path::Path;
use std::sync::Arc;

use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::oneshot;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{Error, Message};

use super::tls;
use super::token::Token;
use crate::shell::agent::{Agent, Process};
use crate::shell::pipes::Output;

/// Bytes a pipe between the proxy and the socket task holds.
const PIPE: usize = 1 << 20;

/// How long the first connection is tried before the upstream counts as unreachable (the proxy
/// then ends, as when an agent cannot start). A connection made again after a drop is tried
/// until the proxy stops it: the core gives a host `--init-timeout` to answer.
const FIRST_CONNECT: std::time::Duration = std::time::Duration::from_secs(30);

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The upstream: the host the bridge connects to (its WebSocket URL, token and TLS).
#[derive(Clone, Debug)]
pub struct Upstream {
    /// The WebSocket URL.
    url: String,
    token: Option<Token>,
    /// The TLS configuration of a `wss://` URL.
    tls: Option<Arc<rustls::ClientConfig>>,
    max_message: usize,
    /// [`Upstream::connect`] was called before: the next connection is one made again, tried
    /// until the proxy stops it.
    again: bool,
}

impl Upstream {
    /// `url` (`ws`, `wss`, `http` or `https`), with the bearer `token` if any; over TLS, trusting
    /// the system's CA certificates and those of `ca_file`. A `ws://` URL to another host than
    /// this one is warned about.
    ///
    /// # Errors
    /// Another scheme, a URL without a host, a `ca_file` for a URL without TLS or that cannot be
    /// read.
    pub fn new(
        url: &str,
        token: Option<Token>,
        ca_file: Option<&Path>,
        max_message: usize,
    ) -> anyhow::Result<Upstream> {
        let (url, secure) = match url.split_once("://") {
            Some(("ws", _)) => (url.to_string(), false),
            Some(("wss", _)) => (url.to_string(), true),
            Some(("http", rest)) => (format!("ws://{rest}"), false),
            Some(("https", rest)) => (format!("wss://{rest}"), true),
            _ => anyhow::bail!(
                "--connect takes a ws://, wss://, http:// or https:// URL, not {url:?}"
            ),
        };
        let parsed = url::Url::parse(&url).map_err(|e| anyhow::anyhow!("--connect {url}: {e}"))?;
        let Some(host) = parsed.host() else {
            anyhow::bail!("--connect {url}: the URL names no host");
        };
        let tls = match (secure, ca_file) {
            (true, ca_file) => Some(tls::client_config(ca_file)?),
            (false, Some(_)) => anyhow::bail!("--ca-file is for wss:// and https:// URLs"),
            (false, None) => None,
        };
        if !secure && !is_this_host(&host) {
            tracing::warn!(
                "CONNECTING TO {url} WITHOUT TLS: the token and every message travel in clear over the network; use wss:// (serve --tls-cert/--tls-key, or a TLS proxy in front)"
            );
        }
        Ok(Upstream {
            url,
            token,
            tls,
            max_message,
            again: false,
        })
    }

    /// The URL, as journal headers name the "agent".
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A new connection as the proxy's agent: lines written to its stdin go out as frames
    /// (once it is open), frames come in as its stdout's lines; it "exits" when the socket
    /// closes (status 0 when the upstream closed it, 1 when it could not be reached, broke or was
    /// stopped). The first one is tried for [`FIRST_CONNECT`], later ones until stopped.
    pub fn connect(&mut self) -> Agent<Link> {
        let (ours, theirs_in) = tokio::io::duplex(PIPE);
        let (theirs_out, ours_out) = tokio::io::duplex(PIPE);
        let (exit_tx, exit_rx) = oneshot::channel();
        let (stop_tx, stop_rx) = oneshot::channel();
        let upstream = self.clone();
        self.again = true;
        tokio::spawn(async move {
            let code = upstream.pump(theirs_in, theirs_out, stop_rx).await;
            let _ = exit_tx.send(code);
        });
        Agent {
            stdin: Output::writer(Box::new(ours)),
            stdout: Box::new(ours_out),
            stderr: Box::new(tokio::io::empty()),
            process: Link {
                exit: Some(exit_rx),
                stop: Some(stop_tx),
            },
        }
    }

    async fn pump(
        &self,
        from_proxy: tokio::io::DuplexStream,
        mut to_proxy: tokio::io::DuplexStream,
        mut stop: oneshot::Receiver<()>,
    ) -> i32 {
        let socket = tokio::select! {
            socket = self.open_retrying() => socket,
            _ = &mut stop => return 1,
        };
        let Some(socket) = socket else { return 1 };
        if self.again {
            tracing::info!("connected to {} again", self.url);
        } else {
            tracing::info!("connected to {}", self.url);
        }
        let (mut sink, mut frames) = socket.split();
        let mut lines = BufReader::new(from_proxy);
        let mut line = Vec::new();
        loop {
            tokio::select! {
                read = lines.read_until(b'\n', &mut line) => {
                    match read {
                        Ok(n) if n > 0 => {
                            let text = String::from_utf8_lossy(line.trim_ascii_end()).into_owned();
                            line.clear();
                            if sink.send(Message::text(text)).await.is_err() {
                                return 1;
                            }
                        }
                        _ => {
                            // The proxy closed the agent's stdin: a normal end.
                            let _ = sink.send(Message::Close(None)).await;
                            return 0;
                        }
                    }
                }
                frame = frames.next() => match frame {
                    Some(Ok(Message::Text(text))) => {
                        let mut bytes = Vec::with_capacity(text.len() + 1);
                        bytes.extend_from_slice(text.as_bytes());
                        bytes.push(b'\n');
                        if to_proxy.write_all(&bytes).await.is_err() {
                            return 1;
                        }
                    }
                    Some(Ok(Message::Close(_))) | None => {
                        tracing::warn!("{} closed the WebSocket", self.url);
                        return 0;
                    }
                    Some(Err(e)) => {
                        tracing::warn!("lost the WebSocket to {}: {e}", self.url);
                        return 1;
                    }
                    Some(Ok(_)) => {}
                },
                _ = &mut stop => return 1,
            }
        }
    }

    /// Connect, trying again with backoff (0.1 s doubling to 2 s), each failed attempt and when
    /// the next is logged: a host that restarts, a network that comes back. The first
    /// connection gives up after [`FIRST_CONNECT`]; one made again tries until stopped.
    async fn open_retrying(&self) -> Option<Socket> {
        let deadline = (!self.again).then(|| tokio::time::Instant::now() + FIRST_CONNECT);
        let mut pause = std::time::Duration::from_millis(100);
        let mut attempt = 0u64;
        loop {
            attempt = attempt.saturating_add(1);
            match self.open().await {
                Ok(socket) => return Some(socket),
                Err(Error::Http(response)) if response.status().is_client_error() => {
                    // A wrong token, a wrong URL: trying again will not help.
                    let status = response.status();
                    tracing::error!("{} refused the connection: {status}", self.url);
                    return None;
                }
                Err(Error::Io(e)) if untrusted(&e) => {
                    // Nor will it with a certificate this bridge does not trust.
                    tracing::error!(
                        "{} has a certificate this bridge does not trust ({e}): name the CA that signed it (or the host's own certificate) with --ca-file FILE, or in SSL_CERT_FILE",
                        self.url
                    );
                    return None;
                }
                Err(e) if deadline.is_some_and(|d| tokio::time::Instant::now() + pause > d) => {
                    tracing::warn!(
                        "cannot connect to {}: {e}; gave up after {attempt} attempts",
                        self.url
                    );
                    return None;
                }
                Err(e) => tracing::info!(
                    "cannot connect to {} ({e}): attempt {attempt} failed, the next in {:.1} s",
                    self.url,
                    pause.as_secs_f64()
                ),
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(std::time::Duration::from_secs(2));
        }
    }

    async fn open(&self) -> Result<Socket, Error> {
        let mut request = self.url.as_str().into_client_request()?;
        if let Some(token) = &self.token {
            // A token is checked to be a header value when it is read.
            if let Ok(value) = format!("Bearer {}", token.secret()).parse() {
                request
                    .headers_mut()
                    .insert(hyper::header::AUTHORIZATION, value);
            }
        }
        let mut config = WebSocketConfig::default();
        config.max_message_size = Some(self.max_message);
        config.max_frame_size = Some(self.max_message);
        let connector = match &self.tls {
            Some(tls) => tokio_tungstenite::Connector::Rustls(tls.clone()),
            None => tokio_tungstenite::Connector::Plain,
        };
        let (socket, _) = tokio_tungstenite::connect_async_tls_with_config(
            request,
            Some(config),
            true,
            Some(connector),
        )
        .await?;
        Ok(socket)
    }
}

/// Whether `host` is this machine: a loopback address or `localhost`.
fn is_this_host(host: &url::Host<&str>) -> bool {
    match host {
        url::Host::Domain(name) => {
            let name = name.trim_end_matches('.');
            name.eq_ignore_ascii_case("localhost")
                || name.to_ascii_lowercase().ends_with(".localhost")
        }
        url::Host::Ipv4(ip) => ip.is_loopback(),
        url::Host::Ipv6(ip) => ip.is_loopback(),
    }
}

/// Whether `e` is a certificate the bridge does not trust.
fn untrusted(e: &io::Error) -> bool {
    let tls = e.get_ref().and_then(|e| e.downcast_ref::<rustls::Error>());
    matches!(
        tls,
        Some(rustls::Error::InvalidCertificate(_) | rustls::Error::NoCertificatesPresented)
    )
}

/// A connection to the upstream as the proxy's agent process.
pub struct Link {
    exit: Option<oneshot::Receiver<i32>>,
    stop: Option<oneshot::Sender<()>>,
}

impl Process for Link {
    /// Cancel-safe, as the main loop needs: the receiver stays until it has answered.
    async fn wait(&mut self) -> io::Result<i32> {
        let Some(exit) = &mut self.exit else {
            return std::future::pending().await;
        };
        let code = exit.await.unwrap_or(1);
        self.exit = None;
        Ok(code)
    }

    /// A signal ends the connection (there is no process to signal).
    fn signal(&mut self, _signal: i32) {
        self.kill();
    }

    fn kill(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}
