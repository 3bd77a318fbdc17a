//! One module per subcommand; [`run`] dispatches.

mod blame;
mod bundle;
mod diff;
mod export;
mod fork;
mod from_store;
mod git;
mod inotify;
mod list;
mod maintain;
mod mcp;
mod note;
mod proxy;
mod records;
mod replay;
mod rerun;
mod search;
mod serve;
mod share;
mod show;
mod sources;
mod team;
mod team_blame;
mod team_follow;
mod verify;
mod watch;

use std::path::PathBuf;
use std::process::ExitCode;

use crate::cli::{Cli, Command};
use crate::journal::JournalDir;

/// Resolve the journal directory: `--journal-dir`, else `$ACP_JOURNAL_DIR`, else
/// `$XDG_DATA_HOME/acp-journal`, else `~/.local/share/acp-journal`.
pub fn journal_dir(flag: Option<PathBuf>) -> PathBuf {
    let env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    flag.or_else(|| env("ACP_JOURNAL_DIR"))
        .or_else(|| env("XDG_DATA_HOME").map(|d| d.join("acp-journal")))
        .or_else(|| env("HOME").map(|h| h.join(".local/share/acp-journal")))
        .unwrap_or_else(|| PathBuf::from(".acp-journal"))
}

/// Run the parsed command line.
pub fn run(cli: Cli) -> ExitCode {
    let local = JournalDir::new(journal_dir(cli.journal_dir));
    if cli.command.is_some() && !cli.agent.is_empty() {
        eprintln!(
            "acp-journal: an agent command after `--` runs the proxy; it cannot follow a subcommand"
        );
        return ExitCode::from(2);
    }
    let shared = cli.store.as_deref().filter(|url| !url.is_empty());
    // What a reader of the store may keep on this disk.
    let store_limits = from_store::Limits {
        copy: cli.store_cache,
        index: cli.index_cache,
    };
    // With --store, `stats` of the whole store is the team's figures, from the store's index.
    if let (Some(Command::Stats(a)), Some(url)) = (&cli.command, shared)
        && a.session.is_none()
        && !a.scan
    {
        match from_store::team_stats(url) {
            Ok(Some(code)) => return code,
            Ok(None) => {}
            Err(e) => {
                eprintln!("acp-journal: {e:#}");
                return ExitCode::from(2);
            }
        }
    }
    // With --store, the commands that read read the shared store, through a local copy.
    let journals = match (&cli.command, shared) {
        (Some(command), Some(url)) if from_store::reads(command) => {
            match from_store::local_copy(url, command, store_limits) {
                Ok(copy) => copy,
                Err(e) => {
                    eprintln!("acp-journal: {e:#}");
                    return ExitCode::from(2);
                }
            }
        }
        _ => local.clone(),
    };
    let result = match cli.command {
        Some(Command::List(args)) => match args.commit.clone() {
            Some(rev) => note::sessions_of_commit(&journals, &rev, args.json),
            None => list::run(&journals, args),
        },
        Some(Command::Verify(args)) => verify::run(&journals, args),
        Some(Command::Show(args)) if args.commits => {
            note::commits_of_session(&journals, &args.session)
        }
        Some(Command::Show(args)) => show::run(&journals, args),
        Some(Command::Watch(args)) => watch::run(&journals, args),
        Some(Command::Export(args)) => export::run(&journals, args),
        Some(Command::Search(args)) => search::run(&journals, args),
        Some(Command::Stats(args)) => search::stats(&journals, &local, args),
        Some(Command::Blame(args)) => match shared {
            // With a shared store, from the store's index.
            Some(url) => team_blame::run(url, args, store_limits),
            None => blame::run(&journals, args),
        },
        Some(Command::Note(args)) => note::run(&journals, args),
        Some(Command::Hooks(args)) => match args.action {
            crate::cli::HooksAction::Install => note::install_hooks(&journals),
        },
        Some(Command::Prune(args)) => match shared {
            // With a shared store, the store's sessions (of every host) are pruned.
            Some(url) => from_store::prune(url, args),
            None => maintain::prune(&journals, args),
        },
        Some(Command::Erase(args)) => from_store::erase(args, shared),
        Some(Command::Repair(args)) => maintain::repair(args),
        Some(Command::Replay(args)) => replay::run(&journals, args),
        Some(Command::Rerun(args)) => rerun::run(&journals, args),
        Some(Command::Diff(args)) => diff::run(&journals, args),
        Some(Command::Bundle(args)) => bundle::run(&journals, args),
        Some(Command::Fork(args)) => fork::run(&journals, args, shared),
        Some(Command::Share(args)) => share::run(&local, args, shared),
        Some(Command::Index(args)) => from_store::index(args, shared, cli.store_cache),
        Some(Command::Serve(args)) => serve::run(journals, *args, shared, store_limits),
        Some(Command::Mcp(args)) => {
            let source = mcp::Source::of(journals, shared, store_limits);
            mcp::run(source, args, &local.root().join("mcp.token"))
        }
        Some(Command::Completions(args)) => maintain::completions(args),
        Some(Command::Man) => maintain::man(),
        Some(Command::Reap(args)) => {
            crate::shell::reaper::run(std::io::stdin().lock(), args.grace);
            Ok(ExitCode::SUCCESS)
        }
        None => match cli.connect {
            Some(url) => {
                let files = proxy::BridgeFiles {
                    token: cli.token_file,
                    ca: cli.ca_file,
                };
                proxy::bridge(journals, cli.proxy, &url, files, cli.agent, shared)
            }
            None => proxy::run(journals, cli.proxy, cli.agent, shared),
        },
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) {
                return ExitCode::SUCCESS;
            }
            eprintln!("acp-journal: {e:#}");
            ExitCode::from(2)
        }
    }
}
