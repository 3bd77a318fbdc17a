//! The `acp-journal` binary: parse the command line and dispatch.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    // Before any TLS client or server: one crypto provider for all of them.
    acp_journal::net::tls::crypto_provider();
    acp_journal::cmd::run(acp_journal::cli::Cli::parse())
}
