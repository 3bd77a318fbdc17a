//! Tracing end to end: spans exported live (`--otlp`) and after the fact (`export --format otlp`)
//! to a real OTLP backend (Arize Phoenix, installed by `scripts/install-otlp-backend.sh`) and
//! read back; a down or silent backend changes nothing the editor or the agent sees; and
//! `--trace-context` hands the agent its turn's span as parent.

use std::collections::{BTreeMap, BTreeSet};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::util::*;

/// A Phoenix server for this test process, stopped when the process ends (its wrapper shell
/// kills it when our end of its stdin closes).
struct Phoenix {
    url: String,
    _child: Child,
    _dir: tempfile::TempDir,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The body of a 2xx answer to a GET of `url`.
fn http_text(url: &str) -> Option<String> {
    // reqwest's TLS takes the process's crypto provider, which `main` installs in the binary.
    acp_journal::net::tls::crypto_provider();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let response = reqwest::get(url).await.ok()?.error_for_status().ok()?;
        response.text().await.ok()
    })
}

fn http_get(url: &str) -> Option<Value> {
    serde_json::from_str(&http_text(url)?).ok()
}

fn phoenix() -> &'static str {
    static PHOENIX: OnceLock<Phoenix> = OnceLock::new();
    &PHOENIX
        .get_or_init(|| {
            full_tier("Arize Phoenix (scripts/install-otlp-backend.sh)");
            let bin = root().join(".peers/phoenix/bin/phoenix");
            assert!(
                bin.exists(),
                "Arize Phoenix is not installed in {}: run scripts/install-otlp-backend.sh (scripts/test.sh does)",
                bin.display()
            );
            let dir = tempfile::tempdir().unwrap();
            let port = free_port();
            let child = Command::new("sh")
                .args([
                    "-c",
                    "\"$0\" serve >\"$PHOENIX_WORKING_DIR/log\" 2>&1 & p=$!; cat >/dev/null; kill $p",
                ])
                .arg(&bin)
                .env("PHOENIX_WORKING_DIR", dir.path())
                .env("PHOENIX_HOST", "127.0.0.1")
                .env("PHOENIX_PORT", port.to_string())
                .env("PHOENIX_GRPC_PORT", free_port().to_string())
                .stdin(Stdio::piped())
                .spawn()
                .expect("starting phoenix");
            let url = format!("http://127.0.0.1:{port}");
            let deadline = Instant::now() + Duration::from_secs(120);
            while http_text(&format!("{url}/healthz")).is_none() {
                assert!(
                    Instant::now() < deadline,
                    "Phoenix did not start within 120 s: {}",
                    std::fs::read_to_string(dir.path().join("log")).unwrap_or_default()
                );
                std::thread::sleep(Duration::from_millis(250));
            }
            Phoenix {
                url,
                _child: child,
                _dir: dir,
            }
        })
        .url
}

/// Every span Phoenix holds for `project`, by span ID.
fn phoenix_spans(project: &str) -> BTreeMap<String, Value> {
    let mut spans = BTreeMap::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut url = format!("{}/v1/projects/{project}/spans?limit=1000", phoenix());
        if let Some(c) = &cursor {
            url.push_str(&format!("&cursor={c}"));
        }
        let Some(page) = http_get(&url) else {
            return spans;
        };
        for span in page["data"].as_array().into_iter().flatten() {
            let id = span["context"]["span_id"].as_str().unwrap().to_string();
            assert!(
                spans.insert(id, span.clone()).is_none(),
                "a span twice: {span}"
            );
        }
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => return spans,
        }
    }
}

/// Phoenix ingests in the background: wait (bounded) until it holds `count` spans of `project`.
fn wait_for_spans(project: &str, count: usize) -> BTreeMap<String, Value> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let spans = phoenix_spans(project);
        if spans.len() >= count || Instant::now() > deadline {
            return spans;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The spans of `export --format otlp -o FILE` (every line's request): (trace, span, parent,
/// name) by span ID.
fn exported(
    store: &Path,
    session: &str,
) -> BTreeMap<String, (String, Option<String>, String, Value)> {
    let file = store.join("spans.json");
    let _ = std::fs::remove_file(&file);
    let (code, _, err) = run_cli_store(
        store,
        &[
            "export",
            session,
            "--format",
            "otlp",
            "-o",
            file.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{err}");
    // JSON Lines: one export request per batch of spans.
    let text = std::fs::read_to_string(&file).unwrap();
    let requests: Vec<Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    requests
        .iter()
        .flat_map(|v| {
            v["resourceSpans"][0]["scopeSpans"][0]["spans"]
                .as_array()
                .unwrap()
        })
        .map(|s| {
            (
                s["spanId"].as_str().unwrap().to_string(),
                (
                    s["traceId"].as_str().unwrap().to_string(),
                    s["parentSpanId"].as_str().map(str::to_string),
                    s["name"].as_str().unwrap().to_string(),
                    s.clone(),
                ),
            )
        })
        .collect()
}

/// Run `agent` behind the proxy with `options` (and `env`), one session, `prompts` prompts;
/// returns the session ID and every line the client received.
fn record(
    store: &Path,
    options: &[&str],
    env: &[(&str, &Path)],
    agent: &[String],
    prompts: usize,
) -> (String, Vec<Vec<u8>>) {
    let mut client = TestClient::spawn_env(&proxied_with(store, options, agent), env);
    let session = client.start_session("/tmp");
    for n in 0..prompts {
        let response = client.prompt(&session, &format!("prompt {n}"));
        assert!(response.get("result").is_some(), "{response}");
    }
    let (code, received) = client.finish();
    assert_eq!(code, 0);
    (session, received.into_iter().map(|r| r.raw).collect())
}

fn attr(span: &Value, key: &str) -> Value {
    span["attributes"][key].clone()
}

#[test]
fn live_and_later_exports_reach_phoenix_with_the_same_spans_and_no_duplicates() {
    let url = phoenix().to_string();
    for (project, agent, prompts) in [
        ("otel-ts", Peers::get().ts_agent(), 1),
        ("otel-scripted", scripted("otel"), 2),
    ] {
        let store = tempfile::tempdir().unwrap();
        // Each project its own Phoenix project (spawn_env takes the value as a path).
        let attrs = format!("openinference.project.name={project}");
        let (session, _) = record(
            store.path(),
            &["--otlp", &url],
            &[("OTEL_RESOURCE_ATTRIBUTES", Path::new(&attrs))],
            &agent,
            prompts,
        );
        let want = exported(store.path(), &session);
        let turns: Vec<_> = want.values().filter(|s| s.1.is_none()).collect();
        assert_eq!(turns.len(), prompts, "{want:?}");
        assert!(want.len() > prompts, "tool spans: {want:?}");

        // Live: every span the later export computes is there, same IDs, same parents.
        let live = wait_for_spans(project, want.len());
        assert_eq!(
            live.keys().collect::<BTreeSet<_>>(),
            want.keys().collect::<BTreeSet<_>>(),
            "{project}: live spans differ from the export's"
        );
        for (id, (trace, parent, name, _)) in &want {
            let got = &live[id];
            assert_eq!(got["context"]["trace_id"], json!(trace));
            assert_eq!(got["parent_id"].as_str(), parent.as_deref(), "{got}");
            assert_eq!(got["name"], json!(name));
            match parent {
                None => {
                    assert!(name.starts_with("invoke_agent"), "{name}");
                    assert_eq!(attr(got, "gen_ai.operation.name"), "invoke_agent");
                    assert_eq!(attr(got, "gen_ai.conversation.id"), json!(session));
                    assert_eq!(
                        attr(got, "gen_ai.response.finish_reasons"),
                        json!(["end_turn"])
                    );
                }
                Some(parent) => {
                    assert!(name.starts_with("execute_tool"), "{name}");
                    assert_eq!(live[parent]["context"]["trace_id"], json!(trace));
                    assert_eq!(attr(got, "gen_ai.operation.name"), "execute_tool");
                    assert!(attr(got, "gen_ai.tool.call.id").is_string(), "{got}");
                }
            }
        }

        // After the fact to the same backend: same IDs, so nothing is added.
        let (code, _, err) = run_cli_store(
            store.path(),
            &["export", &session, "--format", "otlp", "--endpoint", &url],
        );
        assert_eq!(code, 0, "{err}");
        assert!(
            err.contains(&format!("exported {} spans", want.len())),
            "{err}"
        );
        std::thread::sleep(Duration::from_secs(2));
        assert_eq!(
            phoenix_spans(project).len(),
            want.len(),
            "{project}: duplicates"
        );

        if project == "otel-scripted" {
            let turn = live.values().find(|s| s["parent_id"].is_null()).unwrap();
            assert_eq!(turn["name"], "invoke_agent scripted-otel");
            assert_eq!(attr(turn, "gen_ai.agent.name"), "scripted-otel");
            assert_eq!(attr(turn, "gen_ai.agent.version"), "0.1");
            assert_eq!(attr(turn, "gen_ai.usage.input_tokens"), 120);
            assert_eq!(attr(turn, "gen_ai.usage.output_tokens"), 30);
            assert_eq!(attr(turn, "gen_ai.usage.cache_read.input_tokens"), 100);
            assert_eq!(attr(turn, "gen_ai.usage.cache_creation.input_tokens"), 7);
            let failed = live
                .values()
                .find(|s| s["name"] == "execute_tool Run make")
                .unwrap();
            assert_eq!(failed["status_code"], "ERROR");
            assert_eq!(attr(failed, "gen_ai.tool.type"), "execute");
            // No content without --otlp-content.
            assert!(attr(turn, "gen_ai.input.messages").is_null(), "{turn}");
        }
    }
}

/// The connection journals' `otlp_dropped` events.
fn dropped_events(store: &Path) -> Vec<Value> {
    read_store(store)
        .into_iter()
        .flat_map(|(_, _, records)| records)
        .filter(|r| r["event"]["type"] == "otlp_dropped")
        .map(|r| r["event"].clone())
        .collect()
}

#[test]
fn a_down_or_silent_backend_changes_nothing_and_the_loss_is_journaled() {
    let agent = scripted("otel");
    let plain = tempfile::tempdir().unwrap();
    let (_, want) = record(plain.path(), &[], &[], &agent, 2);
    let want_journal = session_messages(plain.path());
    assert!(dropped_events(plain.path()).is_empty());

    // A closed port, and a listener that accepts and never answers.
    let closed = format!("http://127.0.0.1:{}", free_port());
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_url = format!("http://{}", silent.local_addr().unwrap());
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in silent.incoming() {
            held.push(conn);
        }
    });
    for url in [closed, silent_url] {
        let store = tempfile::tempdir().unwrap();
        let started = Instant::now();
        let (_, got) = record(store.path(), &["--otlp", &url], &[], &agent, 2);
        assert!(started.elapsed() < Duration::from_secs(20));
        assert_eq!(got, want, "{url}: the client saw other bytes");
        assert_eq!(
            session_messages(store.path()),
            want_journal,
            "{url}: journal differs"
        );
        let events = dropped_events(store.path());
        assert_eq!(events.len(), 1, "{url}: {events:?}");
        // Two turns, each with two tool calls.
        assert_eq!(events[0]["spans"], 6, "{url}: {events:?}");
        assert_eq!(events[0]["records"], 0);
    }
}

#[test]
fn trace_context_gives_the_agent_its_turn_span_as_parent() {
    let store = tempfile::tempdir().unwrap();
    let log = store.path().join("agent.log");
    let (session, _) = record(
        store.path(),
        &["--trace-context"],
        &[("AGENT_LOG", &log)],
        &scripted("otel"),
        2,
    );
    let received: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let parents: Vec<String> = received
        .iter()
        .filter(|m| m["method"] == "session/prompt")
        .map(|m| {
            m["params"]["_meta"]["traceparent"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(parents.len(), 2);
    let spans = exported(store.path(), &session);
    let mut turns: Vec<&Value> = spans
        .values()
        .filter(|s| s.1.is_none())
        .map(|s| &s.3)
        .collect();
    turns.sort_by_key(|s| {
        s["startTimeUnixNano"]
            .as_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
    });
    for (traceparent, turn) in parents.iter().zip(&turns) {
        let parts: Vec<&str> = traceparent.split('-').collect();
        assert_eq!(parts.len(), 4, "{traceparent}");
        assert_eq!(parts[0], "00");
        assert_eq!(parts[1], turn["traceId"], "{traceparent}");
        assert_eq!(parts[2], turn["spanId"], "{traceparent}");
        assert_eq!(parts[3], "01");
    }
    assert_ne!(parents[0], parents[1]);
    // The journal keeps the client's bytes.
    for msgs in session_messages(store.path()).values() {
        for m in msgs.iter().filter(|m| m["method"] == "session/prompt") {
            assert!(m["params"].get("_meta").is_none(), "{m}");
        }
    }
}
