//! The command line (clap derive only; no command logic here).

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::shell::journals::FsyncPolicy;

mod values;
use values::parse_line_range;
pub use values::{
    Pace, parse_age, parse_pace, parse_recheck, parse_seconds, parse_ship_interval, parse_size,
    parse_timeout,
};

const EXAMPLES: &str = "\
Examples:
  acp-journal -- npx @agentclientprotocol/claude-agent-acp
      Run an agent behind the proxy; every session is journaled.
  acp-journal list
      Show the recorded sessions.
  acp-journal verify
      Check every journal in the journal directory.";

/// A transparent recording proxy for the Agent Client Protocol.
///
/// Put it in front of an agent's command: it relays every message between the editor and the
/// agent untouched and journals each ACP session to crash-safe, zstd-compressed files.
#[derive(Debug, Parser)]
#[command(
    name = "acp-journal",
    version,
    max_term_width = 100,
    after_help = EXAMPLES
)]
pub struct Cli {
    /// Journal directory [default: $ACP_JOURNAL_DIR, else $XDG_DATA_HOME/acp-journal, else
    /// ~/.local/share/acp-journal].
    #[arg(long, global = true, value_name = "DIR")]
    pub journal_dir: Option<PathBuf>,

    /// A shared object store every host ships its journals to and continues sessions from:
    /// `s3://BUCKET[/PREFIX]` (S3 and every S3-compatible store; endpoint, region and
    /// credentials from the `AWS_*` variables), `gs://BUCKET[/PREFIX]`, `az://CONTAINER[/PREFIX]`
    /// or `file:///PATH`. The commands that read (`list`, `show`, …) then read the store.
    #[arg(long, global = true, env = "ACP_JOURNAL_STORE", value_name = "URL")]
    pub store: Option<String>,

    /// With --store, for the commands that read: the most their local copy of the store
    /// (`$XDG_CACHE_HOME/acp-journal/stores/`) keeps, in bytes (`K`, `M`, `G` suffixes count
    /// 1024s). The sessions used longest ago are dropped first; every host's catalogs and the
    /// sessions the command reads are kept.
    #[arg(
        long,
        global = true,
        env = "ACP_JOURNAL_STORE_CACHE",
        default_value = "1G",
        value_name = "SIZE",
        value_parser = parse_size
    )]
    pub store_cache: u64,

    /// With --store, for `list` and `search`: the most their local cache of the store's index
    /// keeps (the footers and row groups a search read), in bytes (`K`, `M`, `G`).
    #[arg(
        long,
        global = true,
        env = "ACP_JOURNAL_INDEX_CACHE",
        default_value = "64M",
        value_name = "SIZE",
        value_parser = parse_size
    )]
    pub index_cache: u64,

    /// A subcommand; without one, run the proxy.
    #[command(subcommand)]
    pub command: Option<Command>,

    /// Proxy options.
    #[command(flatten)]
    pub proxy: ProxyArgs,

    /// Be a bridge: a stdio agent to the editor whose agent is the remote ACP endpoint at URL
    /// (`ws(s)://` or `http(s)://`, e.g. an `acp-journal serve`), reached over WebSocket with
    /// the token of $ACP_JOURNAL_TOKEN or --token-file; journaled here; reconnected, and its
    /// sessions restored, when the network drops. No agent command.
    #[arg(long, value_name = "URL")]
    pub connect: Option<String>,

    /// With --connect: read the bearer token from FILE (unless $ACP_JOURNAL_TOKEN is set).
    #[arg(long, value_name = "FILE", requires = "connect")]
    pub token_file: Option<PathBuf>,

    /// With a wss:// --connect: also trust the CA certificates in FILE (PEM): a team's own CA,
    /// or a host's self-signed certificate. The system's are trusted too ($SSL_CERT_FILE and
    /// $SSL_CERT_DIR, when set, stand for them, as for OpenSSL and curl).
    #[arg(long, value_name = "FILE", requires = "connect")]
    pub ca_file: Option<PathBuf>,

    /// The agent command and its arguments, after `--`.
    #[arg(last = true, value_name = "AGENT")]
    pub agent: Vec<OsString>,
}

/// Options of the proxy.
#[derive(Debug, Args)]
pub struct ProxyArgs {
    /// When to fdatasync journal files.
    #[arg(long, value_enum, default_value = "interval", value_name = "WHEN")]
    pub fsync: FsyncPolicy,

    /// Journal secrets as they are (MCP server env and headers, terminal env, tokens).
    #[arg(long)]
    pub no_redact: bool,

    /// Session loading: `auto` serves `session/load` from the journal for agents that lack it;
    /// `journal` always does (hiding the agent's own replay); `agent` never does; `off` makes
    /// the proxy a pure recorder that changes no message.
    #[arg(long, value_enum, default_value = "auto", value_name = "MODE")]
    pub load: LoadArg,

    /// After a load that had to start a fresh agent session, send a transcript of the earlier
    /// conversation with the next prompt (`transcript`), or not (`off`).
    #[arg(long, value_enum, default_value = "transcript", value_name = "HOW")]
    pub reprime: Reprime,

    /// Largest re-prime transcript, in bytes (the latest turns are kept).
    #[arg(long, default_value = "32768", value_name = "BYTES")]
    pub reprime_limit: usize,

    /// Offer the agent the journal's history: add an MCP server (`acp-journal mcp`, this binary,
    /// scoped to the session's repository) to the `mcpServers` of every `session/new`,
    /// `session/load` and `session/resume` it is sent; under `serve`, to an agent that declares
    /// MCP over HTTP, serve's own loopback endpoint with a token for that repository only. Off
    /// by default: the agent then reads what earlier sessions of the repository recorded
    /// (redacted), which a client may not want it to.
    #[arg(long)]
    pub offer_history: bool,

    /// Seconds to wait for the agent to exit once the client has gone, before SIGTERM (and
    /// again before SIGKILL); also how long what the agent started gets between SIGTERM and
    /// SIGKILL once the agent has exited.
    #[arg(long, default_value = "5", value_name = "SECS", value_parser = parse_seconds)]
    pub grace: Duration,

    /// When the agent dies while the editor is connected, start it again and restore its
    /// sessions, at most N times a minute (`0`: end with the agent, as `--load off` always does).
    #[arg(long, default_value = "3", value_name = "N")]
    pub respawn: u32,

    /// Cancel a prompt the agent sends nothing for during SECS seconds (`session/cancel`), and
    /// restart the agent if it still does not answer within `--grace`. Off by default.
    #[arg(long, value_name = "SECS", value_parser = parse_timeout)]
    pub stall_timeout: Option<Duration>,

    /// Seconds a restarted agent has to answer the editor's `initialize` before it is taken
    /// for failed and restarted again (within `--respawn`).
    #[arg(long, default_value = "60", value_name = "SECS", value_parser = parse_timeout)]
    pub init_timeout: Duration,

    /// Which journaled sessions `session/list` shows: those of this agent (the same command
    /// line), or every agent's (`all`; each row names the agent in `_meta.acpJournal.agent`).
    /// With --store, either scope includes the sessions every host shipped to the store.
    #[arg(long, value_enum, default_value = "agent", value_name = "SCOPE")]
    pub list_scope: ListScope,

    /// Export OpenTelemetry GenAI spans of every turn live, over OTLP/HTTP, to ENDPOINT (a base
    /// URL; `/v1/traces` is added) or, without one, where the `OTEL_EXPORTER_OTLP_*` variables
    /// say (default `http://localhost:4318`). Never slows the relay: spans a slow or absent
    /// backend cannot take are dropped and counted in the journal.
    #[arg(long, value_name = "ENDPOINT", num_args = 0..=1, default_missing_value = "")]
    pub otlp: Option<String>,

    /// With --otlp: spans carry the prompt and output text, tool arguments and results (as
    /// journaled, so redacted unless --no-redact).
    #[arg(long, requires = "otlp")]
    pub otlp_content: bool,

    /// Add a W3C `traceparent` (the turn's `invoke_agent` span) to the `_meta` of every
    /// `session/prompt` sent to the agent, so an agent's own telemetry nests under it. The one
    /// option that changes forwarded bytes; off by default.
    #[arg(long)]
    pub trace_context: bool,

    /// With --store: seconds between shipments of new journal bytes to the store (at least
    /// 0.1). What the local disk holds past the last shipment is what losing the machine loses.
    #[arg(long, default_value = "1", value_name = "SECS", value_parser = parse_ship_interval)]
    pub ship_interval: Duration,

    /// With --store: seconds a host's hold on a session it continues lasts unless renewed (it
    /// renews every third of it: one small write per held session every 5 s by default). A
    /// host that dies without giving its sessions back holds them this long: another host asked
    /// for one waits at most this plus a tenth (timed on its own clock from its first look),
    /// then continues the same session.
    #[arg(long, default_value = "15", value_name = "SECS", value_parser = parse_timeout)]
    pub lease_ttl: Duration,

    /// With --store: continue a session even while another host holds it, or when the store
    /// cannot arbitrate (it ignores conditional writes). The other host's later writes are
    /// fenced off: readers never see them.
    #[arg(long)]
    pub takeover: bool,

    /// With --store: do not write this host's sessions to the team index (`index/` in the
    /// store), which `list`, `search` and `session/list --list-scope all` read.
    #[arg(long)]
    pub no_index: bool,
}

/// `--list-scope` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ListScope {
    /// Sessions recorded with this agent.
    Agent,
    /// Every agent's sessions.
    All,
}

/// `--load` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LoadArg {
    /// Emulate loading only for agents without `loadSession`.
    Auto,
    /// Always replay from the journal.
    Journal,
    /// Leave loading to the agent.
    Agent,
    /// Change no message at all.
    Off,
}

impl From<LoadArg> for crate::proto::LoadMode {
    fn from(arg: LoadArg) -> Self {
        match arg {
            LoadArg::Auto => crate::proto::LoadMode::Auto,
            LoadArg::Journal => crate::proto::LoadMode::Journal,
            LoadArg::Agent => crate::proto::LoadMode::Agent,
            LoadArg::Off => crate::proto::LoadMode::Off,
        }
    }
}

/// `--reprime` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Reprime {
    /// Prepend a bounded transcript to the first prompt.
    Transcript,
    /// Send nothing: the agent starts without context.
    Off,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// List the recorded sessions, newest first.
    #[command(after_help = "Example:\n  acp-journal list --json | jq -r '.[].session'")]
    List(ListArgs),
    /// Check journal files: every record's checksum, and how each file ends.
    #[command(after_help = "\
Examples:
  acp-journal verify                 every file in the journal directory
  acp-journal verify 3fa8            the segments of a session (ID or unique prefix)
  acp-journal verify ./copy.acpj.zst a file

Exit status: 0 when no file is corrupt (a torn tail after a crash is reported, not an error),
1 when a file is corrupt, 2 when a file cannot be read as a journal.")]
    Verify(VerifyArgs),
    /// Show a session as a readable transcript (or its raw records).
    #[command(after_help = "\
Examples:
  acp-journal show 3fa8              the transcript of a session (ID or unique prefix)
  acp-journal show 3fa8 --raw        every wire message with time and direction
  acp-journal show 3fa8 --json | jq  the records as NDJSON

Colour is used on a terminal unless NO_COLOR is set.")]
    Show(ShowArgs),
    /// Follow live sessions as their proxies journal them: the transcript (or the wire records,
    /// or NDJSON) as it grows, until the session is closed.
    #[command(after_help = "\
Examples:
  acp-journal watch                  the most recently active live session
  acp-journal watch 3fa8 --raw       one session's wire records, from its start
  acp-journal watch --all            every live session and each new one, lines prefixed
  acp-journal watch 3fa8 --follow    and its next runs (a later session/load)

Ends when the session's proxy closes it (or is gone); with --all or --follow, when interrupted.")]
    Watch(WatchArgs),
    /// Export a session for a bug report: markdown (a transcript), NDJSON (the wire messages)
    /// or a self-contained HTML page.
    #[command(after_help = "\
Examples:
  acp-journal export 3fa8 --format markdown -o session.md
  acp-journal export 3fa8 --format html -o session.html
  acp-journal export 3fa8 --format ndjson | jq -c .method
  acp-journal export 3fa8 4b1c --format otlp --endpoint http://localhost:6006

Secrets are redacted again at export (as in the journal); --no-redact exports them as stored.")]
    Export(ExportArgs),
    /// Search every journal for text or a regular expression.
    #[command(after_help = "\
Examples:
  acp-journal search 'permission'              every message mentioning it
  acp-journal search 'sk-[a-z]+' --cwd ~/proj  a regex, in one project's sessions")]
    Search(SearchArgs),
    /// Which session wrote each line of a file in a git work tree: git's commit and author, and
    /// for a line an agent wrote (and nobody changed since) its session, turn, time, agent,
    /// model and the first line of the prompt.
    #[command(after_help = "\
Examples:
  acp-journal blame src/main.rs
  acp-journal blame src/main.rs -L 10,40 --json
  acp-journal --store s3://team-journals/acp blame src/main.rs   sessions of every host")]
    Blame(BlameArgs),
    /// Write a commit's authorship note (the Git AI Standard v3.0.0, under refs/notes/ai) from
    /// the journals: the lines it brought in that an agent wrote, by session and tool call.
    #[command(after_help = "\
Examples:
  acp-journal note                  the note of HEAD
  acp-journal note HEAD~2
  git notes --ref=ai show HEAD      read it
  git push origin refs/notes/ai     share the notes")]
    Note(NoteArgs),
    /// Git hooks that write the notes: `hooks install` in a repository.
    Hooks(HooksArgs),
    /// Count a session's (or every session's) messages by kind and direction.
    #[command(after_help = "Example:\n  acp-journal stats 3fa8")]
    Stats(StatsArgs),
    /// Erase sessions from the shared store (`--store`): their journals, their lines in every
    /// host's catalog, their rows in the index; hosts ship nothing of them again.
    #[command(after_help = "\
Example:
  acp-journal --store s3://team-journals/acp erase 3fa8
      what hosts keep on their own disks stays there (run prune on them)")]
    Erase(EraseArgs),
    /// The team index in the shared store (`--store`): rebuild it from the journals.
    #[command(after_help = "\
Example:
  acp-journal --store s3://team-journals/acp index rebuild
      reads every session of the store and writes the index anew (the hosts keep adding to it)")]
    Index(IndexArgs),
    /// Remove whole sessions older than a given age (never one being written).
    #[command(after_help = "\
Examples:
  acp-journal prune --older-than 30d --dry-run   what would go
  acp-journal prune --older-than 12h --keep 20   keep the 20 newest whatever their age")]
    Prune(PruneArgs),
    /// Salvage the readable part of a damaged segment into a clean new file.
    #[command(after_help = "\
Example:
  acp-journal repair sessions/ssess_1/20261121T101010.000000Z-42.acpj.zst
      writes …-42.repaired.acpj.zst beside it and says what was lost; the original is kept.")]
    Repair(RepairArgs),
    /// Play a recording as the agent, to a real client (point an editor at it).
    #[command(after_help = "\
Examples:
  acp-journal replay 3fa8 --pace fast       answer at once
  acp-journal replay bug.acpj --strict      refuse requests that differ from the recording
Zed: \"command\": \"acp-journal\", \"args\": [\"replay\", \"/path/to/bug.acpj\"]

Differences from the recording go to stderr. Exit status: 0, or 1 when --strict and the client
diverged.")]
    Replay(ReplayArgs),
    /// Drive a real agent with a recording's prompts, journal the run, and diff it with the original.
    #[command(after_help = "\
Example:
  acp-journal rerun 3fa8 --fail-on tools -- npx @agentclientprotocol/claude-agent-acp

The agent's requests are answered from the recording: permission outcomes as recorded, file reads
with the recorded content. The new run is journaled in the journal directory like any proxied
session.")]
    Rerun(RerunArgs),
    /// Compare two recordings turn by turn: text, tool calls, errors, capabilities.
    #[command(after_help = "\
Examples:
  acp-journal diff 3fa8 bug.acpj
  acp-journal diff old.acpj new.acpj --fail-on text,tools    exit 1 on such a difference
Exit status: 0, or 1 when a difference of a --fail-on category was found.")]
    Diff(DiffArgs),
    /// Write a session as one redacted, self-contained file for a bug report.
    #[command(after_help = "\
Example:
  acp-journal bundle 3fa8 --upto-turn 2 --include-stderr -o bug.acpj
The bundle is a journal file: show, export, replay, rerun and diff accept it.")]
    Bundle(BundleArgs),
    /// Copy a session into a new one, whole or up to a turn, to continue it another way.
    #[command(after_help = "\
Examples:
  acp-journal fork 3fa8 --at-turn 2       keep prompt turns 1 and 2
  acp-journal fork 3fa8 --at-message m-7  keep through the turn holding message m-7
Prints the new session's ID; load it from the editor (through the proxy) to continue from there.
The original is not changed.")]
    Fork(ForkArgs),
    /// Make a read-only link to one session of the shared store (`--store`), valid on every
    /// host serving the store's page until it expires or is revoked; list and revoke links.
    #[command(after_help = "\
Examples:
  acp-journal --store s3://team-journals/acp share 3fa8 --url https://journals.example:8443
      prints https://journals.example:8443/share/<secret>, valid for 7 days
  acp-journal --store s3://team-journals/acp share 3fa8 --expires 12h
  acp-journal --store s3://team-journals/acp share --list
  acp-journal --store s3://team-journals/acp share --revoke https://journals.example:8443/share/<secret>
  acp-journal --store s3://team-journals/acp share --revoke 3fa8      every link of the session

The store keeps a hash of the link's secret, never the secret: a lost link cannot be printed
again, only revoked (by its session) and made anew.")]
    Share(ShareArgs),
    /// Serve an agent over ACP's remote transports (Streamable HTTP and WebSocket at /acp):
    /// one agent process, journaled, respawned and restored as the stdio proxy does, behind any
    /// number of client connections; sessions outlive connections.
    #[command(after_help = "\
Examples:
  acp-journal serve -- npx @agentclientprotocol/claude-agent-acp
      on 127.0.0.1:8080; the log names the token's file (or set ACP_JOURNAL_TOKEN)
  acp-journal serve --listen 0.0.0.0:8443 --tls-cert cert.pem --tls-key key.pem -- my-agent
  ACP_JOURNAL_TOKEN=$(cat token) acp-journal --connect wss://host:8443/acp
      the bridge, as an editor's stdio agent command (not a subcommand)

Every request needs `Authorization: Bearer TOKEN`. See docs/SERVING.md.")]
    Serve(Box<ServeArgs>),
    /// An MCP server over stdio, read-only: agents (any MCP client) search the journals, read a
    /// session's turns and find the sessions that touched a path; by default only the sessions
    /// of the repository it runs in.
    #[command(after_help = "\
Examples:
  acp-journal mcp                       the sessions of this repository (the git root of the cwd)
  acp-journal mcp --all                 every session of the journal directory
  acp-journal --store s3://team-journals/acp mcp   the team's sessions of this repository
  acp-journal mcp --listen 127.0.0.1:8765          Streamable HTTP at /mcp, with the token

Its stdout is the protocol; logs go to stderr. Answers quote recorded text as data.")]
    Mcp(McpArgs),
    /// Print shell completions.
    #[command(
        after_help = "Example:\n  acp-journal completions bash > /etc/bash_completion.d/acp-journal"
    )]
    Completions(CompletionsArgs),
    /// Print the man page (roff).
    #[command(after_help = "Example:\n  acp-journal man > /usr/local/share/man/man1/acp-journal.1")]
    Man,
    /// Internal: the reaper a proxy starts to end its agents' process groups if it dies.
    #[command(name = "__reap", hide = true)]
    Reap(ReapArgs),
}

/// `__reap` options.
#[derive(Debug, Args)]
pub struct ReapArgs {
    /// Seconds between SIGTERM and SIGKILL.
    #[arg(long, value_parser = parse_seconds)]
    pub grace: Duration,
}

/// `export` options.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Session ID, unique prefix, segment file or directory (several only with `--format otlp`).
    #[arg(value_name = "SESSION|PATH", required = true)]
    pub sessions: Vec<String>,
    /// Output format.
    #[arg(long, value_enum)]
    pub format: ExportFormat,
    /// Write to FILE instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Do not redact secrets again.
    #[arg(long)]
    pub no_redact: bool,
    /// With `--format otlp`: POST the spans to an OTLP/HTTP endpoint instead of writing
    /// OTLP/JSON: ENDPOINT (a base URL), else the `OTEL_EXPORTER_OTLP_*` variables.
    #[arg(long, value_name = "ENDPOINT", num_args = 0..=1, default_missing_value = "", conflicts_with = "output")]
    pub endpoint: Option<String>,
    /// With `--format otlp`: spans carry prompt and output text, tool arguments and results.
    #[arg(long)]
    pub content: bool,
}

/// `export` formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// A transcript for an issue, with the session's facts.
    Markdown,
    /// The wire messages, one per line, as recorded.
    Ndjson,
    /// One self-contained HTML page: the turns as a timeline (tool calls expand), and the wire.
    Html,
    /// OpenTelemetry GenAI spans (OTLP/JSON lines, a request per 512 spans, or POSTed with
    /// --endpoint): one `invoke_agent` span per turn, one `execute_tool` span per tool call.
    Otlp,
}

/// `search` options.
#[derive(Debug, Args)]
pub struct SearchArgs {
    /// A regular expression (plain text works too).
    #[arg(value_name = "PATTERN")]
    pub pattern: String,
    /// Only this session (ID, unique prefix, or path).
    #[arg(long, value_name = "SESSION")]
    pub session: Option<String>,
    /// Only sessions whose working directory is DIR.
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<String>,
    /// With --store: read every session's journal, not only those the store's index says hold
    /// the pattern's words (the index finds words and their beginnings; this finds a match
    /// anywhere, as a search of local journals does).
    #[arg(long)]
    pub scan: bool,
}

/// `blame` options.
#[derive(Clone, Debug, Args)]
pub struct BlameArgs {
    /// The file, in a git work tree.
    #[arg(value_name = "FILE")]
    pub file: std::path::PathBuf,
    /// Only lines START to END (1-based, inclusive), as `git blame -L`.
    #[arg(short = 'L', value_name = "START,END", value_parser = parse_line_range)]
    pub lines: Option<(usize, usize)>,
    /// Print a JSON array, an object per line, instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `note` options.
#[derive(Debug, Args)]
pub struct NoteArgs {
    /// The commit.
    #[arg(value_name = "REV", default_value = "HEAD")]
    pub rev: String,
}

/// `hooks` options.
#[derive(Debug, Args)]
pub struct HooksArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: HooksAction,
}

/// `hooks` actions.
#[derive(Debug, Clone, Copy, clap::Subcommand)]
pub enum HooksAction {
    /// Add post-commit and post-rewrite hooks writing each new commit's note (amend, rebase and
    /// squash included) to the repository of the working directory; a hook already there is
    /// kept (renamed `<hook>.before-acp-journal`) and run first.
    Install,
}

/// `erase` options.
#[derive(Debug, Args)]
pub struct EraseArgs {
    /// Session IDs or unique prefixes.
    #[arg(value_name = "SESSION", required = true)]
    pub sessions: Vec<String>,
}

/// `index` options.
#[derive(Debug, Args)]
pub struct IndexArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: IndexAction,
}

/// `index` actions.
#[derive(Debug, Clone, Copy, clap::Subcommand)]
pub enum IndexAction {
    /// Write the whole index anew from every session's journal in the store.
    Rebuild,
}

/// `stats` options.
#[derive(Debug, Args)]
pub struct StatsArgs {
    /// Session ID, unique prefix or path [default: every session].
    #[arg(value_name = "SESSION")]
    pub session: Option<String>,
    /// With --store: count every message of every session's journal (by kind, with their
    /// bytes), as without --store, instead of the team's figures from the store's index.
    #[arg(long)]
    pub scan: bool,
}

/// `prune` options.
#[derive(Debug, Args)]
pub struct PruneArgs {
    /// Age past which a session goes, by its last activity: `90m`, `12h`, `30d`, `4w`.
    #[arg(long, value_name = "AGE", value_parser = parse_age)]
    pub older_than: std::time::Duration,
    /// Keep the N most recent sessions whatever their age.
    #[arg(long, value_name = "N", default_value = "0")]
    pub keep: usize,
    /// Say what would be removed, remove nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// `repair` options.
#[derive(Debug, Args)]
pub struct RepairArgs {
    /// The damaged segment file.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Where to write the clean copy [default: beside it, `.repaired.acpj.zst`].
    #[arg(short, long, value_name = "OUT")]
    pub output: Option<PathBuf>,
}

/// `completions` options.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// `show` options.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// Session ID, unique prefix, segment file or directory.
    #[arg(value_name = "SESSION|PATH")]
    pub session: String,
    /// Print the wire records: time, direction, message.
    #[arg(long, conflicts_with = "json")]
    pub raw: bool,
    /// Print the records as NDJSON, as stored.
    #[arg(long)]
    pub json: bool,
    /// Print instead the commits that hold the session's lines (in the git work tree of the
    /// working directory, as `blame` finds them), each with its lines by file.
    #[arg(long, conflicts_with_all = ["raw", "json"])]
    pub commits: bool,
}

/// `watch` options.
#[derive(Debug, Args)]
pub struct WatchArgs {
    /// Sessions to follow: ID, unique prefix, segment file or directory [default: the most
    /// recently active live session].
    #[arg(value_name = "SESSION|PATH", conflicts_with = "all")]
    pub sessions: Vec<String>,
    /// Every live session, and every new one as it starts; each line starts with the session's
    /// short ID. Runs until interrupted.
    #[arg(long)]
    pub all: bool,
    /// Print the wire records: time, direction, message.
    #[arg(long, conflicts_with = "json")]
    pub raw: bool,
    /// Print the messages as NDJSON, as on the wire.
    #[arg(long)]
    pub json: bool,
    /// Everything recorded so far, then what follows (the default for a session; with --all,
    /// the live sessions' records so far).
    #[arg(long, conflicts_with = "from_now")]
    pub from_start: bool,
    /// Only what is recorded after the watch began (the default with --all).
    #[arg(long)]
    pub from_now: bool,
    /// When the session is closed, keep waiting for its next run (a later `session/load`).
    #[arg(long)]
    pub follow: bool,
}

/// `mcp` options.
#[derive(Debug, Args)]
pub struct McpArgs {
    /// Answer about the sessions of every repository, not only this one's.
    #[arg(long, conflicts_with = "repository")]
    pub all: bool,
    /// Answer about the sessions of the repository at DIR (its git root) [default: the
    /// repository of the working directory].
    #[arg(long, value_name = "DIR")]
    pub repository: Option<PathBuf>,
    /// The most bytes of recorded text one answer carries (each answer says where to go on).
    #[arg(long, default_value = "24K", value_name = "BYTES", value_parser = parse_size)]
    pub answer_limit: u64,
    /// The most tool calls and resource requests answered in any minute; past it one is
    /// answered with an error that says when to ask again.
    #[arg(long, default_value = "60", value_name = "N")]
    pub calls_per_minute: usize,
    /// Serve Streamable HTTP at `http://ADDR:PORT/mcp` instead of stdio: loopback addresses
    /// only, every request with `Authorization: Bearer TOKEN` (port 0: any free port, said on
    /// stderr).
    #[arg(long, value_name = "ADDR:PORT")]
    pub listen: Option<std::net::SocketAddr>,
    /// With --listen, read the bearer token from FILE [default: $ACP_JOURNAL_TOKEN, else
    /// mcp.token in the journal directory, made on first start (0600)].
    #[arg(long, value_name = "FILE", requires = "listen")]
    pub token_file: Option<PathBuf>,
}

/// `list` options.
#[derive(Clone, Debug, Args)]
pub struct ListArgs {
    /// Only sessions whose working directory is DIR.
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<String>,
    /// Only sessions whose agent command contains TEXT.
    #[arg(long, value_name = "TEXT")]
    pub agent: Option<String>,
    /// Only sessions active within AGE (`90m`, `12h`, `30d`).
    #[arg(long, value_name = "AGE", value_parser = parse_age)]
    pub since: Option<std::time::Duration>,
    /// Rebuild the catalog by reading every journal first.
    #[arg(long)]
    pub rebuild_catalog: bool,
    /// The sessions and turns behind a commit instead (in the git work tree of the working
    /// directory): the lines it brought in that each turn's agent wrote, as `blame` finds them.
    #[arg(long, value_name = "REV", conflicts_with_all = ["cwd", "agent", "since", "rebuild_catalog"])]
    pub commit: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// `verify` options.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// Session IDs, unique prefixes, segment files or directories [default: the whole journal
    /// directory].
    #[arg(value_name = "SESSION|PATH")]
    pub targets: Vec<String>,
}

/// `replay` options.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// Sessions (ID, unique prefix), journal files or bundles; several are served together.
    #[arg(value_name = "SESSION|PATH", required = true)]
    pub sources: Vec<String>,
    /// `recorded`, `fast`, or `xN` (recorded delays sped up N times).
    #[arg(long, value_name = "PACE", default_value = "recorded", value_parser = parse_pace)]
    pub pace: Pace,
    /// Answer a request that differs from the recording with an error (and exit 1).
    #[arg(long)]
    pub strict: bool,
}

/// `rerun` options.
#[derive(Debug, Args)]
pub struct RerunArgs {
    /// Session ID, unique prefix, journal file or bundle.
    #[arg(value_name = "SESSION|PATH")]
    pub source: String,
    /// Working directory to give the agent [default: the current directory].
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Give the agent the recorded MCP servers (commands it will start; off by default, since a
    /// recording may come from someone else).
    #[arg(long)]
    pub keep_mcp_servers: bool,
    /// Exit 1 when the diff finds a difference of these kinds.
    #[arg(long, value_name = "KIND", value_enum, value_delimiter = ',')]
    pub fail_on: Vec<crate::replay::diff::Category>,
    /// Give up on a request the agent has not answered within SECONDS.
    #[arg(long, value_name = "SECONDS", default_value = "300", value_parser = parse_timeout)]
    pub timeout: Duration,
    /// The agent command.
    #[arg(last = true, required = true, value_name = "AGENT")]
    pub agent: Vec<String>,
}

/// `diff` options.
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The first recording (session ID, prefix, journal file or bundle).
    #[arg(value_name = "A")]
    pub a: String,
    /// The second recording.
    #[arg(value_name = "B")]
    pub b: String,
    /// Exit 1 when a difference of these kinds is found.
    #[arg(long, value_name = "KIND", value_enum, value_delimiter = ',')]
    pub fail_on: Vec<crate::replay::diff::Category>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `bundle` options.
#[derive(Debug, Args)]
pub struct BundleArgs {
    /// Session ID, unique prefix or journal file.
    #[arg(value_name = "SESSION|PATH")]
    pub session: String,
    /// Keep the turns up to N.
    #[arg(long, value_name = "N")]
    pub upto_turn: Option<usize>,
    /// Include the agent's stderr.
    #[arg(long)]
    pub include_stderr: bool,
    /// The bundle file to write (it must not exist).
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
}

/// `serve` options.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address and port to listen on. Anything but loopback exposes the agent to the network:
    /// use TLS there.
    #[arg(long, default_value = "127.0.0.1:8080", value_name = "ADDR:PORT")]
    pub listen: std::net::SocketAddr,

    /// Read the bearer token from FILE [default: $ACP_JOURNAL_TOKEN, else serve.token in the
    /// journal directory, made (0600) on first start]. At least 16 characters; a file group or
    /// others may read is refused.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,

    /// TLS certificate chain (PEM); with --tls-key.
    #[arg(long, value_name = "PEM", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,

    /// TLS private key (PEM); with --tls-cert.
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,

    /// Client connections open at once (HTTP and WebSocket).
    #[arg(long, default_value = "256", value_name = "N")]
    pub max_connections: usize,

    /// Largest message a client may send or be sent, in bytes.
    #[arg(long, default_value = "16777216", value_name = "BYTES")]
    pub max_message: usize,

    /// Bytes queued for one client before it is taken for gone and dropped.
    #[arg(long, default_value = "67108864", value_name = "BYTES")]
    pub client_queue: usize,

    /// Seconds an HTTP connection may go without an open stream once its `initialize` is
    /// answered (or a WebSocket without a frame) before it is ended; its sessions live on.
    #[arg(long, default_value = "300", value_name = "SECS", value_parser = parse_timeout)]
    pub idle_timeout: Duration,

    /// Seconds an agent request (a permission request) for a session no client is attached to
    /// waits for one to attach; then it is answered as cancelled.
    #[arg(long, default_value = "300", value_name = "SECS", value_parser = parse_timeout)]
    pub unattended_timeout: Duration,

    /// A browser Origin allowed to open a WebSocket, besides the server's own (repeatable).
    #[arg(long, value_name = "ORIGIN")]
    pub allow_origin: Vec<String>,

    /// A name clients (or a proxy in front) reach the server by, admitted in `Host` besides
    /// localhost, 127.0.0.1, [::1] and the listening address (repeatable; NAME:PORT for one
    /// port only). Any other Host is refused (421): no DNS rebinding.
    #[arg(long, value_name = "NAME")]
    pub allow_host: Vec<String>,

    /// With --store: seconds a share link's record read from the store is trusted before it
    /// is read again, so how late this host may see a link revoked (at most 60).
    #[arg(long, default_value = "60", value_name = "SECS", value_parser = parse_recheck)]
    pub share_recheck: Duration,

    /// Seconds a socket may go without showing the token (tests shorten it).
    #[arg(long, default_value = "10", value_name = "SECS", value_parser = parse_timeout, hide = true)]
    pub handshake_timeout: Duration,

    /// Proxy options.
    #[command(flatten)]
    pub proxy: ProxyArgs,

    /// The agent command and its arguments, after `--`.
    #[arg(last = true, value_name = "AGENT", required = true)]
    pub agent: Vec<OsString>,
}

/// `share` options.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["session", "revoke", "list"])))]
pub struct ShareArgs {
    /// The session to share: its ID or a unique prefix.
    #[arg(value_name = "SESSION", conflicts_with_all = ["revoke", "list"])]
    pub session: Option<String>,

    /// How long the link works: 30m, 12h, 7d (at most 30d).
    #[arg(long, default_value = "7d", value_name = "AGE", value_parser = parse_age)]
    pub expires: Duration,

    /// The address of the store's page (`serve --store`), which the link starts with
    /// [default: $ACP_JOURNAL_URL, else http://127.0.0.1:8080, serve's own default].
    #[arg(long, value_name = "BASE", env = "ACP_JOURNAL_URL")]
    pub url: Option<String>,

    /// Revoke a link (the link, or its secret), or every link of a session (its ID).
    #[arg(long, value_name = "LINK|SESSION", conflicts_with = "list")]
    pub revoke: Option<String>,

    /// List the store's links: session, made, expires, state (never a secret).
    #[arg(long)]
    pub list: bool,
}

/// `fork` options.
#[derive(Debug, Args)]
pub struct ForkArgs {
    /// Session ID or unique prefix.
    #[arg(value_name = "SESSION")]
    pub session: String,
    /// Keep prompt turns 1 to N (default: every turn).
    #[arg(long, value_name = "N", conflicts_with = "at_message")]
    pub at_turn: Option<u64>,
    /// Keep through the end of the turn holding the user or agent message with this messageId.
    #[arg(long, value_name = "ID")]
    pub at_message: Option<String>,
}
