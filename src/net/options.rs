//! What the server allows: the [`Options`] `serve` is given, and the fixed times a client is held
//! to ([`SEND_TIMEOUT`], [`KEEPALIVE`]).

use std::sync::Arc;
use std::time::Duration;

use super::token::Token;

/// How long a client may take to accept one message before it is dropped.
pub const SEND_TIMEOUT: Duration = Duration::from_secs(30);

/// How often an idle stream or socket gets a keep-alive (an SSE comment, a WebSocket ping).
pub const KEEPALIVE: Duration = Duration::from_secs(15);

/// What the server allows.
#[derive(Clone, Debug)]
pub struct Options {
    /// The bearer token.
    pub token: Token,
    /// Largest message, in bytes (a bigger body gets 413; a bigger WebSocket frame closes).
    pub max_message: usize,
    /// ACP connections open at once (HTTP and WebSocket).
    pub max_connections: usize,
    /// An HTTP connection with no stream open for this long (counted from the answer to its
    /// `initialize`), or a WebSocket that answers no ping for this long, is ended (its sessions
    /// live on).
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
    /// The page's team view of the shared store, when serving one (`--store`).
    pub team: Option<super::team::Reads>,
    /// How long a share link's record read from the store is trusted before it is read again
    /// (`--share-recheck`; at most a minute): how late a revocation may be seen.
    pub share_recheck: Duration,
}
