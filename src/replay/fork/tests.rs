//! Forks of journals built in a temporary journal directory.

use bytes::Bytes;
use serde_json::{Value, json};

use super::*;
use crate::journal::Tail;
use crate::journal::format::FORMAT_VERSION;

const PARENT: &str = "parent-1";
const FORK: &str = "fork-1";

fn header(session: &str, run: &str) -> Header {
    Header {
        acpj: FORMAT_VERSION,
        kind: SegmentKind::Session,
        session: Some(session.into()),
        run: run.into(),
        proxy: "test".into(),
        started: 1,
        pid: 1,
        argv: vec!["agent".into(), "--flag".into()],
        cwd: Some("/rec".into()),
        connection: Some("connections/c.acpj.zst".into()),
        initialize: None,
    }
}

fn message(seq: u64, from: Side, msg: &Value) -> Record {
    Record {
        seq,
        unix_us: seq as i64 * 1000,
        mono_us: seq * 1000,
        body: Body::Message {
            from,
            payload: Payload::from_line(Bytes::from(msg.to_string())),
        },
    }
}

fn prompt(seq: u64, id: u64, text: &str) -> Record {
    message(
        seq,
        Side::Client,
        &json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt",
            "params": {"sessionId": PARENT, "prompt": [{"type": "text", "text": text}]}}),
    )
}

fn chunk(seq: u64, text: &str, message_id: &str) -> Record {
    message(
        seq,
        Side::Agent,
        &json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": PARENT,
            "update": {"sessionUpdate": "agent_message_chunk", "messageId": message_id,
            "content": {"type": "text", "text": text}}}}),
    )
}

fn answer(seq: u64, id: u64) -> Record {
    message(
        seq,
        Side::Agent,
        &json!({"jsonrpc": "2.0", "id": id, "result": {"stopReason": "end_turn"}}),
    )
}

/// Write a closed session segment of `records` and catalog it.
fn segment(journals: &JournalDir, run: &str, records: &[Record]) {
    let mut writer = journals
        .create_segment_writer(&journals.session_dir(PARENT), run, &header(PARENT, run))
        .unwrap();
    for r in records {
        writer.append(r).unwrap();
    }
    let path = writer.path().to_path_buf();
    let stats = writer.close(99, 99_000, 99_000).unwrap();
    journals
        .append_catalog(&CatalogEntry::Open {
            session: PARENT.into(),
            segment: journals.relative(&path),
            cwd: Some("/rec".into()),
            agent: Some("agent --flag".into()),
            agent_name: None,
            git_branch: Some("main".into()),
            t: 1,
            agent_info: None,
        })
        .unwrap();
    journals
        .append_catalog(&CatalogEntry::Close {
            segment: journals.relative(&path),
            records: stats.records,
            bytes: stats.file_bytes,
            turns: 1,
            t: 99_000,
        })
        .unwrap();
}

/// A parent with two turns in two runs (the second continued on an agent-side session).
fn two_turns() -> (tempfile::TempDir, JournalDir) {
    let dir = tempfile::tempdir().unwrap();
    let journals = JournalDir::new(dir.path().join("store"));
    journals.create_dirs().unwrap();
    segment(
        &journals,
        "run-a",
        &[
            message(
                1,
                Side::Client,
                &json!({"jsonrpc": "2.0", "id": 1, "method": "session/new",
                    "params": {"cwd": "/rec", "mcpServers": []}}),
            ),
            message(
                2,
                Side::Agent,
                &json!({"jsonrpc": "2.0", "id": 1, "result": {"sessionId": PARENT}}),
            ),
            prompt(3, 2, "first question"),
            chunk(4, "first answer", "m-1"),
            answer(5, 2),
        ],
    );
    segment(
        &journals,
        "run-b",
        &[
            Record {
                seq: 1,
                unix_us: 1,
                mono_us: 1,
                body: Body::Event(Event::SessionMapped {
                    agent_session: "U".into(),
                }),
            },
            prompt(2, 7, "second question"),
            chunk(3, "second answer", "m-2"),
            answer(4, 7),
        ],
    );
    (dir, journals)
}

/// Every file under `dir` with its bytes.
fn files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files(&path));
        } else {
            out.push((path.clone(), std::fs::read(&path).unwrap()));
        }
    }
    out.sort();
    out
}

/// The fork's only segment: header and records, and how it ends.
fn read_fork(journals: &JournalDir) -> (Header, Vec<Record>, Tail) {
    let segments = segments_in(&journals.session_dir(FORK)).unwrap();
    assert_eq!(segments.len(), 1, "{segments:?}");
    let mut reader = SegmentReader::open(&segments[0]).unwrap();
    let header = reader.header().clone();
    let records: Vec<Record> = reader.by_ref().collect();
    (header, records, reader.tail().cloned().unwrap())
}

fn texts(records: &[Record]) -> Vec<String> {
    records
        .iter()
        .filter_map(|r| match &r.body {
            Body::Message { payload, .. } => Some(String::from_utf8_lossy(&payload.bytes).into()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_fork_at_turn_one_keeps_exactly_turn_one_under_its_own_id() {
    let (_dir, journals) = two_turns();
    let parent_dir = journals.session_dir(PARENT);
    let before = files(&parent_dir);
    let report = fork_session(&journals, PARENT, ForkPoint::Turns(1), FORK, 5_000_000).unwrap();
    assert_eq!(
        report,
        ForkReport {
            turns: 1,
            records: 6,
            cwd: Some("/rec".into())
        }
    );
    assert_eq!(files(&parent_dir), before, "the parent is untouched");

    let (header, records, tail) = read_fork(&journals);
    assert_eq!(tail, Tail::Clean);
    assert_eq!(header.session.as_deref(), Some(FORK));
    assert_eq!(header.kind, SegmentKind::Session);
    assert_eq!(header.connection, None);
    assert_eq!(header.started, 5_000_000);
    assert_eq!(header.cwd.as_deref(), Some("/rec"));
    assert_eq!(header.argv, ["agent", "--flag"]);
    assert_eq!(
        records[0].body,
        Body::Event(Event::ForkedFrom {
            parent: PARENT.into(),
            turns: 1,
            message: None
        })
    );
    assert!(is_end_marker(records.last().unwrap()));
    let seqs: Vec<u64> = records.iter().map(|r| r.seq).collect();
    assert_eq!(seqs, [0, 1, 2, 3, 4, 5, 6]);
    let lines = texts(&records);
    assert_eq!(lines.len(), 5);
    let all = lines.join("\n");
    assert!(all.contains("first question") && all.contains("first answer"));
    assert!(!all.contains("second"), "{all}");
    assert!(!all.contains(PARENT), "{all}");
    // Only the session ID changed, in place.
    assert_eq!(
        lines[2],
        format!(
            r#"{{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{{"sessionId":"{FORK}","prompt":[{{"type":"text","text":"first question"}}]}}}}"#
        )
    );
    assert!(lines[1].contains(&format!(r#""result":{{"sessionId":"{FORK}"}}"#)));

    // The catalog lists it, closed, with the parent's cwd, agent and branch.
    let sessions = journals.sessions().unwrap();
    let fork = sessions.iter().find(|s| s.session == FORK).unwrap();
    assert!(!fork.open);
    assert_eq!(fork.turns, 1);
    assert_eq!(fork.records, 6);
    assert_eq!(fork.cwd.as_deref(), Some("/rec"));
    assert_eq!(fork.agent.as_deref(), Some("agent --flag"));
    assert_eq!(fork.git_branch.as_deref(), Some("main"));
}

#[test]
fn all_keeps_every_turn_across_runs_without_the_agent_side_mapping() {
    let (_dir, journals) = two_turns();
    let report = fork_session(&journals, PARENT, ForkPoint::All, FORK, 1).unwrap();
    assert_eq!(report.turns, 2);
    let (_, records, tail) = read_fork(&journals);
    assert_eq!(tail, Tail::Clean);
    let all = texts(&records).join("\n");
    assert!(all.contains("first answer") && all.contains("second answer"));
    assert!(!all.contains(PARENT));
    assert!(
        !records
            .iter()
            .any(|r| matches!(r.body, Body::Event(Event::SessionMapped { .. }))),
        "the parent's agent-side session is not the fork's"
    );
    // forked_from, 8 messages, the end marker; seq strictly increasing.
    assert_eq!(records.len(), 10);
    assert!(records.windows(2).all(|w| w[0].seq < w[1].seq));
    // A fork of the fork keeps one forked_from record, first.
    fork_session(&journals, FORK, ForkPoint::Turns(2), "fork-2", 2).unwrap();
    let segments = segments_in(&journals.session_dir("fork-2")).unwrap();
    let records: Vec<Record> = SegmentReader::open(&segments[0]).unwrap().collect();
    let forked = records
        .iter()
        .filter(|r| matches!(r.body, Body::Event(Event::ForkedFrom { .. })))
        .count();
    assert_eq!(forked, 1);
    assert!(!texts(&records).join("\n").contains(FORK));
}

#[test]
fn a_message_id_cuts_after_its_turn() {
    let (_dir, journals) = two_turns();
    let report =
        fork_session(&journals, PARENT, ForkPoint::Message("m-1".into()), FORK, 1).unwrap();
    assert_eq!(report.turns, 1);
    let (_, records, _) = read_fork(&journals);
    assert_eq!(
        records[0].body,
        Body::Event(Event::ForkedFrom {
            parent: PARENT.into(),
            turns: 1,
            message: Some("m-1".into())
        })
    );
    let all = texts(&records).join("\n");
    assert!(all.contains("first answer") && !all.contains("second"));

    let report =
        fork_session(&journals, PARENT, ForkPoint::Message("m-2".into()), "f2", 1).unwrap();
    assert_eq!(report.turns, 2);
    // The ID a journal replay gave the second prompt (its record's seq in run-b, the
    // session's second run: numbered from 1 again, so the ID carries the run's ordinal).
    let report = fork_session(
        &journals,
        PARENT,
        ForkPoint::Message("acpj-user-1.2".into()),
        "f3",
        1,
    )
    .unwrap();
    assert_eq!(report.turns, 2);

    let err = fork_session(
        &journals,
        PARENT,
        ForkPoint::Message("nope".into()),
        "f4",
        1,
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("no user or agent message \"nope\""), "{err}");
    assert!(!journals.session_dir("f4").exists());
}

#[test]
fn refuses_an_unknown_parent_a_taken_id_and_a_turn_past_the_end() {
    let (_dir, journals) = two_turns();
    let err = fork_session(&journals, "ghost", ForkPoint::All, FORK, 1)
        .unwrap_err()
        .to_string();
    assert!(err.contains("no session \"ghost\""), "{err}");
    let err = fork_session(&journals, PARENT, ForkPoint::Turns(3), FORK, 1)
        .unwrap_err()
        .to_string();
    assert!(err.contains("has 2 prompt turn(s)"), "{err}");
    assert!(!journals.session_dir(FORK).exists());
    let err = fork_session(&journals, PARENT, ForkPoint::All, PARENT, 1)
        .unwrap_err()
        .to_string();
    assert!(err.contains("ID of its own"), "{err}");
    fork_session(&journals, PARENT, ForkPoint::Turns(0), FORK, 1).unwrap();
    let err = fork_session(&journals, PARENT, ForkPoint::All, FORK, 1)
        .unwrap_err()
        .to_string();
    assert!(err.contains("already exists"), "{err}");
    let (_, records, _) = read_fork(&journals);
    assert_eq!(texts(&records).len(), 2, "turn 0: the setup only");
}
