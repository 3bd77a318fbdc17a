//! `blame --store` from the team index (issue 53), through the built binary against s3s-fs:
//! sessions of our edit agent recorded on two hosts into one store, and a teammate with
//! neither's journals, on a third machine directory, blames the files, in the same work tree
//! and in a clone of it elsewhere on the disk. It finds the lines of both hosts from the
//! index's `edits` rows alone: no session's journal is read (the store's requests counted at a
//! relay). With the index gone, the same blame reads every session's journal, as before the
//! index had edits, and gives the same answer, line for line.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::blame::{Repo, prompt_writing_files};
use crate::fleet::Host;
use crate::relay::Relay;
use crate::stores::{ACCESS_KEY, S3sFs, SECRET_KEY, s3_env};
use crate::util::{python, root};

/// One session of the edit agent on `host` in the work tree `cwd`, one turn per entry of
/// `turns` (its directives), the proxy run to its end: the session's ID.
fn session(host: &Host, cwd: &Path, turns: &[&str]) -> String {
    let agent = vec![
        python(),
        root()
            .join("tests/agents/edit_agent.py")
            .display()
            .to_string(),
    ];
    let mut client = host.proxy(&agent, &[]);
    client.initialize();
    let id = client.new_session(cwd.to_str().unwrap());
    for (i, directives) in turns.iter().enumerate() {
        let text = format!("Turn {} of the test\n{directives}", i + 1);
        let answer = prompt_writing_files(&mut client, 100 + i as u64, &id, &text);
        assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    }
    let (code, _) = client.finish();
    assert_eq!(code, 0);
    id
}

/// `blame FILE --json` of `who` reading the store: the rows, and its stderr.
fn blame(who: &Host, file: &Path) -> (Vec<Value>, String) {
    let (code, out, err) = who.cli(&["blame", file.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{err}");
    let rows = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    (rows, err)
}

/// Whose each line is: `text` and a name of `sessions` with the turn, or git's author.
fn whose(rows: &[Value], sessions: &[(&str, &str)]) -> Vec<(String, String)> {
    rows.iter()
        .map(|row| {
            let agent = &row["agent"];
            let whose = match agent["session"].as_str() {
                None => row["author"].as_str().unwrap().to_string(),
                Some(id) => {
                    assert_eq!(agent["agent"], "edit-agent", "{row}");
                    assert_eq!(agent["model"], "edit-model-1", "{row}");
                    let name = sessions
                        .iter()
                        .find(|(_, s)| *s == id)
                        .map_or("an unknown session", |(name, _)| name);
                    format!("{name}:{}", agent["turn"])
                }
            };
            (row["text"].as_str().unwrap().to_string(), whose)
        })
        .collect()
}

fn expect(lines: &[(&str, &str)]) -> Vec<(String, String)> {
    lines
        .iter()
        .map(|(t, w)| (t.to_string(), w.to_string()))
        .collect()
}

#[test]
fn a_teammate_blames_lines_of_two_hosts_from_the_index_alone_as_the_journals_would() {
    let store = S3sFs::start();
    let url = store.url("team");
    let repo = Repo::new();
    repo.write("shared.rs", &["// shared"]);
    repo.commit("base");
    let (a, b) = (Host::new(&url, &store.env()), Host::new(&url, &store.env()));
    let on_a = session(
        &a,
        repo.path(),
        &["write shared.rs\n// shared\nfn written_on_host_a() -> u32 { 1 }\n."],
    );
    let on_b = session(
        &b,
        repo.path(),
        &[
            "replace shared.rs\nfn written_on_host_a() -> u32 { 1 }\n---\nfn written_on_host_a() -> u32 { 1 }\nfn written_on_host_b() -> u32 { 2 }\n.",
            "write first.rs\n// moved later\nfn from_host_b_before_the_rename() {}\n.",
        ],
    );
    repo.commit("work");
    // A person adds a line, and renames a file (git's blame follows it to its old path).
    let mut text = std::fs::read_to_string(repo.path().join("shared.rs")).unwrap();
    text.push_str("fn typed_by_the_person() {}\n");
    std::fs::write(repo.path().join("shared.rs"), text).unwrap();
    repo.git(&["mv", "first.rs", "renamed.rs"]);
    repo.commit("person");
    let sessions = [("a", on_a.as_str()), ("b", on_b.as_str())];
    let shared = expect(&[
        ("// shared", "Ann Person"),
        ("fn written_on_host_a() -> u32 { 1 }", "a:1"),
        ("fn written_on_host_b() -> u32 { 2 }", "b:1"),
        ("fn typed_by_the_person() {}", "Ann Person"),
    ]);
    let renamed = expect(&[
        ("// moved later", "b:2"),
        ("fn from_host_b_before_the_rename() {}", "b:2"),
    ]);

    // A teammate: a journal directory of its own, the store through a relay that counts.
    let relay = Relay::start(store.port, Duration::ZERO);
    let teammate = Host::new(
        &url,
        &s3_env(relay.port, ACCESS_KEY, SECRET_KEY, "us-east-1"),
    );
    let mut from_index = Vec::new();
    for file in ["shared.rs", "renamed.rs"] {
        relay.take_counts();
        let (rows, err) = blame(&teammate, &repo.path().join(file));
        let counts: BTreeMap<String, usize> = relay.take_counts();
        eprintln!("blame {file} from the index: {counts:?}");
        assert!(!err.contains("cannot answer"), "{err}");
        // No session's journal was read: the manifest, the hosts' catalogs and the index.
        let n = |kind: &str| counts.get(kind).copied().unwrap_or(0);
        assert_eq!(n("GET sessions") + n("LIST sessions"), 0, "{counts:?}");
        assert!(n("GET index") > 0, "{counts:?}");
        assert!(counts.values().sum::<usize>() <= 30, "{counts:?}");
        from_index.push(rows);
    }
    assert_eq!(whose(&from_index[0], &sessions), shared);
    assert_eq!(whose(&from_index[1], &sessions), renamed);

    // The same history cloned elsewhere (another path, no remote in common): the rows name
    // the repository by its first commit, so the same lines are found.
    let clone = tempfile::tempdir().unwrap();
    let elsewhere = clone.path().join("checkout");
    let out = std::process::Command::new("git")
        .args(["clone", "-q"])
        .arg(repo.path())
        .arg(&elsewhere)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (rows, _) = blame(&teammate, &elsewhere.join("shared.rs"));
    assert_eq!(rows, from_index[0]);

    // With the index gone, every session's journal is read: the same answer.
    let manifest = store
        .root
        .path()
        .join(&store.bucket)
        .join("team/index/snapshot.json");
    std::fs::remove_file(manifest).unwrap();
    for (i, (file, indexed)) in ["shared.rs", "renamed.rs"]
        .iter()
        .zip(&from_index)
        .enumerate()
    {
        relay.take_counts();
        let (rows, _) = blame(&teammate, &repo.path().join(file));
        let counts = relay.take_counts();
        eprintln!("blame {file} from the journals: {counts:?}");
        // The first pulls every session into the teammate's copy (the next reads it again).
        if i == 0 {
            assert!(
                counts.get("GET sessions").copied().unwrap_or(0) > 0,
                "{counts:?}"
            );
        }
        assert_eq!(&rows, indexed, "{file}");
    }
}
