//! The index's parts as hostile input, through the built binary against s3s-fs (issue 50): a
//! host writes a real index, then a bomb part of one table at a time is added to its manifest
//! (written straight into the store's directory, as a bucket writer would): the 512 MiB title
//! of the issue in a sessions part of 20 KB, a `tools` list of a million items in a turns part,
//! a word of 1 MiB every posting refers to. `list` and `stats` each answer with the bomb part
//! left out and said, `search` from the journals, saying the index cannot be read, and the
//! command's own peak RSS (`ru_maxrss` of its pid, from `wait4`) stays under
//! [`CHILD_RSS_BOUND`].

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use bytes::Bytes;
use parquet::file::metadata::ParquetMetaDataReader;
use serde_json::{Value, json};

use crate::fleet::{Host, converse, eventually};
use crate::stores::S3sFs;

// Shared with the unit tests (`fleet::index::bounds`), which use the rest of it.
#[allow(dead_code)]
#[path = "../../src/fleet/index/bombs.rs"]
mod bombs;

/// The most a command reading a bomb part may hold, as the kernel counts it (its peak resident
/// set): 128 MiB. The bounds the code enforces allow more (a part of 32 MiB and 356 MiB to read
/// it, `bounds::MAX_PART_BYTES` and `MAX_READ_BYTES`); these bombs are refused before anything
/// large is allocated but for the list's, whose million levels and values the crate decodes
/// (36 bytes each) before the row is refused. Before the bounds, the title took `list` to
/// 1.6 GB.
const CHILD_RSS_BOUND: u64 = 128 << 20;

/// The store's directory of the fleet's objects, as s3s-fs keeps them (one file each).
fn objects(store: &S3sFs) -> PathBuf {
    store.root.path().join(&store.bucket).join("fleet")
}

/// The variable that makes [`rss_launcher`] launch a command: the directory it reads the
/// command from and writes the command's output and peak resident set to.
const LAUNCH: &str = "ACPJ_TEST_RSS_LAUNCH";

/// Run a command of `host` reading the store: its exit code, stdout, stderr, and its own peak
/// resident set in bytes, from `wait4` on its pid (`RUSAGE_CHILDREN` would count other tests'
/// children too). Launched by a fresh process, this test binary run as [`rss_launcher`]: the
/// kernel starts a child's peak at what the memory it `exec`s from held (`exec_mmap` keeps the
/// old memory's high-water mark; spawned with `CLONE_VM`, that memory is its parent's), so a
/// command spawned by this process, which other tests share, would count this process's peak.
fn measured(host: &Host, args: &[&str]) -> (i32, String, String, u64) {
    let dir = tempfile::tempdir().unwrap();
    let journals = host.journals().display().to_string();
    let mut argv = vec!["--journal-dir", &journals, "--store", &host.url];
    argv.extend_from_slice(args);
    std::fs::write(dir.path().join("args"), serde_json::to_vec(&argv).unwrap()).unwrap();
    let launcher = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "index_bounds::rss_launcher",
            "--exact",
            "--nocapture",
            "--quiet",
        ])
        .env(LAUNCH, dir.path())
        .envs(host.env.iter().map(|(k, v)| (k, v)))
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(launcher.success(), "the launcher: {launcher}");
    let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap();
    let report: Vec<i64> = serde_json::from_str(&read("report")).unwrap();
    (report[0] as i32, read("out"), read("err"), report[1] as u64)
}

/// Not a test of its own: [`measured`]'s launcher, when [`LAUNCH`] is set. Runs the command
/// in `$LAUNCH/args` with its output to `$LAUNCH/out` and `$LAUNCH/err`, and writes its exit
/// code and peak resident set (`wait4` on its pid) to `$LAUNCH/report`.
#[test]
// The child is reaped by `wait4`, which gives its resource usage (`Child::wait` does not).
#[allow(clippy::zombie_processes)]
fn rss_launcher() {
    let Some(dir) = std::env::var_os(LAUNCH).map(PathBuf::from) else {
        return;
    };
    let args: Vec<String> =
        serde_json::from_slice(&std::fs::read(dir.join("args")).unwrap()).unwrap();
    let file = |name: &str| std::fs::File::create(dir.join(name)).unwrap();
    let child = Command::new(crate::util::bin())
        .args(&args)
        .env_remove(LAUNCH)
        .stdin(Stdio::null())
        .stdout(file("out"))
        .stderr(file("err"))
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid value for wait4 to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is this process's child, not yet waited for; both pointers are to live
    // locals.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(waited, pid, "wait4: {}", std::io::Error::last_os_error());
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    // Linux counts ru_maxrss in KiB.
    let report = [i64::from(code), usage.ru_maxrss * 1024];
    std::fs::write(dir.join("report"), serde_json::to_vec(&report).unwrap()).unwrap();
}

/// The part of `table` the manifest lists first, and its bytes.
fn genuine_part(store: &S3sFs, manifest: &Value, table: &str) -> (Value, Vec<u8>) {
    let part = manifest["parts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["table"] == table)
        .unwrap_or_else(|| panic!("no {table} part in {manifest}"))
        .clone();
    let bytes = std::fs::read(objects(store).join(part["path"].as_str().unwrap())).unwrap();
    (part, bytes)
}

/// The rows of each row group of `part`.
fn group_rows(part: &[u8]) -> Vec<u32> {
    let metadata = ParquetMetaDataReader::new()
        .parse_and_finish(&Bytes::copy_from_slice(part))
        .unwrap();
    metadata
        .row_groups()
        .iter()
        .map(|g| g.num_rows() as u32)
        .collect()
}

/// `part` with column `column` of every row group replaced by what `chunk` makes of the group's
/// rows.
fn with_column(part: &[u8], column: usize, chunk: impl Fn(u32) -> bombs::NewChunk) -> Vec<u8> {
    let rows = group_rows(part);
    bombs::with_chunks(part, |g, c| (c == column).then(|| chunk(rows[g])))
}

/// The sessions bomb: each row group's first title is 512 MiB of `a` (zstd: a few KB).
fn title_bomb(sessions: &[u8]) -> Vec<u8> {
    with_column(sessions, 1, |rows| {
        let len = 512 << 20;
        let mut prefix = bombs::levels(&[(1, 1), (rows - 1, 0)]);
        prefix.extend((len as u32).to_le_bytes());
        let compressed = bombs::zstd_of_repeated(&prefix, b'a', len);
        let uncompressed = (prefix.len() + len) as i32;
        let mut bytes = bombs::page_header(
            bombs::DATA_PAGE,
            uncompressed,
            compressed.len() as i32,
            rows as i32,
            bombs::PLAIN,
            |_| {},
        );
        bytes.extend(compressed);
        bombs::NewChunk {
            bytes,
            dictionary: 0,
        }
    })
}

/// A turns bomb: the first row's `tools` hold as many items as a column chunk may have levels
/// (a million), from a few bytes of run-length levels and one dictionary entry.
fn list_bomb(turns: &[u8]) -> Vec<u8> {
    with_column(turns, 7, |rows| {
        let levels = 1 << 20;
        let items = levels - (rows - 1);
        let rep = [(1, 0), (items - 1, 1), (rows - 1, 0)];
        let def = [(items, 2), (rows - 1, 0)];
        let keys = bombs::keys(1, &[(items, 0)]);
        let body = bombs::data_body(Some(&rep), Some(&def), &keys);
        bombs::dictionary_chunk(&[b"edit: x"], levels as i32, &body)
    })
}

/// A postings bomb: every posting's word is one dictionary entry of 1 MiB.
fn word_bomb(postings: &[u8]) -> Vec<u8> {
    with_column(postings, 0, |rows| {
        let body = bombs::keys(1, &[(rows, 0)]);
        bombs::dictionary_chunk(&[&[b'w'; 1 << 20]], rows as i32, &body)
    })
}

/// Put `bytes` in the store as a part like `genuine` (its table, day and words) and list it in
/// the manifest, which otherwise lists what `manifest` does.
fn add_part(store: &S3sFs, manifest: &Value, genuine: &Value, bytes: &[u8]) {
    let path = format!(
        "{}/bomb.parquet",
        Path::new(genuine["path"].as_str().unwrap())
            .parent()
            .unwrap()
            .display()
    );
    std::fs::write(objects(store).join(&path), bytes).unwrap();
    let mut part = genuine.clone();
    part["path"] = json!(path);
    part["bytes"] = json!(bytes.len());
    let mut manifest = manifest.clone();
    manifest["parts"].as_array_mut().unwrap().push(part);
    manifest["version"] = json!(manifest["version"].as_u64().unwrap() + 1);
    std::fs::write(
        objects(store).join("index/snapshot.json"),
        serde_json::to_vec(&manifest).unwrap(),
    )
    .unwrap();
}

#[test]
fn a_bomb_part_of_each_table_is_refused_and_the_commands_answer_in_bounded_memory() {
    let store = S3sFs::start();
    let url = store.url("fleet");
    let host = Host::new(&url, &store.env());
    let session = converse(&host, &["zebra crossing", "tools and paths"]);
    let manifest_file = objects(&store).join("index/snapshot.json");
    eventually("the index written", || {
        let manifest: Value = std::fs::read(&manifest_file)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default();
        let listed = |table: &str| {
            manifest["parts"]
                .as_array()
                .is_some_and(|parts| parts.iter().any(|p| p["table"] == table))
        };
        let all = ["sessions", "turns", "postings"].iter().all(|t| listed(t));
        (!all).then(|| manifest.to_string())
    });
    let manifest: Value = serde_json::from_slice(&std::fs::read(&manifest_file).unwrap()).unwrap();
    let reader = Host::new(&url, &store.env());
    // The genuine index answers. The resident sets for reference: the binary doing next to
    // nothing (what the launcher held when it spawned it counts too), and reading the index.
    let (code, _, _, rss) = measured(&reader, &["--version"]);
    assert_eq!(code, 0);
    eprintln!("--version: peak RSS {rss} bytes");
    let (code, out, err, rss) = measured(&reader, &["list", "--json"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&session) && !err.contains("cannot be read"),
        "{out}{err}"
    );
    eprintln!("list --store from the genuine index: peak RSS {rss} bytes");

    let (sessions_part, sessions) = genuine_part(&store, &manifest, "sessions");
    let (turns_part, turns) = genuine_part(&store, &manifest, "turns");
    let (postings_part, postings) = genuine_part(&store, &manifest, "postings");
    // What each bomb is, the genuine part it goes beside, the commands that read its table,
    // what they must say.
    struct Case {
        what: &'static str,
        genuine: Value,
        bomb: Vec<u8>,
        commands: &'static [&'static [&'static str]],
        why: &'static str,
    }
    let cases = [
        Case {
            what: "a title of 512 MiB",
            genuine: sessions_part,
            bomb: title_bomb(&sessions),
            commands: &[&["list", "--json"], &["stats"]],
            why: "bytes decompressed, more than the 8388608 allowed",
        },
        Case {
            what: "a list of a million tools",
            genuine: turns_part,
            bomb: list_bomb(&turns),
            commands: &[&["stats"]],
            why: "more than the 64 allowed",
        },
        Case {
            what: "a word of 1 MiB",
            genuine: postings_part,
            bomb: word_bomb(&postings),
            commands: &[&["search", "zebra"]],
            why: "a cell of 1048576 bytes, more than the 64 allowed",
        },
    ];
    for Case {
        what,
        genuine,
        bomb,
        commands,
        why,
    } in cases
    {
        assert!(bomb.len() < 64 << 10, "{what}: {} bytes", bomb.len());
        add_part(&store, &manifest, &genuine, &bomb);
        for args in commands {
            let (code, out, err, rss) = measured(&reader, args);
            let command = args.join(" ");
            assert_eq!(code, 0, "{what}, {command}: {err}");
            // A sessions or turns part that cannot be read is left out, and the rest of the
            // index answers (what it held read from the catalogs); a search whose postings
            // cannot all be read reads the journals.
            let said = match args[0] {
                "search" => "reading the journals instead",
                _ => "): left out",
            };
            assert!(
                err.contains("/bomb.parquet: ") && err.contains(why) && err.contains(said),
                "{what}, {command}: {err}"
            );
            match args[0] {
                "list" | "search" => assert!(out.contains(&session), "{what}, {command}: {out}"),
                _ => assert!(
                    out.contains("1 sessions, 2 turns"),
                    "{what}, {command}: {out}"
                ),
            }
            eprintln!(
                "{what} ({} bytes), {command}: exit 0, peak RSS {rss} bytes; stderr: {}",
                bomb.len(),
                err.trim()
            );
            assert!(
                rss < CHILD_RSS_BOUND,
                "{what}, {command}: peak RSS {rss} bytes"
            );
        }
    }
}
