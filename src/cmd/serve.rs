//! `acp-journal serve`: the agent over ACP's HTTP and WebSocket transports.

use std::process::ExitCode;

use anyhow::Context;

use super::proxy::{init_logging, local_agent, micros, on_runtime, shell_config};
use crate::cli::ServeArgs;
use crate::journal::JournalDir;
use crate::net::token::{Token, TokenSource};
use crate::proto::HttpOffer;
use crate::shell::{self, Front, hub};

/// Serve until a signal stops the host (or the agent ends for good); the exit code is the
/// agent's.
pub(super) fn run(
    journals: JournalDir,
    args: ServeArgs,
    shared: Option<&str>,
    limits: super::from_store::Limits,
) -> anyhow::Result<ExitCode> {
    init_logging();
    let env = std::env::var("ACP_JOURNAL_TOKEN").ok();
    let default_file = journals.root().join("serve.token");
    let (token, source) = Token::resolve(env, args.token_file.as_deref(), &default_file)?;
    token.ensure_long()?;
    match source {
        TokenSource::Environment => tracing::info!("token: from ACP_JOURNAL_TOKEN"),
        TokenSource::File(path) => tracing::info!("token: from {}", path.display()),
        TokenSource::Generated(path) => {
            tracing::info!("token: made a new one in {} (0600)", path.display());
        }
    }
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(crate::net::tls::server_config(cert, key)?),
        _ => None,
    };
    if !args.listen.ip().is_loopback() && tls.is_none() {
        tracing::warn!(
            "LISTENING ON {} WITHOUT TLS: the token and every message travel in clear over the network; use --tls-cert/--tls-key (or a TLS proxy in front)",
            args.listen
        );
    }
    let team_host = match shared {
        Some(_) => Some(
            journals
                .create_dirs()
                .and_then(|()| crate::fleet::host_id(&journals))
                .context("this host's name among the store's hosts (host-id)")?,
        ),
        None => None,
    };
    let mut options = crate::net::Options {
        token,
        max_message: args.max_message,
        max_connections: args.max_connections,
        idle_timeout: args.idle_timeout,
        init_timeout: args.proxy.init_timeout,
        allowed_origins: args.allow_origin.clone(),
        allowed_hosts: args.allow_host.clone(),
        handshake: args.handshake_timeout,
        tls,
        // Once this host's link to the store is made (below).
        team: None,
        share_recheck: args.share_recheck,
    };
    let (mcp_listener, http) = match args.proxy.offer_history {
        true => {
            let (listener, http) = offer_endpoint()?;
            (Some(listener), Some(http))
        }
        false => (None, None),
    };
    let source = super::mcp::Source::of(journals.clone(), shared, limits);
    let mut config = shell_config(journals, &args.proxy, args.agent.clone(), shared, http)?;
    // The page's team view reads the store as `list`, `search` and `export` do; its list is
    // this host's listing of the store, which its `session/list` shares.
    options.team = shared.zip(team_host).map(|(url, host)| {
        crate::net::team::Reads::new(std::sync::Arc::new(super::team::StoreTeam {
            url: url.to_string(),
            limits,
            host,
            fleet: config.fleet.clone(),
        }))
    });
    config.core.hosted = true;
    config.core.unattended_timeout_us = micros(args.unattended_timeout);
    let endpoint = config.core.offer_history.and_then(|o| o.http.as_ref());
    on_runtime(async {
        if let (Some(listener), Some(endpoint)) = (mcp_listener, endpoint) {
            let listener = tokio::net::TcpListener::from_std(listener)?;
            tracing::info!(
                "--offer-history: serving MCP at http://{}/mcp for agents that take MCP over HTTP",
                listener.local_addr()?
            );
            tokio::spawn(async move {
                if let Err(e) = super::mcp::serve_offered(listener, endpoint, source).await {
                    tracing::error!("serving MCP: {e}");
                }
            });
        }
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .with_context(|| format!("listening on {}", args.listen))?;
        let address = listener.local_addr().context("the listening address")?;
        let scheme = if options.tls.is_some() {
            "https"
        } else {
            "http"
        };
        tracing::info!("serving ACP at {scheme}://{address}/acp (WebSocket on the same URL)");
        let (link, hub) = hub::hub(args.client_queue);
        tokio::spawn(async move {
            if let Err(e) = crate::net::serve(listener, options, link).await {
                tracing::error!("serving: {e}");
            }
        });
        let spawn = local_agent(&config);
        let signals = shell::unix_signals().context("setting up signal handling")?;
        shell::run(config, Front::Hub(hub), spawn, signals).await
    })
}

/// `--offer-history`'s endpoint for agents that take MCP over HTTP: a loopback listener of its
/// own (whatever serve listens on), and the offer of its URL, each session's token made under a
/// key that lives as long as this process.
fn offer_endpoint() -> anyhow::Result<(std::net::TcpListener, HttpOffer)> {
    let listener = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))
        .context("--offer-history: listening on a loopback port for MCP")?;
    listener.set_nonblocking(true)?;
    let mut key = [0u8; 32];
    getrandom::fill(&mut key).context("--offer-history: the tokens' key")?;
    let url = format!("http://{}/mcp", listener.local_addr()?);
    Ok((listener, HttpOffer::new(url, key)))
}
