//! `acp-journal serve`'s page: its routes and sign-in over raw sockets, and the page itself in
//! Debian's headless chromium driven by puppeteer-core (`tests/agents/page_driver.mjs`; both
//! installed by `scripts/install-chromium.sh`, which `scripts/test.sh` runs), in front of real
//! agents with a real SDK client. Screenshots go to `target/page-screenshots/`.

use std::io::{BufRead, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::serve::{Reply, Served, TOKEN, of_kind, request_to as http, sdk_client};
use crate::util::{Peers, TIMEOUT, python, root, screenshots};

/// Agent output that would add elements, or run script, if the page did not escape it.
const HOSTILE: &str = "<img src=x onerror=\"window.__pwned=1\"><script>window.__pwned=1</script>";
const HOSTILE_TOO: &str = "<b>bold?</b><img src=x onerror=\"window.__pwned=1\"> & done";

/// The Content-Security-Policy every page response carries.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
                   img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// A WebSocket upgrade of `/acp` with `extra` headers: its status.
fn upgrade(served: &Served, extra: &[String]) -> u16 {
    upgrade_with(served, extra).0
}

/// A WebSocket upgrade of `/acp` with `extra` headers: its status, and the subprotocol the
/// server picked.
fn upgrade_with(served: &Served, extra: &[String]) -> (u16, Option<String>) {
    let mut headers = vec![
        "Upgrade: websocket".to_string(),
        "Connection: Upgrade".into(),
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==".into(),
        "Sec-WebSocket-Version: 13".into(),
    ];
    headers.extend_from_slice(extra);
    let mut socket = TcpStream::connect(served.addr).unwrap();
    socket.set_read_timeout(Some(TIMEOUT)).unwrap();
    let mut head = format!("GET /acp HTTP/1.1\r\nHost: {}\r\n", served.addr);
    for h in &headers {
        head.push_str(h);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    socket.write_all(head.as_bytes()).unwrap();
    let mut reader = std::io::BufReader::new(socket);
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    let status = line[9..12].parse().unwrap();
    let mut protocol = None;
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap() == 0 || line.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("sec-websocket-protocol")
        {
            protocol = Some(value.trim().to_string());
        }
    }
    (status, protocol)
}

/// The page's headers, on every response of its paths.
fn assert_page_headers(reply: &Reply, what: &str) {
    assert_eq!(reply.header("content-security-policy"), Some(CSP), "{what}");
    assert_eq!(
        reply.header("x-content-type-options"),
        Some("nosniff"),
        "{what}"
    );
    assert_eq!(
        reply.header("referrer-policy"),
        Some("no-referrer"),
        "{what}"
    );
}

/// The `Sec-WebSocket-Protocol` header the page sends for `token`.
fn page_protocols(token: &str) -> String {
    use base64::Engine;
    let encoded = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(token);
    format!("Sec-WebSocket-Protocol: acp-journal, acp-journal.bearer.{encoded}")
}

#[test]
fn the_page_holds_nothing_and_only_the_token_opens_its_websocket() {
    let store = tempfile::tempdir().unwrap();
    let served = Served::start(store.path(), &[], &Peers::get().ts_agent());
    let addr = served.addr;
    let own = format!("Origin: http://{addr}");

    // The page: to anyone, its files from this server only, no session data, no cookie.
    let page = http(addr, "GET", "/", &[], b"");
    assert_eq!(page.status, 200);
    assert_page_headers(&page, "the page");
    assert_eq!(page.header("cache-control"), Some("no-store"));
    assert!(page.header("set-cookie").is_none());
    assert!(
        page.text().contains("id=\"sign-in-form\""),
        "{}",
        page.text()
    );
    for file in [
        "src=\"/team.js\"",
        "src=\"/diff.js\"",
        "src=\"/tools.js\"",
        "src=\"/subagents.js\"",
        "src=\"/page.js\"",
        "href=\"/page.css\"",
    ] {
        assert!(page.text().contains(file), "{file}: {}", page.text());
    }
    assert!(!page.text().contains("http://") && !page.text().contains("https://"));
    for (path, kind) in [
        ("/page.js", "text/javascript; charset=utf-8"),
        ("/team.js", "text/javascript; charset=utf-8"),
        ("/diff.js", "text/javascript; charset=utf-8"),
        ("/tools.js", "text/javascript; charset=utf-8"),
        ("/subagents.js", "text/javascript; charset=utf-8"),
        ("/page.css", "text/css; charset=utf-8"),
    ] {
        let asset = http(addr, "GET", path, &[], b"");
        assert_eq!(asset.status, 200, "{path}");
        assert_eq!(asset.header("content-type"), Some(kind));
        assert_page_headers(&asset, path);
        assert_eq!(asset.header("cache-control"), Some("no-cache"));
        let etag = asset.header("etag").expect("an ETag").to_string();
        let again = http(addr, "GET", path, &[format!("If-None-Match: {etag}")], b"");
        assert_eq!(again.status, 304, "{path}");
        assert!(!asset.text().contains("http://") && !asset.text().contains("https://"));
    }
    let css = http(addr, "GET", "/page.css", &[], b"").text();
    assert!(
        css.contains(".tool .body") && css.contains(".d-ins") && css.contains(".session-row"),
        "the export's cards and the page's own"
    );
    assert_eq!(http(addr, "GET", "/index.html", &[], b"").status, 404);
    assert_eq!(http(addr, "GET", "/acp/x", &[], b"").status, 404);
    assert_eq!(http(addr, "POST", "/", &[], b"token=x").status, 405);
    assert_eq!(
        http(addr, "POST", "/login", &[], b"token=x").status,
        404,
        "no login route: the token is checked on the WebSocket only"
    );

    // An old link, `/?token=`: moved into the fragment (which the browser keeps to itself),
    // checked nowhere here, no cookie.
    for given in [TOKEN, "wrong", "a+b%2Fc"] {
        let moved = http(addr, "GET", &format!("/?token={given}"), &[], b"");
        assert_eq!(moved.status, 303, "{given}");
        assert!(moved.header("set-cookie").is_none());
        assert_page_headers(&moved, "the redirect");
        let want = match given {
            "a+b%2Fc" => "/#token=a%20b%2Fc".to_string(),
            other => format!("/#token={other}"),
        };
        assert_eq!(moved.header("location"), Some(want.as_str()));
    }

    // The WebSocket takes the token as the page shows it, a subprotocol, with the Origin check
    // as ever; the token's subprotocol is never echoed.
    let protocols = page_protocols(TOKEN);
    let (status, accepted) = upgrade_with(&served, &[protocols.clone(), own.clone()]);
    assert_eq!(status, 101);
    assert_eq!(accepted.as_deref(), Some("acp-journal"));
    assert_eq!(
        upgrade(
            &served,
            &[protocols.clone(), "Origin: https://evil.example".into()]
        ),
        403,
        "another origin"
    );
    assert_eq!(
        upgrade(&served, std::slice::from_ref(&own)),
        401,
        "no token"
    );
    assert_eq!(
        upgrade(
            &served,
            &[page_protocols("test-token-0123456788"), own.clone()]
        ),
        401,
        "a wrong one"
    );
    let as_is = format!("Sec-WebSocket-Protocol: acp-journal.bearer.{TOKEN}");
    assert_eq!(upgrade(&served, &[as_is, own.clone()]), 401, "not encoded");
    assert_eq!(
        upgrade(
            &served,
            &[format!("Cookie: acp_journal={TOKEN}"), own.clone()]
        ),
        401,
        "no cookie is a credential"
    );
    assert_eq!(
        upgrade(&served, &[format!("Authorization: Bearer {TOKEN}")]),
        101,
        "the bearer token as ever"
    );
    // Streamable HTTP takes the bearer header only.
    let initialize = br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}"#;
    let post = http(
        addr,
        "POST",
        "/acp",
        &[protocols, own, "Content-Type: application/json".into()],
        initialize,
    );
    assert_eq!(post.status, 401, "Streamable HTTP is bearer-only");

    let log = served.stop();
    assert!(!log.contains(TOKEN), "the token is never logged: {log}");
}

/// Run the page driver's `scenario` against `served` on `session`; its steps by name. Fails
/// with the driver's report when a step fails; prints the screenshots' paths.
fn drive(
    served: &Served,
    session: &str,
    scenario: &str,
    prompt: &str,
    expect: &str,
) -> std::collections::HashMap<String, Value> {
    drive_with(served, session, scenario, prompt, expect, &[])
}

/// [`drive`], with `extra` options for the driver.
fn drive_with(
    served: &Served,
    session: &str,
    scenario: &str,
    prompt: &str,
    expect: &str,
    extra: &[&str],
) -> std::collections::HashMap<String, Value> {
    let driver = Peers::get().page_driver();
    let base = served.url.trim_end_matches("/acp").to_string();
    let shots = screenshots();
    let out = Command::new(&driver[0])
        .args(&driver[1..])
        .args(["--url", &base, "--token", TOKEN, "--session", session])
        .args([
            "--scenario",
            scenario,
            "--prompt",
            prompt,
            "--expect",
            expect,
        ])
        .args(extra)
        .arg("--shots")
        .arg(&shots)
        .stdin(Stdio::null())
        .output()
        .expect("running the page driver (node)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let steps: std::collections::HashMap<String, Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|e| Some((e["step"].as_str()?.to_string(), e)))
        .collect();
    if let Some(error) = steps.get("error") {
        panic!(
            "the page driver failed at {}: {}\nproblems: {}\nscreenshot: {}\nDOM: {}\nserve: {}",
            error["at"],
            error["message"],
            error["problems"],
            error["screenshot"],
            error["html"],
            served.log()
        );
    }
    assert!(
        out.status.success(),
        "the page driver: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    for step in steps.values() {
        if let Some(shot) = step["screenshot"].as_str() {
            // Straight to stderr, past the test harness's capture: shown in every run's output.
            let line = format!("page screenshot ({scenario}, {}): {shot}\n", step["step"]);
            let _ = std::io::stderr().write_all(line.as_bytes());
        }
    }
    steps
}

/// A session made and prompted by the TypeScript SDK's client over WebSocket; its ID.
fn prompted_session(served: &Served, prompt: &str) -> String {
    let client = Peers::get().ts_remote_client();
    let (events, stderr) = sdk_client(
        &client,
        &served.url,
        "ws",
        &["--prompt", prompt, "--cwd", "/tmp"],
    );
    assert_eq!(of_kind(&events, "result").len(), 1, "{events:?}\n{stderr}");
    of_kind(&events, "session")[0]["sessionId"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn the_page_in_chromium_follows_a_session_answers_its_permission_request_and_prompts() {
    let store = tempfile::tempdir().unwrap();
    let served = Served::start(store.path(), &[], &Peers::get().ts_agent());
    // An SDK client first: a session whose turn asked (and got) a permission.
    let session = prompted_session(&served, "Summarize the project");
    let steps = drive(
        &served,
        &session,
        "converse",
        "Now tidy the config",
        "I've successfully updated the configuration",
    );

    // Without a token: the sign-in form, and nothing of the session.
    let form = &steps["sign-in-form"];
    assert_eq!(form["status"], 200);
    assert_eq!(form["layoutHidden"], true);
    let html = form["html"].as_str().unwrap();
    assert!(
        !html.contains(&session) && !html.contains("Summarize the project"),
        "{html}"
    );

    // A wrong token by an old link: one 303 into the fragment, then out of the address bar,
    // refused, not kept.
    let base = served.url.trim_end_matches("acp");
    let wrong = &steps["wrong-token"];
    let redirects = wrong["redirects"].as_array().unwrap();
    assert_eq!(redirects.len(), 1, "{wrong}");
    assert_eq!(redirects[0]["status"], 303);
    assert_eq!(
        wrong["url"], base,
        "the wrong token is gone from the address: {wrong}"
    );
    assert!(
        wrong["alert"].as_str().unwrap().contains("not the token"),
        "{wrong}"
    );
    assert_eq!(wrong["stored"], Value::Null);

    // The token in the fragment (which a browser never sends): gone from the address, kept
    // in the tab, no cookie at all.
    let signed = &steps["sign-in"];
    assert_eq!(signed["url"], base, "{signed}");
    assert_eq!(signed["documentCookie"], "");
    assert_eq!(signed["cookies"], 0);
    assert_eq!(signed["stored"], true);
    assert_eq!(signed["headers"]["content-security-policy"], CSP);
    assert_eq!(steps["form-sign-in"]["signInHidden"], true);

    // The list shows the session; opened, its history (the SDK client's turn, with its tool
    // calls as cards).
    let list = &steps["list"];
    assert!(
        list["row"]
            .as_str()
            .unwrap()
            .contains("Summarize the project"),
        "{list}"
    );
    assert_eq!(list["connection"], "connected");
    let opened = &steps["open"];
    assert_eq!(opened["turns"], 1, "{opened}");
    assert_eq!(
        opened["tools"], 2,
        "call_1 and call_2, updates merged: {opened}"
    );
    let history = opened["timeline"].as_str().unwrap();
    for text in [
        "Summarize the project",
        "Reading project files",
        "Modifying critical configuration file",
        "Perfect! I've successfully updated the configuration.",
    ] {
        assert!(history.contains(text), "{text} in {history}");
    }

    // The page's own prompt: an update arrives live, then the permission request, answered
    // from the page, and the turn ends.
    assert!(
        steps["live-update"]["agent"]
            .as_str()
            .unwrap()
            .contains("I'll help you with that"),
        "{}",
        steps["live-update"]
    );
    let asked = &steps["permission"];
    let options: Vec<&str> = asked["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"].as_str().unwrap())
        .collect();
    assert_eq!(options, ["allow", "reject"], "{asked}");
    assert!(
        asked["card"]
            .as_str()
            .unwrap()
            .contains("Permission for Modifying critical configuration file"),
        "{asked}"
    );
    // On a phone: one column, no sideways scrolling, buttons a finger can hit.
    let layout = &asked["layout"];
    assert_eq!(layout["viewport"], 390, "{layout}");
    assert!(
        layout["scrollWidth"].as_u64().unwrap() <= 390,
        "no horizontal scroll: {layout}"
    );
    assert!(
        layout["narrowScrollWidth"].as_u64().unwrap() <= 375,
        "none at 375 px either: {layout}"
    );
    assert!(
        layout["smallestButton"].as_f64().unwrap() >= 40.0,
        "{layout}"
    );
    assert_eq!(layout["sessionsBelowList"], true, "stacked: {layout}");
    assert!(
        steps["answer"]["card"]
            .as_str()
            .unwrap()
            .contains(": allow (Allow this change)"),
        "{}",
        steps["answer"]
    );
    let end = &steps["turn-end"];
    assert!(
        end["end"].as_str().unwrap().starts_with("end_turn"),
        "{end}"
    );
    let turn = end["turn"].as_str().unwrap();
    assert!(turn.contains("Now tidy the config"), "{turn}");
    assert!(
        turn.contains("Perfect! I've successfully updated the configuration."),
        "the answer after the permission: {turn}"
    );
    let tools = end["tools"].as_array().unwrap();
    assert_eq!(
        tools.len(),
        2,
        "one card per tool call, its updates merged: {end}"
    );
    assert!(tools.iter().all(|t| t["status"] == "completed"), "{end}");
    let problems: Vec<&Value> = end["problems"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p.as_str().unwrap().starts_with("page error"))
        .collect();
    assert!(problems.is_empty(), "{problems:?}");

    // The journal has the page's turn, and its permission answer.
    let text = crate::serve::show_until(store.path(), &session, "❯ Now tidy the config");
    assert!(
        text.contains("? permission for Modifying critical configuration file: allow"),
        "{text}"
    );
    let log = served.stop();
    assert!(!log.contains(TOKEN), "{log}");
}

#[test]
fn agent_markup_on_the_page_is_text() {
    let store = tempfile::tempdir().unwrap();
    // The Python SDK's echo agent says back what it is told: markup, from the agent.
    let served = Served::start(store.path(), &[], &Peers::get().py_echo_agent());
    let session = prompted_session(&served, HOSTILE);
    let steps = drive(&served, &session, "hostile", HOSTILE_TOO, HOSTILE);
    let list = &steps["list"];
    assert!(list["row"].as_str().unwrap().contains(HOSTILE), "{list}");
    let end = &steps["turn-end"];
    assert_eq!(end["markup"], serde_json::json!([]), "{end}");
    assert_eq!(end["pwned"], false);
    assert_eq!(end["users"], serde_json::json!([HOSTILE, HOSTILE_TOO]));
    assert_eq!(
        end["agents"],
        serde_json::json!([HOSTILE, HOSTILE_TOO]),
        "the agent's echoes, as text"
    );
    served.stop();
}

/// Our `tests/agents/page_agent.py`, with `args`.
fn page_agent(args: &[&str]) -> Vec<String> {
    let script = root().join("tests/agents/page_agent.py");
    let mut argv = vec![python(), script.display().to_string()];
    argv.extend(args.iter().map(|a| a.to_string()));
    argv
}

#[test]
fn the_page_shows_a_refused_prompt_and_a_permission_request_another_client_answered() {
    let store = tempfile::tempdir().unwrap();
    // Our agent sends what the host sends once several clients share a session: a refusal, a
    // permission request taken back (`$/cancel_request`), its outcome on the tool call.
    let served = Served::start(store.path(), &[], &page_agent(&[]));
    let session = prompted_session(&served, "hello");
    let steps = drive(&served, &session, "settle", "", "You said: hello");

    let refused = &steps["refused"];
    assert_eq!(
        refused["error"], "The prompt failed: session busy: another client's turn is running",
        "{refused}"
    );
    assert_eq!(refused["kept"], "busy", "the text is kept to send again");
    assert_eq!(
        refused["turnsAfter"], refused["turnsBefore"],
        "no turn: {refused}"
    );

    let settled = &steps["settled"];
    let permission = &settled["permission"];
    assert_eq!(permission["settled"], "true", "{settled}");
    assert_eq!(permission["buttons"], 0, "{settled}");
    assert!(
        permission["text"]
            .as_str()
            .unwrap()
            .contains("answered elsewhere"),
        "{settled}"
    );
    assert_eq!(
        settled["agent"], "permission: error -32800; fs: error -32603",
        "the page answered the taken-back request -32800; the fs request the host answered \
         (no attached client declared fs)"
    );
    assert!(
        settled["tool"]
            .as_str()
            .unwrap()
            .contains("completed /work/notes.txt:2 permission: yes (Allow) by another client"),
        "{settled}"
    );
    assert_eq!(settled["tools"], 1, "the call and its update, one card");
    assert_eq!(
        settled["diff"],
        serde_json::json!([
            ["d-file", "--- /work/notes.txt\n+++ /work/notes.txt\n"],
            ["d-hunk", "@@ -1,3 +1,3 @@\n"],
            ["d-ctx", " one\n"],
            ["d-del", "-two\n"],
            ["d-ins", "+2\n"],
            ["d-ctx", " three\n"]
        ]),
        "the export's unified diff"
    );
    assert_eq!(
        settled["plans"],
        serde_json::json!([[
            ["p-completed", "[x] edit notes.txt"],
            ["p-completed", "[x] tell the user"]
        ]]),
        "one plan card, updated in place"
    );
    assert!(settled["end"].as_str().unwrap().starts_with("end_turn"));
    served.stop();
}

#[test]
fn the_page_and_an_sdk_client_share_a_live_session_and_the_first_answer_wins() {
    let store = tempfile::tempdir().unwrap();
    let served = Served::start(store.path(), &[], &Peers::get().ts_agent());
    // The Python SDK's client over WebSocket makes the session, prompts, and stays attached,
    // answering every permission request at once.
    let py = Peers::get().py_remote_client();
    let mut editor = crate::attach::Running::start(
        &py,
        &served.url,
        "ws",
        &[
            "--prompt",
            "Summarize the project",
            "--cwd",
            "/tmp",
            "--linger",
            "120",
        ],
    );
    let seen = editor.until("result").to_vec();
    let session = of_kind(&seen, "session")[0]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    // The page joins the live session (session/attach) and prompts: the turn's permission
    // request goes to both; the editor answers first, the page's card is settled. Then another
    // client prompts: the page follows its turn to its end.
    let other = "And once more from the terminal";
    let steps = std::thread::scope(|scope| {
        let page = scope.spawn(|| {
            drive_with(
                &served,
                &session,
                "shared",
                "Now tidy the config",
                "Summarize the project",
                &["--other", other],
            )
        });
        // Once the page's turn is over (the editor saw its last text), the other client prompts.
        editor.until_story_count("I've successfully updated the configuration", 2);
        let (third, stderr) = sdk_client(
            &Peers::get().ts_remote_client(),
            &served.url,
            "ws",
            &["--session", &session, "--load", "--prompt", other],
        );
        assert_eq!(of_kind(&third, "result").len(), 1, "{third:?}\n{stderr}");
        page.join().unwrap()
    });
    let other_turn = &steps["other-turn"];
    let end = other_turn["end"].as_str().unwrap();
    assert!(
        end.starts_with("end_turn") && end.contains("acp-journal-tests"),
        "the page shows the other client's turn end: {other_turn}"
    );
    let card = &steps["settled-elsewhere"]["card"];
    assert_eq!(card["settled"], "true", "{card}");
    assert_eq!(card["buttons"], 0, "{card}");
    let turn = steps["turn-end"]["turn"].as_str().unwrap();
    assert!(
        turn.contains("I've successfully updated the configuration"),
        "{turn}"
    );
    // The editor saw the page's prompt as the user's message, answered its permission request,
    // and saw the page's turn.
    let seen = editor.until_count("permission", 2).to_vec();
    assert!(
        seen.iter()
            .any(|e| e["update"]["sessionUpdate"] == "user_message_chunk"
                && e["update"]["content"]["text"] == "Now tidy the config"),
        "{seen:?}"
    );
    editor.until_story("I've successfully updated the configuration");
    editor.kill();
    served.stop();
}

#[test]
fn the_page_marks_a_live_session_of_an_agent_with_its_own_list_and_draws_a_mode_change_in_its_turn()
{
    let store = tempfile::tempdir().unwrap();
    // Our agent with a session list of its own (as the adapters have): the host's list is the
    // agent's rows, merged.
    let served = Served::start(store.path(), &[], &page_agent(&["--lists"]));
    let session = prompted_session(&served, "hello");
    let steps = drive(&served, &session, "states", "", "You said: hello");

    let row = steps["list"]["row"].as_str().unwrap();
    assert!(
        row.contains("live") && !row.contains("not live"),
        "the session lives on the host's agent: {row}"
    );

    let live = &steps["mode-live"];
    let turn = live["turns"].as_array().unwrap().last().unwrap().clone();
    let at = |prefix: &str| {
        turn.as_array()
            .unwrap()
            .iter()
            .position(|c| c.as_str().unwrap().starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix} in the turn: {turn}"))
    };
    let mode = at("meta: mode → plan");
    let before = at("agent: Switching to plan mode.");
    let after = at("agent: Planning now.");
    assert!(
        before < mode && mode < after,
        "the mode change where it came, inside its turn: {turn}"
    );
    assert!(live["facts"].as_str().unwrap().contains("plan"), "{live}");

    let history = &steps["mode-history"];
    let turns = history["turns"].to_string();
    assert!(
        !turns.contains("mode →"),
        "a replayed history's state is not drawn in a turn: {history}"
    );
    assert_eq!(history["between"], serde_json::json!([]), "{history}");
    assert!(
        history["facts"].as_str().unwrap().contains("plan"),
        "{history}"
    );
    served.stop();
}

#[test]
fn the_page_draws_a_notice_a_compaction_and_a_background_task_as_text() {
    let store = tempfile::tempdir().unwrap();
    // Our agent's "events" turn: a notice, a compaction whose summary comes in chunks, a
    // background task spawned, progressing and completed; markup in their texts.
    let served = Served::start(store.path(), &[], &page_agent(&[]));
    let session = prompted_session(&served, "hello");
    let steps = drive(&served, &session, "events", "", "You said: hello");

    let lines = |step: &str| -> Vec<String> {
        steps[step]["turn"]
            .as_array()
            .unwrap_or_else(|| panic!("{step}: {:?}", steps.get(step)))
            .iter()
            .map(|c| c.as_str().unwrap().to_string())
            .collect()
    };
    let live = lines("events-live");
    let expected = [
        "agent: Working.",
        "notice: ! warning notice (not part of the history): <b>Rate</b> limited: retrying in 5 s",
        "compaction: ── compaction completed",
        "summary: The user asked <i>twice</i>. The agent answered.",
        "task: ⧗ task build: completed",
        "agent:  Done.",
    ];
    let at: Vec<usize> = expected
        .iter()
        .map(|e| {
            live.iter()
                .position(|l| l == e)
                .unwrap_or_else(|| panic!("no {e:?} in the turn: {live:#?}"))
        })
        .collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "in order: {live:#?}");
    assert_eq!(
        live.iter().filter(|l| l.starts_with("task: ")).count(),
        1,
        "one line per task, updated in place: {live:#?}"
    );
    assert_eq!(steps["events-live"]["markup"], 0, "their markup is text");

    // Reloaded: the host replays the compaction (materialized) and the task, as the page
    // declared it draws them (`session.compaction`, AIR's `asyncTasks`); a notice is not part
    // of the history.
    let history = lines("events-history");
    for e in [
        "compaction: ── compaction completed",
        "summary: The user asked <i>twice</i>. The agent answered.",
        "task: ⧗ task build: completed",
    ] {
        assert!(history.iter().any(|l| l == e), "no {e:?}: {history:#?}");
    }
    assert!(
        !history.iter().any(|l| l.starts_with("notice: ")),
        "{history:#?}"
    );
    assert_eq!(steps["events-history"]["markup"], 0);
    served.stop();
}

#[test]
fn the_page_draws_a_subagent_as_a_timeline_inside_its_turn_live_and_replayed() {
    let store = tempfile::tempdir().unwrap();
    // Our agent's "subagent" turn: a child session announced, its own messages, tool call and
    // permission request under its ID, its answer to the parent and its end.
    let served = Served::start(store.path(), &[], &page_agent(&[]));
    let session = prompted_session(&served, "hello");
    let steps = drive(&served, &session, "subagents", "", "You said: hello");
    let strings = |v: &Value| -> Vec<String> {
        let lines = v.as_array().unwrap_or_else(|| panic!("{v}"));
        lines
            .iter()
            .map(|l| l.as_str().unwrap().to_string())
            .collect()
    };
    let answered = "agent: Found 1 TODO in a.rs (result {\"outcome\": {\"optionId\": \"yes\", \"outcome\": \"selected\"}}).";
    for (step, live) in [("subagent-live", true), ("subagent-history", false)] {
        let shown = &steps[step];
        let turn = strings(&shown["turn"]);
        let expected = [
            "user: subagent",
            "agent: Asking a helper.",
            "subagent: ⇢ subagent Look around (explorer): running",
            "child: Look around · end_turn",
            "message: ✉ Look around → the session: 1 TODO, in a.rs.",
            "subagent: ⇠ subagent Look around: end_turn",
            "agent: The helper is done.",
        ];
        let at: Vec<usize> = expected
            .iter()
            .map(|e| {
                (turn.iter().position(|l| l.starts_with(e)))
                    .unwrap_or_else(|| panic!("{step}: no {e:?} in the turn: {turn:#?}"))
            })
            .collect();
        assert!(at.windows(2).all(|w| w[0] < w[1]), "{step}: {turn:#?}");
        let children = shown["children"].as_array().unwrap();
        assert_eq!(children.len(), 1, "{step}: {children:#?}");
        let child = &children[0];
        assert_eq!(child["session"], format!("{session}-child"), "{step}");
        assert_eq!(
            (&child["state"], &child["depth"]),
            (&json!("end_turn"), &json!("1"))
        );
        let lines = strings(&child["lines"]);
        assert_eq!(lines[0], "child-title: Look around · end_turn", "{step}");
        assert_eq!(
            lines[1], "message: ✉ the session → Look around: Find the <b>TODOs</b>.",
            "{step}: the task, once, where it arrived (in the child's view)"
        );
        assert!(
            lines[2].starts_with("tool: search Grep TODO completed"),
            "{step}: {lines:#?}"
        );
        let asked = live.then_some("permission: Permission for Grep TODO: yes (Allow)");
        assert_eq!(
            lines[3..].iter().map(String::as_str).collect::<Vec<_>>(),
            asked.into_iter().chain([answered]).collect::<Vec<_>>(),
            "{step}: its permission request (live: a history has none) and its words"
        );
        assert!(
            !turn.iter().any(|l| l.contains("Find the")),
            "{step}: not in the parent's view too: {turn:#?}"
        );
        assert_eq!(shown["markup"], 0, "{step}: the agent's markup is text");
    }
    // Its permission request answered from the keyboard: Tab from the subagent's title.
    assert_eq!(steps["subagent-live"]["focused"], "Allow");
    assert_eq!(
        (
            &steps["subagent-keys"]["folded"],
            &steps["subagent-keys"]["unfolded"]
        ),
        (&json!(true), &json!(true)),
        "its box folds and unfolds from the keyboard"
    );
    let problems = steps["subagent-history"]["problems"].as_array().unwrap();
    assert!(
        !problems
            .iter()
            .any(|p| p.as_str().unwrap().starts_with("page error")),
        "{problems:?}"
    );
    served.stop();
}
