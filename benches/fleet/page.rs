//! 8: the team page at team scale (issue 54). `hosts` hosts record `per_run` sessions of three
//! turns a day for `days` days through the stdio proxy (each day's runs under `faketime`, each
//! run's agent one of three names, each session in one of four directories and with a word of
//! its own), into the directory s3s-fs serves as the bucket (`--store file://` of it: recording
//! through s3s-fs itself costs the square of the bucket's objects, see section 6). Then, from
//! empty caches and through the counting relay: `list --json` and `search WORD` as commands, and
//! `serve --store` of the bucket with its page in headless chromium (a new profile;
//! `team_page.mjs`): the list's first rows painted after navigation, a search's results and the
//! usage's first chart, cold and then warm, with the store requests each step caused. The same
//! on Garage (the bucket's objects copied in: it lists by prefix, as S3 does), and the page on
//! `file://` of the bucket (no requests to count). With `BENCH_BASE_BIN`, another build is
//! measured too, before this one on each store.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::stores::Garage;
use super::team::{self, Counter, URL};
use super::{Launch, Proxy, S3, browser};

/// How many hosts record for how many days, and sessions per host and day.
pub struct Scale {
    pub hosts: usize,
    pub days: usize,
    pub per_run: usize,
}

const AGENTS: [&str; 3] = ["claude-agent-acp", "codex-acp", "gemini-cli"];
const REPOS: [&str; 4] = ["payments", "web", "infra", "docs"];
const TURNS: usize = 3;
const TOKEN: &str = "bench-team-page-token-0123456789";
const BIN: &str = env!("CARGO_BIN_EXE_acp-journal");

/// The word only session `s` of host `h`'s run on day `d` holds.
fn word(h: usize, d: usize, s: usize) -> String {
    format!("w{h}d{d}s{s}z")
}

pub fn bench(s3: &S3, scale: &Scale, report: &mut String) {
    let sessions = scale.hosts * scale.days * scale.per_run;
    if let Some(why) = missing() {
        writeln!(report, "## The team page\n\nSkipped: {why} is missing.\n").unwrap();
        return;
    }
    eprintln!(
        "bench: the team page, {sessions} sessions ({} hosts × {} days × {})",
        scale.hosts, scale.days, scale.per_run
    );
    let recorded = Instant::now();
    let target = fill(&s3.root.path().join("bench/team"), scale);
    let recording = recorded.elapsed();
    // The same objects in Garage, which lists by prefix as S3 does (s3s-fs walks the whole
    // bucket for every listing).
    let garage = Garage::start(1);
    let copying = Instant::now();
    let copied = copy_to_garage(&s3.root.path().join("bench/team"), &garage);
    eprintln!(
        "bench: {copied} objects copied into Garage in {:.0} s",
        copying.elapsed().as_secs_f64()
    );
    let (s3_counter, garage_counter) = (Counter::to(s3.port), Counter::to(port_of(&garage)));
    let stores = [
        Reader {
            name: "s3s-fs",
            url: URL.to_string(),
            env: team::env(s3, &s3_counter),
            counter: &s3_counter,
            counted: true,
        },
        Reader {
            name: "Garage",
            url: GARAGE_URL.to_string(),
            env: garage_counter.relay(&garage.env(0)),
            counter: &garage_counter,
            counted: true,
        },
        // The same bucket as a shared directory: the page's time without a server's listings.
        Reader {
            name: "`file://`",
            url: format!("file://{}", s3.root.path().join("bench/team").display()),
            env: team::env(s3, &s3_counter),
            counter: &s3_counter,
            counted: false,
        },
    ];
    // BENCH_BASE_BIN: an `acp-journal` of another revision, measured first in the same run.
    let mut bins = Vec::new();
    if let Some(base) = std::env::var_os("BENCH_BASE_BIN") {
        bins.push(("base", PathBuf::from(base)));
    }
    bins.push(("head", PathBuf::from(BIN)));
    let caches = tempfile::tempdir().unwrap();
    let (mut readings, mut command_rows, mut start) = (Vec::new(), Vec::new(), (0, 0));
    for store in &stores {
        for (which, bin) in &bins {
            let name = match bins.len() {
                1 => store.name.to_string(),
                _ => format!("{} ({which})", store.name),
            };
            let cache = caches.path().join(format!("{}-{which}", readings.len()));
            if store.counted {
                for row in commands(bin, store, &cache, sessions, &target) {
                    command_rows.push(row.replacen("| `", &format!("| {name}: `"), 1));
                }
            }
            let (started, steps) = page(bin, store, &cache, &target);
            check(&steps, sessions, &target);
            if store.counted {
                start = started;
            }
            readings.push((name, steps, store.counted));
        }
    }
    // BENCH_PAGE_KEEP=DIR: the bucket copied there, to look into afterwards.
    if let Some(keep) = std::env::var_os("BENCH_PAGE_KEEP") {
        let copied = Command::new("cp")
            .arg("-a")
            .arg(s3.root.path().join("bench"))
            .arg(&keep)
            .status();
        eprintln!("bench: the bucket copied to {keep:?}: {copied:?}");
    }
    writeln!(
        report,
        "## The team page over {sessions} sessions\n\n\
         Recorded through the stdio proxy into the bucket's directory (`--store file://`): {} \
         hosts, a run of {} sessions of {TURNS} turns each per host per day over {} days \
         (`faketime`), agents {}: {} turns in {:.0} s. The store holds {} KiB, the index {} KiB; \
         {copied} objects, copied into Garage (one node, `stores::Garage`). `serve --no-index`'s \
         start and first 3 s cost {} requests. Search word `{}` (one session's).\n",
        scale.hosts,
        scale.per_run,
        scale.days,
        AGENTS.join(", "),
        sessions * TURNS,
        recording.as_secs_f64(),
        s3.bytes("team") / 1024,
        s3.bytes("team/index") / 1024,
        start.0,
        target.0,
    )
    .unwrap();
    write_steps(report, &readings);
    writeln!(
        report,
        "| the command, empty cache, through the relay | cold | warm |\n|---|---|---|\n{}\n",
        command_rows.join("\n")
    )
    .unwrap();
}

/// A store the page and the commands read, through `counter` (its requests `counted`, or
/// not: a `file://` store makes none).
struct Reader<'a> {
    name: &'static str,
    url: String,
    env: Vec<(String, String)>,
    counter: &'a Counter,
    counted: bool,
}

/// Garage's bucket (`stores::Garage` makes `team`).
const GARAGE_URL: &str = "s3://team";

/// The port of Garage's S3 API.
fn port_of(garage: &Garage) -> u16 {
    let env = garage.env(0);
    let endpoint = &env.iter().find(|(k, _)| k == "AWS_ENDPOINT_URL").unwrap().1;
    endpoint.rsplit(':').next().unwrap().parse().unwrap()
}

/// Every object of the store in `dir` (`file://`) put into Garage's bucket under the same
/// name; how many.
fn copy_to_garage(dir: &Path, garage: &Garage) -> usize {
    use acp_journal::fleet::store::Store;
    use futures_util::StreamExt;
    // The HTTP client's TLS takes the process's default provider, as `main` installs it.
    acp_journal::net::tls::crypto_provider();
    let from = Store::open(&format!("file://{}", dir.display())).unwrap();
    let env = garage.env(0);
    let var = |k: &str| env.iter().find(|(key, _)| key == k).unwrap().1.clone();
    let s3 = object_store::aws::AmazonS3Builder::new()
        .with_endpoint(var("AWS_ENDPOINT_URL"))
        .with_bucket_name("team")
        .with_access_key_id(var("AWS_ACCESS_KEY_ID"))
        .with_secret_access_key(var("AWS_SECRET_ACCESS_KEY"))
        .with_region(var("AWS_REGION"))
        .with_allow_http(true)
        .build()
        .unwrap();
    let to = Store::over(std::sync::Arc::new(s3), "", GARAGE_URL);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let names = from.list("").await.unwrap();
        let copies = names.iter().map(|name| {
            let (from, to) = (&from, &to);
            async move {
                let bytes = from.get(name).await.unwrap();
                to.put_new(name, bytes).await.unwrap();
            }
        });
        futures_util::stream::iter(copies)
            .buffer_unordered(16)
            .collect::<Vec<()>>()
            .await;
        names.len()
    })
}

/// What the section needs and this machine lacks, if anything.
fn missing() -> Option<String> {
    let faketime = Command::new("faketime").arg("--version").output().is_ok();
    browser::missing()
        .map(|(path, what)| format!("{} ({what})", path.display()))
        .or((!faketime).then(|| "faketime (apt-get install faketime)".into()))
}

/// The page's answers checked: the list counts every session, the search finds the one.
fn check(steps: &[Step], sessions: usize, target: &Target) {
    for step in steps.iter().filter(|s| s.said["step"] == "list") {
        assert_eq!(step.said["total"], json!(sessions), "{}", step.said);
    }
    for step in steps.iter().filter(|s| s.said["step"] == "search") {
        let hits = step.said["hits"].as_array().unwrap();
        let only = hits.iter().all(|h| h == &json!(target.1));
        assert!(!hits.is_empty() && only, "{}", step.said);
    }
}

/// `list --json` and `search WORD` by `bin` on `store` from empty caches under `caches` and
/// again warm, checked: the report's rows.
fn commands(
    bin: &Path,
    store: &Reader,
    caches: &Path,
    sessions: usize,
    target: &Target,
) -> [String; 2] {
    let listed = |out: &str| {
        let rows: Vec<Value> = serde_json::from_str(out).unwrap_or_default();
        assert_eq!(rows.len(), sessions, "{out}");
    };
    let found = |out: &str| assert!(out.contains(&target.1), "{out}");
    let list = ["list", "--json"];
    let search = ["search", target.0.as_str()];
    [
        command(bin, store, &caches.join("list"), &list, &listed),
        command(bin, store, &caches.join("search"), &search, &found),
    ]
}

/// A step of the page as the driver said it, and the store's requests and bytes during it.
struct Step {
    said: Value,
    requests: u64,
    bytes: u64,
}

/// The page's steps as a table: for each reading of the store (its name, its steps, and
/// whether its requests were counted), a column per round.
fn write_steps(report: &mut String, readings: &[(String, Vec<Step>, bool)]) {
    let heads: Vec<String> = readings
        .iter()
        .flat_map(|(name, _, _)| {
            [
                format!("{name}, cold (empty cache)"),
                format!("{name}, warm (reloaded)"),
            ]
        })
        .collect();
    writeln!(
        report,
        "| the page, in chromium (a new profile) | {} |\n|---|{}",
        heads.join(" | "),
        "---|".repeat(heads.len())
    )
    .unwrap();
    for (name, what) in [
        ("list", "the list's first rows painted, from navigation"),
        ("search", "a search, asked → its results painted"),
        ("usage", "the usage, asked → its first chart painted"),
    ] {
        let mut cells = Vec::new();
        for (_, steps, counted) in readings {
            for round in ["cold", "warm"] {
                let step = steps
                    .iter()
                    .find(|s| s.said["step"] == name && s.said["round"] == round);
                cells.push(step.map_or("-".into(), |s| cell(s, *counted)));
            }
        }
        writeln!(report, "| {what} | {} |", cells.join(" | ")).unwrap();
    }
    writeln!(report).unwrap();
}

/// A step's time, its answer's, and (when `counted`) the store's requests and bytes.
fn cell(s: &Step, counted: bool) -> String {
    let ms = |key: &str| s.said[key].as_f64().unwrap_or(f64::NAN);
    let tab = s.said["tab_ms"]
        .as_f64()
        .map_or(String::new(), |t| format!("; Team button at {t:.0} ms"));
    let store = match counted {
        true => format!(", {} requests, {} KiB", s.requests, s.bytes / 1024),
        false => String::new(),
    };
    format!(
        "**{:.0} ms** (answer {:.0} ms{tab}){store}",
        ms("ms"),
        ms("answer_ms")
    )
}

/// A reading command from an empty cache and again warm, checked: its row of the report.
fn command(
    bin: &Path,
    store: &Reader,
    cache: &Path,
    args: &[&str],
    check: &dyn Fn(&str),
) -> String {
    let cell = |(took, requests, bytes, out): (Duration, u64, u64, String)| {
        check(&out);
        format!(
            "{:.0} ms, {requests} requests, {} KiB",
            took.as_secs_f64() * 1e3,
            bytes / 1024
        )
    };
    let read = || team::read(bin, &store.url, &store.env, cache, store.counter, args);
    let cold = cell(read());
    let warm = cell(read());
    format!("| `{}` | {cold} | {warm} |", args.join(" "))
}

/// The word and the ID of the session searched for.
type Target = (String, String);

/// Records the sessions into `dir` (the store at `file://dir`), day by day, oldest first (the
/// hosts writing at once share a clock), 4 hosts at a time: the session searched for.
fn fill(dir: &Path, scale: &Scale) -> Target {
    let url = format!("file://{}", dir.display());
    // Each journal directory a host, named as a person would name it (`host-id`).
    let homes: Vec<tempfile::TempDir> = (0..scale.hosts)
        .map(|h| {
            let home = tempfile::tempdir().unwrap();
            std::fs::write(home.path().join("host-id"), format!("dev-{h:02}")).unwrap();
            home
        })
        .collect();
    let (th, td, ts) = (scale.hosts / 2, scale.days / 2, scale.per_run / 2);
    let mut target = None;
    for day in (0..scale.days).rev() {
        for chunk in homes.iter().enumerate().collect::<Vec<_>>().chunks(4) {
            let runs: Vec<_> = chunk
                .iter()
                .map(|(h, home)| {
                    let (h, home, url, n) =
                        (*h, home.path().to_path_buf(), url.clone(), scale.per_run);
                    std::thread::spawn(move || (h, run(&home, h, day, n, &url)))
                })
                .collect();
            for (h, ids) in runs.into_iter().map(|r| r.join().unwrap()) {
                if (h, day) == (th, td) {
                    target = Some((word(h, day, ts), ids[ts].clone()));
                }
            }
        }
    }
    target.unwrap()
}

/// Host `h`'s run on day `day` (that many days ago by its clock): `n` sessions recorded and
/// shipped; their IDs.
fn run(home: &Path, h: usize, day: usize, n: usize, url: &str) -> Vec<String> {
    let how = Launch {
        wrapper: match day {
            0 => vec![],
            _ => vec!["faketime".into(), "-f".into(), format!("-{day}d")],
        },
        agent: Some(AGENTS[(h + day) % AGENTS.len()].into()),
    };
    let mut proxy = Proxy::launch(&how, Path::new(BIN), home, Some((&[], url)), &[], 0);
    let ids: Vec<String> = (0..n)
        .map(|s| {
            let repo = REPOS[(h + s) % REPOS.len()];
            let params = json!({"cwd": format!("/home/dev/{repo}"), "mcpServers": []});
            let (answer, _) = proxy.call("session/new", params);
            let id = answer["result"]["sessionId"].as_str().unwrap().to_string();
            for t in 0..TURNS {
                let text = format!(
                    "Fix issue {} in module{t} of the {repo} service",
                    word(h, day, s)
                );
                proxy.prompt_text(&id, &text);
            }
            id
        })
        .collect();
    proxy.wait_shipped(home, Duration::from_secs(120));
    proxy.finish();
    ids
}

/// `serve --store` of `store` by `bin`, with an empty cache under `cache`; its page driven: the
/// requests of serve's start and first 3 s, then each step's.
fn page(bin: &Path, store: &Reader, cache: &Path, target: &Target) -> ((u64, u64), Vec<Step>) {
    store.counter.take();
    let served = Served::start(bin, &store.url, &store.env, cache);
    // Its shipper's start (it ships this host's own journal directory).
    std::thread::sleep(Duration::from_secs(3));
    let start = store.counter.take();
    let steps = drive(&served.base, &target.0, store.counter);
    (start, steps)
}

/// `serve --no-index --store url` in front of the bench's agent (the page's team view needs no
/// agent, but `serve` runs one), its cache home `cache`, its journals beside it.
struct Served {
    child: Child,
    base: String,
}

impl Served {
    fn start(bin: &Path, url: &str, env: &[(String, String)], cache: &Path) -> Served {
        let mut child = Command::new(bin)
            .arg("--journal-dir")
            .arg(cache.join("journals"))
            // A reader of the store: no index of its own to write (its upkeep would count
            // as the page's requests).
            .args([
                "serve",
                "--no-index",
                "--listen",
                "127.0.0.1:0",
                "--store",
                url,
                "--",
            ])
            .arg(std::env::current_exe().unwrap())
            .arg("__agent")
            .envs(env.iter().map(|(k, v)| (k, v)))
            .env("XDG_CACHE_HOME", cache)
            .env("ACP_JOURNAL_TOKEN", TOKEN)
            .env("ACP_JOURNAL_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let url = lines
            .by_ref()
            .map_while(Result::ok)
            .find_map(|l| {
                Some(
                    l.split("serving ACP at ")
                        .nth(1)?
                        .split(' ')
                        .next()?
                        .to_string(),
                )
            })
            .expect("serve did not say where it listens");
        // Its warnings with the bench's progress.
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                if line.contains("WARN") || line.contains("ERROR") {
                    eprintln!("serve: {line}");
                }
            }
        });
        Served {
            child,
            base: url.trim_end_matches("/acp").to_string(),
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `team_page.mjs` against `base`: each step it says, with the store's requests and bytes
/// since it said it was ready for it.
fn drive(base: &str, word: &str, counter: &Counter) -> Vec<Step> {
    let script = browser::beside_puppeteer("benches/fleet/team_page.mjs", "fleet_team_page.mjs");
    let mut child = Command::new("node")
        .arg(&script)
        .args(["--url", base, "--token", TOKEN, "--word", word])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("running node");
    let mut stdin = child.stdin.take().unwrap();
    let mut steps = Vec::new();
    for line in BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map_while(Result::ok)
    {
        let Ok(said) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let (requests, bytes) = counter.take();
        assert!(
            said["step"] != "error",
            "the team page's driver failed at {}: {}\n{}",
            said["at"],
            said["message"],
            said["problems"]
        );
        // What came before a "ready" is no step's.
        if said.get("step").is_some() {
            steps.push(Step {
                said,
                requests,
                bytes,
            });
        }
        let _ = writeln!(stdin).and_then(|()| stdin.flush());
    }
    let status = child.wait().unwrap();
    assert!(status.success(), "the team page's driver: {status}");
    steps
}
