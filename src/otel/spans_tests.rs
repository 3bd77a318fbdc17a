use bytes::Bytes;

use super::*;
use crate::hex;
use crate::journal::Payload;

fn feed(lines: &[(Side, &str)], content: bool) -> Vec<Span> {
    let mut b = SpanBuilder::new("S", content);
    b.initialize(&serde_json::json!({"result": {"agentInfo": {"name": "demo", "version": "1.2"}}}));
    for (i, (from, line)) in lines.iter().enumerate() {
        b.record(&Record {
            seq: i as u64,
            unix_us: 1_000_000 + i as i64 * 1000,
            mono_us: 0,
            body: Body::Message {
                from: *from,
                payload: Payload::from_line(Bytes::from(line.to_string())),
            },
        });
    }
    b.end_run();
    b.take()
}

fn update(u: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"S","update":{u}}}}}"#
    )
}

fn session() -> Vec<(Side, String)> {
    vec![
        (Side::Client, r#"{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"S","prompt":[{"type":"text","text":"fix it"}]}}"#.into()),
        (Side::Agent, update(r#"{"sessionUpdate":"plan","entries":[{"content":"a"}]}"#)),
        (Side::Agent, update(r#"{"sessionUpdate":"tool_call","toolCallId":"c1","title":"Read a.rs","kind":"read","rawInput":{"path":"a.rs"}}"#)),
        (Side::Agent, r#"{"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{"toolCall":{"toolCallId":"c1"},"options":[]}}"#.into()),
        (Side::Client, r#"{"jsonrpc":"2.0","id":0,"result":{"outcome":{"outcome":"selected","optionId":"allow"}}}"#.into()),
        (Side::Agent, update(r#"{"sessionUpdate":"tool_call_update","toolCallId":"c1","status":"completed","rawOutput":"ok"}"#)),
        (Side::Agent, update(r#"{"sessionUpdate":"tool_call","toolCallId":"c2","title":"Run","kind":"execute"}"#)),
        (Side::Agent, update(r#"{"sessionUpdate":"tool_call_update","toolCallId":"c2","status":"failed"}"#)),
        (Side::Agent, update(r#"{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"done"}}"#)),
        (Side::Agent, update(r#"{"sessionUpdate":"usage_update","used":900,"size":200000,"cost":{"amount":0.25,"currency":"USD"}}"#)),
        (Side::Agent, r#"{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn","usage":{"inputTokens":120,"outputTokens":30,"totalTokens":150,"cachedReadTokens":100,"cachedWriteTokens":7}}}"#.into()),
        (Side::Client, r#"{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"S","prompt":[]}}"#.into()),
        (Side::Client, r#"{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"S"}}"#.into()),
        (Side::Agent, r#"{"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"boom"}}"#.into()),
        (Side::Client, r#"{"jsonrpc":"2.0","id":4,"method":"session/prompt","params":{"sessionId":"S","prompt":[]}}"#.into()),
    ]
}

fn spans(content: bool) -> Vec<Span> {
    let lines = session();
    let refs: Vec<(Side, &str)> = lines.iter().map(|(s, l)| (*s, l.as_str())).collect();
    feed(&refs, content)
}

fn str_attr<'a>(span: &'a Span, key: &str) -> &'a str {
    match span.attr(key) {
        Some(AttrValue::Str(v)) => v,
        other => panic!("{key}: {other:?}"),
    }
}

fn int_attr(span: &Span, key: &str) -> i64 {
    match span.attr(key) {
        Some(AttrValue::Int(v)) => *v,
        other => panic!("{key}: {other:?}"),
    }
}

#[test]
fn a_turn_is_an_invoke_agent_span_with_its_tool_calls_as_children() {
    let spans = spans(false);
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "execute_tool Read a.rs",
            "execute_tool Run",
            "invoke_agent demo",
            "invoke_agent demo",
            "invoke_agent demo"
        ]
    );
    let (read, run, turn) = (&spans[0], &spans[1], &spans[2]);
    assert_eq!(turn.kind, SpanKind::Client);
    assert_eq!(turn.parent, None);
    assert_eq!(turn.context, turn_ids("S", 1_000_000, "2"));
    assert_eq!((turn.start_ns, turn.end_ns), (1_000_000_000, 1_010_000_000));
    for tool in [read, run] {
        assert_eq!(tool.kind, SpanKind::Internal);
        assert_eq!(tool.parent, Some(turn.context.span_id));
        assert_eq!(tool.context.trace_id, turn.context.trace_id);
    }
    assert_eq!(read.context.span_id, tool_span_id(&turn.context, "c1"));
    assert_eq!(str_attr(read, "gen_ai.tool.call.id"), "c1");
    assert_eq!(str_attr(read, "gen_ai.tool.type"), "read");
    assert_eq!(read.status, Status::Unset);
    assert_eq!(read.events[0].name, "acp.permission");
    assert_eq!(read.events[0].attributes[2].1, s("allow"));
    assert_eq!(run.status, Status::Error("tool call c2 failed".into()));
    assert_eq!(str_attr(turn, "gen_ai.operation.name"), "invoke_agent");
    assert_eq!(str_attr(turn, "gen_ai.provider.name"), "demo");
    assert_eq!(str_attr(turn, "gen_ai.conversation.id"), "S");
    assert_eq!(str_attr(turn, "gen_ai.agent.version"), "1.2");
    assert_eq!(
        turn.attr("gen_ai.response.finish_reasons"),
        Some(&AttrValue::StrArray(vec!["end_turn".into()]))
    );
    assert_eq!(int_attr(turn, "gen_ai.usage.input_tokens"), 120);
    assert_eq!(int_attr(turn, "gen_ai.usage.output_tokens"), 30);
    assert_eq!(int_attr(turn, "gen_ai.usage.cache_read.input_tokens"), 100);
    assert_eq!(
        int_attr(turn, "gen_ai.usage.cache_creation.input_tokens"),
        7
    );
    assert_eq!(int_attr(turn, "acp.usage.context.used"), 900);
    assert_eq!(turn.events[0].name, "acp.plan");
    assert_eq!(turn.status, Status::Unset);
    // Without the content flag: no prompt, output, arguments or results.
    for span in &spans {
        for key in [
            "gen_ai.input.messages",
            "gen_ai.tool.call.arguments",
            "gen_ai.tool.call.result",
        ] {
            assert!(span.attr(key).is_none(), "{key}");
        }
    }

    let (failed, open) = (&spans[3], &spans[4]);
    assert_eq!(str_attr(failed, "error.type"), "-32603");
    assert_eq!(failed.status, Status::Error("boom".into()));
    assert_eq!(failed.events[0].name, "acp.cancel");
    assert!(failed.attr("gen_ai.response.finish_reasons").is_none());
    assert_eq!(str_attr(open, "error.type"), "unanswered");
    assert_ne!(failed.context.trace_id, turn.context.trace_id);
}

#[test]
fn ids_are_deterministic_and_content_is_opt_in() {
    let a = spans(false);
    let b = spans(true);
    let ids = |v: &[Span]| v.iter().map(|s| (s.context, s.parent)).collect::<Vec<_>>();
    assert_eq!(ids(&a), ids(&b));
    assert_eq!(
        str_attr(&b[0], "gen_ai.tool.call.arguments"),
        r#"{"path":"a.rs"}"#
    );
    assert_eq!(str_attr(&b[0], "gen_ai.tool.call.result"), r#""ok""#);
    assert!(str_attr(&b[2], "gen_ai.input.messages").contains("fix it"));
    assert!(str_attr(&b[2], "gen_ai.output.messages").contains("done"));
    assert_eq!(
        turn_ids("S", 1, "2").traceparent(),
        format!(
            "00-{}-{}-01",
            hex::encode(turn_ids("S", 1, "2").trace_id),
            hex::encode(turn_ids("S", 1, "2").span_id)
        )
    );
    assert_ne!(turn_ids("S", 1, "2"), turn_ids("T", 1, "2"));
    assert_ne!(turn_ids("S", 1, "2"), turn_ids("S", 2, "2"));
}

#[test]
fn a_v2_turn_ends_at_the_agents_idle_state_with_its_tool_calls_and_usage() {
    let lines = [
        (Side::Client, r#"{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"S","prompt":[{"type":"text","text":"fix it"}]}}"#.to_string()),
        (Side::Agent, r#"{"jsonrpc":"2.0","id":2,"result":{"messageId":"m1"}}"#.to_string()),
        (Side::Agent, update(r#"{"sessionUpdate":"state_update","state":"running"}"#)),
        (Side::Agent, update(r#"{"sessionUpdate":"tool_call_update","toolCallId":"c1","title":"Read a.rs","kind":"read","status":"in_progress"}"#)),
        (Side::Agent, update(r#"{"sessionUpdate":"tool_call_update","toolCallId":"c1","status":"completed"}"#)),
        (Side::Agent, update(r#"{"sessionUpdate":"state_update","state":"idle","stopReason":"end_turn","usage":{"inputTokens":10,"outputTokens":5,"totalTokens":15}}"#)),
    ];
    let refs: Vec<(Side, &str)> = lines.iter().map(|(s, l)| (*s, l.as_str())).collect();
    let spans = feed(&refs, false);
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names.len(), 2, "{names:?}");
    let turn = spans.iter().find(|s| s.parent.is_none()).unwrap();
    assert_eq!(
        turn.attr("gen_ai.response.finish_reasons"),
        Some(&AttrValue::StrArray(vec!["end_turn".into()]))
    );
    assert_eq!(int_attr(turn, "gen_ai.usage.output_tokens"), 5);
    assert_eq!(turn.end_ns - turn.start_ns, 5_000_000, "prompt to idle");
    assert!(turn.attr("error.type").is_none());
}

#[test]
fn a_subagent_is_an_invoke_agent_span_under_its_turn_with_its_tool_calls_under_it() {
    let child = |u: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"C","update":{u}}}}}"#
        )
    };
    let lines = [
        (Side::Client, r#"{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"S","prompt":[{"type":"text","text":"delegate"}]}}"#.to_string()),
        (Side::Agent, update(r#"{"sessionUpdate":"subagent_update","sessionId":"C","title":"Explore","state":{"state":"running"}}"#)),
        (Side::Agent, child(r#"{"sessionUpdate":"tool_call","toolCallId":"g1","title":"Grep","kind":"search"}"#)),
        (Side::Agent, child(r#"{"sessionUpdate":"tool_call_update","toolCallId":"g1","status":"completed"}"#)),
        (Side::Agent, child(r#"{"sessionUpdate":"tool_call","toolCallId":"g2","title":"Read"}"#)),
        (Side::Agent, child(r#"{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"found it"}}"#)),
        (Side::Agent, update(r#"{"sessionUpdate":"subagent_update","sessionId":"C","state":{"state":"idle","stopReason":"end_turn","usage":{"inputTokens":7,"outputTokens":3}}}"#)),
        (Side::Agent, update(r#"{"sessionUpdate":"subagent_update","sessionId":"D","title":"Left running"}"#)),
        (Side::Agent, r#"{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}"#.to_string()),
    ];
    let lines: Vec<(Side, &str)> = lines.iter().map(|(s, l)| (*s, l.as_str())).collect();
    let spans = feed(&lines, true);
    let named = |name: &str| spans.iter().find(|s| s.name == name).unwrap();
    let turn = named("invoke_agent demo");
    let sub = named("invoke_agent Explore");
    assert_eq!(sub.parent, Some(turn.context.span_id));
    assert_eq!(sub.context.trace_id, turn.context.trace_id);
    assert_eq!(sub.kind, SpanKind::Internal);
    assert_eq!(sub.status, Status::Unset);
    assert_eq!(sub.attr("gen_ai.conversation.id"), Some(&s("C")));
    assert_eq!(
        sub.attr("gen_ai.usage.input_tokens"),
        Some(&AttrValue::Int(7))
    );
    assert_eq!(
        sub.attr("gen_ai.response.finish_reasons"),
        Some(&AttrValue::StrArray(vec!["end_turn".into()]))
    );
    assert!(
        matches!(sub.attr("gen_ai.output.messages"), Some(AttrValue::Str(m)) if m.contains("found it"))
    );
    for tool in ["execute_tool Grep", "execute_tool Read"] {
        assert_eq!(named(tool).parent, Some(sub.context.span_id), "{tool}");
    }
    assert_eq!(
        turn.attr("gen_ai.usage.input_tokens"),
        None,
        "the child's tokens are its own"
    );
    let left = named("invoke_agent Left running");
    assert_eq!(left.attr("error.type"), Some(&s("unfinished")));
}
