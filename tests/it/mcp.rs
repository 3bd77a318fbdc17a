//! `acp-journal mcp` driven by a real MCP client (the official Python SDK, `mcp`, pinned by
//! scripts/install-peers.sh) over stdio and Streamable HTTP, on journals recorded through the
//! proxy: its tools and their schemas, answers equal to `search` and `show` of the same
//! journals, its scope (the repository it runs in; another repository's session and a deleted
//! one never answered), answers bounded, paged, redacted and limited in rate, the team's
//! sessions read through `--store` (an erased one never answered), the bearer token over HTTP;
//! and `--offer-history`: the server added to the agent's `session/new` (and to the setup a load
//! from the journal sends), the client's entries kept, the edit journaled, the entry usable
//! alone.

use std::path::Path;

use serde_json::{Value, json};

use crate::fleet::{Host, eventually};
use crate::util::{Peers, TestClient, bin, proxied, run_cli_store, scripted};

/// A session recorded through the proxy with `agent` in `cwd`, one prompt per text; its ID.
fn record(store: &Path, agent: &[String], cwd: &Path, prompts: &[&str]) -> String {
    let mut client = TestClient::spawn(&proxied(store, agent));
    let session = client.start_session(cwd.to_str().unwrap());
    for text in prompts {
        let answer = client.prompt(&session, text);
        assert!(answer.get("result").is_some(), "{answer}");
    }
    client.finish();
    session
}

/// The MCP client's report: `acp-journal --journal-dir STORE mcp OPTIONS`, run in `cwd`,
/// asked `calls`.
fn ask(peers_python: &str, store: &Path, cwd: &Path, options: &[&str], calls: Value) -> Value {
    let mut server = vec![
        bin().display().to_string(),
        "--journal-dir".into(),
        store.display().to_string(),
        "mcp".into(),
    ];
    server.extend(options.iter().map(|o| o.to_string()));
    ask_server(peers_python, &server, cwd, &[], calls)
}

/// The MCP client's report: the stdio server `server` (its command line), run in `cwd`, asked
/// `calls`.
fn ask_server(
    peers_python: &str,
    server: &[String],
    cwd: &Path,
    env: &[(String, String)],
    calls: Value,
) -> Value {
    let script = crate::util::root().join("tests/agents/mcp_client.py");
    let out = std::process::Command::new(peers_python)
        .arg(script)
        .arg(calls.to_string())
        .arg("--")
        .args(server)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir(cwd)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "mcp client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// `search PATTERN`'s lines as (session, turn, from, excerpt).
fn searched(store: &Path, pattern: &str) -> Vec<(String, u64, String, String)> {
    let (code, out, err) = run_cli_store(store, &["search", pattern]);
    assert_eq!(code, 0, "{err}");
    out.lines()
        .map(|line| {
            let parts: Vec<&str> = line.splitn(4, "  ").collect();
            let turn = parts[1].strip_prefix("turn ").unwrap().parse().unwrap();
            let excerpt = parts[3]
                .strip_prefix('…')
                .and_then(|e| e.strip_suffix('…'))
                .unwrap();
            (
                parts[0].to_string(),
                turn,
                parts[2].to_string(),
                excerpt.to_string(),
            )
        })
        .collect()
}

/// A directory that is a git repository's root (what `mcp` finds its scope by).
fn repository(parent: &Path, name: &str) -> std::path::PathBuf {
    let dir = parent.join(name);
    std::fs::create_dir_all(dir.join(".git")).unwrap();
    dir.canonicalize().unwrap()
}

#[test]
fn mcp_answers_as_search_and_show_do_only_within_its_repository() {
    let peers = Peers::get();
    let python = peers.py_echo_agent()[0].clone();
    let agent = peers.py_echo_agent();
    let home = tempfile::tempdir().unwrap();
    let store = home.path().join("journals");
    let ours = repository(home.path(), "ours");
    let theirs = repository(home.path(), "theirs");
    std::fs::create_dir_all(ours.join("src")).unwrap();

    let first = record(
        &store,
        &agent,
        &ours,
        &[
            "why does the lantern test flake?",
            "pin zstd, the lantern test then passes",
        ],
    );
    let second = record(&store, &agent, &ours.join("src"), &["lantern again"]);
    let other = record(&store, &agent, &theirs, &["lantern in another repository"]);
    // A session the client deleted: hidden from every answer.
    let deleted = record(&store, &agent, &ours, &["lantern, deleted later"]);
    let mut client = TestClient::spawn(&proxied(&store, &agent));
    client.initialize();
    let said = client.request("session/delete", json!({"sessionId": deleted}));
    assert_eq!(said["result"], json!({}), "{said}");
    client.finish();
    // A session whose tool call read notes.txt (the scripted agent's `otel` turn).
    let reader = record(&store, &scripted("otel"), &ours, &["read the notes"]);

    let report = ask(
        &python,
        &store,
        &ours.join("src"),
        &[],
        json!([
            ["search_sessions", {"query": "lantern"}],
            ["read_session", {"session": first, "from_turn": 0}],
            ["read_session", {"session": other}],
            ["read_session", {"session": deleted}],
            ["sessions_touching_path", {"path": "notes.txt"}],
            ["search_sessions", {"query": "lantern", "limit": 2}],
            ["search_sessions", {"query": "lantern", "offset": 2, "limit": 2}],
            ["read_session", {"session": &first[..8], "from_turn": 2}],
        ]),
    );
    assert_eq!(report["server"], "acp-journal");
    assert!(
        report["instructions"]
            .as_str()
            .unwrap()
            .contains("never instructions")
    );

    // The tools, each with its schema and read-only.
    let tools = report["tools"].as_array().unwrap();
    let mut names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        ["read_session", "search_sessions", "sessions_touching_path"]
    );
    for tool in tools {
        let schema = &tool["inputSchema"];
        assert_eq!(schema["type"], "object", "{tool}");
        assert_eq!(tool["annotations"]["readOnlyHint"], true, "{tool}");
        let required: Vec<&str> = schema["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_str().unwrap())
            .collect();
        let expected = match tool["name"].as_str().unwrap() {
            "search_sessions" => vec!["query"],
            "read_session" => vec!["session"],
            _ => vec!["path"],
        };
        assert_eq!(required, expected, "{tool}");
        for property in schema["properties"].as_object().unwrap().values() {
            assert!(property["description"].is_string(), "{tool}");
        }
    }
    let results = report["results"].as_array().unwrap();

    // search_sessions: what `search` prints of the sessions in scope, in its order.
    let search = &results[0]["structured"];
    assert_eq!(results[0]["is_error"], false);
    let expected: Vec<_> = searched(&store, "lantern")
        .into_iter()
        .filter(|(s, ..)| *s == first || *s == second)
        .collect();
    let got: Vec<_> = search["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["session"].as_str().unwrap().to_string(),
                m["turn"].as_u64().unwrap(),
                m["from"].as_str().unwrap().to_string(),
                m["quoted_excerpt"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(expected.len() >= 4, "{expected:?}");
    assert_eq!(got, expected);
    assert!(search["note"].as_str().unwrap().contains("quoted_"));
    assert_eq!(search["next_offset"], Value::Null);
    let text = results[0]["text"][0].as_str().unwrap();
    assert!(!text.contains(&other) && !text.contains(&deleted), "{text}");

    // read_session: `show`'s transcript, every turn.
    let (code, show, err) = run_cli_store(&store, &["show", &first]);
    assert_eq!(code, 0, "{err}");
    let read = &results[1]["structured"];
    assert_eq!(read["quoted_transcript"], show);
    assert_eq!(read["turns"], 2);
    assert_eq!(read["to_turn"], 2);
    assert_eq!(read["next_turn"], Value::Null);

    // Another repository's session and a deleted one: not there.
    for refused in &results[2..4] {
        assert_eq!(refused["is_error"], true, "{refused}");
        assert!(refused["text"][0].as_str().unwrap().contains("no session"));
    }

    // sessions_touching_path: the session whose tool call read notes.txt, at its turn.
    let touching = &results[4]["structured"];
    let sessions = touching["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 1, "{touching}");
    assert_eq!(sessions[0]["session"], reader.as_str());
    assert_eq!(
        sessions[0]["touches"],
        json!([{"turn": 1, "how": "read", "path": "notes.txt"}])
    );

    // Paged: two matches, then the next two from next_offset.
    let page = &results[5]["structured"];
    assert_eq!(
        page["matches"],
        json!(search["matches"].as_array().unwrap()[..2])
    );
    assert_eq!(page["next_offset"], 2);
    let page = &results[6]["structured"];
    assert_eq!(
        page["matches"],
        json!(search["matches"].as_array().unwrap()[2..4])
    );

    // A prefix names the session; from_turn 2 is the second turn alone.
    let turn2 = &results[7]["structured"];
    assert_eq!(turn2["session"], first.as_str());
    assert_eq!(turn2["from_turn"], 2);
    let transcript = turn2["quoted_transcript"].as_str().unwrap();
    assert!(transcript.contains("pin zstd") && !transcript.contains("flake"));
    assert!(show.ends_with(transcript), "{transcript}");

    // --all widens the scope to every repository; deleted sessions stay hidden.
    let report = ask(
        &python,
        &store,
        home.path(),
        &["--all"],
        json!([
            ["read_session", {"session": other}],
            ["read_session", {"session": deleted}],
        ]),
    );
    assert_eq!(report["results"][0]["is_error"], false);
    assert_eq!(
        report["results"][0]["structured"]["session"],
        other.as_str()
    );
    assert_eq!(report["results"][1]["is_error"], true);
}

#[test]
fn mcp_answers_are_bounded_by_the_answer_limit_and_say_where_to_go_on() {
    let peers = Peers::get();
    let python = peers.py_echo_agent()[0].clone();
    let agent = peers.py_echo_agent();
    let home = tempfile::tempdir().unwrap();
    let store = home.path().join("journals");
    let ours = repository(home.path(), "ours");
    // Recorded as it was (`--no-redact`): the server's answers redact it all the same.
    let token = "ghp_Q8zK2mN4pR6tV8xB1dF3hJ5lN7pR9tV1xB3d";
    let mut client =
        TestClient::spawn(&crate::util::proxied_with(&store, &["--no-redact"], &agent));
    let secret = client.start_session(ours.to_str().unwrap());
    client.prompt(&secret, &format!("the lantern key is {token}"));
    client.finish();
    let long = "lantern ".repeat(100);
    let session = record(
        &store,
        &agent,
        &ours,
        &["a short turn about the lantern", &long, "the third turn"],
    );
    let report = ask(
        &python,
        &store,
        &ours,
        &["--answer-limit", "300", "--calls-per-minute", "6"],
        json!([
            ["read_session", {"session": session}],
            ["read_session", {"session": session, "from_turn": 2}],
            ["read_session", {"session": session, "from_turn": 3}],
            ["search_sessions", {"query": "lantern"}],
            ["search_sessions", {"query": "lantern key", "limit": 100}],
            ["read_session", {"session": secret}],
            ["search_sessions", {"query": "lantern"}],
        ]),
    );
    let results = report["results"].as_array().unwrap();
    // The first turn fits; the second does not fit after it: the next answer's.
    let first = &results[0]["structured"];
    assert_eq!(first["to_turn"], 1, "{first}");
    assert_eq!(first["next_turn"], 2);
    assert_eq!(first["truncated"], false);
    assert!(first["quoted_transcript"].as_str().unwrap().len() <= 300);
    // The second turn alone is past the limit: cut, and the answer goes on at the third.
    let second = &results[1]["structured"];
    assert_eq!(second["truncated"], true, "{second}");
    assert_eq!(second["next_turn"], 3);
    assert!(second["quoted_transcript"].as_str().unwrap().len() <= 300);
    let third = &results[2]["structured"];
    assert_eq!(third["next_turn"], Value::Null);
    assert!(
        third["quoted_transcript"]
            .as_str()
            .unwrap()
            .contains("the third turn")
    );
    // The matches' excerpts fit the limit, and the answer says where to go on.
    let search = &results[3]["structured"];
    let excerpts: usize = search["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["quoted_excerpt"].as_str().unwrap().len())
        .sum();
    assert!(excerpts <= 300, "{search}");
    assert!(search["next_offset"].as_u64().is_some(), "{search}");
    // A secret recorded as it was reaches no answer.
    let (found, read) = (&results[4], &results[5]);
    assert!(
        !found["structured"]["matches"]
            .as_array()
            .unwrap()
            .is_empty(),
        "{found}"
    );
    assert!(
        read["structured"]["quoted_transcript"]
            .as_str()
            .unwrap()
            .contains("the lantern key is")
    );
    for answer in [found, read] {
        let text = answer.to_string();
        assert!(!text.contains(token) && text.contains("REDACTED"), "{text}");
    }
    // The seventh call of the minute: refused, with when to ask again.
    assert_eq!(results[6]["is_error"], true, "{}", results[6]);
    assert!(
        results[6]["text"][0]
            .as_str()
            .unwrap()
            .contains("6 calls a minute")
    );
}

/// `--offer-history`: the agent's `session/new` carries the journal's server after the client's
/// own entry (the journal keeps the request as the client sent it, and the added entry as the
/// proxy's `history_offered` edit); the entry alone, run from anywhere by an MCP client, answers
/// about the session's repository.
#[test]
fn offer_history_adds_the_history_server_to_session_new_and_the_entry_answers_alone() {
    let peers = Peers::get();
    let python = peers.py_echo_agent()[0].clone();
    let home = tempfile::tempdir().unwrap();
    let store = home.path().join("journals");
    let ours = repository(home.path(), "ours");
    let log = home.path().join("agent.log");
    let cmd = crate::util::proxied_with(&store, &["--offer-history"], &scripted("otel"));
    let mut client = TestClient::spawn_env(&cmd, &[("AGENT_LOG", &log)]);
    client.initialize();
    let mine = json!({"name": "mine", "command": "/bin/true", "args": [], "env": []});
    let new = client.request(
        "session/new",
        json!({"cwd": ours.to_str().unwrap(), "mcpServers": [mine]}),
    );
    let session = new["result"]["sessionId"].as_str().unwrap().to_string();
    let answer = client.prompt(&session, "read the notes");
    assert!(answer.get("result").is_some(), "{answer}");
    client.finish();

    let received: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let setup = received
        .iter()
        .find(|m| m["method"] == "session/new")
        .unwrap();
    let servers = setup["params"]["mcpServers"].as_array().unwrap();
    assert_eq!(servers.len(), 2, "{setup}");
    assert_eq!(servers[0], mine);
    let offered = &servers[1];
    assert_eq!(offered["name"], "acp-journal-history");
    assert_eq!(offered["command"], bin().display().to_string());
    let args: Vec<String> = offered["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        args[args.len() - 3..],
        ["mcp", "--repository", ours.to_str().unwrap()]
    );

    // The journal: the request as the client sent it, then the proxy's edit.
    let (code, raw, err) = run_cli_store(&store, &["show", "--raw", &session]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = raw.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.contains("\"session/new\""))
        .unwrap();
    let sent: Value = serde_json::from_str(&lines[at][lines[at].find('{').unwrap()..]).unwrap();
    assert_eq!(sent["params"]["mcpServers"], json!([mine]));
    let edit: Value =
        serde_json::from_str(&lines[at + 1][lines[at + 1].find('{').unwrap()..]).unwrap();
    assert_eq!(edit, json!({"type": "history_offered", "server": offered}));
    // The transcript says it too.
    let (code, shown, err) = run_cli_store(&store, &["show", &session]);
    assert_eq!(code, 0, "{err}");
    assert!(
        shown.contains(
            "acp-journal offered the agent the journal's history: MCP server acp-journal-history"
        ),
        "{shown}"
    );

    // The entry as the agent would run it, from another directory, with nothing of the proxy's
    // environment.
    let mut server = vec![offered["command"].as_str().unwrap().to_string()];
    server.extend(args);
    let report = ask_server(
        &python,
        &server,
        home.path(),
        &[],
        json!([["sessions_touching_path", {"path": "notes.txt"}]]),
    );
    let found = &report["results"][0]["structured"]["sessions"];
    assert_eq!(found[0]["session"], session.as_str(), "{report}");
}

/// `--offer-history` on a load served from the journal: the `session/new` the proxy sends to
/// bring the session up on an agent without `session/load` carries the server too, scoped to
/// the session's recorded working directory.
#[test]
fn offer_history_reaches_the_setup_a_load_from_the_journal_sends() {
    let home = tempfile::tempdir().unwrap();
    let store = home.path().join("journals");
    let ours = repository(home.path(), "ours");
    let session = record(&store, &scripted("otel"), &ours, &["read the notes"]);
    let log = home.path().join("agent.log");
    let cmd = crate::util::proxied_with(&store, &["--offer-history"], &scripted("otel"));
    let mut client = TestClient::spawn_env(&cmd, &[("AGENT_LOG", &log)]);
    client.initialize();
    let (updates, answer) = client.load(&session, ours.to_str().unwrap());
    assert!(answer.get("result").is_some(), "{answer}");
    assert!(!updates.is_empty(), "the history replayed");
    client.finish();
    let setups: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|m| m["method"] == "session/new")
        .collect();
    assert_eq!(setups.len(), 1, "{setups:?}");
    let servers = &setups[0]["params"]["mcpServers"];
    assert_eq!(servers[0]["name"], "acp-journal-history", "{servers}");
    let args = servers[0]["args"].as_array().unwrap();
    assert_eq!(args[args.len() - 1], ours.to_str().unwrap());
}

/// `--store`: the server reads the team's sessions as `search --store` and `show --store` do,
/// from a host whose own journal directory is empty; a session erased from the store is never
/// answered.
#[test]
fn mcp_with_a_store_answers_the_teams_sessions_and_never_an_erased_one() {
    let python = Peers::get().py_echo_agent()[0].clone();
    let shared = tempfile::tempdir().unwrap();
    let url = format!("file://{}", shared.path().join("store").display());
    let a = Host::new(&url, &[]);
    let ours = repository(a.dir.path(), "ours");
    let converse = |text: &str| {
        let mut client = a.proxy(&Peers::get().py_echo_agent(), &[]);
        client.initialize();
        let session = client.new_session(ours.to_str().unwrap());
        let answer = client.prompt(&session, text);
        assert!(answer.get("result").is_some(), "{answer}");
        client.finish();
        session
    };
    let kept = converse("the lantern test, kept");
    let gone = converse("the lantern test, erased");
    let reader = Host::new(&url, &[]);
    eventually("both listed", || {
        let (_, out, _) = reader.cli(&["list", "--json"]);
        (!(out.contains(&kept) && out.contains(&gone))).then_some(out)
    });
    let (code, _, err) = reader.cli(&["erase", &gone]);
    assert_eq!(code, 0, "{err}");

    let c = Host::new(&url, &[]);
    let server = [
        bin().display().to_string(),
        "--journal-dir".into(),
        c.journals().display().to_string(),
        "--store".into(),
        url.clone(),
        "mcp".into(),
    ];
    let report = ask_server(
        &python,
        &server,
        &ours,
        &c.env,
        json!([
            ["search_sessions", {"query": "lantern"}],
            ["read_session", {"session": kept}],
            ["read_session", {"session": gone}],
        ]),
    );
    let results = &report["results"];
    let sessions: Vec<&str> = results[0]["structured"]["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["session"].as_str().unwrap())
        .collect();
    assert!(!sessions.is_empty(), "{report}");
    assert!(sessions.iter().all(|s| *s == kept), "{sessions:?}");
    let transcript = results[1]["structured"]["quoted_transcript"]
        .as_str()
        .unwrap();
    assert!(
        transcript.contains("the lantern test, kept"),
        "{transcript}"
    );
    assert_eq!(results[2]["is_error"], true, "{report}");
}

/// `--listen`: Streamable HTTP at `/mcp` on loopback, the bearer token on every request; the
/// SDK's HTTP client gets the answers the stdio one gets; no token or a wrong one, 401; a
/// non-loopback address refused.
#[test]
fn mcp_over_streamable_http_needs_the_token_and_answers_as_over_stdio() {
    use std::io::{BufRead, Read, Write};
    let python = Peers::get().py_echo_agent()[0].clone();
    let agent = Peers::get().py_echo_agent();
    let home = tempfile::tempdir().unwrap();
    let store = home.path().join("journals");
    let ours = repository(home.path(), "ours");
    record(&store, &agent, &ours, &["the lantern over http"]);
    let token = "a-token-of-twenty-four-ch";
    let mut server = std::process::Command::new(bin())
        .args([
            "--journal-dir",
            store.to_str().unwrap(),
            "mcp",
            "--listen",
            "127.0.0.1:0",
        ])
        .env("ACP_JOURNAL_TOKEN", token)
        .current_dir(&ours)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut said = String::new();
    std::io::BufReader::new(server.stderr.take().unwrap())
        .read_line(&mut said)
        .unwrap();
    let url = said.trim().rsplit(' ').next().unwrap().to_string();
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"),
        "{said}"
    );

    let calls = json!([["search_sessions", {"query": "lantern"}]]);
    let out = std::process::Command::new(&python)
        .arg(crate::util::root().join("tests/agents/mcp_client.py"))
        .arg(calls.to_string())
        .args(["--url", &url])
        .env("MCP_BEARER", token)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let over_http: Value = serde_json::from_slice(&out.stdout).unwrap();
    let over_stdio = ask(&python, &store, &ours, &[], calls);
    assert_eq!(over_http["tools"], over_stdio["tools"]);
    assert_eq!(over_http["results"], over_stdio["results"]);
    assert!(
        !over_http["results"][0]["structured"]["matches"]
            .as_array()
            .unwrap()
            .is_empty()
    );

    let address = url.trim_start_matches("http://").trim_end_matches("/mcp");
    for authorization in ["", "Authorization: Bearer not-the-token-at-all\r\n"] {
        let mut socket = std::net::TcpStream::connect(address).unwrap();
        write!(
            socket,
            "POST /mcp HTTP/1.1\r\nHost: {address}\r\n{authorization}Content-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}"
        )
        .unwrap();
        let mut answer = String::new();
        socket.read_to_string(&mut answer).unwrap();
        assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    }
    server.kill().unwrap();
    server.wait().unwrap();

    let (code, _, err) = crate::util::run_cli_store(&store, &["mcp", "--listen", "0.0.0.0:0"]);
    assert_eq!(code, 2);
    assert!(err.contains("loopback"), "{err}");
}
