//! Eight proxies write one store at once, several sessions each, while `list`, `show` and
//! `verify` run over and over and a ninth proxy loads a session the first one is still
//! writing. Nothing may be lost (every line journaled by its run, in order), nothing
//! interleaved (each segment is one writer's, every catalog line whole), and everything ends:
//! a watchdog kills every process and fails the test rather than let it hang.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use acp_journal::catalog::CatalogEntry;
use acp_journal::journal::{SegmentReader, Tail};
use acp_journal::wire::Side;

use crate::util::{TestClient, bin, journaled_in, proxied, scripted, segment_paths};

const WRITERS: usize = 8;
const SESSIONS: usize = 3;
const TURNS: usize = 3;
/// Each prompt: this many updates and a permission request.
const PROMPT: &str = "updates=120 perm=1";
/// Longer than this and the watchdog kills everything.
const DEADLINE: Duration = Duration::from_secs(240);

/// Kills every registered process once the deadline passes.
#[derive(Clone)]
struct Watchdog {
    pids: Arc<Mutex<Vec<u32>>>,
    fired: Arc<AtomicBool>,
    done: Arc<AtomicBool>,
}

impl Watchdog {
    fn start(deadline: Duration) -> Watchdog {
        let dog = Watchdog {
            pids: Arc::default(),
            fired: Arc::default(),
            done: Arc::default(),
        };
        let watching = dog.clone();
        std::thread::spawn(move || {
            let started = Instant::now();
            while !watching.done.load(Ordering::SeqCst) {
                if started.elapsed() > deadline {
                    watching.fired.store(true, Ordering::SeqCst);
                    for pid in watching.pids.lock().unwrap().iter() {
                        // SAFETY: kill(2) on processes this test started.
                        unsafe { libc::kill(*pid as i32, libc::SIGKILL) };
                    }
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        dog
    }

    fn watch(&self, pid: u32) {
        self.pids.lock().unwrap().push(pid);
    }

    /// Run the CLI with `args` under the watchdog: (exit code, stdout).
    fn cli(&self, args: &[&str]) -> (i32, String) {
        let child = Command::new(bin())
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.watch(child.id());
        let out = child.wait_with_output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    }
}

/// What a writer did: its proxy's pid, the lines it sent and the complete lines it received.
struct Written {
    pid: u32,
    sent: Vec<Vec<u8>>,
    received: Vec<Vec<u8>>,
}

/// A proxy in front of the scripted agent whose sessions are named `w<n>-mix-<k>`.
fn writer(store: &Path, n: usize, dog: &Watchdog) -> TestClient {
    let prefix = PathBuf::from(format!("w{n}-"));
    let client = TestClient::spawn_env(
        &proxied(store, &scripted("mix")),
        &[("AGENT_SESSION_PREFIX", &prefix)],
    );
    dog.watch(client.child.id());
    client
}

/// Drive writer `n`: sessions, then prompt turns until `TURNS` are done and `keep_going` is
/// false. After its first turn it sets `started`.
fn write(
    store: &Path,
    n: usize,
    dog: &Watchdog,
    started: &AtomicBool,
    keep_going: &AtomicBool,
) -> Written {
    let mut client = writer(store, n, dog);
    client.initialize();
    let sessions: Vec<String> = (0..SESSIONS).map(|_| client.new_session("/tmp")).collect();
    let mut turn = 0;
    while turn < TURNS || keep_going.load(Ordering::SeqCst) {
        for session in &sessions {
            let answer = client.prompt(session, PROMPT);
            assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
        }
        started.store(true, Ordering::SeqCst);
        turn += 1;
    }
    let pid = client.child.id();
    let sent = client.sent.clone();
    let (code, received) = client.finish();
    assert_eq!(code, 0, "writer {n}");
    Written {
        pid,
        sent,
        received: received
            .into_iter()
            .map(|r| r.raw)
            .filter(|raw| raw.ends_with(b"\n"))
            .collect(),
    }
}

/// The segment files written by the proxy `pid`.
fn segments_of(store: &Path, pid: u32) -> Vec<PathBuf> {
    segment_paths(store)
        .into_iter()
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            let run = name.split('.').take(2).collect::<Vec<_>>().join(".");
            run.ends_with(&format!("-{pid}"))
        })
        .collect()
}

#[test]
fn eight_proxies_one_store_with_readers_and_a_load_of_a_live_session() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let store_arg = store.to_str().unwrap();
    let dog = Watchdog::start(DEADLINE);
    let first_turn_done = AtomicBool::new(false);
    let loading = AtomicBool::new(true);
    let writers_done = AtomicUsize::new(0);
    let never = AtomicBool::new(false);

    let (written, reads, load) = std::thread::scope(|scope| {
        let writers: Vec<_> = (0..WRITERS)
            .map(|n| {
                let (store, dog, started) = (&store, &dog, &first_turn_done);
                let (loading, never, done) = (&loading, &never, &writers_done);
                let never_started = AtomicBool::new(false);
                scope.spawn(move || {
                    // Writer 0 keeps writing until the load of its session is over.
                    let keep_going = if n == 0 { loading } else { never };
                    let started = if n == 0 { started } else { &never_started };
                    let written = write(store, n, dog, started, keep_going);
                    done.fetch_add(1, Ordering::SeqCst);
                    written
                })
            })
            .collect();

        // Readers: list, show and verify over and over while the writers run.
        let readers = scope.spawn(|| {
            let mut rounds = 0;
            while writers_done.load(Ordering::SeqCst) < WRITERS {
                let (code, json) = dog.cli(&["list", "--journal-dir", store_arg, "--json"]);
                assert_eq!(code, 0, "list");
                let listed: Vec<serde_json::Value> =
                    serde_json::from_str(&json).expect("list --json is whole JSON");
                if listed.iter().any(|s| s["session"] == "w0-mix-0") {
                    let (code, shown) = dog.cli(&["show", "w0-mix-0", "--journal-dir", store_arg]);
                    assert_eq!(code, 0, "show of a session being written");
                    assert!(shown.contains("session/new"), "{shown}");
                }
                let (code, out) = dog.cli(&["verify", "--journal-dir", store_arg]);
                assert_eq!(code, 0, "verify while writing:\n{out}");
                rounds += 1;
            }
            rounds
        });

        // A ninth proxy loads writer 0's first session while writer 0 is still writing it.
        let loader = scope.spawn(|| {
            while !first_turn_done.load(Ordering::SeqCst) && !dog.fired.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(10));
            }
            let mut client = writer(&store, WRITERS, &dog);
            client.initialize();
            let (updates, answer) = client.load("w0-mix-0", "/tmp");
            loading.store(false, Ordering::SeqCst);
            let (code, _) = client.finish();
            assert_eq!(code, 0, "the loading proxy");
            (updates.len(), answer)
        });

        let written: Vec<Written> = writers.into_iter().map(|w| w.join().unwrap()).collect();
        (written, readers.join().unwrap(), loader.join().unwrap())
    });
    dog.done.store(true, Ordering::SeqCst);
    assert!(
        !dog.fired.load(Ordering::SeqCst),
        "deadlock: killed after {DEADLINE:?}"
    );
    assert!(reads > 0, "the readers ran while the writers wrote");
    eprintln!(
        "concurrency: {reads} rounds of list/show/verify, load replayed {} updates",
        load.0
    );

    // The load replayed what writer 0 had journaled by then: at least its first turn.
    let (replayed, answer) = load;
    assert!(answer.get("result").is_some(), "{answer}");
    assert!(replayed > 120, "replayed {replayed} updates");

    // Nothing lost: each writer's journal holds every line it sent and received, in order.
    for (n, w) in written.iter().enumerate() {
        let segments = segments_of(&store, w.pid);
        assert_eq!(segments.len(), 1 + SESSIONS, "writer {n}: its segments");
        assert!(
            journaled_in(&segments, Side::Agent) == w.received,
            "writer {n}: the journal differs from what the client received"
        );
        assert!(
            journaled_in(&segments, Side::Client) == w.sent,
            "writer {n}: the journal differs from what the client sent"
        );
    }

    // Nothing interleaved: every segment is one writer's, whole and closed.
    let all = segment_paths(&store);
    for path in &all {
        let mut reader = SegmentReader::open(path).unwrap();
        let header = reader.header().clone();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.starts_with(&header.run) && header.run.ends_with(&format!("-{}", header.pid)),
            "{name} written by run {} (pid {})",
            header.run,
            header.pid
        );
        reader.by_ref().count();
        assert_eq!(reader.tail(), Some(&Tail::Clean), "{name}");
    }
    // Each writer's connection and sessions; the loader's connection and the loaded session.
    assert_eq!(all.len(), WRITERS * (1 + SESSIONS) + 2);
    // Every catalog line is whole: one Open and one Close per session segment.
    let catalog = std::fs::read_to_string(store.join("catalog.ndjson")).unwrap();
    let entries: Vec<CatalogEntry> = catalog
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
        .collect();
    let sessions = all
        .iter()
        .filter(|p| p.starts_with(store.join("sessions")))
        .count();
    let opens = entries
        .iter()
        .filter(|e| matches!(e, CatalogEntry::Open { .. }))
        .count();
    let closes = entries
        .iter()
        .filter(|e| matches!(e, CatalogEntry::Close { .. }))
        .count();
    assert_eq!((opens, closes), (sessions, sessions));
}
