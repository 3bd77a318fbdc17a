//! The threat model of `docs/SECURITY.md`, each claim tested through the binary: seeded
//! secrets stay out of the store and exports, hostile session arguments resolve inside the
//! store, permissions hold under umask 0, hostile journals are refused or read in bounded
//! memory.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use acp_journal::journal::format::{Encoding, FORMAT_VERSION, encode_header, encode_record};
use acp_journal::journal::{Body, Header, Payload, Record, SegmentKind};
use acp_journal::wire::Side;
use bytes::Bytes;
use serde_json::json;

use crate::util::scripted;
use crate::util::{TestClient, bin, proxied, proxied_with, run_cli, run_cli_in};

/// Every file under `dir`, recursively (directories included).
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![];
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        }
        out.push(path);
    }
    out
}

/// Everything the store holds, segments decompressed (whatever precedes a torn tail).
fn store_text(store: &Path) -> String {
    let mut text = String::new();
    for path in walk(store).into_iter().filter(|p| p.is_file()) {
        let bytes = if path.to_string_lossy().ends_with(".zst") {
            crate::util::decompress_salvage(&path)
        } else {
            std::fs::read(&path).unwrap()
        };
        text.push_str(&String::from_utf8_lossy(&bytes));
    }
    text
}

// Secrets seeded in every place the threat model names. Token-shaped ones match the
// redaction patterns; the structural ones (MCP env and headers, terminal env) do not.
const MCP_ENV: &str = "mcp-env-secret-7f3a9";
const MCP_HEADER: &str = "mcp-header-secret-51c2";
const TERMINAL_ENV: &str = "terminal-env-secret-88d1";
const GITHUB_TOKEN: &str = "ghp_Q8zK2mN4pR6tV8xB1dF3hJ5lN7pR9tV1xB3d";
const OPENAI_KEY: &str = "sk-proj-T3BlbkFJq8W2e4R6t8Y0u2I4o6P8a0S2d4F6";
const STDERR_TOKEN: &str = "sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe";
const ARGV_SECRET: &str = "argv-secret-4411";
const MCP_ARG: &str = "mcp-arg-secret-90e7";
const MCP_URL_KEY: &str = "mcp-url-secret-3c5d";

fn mcp_servers() -> serde_json::Value {
    json!([
        {"name": "gh", "command": "github-mcp", "args": ["--api-key", MCP_ARG, "--stdio"], "env": [{"name": "GITHUB_TOKEN", "value": MCP_ENV}]},
        {"type": "http", "name": "api", "url": format!("https://mcp.invalid/sse?region=eu&api_key={MCP_URL_KEY}"), "headers": [{"name": "Authorization", "value": MCP_HEADER}]}
    ])
}

#[test]
fn seeded_secrets_never_reach_the_journal_or_exports_but_reach_the_agent_unaltered() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("j");
    let agent_log = dir.path().join("agent.log");
    let mut agent = scripted("secrets");
    agent.extend(["--api-key".to_string(), ARGV_SECRET.to_string()]);
    let env = [
        ("AGENT_LOG", agent_log.as_path()),
        ("AGENT_STDERR_SECRET", Path::new(STDERR_TOKEN)),
        ("AGENT_TERMINAL_SECRET", Path::new(TERMINAL_ENV)),
    ];
    let spawn = || TestClient::spawn_env(&proxied(&store, &agent), &env);

    // First run: a session with MCP secrets, a prompt carrying a token; the agent echoes it,
    // prints a token on stderr and asks for a terminal with a secret in its env.
    let mut client = spawn();
    client.initialize();
    let new = client.request(
        "session/new",
        json!({"cwd": "/w", "mcpServers": mcp_servers()}),
    );
    let session = new["result"]["sessionId"].as_str().unwrap().to_string();
    client.prompt(&session, &format!("deploy with {GITHUB_TOKEN}"));
    let stderr = client.stderr.clone();
    let (code, received) = client.finish();
    assert_eq!(code, 0);
    let seen: String = received
        .iter()
        .map(|r| String::from_utf8_lossy(&r.raw).into_owned())
        .collect();
    assert!(
        seen.contains(TERMINAL_ENV) && seen.contains(GITHUB_TOKEN),
        "{seen}"
    );
    let copied = String::from_utf8_lossy(&stderr.lock().unwrap()).into_owned();
    assert!(
        copied.contains(STDERR_TOKEN),
        "agent stderr is copied as it is: {copied}"
    );

    // Second run: the agent cannot load, so the proxy serves the load from the journal, starts
    // a new agent session with the load's MCP servers and re-primes the next prompt.
    let mut client = spawn();
    client.initialize();
    let load = client.request(
        "session/load",
        json!({"sessionId": session, "cwd": "/w", "mcpServers": mcp_servers()}),
    );
    assert!(load.get("result").is_some(), "{load}");
    client.prompt(&session, &format!("again, with {OPENAI_KEY}"));
    assert_eq!(client.finish().0, 0);

    // The agent received every secret unaltered, the re-primed prompt included.
    let log = std::fs::read_to_string(&agent_log).unwrap();
    for secret in [
        MCP_ENV,
        MCP_HEADER,
        MCP_ARG,
        MCP_URL_KEY,
        GITHUB_TOKEN,
        OPENAI_KEY,
    ] {
        assert!(log.contains(secret), "the agent did not receive {secret}");
    }
    assert!(log.contains("Context restored"), "the prompt was re-primed");

    let all = [
        MCP_ENV,
        MCP_HEADER,
        MCP_ARG,
        MCP_URL_KEY,
        TERMINAL_ENV,
        GITHUB_TOKEN,
        OPENAI_KEY,
        STDERR_TOKEN,
        ARGV_SECRET,
    ];
    let check = |what: &str, text: &str| {
        for secret in all {
            assert!(!text.contains(secret), "{what} holds {secret}");
        }
    };
    let kept = store_text(&store);
    assert!(
        kept.contains("GITHUB_TOKEN")
            && kept.contains("DB_PASSWORD")
            && kept.contains("[REDACTED]")
    );
    check("the store", &kept);
    let dir_arg = store.to_str().unwrap();
    for args in [
        vec![
            "export",
            "--journal-dir",
            dir_arg,
            &session,
            "--format",
            "markdown",
        ],
        vec![
            "export",
            "--journal-dir",
            dir_arg,
            &session,
            "--format",
            "ndjson",
        ],
        vec!["show", "--journal-dir", dir_arg, &session],
        vec!["show", "--journal-dir", dir_arg, &session, "--json"],
        vec!["search", "--journal-dir", dir_arg, "REDACTED"],
    ] {
        let (code, out, err) = run_cli(&args);
        assert_eq!(code, 0, "{args:?}: {err}");
        assert!(!out.is_empty(), "{args:?}");
        check(&format!("{args:?}"), &out);
    }
}

/// The arguments of a reading command on `session` (`export` as NDJSON).
fn reading<'a>(command: &'a str, store: &'a str, session: &'a str) -> Vec<&'a str> {
    let mut args = vec![command, "--journal-dir", store, session];
    if command == "export" {
        args.extend(["--format", "ndjson"]);
    }
    args
}

#[test]
fn hostile_session_arguments_resolve_inside_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("j");
    let ids = [
        "../../etc/passwd".to_string(),
        "/etc/hostname".to_string(),
        "é🙂\u{202e}gpj.exe".to_string(),
        "y".repeat(300),
    ];
    let mut client = TestClient::spawn(&proxied(&store, &["cat".into()]));
    for (i, id) in ids.iter().enumerate() {
        client.send(&json!({"jsonrpc":"2.0","method":"session/update","params":{"sessionId": id, "update": {"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":format!("marker-{i}")}}}}));
        client.recv().unwrap();
    }
    assert_eq!(client.finish().0, 0);
    let before = walk(&store);
    let dir_arg = store.to_str().unwrap();
    // From /usr/bin, `../../etc/passwd` names the real file: the session still wins.
    let cwd = Path::new("/usr/bin");
    for (i, id) in ids.iter().enumerate() {
        for command in ["show", "export"] {
            let (code, out, err) = run_cli_in(cwd, &reading(command, dir_arg, id));
            assert_eq!(code, 0, "{command} {id:?}: {err}");
            assert!(
                out.contains(&format!("marker-{i}")),
                "{command} {id:?}: {out}"
            );
            assert!(
                !out.contains("root:"),
                "{command} {id:?} read a file outside the store"
            );
        }
    }
    // Arguments that name no session: a file that is not a journal is refused without its
    // content being shown; traversal to nothing is not found.
    for arg in ["/etc/passwd", "../../../../../../etc/shadow-nope"] {
        for command in ["show", "export", "verify"] {
            let (code, out, err) = run_cli_in(cwd, &reading(command, dir_arg, arg));
            assert_ne!(code, 0, "{command} {arg:?}: {out}");
            assert!(
                !out.contains("root:") && !err.contains("root:"),
                "{command} {arg:?}"
            );
        }
    }
    assert_eq!(walk(&store), before, "reading wrote nothing");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "nothing was written beside the store"
    );
}

#[test]
fn journals_are_private_even_with_umask_0() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("j");
    // A store root someone left open is tightened.
    std::fs::create_dir(&store).unwrap();
    std::fs::set_permissions(&store, std::fs::Permissions::from_mode(0o777)).unwrap();
    let umask0 = |argv: Vec<String>| -> Vec<String> {
        let mut cmd = vec![
            "sh".into(),
            "-c".into(),
            "umask 0; exec \"$@\"".into(),
            "sh".into(),
        ];
        cmd.extend(argv);
        cmd
    };
    let mut client = TestClient::spawn(&umask0(proxied(&store, &["cat".into()])));
    client.send(&json!({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"perm","update":{}}}));
    client.recv().unwrap();
    assert_eq!(client.finish().0, 0);
    let dir_arg = store.to_str().unwrap().to_string();
    let segment = walk(&store.join("sessions"))
        .into_iter()
        .find(|p| p.is_file())
        .unwrap();
    let exported = dir.path().join("export.md");
    for args in [
        vec![
            "list".to_string(),
            "--journal-dir".into(),
            dir_arg.clone(),
            "--rebuild-catalog".into(),
        ],
        vec!["repair".into(), segment.display().to_string()],
        vec![
            "export".into(),
            "--journal-dir".into(),
            dir_arg.clone(),
            "perm".into(),
            "--format".into(),
            "markdown".into(),
            "-o".into(),
            exported.display().to_string(),
        ],
    ] {
        let mut argv = vec![bin().display().to_string()];
        argv.extend(args);
        let argv = umask0(argv);
        let status = Command::new(&argv[0])
            .args(&argv[1..])
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success());
    }
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&store), 0o700);
    let entries = walk(&store);
    assert!(
        entries
            .iter()
            .any(|p| p.to_string_lossy().contains(".repaired."))
    );
    assert!(entries.iter().any(|p| p.ends_with("catalog.ndjson")));
    for entry in entries {
        let expected = if entry.is_dir() { 0o700 } else { 0o600 };
        assert_eq!(mode(&entry), expected, "{}", entry.display());
    }
    assert_eq!(mode(&exported), 0o600, "an export is private too");
}

/// Forks and execs `argv[2:]`, then writes its exit code (negative: the signal) and peak RSS
/// in KiB to the file `argv[1]`. The measuring process must be small: a child's `ru_maxrss`
/// includes the resident memory of the process it was forked from, up to its `exec`, and this
/// test process holds far more than the bound being checked.
const MEASURE: &str = "import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
open(sys.argv[1], 'w').write(f'{os.waitstatus_to_exitcode(status)} {usage.ru_maxrss}')
";

/// Run the binary with `args`; returns its exit code (128 + signal when killed), its peak
/// resident memory in bytes, and its output (stdout and stderr).
fn run_measured(args: &[&str]) -> (i32, u64, String) {
    let out = tempfile::NamedTempFile::new().unwrap();
    let result = tempfile::NamedTempFile::new().unwrap();
    let status = Command::new("python3")
        .args(["-c", MEASURE])
        .arg(result.path())
        .arg(bin())
        .args(args)
        .stdin(Stdio::null())
        .stdout(out.reopen().unwrap())
        .stderr(out.reopen().unwrap())
        .status()
        .unwrap();
    let output = String::from_utf8_lossy(&std::fs::read(out.path()).unwrap()).into_owned();
    assert!(status.success(), "measuring {args:?}: {output}");
    let measured = std::fs::read_to_string(result.path()).unwrap();
    let (code, kib) = measured.split_once(' ').unwrap();
    let code: i32 = code.parse().unwrap();
    let code = if code < 0 { 128 - code } else { code };
    (code, kib.parse::<u64>().unwrap() * 1024, output)
}

fn header(acpj: u32) -> Vec<u8> {
    let header = Header {
        acpj,
        kind: SegmentKind::Session,
        session: Some("hostile".into()),
        run: "20260101T000000.000000Z-1".into(),
        proxy: "acp-journal test".into(),
        started: 1,
        pid: 1,
        argv: vec![],
        cwd: None,
        connection: None,
        initialize: None,
    };
    let mut line = Vec::new();
    encode_header(&header, &mut line);
    zstd::bulk::compress(&line, 3).unwrap()
}

/// A zstd frame with a 128 KiB window of `blocks` RLE blocks of 128 KiB of `byte`: 4 bytes of
/// file for every 128 KiB it inflates to.
fn rle_frame(byte: u8, blocks: usize) -> Vec<u8> {
    let mut out = vec![0x28, 0xB5, 0x2F, 0xFD, 0x00, 0x38];
    for i in 0..blocks {
        let last = u32::from(i + 1 == blocks);
        let head = (128 * 1024) << 3 | 1 << 1 | last;
        out.extend_from_slice(&head.to_le_bytes()[..3]);
        out.push(byte);
    }
    out
}

#[test]
fn hostile_journals_are_refused_or_read_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("j");
    let seg_dir = store.join("sessions").join("shostile");
    std::fs::create_dir_all(&seg_dir).unwrap();
    let deep = {
        let msg = format!("{}{}", "[".repeat(200_000), "]".repeat(200_000));
        let mut payload = Payload::from_line(Bytes::from(msg));
        assert_eq!(payload.encoding, Encoding::Json);
        payload.proxy = false;
        let record = Record {
            seq: 1,
            unix_us: 1,
            mono_us: 1,
            body: Body::Message {
                from: Side::Agent,
                payload,
            },
        };
        let mut line = Vec::new();
        encode_record(&record, &mut line);
        zstd::bulk::compress(&line, 3).unwrap()
    };
    let gib = 8 * 1024; // RLE blocks per GiB
    let cases: Vec<(&str, Vec<u8>)> = vec![
        // 4 GiB of zeros with no newline, in 128 KiB of file.
        ("zeros", [header(1), rle_frame(0, 4 * gib)].concat()),
        // A frame declaring 2^62 bytes of content (its window) in a single segment.
        (
            "declared",
            [
                header(1),
                vec![0x28, 0xB5, 0x2F, 0xFD, 0xE0],
                (1u64 << 62).to_le_bytes().to_vec(),
                vec![0x03, 0x00, 0x10, b'a'],
            ]
            .concat(),
        ),
        // A skippable frame declaring 4 GiB, then end of file.
        (
            "skippable",
            [
                header(1),
                vec![0x50, 0x2A, 0x4D, 0x18, 0xFF, 0xFF, 0xFF, 0xFF, 1, 2, 3],
            ]
            .concat(),
        ),
        ("nested", [header(1), deep].concat()),
        ("newer", header(FORMAT_VERSION + 1)),
    ];
    let dir_arg = store.to_str().unwrap();
    let limit = 200 << 20;
    for (name, bytes) in &cases {
        let path = seg_dir.join(format!("{name}.acpj.zst"));
        std::fs::write(&path, bytes).unwrap();
        let file = path.to_str().unwrap();
        let repaired = dir.path().join(format!("{name}.repaired.acpj.zst"));
        let commands = [
            vec!["verify", "--journal-dir", dir_arg, file],
            vec!["show", "--journal-dir", dir_arg, file],
            vec!["show", "--journal-dir", dir_arg, file, "--json"],
            vec![
                "export",
                "--journal-dir",
                dir_arg,
                file,
                "--format",
                "ndjson",
            ],
            vec!["repair", file, "-o", repaired.to_str().unwrap()],
        ];
        // Every command reads through the same reader: the bomb (slow to inflate in a debug
        // build) is read by two of them.
        let take = if *name == "zeros" { 2 } else { commands.len() };
        for args in commands.into_iter().take(take) {
            let (code, rss, out) = run_measured(&args);
            assert!(code <= 2, "{name}: {args:?} crashed ({code}): {out}");
            assert!(rss < limit, "{name}: {args:?} used {} MiB", rss >> 20);
            if *name == "newer" {
                assert!(out.contains("upgrade"), "{name}: {args:?}: {out}");
            }
        }
    }
    // The whole store at once: list (rebuilt from the segments), search, verify.
    for args in [
        vec!["list", "--journal-dir", dir_arg],
        vec!["search", "--journal-dir", dir_arg, "aaaa"],
        vec!["verify", "--journal-dir", dir_arg],
    ] {
        let (code, rss, out) = run_measured(&args);
        assert!(code <= 2, "{args:?} crashed ({code}): {out}");
        assert!(rss < limit, "{args:?} used {} MiB", rss >> 20);
    }
    let (code, out, _) = run_cli(&["verify", "--journal-dir", dir_arg]);
    assert_eq!(code, 2, "a newer journal is unreadable: {out}");
    for bomb in ["zeros", "declared"] {
        assert!(
            out.lines()
                .any(|l| l.starts_with("CORRUPT") && l.contains(bomb)),
            "{bomb}: {out}"
        );
    }
}

#[test]
fn a_hostile_peer_cannot_crash_the_proxy_or_change_what_it_forwards() {
    let dir = tempfile::tempdir().unwrap();
    let mut client = TestClient::spawn(&proxied_with(
        dir.path(),
        &["--load", "auto"],
        &["cat".into()],
    ));
    let deep = format!("{}{}\n", "[".repeat(100_000), "]".repeat(100_000));
    let nested_id = format!(
        "{{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{{\"sessionId\":{}1{},\"update\":{{}}}}}}\n",
        "[".repeat(50_000),
        "]".repeat(50_000)
    );
    let escaped = "{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"params\":{\"t\":\"\\npm_abcdefghijklmnopqrstuvwxyz0123456789\"}}\n";
    for line in [deep.as_str(), nested_id.as_str(), escaped] {
        client.send_raw(line.as_bytes());
        assert_eq!(client.recv().unwrap().raw, line.as_bytes());
    }
    assert_eq!(client.finish().0, 0);
    let (code, out, _) = run_cli(&["verify", "--journal-dir", dir.path().to_str().unwrap()]);
    assert_eq!(
        code, 0,
        "what a hostile peer sent is journaled readably: {out}"
    );
}
