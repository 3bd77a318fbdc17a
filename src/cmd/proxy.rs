//! The default command: run the recording proxy in front of an agent.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use std::io::IsTerminal;

use anyhow::Context;

use crate::cli::{ListScope, LoadArg, ProxyArgs, Reprime};
use crate::fleet::Fleet;
use crate::journal::JournalDir;
use crate::net::bridge::Upstream;
use crate::net::token::Token;
use crate::shell::agent::AgentProcess;
use crate::shell::reaper::Reaper;
use crate::shell::{self, Agent, Client, Front, ShellConfig, agent};

/// Run the proxy; the exit code is the agent's.
pub(super) fn run(
    journals: JournalDir,
    args: ProxyArgs,
    agent: Vec<OsString>,
    shared: Option<&str>,
) -> anyhow::Result<ExitCode> {
    if agent.is_empty() {
        anyhow::bail!(
            "no agent command given: use `acp-journal [OPTIONS] -- <agent> [args...]` (see --help)"
        );
    }
    init_logging();
    if std::io::stdin().is_terminal() {
        return Ok(exec_agent(&agent));
    }
    let config = shell_config(journals, &args, agent, shared, None)?;
    on_runtime(async {
        let spawn = local_agent(&config);
        let signals = shell::unix_signals().context("setting up signal handling")?;
        shell::run(config, Front::Editor(Client::stdio()), spawn, signals).await
    })
}

/// Run `main` (which returns the agent's status) on a runtime on this thread; our exit code.
pub(super) fn on_runtime(
    main: impl std::future::Future<Output = anyhow::Result<i32>>,
) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let code = runtime.block_on(main)?;
    // Do not wait for the stdin thread: it may be blocked reading a client that stays open.
    runtime.shutdown_background();
    Ok(ExitCode::from(u8::try_from(code & 0xff).unwrap_or(1)))
}

/// What starts the agent of `config` (at start and on each restart), in its own process group
/// ended by the reaper. Called on the runtime's (main) thread, which lives as long as the proxy:
/// the parent-death signal follows the spawning thread.
pub(super) fn local_agent(
    config: &ShellConfig,
) -> impl FnMut() -> std::io::Result<Agent<AgentProcess>> + use<> {
    agent::ignore_file_size_signal();
    let argv = config.agent.clone();
    let reaper = Reaper::start(config.grace);
    let reaped = reaper.is_running();
    move || agent::spawn(&argv, reaped).and_then(|child| Agent::from_child(child, reaper.clone()))
}

/// The bridge's files: `--token-file` and `--ca-file`.
pub(super) struct BridgeFiles {
    pub(super) token: Option<PathBuf>,
    pub(super) ca: Option<PathBuf>,
}

/// Run the bridge (`--connect URL`): the proxy, whose agent is the remote endpoint at `url`.
pub(super) fn bridge(
    journals: JournalDir,
    args: ProxyArgs,
    url: &str,
    files: BridgeFiles,
    agent: Vec<OsString>,
    shared: Option<&str>,
) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        agent.is_empty(),
        "--connect takes no agent command: the agent is at the URL"
    );
    init_logging();
    let env = std::env::var("ACP_JOURNAL_TOKEN")
        .ok()
        .filter(|e| !e.trim().is_empty());
    // As serve takes it (an invalid one is an error), but none is made: a server may need none.
    let token = match (env, files.token) {
        (None, None) => None,
        (env, file) => {
            let file = file.unwrap_or_default();
            Some(Token::resolve(env, Some(&file), &file)?.0)
        }
    };
    let mut upstream = Upstream::new(url, token, files.ca.as_deref(), 16 << 20)?;
    let mut config = shell_config(
        journals,
        &args,
        vec![OsString::from(upstream.url())],
        shared,
        None,
    )?;
    config.core.remote = true;
    on_runtime(async {
        let signals = shell::unix_signals().context("setting up signal handling")?;
        let spawn = move || Ok(upstream.connect());
        shell::run(config, Front::Editor(Client::stdio()), spawn, signals).await
    })
}

/// The MCP server `--offer-history` adds for the agent: this binary's `mcp` over `journals`
/// (and the store), with everything it needs in its arguments; `serve`'s own endpoint, `http`,
/// to an agent that takes MCP over HTTP. Made once per process.
fn history_offer(
    journals: &JournalDir,
    shared: Option<&str>,
    http: Option<crate::proto::HttpOffer>,
) -> anyhow::Result<&'static crate::proto::HistoryOffer> {
    let command = std::env::current_exe().context("--offer-history: this binary's path")?;
    let root = std::path::absolute(journals.root())?;
    let mut args = vec!["--journal-dir".to_string(), root.display().to_string()];
    if let Some(url) = shared {
        args.extend(["--store".to_string(), url.to_string()]);
    }
    Ok(Box::leak(Box::new(crate::proto::HistoryOffer {
        name: "acp-journal-history".into(),
        command: command.display().to_string(),
        args,
        http,
    })))
}

/// The shell's configuration from the proxy's options (`http`: `serve`'s MCP endpoint, for
/// `--offer-history`).
pub(super) fn shell_config(
    journals: JournalDir,
    args: &ProxyArgs,
    agent: Vec<OsString>,
    shared: Option<&str>,
    http: Option<crate::proto::HttpOffer>,
) -> anyhow::Result<ShellConfig> {
    let grace = args.grace;
    let offer_history = match (args.offer_history, args.load) {
        (true, LoadArg::Off) => anyhow::bail!(
            "--offer-history changes forwarded messages: it cannot be used with --load off"
        ),
        (true, _) => Some(history_offer(&journals, shared, http)?),
        (false, _) => None,
    };
    let started_us = jiff::Timestamp::now().as_microsecond();
    let run = crate::journal::dir::run_id(started_us, std::process::id());
    let fleet = match shared {
        Some(_) if args.no_redact => anyhow::bail!(
            "--no-redact cannot be used with --store: journals leave this machine redacted"
        ),
        Some(url) => Some(Fleet::start(
            url,
            journals.clone(),
            &run,
            crate::fleet::Options {
                ship_interval: args.ship_interval,
                lease_ttl: args.lease_ttl,
                takeover: args.takeover,
                index: !args.no_index,
            },
        )?),
        None => None,
    };
    Ok(ShellConfig {
        agent,
        run,
        started_us,
        journals,
        fsync: args.fsync,
        core: crate::proto::Config {
            redact: !args.no_redact,
            // With a shared store a load is served from the journal (leased and pulled
            // first): the agent's own copy may lack what other hosts added.
            load: match (args.load, shared) {
                (LoadArg::Auto, Some(_)) => crate::proto::LoadMode::Journal,
                (load, _) => load.into(),
            },
            reprime: args.reprime == Reprime::Transcript,
            reprime_limit: args.reprime_limit,
            stall_timeout_us: args.stall_timeout.map(micros),
            stall_grace_us: micros(grace),
            reinit_timeout_us: micros(args.init_timeout),
            offer_history,
            ..crate::proto::Config::default()
        },
        grace,
        respawn: args.respawn,
        list_all: args.list_scope == ListScope::All,
        tracing: crate::otel::live::Options {
            endpoint: match args.otlp.as_deref() {
                Some(url) => Some(
                    crate::otel::http::Endpoint::from_process_env(Some(url))
                        .map_err(anyhow::Error::msg)?,
                ),
                None => None,
            },
            content: args.otlp_content,
            trace_context: args.trace_context,
        },
        fleet,
    })
}

/// A flag's duration in microseconds (flags are at most a day long).
pub(super) fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

/// With a terminal on stdin there is no ACP client: this is a terminal-auth login (the editor
/// relaunches the configured command with extra arguments in a terminal) or a person trying the
/// agent. Become the agent, so its login UI gets the terminal; nothing is journaled.
fn exec_agent(agent: &[OsString]) -> ExitCode {
    use std::os::unix::process::CommandExt;
    tracing::info!("stdin is a terminal: running the agent directly, without journaling");
    let error = std::process::Command::new(&agent[0])
        .args(&agent[1..])
        .exec();
    let shown: Vec<String> = agent
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    eprintln!(
        "acp-journal: cannot start the agent `{}`: {error}",
        shown.join(" ")
    );
    ExitCode::from(127)
}

/// Log to stderr (stdout is the protocol), filtered by `ACP_JOURNAL_LOG` (default `info`, the
/// object store's client at `warn`).
pub(super) fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("ACP_JOURNAL_LOG")
        // The store's client logs every retry at `info`: the shipper says what matters once.
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,object_store=warn"));
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none())
        .with_env_filter(filter)
        .with_target(false)
        .try_init();
}
