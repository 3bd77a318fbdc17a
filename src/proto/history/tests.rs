//! `Replay`'s tests.

use super::*;
use crate::journal::format::Payload;

fn rec(seq: u64, from: Side, line: &str) -> Record {
    Record {
        seq,
        unix_us: 0,
        mono_us: seq,
        body: Body::Message {
            from,
            payload: Payload::from_line(Bytes::from(line.to_string())),
        },
    }
}

fn update(seq: u64, u: &str) -> Record {
    rec(
        seq,
        Side::Agent,
        &format!(
            r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"S","update":{u}}}}}"#
        ),
    )
}

fn replay(records: &[Record], support: ClientSupport) -> (Vec<Value>, Summary) {
    let mut r = Replay::new("S", support, 10_000);
    for rec in records {
        r.observe(rec);
    }
    let mut out = vec![];
    for rec in records {
        r.emit(rec, &mut out);
    }
    let summary = r.finish(&mut out);
    (
        out.iter()
            .map(|l| serde_json::from_slice(l).unwrap())
            .collect(),
        summary,
    )
}

#[test]
fn made_up_message_ids_stay_apart_across_the_runs_of_a_session() {
    // Two runs of one session: each numbers its records from where its proxy started, so
    // both have a prompt at 3 and a chunk at 4.
    let run = |text: &str| {
        [
            rec(
                3,
                Side::Client,
                &format!(
                    r#"{{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{{"sessionId":"S","prompt":[{{"type":"text","text":"{text}"}}]}}}}"#
                ),
            ),
            update(
                4,
                r#"{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"ok"}}"#,
            ),
        ]
    };
    let records: Vec<Record> = run("first").into_iter().chain(run("second")).collect();
    for support in [
        ClientSupport::default(),
        ClientSupport {
            v2: true,
            ..Default::default()
        },
    ] {
        let (lines, _) = replay(&records, support);
        let ids: Vec<&str> = lines
            .iter()
            .filter_map(|l| l["params"]["update"]["messageId"].as_str())
            .collect();
        // v1 chunks without an ID pass as recorded; v2 needs one for each message.
        let expected: &[&str] = match support.v2 {
            false => &["acpj-user-3", "acpj-user-1.3"],
            true => &[
                "acpj-user-3",
                "acpj-agent_message-4",
                "acpj-user-1.3",
                "acpj-agent_message-1.4",
            ],
        };
        assert_eq!(ids, expected, "v2: {}", support.v2);
    }
}

fn kinds(lines: &[Value]) -> Vec<String> {
    lines
        .iter()
        .map(|l| {
            l["params"]["update"]["sessionUpdate"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

#[test]
fn steering_the_agent_took_is_replayed_as_the_users_and_joins_the_transcript() {
    let records = vec![
        rec(
            0,
            Side::Client,
            r#"{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"S","prompt":[{"type":"text","text":"go"}]}}"#,
        ),
        rec(
            1,
            Side::Client,
            r#"{"jsonrpc":"2.0","id":2,"method":"_session/steering","params":{"sessionId":"S","prompt":[{"type":"text","text":"use tabs"}]}}"#,
        ),
        rec(2, Side::Agent, r#"{"jsonrpc":"2.0","id":2,"result":{}}"#),
        update(
            3,
            r#"{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"ok"}}"#,
        ),
        rec(
            4,
            Side::Client,
            r#"{"jsonrpc":"2.0","id":3,"method":"_session/steering","params":{"sessionId":"S","prompt":[{"type":"text","text":"refused"}]}}"#,
        ),
        rec(
            5,
            Side::Agent,
            r#"{"jsonrpc":"2.0","id":3,"result":{"outcome":"promptRequired"}}"#,
        ),
    ];
    let (lines, summary) = replay(&records, ClientSupport::default());
    let users: Vec<&str> = lines
        .iter()
        .filter(|l| l["params"]["update"]["sessionUpdate"] == "user_message_chunk")
        .map(|l| l["params"]["update"]["content"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(users, ["go", "use tabs"]);
    assert!(
        summary.transcript.contains("User: go\nuse tabs"),
        "{}",
        summary.transcript
    );
    assert!(!summary.transcript.contains("refused"));
}

#[test]
fn history_in_order_state_collapsed_notices_dropped_tools_closed() {
    let records = vec![
        rec(
            0,
            Side::Client,
            r#"{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}"#,
        ),
        update(
            1,
            r#"{"sessionUpdate":"available_commands_update","availableCommands":[{"name":"a","description":"x"}]}"#,
        ),
        rec(
            2,
            Side::Client,
            r#"{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"S","prompt":[{"type":"text","text":"hi"},{"type":"resource_link","uri":"file:///a","name":"a"}]}}"#,
        ),
        update(
            3,
            r#"{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hello"}}"#,
        ),
        update(
            4,
            r#"{"sessionUpdate":"notice","severity":"info","title":"x"}"#,
        ),
        update(
            5,
            r#"{"sessionUpdate":"tool_call","toolCallId":"t1","title":"read"}"#,
        ),
        update(
            6,
            r#"{"sessionUpdate":"tool_call","toolCallId":"t2","title":"edit","status":"in_progress"}"#,
        ),
        update(
            7,
            r#"{"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"completed"}"#,
        ),
        update(
            8,
            r#"{"sessionUpdate":"available_commands_update","availableCommands":[]}"#,
        ),
        update(
            9,
            r#"{"sessionUpdate":"session_info_update","title":"First"}"#,
        ),
        update(
            10,
            r#"{"sessionUpdate":"session_info_update","updatedAt":"2026-11-21T00:00:00Z"}"#,
        ),
        update(
            11,
            r#"{"sessionUpdate":"current_mode_update","currentModeId":"code"}"#,
        ),
    ];
    let (lines, summary) = replay(&records, ClientSupport::default());
    assert_eq!(
        kinds(&lines),
        [
            "user_message_chunk",
            "user_message_chunk",
            "agent_message_chunk",
            "tool_call",
            "tool_call",
            "tool_call_update",
            "available_commands_update",
            "current_mode_update",
            "session_info_update",
            "tool_call_update"
        ]
    );
    assert_eq!(lines[0]["params"]["update"]["content"]["text"], "hi");
    assert_eq!(lines[6]["params"]["update"]["availableCommands"], json!([]));
    assert_eq!(lines[8]["params"]["update"]["title"], "First");
    assert_eq!(
        lines[8]["params"]["update"]["updatedAt"],
        "2026-11-21T00:00:00Z"
    );
    assert_eq!(
        lines[9]["params"]["update"],
        json!({"sessionUpdate":"tool_call_update","toolCallId":"t2","status":"failed"})
    );
    assert_eq!(summary.turns, 1);
    assert_eq!(summary.mode.as_deref(), Some("code"));
    assert_eq!(summary.cwd.as_deref(), Some("/w"));
    assert_eq!(summary.transcript, "User: hi\nAgent: hello\n");
}

#[test]
fn recorded_history_lines_are_replayed_byte_for_byte() {
    let line = r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"\u00e9"},"_meta":{"x":1}}}}"#;
    let mut r = Replay::new("S", ClientSupport::default(), 100);
    let mut out = vec![];
    r.emit(&rec(0, Side::Agent, line), &mut out);
    assert_eq!(out[0], format!("{line}\n"));
}

#[test]
fn compaction_is_materialized_at_its_first_position_only_for_clients_that_support_it() {
    let records = vec![
        update(
            1,
            r#"{"sessionUpdate":"compaction_update","compactionId":"c","status":"in_progress"}"#,
        ),
        update(
            2,
            r#"{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}}"#,
        ),
        update(
            3,
            r#"{"sessionUpdate":"compaction_summary_chunk","compactionId":"c","content":{"type":"text","text":"sum"}}"#,
        ),
        update(
            4,
            r#"{"sessionUpdate":"compaction_update","compactionId":"c","status":"completed"}"#,
        ),
    ];
    let (lines, _) = replay(
        &records,
        ClientSupport {
            compaction: true,
            ..Default::default()
        },
    );
    assert_eq!(kinds(&lines), ["compaction_update", "agent_message_chunk"]);
    assert_eq!(
        lines[0]["params"]["update"],
        json!({"sessionUpdate":"compaction_update","compactionId":"c","status":"completed","summary":[{"type":"text","text":"sum"}]})
    );
    let (lines, _) = replay(&records, ClientSupport::default());
    assert_eq!(kinds(&lines), ["agent_message_chunk"]);
}

#[test]
fn the_transcript_is_bounded_to_the_latest_turns() {
    let mut records = vec![];
    for i in 0..100 {
        records.push(rec(i * 2, Side::Client, &format!(r#"{{"method":"session/prompt","id":{i},"params":{{"sessionId":"S","prompt":[{{"type":"text","text":"question {i}"}}]}}}}"#)));
        records.push(update(i * 2 + 1, &format!(r#"{{"sessionUpdate":"agent_message_chunk","content":{{"type":"text","text":"answer {i}"}}}}"#)));
    }
    let mut r = Replay::new("S", ClientSupport::default(), 200);
    let mut out = vec![];
    for rec in &records {
        r.emit(rec, &mut out);
    }
    let summary = r.finish(&mut out);
    assert!(
        summary.transcript.len() <= 210,
        "{}",
        summary.transcript.len()
    );
    assert!(
        summary
            .transcript
            .ends_with("User: question 99\nAgent: answer 99\n")
    );
    assert_eq!(summary.turns, 100);
}

#[test]
fn a_long_turn_keeps_only_what_its_transcript_can_hold() {
    let limit = 1000;
    let mut records = vec![rec(
        0,
        Side::Client,
        r#"{"method":"session/prompt","id":1,"params":{"sessionId":"S","prompt":[{"type":"text","text":"tell me everything"}]}}"#,
    )];
    // 2 MB of answer in 10 000 chunks, multi-byte characters included, the last one marked.
    for i in 1..=10_000u64 {
        let text = if i == 10_000 {
            "THE END".to_string()
        } else {
            format!("é{i:0>198}")
        };
        records.push(update(i, &format!(r#"{{"sessionUpdate":"agent_message_chunk","content":{{"type":"text","text":"{text}"}}}}"#)));
    }
    let mut r = Replay::new("S", ClientSupport::default(), limit);
    let mut out = vec![];
    for rec in &records {
        r.emit(rec, &mut out);
        let held: usize = r.turns.iter().map(|t| t.user.len() + t.agent.len()).sum();
        assert!(
            held <= 2 * limit + 200,
            "the replay holds {held} bytes of turns"
        );
        assert_eq!(held, r.transcript_bytes);
    }
    let summary = r.finish(&mut out);
    assert!(
        summary.transcript.starts_with('…'),
        "{}",
        summary.transcript
    );
    assert!(summary.transcript.ends_with("THE END\n"));
    assert!(summary.transcript.len() <= limit + '…'.len_utf8());
}

fn terminal_records(output_result: &str) -> Vec<Record> {
    vec![
        update(
            1,
            r#"{"sessionUpdate":"tool_call","toolCallId":"t1","title":"make","kind":"execute","status":"in_progress","content":[{"type":"terminal","terminalId":"term-1"}],"_meta":{"x":1}}"#,
        ),
        rec(
            2,
            Side::Agent,
            r#"{"jsonrpc":"2.0","id":5,"method":"terminal/output","params":{"sessionId":"S","terminalId":"term-1"}}"#,
        ),
        rec(
            3,
            Side::Client,
            &format!(r#"{{"jsonrpc":"2.0","id":5,"result":{output_result}}}"#),
        ),
        rec(
            4,
            Side::Agent,
            r#"{"jsonrpc":"2.0","id":6,"method":"terminal/wait_for_exit","params":{"sessionId":"S","terminalId":"term-1"}}"#,
        ),
        rec(
            5,
            Side::Client,
            r#"{"jsonrpc":"2.0","id":6,"result":{"exitCode":1,"signal":null}}"#,
        ),
        update(
            6,
            r#"{"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"failed","content":[{"type":"terminal","terminalId":"term-1"}]}"#,
        ),
    ]
}

fn raw_lines(records: &[Record]) -> Vec<String> {
    let mut r = Replay::new("S", ClientSupport::default(), 10_000);
    for rec in records {
        if let Body::Message { payload, .. } = &rec.body
            && r.observes(&payload.bytes)
        {
            r.observe(rec);
        }
    }
    let mut out = vec![];
    for rec in records {
        r.emit(rec, &mut out);
    }
    r.finish(&mut out);
    out.iter()
        .map(|l| String::from_utf8(l.to_vec()).unwrap())
        .collect()
}

#[test]
fn a_terminal_is_replayed_as_its_recorded_output_and_exit_status() {
    let records = terminal_records(r#"{"output":"building\nerror: x\n","truncated":false}"#);
    let lines = raw_lines(&records);
    let text = r#"[{"type":"content","content":{"type":"text","text":"building\nerror: x\n[exit status 1]"}}]"#;
    assert_eq!(
        lines,
        [
            format!(
                r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"S","update":{{"sessionUpdate":"tool_call","toolCallId":"t1","title":"make","kind":"execute","status":"in_progress","content":{text},"_meta":{{"x":1}}}}}}}}"#
            ) + "\n",
            format!(
                r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"S","update":{{"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"failed","content":{text}}}}}}}"#
            ) + "\n",
        ]
    );
    // The exit status of a `terminal/output` answer counts too, and a signal is named.
    let records = terminal_records(
        r#"{"output":"","truncated":false,"exitStatus":{"exitCode":null,"signal":"SIGTERM"}}"#,
    );
    let (lines, _) = replay(&records[..4], ClientSupport::default());
    assert_eq!(
        lines[0]["params"]["update"]["content"][0]["content"]["text"],
        "[killed by signal SIGTERM]"
    );
}

#[test]
fn a_terminal_without_recorded_output_says_so() {
    let records = terminal_records(r#"{"output":"x","truncated":false}"#);
    let (lines, _) = replay(&records[..1], ClientSupport::default());
    assert_eq!(
        lines[0]["params"]["update"]["content"],
        json!([{"type":"content","content":{"type":"text","text":"[terminal output was not recorded]"}}])
    );
    // An exit status without output: both are said.
    let mut records = terminal_records(r#"{"output":"x","truncated":false}"#);
    records.drain(1..3);
    let (lines, _) = replay(&records, ClientSupport::default());
    assert_eq!(
        lines[1]["params"]["update"]["content"][0]["content"]["text"],
        "[terminal output was not recorded]\n[exit status 1]"
    );
    // An unanswered request, an error answer: still not recorded.
    let records = vec![
        update(
            1,
            r#"{"sessionUpdate":"tool_call","toolCallId":"t","title":"x","content":[{"type":"terminal","terminalId":"a"}]}"#,
        ),
        rec(
            2,
            Side::Agent,
            r#"{"jsonrpc":"2.0","id":1,"method":"terminal/output","params":{"sessionId":"S","terminalId":"a"}}"#,
        ),
        rec(
            3,
            Side::Client,
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"Terminal with id not found"}}"#,
        ),
    ];
    let (lines, _) = replay(&records, ClientSupport::default());
    assert_eq!(
        lines[0]["params"]["update"]["content"][0]["content"]["text"],
        "[terminal output was not recorded]"
    );
}

#[test]
fn mixed_content_keeps_its_other_items_byte_for_byte() {
    let diff = r#"{"type":"diff","path":"/w/a.rs","oldText":"a\u00e9","newText":"b","_meta":{"terminal":1}}"#;
    let text = r#"{"type": "content", "content": {"type": "text", "text": "see \"terminal\""}}"#;
    let records = vec![update(
        1,
        &format!(
            r#"{{"sessionUpdate":"tool_call_update","toolCallId":"t1","content":[{diff}, {{"type":"terminal","terminalId":"gone"}}, {text}],"rawOutput":{{"terminalId":"gone"}}}}"#
        ),
    )];
    let lines = raw_lines(&records);
    assert_eq!(
        lines,
        [format!(
            r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"S","update":{{"sessionUpdate":"tool_call_update","toolCallId":"t1","content":[{diff},{{"type":"content","content":{{"type":"text","text":"[terminal output was not recorded]"}}}},{text}],"rawOutput":{{"terminalId":"gone"}}}}}}}}"#
        ) + "\n"]
    );
    // Content without a terminal item is left alone, even if it says "terminal".
    let line = format!(
        r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"S","update":{{"sessionUpdate":"tool_call_update","toolCallId":"t1","content":[{diff}, {text}]}}}}}}"#
    );
    assert_eq!(raw_lines(&[rec(1, Side::Agent, &line)]), [line + "\n"]);
}

#[test]
fn answers_are_paired_by_id_and_1_is_not_the_string_1() {
    let ask = |seq, id: &str, terminal: &str| {
        rec(
            seq,
            Side::Agent,
            &format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"terminal/output","params":{{"sessionId":"S","terminalId":"{terminal}"}}}}"#
            ),
        )
    };
    let answer = |seq, id: &str, output: &str| {
        rec(
            seq,
            Side::Client,
            &format!(
                r#"{{"jsonrpc":"2.0","id":{id},"result":{{"output":"{output}","truncated":false}}}}"#
            ),
        )
    };
    let records = vec![
        update(
            1,
            r#"{"sessionUpdate":"tool_call","toolCallId":"t","title":"x","status":"completed","content":[{"type":"terminal","terminalId":"a"},{"type":"terminal","terminalId":"b"}]}"#,
        ),
        ask(2, "1", "a"),
        ask(3, r#""1""#, "b"),
        // The client's own request 1 and the agent's answer to it are not terminal answers.
        rec(
            4,
            Side::Client,
            r#"{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"S","prompt":[]}}"#,
        ),
        rec(
            5,
            Side::Agent,
            r#"{"jsonrpc":"2.0","id":1,"result":{"output":"wrong","truncated":false}}"#,
        ),
        answer(6, r#""1""#, "of b"),
        answer(7, "1", "of a"),
        // Output is cumulative: the latest answer wins.
        ask(8, "1", "a"),
        answer(9, "1", "of a, more"),
    ];
    let (lines, _) = replay(&records, ClientSupport::default());
    let content = &lines[0]["params"]["update"]["content"];
    assert_eq!(content[0]["content"]["text"], "of a, more");
    assert_eq!(content[1]["content"]["text"], "of b");
    assert!(!lines[0].to_string().contains("terminal\""));
}

#[test]
fn output_over_the_bound_is_cut_from_the_front() {
    let output = format!(
        "{}é{}",
        "a".repeat(10),
        "b".repeat(TERMINAL_OUTPUT_LIMIT - 1)
    );
    let records = terminal_records(&json!({"output": output, "truncated": false}).to_string());
    let (lines, _) = replay(&records[..3], ClientSupport::default());
    let text = lines[0]["params"]["update"]["content"][0]["content"]["text"]
        .as_str()
        .unwrap()
        .to_string();
    // The cut falls inside the two-byte é: it goes too.
    assert_eq!(
        text,
        format!(
            "[earlier output truncated]\n{}",
            "b".repeat(TERMINAL_OUTPUT_LIMIT - 1)
        )
    );
    // A client-truncated output says so as well.
    let records = terminal_records(r#"{"output":"tail","truncated":true}"#);
    let (lines, _) = replay(&records[..3], ClientSupport::default());
    assert_eq!(
        lines[0]["params"]["update"]["content"][0]["content"]["text"],
        "[earlier output truncated]\ntail"
    );
}

#[test]
fn odd_shaped_tool_calls_lose_their_terminals_too() {
    let records = vec![update(
        1,
        r#"{"sessionUpdate":"tool_call","toolCallId":7,"title":"x","status":"completed","content":[{"type":"terminal","terminalId":"a"}]}"#,
    )];
    let (lines, _) = replay(&records, ClientSupport::default());
    assert_eq!(
        lines[0]["params"]["update"],
        json!({"sessionUpdate":"tool_call","toolCallId":7,"title":"x","status":"completed","content":[{"type":"content","content":{"type":"text","text":"[terminal output was not recorded]"}}]})
    );
}

#[test]
fn a_v2_client_gets_v2_recorded_messages_as_recorded_and_v1_ones_translated() {
    let v2 = ClientSupport {
        v2: true,
        ..ClientSupport::default()
    };
    // Recorded under v2: the agent's echo stands for the prompt (even after a state update);
    // states are not replayed (their latest values are).
    let (out, summary) = replay(
        &[
            rec(
                1,
                Side::Client,
                r#"{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"S","prompt":[{"type":"text","text":"first task"}]}}"#,
            ),
            rec(
                2,
                Side::Agent,
                r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"available_commands_update","availableCommands":[]}}}"#,
            ),
            rec(
                2,
                Side::Agent,
                r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"user_message","messageId":"m1","content":[{"text":"[Context restored] first task","type":"text"}]}}}"#,
            ),
            rec(
                3,
                Side::Agent,
                r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"state_update","state":"running"}}}"#,
            ),
            rec(
                4,
                Side::Agent,
                r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"done"},"messageId":"a1"}}}"#,
            ),
            rec(
                5,
                Side::Agent,
                r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"state_update","state":"idle","stopReason":"end_turn"}}}"#,
            ),
        ],
        v2,
    );
    let kinds: Vec<&str> = out
        .iter()
        .map(|m| m["params"]["update"]["sessionUpdate"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "user_message",
            "agent_message_chunk",
            "available_commands_update"
        ],
        "the state last"
    );
    assert_eq!(
        out[0]["params"]["update"]["messageId"], "m1",
        "the agent's own"
    );
    assert_eq!(summary.transcript, "User: first task\nAgent: done\n");
    // Recorded under v1: the prompt becomes a user_message, chunks get a messageId per
    // run, tool_call becomes the upsert, the plan is re-shaped, modes are left out.
    let (out, _) = replay(
        &[
            rec(
                1,
                Side::Client,
                r#"{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"S","prompt":[{"type":"text","text":"go"}]}}"#,
            ),
            rec(
                2,
                Side::Agent,
                r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"a"}}}}"#,
            ),
            rec(
                3,
                Side::Agent,
                r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"b"}}}}"#,
            ),
            rec(
                4,
                Side::Agent,
                r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"tool_call","toolCallId":"t","title":"read","status":"completed"}}}"#,
            ),
            rec(
                5,
                Side::Agent,
                r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"plan","entries":[{"content":"x","status":"pending","priority":"low"}]}}}"#,
            ),
            rec(
                6,
                Side::Agent,
                r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"current_mode_update","currentModeId":"plan"}}}"#,
            ),
            rec(
                7,
                Side::Agent,
                r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"c"}}}}"#,
            ),
        ],
        v2,
    );
    let updates: Vec<&Value> = out.iter().map(|m| &m["params"]["update"]).collect();
    assert_eq!(updates.len(), 6, "{updates:?}");
    assert_eq!(
        *updates[0],
        json!({"sessionUpdate": "user_message", "messageId": "acpj-user-1", "content": [{"type": "text", "text": "go"}]})
    );
    assert_eq!(updates[1]["messageId"], "acpj-agent_message-2");
    assert_eq!(
        updates[2]["messageId"], "acpj-agent_message-2",
        "one message"
    );
    assert_eq!(updates[3]["sessionUpdate"], "tool_call_update");
    assert_eq!(updates[3]["title"], "read");
    assert_eq!(updates[4]["sessionUpdate"], "plan_update");
    assert_eq!(updates[4]["plan"]["type"], "items");
    assert_eq!(updates[4]["plan"]["entries"][0]["content"], "x");
    assert_eq!(updates[5]["messageId"], "acpj-agent_message-7", "a new run");
}

#[test]
fn a_v1_client_gets_a_v2_recorded_session_translated() {
    let (out, _) = replay(
        &[
            rec(
                1,
                Side::Client,
                r#"{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"S","prompt":[{"type":"text","text":"go"}]}}"#,
            ),
            rec(
                2,
                Side::Agent,
                r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"user_message","messageId":"m1","content":[{"text":"go","type":"text"}]}}}"#,
            ),
            rec(
                3,
                Side::Agent,
                r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"state_update","state":"running"}}}"#,
            ),
            rec(
                4,
                Side::Agent,
                r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"tool_call_update","toolCallId":"t","title":"read","status":"in_progress"}}}"#,
            ),
            rec(
                5,
                Side::Agent,
                r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"tool_call_update","toolCallId":"t","status":"completed"}}}"#,
            ),
            rec(
                6,
                Side::Agent,
                r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"plan_update","plan":{"type":"items","planId":"p","entries":[{"content":"x","status":"pending","priority":"low"}]}}}}"#,
            ),
            rec(
                7,
                Side::Agent,
                r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"ok"},"messageId":"a1"}}}"#,
            ),
            rec(
                8,
                Side::Agent,
                r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S","update":{"sessionUpdate":"state_update","state":"idle","stopReason":"end_turn"}}}"#,
            ),
        ],
        ClientSupport::default(),
    );
    let updates: Vec<&Value> = out.iter().map(|m| &m["params"]["update"]).collect();
    let kinds: Vec<&str> = updates
        .iter()
        .map(|u| u["sessionUpdate"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "user_message_chunk",
            "tool_call",
            "tool_call_update",
            "plan",
            "agent_message_chunk"
        ]
    );
    assert_eq!(updates[1]["title"], "read");
    assert_eq!(updates[3]["entries"][0]["content"], "x");
}
