//! Benchmark of `acp-journal serve`'s page: an update's delay from the agent to the page in a
//! browser, beside two WebSocket clients on the same session.
//!
//! Run with `cargo bench --bench page` (`BENCH_QUICK=1`: fewer updates). Needs Debian's chromium
//! and puppeteer-core (`scripts/install-chromium.sh`), the peers' `ws` (`scripts/install-peers.sh`)
//! and `python3`; without them it says what is missing and measures nothing. The measurement is
//! `benches/page/delay.mjs` (run from beside puppeteer-core), against `serve` in front of
//! `benches/page/pacing_agent.py`, which stamps each update with the wall clock when it writes
//! it: A (a WebSocket client that made the session and prompts), B (a WebSocket client that
//! joined by `session/load`) and the page in headless chromium (joined by `session/attach`; an
//! update counts when its text is in the page's DOM) note when each arrives. The markdown report
//! goes to stdout and `target/page-bench-report.md`. No figure is checked against a target.

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

mod browser;

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let ws = browser::peers().join("node-v2/node_modules/ws");
    let missing = browser::missing().or_else(|| {
        (!ws.exists()).then(|| (ws.clone(), "the peers' ws: run scripts/install-peers.sh"))
    });
    if let Some((path, what)) = missing {
        println!("page bench skipped: {} is missing ({what})", path.display());
        return;
    }
    let quick = std::env::var_os("BENCH_QUICK").is_some();
    let (n, pace_ms) = if quick { (1_000, 2) } else { (10_000, 2) };
    let script = browser::beside_puppeteer("benches/page/delay.mjs", "page_delay.mjs");
    eprintln!("bench: page: {n} updates, one every {pace_ms} ms, to A, B and the page");
    let out = Command::new("node")
        .arg(&script)
        .args(["--bin", env!("CARGO_BIN_EXE_acp-journal")])
        .arg("--agent")
        .arg(root.join("benches/page/pacing_agent.py"))
        .args(["--n", &n.to_string(), "--pace", &pace_ms.to_string()])
        .arg("--ws")
        .arg(&ws)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .expect("running node");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let Some(figures) = stdout
        .lines()
        .find_map(|l| serde_json::from_str::<Value>(l).ok())
    else {
        panic!("the page bench measured nothing ({}): {stdout}", out.status);
    };
    let report = report(&figures);
    print!("{report}");
    let target = root.join("target");
    let _ = std::fs::create_dir_all(&target);
    let _ = std::fs::write(target.join("page-bench-report.md"), &report);
}

/// The markdown report of `delay.mjs`'s figures.
fn report(f: &Value) -> String {
    let mut r = format!(
        "# serve's page: update delay\n\n{} updates, one every {} ms (turn took {:.2} s, {}); agent → receiver, wall clock.\n\n",
        f["n"],
        f["pace_ms"],
        f["seconds"].as_f64().unwrap_or_default(),
        f["stop"].as_str().unwrap_or("?"),
    );
    r.push_str("| receiver | updates | p50 µs | p99 µs | max µs |\n|---|---:|---:|---:|---:|\n");
    for (key, name) in [
        ("a", "A: made the session and prompts (WebSocket)"),
        ("b", "B: joined by session/load (WebSocket)"),
        (
            "page",
            "the page in headless chromium (joined by session/attach; text in the DOM)",
        ),
    ] {
        let s = &f[key];
        r.push_str(&format!(
            "| {name} | {} | {:.0} | {:.0} | {:.0} |\n",
            s["count"],
            s["p50_us"].as_f64().unwrap_or_default(),
            s["p99_us"].as_f64().unwrap_or_default(),
            s["max_us"].as_f64().unwrap_or_default(),
        ));
    }
    r
}
