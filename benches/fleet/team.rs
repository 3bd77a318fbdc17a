//! 6: the team index. `hosts` stdio proxies (several at a time), `per_host` sessions of three
//! turns each, recorded through the real binary into one store behind a counting relay; then a
//! teammate with an empty cache lists and searches the store, cold and warm, from the index and
//! the way readers did before it (every host's catalog for `list`, every session's journal for
//! a search: `--scan`, and `list` with the manifest moved away): requests, bytes read, time.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::{Proxy, S3};

/// A TCP relay to the store that counts the HTTP requests sent and the bytes answered.
pub(super) struct Counter {
    port: u16,
    requests: Arc<AtomicU64>,
    bytes: Arc<AtomicU64>,
}

impl Counter {
    pub(super) fn to(target: u16) -> Counter {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (requests, bytes) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let (r, b) = (requests.clone(), bytes.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(client) = conn else { continue };
                let Ok(server) = TcpStream::connect(("127.0.0.1", target)) else {
                    continue;
                };
                let (mut c_in, mut s_out) =
                    (client.try_clone().unwrap(), server.try_clone().unwrap());
                let r = r.clone();
                std::thread::spawn(move || {
                    let mut buf = vec![0u8; 64 * 1024];
                    let finder = memchr::memmem::Finder::new(b" HTTP/1.1\r\n");
                    while let Ok(n) = c_in.read(&mut buf) {
                        if n == 0 || s_out.write_all(&buf[..n]).is_err() {
                            break;
                        }
                        r.fetch_add(
                            finder.find_iter(&buf[..n]).count() as u64,
                            Ordering::Relaxed,
                        );
                    }
                    let _ = s_out.shutdown(std::net::Shutdown::Write);
                });
                let (mut s_in, mut c_out) = (server, client);
                let b = b.clone();
                std::thread::spawn(move || {
                    let mut buf = vec![0u8; 64 * 1024];
                    while let Ok(n) = s_in.read(&mut buf) {
                        if n == 0 || c_out.write_all(&buf[..n]).is_err() {
                            break;
                        }
                        b.fetch_add(n as u64, Ordering::Relaxed);
                    }
                    let _ = c_out.shutdown(std::net::Shutdown::Write);
                });
            }
        });
        Counter {
            port,
            requests,
            bytes,
        }
    }

    /// `env` (a store's `AWS_*` variables) with its endpoint through the counter.
    pub(super) fn relay(&self, env: &[(String, String)]) -> Vec<(String, String)> {
        let mut env = env.to_vec();
        for (k, v) in &mut env {
            if k == "AWS_ENDPOINT_URL" {
                *v = format!("http://127.0.0.1:{}", self.port);
            }
        }
        env
    }

    /// The requests and bytes since the last take.
    pub(super) fn take(&self) -> (u64, u64) {
        (
            self.requests.swap(0, Ordering::Relaxed),
            self.bytes.swap(0, Ordering::Relaxed),
        )
    }
}

/// The store's environment through the counter.
pub(super) fn env(s3: &S3, counter: &Counter) -> Vec<(String, String)> {
    counter.relay(&s3.env())
}

/// One reader command by `bin` on the store at `url`, with `cache` as its cache home: (time,
/// requests, bytes, stdout).
pub(super) fn read(
    bin: &Path,
    url: &str,
    env: &[(String, String)],
    cache: &std::path::Path,
    counter: &Counter,
    args: &[&str],
) -> (Duration, u64, u64, String) {
    counter.take();
    let started = Instant::now();
    let out = Command::new(bin)
        .args(["--store", url])
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env("XDG_CACHE_HOME", cache)
        .env("ACP_JOURNAL_DIR", cache.join("reader"))
        // What the reader says (the index unreadable…) goes with the bench's progress.
        .stderr(std::process::Stdio::inherit())
        .output()
        .unwrap();
    let elapsed = started.elapsed();
    let (requests, bytes) = counter.take();
    (
        elapsed,
        requests,
        bytes,
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

pub(super) const URL: &str = "s3://bench/team";
/// The binary under bench.
const BIN: &str = env!("CARGO_BIN_EXE_acp-journal");

pub fn bench(s3: &S3, hosts: usize, per_host: usize, report: &mut String) {
    eprintln!("bench: the team index, {hosts} hosts × {per_host} sessions");
    let counter = Counter::to(s3.port);
    let env = env(s3, &counter);
    let dirs: Vec<tempfile::TempDir> = (0..hosts).map(|_| tempfile::tempdir().unwrap()).collect();
    let recorded = Instant::now();
    let mut turns = 0usize;
    for chunk in dirs.chunks(4) {
        let workers: Vec<_> = chunk
            .iter()
            .map(|dir| {
                let (dir, env) = (dir.path().to_path_buf(), env.clone());
                std::thread::spawn(move || {
                    let host = dir.file_name().unwrap().to_string_lossy().to_lowercase();
                    let mut proxy =
                        Proxy::start(&dir, Some((&env, URL)), &["--ship-interval", "1"], 0);
                    for s in 0..per_host {
                        let session = proxy.new_session();
                        for t in 0..3 {
                            proxy.prompt_text(
                                &session,
                                &format!(
                                    "Fix issue {host}x{s} in module{t} of the payments service"
                                ),
                            );
                        }
                    }
                    // A host goes on running while it ships (a proxy's end waits at most 5 s
                    // for the store, then leaves the rest to its next start).
                    proxy.wait_shipped(&dir, Duration::from_secs(600));
                    proxy.finish();
                    per_host * 3
                })
            })
            .collect();
        turns += workers
            .into_iter()
            .map(|w| w.join().unwrap())
            .sum::<usize>();
    }
    let recording = recorded.elapsed();
    let (recording_requests, _) = counter.take();
    let root = s3.bytes("team");
    let index = s3.bytes("team/index");
    let sessions = hosts * per_host;
    // A session of one host, by its unique words.
    let some = dirs[hosts / 2]
        .path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .to_lowercase();
    let word = format!("{some}x{}", per_host / 2);
    let cache = tempfile::tempdir().unwrap();
    let mut rows = Vec::new();
    let mut measure =
        |name: &str, args: &[&str], cold_dir: &std::path::Path, check: &dyn Fn(&str)| {
            let cold = read(Path::new(BIN), URL, &env, cold_dir, &counter, args);
            check(&cold.3);
            let warm = read(Path::new(BIN), URL, &env, cold_dir, &counter, args);
            check(&warm.3);
            rows.push(format!(
                "| {name} | {:.0} ms, {} requests, {} KiB | {:.0} ms, {} requests, {} KiB |",
                cold.0.as_secs_f64() * 1e3,
                cold.1,
                cold.2 / 1024,
                warm.0.as_secs_f64() * 1e3,
                warm.1,
                warm.2 / 1024
            ));
        };
    let listed = |out: &str| {
        let rows: Vec<serde_json::Value> = serde_json::from_str(out).unwrap_or_default();
        assert_eq!(rows.len(), sessions, "{out}");
    };
    let found = |out: &str| assert!(out.contains(&word), "{out}");
    measure(
        "`list --json`, the index",
        &["list", "--json"],
        &cache.path().join("a"),
        &listed,
    );
    measure(
        &format!("`search {word}`, the index"),
        &["search", &word],
        &cache.path().join("b"),
        &found,
    );
    measure(
        &format!("`search --scan {word}`, every journal"),
        &["search", "--scan", &word],
        &cache.path().join("c"),
        &found,
    );
    // `list` as before the index: every host's catalog (the manifest moved away meanwhile).
    let manifest = s3.root.path().join("bench/team/index/snapshot.json");
    let aside = s3.root.path().join("snapshot.json.aside");
    std::fs::rename(&manifest, &aside).unwrap();
    measure(
        "`list --json`, every host's catalog",
        &["list", "--json"],
        &cache.path().join("d"),
        &listed,
    );
    std::fs::rename(&aside, &manifest).unwrap();
    writeln!(
        report,
        "## The team index: {sessions} sessions from {hosts} hosts\n\n\
         Recorded through the stdio proxy, 4 hosts at a time on 2 cores: {turns} turns in {:.0} s, \
         {recording_requests} store requests in all ({:.1} per turn, shipping and index together). \
         The store holds {} KiB, the index {} KiB of it ({:.1} %).\n",
        recording.as_secs_f64(),
        recording_requests as f64 / turns as f64,
        root / 1024,
        index / 1024,
        index as f64 * 100.0 / root as f64
    )
    .unwrap();
    writeln!(
        report,
        "| a teammate's command | cold (empty cache) | warm |\n|---|---|---|"
    )
    .unwrap();
    for row in rows {
        writeln!(report, "{row}").unwrap();
    }
    writeln!(report).unwrap();
}
