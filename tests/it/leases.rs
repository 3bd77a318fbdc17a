//! One host at a time, for minutes rather than seconds (issue 37), through the built binary
//! against real stores (s3s-fs, a shared directory): a session continued across hosts while
//! their leases are renewed over and over; a host whose clock is a minute off; a lease that is
//! not a lease; two `serve` hosts behind nginx with the bridge, one killed between turns; a
//! refused load that leaves no trace; a refusing store said once; a killed host's turns
//! counted from a fresh copy.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::fleet::{Host, converse, eventually, listed};
use crate::serve::{Served, TOKEN, bridge};
use crate::stores::{S3sFs, s3_env};
use crate::util::{Peers, TestClient, texts};

/// Where `needles` first appear in `haystack`, each after the one before; panics naming the
/// first missing or out of order.
fn in_order(haystack: &str, needles: &[&str]) {
    let mut from = 0;
    for needle in needles {
        match haystack[from..].find(needle) {
            Some(at) => from += at + needle.len(),
            None => panic!("{needle:?} missing or out of order in:\n{haystack}"),
        }
    }
}

/// What a host's stderr said so far.
fn said(client: &TestClient) -> String {
    String::from_utf8_lossy(&client.stderr.lock().unwrap()).into_owned()
}

/// Wait until a reader with no journals of its own sees `wanted` in the session.
fn shipped(reader: &Host, session: &str, wanted: &str) {
    eventually(&format!("{wanted:?} in the store"), || {
        let (_, out, _) = reader.cli(&["show", session]);
        (!out.contains(wanted)).then_some(out)
    });
}

// The one real-time soak of the lease's renewals (two minutes of them, on purpose): their
// schedule is proven on paused time in `fleet::lease::tests`. The longest test of the suite:
// .config/nextest.toml starts it first.
#[test]
fn two_hosts_continue_one_session_through_minutes_of_renewals() {
    // A renews its lease for 20 s, ends cleanly; B takes the session and renews for two
    // minutes (about 120 renewals of a 3 s lease) while it prompts, and keeps shipping all
    // along; a third host is refused while B is alive, and once B is killed it waits B's
    // lease out and continues the same session.
    let store = S3sFs::start();
    let url = store.url("fleet");
    let (a, b, c) = (
        Host::new(&url, &store.env()),
        Host::new(&url, &store.env()),
        Host::new(&url, &store.env()),
    );
    let reader = Host::new(&url, &store.env());
    let agent = Peers::get().py_echo_agent();
    let ttl = ["--lease-ttl", "3"];
    let mut on_a = a.proxy(&agent, &ttl);
    on_a.initialize();
    let session = on_a.new_session("/tmp");
    for n in 1..=4 {
        on_a.prompt(&session, &format!("a turn {n}"));
        std::thread::sleep(Duration::from_secs(5));
    }
    assert_eq!(on_a.finish().0, 0);

    let mut on_b = b.proxy(&agent, &ttl);
    on_b.initialize();
    let (updates, answer) = on_b.load(&session, "/tmp");
    assert!(answer.get("result").is_some(), "{answer}");
    assert!(texts(&updates).iter().any(|t| t.contains("a turn 4")));
    let started = Instant::now();
    let mut n = 0;
    while started.elapsed() < Duration::from_secs(120) {
        n += 1;
        let answer = on_b.prompt(&session, &format!("b turn {n}"));
        assert!(answer.get("result").is_some(), "{answer}");
        if n == 6 {
            // Half-way: a third host asks for it and is refused, B being alive.
            let mut on_c = c.proxy(&agent, &ttl);
            on_c.initialize();
            let (_, refused) = on_c.load(&session, "/tmp");
            let message = refused["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains("is being continued on host"), "{refused}");
            assert_eq!(refused["error"]["data"]["reason"], "lease", "{refused}");
            let _ = on_c.finish();
        }
        // Every turn of B reaches the store, however many renewals went before it.
        shipped(&reader, &session, &format!("b turn {n}"));
        std::thread::sleep(Duration::from_secs(8));
    }
    assert!(n >= 10, "{n} turns");
    let err = said(&on_b);
    assert!(!err.contains("taken over by another host"), "{err}");
    // B dies without giving the session back; C waits its lease out and continues it.
    unsafe { libc::kill(on_b.child.id() as i32, libc::SIGKILL) };
    let _ = on_b.finish();
    let mut on_c = c.proxy(&agent, &ttl);
    on_c.initialize();
    let (updates, answer) = on_c.load(&session, "/tmp");
    assert!(answer.get("result").is_some(), "{answer}");
    let replayed = texts(&updates);
    assert!(
        replayed.iter().any(|t| t.contains(&format!("b turn {n}"))),
        "{replayed:?}"
    );
    on_c.prompt(&session, "c turn 1");
    assert_eq!(on_c.finish().0, 0);
    shipped(&reader, &session, "c turn 1");
    let (_, out, _) = reader.cli(&["show", &session]);
    in_order(
        &out,
        &[
            "a turn 1",
            "a turn 4",
            "b turn 1",
            &format!("b turn {n}"),
            "c turn 1",
        ],
    );
    // Nothing B journaled is held back from the store.
    let (_, stats, _) = crate::util::run_cli_store(&b.journals(), &["stats"]);
    assert!(!stats.contains("not in the shared store"), "{stats}");
}

#[test]
fn a_host_whose_clock_is_a_minute_off_takes_nothing_early_and_reads_in_order() {
    let store = S3sFs::start();
    let url = store.url("fleet");
    let (a, b) = (Host::new(&url, &store.env()), Host::new(&url, &store.env()));
    let agent = Peers::get().py_echo_agent();
    let ttl = ["--lease-ttl", "4"];
    let mut on_a = a.proxy(&agent, &ttl);
    on_a.initialize();
    let session = on_a.new_session("/tmp");
    on_a.prompt(&session, "a first");
    // A host 60 s ahead finds a live lease: refused, not taken.
    let mut fast = b.proxy_under(&["faketime", "-f", "+60s"], &agent, &ttl);
    fast.initialize();
    let (_, refused) = fast.load(&session, "/tmp");
    assert!(refused.get("error").is_some(), "{refused}");
    let _ = fast.finish();
    on_a.prompt(&session, "a second");
    let stderr_a = on_a.stderr.clone();
    let code = on_a.finish().0;
    assert_eq!(
        code,
        0,
        "{}",
        String::from_utf8_lossy(&stderr_a.lock().unwrap())
    );
    // A host 60 s behind continues it once A gave it back; its turns come after A's, though
    // its clock names them a minute earlier.
    let mut slow = b.proxy_under(&["faketime", "-f", "-60s"], &agent, &ttl);
    slow.initialize();
    let (_, answer) = slow.load(&session, "/tmp");
    assert!(answer.get("result").is_some(), "{answer}");
    slow.prompt(&session, "b after a");
    assert_eq!(slow.finish().0, 0);
    let reader = Host::new(&url, &store.env());
    shipped(&reader, &session, "b after a");
    let (_, out, _) = reader.cli(&["show", &session]);
    in_order(&out, &["a first", "a second", "b after a"]);
}

/// Put `bytes` at `rel` in the shared directory `root` (a bucket writer's doing).
fn put(root: &Path, rel: &str, bytes: &[u8]) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn a_lease_that_is_not_a_lease_is_waited_out_or_replaced_and_wedges_nothing() {
    let shared = tempfile::tempdir().unwrap();
    let root = shared.path().join("store");
    let url = format!("file://{}", root.display());
    let a = Host::new(&url, &[]);
    let session = converse(&a, &["before the garbage"]);
    let key = acp_journal::journal::dir::session_key(&session);
    let garbage = |n: u64| {
        put(&root, &format!("leases/{key}/lease"), b"\x00{not a lease");
        // Where the earlier layout numbers its records, too.
        for seq in 1..=n {
            let rel = format!("leases/{key}/{seq:016x}");
            if !root.join(&rel).exists() {
                put(&root, &rel, b"garbage");
            }
        }
    };
    garbage(8);
    let agent = Peers::get().py_echo_agent();
    // Waited out on the taker's own clock, then taken under the next epoch.
    let b = Host::new(&url, &[]);
    let mut on_b = b.proxy(&agent, &["--lease-ttl", "3"]);
    on_b.initialize();
    let (updates, answer) = on_b.load(&session, "/tmp");
    assert!(answer.get("result").is_some(), "{answer}");
    assert!(
        texts(&updates)
            .iter()
            .any(|t| t.contains("before the garbage"))
    );
    on_b.prompt(&session, "after the garbage");
    assert_eq!(on_b.finish().0, 0);
    // Garbage again: --takeover replaces it at once.
    garbage(16);
    let c = Host::new(&url, &[]);
    let mut on_c = c.proxy(&agent, &["--takeover"]);
    on_c.initialize();
    let (_, answer) = on_c.load(&session, "/tmp");
    assert!(answer.get("result").is_some(), "{answer}");
    on_c.prompt(&session, "taken over");
    assert_eq!(on_c.finish().0, 0);
    let reader = Host::new(&url, &[]);
    let (_, out, _) = reader.cli(&["show", &session]);
    in_order(
        &out,
        &["before the garbage", "after the garbage", "taken over"],
    );
}

/// nginx on a free loopback port in front of `primary`, with `backup` taking over when the
/// primary cannot be reached (plain HTTP and WebSocket upgrades), stopped when dropped.
struct Balancer {
    child: std::process::Child,
    port: u16,
    _prefix: tempfile::TempDir,
}

impl Balancer {
    fn start(primary: std::net::SocketAddr, backup: std::net::SocketAddr) -> Balancer {
        let prefix = tempfile::tempdir().unwrap();
        let port = crate::stores::free_port();
        let p = prefix.path().display();
        let config = format!(
            "worker_processes 1;\npid {p}/nginx.pid;\nerror_log {p}/error.log warn;\n\
             events {{ worker_connections 256; }}\n\
             http {{\n  access_log off;\n  client_body_temp_path {p}/body;\n  proxy_temp_path {p}/proxy;\n\
             fastcgi_temp_path {p}/fastcgi;\n  uwsgi_temp_path {p}/uwsgi;\n  scgi_temp_path {p}/scgi;\n\
             map $http_upgrade $connection_upgrade {{ default upgrade; '' ''; }}\n\
             upstream hosts {{ server {primary} max_fails=1 fail_timeout=60s; server {backup} backup; }}\n\
             server {{\n    listen 127.0.0.1:{port};\n    location = /acp {{\n\
             proxy_pass http://hosts;\n      proxy_http_version 1.1;\n\
             proxy_set_header Upgrade $http_upgrade;\n      proxy_set_header Connection $connection_upgrade;\n\
             proxy_set_header Host $host;\n      proxy_read_timeout 3600s;\n      proxy_connect_timeout 2s;\n    }}\n  }}\n}}\n"
        );
        let conf = prefix.path().join("nginx.conf");
        std::fs::write(&conf, config).unwrap();
        let mut child = Command::new("/usr/sbin/nginx")
            .args(["-p", &prefix.path().display().to_string(), "-c"])
            .arg(&conf)
            .args(["-g", "daemon off;"])
            .stderr(Stdio::null())
            .spawn()
            .expect("nginx: run scripts/install-nginx.sh (scripts/test.sh does)");
        crate::stores::wait_listening(port, &mut child);
        Balancer {
            child,
            port,
            _prefix: prefix,
        }
    }
}

impl Drop for Balancer {
    fn drop(&mut self) {
        // SAFETY: signalling our own child (the master takes its workers with it).
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

#[test]
fn a_session_survives_its_host_behind_a_load_balancer() {
    // The README's deployment: two `serve --store` hosts behind nginx, the editor on the
    // bridge. The first host is killed between turns; the bridge reconnects through nginx to
    // the second within a second or two, whose load waits for the dead host's lease (the
    // default, 15 s) and continues the same session.
    let store = S3sFs::start();
    let url = store.url("fleet");
    let agent = Peers::get().ts_agent();
    let serve = |dir: &Path| {
        let mut env: Vec<(String, String)> = store.env();
        env.push(("ACP_JOURNAL_TOKEN".into(), TOKEN.into()));
        env.push((
            "XDG_CACHE_HOME".into(),
            dir.join("cache").display().to_string(),
        ));
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        Served::start_env(
            &dir.join("journals"),
            &[
                "--store",
                &url,
                "--ship-interval",
                "0.2",
                "--allow-host",
                "localhost",
            ],
            &agent,
            &env,
        )
    };
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let host_a = serve(dir_a.path());
    let host_b = serve(dir_b.path());
    let balancer = Balancer::start(host_a.addr, host_b.addr);
    let editor = tempfile::tempdir().unwrap();
    let mut client = TestClient::spawn_env(
        &bridge(
            editor.path(),
            &format!("ws://localhost:{}/acp", balancer.port),
        ),
        &[("ACP_JOURNAL_TOKEN", Path::new(TOKEN))],
    );
    client.request(
        "initialize",
        json!({"protocolVersion":1,"clientCapabilities":{}}),
    );
    let new = client.request("session/new", json!({"cwd":"/tmp","mcpServers":[]}));
    let session = new["result"]["sessionId"].as_str().unwrap().to_string();
    for text in ["turn one", "turn two"] {
        let answer = client.prompt(&session, text);
        assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    }
    let reader = Host::new(&url, &store.env());
    shipped(&reader, &session, "turn two");
    // SAFETY: killing the server we started.
    unsafe { libc::kill(host_a.pid() as i32, libc::SIGKILL) };
    let killed = Instant::now();
    let mut answer = client.prompt(&session, "turn three");
    if answer.get("error").is_some() {
        // The prompt raced the drop: the bridge answered that the connection to its host dropped.
        answer = client.prompt(&session, "turn three");
    }
    let waited = killed.elapsed();
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    eprintln!(
        "the editor's turn after kill -9 of its host took {waited:?} (the default lease, 15 s)"
    );
    let _ = client.finish();
    // One conversation, one session, continued on B.
    shipped(&reader, &session, "turn three");
    let (_, out, _) = reader.cli(&["show", &session]);
    in_order(&out, &["turn one", "turn two", "turn three"]);
    let rows = listed(&reader);
    assert_eq!(rows.len(), 1, "one session, not split in two: {rows:?}");
    let log = host_b.stop();
    assert!(log.contains("taken (epoch 2"), "{log}");
    drop(balancer);
}

#[test]
fn a_refused_load_leaves_no_trace_and_every_host_s_sessions_are_listed() {
    let store = S3sFs::start();
    let url = store.url("fleet");
    let (a, b) = (Host::new(&url, &store.env()), Host::new(&url, &store.env()));
    let agent = Peers::get().py_echo_agent();
    let mut on_a = a.proxy(&agent, &["--lease-ttl", "4"]);
    on_a.initialize();
    let session = on_a.new_session("/tmp");
    on_a.prompt(&session, "a title from a");
    shipped(&Host::new(&url, &store.env()), &session, "a title from a");
    // The default scope lists this agent's sessions of every host.
    let mut on_b = b.proxy(&agent, &[]);
    on_b.initialize();
    let listed_on_b = |client: &mut TestClient| -> Vec<Value> {
        let listed = client.request("session/list", json!({}));
        listed["result"]["sessions"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    let find = |rows: &[Value]| {
        rows.iter()
            .find(|r| r["sessionId"] == session.as_str())
            .cloned()
    };
    let row = find(&listed_on_b(&mut on_b)).expect("A's session listed on B");
    assert_eq!(row["title"], "a title from a", "{row}");
    // A is alive: B's load is refused, and leaves nothing that hides the session.
    let (_, refused) = on_b.load(&session, "/tmp");
    assert_eq!(refused["error"]["data"]["reason"], "lease", "{refused}");
    let row = find(&listed_on_b(&mut on_b)).expect("still listed after the refusal");
    assert_eq!(row["title"], "a title from a", "{row}");
    assert!(
        !b.journals()
            .join("sessions")
            .join(acp_journal::journal::dir::session_key(&session))
            .exists(),
        "nothing of the session was copied to B"
    );
    let _ = on_b.finish();
    assert_eq!(on_a.finish().0, 0);
}

#[test]
fn a_refusing_store_is_said_once_however_many_sessions_wait() {
    let store = S3sFs::start();
    let env = s3_env(
        store.port,
        "wrong-key",
        "wrong-secret-0123456789",
        "us-east-1",
    );
    let a = Host::new(&store.url("fleet"), &env);
    let agent = Peers::get().py_echo_agent();
    let mut client = a.proxy(&agent, &[]);
    client.initialize();
    let sessions: Vec<String> = (0..3).map(|_| client.new_session("/tmp")).collect();
    let until = Instant::now() + Duration::from_secs(8);
    while Instant::now() < until {
        for s in &sessions {
            client.prompt(s, "journaled here, refused there");
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let stderr = client.stderr.clone();
    let _ = client.finish();
    let err = String::from_utf8_lossy(&stderr.lock().unwrap()).into_owned();
    let about_the_store = err
        .lines()
        .filter(|l| l.contains("WARN") || l.contains("ERROR"))
        .filter(|l| l.contains(&a.url) || l.contains("store"))
        .count();
    assert!(
        (1..=3).contains(&about_the_store),
        "{about_the_store} lines about the store:\n{err}"
    );
    // Everything was journaled here meanwhile.
    let (_, out, _) = crate::util::run_cli_store(&a.journals(), &["list", "--json"]);
    let rows: Vec<Value> = serde_json::from_str(&out).unwrap();
    assert_eq!(rows.len(), 3, "{out}");
}

#[test]
fn a_fresh_reader_counts_a_killed_host_s_turns() {
    let store = S3sFs::start();
    let url = store.url("fleet");
    let a = Host::new(&url, &store.env());
    let mut client = a.proxy(&Peers::get().py_echo_agent(), &[]);
    client.initialize();
    let session = client.new_session("/tmp");
    for n in 1..=5 {
        client.prompt(&session, &format!("turn {n} before the kill"));
    }
    let reader = Host::new(&url, &store.env());
    shipped(&reader, &session, "turn 5 before the kill");
    unsafe { libc::kill(client.child.id() as i32, libc::SIGKILL) };
    let _ = client.finish();
    let fresh = Host::new(&url, &store.env());
    let rows = listed(&fresh);
    let row = rows
        .iter()
        .find(|r| r["session"] == session.as_str())
        .expect("listed");
    assert_eq!(row["turns"], 5, "{row}");
}
