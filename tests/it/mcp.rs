//! `acp-journal mcp` driven by a real MCP client (the official Python SDK, `mcp`, pinned by
//! scripts/install-peers.sh) over stdio and Streamable HTTP, on journals recorded through the
//! proxy: its tools and their schemas, answers equal to `search`, `show` and `blame` of the
//! same journals, its scope (the repository it runs in; another repository's session and a
//! deleted one never answered, nor credited with a line; no file outside the repository
//! blamed), its resources (a session's transcript each), answers bounded, paged, redacted and
//! limited in rate, the team's sessions read through `--store` (an erased one never answered),
//! the bearer token over HTTP; and `--offer-history`: the server added to the agent's
//! `session/new` (and to the setup a load from the journal sends), the client's entries kept,
//! the edit journaled, the entry usable alone.

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

/// `session/delete` of `session`, through the proxy with `agent`: answered, and the session
/// deleted from the catalog.
fn delete(store: &Path, agent: &[String], session: &str) {
    let mut client = TestClient::spawn(&proxied(store, agent));
    client.initialize();
    let said = client.request("session/delete", json!({"sessionId": session}));
    assert_eq!(said["result"], json!({}), "{said}");
    client.finish();
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
    delete(&store, &agent, &deleted);
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
        [
            "blame_lines",
            "read_session",
            "search_sessions",
            "sessions_touching_path"
        ]
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

/// Whose a row of `blame_lines` or `blame --json` is: `<name>:<turn>` of the session in `names`
/// whose agent wrote it, else git's author.
fn whose(row: &Value, names: &[(&str, &str)]) -> String {
    let agent = &row["agent"];
    if agent.is_null() {
        return row["author"].as_str().unwrap().to_string();
    }
    let name = names
        .iter()
        .find(|(_, id)| agent["session"] == *id)
        .map_or("an unknown session", |(name, _)| name);
    format!("{name}:{}", agent["turn"])
}

/// A tool's structured answer; the test fails on a refusal.
fn structured(result: &Value) -> &Value {
    assert_eq!(result["is_error"], false, "{result}");
    &result["structured"]
}

/// `blame_lines`: whose each line is, as `blame --json` says (the same commit, author and turn,
/// the prompt quoted), counting only the sessions in scope: a session of another directory that
/// wrote into the repository by its absolute path, and a deleted one, credit no line; a path
/// out of the repository (`..`, absolute, a symbolic link) refused, the file never read; an
/// answer cut at 400 lines or at the answer limit names the next range.
#[test]
fn blame_lines_gives_each_line_as_blame_does_counting_the_sessions_in_scope_only() {
    use crate::blame::{PERSON, Repo};
    let python = Peers::get().py_echo_agent()[0].clone();
    let repo = Repo::new();
    let root = repo.path().canonicalize().unwrap();
    repo.write(
        "src/lib.rs",
        &["// a library", "pub fn base() -> u32 { 1 }", "// end"],
    );
    let long: Vec<String> = (1..=401).map(|n| format!("line {n}")).collect();
    let long: Vec<&str> = long.iter().map(String::as_str).collect();
    repo.write("long.txt", &long);
    repo.commit("base");
    let mut s = repo.session(&root);
    s.turn(
        1,
        "write src/lib.rs
// a library
pub fn greet(name: &str) -> String {
    format!(\"hello {name}\")
}
pub fn base() -> u32 { 1 }
// end
.",
    );
    s.turn(
        2,
        "replace src/lib.rs\npub fn base() -> u32 { 1 }\n---\npub fn base() -> u32 { 2 }\n.",
    );
    let s = s.end();
    // Out of scope: a session of another directory, writing into the repository by path.
    let elsewhere = tempfile::tempdir().unwrap();
    let mut other = repo.session(elsewhere.path());
    let notes = root.join("notes.md");
    other.turn(
        1,
        &format!(
            "write {}\nwritten from another directory\n.",
            notes.display()
        ),
    );
    let other = other.end();
    // A session deleted after it wrote a line.
    let mut gone = repo.session(&root);
    gone.turn(
        1,
        "replace src/lib.rs\n// end\n---\n// end\n// from a session deleted later\n.",
    );
    let gone = gone.end();
    delete(repo.journals.path(), &crate::blame::edit_agent(), &gone);
    repo.commit("work");
    let mut text = std::fs::read_to_string(root.join("src/lib.rs")).unwrap();
    text.push_str("// uncommitted note by Ann\n");
    std::fs::write(root.join("src/lib.rs"), text).unwrap();
    // A file outside the repository, and a link to it inside.
    let secret = elsewhere.path().join("secret.txt");
    std::fs::write(&secret, "the secret outside\n").unwrap();
    std::os::unix::fs::symlink(&secret, root.join("link.txt")).unwrap();
    let up = format!(
        "../{}/secret.txt",
        elsewhere.path().file_name().unwrap().to_str().unwrap()
    );
    assert!(root.join(&up).exists(), "{up}");

    let report = ask(
        &python,
        repo.journals.path(),
        &root,
        &[],
        json!([
            ["blame_lines", {"path": "src/lib.rs"}],
            ["blame_lines", {"path": root.join("src/lib.rs"), "start": 2, "end": 3}],
            ["blame_lines", {"path": "notes.md"}],
            ["blame_lines", {"path": up}],
            ["blame_lines", {"path": secret}],
            ["blame_lines", {"path": "link.txt"}],
            ["blame_lines", {"path": "long.txt"}],
            ["blame_lines", {"path": "long.txt", "start": 401}],
            ["blame_lines", {"path": "long.txt", "start": 2, "end": 401}],
        ]),
    );
    let results = report["results"].as_array().unwrap();
    let names = [
        ("s", s.as_str()),
        ("other", other.as_str()),
        ("gone", gone.as_str()),
    ];
    let whose_all = |answer: &Value| -> Vec<(u64, String)> {
        answer["lines"]
            .as_array()
            .unwrap()
            .iter()
            .map(|row| (row["line"].as_u64().unwrap(), whose(row, &names)))
            .collect()
    };
    let expected = |lines: &[(u64, &str)]| -> Vec<(u64, String)> {
        lines.iter().map(|(n, w)| (*n, w.to_string())).collect()
    };

    // Every line: the agent's turns, the person's lines, and the deleted session's line the
    // person's (git's author), where `blame` gives it to that session.
    let full = structured(&results[0]);
    assert_eq!(full["path"], "src/lib.rs");
    assert_eq!(full["next"], Value::Null);
    assert_eq!(
        whose_all(full),
        expected(&[
            (1, PERSON),
            (2, "s:1"),
            (3, "s:1"),
            (4, "s:1"),
            (5, "s:2"),
            (6, PERSON),
            (7, PERSON),
            (8, "Not Committed Yet"),
        ])
    );
    let cli = repo.blame_json("src/lib.rs");
    let by_cli: Vec<(u64, String)> = cli
        .iter()
        .map(|row| (row["line"].as_u64().unwrap(), whose(row, &names)))
        .collect();
    assert_eq!(by_cli[6], (7, "gone:1".to_string()), "{cli:?}");
    let head = repo.git(&["rev-parse", "HEAD"]).trim().to_string();
    let base = repo.git(&["rev-parse", "HEAD~1"]).trim().to_string();
    let rows = full["lines"].as_array().unwrap();
    for (row, cli) in rows.iter().zip(&cli) {
        assert_eq!(row["commit"], cli["commit"], "{row} {cli}");
        assert_eq!(row["author"], cli["author"], "{row} {cli}");
        if row["agent"].is_null() {
            continue;
        }
        // The agent's fields as `blame` gives them, its prompt quoted.
        let mut agent = cli["agent"].clone();
        let prompt = agent.as_object_mut().unwrap().remove("prompt").unwrap();
        agent["quoted_prompt"] = prompt;
        assert_eq!(row["agent"], agent);
    }
    assert_eq!(rows[0]["commit"], base.as_str());
    assert_eq!(rows[1]["commit"], head.as_str());
    assert_eq!(rows[7]["commit"], Value::Null);
    assert_eq!(rows[1]["agent"]["quoted_prompt"], "Turn 1 of the test");
    assert_eq!(rows[4]["agent"]["quoted_prompt"], "Turn 2 of the test");
    assert_eq!(rows[4]["agent"]["agent"], "edit-agent");
    assert_eq!(rows[4]["agent"]["model"], "edit-model-1");
    assert!(full["note"].as_str().unwrap().contains("quoted_"));

    // A range, the path absolute: those lines alone.
    let range = structured(&results[1]);
    assert_eq!(range["lines"], json!(rows[1..3]));
    assert_eq!(range["next"], Value::Null);

    // The line written from another directory: the person's, where `blame` gives it to that
    // session.
    assert_eq!(whose_all(structured(&results[2])), expected(&[(1, PERSON)]));
    let cli = repo.blame_json("notes.md");
    assert_eq!(cli[0]["agent"]["session"], other.as_str());

    // Out of the repository, by `..`, by its absolute path, by a link: refused, not read.
    for refused in &results[3..6] {
        assert_eq!(refused["is_error"], true, "{refused}");
        let said = refused["text"][0].as_str().unwrap();
        assert!(said.contains("is outside the repository"), "{said}");
        assert!(!refused.to_string().contains("the secret outside"));
    }

    // 401 lines: 400, then the next range; the range asked up to the file's last line.
    let first = structured(&results[6]);
    let numbers = |answer: &Value| -> Vec<u64> {
        answer["lines"]
            .as_array()
            .unwrap()
            .iter()
            .map(|row| row["line"].as_u64().unwrap())
            .collect()
    };
    assert_eq!(numbers(first), (1..=400).collect::<Vec<u64>>());
    assert_eq!(first["next"], json!({"start": 401, "end": null}));
    let rest = structured(&results[7]);
    assert_eq!(numbers(rest), [401]);
    assert_eq!(rest["next"], Value::Null);
    let last = structured(&results[8]);
    assert_eq!(numbers(last), (2..=401).collect::<Vec<u64>>());
    assert_eq!(last["next"], Value::Null);

    // Within a 40-byte answer limit: the prompts of two lines fit, the third's is the next
    // answer's, which goes on to the end.
    let report = ask(
        &python,
        repo.journals.path(),
        &root,
        &["--answer-limit", "40"],
        json!([
            ["blame_lines", {"path": "src/lib.rs"}],
            ["blame_lines", {"path": "src/lib.rs", "start": 4}],
        ]),
    );
    let cut = structured(&report["results"][0]);
    assert_eq!(cut["lines"], json!(rows[..3]));
    assert_eq!(cut["next"], json!({"start": 4, "end": null}));
    let on = structured(&report["results"][1]);
    assert_eq!(on["lines"], json!(rows[3..]));
    assert_eq!(on["next"], Value::Null);
}

/// The resource of `session`.
fn uri(session: &str) -> String {
    format!("acp-journal://session/{session}")
}

/// Resources: each session in scope is one (`acp-journal://session/<id>`, text/plain), listed
/// newest first in pages whose titles (at most 80 bytes each) fit the answer limit, read as
/// `read_session` renders it from turn 0 (cut at the limit, saying where and how to read on),
/// redacted; another repository's session, a deleted one and an ID's prefix neither listed nor
/// read.
#[test]
fn mcp_resources_are_the_sessions_in_scope_read_as_read_session_renders_them() {
    let peers = Peers::get();
    let python = peers.py_echo_agent()[0].clone();
    let agent = peers.py_echo_agent();
    let home = tempfile::tempdir().unwrap();
    let store = home.path().join("journals");
    let ours = repository(home.path(), "ours");
    let theirs = repository(home.path(), "theirs");
    let short = record(&store, &agent, &ours, &["a short one about the lantern"]);
    let title = format!("the long one: {}", "lantern ".repeat(35));
    let long = record(&store, &agent, &ours, &[&title, "the second turn"]);
    let token = "ghp_Q8zK2mN4pR6tV8xB1dF3hJ5lN7pR9tV1xB3d";
    let mut client =
        TestClient::spawn(&crate::util::proxied_with(&store, &["--no-redact"], &agent));
    let secret = client.start_session(ours.to_str().unwrap());
    client.prompt(&secret, &format!("the lantern key is {token}"));
    client.finish();
    let other = record(&store, &agent, &theirs, &["in another repository"]);
    let deleted = record(&store, &agent, &ours, &["deleted later"]);
    delete(&store, &agent, &deleted);

    // Newest first, a page each: two titles together are past a 100-byte limit.
    let report = ask(
        &python,
        &store,
        &ours,
        &["--answer-limit", "100"],
        json!([
            ["resources/list", {}],
            ["resources/list", {"cursor": "not a cursor"}],
        ]),
    );
    assert!(report["capabilities"]["resources"].is_object(), "{report}");
    let results = report["results"].as_array().unwrap();
    let pages = results[0]["pages"].as_array().unwrap();
    let listed: Vec<Vec<&str>> = pages
        .iter()
        .map(|page| {
            page["resources"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["name"].as_str().unwrap())
                .collect()
        })
        .collect();
    assert_eq!(
        listed,
        [[secret.as_str()], [long.as_str()], [short.as_str()]],
        "{pages:?}"
    );
    for page in pages {
        let resource = &page["resources"][0];
        let name = resource["name"].as_str().unwrap();
        assert_eq!(resource["uri"], uri(name));
        assert_eq!(resource["mimeType"], "text/plain");
        assert!(
            resource["description"]
                .as_str()
                .unwrap()
                .contains("never instructions")
        );
    }
    assert_eq!(
        pages[2]["resources"][0]["title"],
        "a short one about the lantern"
    );
    let listing = results[0].to_string();
    assert!(
        !listing.contains(token) && listing.contains("REDACTED"),
        "{listing}"
    );
    assert_eq!(results[1]["error"]["code"], -32602, "{}", results[1]);

    let report = ask(
        &python,
        &store,
        &ours,
        &["--answer-limit", "300"],
        json!([
            ["resources/read", {"uri": uri(&short)}],
            ["read_session", {"session": short, "from_turn": 0}],
            ["resources/read", {"uri": uri(&long)}],
            ["read_session", {"session": long, "from_turn": 0}],
            ["resources/read", {"uri": uri(&secret)}],
            ["resources/read", {"uri": uri(&other)}],
            ["resources/read", {"uri": uri(&deleted)}],
            ["resources/read", {"uri": uri(&short[..8])}],
            ["resources/read", {"uri": format!("file://{}", store.display())}],
        ]),
    );
    let results = report["results"].as_array().unwrap();
    let text = |read: &Value| -> String {
        let contents = read["contents"].as_array().unwrap();
        assert_eq!(contents.len(), 1, "{read}");
        assert_eq!(contents[0]["mimeType"], "text/plain");
        contents[0]["text"].as_str().unwrap().to_string()
    };

    // A session within the limit: read_session's text, whole.
    let whole = structured(&results[1]);
    assert_eq!(whole["next_turn"], Value::Null);
    assert_eq!(results[0]["contents"][0]["uri"], uri(&short));
    assert_eq!(
        text(&results[0]),
        whole["quoted_transcript"].as_str().unwrap()
    );
    assert!(text(&results[0]).contains("a short one about the lantern"));

    // Past it: cut where read_session cuts, saying so and where to read on.
    let cut = structured(&results[3]);
    assert_eq!(cut["next_turn"], 1, "{cut}");
    assert_eq!(
        text(&results[2]),
        format!(
            "{}\n[acp-journal: the answer limit ends the text here, after turn 0; read_session with session {long} and from_turn 1 reads on]\n",
            cut["quoted_transcript"].as_str().unwrap()
        )
    );

    // Redacted, though recorded as it was.
    let read = text(&results[4]);
    assert!(
        read.contains("the lantern key is") && read.contains("REDACTED"),
        "{read}"
    );
    assert!(!read.contains(token));

    // Another repository's session, a deleted one, a prefix, another scheme: not found.
    for refused in &results[5..9] {
        assert_eq!(refused["error"]["code"], -32002, "{refused}");
        assert!(
            refused["error"]["message"]
                .as_str()
                .unwrap()
                .contains("no session")
        );
    }
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

/// `--store`: the server reads the team's sessions as `search --store`, `show --store` and
/// `blame --store` do, from a host whose own journal directory is empty; a session erased from
/// the store is never answered, listed nor read.
#[test]
fn mcp_with_a_store_answers_the_teams_sessions_and_never_an_erased_one() {
    let python = Peers::get().py_echo_agent()[0].clone();
    let shared = tempfile::tempdir().unwrap();
    let url = format!("file://{}", shared.path().join("store").display());
    let a = Host::new(&url, &[]);
    let repo = crate::blame::Repo::new();
    repo.write("shared.rs", &["// shared"]);
    repo.commit("base");
    let ours = repo.path().canonicalize().unwrap();
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
    // A session of our edit agent writes a line, committed.
    let mut client = a.proxy(&crate::blame::edit_agent(), &[]);
    client.initialize();
    let edit = client.new_session(ours.to_str().unwrap());
    let answer = crate::blame::prompt_writing_files(
        &mut client,
        100,
        &edit,
        "Turn 1 of the test\nwrite shared.rs\n// shared\nfn written_on_the_first_machine() {}\n.",
    );
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    client.finish();
    repo.commit("work");
    let reader = Host::new(&url, &[]);
    eventually("all listed", || {
        let (_, out, _) = reader.cli(&["list", "--json"]);
        (![&kept, &gone, &edit]
            .iter()
            .all(|s| out.contains(s.as_str())))
        .then_some(out)
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
            ["resources/list", {}],
            ["resources/read", {"uri": uri(&gone)}],
            ["blame_lines", {"path": "shared.rs"}],
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
    let mut listed: Vec<&str> = results[3]["pages"][0]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    listed.sort_unstable();
    let mut expected = [kept.as_str(), edit.as_str()];
    expected.sort_unstable();
    assert_eq!(listed, expected, "{report}");
    assert_eq!(results[4]["error"]["code"], -32002, "{report}");
    // The teammate's line, given to the session that wrote it.
    let blamed = structured(&results[5]);
    let whose: Vec<&Value> = blamed["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| &row["agent"]["session"])
        .collect();
    assert_eq!(whose, [&Value::Null, &json!(edit)], "{blamed}");
}

/// `--listen`: Streamable HTTP at `/mcp` on loopback, the bearer token on every request; the
/// SDK's HTTP client gets the answers the stdio one gets; no token or a wrong one, 401; a
/// non-loopback address refused.
#[test]
fn mcp_over_streamable_http_needs_the_token_and_answers_as_over_stdio() {
    use std::io::BufRead;
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
    let over_http = ask_url(&python, &url, token, &calls);
    let over_stdio = ask(&python, &store, &ours, &[], calls);
    assert_eq!(over_http["tools"], over_stdio["tools"]);
    assert_eq!(over_http["results"], over_stdio["results"]);
    assert!(
        !over_http["results"][0]["structured"]["matches"]
            .as_array()
            .unwrap()
            .is_empty()
    );

    for authorization in ["", "Authorization: Bearer not-the-token-at-all\r\n"] {
        let answer = post_status(&url, authorization);
        assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    }
    server.kill().unwrap();
    server.wait().unwrap();

    let (code, _, err) = crate::util::run_cli_store(&store, &["mcp", "--listen", "0.0.0.0:0"]);
    assert_eq!(code, 2);
    assert!(err.contains("loopback"), "{err}");
}

/// The MCP client's report: the Streamable HTTP server at `url`, with `token`, asked `calls`.
fn ask_url(python: &str, url: &str, token: &str, calls: &Value) -> Value {
    let out = std::process::Command::new(python)
        .arg(crate::util::root().join("tests/agents/mcp_client.py"))
        .arg(calls.to_string())
        .args(["--url", url])
        .env("MCP_BEARER", token)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The status line and what follows of an empty JSON POST to `url` (`http://HOST:PORT/PATH`)
/// with the `authorization` header line (`""`: none).
fn post_status(url: &str, authorization: &str) -> String {
    use std::io::{Read, Write};
    let rest = url.trim_start_matches("http://");
    let (address, path) = rest.split_at(rest.find('/').unwrap());
    let mut socket = std::net::TcpStream::connect(address).unwrap();
    write!(
        socket,
        "POST {path} HTTP/1.1\r\nHost: {address}\r\n{authorization}Content-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}"
    )
    .unwrap();
    let mut answer = String::new();
    socket.read_to_string(&mut answer).unwrap();
    answer
}

/// `serve --offer-history` hosting an agent that declares MCP over HTTP: its `session/new`
/// carries an HTTP entry for serve's own loopback endpoint, scoped to the session's
/// repository by its URL and a bearer token of its own, which the real MCP client uses to
/// search that repository's sessions only; the same URL without the token, with serve's
/// client token, or the token on another repository's URL is refused (401); the journal keeps
/// the entry with its token redacted, and the token nowhere, even under `--no-redact`.
#[test]
fn serve_offers_an_agent_that_takes_http_its_own_endpoint_with_a_token_for_the_repository_alone() {
    use crate::serve::{Served, TOKEN, websocket, ws_call};
    let python = Peers::get().py_echo_agent()[0].clone();
    let agent = Peers::get().py_echo_agent();
    let home = tempfile::tempdir().unwrap();
    let store = home.path().join("journals");
    let ours = repository(home.path(), "ours");
    let theirs = repository(home.path(), "theirs");
    let other = record(&store, &agent, &theirs, &["the lantern of theirs"]);
    let log = home.path().join("agent.log");
    let served = Served::start_env(
        &store,
        // Even unredacted journals never hold the token.
        &["--offer-history", "--no-redact"],
        &scripted("otel"),
        &[
            ("ACP_JOURNAL_TOKEN", TOKEN),
            ("AGENT_LOG", log.to_str().unwrap()),
            ("AGENT_MCP_HTTP", "1"),
        ],
    );
    let mut ws = websocket(&served);
    let init = ws_call(
        &mut ws,
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": {}}}),
    );
    assert_eq!(
        init["result"]["agentCapabilities"]["mcpCapabilities"]["http"], true,
        "{init}"
    );
    let new = ws_call(
        &mut ws,
        json!({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": ours.to_str().unwrap(), "mcpServers": []}}),
    );
    let session = new["result"]["sessionId"].as_str().unwrap().to_string();
    let prompt = ws_call(
        &mut ws,
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {"sessionId": session, "prompt": [{"type": "text", "text": "the lantern of ours"}]}}),
    );
    assert_eq!(prompt["result"]["stopReason"], "end_turn", "{prompt}");
    crate::serve::show_until(&store, &session, "the lantern of ours");

    // What the agent was sent: the HTTP entry, and nothing of stdio.
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
    assert_eq!(servers.len(), 1, "{setup}");
    let entry = &servers[0];
    let url = entry["url"].as_str().unwrap();
    let repository_query = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("repository", ours.to_str().unwrap())
        .finish();
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with(&format!("/mcp?{repository_query}")),
        "{entry}"
    );
    assert_eq!(entry["type"], "http");
    assert_eq!(entry["name"], "acp-journal-history");
    assert_eq!(entry.get("command"), None);
    let headers = entry["headers"].as_array().unwrap();
    assert_eq!(headers.len(), 1, "{entry}");
    assert_eq!(headers[0]["name"], "Authorization");
    let token = headers[0]["value"]
        .as_str()
        .unwrap()
        .strip_prefix("Bearer ")
        .unwrap()
        .to_string();
    assert!(token.len() >= 32 && token != TOKEN, "{token}");

    // The real MCP client at that URL with that token: this repository's session only.
    let report = ask_url(
        &python,
        url,
        &token,
        &json!([["search_sessions", {"query": "lantern"}]]),
    );
    let matches = report["results"][0]["structured"]["matches"]
        .as_array()
        .unwrap()
        .clone();
    assert!(!matches.is_empty(), "{report}");
    assert!(
        matches.iter().all(|m| m["session"] == session.as_str()),
        "{report}"
    );
    assert!(!report.to_string().contains(&other), "{report}");

    // Refused: no token, serve's own token, a guess, this token on another repository's URL.
    let theirs_url = url.replace(
        &repository_query,
        &url::form_urlencoded::Serializer::new(String::new())
            .append_pair("repository", theirs.to_str().unwrap())
            .finish(),
    );
    for (url, authorization) in [
        (url.to_string(), String::new()),
        (
            url.to_string(),
            format!("Authorization: Bearer {TOKEN}\r\n"),
        ),
        (
            url.to_string(),
            format!("Authorization: Bearer {token}x\r\n"),
        ),
        (theirs_url, format!("Authorization: Bearer {token}\r\n")),
    ] {
        let answer = post_status(&url, &authorization);
        assert!(
            answer.starts_with("HTTP/1.1 401"),
            "{url} {authorization}: {answer}"
        );
    }
    // The token on its own URL gets through (rmcp answers the empty message itself).
    let answer = post_status(url, &format!("Authorization: Bearer {token}\r\n"));
    assert!(!answer.starts_with("HTTP/1.1 401"), "{answer}");

    // The journal: the client's request as it sent it, then the entry with its token redacted.
    let (code, raw, err) = run_cli_store(&store, &["show", "--raw", &session]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = raw.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.contains("\"session/new\""))
        .unwrap();
    let edit: Value =
        serde_json::from_str(&lines[at + 1][lines[at + 1].find('{').unwrap()..]).unwrap();
    let mut redacted = entry.clone();
    redacted["headers"][0]["value"] = json!("Bearer [REDACTED]");
    assert_eq!(edit, json!({"type": "history_offered", "server": redacted}));
    served.stop();

    // Served again (a new key): the session loaded from the journal is brought up on the agent
    // by the proxy's own `session/new`, which carries a new token; the old one is refused, and
    // neither is in any journal.
    let served = Served::start_env(
        &store,
        &["--offer-history", "--no-redact"],
        &scripted("otel"),
        &[
            ("ACP_JOURNAL_TOKEN", TOKEN),
            ("AGENT_LOG", log.to_str().unwrap()),
            ("AGENT_MCP_HTTP", "1"),
        ],
    );
    let mut ws = websocket(&served);
    ws_call(
        &mut ws,
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": {}}}),
    );
    let load = ws_call(
        &mut ws,
        json!({"jsonrpc": "2.0", "id": 1, "method": "session/load", "params": {"sessionId": session, "cwd": ours.to_str().unwrap(), "mcpServers": []}}),
    );
    assert!(load.get("result").is_some(), "{load}");
    let setups: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|m| m["method"] == "session/new")
        .collect();
    assert_eq!(setups.len(), 2, "{setups:?}");
    let again = &setups[1]["params"]["mcpServers"][0];
    let again_url = again["url"].as_str().unwrap();
    assert!(
        again_url.ends_with(&format!("/mcp?{repository_query}")),
        "{again}"
    );
    let again_token = again["headers"][0]["value"]
        .as_str()
        .unwrap()
        .strip_prefix("Bearer ")
        .unwrap()
        .to_string();
    assert_ne!(again_token, token);
    let answer = post_status(again_url, &format!("Authorization: Bearer {token}\r\n"));
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    served.stop();
    let journals = format!("{:?}", crate::util::read_store(&store));
    assert!(journals.contains("history_offered"));
    for token in [&token, &again_token] {
        assert!(
            !journals.contains(token.as_str()),
            "a token is in a journal"
        );
    }
}
