//! The session tree through the core: a child session (a subagent) its parent announced is
//! journaled with the root of its tree, routed to the root's connections, counts as the
//! root's activity, and teaches the catalog nothing of its own.

use bytes::Bytes;
use serde_json::json;

use super::tests::{Harness, json_of};
use super::*;
use crate::journal::format::Body;

const INIT: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"subagents":{}}}}"#;
const INIT_OK: &str =
    r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{}}}"#;
const NEW: &str =
    r#"{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/work","mcpServers":[]}}"#;
const NEW_OK: &str = r#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"S"}}"#;

fn update(session: &str, update: serde_json::Value) -> String {
    json!({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":session,"update":update}})
        .to_string()
}

fn announce(parent: &str, child: &str) -> String {
    update(
        parent,
        json!({"sessionUpdate":"subagent_update","sessionId":child,"title":"Explore","state":{"state":"running"}}),
    )
}

fn said(session: &str, text: &str) -> String {
    update(
        session,
        json!({"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":text}}),
    )
}

fn started(config: Config) -> Harness {
    let mut h = Harness::with(config);
    h.client(INIT);
    h.agent(INIT_OK);
    h.client(NEW);
    h.agent(NEW_OK);
    h
}

fn children(h: &Harness) -> Vec<(String, String, String)> {
    h.requests
        .iter()
        .filter_map(|a| match a {
            Action::Catalog(CatalogUpdate::Child {
                session,
                child,
                parent,
            }) => Some((session.to_string(), child.to_string(), parent.to_string())),
            _ => None,
        })
        .collect()
}

#[test]
fn a_childs_lines_go_to_its_parents_journal_as_they_crossed_and_open_no_session() {
    let mut h = started(Config::default());
    let lines = [
        announce("S", "C"),
        said("C", "looking"),
        r#"{"jsonrpc":"2.0","id":"p1","method":"session/request_permission","params":{"sessionId":"C","toolCall":{"toolCallId":"t1"},"options":[{"optionId":"ok","name":"OK","kind":"allow_once"}]}}"#.to_string(),
    ];
    for line in &lines {
        h.agent(line);
        assert_eq!(
            h.to_client.last(),
            Some(&Bytes::from(format!("{line}\n"))),
            "forwarded byte for byte"
        );
    }
    let answer = r#"{"jsonrpc":"2.0","id":"p1","result":{"outcome":{"outcome":"selected","optionId":"ok"}}}"#;
    h.client(answer);
    let cancel = r#"{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"C"}}"#;
    h.client(cancel);
    assert_eq!(h.to_agent.last(), Some(&Bytes::from(format!("{cancel}\n"))));
    let journal = h.session("S");
    for line in lines.iter().map(String::as_str).chain([answer, cancel]) {
        assert!(journal.contains(&line.to_string()), "{line} in S's journal");
    }
    assert!(
        h.opened.iter().all(|(s, ..)| &**s == "S"),
        "no session of its own: {:?}",
        h.opened.iter().map(|o| &o.0).collect::<Vec<_>>()
    );
    assert_eq!(children(&h), [("S".into(), "C".into(), "S".into())]);
}

#[test]
fn a_grandchild_is_the_roots_and_an_id_nobody_announced_is_a_session_of_its_own() {
    let mut h = started(Config::default());
    h.agent(&announce("S", "C"));
    h.agent(&announce("C", "G"));
    h.agent(&said("G", "deep"));
    h.agent(&announce("S", "C"));
    h.agent(&said("X", "stray"));
    assert!(h.session("S").contains(&said("G", "deep")));
    assert_eq!(
        children(&h),
        [
            ("S".into(), "C".into(), "S".into()),
            ("S".into(), "G".into(), "C".into())
        ],
        "each child told once"
    );
    assert_eq!(h.session("X"), [said("X", "stray")]);
    // A session the table has is no child, whoever names it.
    h.agent(&announce("S", "X"));
    assert_eq!(children(&h).len(), 2);
    h.agent(&said("X", "again"));
    assert_eq!(h.session("X").len(), 2);
}

#[test]
fn a_childs_usage_state_and_title_teach_the_catalog_nothing() {
    let mut h = started(Config::default());
    h.agent(&announce("S", "C"));
    h.turn_facts();
    h.agent(&update(
        "C",
        json!({"sessionUpdate":"usage_update","used":5,"size":10}),
    ));
    h.agent(&update(
        "C",
        json!({"sessionUpdate":"session_info_update","title":"child title"}),
    ));
    h.agent(r#"{"jsonrpc":"2.0","id":"e1","method":"elicitation/create","params":{"sessionId":"C","mode":"form","message":"?","requestedSchema":{}}}"#);
    let facts = h.turn_facts();
    assert!(facts.is_empty(), "{facts:?}");
    assert!(
        !h.requests
            .iter()
            .any(|a| matches!(a, Action::Catalog(CatalogUpdate::Info { .. }))),
        "no title from a child"
    );
}

#[test]
fn a_subagents_work_keeps_its_parents_prompt_from_stalling() {
    let mut h = started(Config {
        stall_timeout_us: Some(1_000_000),
        ..Config::default()
    });
    h.client(r#"{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"S","prompt":[{"type":"text","text":"delegate"}]}}"#);
    h.agent(&announce("S", "C"));
    let t0 = h.now();
    for step in 1..=5u64 {
        let at = Stamp {
            unix_us: 0,
            mono_us: t0 + step * 800_000,
        };
        h.proxy.handle_line(
            at,
            Peer::Agent,
            Bytes::from(format!("{}\n", said("C", "working"))),
        );
        h.proxy.handle_tick(at);
        h.drain();
    }
    assert!(
        h.to_agent
            .iter()
            .all(|l| json_of(l)["method"] != "session/cancel"),
        "the child's lines are the parent's activity"
    );
}

#[test]
fn a_childs_lines_reach_the_connections_attached_to_its_root() {
    let mut h = started(Config {
        hosted: true,
        ..Config::default()
    });
    h.client_on(1, INIT);
    h.client_on(
        1,
        r#"{"jsonrpc":"2.0","id":7,"method":"session/attach","params":{"sessionId":"S","role":"controller","historyPolicy":"none"}}"#,
    );
    let load = super::tests::fetch(&h);
    let at = h.stamp();
    h.proxy
        .handle_history(at, load, HistoryChunk::End(Default::default()));
    h.drain();
    h.agent(&announce("S", "C"));
    h.agent(&said("C", "to both"));
    for conn in [ConnId::FIRST, ConnId(1)] {
        let got: Vec<String> = h.clients[&conn]
            .iter()
            .map(|l| String::from_utf8_lossy(l).trim_end().to_string())
            .collect();
        assert!(got.contains(&said("C", "to both")), "{conn:?}: {got:?}");
    }
    let permission = r#"{"jsonrpc":"2.0","id":"p","method":"session/request_permission","params":{"sessionId":"C","toolCall":{"toolCallId":"t"},"options":[]}}"#;
    h.agent(permission);
    assert!(
        h.clients[&ConnId(1)]
            .iter()
            .any(|l| json_of(l)["method"] == "session/request_permission"),
        "a child's permission request goes to its root's controllers"
    );
    assert!(
        h.journals[&Target::Session("S".into())]
            .iter()
            .any(|r| matches!(&r.body, Body::Message { payload, .. } if payload.bytes.starts_with(permission.as_bytes())))
    );
}
