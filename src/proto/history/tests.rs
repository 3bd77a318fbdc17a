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

/// The kinds a replay sends for `kind` as the table classes it for `support`, when the kind
/// is the only update of the history (a prompt first).
fn expected(kind: &str, support: ClientSupport) -> Vec<&'static str> {
    use crate::acp::updates::{Need, Replay as R, kind as table};
    let k = table(kind).unwrap();
    let has = |need: Option<Need>| need.is_none_or(|n| support.has(n));
    // What v2 makes of v1's shapes.
    let as_sent = |kind: &str| -> &'static str {
        let k = table(kind).unwrap().name;
        match (support.v2, k) {
            (true, "tool_call") => "tool_call_update",
            (true, "plan") => "plan_update",
            _ => k,
        }
    };
    match k.replay {
        R::History(need) if has(need) => vec![as_sent(kind)],
        R::History(Some(Need::Plan)) if kind == "plan_update" && !support.v2 => vec!["plan"],
        R::History(_) => vec![],
        // A v2 client has no modes.
        R::Latest(_) if kind == "current_mode_update" && support.v2 => vec![],
        R::Latest(need) if has(need) => vec![as_sent(kind)],
        R::Latest(_) => vec![],
        // A compaction's first update, whichever its kind, is where it is materialized.
        R::Materialized if support.has(Need::Compaction) => vec!["compaction_update"],
        R::Materialized => vec![],
        R::Subagent(need) if support.has(need) => vec![as_sent(kind)],
        // The parent's view: the tool call standing for the child (closed `failed` at the end,
        // as any call the history left running, unless it ended); a message from a child the
        // client never saw is nothing.
        R::Subagent(_) => {
            let call = if support.v2 {
                "tool_call_update"
            } else {
                "tool_call"
            };
            match kind {
                "subagent_update" | "subagent_spawned" => vec![call, "tool_call_update"],
                "subagent_state_update" => vec![call],
                _ => vec![],
            }
        }
        R::Cursors | R::Never => vec![],
    }
}

#[test]
fn every_update_kind_replays_as_the_table_says() {
    let air = json!({"_meta": {"jetbrains": {"air": {"version": 1,
        "capabilities": ["nativeSubagentSessions", "asyncTasks"]}}}});
    let supports = [
        ("a v1 client", ClientSupport::default()),
        (
            "a v1 client that declared everything",
            ClientSupport::from_capabilities(&json!({"subagents": {}, "plan": {},
                "session": {"compaction": {}, "notices": {}, "cursors": {}, "promptSuggestions": {}}})),
        ),
        ("AIR", ClientSupport::from_capabilities(&air)),
        (
            "a v2 client",
            ClientSupport {
                v2: true,
                ..Default::default()
            },
        ),
    ];
    let prompt = rec(
        0,
        Side::Client,
        r#"{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"S","prompt":[{"type":"text","text":"go"}]}}"#,
    );
    for kind in crate::acp::updates::KINDS {
        for (who, support) in &supports {
            let records = [
                prompt.clone(),
                update(1, &crate::acp::updates::sample(kind.name).to_string()),
            ];
            let (lines, summary) = replay(&records, *support);
            // Leave out the prompt's own lines (their `messageId`s are made up).
            let sent: Vec<String> = lines
                .iter()
                .filter(|l| {
                    !l["params"]["update"]["messageId"]
                        .as_str()
                        .is_some_and(|m| m.starts_with("acpj-user-"))
                })
                .map(|l| {
                    l["params"]["update"]["sessionUpdate"]
                        .as_str()
                        .unwrap()
                        .to_string()
                })
                .collect();
            assert_eq!(
                sent,
                expected(kind.name, *support),
                "{} to {who}",
                kind.name
            );
            let cursors = summary.cursors.is_some();
            assert_eq!(
                cursors,
                kind.name == "cursor_update" && support.cursors,
                "{} to {who}: cursors kept for after the bring-up",
                kind.name
            );
        }
    }
}

fn child_update(seq: u64, child: &str, u: &str) -> Record {
    rec(
        seq,
        Side::Agent,
        &format!(
            r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"{child}","update":{u}}}}}"#
        ),
    )
}

/// A turn that delegates to a subagent: its announcement, its prompt and work under its own
/// ID, its answer to the parent, its end.
fn delegating_turn() -> Vec<Record> {
    vec![
        rec(
            0,
            Side::Client,
            r#"{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"S","prompt":[{"type":"text","text":"find it"}]}}"#,
        ),
        update(
            1,
            r#"{"sessionUpdate":"subagent_update","sessionId":"C","title":"Explore","description":"explorer","state":{"state":"running"}}"#,
        ),
        child_update(
            2,
            "C",
            r#"{"sessionUpdate":"session_message","messageId":"toolu_1","senderSessionId":"S","recipientSessionId":"C","content":[{"type":"text","text":"look for it"}]}"#,
        ),
        child_update(
            3,
            "C",
            r#"{"sessionUpdate":"tool_call","toolCallId":"t1","title":"Grep","status":"in_progress"}"#,
        ),
        child_update(
            4,
            "C",
            r#"{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"it is in a.rs"}}"#,
        ),
        update(
            5,
            r#"{"sessionUpdate":"session_message","messageId":"toolu_1:reply","senderSessionId":"C","recipientSessionId":"S","content":[{"type":"text","text":"it is in a.rs"}]}"#,
        ),
        update(
            6,
            r#"{"sessionUpdate":"subagent_update","sessionId":"C","state":{"state":"idle","stopReason":"end_turn"}}"#,
        ),
        update(
            7,
            r#"{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"done"}}"#,
        ),
    ]
}

fn sessions_and_kinds(lines: &[Value]) -> Vec<String> {
    lines
        .iter()
        .map(|l| {
            format!(
                "{} {}",
                l["params"]["sessionId"].as_str().unwrap(),
                l["params"]["update"]["sessionUpdate"].as_str().unwrap()
            )
        })
        .collect()
}

#[test]
fn a_subagent_is_replayed_under_its_id_to_a_client_that_knows_subagents_and_collapsed_for_another()
{
    let records = delegating_turn();
    let aware = ClientSupport {
        subagents: true,
        ..Default::default()
    };
    let (lines, summary) = replay(&records, aware);
    assert_eq!(
        sessions_and_kinds(&lines),
        [
            "S user_message_chunk",
            "S subagent_update",
            "C session_message",
            "C tool_call",
            "C agent_message_chunk",
            "S session_message",
            "S subagent_update",
            "S agent_message_chunk",
            "C tool_call_update",
        ]
    );
    for (line, record) in lines[1..8].iter().zip(&records[1..]) {
        let Body::Message { payload, .. } = &record.body else {
            unreachable!()
        };
        assert_eq!(
            line,
            &serde_json::from_slice::<Value>(&payload.bytes).unwrap()
        );
    }
    assert_eq!(
        lines[8]["params"]["update"],
        json!({"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"failed"}),
        "the child's tool call a crash left open is closed in the child"
    );
    assert_eq!(summary.children, [("C".to_string(), "S".to_string())]);
    assert_eq!(
        summary.transcript, "User: find it\nAgent: done\n",
        "the child's words are not the parent's"
    );

    let (lines, _) = replay(&records, ClientSupport::default());
    assert_eq!(
        sessions_and_kinds(&lines),
        [
            "S user_message_chunk",
            "S tool_call",
            "S tool_call_update",
            "S tool_call_update",
            "S agent_message_chunk",
        ],
        "the parent's view only"
    );
    let call = &lines[1]["params"]["update"];
    assert_eq!(
        (&call["toolCallId"], &call["title"], &call["status"]),
        (
            &json!("acpj-subagent-C"),
            &json!("Explore"),
            &json!("in_progress")
        )
    );
    assert_eq!(
        lines[2]["params"]["update"]["content"][0]["content"]["text"],
        "it is in a.rs"
    );
    assert_eq!(lines[3]["params"]["update"]["status"], "completed");

    let v2 = ClientSupport {
        v2: true,
        ..Default::default()
    };
    let (lines, _) = replay(&records, v2);
    assert_eq!(
        sessions_and_kinds(&lines),
        [
            "S user_message",
            "S subagent_update",
            "C session_message",
            "C tool_call_update",
            "C agent_message_chunk",
            "S session_message",
            "S subagent_update",
            "S agent_message_chunk",
            "C tool_call_update",
        ],
        "v2 has subagents: the child's v1 lines in v2's shapes"
    );
    assert!(lines[4]["params"]["update"]["messageId"].is_string());
}

#[test]
fn a_tail_replay_leaves_the_earlier_turns_out_keeps_their_state_and_says_so() {
    let mut records = vec![update(
        0,
        r#"{"sessionUpdate":"current_mode_update","currentModeId":"plan"}"#,
    )];
    for turn in 1..=5u64 {
        records.push(rec(
            turn * 10,
            Side::Client,
            &format!(
                r#"{{"jsonrpc":"2.0","id":{turn},"method":"session/prompt","params":{{"sessionId":"S","prompt":[{{"type":"text","text":"q{turn}"}}]}}}}"#
            ),
        ));
        records.push(update(
            turn * 10 + 1,
            &format!(r#"{{"sessionUpdate":"agent_message_chunk","content":{{"type":"text","text":"a{turn}"}}}}"#),
        ));
        if turn == 2 {
            // Still at work when the tail starts: announced again there.
            records.push(update(
                turn * 10 + 2,
                r#"{"sessionUpdate":"subagent_update","sessionId":"C","title":"Long","state":{"state":"running"}}"#,
            ));
            records.push(update(
                turn * 10 + 3,
                r#"{"sessionUpdate":"tool_call","toolCallId":"old","title":"Old","status":"in_progress"}"#,
            ));
        }
    }
    let texts = |lines: &[Value]| -> Vec<String> {
        lines
            .iter()
            .filter_map(|l| {
                let u = &l["params"]["update"];
                u["content"]["text"]
                    .as_str()
                    .or(u["title"].as_str())
                    .or(u["currentModeId"].as_str())
                    .map(|t| format!("{} {t}", u["sessionUpdate"].as_str().unwrap()))
            })
            .collect()
    };
    let tail = ClientSupport {
        tail: Some(2),
        subagents: true,
        ..Default::default()
    };
    let (lines, summary) = replay(&records, tail);
    assert_eq!(
        texts(&lines),
        [
            "agent_message_chunk [acp-journal replayed the last 2 of 5 turns: 3 earlier turns (8 updates) left out]",
            "subagent_update Long",
            "user_message_chunk q4",
            "agent_message_chunk a4",
            "user_message_chunk q5",
            "agent_message_chunk a5",
            "current_mode_update plan",
        ],
        "the state of the part left out is kept; its open tool call is not the client's"
    );
    assert_eq!(
        lines[0]["params"]["update"]["_meta"]["acpJournal"]["tail"],
        json!({"turns": 3, "updates": 8})
    );
    assert_eq!(summary.turns, 5, "the transcript has every turn");
    assert!(summary.transcript.contains("q1"));

    let notices = ClientSupport {
        tail: Some(2),
        notices: true,
        ..Default::default()
    };
    let (lines, _) = replay(&records, notices);
    assert_eq!(lines[0]["params"]["update"]["sessionUpdate"], "notice");
    assert_eq!(
        kinds(&lines)[1],
        "tool_call",
        "the parent's view of the child still at work"
    );

    let all = ClientSupport {
        tail: Some(9),
        ..Default::default()
    };
    assert_eq!(
        replay(&records, all).0,
        replay(&records, ClientSupport::default()).0,
        "a tail longer than the session is the whole of it"
    );
}

#[test]
fn cursors_are_kept_only_for_the_agent_session_that_made_them() {
    let cursor = |seq, id: &str| {
        update(
            seq,
            &format!(
                r#"{{"sessionUpdate":"cursor_update","cursorId":"{id}","anchor":{{"type":"tool_call","toolCallId":"t"}}}}"#
            ),
        )
    };
    let support = ClientSupport {
        cursors: true,
        ..Default::default()
    };
    let patch = update(
        3,
        r#"{"sessionUpdate":"cursor_update","cursorId":"a","capabilities":{"fork":{}}}"#,
    );
    let (_, summary) = replay(&[cursor(1, "a"), cursor(2, "b"), patch], support);
    let cursors = summary.cursors.unwrap();
    assert_eq!(cursors.agent_session, "S");
    assert_eq!(cursors.updates.len(), 2);
    assert_eq!(cursors.updates[0]["capabilities"], json!({"fork": {}}));
    assert_eq!(cursors.updates[0]["anchor"]["type"], "tool_call", "merged");
    let mapped = Record {
        seq: 4,
        unix_us: 0,
        mono_us: 4,
        body: Body::Event(Event::SessionMapped {
            agent_session: "U".into(),
        }),
    };
    let (_, summary) = replay(&[cursor(1, "a"), mapped.clone()], support);
    assert_eq!(
        summary.cursors, None,
        "the agent session that made it is gone"
    );
    let (_, summary) = replay(&[mapped, cursor(5, "c")], support);
    assert_eq!(summary.cursors.unwrap().agent_session, "U");
}
