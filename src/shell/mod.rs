//! The I/O shell around the protocol core: pumps whole lines both ways, applies the core's
//! actions in order, and exits with the agent's status.
//!
//! [`run`] is handed its three ends: the [`Client`] (our stdin/stdout in production, built by
//! [`Client::stdio`]), the [`Agent`] (the spawned subprocess: [`agent::spawn`],
//! [`Agent::from_child`]) and a channel of signals to forward ([`unix_signals`]); tests hand it
//! in-memory pipes, a fake process and a channel of their own.
//!
//! One tokio task (the main loop, on the main thread) reads the client's and the agent's lines,
//! runs the core, writes the journals, then writes the lines to their destinations — so a record
//! is written before its line is forwarded. Destinations are written without blocking
//! ([`pipes::Output`]): a peer that stops reading never blocks the other direction, and a
//! destination with more than [`pipes::BACKLOG_LIMIT`] bytes queued stops the reading of its
//! source, as a pipe would. When our stdin/stdout are pipes (as editors connect them) no other
//! thread is involved in relaying; otherwise a std thread reads or writes them.
//!
//! Nothing here writes to stdout except [`pipes::Output::stdout`], and only forwarded lines.

mod actions;
pub mod agent;
mod catalog_service;
mod clock;
mod config;
mod front;
pub mod group;
pub mod history;
pub mod hub;
pub mod journals;
mod life;
pub mod lines;
mod main_loop;
pub mod pipes;
pub mod reaper;
pub mod respawn;
mod services;
mod stderr;
#[cfg(test)]
mod tests;

use std::io;

use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;

pub use agent::{Agent, Process};
pub use config::ShellConfig;
pub use front::Front;
use main_loop::Running;
pub use pipes::Client;

/// SIGINT, SIGTERM and SIGHUP as they reach the proxy, for [`run`] to forward to the agent.
///
/// # Errors
/// Failures to set up signal handling.
pub fn unix_signals() -> io::Result<mpsc::Receiver<i32>> {
    let mut sigint = signal(SignalKind::interrupt())?;
    let mut sigterm = signal(SignalKind::terminate())?;
    let mut sighup = signal(SignalKind::hangup())?;
    let (tx, rx) = mpsc::channel(16);
    tokio::spawn(async move {
        loop {
            let sig = tokio::select! {
                Some(()) = sigint.recv() => libc::SIGINT,
                Some(()) = sigterm.recv() => libc::SIGTERM,
                Some(()) = sighup.recv() => libc::SIGHUP,
                else => return,
            };
            if tx.send(sig).await.is_err() {
                return;
            }
        }
    });
    Ok(rx)
}

/// Run the proxy between the clients of `front` and the agent that `spawn` starts, until the
/// agent exits for good, forwarding the signals that arrive on `signals` (a host stops instead:
/// the agent's stdin is closed, then it is ended after the grace period); returns the exit code
/// for our process (the agent's, or 127 when it cannot be started). An agent that dies while a
/// client may come is started again by `spawn` (at most `config.respawn` times a minute) and its
/// sessions restored ([`Proxy::handle_agent_restart`]).
///
/// # Errors
/// Only a failure to wait for the agent.
pub async fn run<P: Process>(
    config: ShellConfig,
    front: Front,
    spawn: impl FnMut() -> std::io::Result<Agent<P>>,
    signals: mpsc::Receiver<i32>,
) -> anyhow::Result<i32> {
    let Some(mut running) = Running::start(config, front, spawn, signals) else {
        return Ok(127);
    };
    while !running.over() {
        running.step().await?;
    }
    Ok(running.finish().await)
}
