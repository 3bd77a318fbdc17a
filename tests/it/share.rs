//! Share links (`acp-journal share`, the page's Share button, `serve --store`'s `/share/`):
//! sessions recorded through the proxy into s3s-fs, a link made by the command and one by the
//! page in Debian's headless chromium (`tests/agents/team_driver.mjs --share`), each shown on
//! two hosts serving the store and nowhere else; expired, revoked, pointed at another session,
//! made without the token. Screenshots go to `target/page-screenshots/`.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Instant;

use serde_json::Value;

use crate::fleet::{Host, converse, eventually};
use crate::serve::{Reply, Served, TOKEN, bearer, request_to};
use crate::stores::S3sFs;
use crate::util::{Peers, screenshots};

/// `method path` of `served` with `headers`.
fn ask(served: &Served, method: &str, path: &str, headers: &[String]) -> Reply {
    request_to(served.addr, method, path, headers, b"")
}

/// A host serving the store at `url` with the test's token, records trusted `recheck` seconds.
fn serving(store: &S3sFs, url: &str, recheck: &str) -> (Host, Served) {
    let reader = Host::new(url, &store.env());
    let served = reader.serve(&["--share-recheck", recheck]);
    (reader, served)
}

/// The page's address of `served`.
fn base(served: &Served) -> String {
    served.url.trim_end_matches("/acp").to_string()
}

/// A record's time (Unix microseconds) as the banner says it.
fn minute(us: &Value) -> String {
    jiff::Timestamp::from_microsecond(us.as_i64().unwrap())
        .unwrap()
        .strftime("%Y-%m-%d %H:%M UTC")
        .to_string()
}

/// The secret of `link` (its last path segment).
fn secret_of(link: &str) -> &str {
    link.rsplit('/').next().unwrap()
}

#[test]
fn a_shared_session_is_seen_alone_on_every_host_until_it_expires_or_is_revoked() {
    let store = S3sFs::start();
    let url = store.url("share");
    let recorder = Host::new(&url, &store.env());
    let shared = converse(&recorder, &["alpha apple first", "alpha second"]);
    let other = converse(&recorder, &["bravo private other"]);
    let (_one, first) = serving(&store, &url, "1");
    let (_two, second) = serving(&store, &url, "1");
    eventually("the hosts list both sessions", || {
        let reply = ask(&first, "GET", "/team/sessions", &[bearer()]);
        let answer: Value = serde_json::from_slice(&reply.body).unwrap_or_default();
        (answer["total"] != 2).then(|| reply.text())
    });

    // `share` prints a link; the store keeps a hash of its secret, never the secret.
    let (code, out, err) = recorder.cli(&["share", &shared[..8], "--url", &base(&first)]);
    assert_eq!(code, 0, "{err}");
    let link = out.trim().to_string();
    assert!(
        link.starts_with(&format!("{}/share/", base(&first))),
        "{link}"
    );
    let secret = secret_of(&link).to_string();
    assert_eq!(secret.len(), 22, "{link}");
    assert!(err.contains("read-only link"), "{err}");
    let records: Vec<PathBuf> = store
        .object_files()
        .into_iter()
        .filter(|f| f.parent().is_some_and(|p| p.ends_with("shares")))
        .collect();
    assert_eq!(records.len(), 1, "{records:?}");
    for file in store.object_files() {
        let bytes = std::fs::read(&file).unwrap();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(&secret),
            "the secret is in {}",
            file.display()
        );
    }
    let record: Value = serde_json::from_slice(&std::fs::read(&records[0]).unwrap()).unwrap();
    assert_eq!(record["session"], shared.as_str(), "{record}");
    assert_eq!(
        record["expires"].as_i64().unwrap() - record["created"].as_i64().unwrap(),
        7 * 86_400_000_000,
        "{record}"
    );

    // The link shows that session, as the export renders it, on both hosts, without the token.
    let path = format!("/share/{secret}");
    for served in [&first, &second] {
        let started = Instant::now();
        let reply = ask(served, "GET", &path, &[]);
        let took = started.elapsed();
        let html = reply.text();
        assert_eq!(reply.status, 200, "{html}");
        let _ = writeln!(std::io::stderr(), "a shared session served in {took:?}");
        assert!(html.contains("alpha apple first"), "{html}");
        assert!(html.contains(&format!("ACP session <code>{shared}</code>")));
        assert!(!html.contains("bravo private other") && !html.contains(&other));
        assert_eq!(reply.header("referrer-policy"), Some("no-referrer"));
        assert_eq!(reply.header("cache-control"), Some("no-store"));
        let policy = reply.header("content-security-policy").unwrap();
        assert!(policy.starts_with("default-src 'none'"), "{policy}");
        assert!(policy.contains("frame-ancestors 'none'"), "{policy}");
        for external in ["<link", "<img", "<script src", "<iframe", "url("] {
            assert!(!html.contains(external), "{external} in the shared page");
        }
    }
    // The same page as `export --format html` of the session, opened by a banner rendered
    // from the record: shared, read-only, by whom on which host, until when; no secret.
    let (code, exported, err) = recorder.cli(&["export", &shared, "--format", "html"]);
    assert_eq!(code, 0, "{err}");
    let page = ask(&second, "GET", &path, &[]).text();
    let banner = format!(
        "<strong>A shared session, read-only.</strong> Shared by &quot;{}&quot; on host \
         &quot;{}&quot;. This link works until {}.</aside>\n",
        record["user"].as_str().unwrap(),
        record["host"].as_str().unwrap(),
        minute(&record["expires"]),
    );
    let start = page
        .find("<aside class=\"shared-banner\"")
        .expect("a banner");
    let end = page.find(&banner).expect("the record's banner") + banner.len();
    assert_eq!(&page[start - "<body>\n".len()..start], "<body>\n", "{page}");
    assert!(!page[start..end].contains(&secret));
    assert_eq!(format!("{}{}", &page[..start], &page[end..]), exported);

    // The page's Share button needs the token, as every team request does; with it, a link.
    let make = format!("/team/share?id={shared}&days=1");
    assert_eq!(ask(&first, "POST", &make, &[]).status, 401);
    let wrong = "Authorization: Bearer wrong-token-0123456789".to_string();
    assert_eq!(ask(&first, "POST", &make, &[wrong]).status, 401);
    assert_eq!(ask(&first, "GET", &make, &[bearer()]).status, 405);
    let over = format!("/team/share?id={shared}&days=31");
    assert_eq!(ask(&first, "POST", &over, &[bearer()]).status, 400);
    let none = "/team/share?id=no-such-session";
    assert_eq!(ask(&first, "POST", none, &[bearer()]).status, 404);
    let made = ask(&first, "POST", &make, &[bearer()]);
    assert_eq!(made.status, 200, "{}", made.text());
    let made = made.json();
    let page_path = made["path"].as_str().unwrap().to_string();
    assert_eq!(ask(&second, "GET", &page_path, &[]).status, 200);

    // In chromium: the Share button with the keyboard, the link opened in a fresh context
    // (no token, no list, no search), on the second host too, and pointed at another session.
    let driver = Peers::get().team_driver();
    let out = Command::new(&driver[0])
        .args(&driver[1..])
        .args(["--url", &base(&first), "--token", TOKEN])
        .args([
            "--share",
            &shared,
            "--second",
            &base(&second),
            "--other",
            &other,
        ])
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
            first.log()
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
            let line = format!("share screenshot ({}): {shot}\n", step["step"]);
            let _ = std::io::stderr().write_all(line.as_bytes());
        }
    }
    let made = &steps["share"];
    assert_eq!(made["toShare"], 2, "{made}");
    assert_eq!(made["focused"], "share-link", "{made}");
    assert_eq!(made["problems"], serde_json::json!([]), "{made}");
    let page_link = made["link"].as_str().unwrap();
    assert!(
        page_link.starts_with(&format!("{}/share/", base(&first))),
        "{made}"
    );
    let view = &steps["view"];
    assert_eq!(view["status"], 200, "{view}");
    assert_eq!(view["referrer"], "no-referrer", "{view}");
    assert_eq!(view["h1"], format!("ACP session {shared}"), "{view}");
    // The banner first, from the page's record (7 days, the form's default).
    let page_record: Value = store
        .object_files()
        .into_iter()
        .filter(|f| f.parent().is_some_and(|p| p.ends_with("shares")))
        .map(|f| serde_json::from_slice::<Value>(&std::fs::read(f).unwrap()).unwrap())
        .find(|r| {
            r["user"] == "page"
                && r["expires"].as_i64().unwrap() - r["created"].as_i64().unwrap()
                    == 7 * 86_400_000_000
        })
        .unwrap();
    assert_eq!(
        view["banner"].as_str().unwrap(),
        format!(
            "A shared session, read-only. Shared from the team page of host \"{}\". This link \
             works until {}.",
            page_record["host"].as_str().unwrap(),
            minute(&page_record["expires"])
        ),
        "{view}"
    );
    assert_eq!(view["bannerFirst"], true, "{view}");
    assert!(
        !view["banner"]
            .as_str()
            .unwrap()
            .contains(secret_of(page_link))
    );
    assert_eq!(view["turns"], 2, "{view}");
    assert_eq!(view["pageParts"], 0, "{view}");
    assert_eq!(view["storage"], 0, "{view}");
    // Nothing from anywhere else: the link, and at most what the browser asks its host itself.
    let requests = view["requests"].as_array().unwrap();
    assert_eq!(requests[0], page_link, "{view}");
    assert!(
        requests.iter().all(|r| r
            .as_str()
            .unwrap()
            .starts_with(&format!("{}/", base(&first)))),
        "{view}"
    );
    assert_eq!(view["problems"], serde_json::json!([]), "{view}");
    assert!(!view["text"].as_str().unwrap().contains("bravo"), "{view}");
    assert_eq!(steps["second"]["status"], 200, "{}", steps["second"]);
    let another = &steps["another"];
    assert_eq!(
        another["statuses"],
        serde_json::json!([404, 404]),
        "{another}"
    );
    assert_eq!(another["leaked"], false, "{another}");
    assert_eq!(another["h1"], "No such link", "{another}");

    // `share --list`: the three links, active, never a secret.
    let (code, listed, err) = recorder.cli(&["share", "--list"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(listed.matches(&shared).count(), 3, "{listed}");
    assert_eq!(listed.matches("active").count(), 3, "{listed}");
    assert!(listed.contains("page@"), "{listed}");
    assert!(!listed.contains(&secret) && !listed.contains(secret_of(page_link)));
    // More than 30 days is refused.
    let (code, _, err) = recorder.cli(&["share", &shared, "--expires", "31d"]);
    assert_eq!(code, 2);
    assert!(err.contains("at most 30 days"), "{err}");

    // Expired: a record whose time is up, as the store holds it, refused on a host that never
    // read it.
    let (code, out, err) = recorder.cli(&["share", &shared, "--expires", "1h"]);
    assert_eq!(code, 0, "{err}");
    let expiring = out.trim().to_string();
    let files: Vec<PathBuf> = store
        .object_files()
        .into_iter()
        .filter(|f| f.parent().is_some_and(|p| p.ends_with("shares")))
        .collect();
    let file = files
        .iter()
        .find(|f| {
            let r: Value = serde_json::from_slice(&std::fs::read(f).unwrap()).unwrap();
            r["expires"].as_i64().unwrap() - r["created"].as_i64().unwrap() == 3_600_000_000
        })
        .unwrap();
    let mut record: Value = serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
    record["expires"] = Value::from(record["created"].as_i64().unwrap() + 1);
    std::fs::write(file, serde_json::to_vec(&record).unwrap()).unwrap();
    let reply = ask(
        &second,
        "GET",
        &format!("/share/{}", secret_of(&expiring)),
        &[],
    );
    assert_eq!(reply.status, 410, "{}", reply.text());
    assert!(reply.text().contains("This link has expired"));
    assert!(!reply.text().contains("alpha"));

    // Revoked by its link: refused on both hosts (each read the record, and trusts it one
    // second here, a minute at most), and said as such.
    let (code, out, err) = recorder.cli(&["share", "--revoke", &link]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("revoked 1 link"), "{out}");
    for served in [&first, &second] {
        eventually("the revoked link is refused", || {
            let reply = ask(served, "GET", &path, &[]);
            (reply.status != 410).then(|| format!("{}: {}", reply.status, reply.text()))
        });
        let refused = ask(served, "GET", &path, &[]).text();
        assert!(refused.contains("This link was revoked"), "{refused}");
        assert!(!refused.contains("alpha"), "{refused}");
    }
    // The page's link still works; revoking the session's links ends it too.
    assert_eq!(ask(&first, "GET", &page_path, &[]).status, 200);
    let (code, out, err) = recorder.cli(&["share", "--revoke", &shared]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("revoked 4 links"), "{out}");
    eventually("the session's links are refused", || {
        let reply = ask(&first, "GET", &page_path, &[]);
        (reply.status != 410).then(|| reply.text())
    });
    let (_, listed, _) = recorder.cli(&["share", "--list"]);
    assert_eq!(listed.matches("revoked").count(), 4, "{listed}");

    // Erased: a link to the other session, working on both hosts, is refused on both as soon
    // as `erase` returns, its record deleted with the session's objects; `share --list` no
    // longer shows it.
    let (code, out, err) = recorder.cli(&["share", &other, "--url", &base(&first)]);
    assert_eq!(code, 0, "{err}");
    let erased_path = format!("/share/{}", secret_of(out.trim()));
    for served in [&first, &second] {
        let reply = ask(served, "GET", &erased_path, &[]);
        assert_eq!(reply.status, 200, "{}", reply.text());
        assert!(reply.text().contains("bravo private other"));
    }
    let records = |store: &S3sFs| {
        store
            .object_files()
            .into_iter()
            .filter(|f| f.parent().is_some_and(|p| p.ends_with("shares")))
            .count()
    };
    assert_eq!(records(&store), 5);
    let (code, out, err) = recorder.cli(&["erase", &other]);
    assert_eq!(code, 0, "{err}");
    assert!(out.ends_with(", 1 share links\n"), "{out}");
    assert_eq!(records(&store), 4, "only the erased session's record went");
    for served in [&first, &second] {
        let reply = ask(served, "GET", &erased_path, &[]);
        assert_eq!(reply.status, 404, "{}", reply.text());
        assert!(!reply.text().contains("bravo"), "{}", reply.text());
    }
    let (_, listed, _) = recorder.cli(&["share", "--list"]);
    assert!(!listed.contains(&other), "{listed}");
    assert_eq!(listed.lines().count(), 1 + 4, "{listed}");

    // Pointed at another session, over raw sockets: nothing of it, whatever the path or query
    // (last: each is a wrong guess, and slows this address's next answers).
    for wrong in [
        format!("{path}?id={other}"),
        format!("{path}?session={other}"),
        format!("{path}/{other}"),
        format!("{path}/../../team/session?id={other}"),
        format!("/share/{other}"),
        format!("/share/{}", &secret[..21]),
    ] {
        let reply = ask(&first, "GET", &wrong, &[]);
        assert_eq!(reply.status, 404, "{wrong}");
        assert!(!reply.text().contains("bravo"), "{wrong}");
        assert_eq!(reply.header("referrer-policy"), Some("no-referrer"));
    }
    // The secret is no token for the team view.
    let as_token = format!("Authorization: Bearer {secret}");
    let reply = ask(
        &first,
        "GET",
        &format!("/team/session?id={other}"),
        &[as_token],
    );
    assert_eq!(reply.status, 401);

    // No secret in either host's log.
    let secrets = [secret.clone(), secret_of(page_link).to_string()];
    for log in [first.stop(), second.stop()] {
        for s in &secrets {
            assert!(!log.contains(s.as_str()), "a secret in the log: {log}");
        }
        assert!(!log.contains(TOKEN));
    }
}
