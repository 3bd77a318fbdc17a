//! The HTML export, opened in a real headless browser (Debian's chromium, installed by
//! `scripts/install-chromium.sh`, which `scripts/test.sh` runs).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::{Peers, TestClient, first_entry, only_session, proxied, run_cli, sample_copy};

/// A prompt that would run script and add markup if the page did not escape it.
const HOSTILE: &str = "<script>document.body.appendChild(document.createElement('blink'))</script>\
                       <img src=x onerror=\"document.body.appendChild(document.createElement('blink'))\">";

/// The browser; the test fails (never skips) without it.
fn chromium() -> PathBuf {
    crate::util::full_tier("chromium (scripts/install-chromium.sh)");
    let path = std::env::var_os("ACP_JOURNAL_CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    assert!(
        path.exists(),
        "{} is missing: run scripts/install-chromium.sh (scripts/test.sh does)",
        path.display()
    );
    path
}

/// Load `url` in a fresh headless chromium and return the DOM after the page's scripts ran.
fn dump_dom(url: &str) -> String {
    let profile = tempfile::tempdir().unwrap();
    let mut child = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting chromium");
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || std::io::read_to_string(stdout).unwrap());
    // A guard against a browser that hangs, not a performance assertion.
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("chromium did not finish loading {url}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let dom = reader.join().unwrap();
    assert!(status.success(), "chromium failed: {status}");
    dom
}

/// The text of the element `<pre id="selftest">` the page's script writes on `#selftest`.
fn selftest(dom: &str) -> serde_json::Value {
    let start = dom
        .find("<pre id=\"selftest\">")
        .expect("the page's script did not run")
        + "<pre id=\"selftest\">".len();
    let end = start + dom[start..].find("</pre>").unwrap();
    let text = dom[start..end]
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    serde_json::from_str(&text).unwrap()
}

/// Export `session` to `store/export.html` (replaced); returns the page and stderr.
fn export_html(store: &Path, session: &str) -> (String, String) {
    let page = store.join("export.html");
    let _ = std::fs::remove_file(&page);
    let args = [
        "export",
        "--journal-dir",
        store.to_str().unwrap(),
        session,
        "--format",
        "html",
        "-o",
        page.to_str().unwrap(),
    ];
    let (code, _, err) = run_cli(&args);
    assert_eq!(code, 0, "{err}");
    (std::fs::read_to_string(&page).unwrap(), err)
}

#[test]
fn html_export_renders_turns_and_a_tool_call_expands_in_a_browser() {
    // The TypeScript sample (tool calls, permission requests), continued by a second run whose
    // prompt is hostile markup.
    let store = sample_copy("typescript-agent");
    let session = only_session(store.path());
    let mut client = TestClient::spawn(&proxied(store.path(), &Peers::get().py_echo_agent()));
    client.initialize();
    let (_, loaded) = client.load(&session, "/tmp");
    assert!(loaded.get("result").is_some(), "{loaded}");
    assert!(client.prompt(&session, HOSTILE).get("result").is_some());
    client.finish();

    let (html, _) = export_html(store.path(), &session);
    assert!(!html.contains("<script>document") && !html.contains("<img"));
    assert!(
        html.contains("&lt;script&gt;document.body"),
        "shown as text"
    );
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "nothing fetched"
    );

    let page = store.path().join("export.html");
    let dom = dump_dom(&format!("file://{}#selftest", page.display()));
    let turns: Vec<&str> = dom.split("<section class=\"turn\"").skip(1).collect();
    assert_eq!(turns.len(), 3, "two recorded turns and the new one:\n{dom}");
    assert!(turns[0].contains("<div class=\"user\">Add a friendly greeting to hello.txt</div>"));
    assert!(turns[1].contains("<div class=\"user\">Thanks! Now add another one, please.</div>"));
    assert!(turns[2].contains("&lt;script&gt;document.body.appendChild"));
    assert!(!dom.contains("<blink"), "the journal's markup never runs");
    assert!(turns[0].contains("Permission for <b>Modifying critical configuration file</b>"));

    let report = selftest(&dom);
    assert_eq!(report["turns"], 3, "{report}");
    assert_eq!(report["tool"]["id"], "call_1", "{report}");
    assert_eq!(report["tool"]["open"], true, "{report}");
    assert!(
        report["tool"]["bodyHeight"].as_f64().unwrap() > 0.0,
        "{report}"
    );
    assert!(
        report["tool"]["bodyText"]
            .as_str()
            .unwrap()
            .contains("/project/README.md"),
        "{report}"
    );
    assert!(
        turns[0].contains("<details class=\"tool\" data-tool=\"call_1\" open=\"\">"),
        "the click opened the first tool call"
    );
    assert!(
        turns[1].contains("<details class=\"tool\" data-tool=\"call_1\"><summary>"),
        "the others stay closed"
    );
}

#[test]
fn html_export_of_a_damaged_journal_shows_what_precedes_the_damage() {
    let store = sample_copy("typescript-agent");
    let session = only_session(store.path());
    let segment = first_entry(&first_entry(&store.path().join("sessions")));
    let clean = std::fs::read(&segment).unwrap();
    let mut bad = clean.clone();
    let mid = bad.len() * 2 / 3;
    bad[mid] ^= 0x40;
    std::fs::write(&segment, &bad).unwrap();
    let (html, err) = export_html(store.path(), &session);
    assert!(err.contains("corrupt at record"), "{err}");
    assert!(html.contains("<div class=\"user\">Add a friendly greeting to hello.txt</div>"));
    let notes = html.matches("<div class=\"damage\" role=\"note\">").count();
    assert_eq!(notes, 2, "in the timeline and in the wire view:\n{html}");
    assert!(html.contains("ends here: corrupt at record"), "{html}");
    assert!(html.trim_end().ends_with("</html>"), "the page is complete");

    // Cut short at a record boundary (a proxy killed mid-session): nothing lost, but said.
    std::fs::write(&segment, &clean[..clean.len() * 2 / 3]).unwrap();
    let (html, _) = export_html(store.path(), &session);
    assert!(
        html.contains("<div class=\"note\" role=\"note\">"),
        "{html}"
    );
    assert!(html.contains("ends here: unfinished"), "{html}");
}
