//! The `acp-journal` binary: parse the command line and dispatch.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    acp_journal::cmd::run(acp_journal::cli::Cli::parse())
}
