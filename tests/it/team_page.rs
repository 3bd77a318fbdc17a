//! The team view of `acp-journal serve --store`'s page: sessions recorded through the proxy on
//! three hosts into s3s-fs, listed, filtered, searched and opened (rendered by the server as
//! `export --format html` renders them), their usage counted as `stats --store` counts it and
//! drawn as charts whose bars' numbers are its numbers, in
//! Debian's headless chromium driven by puppeteer-core
//! (`tests/agents/team_driver.mjs`), and its endpoints over raw sockets: the token required,
//! the answers those of `list --store --json`. Screenshots go to `target/page-screenshots/`.

use std::collections::BTreeSet;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::fleet::{Host, converse, eventually, listed};
use crate::serve::{Served, TOKEN, bearer, request_to};
use crate::stores::S3sFs;
use crate::util::{Peers, TestClient, screenshots};

/// Markup in a prompt: it must stay text on the page.
const HOSTILE: &str = "<img src=x onerror=\"window.__pwned=1\"><script>window.__pwned=1</script>";

/// `GET path` of `served` with `headers`: its status and body.
fn get(served: &Served, path: &str, headers: &[String]) -> (u16, Vec<u8>) {
    let reply = request_to(served.addr, "GET", path, headers, b"");
    (reply.status, reply.body)
}

#[test]
fn the_team_view_lists_filters_searches_and_opens_the_store_s_sessions_in_chromium() {
    let store = S3sFs::start();
    let url = store.url("team");
    let hosts: Vec<Host> = (0..3).map(|_| Host::new(&url, &store.env())).collect();
    // An agent that reports tokens, for the usage's charts.
    let mut idle = hosts[2].proxy(&crate::util::scripted("otel"), &[]);
    let sessions = [
        converse(&hosts[0], &["alpha apple first", "alpha second"]),
        converse(
            &hosts[1],
            &[
                &format!("bravo banana first {HOSTILE}"),
                "bravo zeppelin second",
            ],
        ),
        // Open while the page looks, between turns: `idle` (the others are `closed`).
        {
            idle.initialize();
            let session = idle.new_session("/tmp");
            let answer = idle.prompt(&session, "charlie cherry first");
            assert!(answer.get("result").is_some(), "{answer}");
            session
        },
    ];
    // Served from a fourth host, which records nothing of its own.
    let reader = Host::new(&url, &store.env());
    let served = reader.serve(&[]);
    let mut answer = Value::Null;
    eventually(
        "the team view lists the three sessions, the third idle after its turn",
        || {
            let (status, body) = get(&served, "/team/sessions", &[bearer()]);
            answer = serde_json::from_slice(&body).unwrap_or_default();
            // The idle session is still being shipped: its turn may come after the session.
            let turned = answer["sessions"]
                .as_array()
                .is_some_and(|rows| rows.iter().all(|r| r["turns"] != 0));
            (status != 200
                || answer["total"] != 3
                || answer["sessions"][0]["state"] != "idle"
                || !turned)
                .then(|| format!("{status}: {}", String::from_utf8_lossy(&body)))
        },
    );
    // The rows of `list --store --json`, in its order, each with the host that recorded it.
    let rows = answer["sessions"].as_array().unwrap();
    let cli: Vec<Value> = listed(&reader);
    let ids = |rows: &[Value]| -> Vec<String> {
        rows.iter()
            .map(|r| r["session"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(ids(rows), ids(&cli), "{answer}");
    for (row, listed) in rows.iter().zip(&cli) {
        for field in ["title", "turns", "state", "cwd", "agent", "updated"] {
            assert_eq!(row[field], listed[field], "{field}: {row} vs {listed}");
        }
    }
    let host_of = |session: &str| -> String {
        let row = rows.iter().find(|r| r["session"] == session).unwrap();
        let hosts = row["hosts"].as_array().unwrap();
        assert_eq!(hosts.len(), 1, "{row}");
        hosts[0].as_str().unwrap().to_string()
    };
    let names: BTreeSet<String> = sessions.iter().map(|s| host_of(s)).collect();
    assert_eq!(names.len(), 3, "{names:?}");
    // The filters, over the socket: a host, a state, a day, a page past the end.
    let (_, body) = get(
        &served,
        &format!("/team/sessions?host={}", host_of(&sessions[1])),
        &[bearer()],
    );
    let one: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        ids(one["sessions"].as_array().unwrap()),
        [sessions[1].clone()]
    );
    for (state, expected) in [
        ("idle", vec![sessions[2].clone()]),
        ("closed", vec![sessions[1].clone(), sessions[0].clone()]),
        ("live", vec![]),
        ("stranded", vec![]),
    ] {
        let (status, body) = get(
            &served,
            &format!("/team/sessions?state={state}"),
            &[bearer()],
        );
        assert_eq!(status, 200, "{state}");
        let found: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            ids(found["sessions"].as_array().unwrap()),
            expected,
            "{state}"
        );
    }
    let (_, body) = get(&served, "/team/sessions?to=2000-01-01", &[bearer()]);
    assert_eq!(serde_json::from_slice::<Value>(&body).unwrap()["total"], 0);
    let (_, body) = get(&served, "/team/sessions?page=1", &[bearer()]);
    let past: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        (
            past["total"].as_u64(),
            past["sessions"].as_array().unwrap().len()
        ),
        (Some(3), 0)
    );
    // Hostile queries are refused, and no request without the token is answered.
    let long = format!("/team/search?q={}", "a".repeat(300));
    for (path, status) in [
        ("/team/search?q=%21%21", 400),
        (long.as_str(), 400),
        ("/team/sessions?state=x", 400),
        ("/team/sessions?state=open", 400),
        ("/team/session?id=..%2F..%2Fetc%2Fpasswd", 404),
        ("/team/session?id=", 400),
    ] {
        assert_eq!(get(&served, path, &[bearer()]).0, status, "{path}");
    }
    for path in [
        "/team/sessions",
        "/team/search?q=bravo",
        "/team/session?id=x",
    ] {
        assert_eq!(get(&served, path, &[]).0, 401, "{path}");
        let wrong = "Authorization: Bearer wrong-token-0123456789".to_string();
        assert_eq!(get(&served, path, &[wrong]).0, 401, "{path}");
    }
    let (status, html) = get(
        &served,
        &format!("/team/session?id={}", sessions[1]),
        &[bearer()],
    );
    let html = String::from_utf8_lossy(&html);
    assert_eq!(status, 200);
    assert!(html.contains("bravo banana first &lt;img"), "{html}");
    assert!(!html.contains("<img src=x"), "{html}");

    // The index holds every turn, the open session's too, before the page counts them.
    eventually("the index counts every turn", || {
        let (_, stats, err) = reader.cli(&["stats"]);
        (!stats.contains("3 sessions, 5 turns")).then(|| format!("{stats}{err}"))
    });

    // The page, in chromium.
    let driver = Peers::get().team_driver();
    let base = served.url.trim_end_matches("/acp").to_string();
    let out = Command::new(&driver[0])
        .args(&driver[1..])
        .args(["--url", &base, "--token", TOKEN, "--rows", "3"])
        .args(["--host", &host_of(&sessions[0]), "--search", "zeppelin"])
        .args(["--states", "idle,closed,live"])
        .arg("--shots")
        .arg(screenshots())
        .stdin(Stdio::null())
        .output()
        .expect("running the team driver (node)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let steps: std::collections::HashMap<String, Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|e| Some((e["step"].as_str()?.to_string(), e)))
        .collect();
    if let Some(error) = steps.get("error") {
        panic!(
            "the team driver failed at {}: {}\nproblems: {}\nscreenshot: {}\nDOM: {}\nserve: {}",
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
        "the team driver: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    for step in steps.values() {
        if let Some(shot) = step["screenshot"].as_str() {
            let line = format!("team page screenshot ({}): {shot}\n", step["step"]);
            let _ = std::io::stderr().write_all(line.as_bytes());
        }
    }
    // The list: every session, newest first, as the endpoint ordered them.
    let list = &steps["list"];
    let shown: Vec<String> = serde_json::from_value(list["rows"].clone()).unwrap();
    assert_eq!(shown, ids(rows), "{list}");
    assert!(
        list["text"]
            .as_str()
            .unwrap()
            .contains("bravo banana first"),
        "{list}"
    );
    // The host filter leaves that host's session.
    assert_eq!(steps["filter"]["rows"], serde_json::json!([sessions[0]]));
    // The state filter, reached and set with the keyboard, leaves exactly that state's rows.
    let by_state = &steps["state"]["byState"];
    for (state, expected) in [
        ("idle", serde_json::json!([sessions[2]])),
        ("closed", serde_json::json!([sessions[1], sessions[0]])),
        ("live", serde_json::json!([])),
    ] {
        let seen = &by_state[state];
        assert_eq!(seen["focused"], "f-state", "{state}: {seen}");
        assert_eq!(seen["value"], state, "{state}: {seen}");
        assert_eq!(seen["rows"], expected, "{state}: {seen}");
    }
    // The search finds the one message, and opens its session at its turn, drawn by the
    // export's renderer, with no script of it run and no id of the live view taken.
    let search = &steps["search"];
    let hits = search["hits"].as_array().unwrap();
    assert!(!hits.is_empty(), "{search}");
    assert!(hits.iter().all(|h| h["session"] == sessions[1]), "{search}");
    assert_eq!(hits[0]["turn"], "2", "{search}");
    assert_eq!(search["opened"], sessions[1], "{search}");
    assert_eq!(search["turns"], 2, "{search}");
    assert!(
        search["hit"]
            .as_str()
            .unwrap()
            .contains("bravo zeppelin second"),
        "{search}"
    );
    // The text found, marked in that turn (the prompt and the echo), nowhere else.
    let marks = search["marks"].as_array().unwrap();
    assert!(
        marks.len() >= 2 && marks.iter().all(|m| m == "zeppelin"),
        "{search}"
    );
    assert_eq!(search["marksOutside"], 0, "{search}");
    assert!(
        search["header"].as_str().unwrap().contains(&sessions[1]),
        "{search}"
    );
    assert_eq!(search["scripts"], 0, "{search}");
    assert_eq!(search["liveTimeline"], 1, "{search}");
    assert!(
        search["ids"]
            .as_array()
            .unwrap()
            .iter()
            .all(|id| id.as_str().unwrap().starts_with("export-")),
        "{search}"
    );
    assert_eq!(search["problems"], serde_json::json!([]), "{search}");
    // Its markup is text.
    assert_eq!(search["images"], 0, "{search}");
    assert_eq!(search["pwned"], false, "{search}");
    let (_, found) = get(&served, "/team/search?q=charlie", &[bearer()]);
    let found: Value = serde_json::from_slice(&found).unwrap();
    assert_eq!(found["matches"][0]["session"], sessions[2], "{found}");
    // The usage: the line `stats --store` ends with, and its turns per host, day by day.
    let usage = &steps["usage"];
    let (code, stats, err) = reader.cli(&["stats"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        usage["summary"].as_str().unwrap(),
        stats.lines().last().unwrap(),
        "{usage}\n{stats}"
    );
    assert!(stats.contains("3 sessions, 5 turns"), "{stats}");
    // Each table's totals are `stats --store`'s: turns and tokens of its last line, turns per
    // host of its HOST table; each table's CSV (served behind the token, a download) holds
    // exactly the table's numbers.
    let totals: Vec<u64> = {
        let last = stats.lines().last().unwrap();
        let words: Vec<&str> = last.split([' ', ',']).collect();
        let before = |word: &str| -> u64 {
            let at = words.iter().position(|w| *w == word).unwrap();
            words[at - 1].parse().unwrap()
        };
        vec![before("turns"), before("input"), before("output")]
    };
    let host_table: std::collections::BTreeMap<String, u64> = stats
        .lines()
        .skip_while(|l| !l.starts_with("HOST"))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .map(|l| {
            let cells: Vec<&str> = l.split_whitespace().collect();
            (cells[0].to_string(), cells[2].parse().unwrap())
        })
        .collect();
    assert_eq!(host_table.len(), 3, "{stats}");
    for by in ["agent", "host"] {
        let table = &usage["tables"][by];
        let rows: Vec<Vec<String>> = serde_json::from_value(table["rows"].clone()).unwrap();
        assert!(!rows.is_empty(), "{table}");
        let number = |row: &[String], at: usize| row[at].parse::<u64>().unwrap();
        let sums: Vec<u64> = [3, 4, 5]
            .iter()
            .map(|&at| rows.iter().map(|r| number(r, at)).sum())
            .collect();
        assert_eq!(sums, totals, "{by}: {table}\n{stats}");
        if by == "host" {
            let mut per_host: std::collections::BTreeMap<String, u64> = Default::default();
            for row in &rows {
                *per_host.entry(row[1].clone()).or_default() += number(row, 3);
            }
            assert_eq!(per_host, host_table, "{table}\n{stats}");
        }
        assert_eq!(table["href"], format!("/team/usage.csv?by={by}"), "{table}");
        assert_eq!(table["download"], format!("usage-{by}.csv"), "{table}");
        assert_eq!(table["status"], 200, "{table}");
        assert_eq!(table["type"], "text/csv; charset=utf-8", "{table}");
        assert_eq!(
            table["disposition"],
            format!("attachment; filename=\"usage-{by}.csv\""),
            "{table}"
        );
        assert_eq!(table["withoutToken"], 401, "{table}");
        let csv = table["csv"].as_str().unwrap();
        let mut lines = csv.split("\r\n");
        assert_eq!(
            lines.next(),
            Some(format!("day,{by},sessions,turns,input_tokens,output_tokens,cost_USD").as_str())
        );
        let cells: Vec<Vec<String>> = lines
            .filter(|l| !l.is_empty())
            .map(|l| l.split(',').map(str::to_string).collect())
            .collect();
        assert_eq!(cells, rows, "{by}: the CSV holds the table's numbers");
    }
    costs_are_stats_s(usage, &stats);
    // The charts, drawn by the server: each tokens chart's bars' titles sum to `stats
    // --store`'s turns and tokens; the activity chart's turns too; the costliest session (the
    // only one that reported tokens) and the stop reasons named.
    let charts = &usage["charts"];
    let titles = |key: &str| -> Vec<String> {
        serde_json::from_value(charts[key]["titles"].clone())
            .unwrap_or_else(|_| panic!("{key}: {charts}"))
    };
    // "… 3 input and 4 output tokens, 5 turns, 6 sessions": the number before each word.
    let numbers = |title: &str, words: &[&str]| -> Vec<u64> {
        let last: Vec<&str> = title.lines().last().unwrap().split([' ', ',']).collect();
        words
            .iter()
            .map(|w| {
                let at = last
                    .iter()
                    .position(|x| x == w)
                    .unwrap_or_else(|| panic!("{w}: {title}"));
                last[at - 1].parse().unwrap()
            })
            .collect()
    };
    for by in ["agent", "host"] {
        let bars = titles(by);
        assert!(!bars.is_empty(), "{by}: {charts}");
        let mut sums = vec![0; 3];
        for bar in &bars {
            for (sum, n) in sums
                .iter_mut()
                .zip(numbers(bar, &["turns", "input", "output"]))
            {
                *sum += n;
            }
        }
        assert_eq!(sums, totals, "{by}: {bars:?}\n{stats}");
    }
    let turns_per_day: u64 = titles("activity")
        .iter()
        .step_by(2) // a day's two bars share one title
        .map(|t| numbers(t, &["turns"])[0])
        .sum();
    assert_eq!(turns_per_day, totals[0], "{charts}");
    assert!(totals[1] > 0, "the scripted agent reports tokens: {stats}");
    assert_eq!(
        charts["costliest"]["links"],
        serde_json::json!([sessions[2]]),
        "{charts}"
    );
    assert!(
        charts["stops"]["text"]
            .as_str()
            .unwrap()
            .contains("end_turn"),
        "{charts}"
    );
    // With the keyboard alone: a chart's numbers shown, the costliest session opened.
    let keys = &steps["usage-keyboard"];
    assert_eq!(keys["numbersOpen"], true, "{keys}");
    assert_eq!(keys["costliest"], sessions[2], "{keys}");
    assert_eq!(keys["opened"], sessions[2], "{keys}");
    // With the keyboard alone: the Team button, then the first session, opened and focused.
    let keyboard = &steps["keyboard"];
    assert_eq!(keyboard["first"], sessions[2], "{keyboard}");
    assert_eq!(keyboard["opened"], sessions[2], "{keyboard}");
    assert_eq!(keyboard["focused"], "team-session", "{keyboard}");
    // The page's own requests without the token, or with a wrong one, are refused.
    assert_eq!(steps["refused"]["statuses"][0], 401, "{}", steps["refused"]);
    assert_eq!(steps["refused"]["statuses"][1], 401, "{}", steps["refused"]);
    let log = served.stop();
    assert!(!log.contains(TOKEN), "the token is never logged: {log}");
    let (code, _) = idle.finish();
    assert_eq!(code, 0);
}

/// Host A (`a`, its client) killed while it holds `session`, and the session continued on
/// host `c` (once A's hold ran out): C's client, the session loaded with A's turns.
fn continued(a: TestClient, c: &Host, session: &str) -> TestClient {
    // Everything A forwarded that the page showed is in the store.
    unsafe { libc::kill(a.child.id() as i32, libc::SIGKILL) };
    let _ = a.finish();
    let mut client = c.proxy(&Peers::get().py_echo_agent(), &[]);
    client.initialize();
    let (updates, answer) = client.load(session, "/tmp");
    assert!(answer.get("result").is_some(), "{answer}");
    let said = crate::util::texts(&updates);
    assert!(said.iter().any(|t| t.contains("kiwi4follow")), "{said:?}");
    client
}

/// The time of the record of host `host`'s journals in which the agent says `marker` (Unix
/// ms): when the host journaled it.
fn journaled_at(host: &Host, marker: &str) -> Option<f64> {
    crate::util::segment_paths(&host.journals())
        .into_iter()
        .filter(|p| p.to_string_lossy().ends_with(".acpj.zst"))
        .flat_map(|path| {
            let text = crate::util::decompress_salvage(&path);
            text.split(|b| *b == b'\n')
                .filter_map(|line| serde_json::from_slice::<Value>(line).ok())
                .collect::<Vec<_>>()
        })
        .find(|r| {
            r["msg"]["method"] == "session/update"
                && r["msg"]["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
                && r["msg"]["params"]["update"]["content"]["text"]
                    .as_str()
                    .is_some_and(|t| t.contains(marker))
        })
        .and_then(|r| r["t"].as_i64())
        .map(|us| us as f64 / 1000.0)
}

/// The driver's next step named `step` (and, when given, about `marker`), as it emits it; an
/// error step fails the test.
fn next_step(
    steps: &std::sync::mpsc::Receiver<Value>,
    step: &str,
    marker: Option<&str>,
    served: &Served,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok(event) = steps.recv_timeout(left) else {
            panic!(
                "the team driver never reached {step} {marker:?}\nserve: {}",
                served.log()
            );
        };
        if event["step"] == "error" {
            panic!(
                "the team driver failed at {}: {}\nproblems: {}\nscreenshot: {}\nserve: {}",
                event["at"],
                event["message"],
                event["problems"],
                event["screenshot"],
                served.log()
            );
        }
        if event["step"] == step && marker.is_none_or(|m| event["marker"] == m) {
            return event;
        }
    }
}

#[test]
fn a_session_live_on_another_host_is_followed_on_the_page_as_it_is_shipped() {
    let store = S3sFs::start();
    let url = store.url("follow");
    // Host A runs the agent and ships at the default interval (1 s): the lag the page shows is
    // the one a team gets. It dies mid-follow (its hold on the session lasting 6 s), and host
    // C continues the session.
    let a = Host::new(&url, &store.env());
    let echo = Peers::get().py_echo_agent();
    let mut live = a.proxy_shipping(&[], "1", &echo, &["--lease-ttl", "6"]);
    live.initialize();
    let session = live.new_session("/tmp");
    for n in 1..=2 {
        let answer = live.prompt(&session, &format!("before the page {n}"));
        assert!(answer.get("result").is_some(), "{answer}");
    }
    // Host B serves the page from the store; it records nothing of its own.
    let reader = Host::new(&url, &store.env());
    let served = reader.serve(&[]);
    eventually("B lists A's session, open, with its two turns", || {
        let (status, body) = get(&served, "/team/sessions", &[bearer()]);
        let answer: Value = serde_json::from_slice(&body).unwrap_or_default();
        let row = &answer["sessions"][0];
        (status != 200 || row["session"] != session.as_str() || row["turns"] != 2)
            .then(|| format!("{status}: {}", String::from_utf8_lossy(&body)))
    });
    // Over the socket: the render's tag, 204 when the page has it, followed while open.
    let reply = request_to(
        served.addr,
        "GET",
        &format!("/team/session?id={session}"),
        &[bearer()],
        b"",
    );
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(reply.header("acp-journal-follow"), Some("500"));
    assert_eq!(reply.header("cache-control"), Some("no-store"));
    assert!(reply.header("content-security-policy").is_some());
    let tag = reply.header("etag").unwrap().trim_matches('"').to_string();
    let again = request_to(
        served.addr,
        "GET",
        &format!("/team/session?id={session}&after={tag}"),
        &[bearer()],
        b"",
    );
    assert_eq!(
        (again.status, again.body.len()),
        (204, 0),
        "{}",
        again.text()
    );
    for path in [
        format!("/team/session?id={session}&after=x"),
        format!("/team/session?id={session}&after={}", tag.to_uppercase()),
    ] {
        assert_eq!(get(&served, &path, &[bearer()]).0, 400, "{path}");
    }
    assert_eq!(
        get(
            &served,
            &format!("/team/session?id={session}&after={tag}"),
            &[]
        )
        .0,
        401
    );

    // The page opens the session while it is live; the turns prompted on A from then on appear
    // on it, each timed against A's journal, then the one prompted on C once it continued the
    // session (a new segment, a new epoch), without a reload.
    let markers: Vec<String> = (1..=5).map(|n| format!("kiwi{n}follow")).collect();
    let driver = Peers::get().team_driver();
    let base = served.url.trim_end_matches("/acp").to_string();
    let mut child = Command::new(&driver[0])
        .args(&driver[1..])
        .args(["--url", &base, "--token", TOKEN, "--follow", &session])
        .args(["--markers", &markers.join(",")])
        .arg("--shots")
        .arg(screenshots())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("running the team driver (node)");
    let (send, steps) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if let Ok(event) = serde_json::from_str::<Value>(&line) {
                let _ = send.send(event);
            }
        }
    });
    let opened = next_step(&steps, "opened", None, &served);
    assert_eq!(opened["follow"], "on", "{opened}");
    assert_eq!(opened["turns"], 2, "{opened}");
    assert!(
        opened["note"].as_str().unwrap().contains("Live"),
        "{opened}"
    );
    assert_eq!(
        opened["focused"], true,
        "the wire view reached with Tab: {opened}"
    );
    assert_eq!(opened["wireOpen"], true, "{opened}");
    assert_eq!(opened["ids"], serde_json::json!([]), "{opened}");
    // Each marker prompted on `host` (by `client`), then seen on the page: its lag.
    let see = |i: usize, host: &Host, client: &mut TestClient| -> f64 {
        let marker = &markers[i];
        // Prompted at different moments of the host's ship rounds and the page's looks.
        std::thread::sleep(Duration::from_millis(i as u64 * 373 % 1000));
        let answer = client.prompt(&session, &format!("followed {marker}"));
        assert!(answer.get("result").is_some(), "{answer}");
        let shown = next_step(&steps, "shown", Some(marker), &served);
        let written = journaled_at(host, marker).expect("the host journaled the turn");
        let lag = shown["at"].as_f64().unwrap() - written;
        // Turns arrive whole, where they belong; the wire view opened with the keyboard stays
        // open and focused; at the bottom the page stays there, at the top it does not move.
        assert_eq!(shown["turns"], 2 + i + 1, "{shown}");
        assert_eq!(shown["follow"], "on", "{shown}");
        assert_eq!(shown["focused"], true, "{shown}");
        assert_eq!(shown["wireOpen"], true, "{shown}");
        if i < 2 {
            assert_eq!(shown["bottom"], true, "stays at the bottom: {shown}");
        } else {
            assert_eq!(shown["scrollY"], 0, "does not jump: {shown}");
            assert_eq!(shown["bottom"], false, "{shown}");
        }
        // A page that never updates fails here; the lag itself is printed, not asserted.
        assert!(
            lag < 30_000.0,
            "{marker} shown {lag} ms after its host journaled it"
        );
        lag
    };
    let lags: Vec<f64> = (0..4).map(|i| see(i, &a, &mut live)).collect();
    // A dies while the page follows; C continues the session (a new segment, a new epoch):
    // its turn appears on the page too, without a reload.
    let c = Host::new(&url, &store.env());
    let mut on_c = continued(live, &c, &session);
    see(4, &c, &mut on_c);
    let mut sorted = lags.clone();
    sorted.sort_by(f64::total_cmp);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let line = format!(
        "followed from another host (ship interval 1 s): lag per turn {:?} ms; min {:.0}, median {:.0}, max {:.0} ms (load average {})\n",
        lags.iter().map(|l| l.round()).collect::<Vec<_>>(),
        sorted[0],
        (sorted[1] + sorted[2]) / 2.0,
        sorted[3],
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    let _ = std::io::stderr().write_all(line.as_bytes());
    // The session closes on C: the page says so and asks no more.
    let (code, _) = on_c.finish();
    assert_eq!(code, 0);
    let ended = next_step(&steps, "ended", None, &served);
    assert!(ended["note"].as_str().unwrap().contains("ended"), "{ended}");
    assert_eq!(ended["turns"], 7, "{ended}");
    assert_eq!(ended["problems"], serde_json::json!([]), "{ended}");
    let quiet = next_step(&steps, "quiet", None, &served);
    assert_eq!(quiet["asks"], 0, "{quiet}");
    assert!(child.wait().unwrap().success());
    let log = served.stop();
    assert!(!log.contains(TOKEN), "the token is never logged: {log}");
    assert!(!log.contains("panicked"), "{log}");
}

/// What the turns cost is `stats --store`'s `costing 0.25 USD` (the scripted agent's one prompt
/// reports a cumulative 0.25 USD), which each cost table's amounts on the page (`usage`, the
/// driver's step) and each cost chart's bars' titles sum to, currency by currency, exactly.
fn costs_are_stats_s(usage: &Value, stats: &str) {
    let costs = spent(stats.lines().last().unwrap());
    assert_eq!(costs, [("USD".to_string(), 250_000_000)].into(), "{stats}");
    for by in ["agent", "host"] {
        let rows: Vec<Vec<String>> =
            serde_json::from_value(usage["costTables"][by].clone()).unwrap();
        let mut sums = std::collections::BTreeMap::new();
        for row in &rows {
            *sums.entry(row[2].clone()).or_default() += billionths(&row[3]);
        }
        assert_eq!(sums, costs, "{by}: {rows:?}\n{stats}");
        let charts = usage["costCharts"][by].as_array().unwrap();
        assert_eq!(charts.len(), 1, "a chart per currency: {charts:?}");
        assert_eq!(
            charts[0]["label"],
            format!("Cost per day by {by}, in USD"),
            "{charts:?}"
        );
        // "2026-11-29 · host-2\n0.25 USD, 1 turns, 1 sessions": the amount before the currency.
        let mut sums = std::collections::BTreeMap::new();
        for title in charts[0]["titles"].as_array().unwrap() {
            let last = title.as_str().unwrap().lines().last().unwrap();
            let words: Vec<&str> = last.split([' ', ',']).collect();
            *sums.entry(words[1].to_string()).or_default() += billionths(words[0]);
        }
        assert_eq!(sums, costs, "{by}: {charts:?}");
    }
}

/// A decimal amount (`0.25`) in billionths, exactly.
fn billionths(decimal: &str) -> u128 {
    let (whole, part) = decimal.split_once('.').unwrap_or((decimal, ""));
    assert!(part.len() <= 9, "{decimal}");
    let part = format!("{part:0<9}");
    whole.parse::<u128>().unwrap() * 1_000_000_000 + part.parse::<u128>().unwrap()
}

/// What a `stats --store` summary line says the turns cost (`costing 0.25 USD + 3 EUR`), in
/// billionths per currency.
fn spent(line: &str) -> std::collections::BTreeMap<String, u128> {
    let Some((_, costing)) = line.split_once(", costing ") else {
        return Default::default();
    };
    let costing = &costing[..costing.find(", from ").unwrap()];
    costing
        .split(" + ")
        .map(|c| {
            let (amount, currency) = c.split_once(' ').unwrap();
            (currency.to_string(), billionths(amount))
        })
        .collect()
}

#[test]
fn a_host_without_a_store_has_no_team_view() {
    let journals = tempfile::tempdir().unwrap();
    let served = Served::start(journals.path(), &[], &Peers::get().py_echo_agent());
    for path in [
        "/team/sessions",
        "/team/search?q=x",
        "/team/usage",
        "/team/usage.csv?by=host",
    ] {
        assert_eq!(get(&served, path, &[]).0, 401, "{path}");
        let (status, body) = get(&served, path, &[bearer()]);
        assert_eq!(status, 404, "{path}");
        assert!(String::from_utf8_lossy(&body).contains("--store"), "{path}");
    }
    // The page says so, and so shows no Team button.
    let (status, page) = get(&served, "/", &[]);
    assert_eq!(status, 200);
    assert!(String::from_utf8_lossy(&page).contains("data-team=\"\""));
    served.stop();
}
