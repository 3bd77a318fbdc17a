//! Journals in a shared object store (`--store`), through the built binary against real
//! stores on loopback (s3s-fs, Garage; `file://`): shipping, reading from a machine with no
//! journals, continuing a session on another host, outages, bad credentials, secrets.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::serve::{Served, TOKEN};
use crate::stores::{S3sFs, run_with, s3_env};
use crate::util::{Peers, TestClient, bin, texts};

/// A host: its own journal directory, the store's URL and environment.
pub struct Host {
    pub dir: tempfile::TempDir,
    pub url: String,
    pub env: Vec<(String, String)>,
}

impl Host {
    pub fn new(url: &str, env: &[(String, String)]) -> Host {
        let dir = tempfile::tempdir().unwrap();
        let mut env = env.to_vec();
        // Readers' local copies go under the host's directory, never the user's cache.
        env.push((
            "XDG_CACHE_HOME".into(),
            dir.path().join("cache").display().to_string(),
        ));
        Host {
            dir,
            url: url.to_string(),
            env,
        }
    }

    pub fn journals(&self) -> std::path::PathBuf {
        self.dir.path().join("journals")
    }

    /// The stdio proxy in front of `agent`, shipping every 0.2 s.
    pub fn proxy(&self, agent: &[String], extra: &[&str]) -> TestClient {
        self.proxy_under(&[], agent, extra)
    }

    /// The same, started by `wrapper` (`faketime -f +60s`: a machine whose clock is off).
    pub fn proxy_under(&self, wrapper: &[&str], agent: &[String], extra: &[&str]) -> TestClient {
        self.proxy_shipping(wrapper, "0.2", agent, extra)
    }

    /// The same, shipping every `every` seconds (`--ship-interval`).
    pub fn proxy_shipping(
        &self,
        wrapper: &[&str],
        every: &str,
        agent: &[String],
        extra: &[&str],
    ) -> TestClient {
        let mut argv: Vec<String> = wrapper.iter().map(|s| s.to_string()).collect();
        argv.extend([
            bin().display().to_string(),
            "--journal-dir".into(),
            self.journals().display().to_string(),
            "--store".into(),
            self.url.clone(),
            "--ship-interval".into(),
            every.into(),
            // Ample for an agent to exit once its stdin closes, on a loaded machine too (with 2 s,
            // a Python agent under a full parallel test run was once sent SIGTERM: exit 143).
            "--grace".into(),
            "10".into(),
        ]);
        argv.extend(extra.iter().map(|s| s.to_string()));
        argv.push("--".into());
        argv.extend(agent.iter().cloned());
        let env: Vec<(&str, &Path)> = self
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), Path::new(v.as_str())))
            .collect();
        TestClient::spawn_env(&argv, &env)
    }

    /// `serve --store` on this host (which records nothing of its own: a reader of the store),
    /// with the test's token and `extra` options, in front of the Python echo agent.
    pub fn serve(&self, extra: &[&str]) -> Served {
        let mut env: Vec<(&str, &str)> = self
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        env.push(("ACP_JOURNAL_TOKEN", TOKEN));
        let mut options = vec!["--store", self.url.as_str()];
        options.extend_from_slice(extra);
        Served::start_env(
            &self.journals(),
            &options,
            &Peers::get().py_echo_agent(),
            &env,
        )
    }

    /// A command of this host, reading the store.
    pub fn cli(&self, args: &[&str]) -> (i32, String, String) {
        let journals = self.journals().display().to_string();
        let mut all = vec!["--journal-dir", journals.as_str(), "--store", &self.url];
        all.extend_from_slice(args);
        run_with(&self.env, &all)
    }
}

/// Run `check` until it holds (the shipper works every 0.2 s), at most 30 s.
pub fn eventually(what: &str, mut check: impl FnMut() -> Option<String>) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let Some(why) = check() else { return };
        assert!(Instant::now() < deadline, "{what}: {why}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A conversation of two turns on `host`; returns the session ID.
pub fn converse(host: &Host, prompts: &[&str]) -> String {
    let mut client = host.proxy(&Peers::get().py_echo_agent(), &[]);
    client.initialize();
    let session = client.new_session("/tmp");
    for prompt in prompts {
        let answer = client.prompt(&session, prompt);
        assert!(answer.get("result").is_some(), "{answer}");
    }
    let (code, _) = client.finish();
    assert_eq!(code, 0);
    session
}

pub fn listed(host: &Host) -> Vec<Value> {
    let (code, out, err) = host.cli(&["list", "--json"]);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str::<Vec<Value>>(&out).unwrap()
}

/// A teammate with no journals of their own lists and reads a session another host recorded.
fn read_from_the_store_alone(url: &str, env: &[(String, String)]) {
    let a = Host::new(url, env);
    let session = converse(&a, &["hello fleet", "second turn"]);
    let c = Host::new(url, env);
    let rows = listed(&c);
    let row = rows
        .iter()
        .find(|r| r["session"] == session)
        .unwrap_or_else(|| panic!("{session} not listed: {rows:?}"));
    assert_eq!(row["turns"], 2, "{row}");
    let (code, out, err) = c.cli(&["show", &session]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("hello fleet") && out.contains("second turn"),
        "{out}"
    );
    let (code, out, err) = c.cli(&["verify", &session]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        !c.journals().join("sessions").exists(),
        "the reader's own journal directory stays untouched"
    );
    // The local copy is as private as a journal directory.
    let copy = c.dir.path().join("cache/acp-journal/stores");
    let mut dirs = vec![copy];
    while let Some(dir) = dirs.pop() {
        use std::os::unix::fs::PermissionsExt;
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let mode = entry.metadata().unwrap().permissions().mode() & 0o777;
            if entry.path().is_dir() {
                assert_eq!(mode, 0o700, "{}", entry.path().display());
                dirs.push(entry.path());
            } else {
                assert_eq!(mode, 0o600, "{}", entry.path().display());
            }
        }
    }
    // A fork made from the store goes to the store: a third machine reads it.
    let (code, out, err) = c.cli(&["fork", &session[..8]]);
    assert_eq!(code, 0, "{err}");
    let fork = out.trim().to_string();
    let d = Host::new(url, env);
    let (code, out, err) = d.cli(&["show", &fork]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("hello fleet") && out.contains("second turn"),
        "{out}"
    );
}

#[test]
fn a_teammate_reads_a_session_from_an_s3_store_alone() {
    let store = S3sFs::start();
    read_from_the_store_alone(&store.url("fleet"), &store.env());
}

#[test]
fn a_teammate_reads_a_session_from_a_shared_directory_alone() {
    let shared = tempfile::tempdir().unwrap();
    let url = format!("file://{}", shared.path().join("store").display());
    read_from_the_store_alone(&url, &[]);
}

#[test]
fn a_session_killed_on_one_host_continues_on_another() {
    let store = S3sFs::start();
    let (a, b) = (
        Host::new(&store.url("fleet"), &store.env()),
        Host::new(&store.url("fleet"), &store.env()),
    );
    let mut client = a.proxy(&Peers::get().py_echo_agent(), &["--lease-ttl", "8"]);
    client.initialize();
    let session = client.new_session("/tmp");
    for prompt in ["one on a", "two on a"] {
        client.prompt(&session, prompt);
    }
    // Everything A forwarded reaches the store within a ship interval or two…
    eventually("A's turns in the store", || {
        let (_, out, _) = b.cli(&["show", &session]);
        (!out.contains("two on a")).then_some(out)
    });
    // …and A dies without a chance to ship anything more.
    let pid = client.child.id() as i32;
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let _ = client.finish();
    let mut client = b.proxy(&Peers::get().py_echo_agent(), &[]);
    client.initialize();
    // A dead host's hold lasts until its lease runs out: the load waits for that (timed on
    // B's own clock from its first look), then the session is B's — the same session, fenced
    // off from anything A might still ship.
    let (updates, answer) = client.load(&session, "/tmp");
    assert!(answer.get("result").is_some(), "{answer}");
    let said = texts(&updates);
    assert!(
        said.iter().any(|t| t.contains("one on a")) && said.iter().any(|t| t.contains("two on a")),
        "{said:?}"
    );
    let answer = client.prompt(&session, "three on b");
    assert!(answer.get("result").is_some(), "{answer}");
    let (code, _) = client.finish();
    assert_eq!(code, 0);
    // The session reads as one, from anywhere: A's turns, then B's.
    let c = Host::new(&store.url("fleet"), &store.env());
    let (code, out, err) = c.cli(&["show", &session]);
    assert_eq!(code, 0, "{err}");
    let (one, three) = (out.find("one on a"), out.find("three on b"));
    assert!(one.is_some() && three.is_some() && one < three, "{out}");
}

#[test]
fn the_relay_goes_on_while_the_store_is_down_and_ships_after() {
    let mut store = S3sFs::start();
    let a = Host::new(&store.url("fleet"), &store.env());
    let mut client = a.proxy(&Peers::get().py_echo_agent(), &[]);
    client.initialize();
    let session = client.new_session("/tmp");
    client.prompt(&session, "before the outage");
    store.stop();
    for n in 0..5 {
        let answer = client.prompt(&session, &format!("during the outage {n}"));
        assert!(answer.get("result").is_some(), "{answer}");
    }
    // Long enough for the shipper to find the store gone; `stats` shows what waits.
    std::thread::sleep(Duration::from_secs(2));
    let (_, stats, _) = crate::util::run_cli_store(&a.journals(), &["stats"]);
    let line = stats
        .lines()
        .find(|l| l.starts_with("shipping to s3://team/fleet"))
        .unwrap_or_else(|| panic!("{stats}"));
    assert!(
        line.contains("the store fails") && !line.contains(": 0 bytes"),
        "{line}"
    );
    store.resume();
    client.prompt(&session, "after the outage");
    let reader = Host::new(&store.url("fleet"), &store.env());
    eventually("every turn in the store", || {
        let (_, out, _) = reader.cli(&["show", &session]);
        let all = [
            "before the outage",
            "during the outage 4",
            "after the outage",
        ]
        .iter()
        .all(|t| out.contains(t));
        (!all).then_some(out)
    });
    let stderr = client.stderr.clone();
    let (code, _) = client.finish();
    assert_eq!(code, 0);
    // Said once when it failed, once when it was back.
    let err = String::from_utf8_lossy(&stderr.lock().unwrap()).to_string();
    assert_eq!(err.matches(" fails (").count(), 1, "{err}");
    assert_eq!(err.matches("answers again:").count(), 1, "{err}");
    assert_eq!(
        err.matches("has every journal byte again").count(),
        1,
        "{err}"
    );
}

/// A store that refuses (wrong credentials, no such bucket) is named at start with why, and
/// the session is journaled locally all the same.
pub(crate) fn refused_at_start_and_kept_locally(url: &str, env: &[(String, String)]) {
    let a = Host::new(url, env);
    let mut client = a.proxy(&Peers::get().py_echo_agent(), &[]);
    client.initialize();
    let session = client.new_session("/tmp");
    let answer = client.prompt(&session, "kept locally");
    assert!(answer.get("result").is_some(), "{answer}");
    let stderr = client.stderr.clone();
    let (code, _) = client.finish();
    assert_eq!(code, 0);
    let err = String::from_utf8_lossy(&stderr.lock().unwrap()).to_string();
    assert!(
        err.contains(&format!("object store {url} refused acp-journal at start")),
        "{err}"
    );
    // No credential reaches the log.
    for (name, value) in env {
        if name.ends_with("SECRET_ACCESS_KEY") {
            assert!(!err.contains(value.as_str()), "{err}");
        }
    }
    let (code, out, e) = crate::util::run_cli_store(&a.journals(), &["show", &session]);
    assert_eq!(code, 0, "{e}");
    assert!(out.contains("kept locally"), "{out}");
}

#[test]
fn wrong_credentials_are_said_at_start_and_journaling_goes_on() {
    // (s3s-fs makes a missing bucket on the first write: a missing bucket is Garage's test.)
    let store = S3sFs::start();
    let env = s3_env(
        store.port,
        crate::stores::ACCESS_KEY,
        "not-the-secret",
        "us-east-1",
    );
    refused_at_start_and_kept_locally(&store.url("fleet"), &env);
}

#[test]
fn seeded_secrets_never_reach_the_store() {
    let store = S3sFs::start();
    let a = Host::new(&store.url("fleet"), &store.env());
    let secret = "sk-ant-api03-SEEDEDSECRETfleet0123456789abcdefghijklmnop";
    converse(&a, &[&format!("my key is {secret}")]);
    let mut seen = 0;
    for file in store.object_files() {
        let raw = std::fs::read(&file).unwrap();
        let plain = zstd_salvage(&raw);
        seen += 1;
        for bytes in [&raw, &plain] {
            assert!(
                !String::from_utf8_lossy(bytes).contains("SEEDEDSECRET"),
                "{} holds the secret",
                file.display()
            );
        }
    }
    assert!(seen >= 3, "{seen} objects");
}

/// What a zstd stream holds up to where it ends or breaks.
fn zstd_salvage(bytes: &[u8]) -> Vec<u8> {
    use std::io::Read;
    let mut out = Vec::new();
    if let Ok(mut decoder) = zstd::stream::read::Decoder::new(bytes) {
        let _ = decoder.read_to_end(&mut out);
    }
    out
}

#[test]
fn two_hosts_racing_to_load_one_session_one_continues() {
    let store = S3sFs::start();
    let url = store.url("fleet");
    let a = Host::new(&url, &store.env());
    let session = converse(&a, &["recorded on a"]);
    let (b, c) = (Host::new(&url, &store.env()), Host::new(&url, &store.env()));
    let mut clients: Vec<TestClient> = [&b, &c]
        .iter()
        .map(|h| {
            let mut client = h.proxy(&Peers::get().py_echo_agent(), &[]);
            client.initialize();
            client
        })
        .collect();
    // Both ask at once.
    for client in &mut clients {
        client.send(
            &serde_json::json!({"jsonrpc": "2.0", "id": 77, "method": "session/load",
            "params": {"sessionId": session, "cwd": "/tmp", "mcpServers": []}}),
        );
    }
    let answers: Vec<Value> = clients
        .iter_mut()
        .map(|client| {
            loop {
                let msg = client.recv().expect("an answer").json.clone();
                if let Some(msg) = msg
                    && msg["id"] == 77
                {
                    break msg;
                }
            }
        })
        .collect();
    let won: Vec<&Value> = answers
        .iter()
        .filter(|a| a.get("result").is_some())
        .collect();
    let lost: Vec<&Value> = answers
        .iter()
        .filter(|a| a.get("error").is_some())
        .collect();
    assert_eq!((won.len(), lost.len()), (1, 1), "{answers:?}");
    let message = lost[0]["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("is being continued on host") && message.contains("lease runs out"),
        "{message}"
    );
    for client in clients {
        let (code, _) = client.finish();
        assert_eq!(code, 0);
    }
}

#[test]
fn a_host_cut_off_while_another_takes_over_stops_writing_the_session() {
    let store = S3sFs::start();
    let url = store.url("fleet");
    // A reaches the store through a relay the test cuts.
    let relay = crate::stores::Cuttable::to(store.port);
    let a = Host::new(
        &url,
        &s3_env(
            relay.port,
            crate::stores::ACCESS_KEY,
            crate::stores::SECRET_KEY,
            "us-east-1",
        ),
    );
    let b = Host::new(&url, &store.env());
    let mut on_a = a.proxy(&Peers::get().py_echo_agent(), &["--lease-ttl", "2"]);
    on_a.initialize();
    let session = on_a.new_session("/tmp");
    on_a.prompt(&session, "a before the cut");
    eventually("A's turn in the store", || {
        let (_, out, _) = b.cli(&["show", &session]);
        (!out.contains("a before the cut")).then_some(out)
    });
    relay.cut();
    // A's lease runs out; B takes the session over and continues it.
    std::thread::sleep(Duration::from_secs(3));
    let mut on_b = b.proxy(&Peers::get().py_echo_agent(), &["--lease-ttl", "2"]);
    on_b.initialize();
    let (_, answer) = on_b.load(&session, "/tmp");
    assert!(answer.get("result").is_some(), "{answer}");
    on_b.prompt(&session, "b after the takeover");
    // A, still cut off, goes on locally; when it reaches the store again it finds the session
    // taken and writes it no more.
    on_a.prompt(&session, "a while cut off");
    relay.restore();
    let stderr = on_a.stderr.clone();
    eventually("A says it lost the session", || {
        let err = String::from_utf8_lossy(&stderr.lock().unwrap()).to_string();
        (!err.contains("was taken over by another host")).then_some(err)
    });
    on_a.prompt(&session, "a after it knows");
    let (code, _) = on_b.finish();
    assert_eq!(code, 0);
    let (code, _) = on_a.finish();
    assert_eq!(code, 0);
    // Readers see A up to the takeover, then B; never A's later turns.
    let reader = Host::new(&url, &store.env());
    let (code, out, err) = reader.cli(&["show", &session]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("a before the cut") && out.contains("b after the takeover"),
        "{out}"
    );
    assert!(
        !out.contains("a while cut off") && !out.contains("a after it knows"),
        "{out}"
    );
    // A's own disk still has everything it relayed.
    let (_, local, _) = crate::util::run_cli_store(&a.journals(), &["show", &session]);
    assert!(local.contains("a after it knows"), "{local}");
}

#[test]
fn a_replicated_garage_loses_a_node_mid_run_and_nothing_is_lost() {
    let mut garage = crate::stores::Garage::start(3);
    let url = "s3://team/fleet";
    let a = Host::new(url, &garage.env(0));
    let mut client = a.proxy(&Peers::get().py_echo_agent(), &[]);
    client.initialize();
    let session = client.new_session("/tmp");
    client.prompt(&session, "before the node died");
    std::thread::sleep(Duration::from_millis(600));
    garage.kill(2);
    for n in 0..3 {
        let answer = client.prompt(&session, &format!("after the node died {n}"));
        assert!(answer.get("result").is_some(), "{answer}");
    }
    let stderr = client.stderr.clone();
    let (code, _) = client.finish();
    assert_eq!(code, 0);
    let err = String::from_utf8_lossy(&stderr.lock().unwrap()).to_string();
    // Garage ignores conditional writes: found out at start and named.
    assert!(err.contains("ignores conditional writes"), "{err}");
    // A teammate reading through another node sees every turn.
    let c = Host::new(url, &garage.env(1));
    let rows = listed(&c);
    assert!(rows.iter().any(|r| r["session"] == session), "{rows:?}");
    let (code, out, err) = c.cli(&["show", &session]);
    assert_eq!(code, 0, "{err}");
    for text in ["before the node died", "after the node died 2"] {
        assert!(out.contains(text), "{text}: {out}");
    }
}

#[test]
fn on_a_store_that_ignores_conditional_writes_a_session_moves_only_with_takeover() {
    let garage = crate::stores::Garage::start(1);
    let url = "s3://team/fleet";
    let a = Host::new(url, &garage.env(0));
    let session = converse(&a, &["recorded on a"]);
    let b = Host::new(url, &garage.env(0));
    let mut client = b.proxy(&Peers::get().py_echo_agent(), &[]);
    client.initialize();
    let (_, refused) = client.load(&session, "/tmp");
    assert!(refused.get("error").is_some(), "{refused}");
    let _ = client.finish();
    let mut client = b.proxy(&Peers::get().py_echo_agent(), &["--takeover"]);
    client.initialize();
    let (updates, answer) = client.load(&session, "/tmp");
    assert!(answer.get("result").is_some(), "{answer}");
    assert!(
        texts(&updates).iter().any(|t| t.contains("recorded on a")),
        "{updates:?}"
    );
    let (code, _) = client.finish();
    assert_eq!(code, 0);
}

#[test]
fn a_missing_bucket_is_said_at_start_and_journaling_goes_on() {
    let garage = crate::stores::Garage::start(1);
    refused_at_start_and_kept_locally("s3://no-such-bucket/fleet", &garage.env(0));
}

#[test]
fn hostile_objects_in_the_store_cannot_crash_or_hang_a_reader() {
    let shared = tempfile::tempdir().unwrap();
    let root = shared.path().join("store");
    let url = format!("file://{}", root.display());
    let a = Host::new(&url, &[]);
    let session = converse(&a, &["a real turn"]);
    let key = std::fs::read_dir(root.join("sessions"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let segment = std::fs::read_dir(&key)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let put = |rel: std::path::PathBuf, bytes: &[u8]| {
        std::fs::create_dir_all(rel.parent().unwrap()).unwrap();
        std::fs::write(rel, bytes).unwrap();
    };
    // Garbage past the real parts, a part claiming a terabyte, a truncated part, a session of
    // nothing but garbage, a catalog part that is no zstd, a host name that climbs out.
    let end = std::fs::read_dir(&segment)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|n| u64::from_str_radix(n.split_once('-')?.1, 16).ok())
        .max()
        .unwrap();
    put(
        segment.join(format!("{end:016x}-{:016x}", end + 64)),
        &[0xff; 64],
    );
    put(
        segment.join(format!("{:016x}-{:016x}", end + 64, 1u64 << 40)),
        b"short",
    );
    let junk = root.join("sessions/sjunk/20261126T000000.000000Z-1.acpj.zst");
    put(junk.join(format!("{:016x}-{:016x}", 0, 100)), b"truncated");
    put(junk.join(format!("{:016x}-{:016x}", 0, 50)), &[7u8; 50]);
    let host = root.join("hosts/evil/catalog.ndjson");
    put(host.join(format!("{:016x}-{:016x}", 0, 10)), b"not zstd!!");
    put(
        root.join("hosts/..%2F..%2Fx/catalog.ndjson/0000000000000000-0000000000000001"),
        b"x",
    );
    let c = Host::new(&url, &[]);
    for args in [
        vec!["list", "--json"],
        vec!["show", session.as_str()],
        vec!["verify", session.as_str()],
        vec!["stats"],
        vec!["search", "real"],
    ] {
        let started = Instant::now();
        let (code, out, err) = c.cli(&args);
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{args:?} took {:?}",
            started.elapsed()
        );
        assert!(
            !err.contains("panicked") && (0..=2).contains(&code),
            "{args:?}: {code} {out}{err}"
        );
    }
    // The real session still reads whole where its parts are whole.
    let (code, out, err) = c.cli(&["show", &session]);
    assert!(out.contains("a real turn"), "{code} {out}{err}");
}

#[test]
fn session_list_with_scope_all_lists_every_host_s_sessions() {
    let store = S3sFs::start();
    let url = store.url("fleet");
    let a = Host::new(&url, &store.env());
    let theirs = converse(&a, &["on host a"]);
    let b = Host::new(&url, &store.env());
    let mut client = b.proxy(&Peers::get().py_echo_agent(), &["--list-scope", "all"]);
    client.initialize();
    let mine = client.new_session("/tmp");
    client.prompt(&mine, "on host b");
    let listed = client.request("session/list", serde_json::json!({}));
    let ids: Vec<&str> = listed["result"]["sessions"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .filter_map(|s| s["sessionId"].as_str())
        .collect();
    assert!(
        ids.contains(&theirs.as_str()) && ids.contains(&mine.as_str()),
        "{listed}"
    );
    let (code, _) = client.finish();
    assert_eq!(code, 0);
}

#[test]
fn no_redact_is_refused_with_a_store() {
    let shared = tempfile::tempdir().unwrap();
    let url = format!("file://{}", shared.path().display());
    let a = Host::new(&url, &[]);
    let journals = a.journals().display().to_string();
    let (code, _, err) = run_with(
        &a.env,
        &[
            "--journal-dir",
            &journals,
            "--store",
            &url,
            "--no-redact",
            "--",
            "true",
        ],
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("--no-redact cannot be used with --store"),
        "{err}"
    );
    assert!(
        std::fs::read_dir(shared.path()).unwrap().next().is_none(),
        "nothing reached the store"
    );
}

#[test]
fn watch_follows_a_live_session_of_another_host_through_the_store() {
    let store = S3sFs::start();
    let url = store.url("fleet");
    let a = Host::new(&url, &store.env());
    let mut client = a.proxy(&Peers::get().py_echo_agent(), &[]);
    client.initialize();
    let session = client.new_session("/tmp");
    client.prompt(&session, "said before watching");
    let c = Host::new(&url, &store.env());
    eventually("the first turn in the store", || {
        let (_, out, _) = c.cli(&["show", &session]);
        (!out.contains("said before watching")).then_some(out)
    });
    let journals = c.journals().display().to_string();
    let mut watch = std::process::Command::new(bin())
        .args([
            "--journal-dir",
            &journals,
            "--store",
            &url,
            "watch",
            &session,
        ])
        .envs(c.env.iter().map(|(k, v)| (k, v)))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = watch.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        let _ = std::io::Read::read_to_string(&mut stdout, &mut out);
        out
    });
    client.prompt(&session, "said while watching");
    // The session ends on A: watch sees its end in the store and ends too.
    let (code, _) = client.finish();
    assert_eq!(code, 0);
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = watch.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = watch.kill();
            panic!("watch did not end after the session did");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let out = reader.join().unwrap();
    assert!(status.success(), "{status}: {out}");
    assert!(
        out.contains("said before watching") && out.contains("said while watching"),
        "{out}"
    );
}
