//! `acp-journal serve`: the agent over ACP's HTTP and WebSocket transports.

use std::process::ExitCode;

use anyhow::Context;

use super::proxy::{init_logging, local_agent, micros, on_runtime, shell_config};
use crate::cli::ServeArgs;
use crate::journal::JournalDir;
use crate::net::token::{Token, TokenSource};
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
    let options = crate::net::Options {
        token,
        max_message: args.max_message,
        max_connections: args.max_connections,
        idle_timeout: args.idle_timeout,
        init_timeout: args.proxy.init_timeout,
        allowed_origins: args.allow_origin.clone(),
        allowed_hosts: args.allow_host.clone(),
        handshake: args.handshake_timeout,
        tls,
        // The page's team view reads the store as `list`, `search` and `export` do.
        team: match shared {
            Some(url) => Some(crate::net::team::Reads::new(std::sync::Arc::new(
                super::team::StoreTeam {
                    url: url.to_string(),
                    limits,
                    host: journals
                        .create_dirs()
                        .and_then(|()| crate::fleet::host_id(&journals))
                        .context("this host's name among the store's hosts (host-id)")?,
                },
            ))),
            None => None,
        },
        share_recheck: args.share_recheck,
    };
    let mut config = shell_config(journals, &args.proxy, args.agent.clone(), shared)?;
    config.core.hosted = true;
    config.core.unattended_timeout_us = micros(args.unattended_timeout);
    on_runtime(async {
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
