//! Spans → an OTLP `ExportTraceServiceRequest`, as OTLP/JSON (hex IDs, nanoseconds as strings)
//! or as protobuf (`http/protobuf`, OTLP's default), encoded by hand: the trace proto is small
//! and its field numbers are stable. Pure.

use serde_json::{Value, json};

use super::span::{AttrValue, Attributes, Span, SpanEvent, Status};
use crate::hex;

/// The instrumentation scope's name.
const SCOPE: &str = "acp-journal";

/// The resource: `service.name` from `OTEL_SERVICE_NAME` (default `acp-journal`), then
/// `OTEL_RESOURCE_ATTRIBUTES` (`k=v,k2=v2`, percent-decoded); `env` reads a variable.
pub fn resource(env: impl Fn(&str) -> Option<String>) -> Attributes {
    let mut attrs: Attributes = Vec::new();
    for pair in env("OTEL_RESOURCE_ATTRIBUTES")
        .unwrap_or_default()
        .split(',')
    {
        if let Some((k, v)) = pair.split_once('=') {
            let (k, v) = (percent_decode(k.trim()), percent_decode(v.trim()));
            if !k.is_empty() {
                attrs.retain(|(key, _)| *key != k);
                attrs.push((k, AttrValue::Str(v)));
            }
        }
    }
    let service = env("OTEL_SERVICE_NAME")
        .filter(|s| !s.is_empty())
        .or_else(|| {
            attrs.iter().find_map(|(k, v)| match v {
                AttrValue::Str(v) if k == "service.name" => Some(v.clone()),
                _ => None,
            })
        })
        .unwrap_or_else(|| "acp-journal".into());
    attrs.retain(|(k, _)| k != "service.name");
    attrs.insert(0, ("service.name".into(), AttrValue::Str(service)));
    attrs
}

/// `%XX` escapes decoded (as in `OTEL_RESOURCE_ATTRIBUTES` and `OTEL_EXPORTER_OTLP_HEADERS`).
pub fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn json_value(v: &AttrValue) -> Value {
    match v {
        AttrValue::Str(s) => json!({"stringValue": s}),
        AttrValue::Int(i) => json!({"intValue": i.to_string()}),
        AttrValue::Double(d) => json!({"doubleValue": d}),
        AttrValue::StrArray(a) => {
            json!({"arrayValue": {"values": a.iter().map(|s| json!({"stringValue": s})).collect::<Vec<_>>()}})
        }
    }
}

fn json_attrs(attrs: &Attributes) -> Value {
    attrs
        .iter()
        .map(|(k, v)| json!({"key": k, "value": json_value(v)}))
        .collect()
}

fn json_event(e: &SpanEvent) -> Value {
    json!({"timeUnixNano": e.time_ns.to_string(), "name": e.name, "attributes": json_attrs(&e.attributes)})
}

fn json_span(span: &Span) -> Value {
    let mut v = json!({
        "traceId": hex::encode(span.context.trace_id),
        "spanId": hex::encode(span.context.span_id),
        "name": span.name,
        "kind": span.kind as i32,
        "startTimeUnixNano": span.start_ns.to_string(),
        "endTimeUnixNano": span.end_ns.to_string(),
        "attributes": json_attrs(&span.attributes),
        "events": span.events.iter().map(json_event).collect::<Vec<_>>(),
        "status": match &span.status {
            Status::Unset => json!({}),
            Status::Error(message) => json!({"code": 2, "message": message}),
        },
    });
    if let Some(parent) = span.parent {
        v["parentSpanId"] = Value::String(hex::encode(parent));
    }
    v
}

/// The OTLP/JSON `ExportTraceServiceRequest` of `spans` under `resource`.
pub fn to_json(resource: &Attributes, spans: &[Span]) -> Value {
    json!({"resourceSpans": [{
        "resource": {"attributes": json_attrs(resource)},
        "scopeSpans": [{
            "scope": {"name": SCOPE, "version": env!("CARGO_PKG_VERSION")},
            "spans": spans.iter().map(json_span).collect::<Vec<_>>(),
        }],
    }]})
}

/// Protobuf writer: the three wire types OTLP needs.
struct Pb(Vec<u8>);

impl Pb {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }
    fn tag(&mut self, field: u32, wire: u8) {
        self.varint(u64::from(field) << 3 | u64::from(wire));
    }
    fn uint(&mut self, field: u32, v: u64) {
        self.tag(field, 0);
        self.varint(v);
    }
    fn fixed64(&mut self, field: u32, v: u64) {
        self.tag(field, 1);
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn double(&mut self, field: u32, v: f64) {
        self.fixed64(field, v.to_bits());
    }
    fn bytes(&mut self, field: u32, b: &[u8]) {
        self.tag(field, 2);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
    }
    fn message(&mut self, field: u32, f: impl FnOnce(&mut Pb)) {
        let mut inner = Pb(Vec::new());
        f(&mut inner);
        self.bytes(field, &inner.0);
    }
}

/// `AnyValue`: string 1, int 3, double 4, array 5 (`ArrayValue.values` 1).
fn pb_value(pb: &mut Pb, v: &AttrValue) {
    match v {
        AttrValue::Str(s) => pb.bytes(1, s.as_bytes()),
        AttrValue::Int(i) => pb.uint(3, *i as u64),
        AttrValue::Double(d) => pb.double(4, *d),
        AttrValue::StrArray(a) => pb.message(5, |arr| {
            for s in a {
                arr.message(1, |item| item.bytes(1, s.as_bytes()));
            }
        }),
    }
}

/// Repeated `KeyValue` (key 1, value 2) as field `field`.
fn pb_attrs(pb: &mut Pb, field: u32, attrs: &Attributes) {
    for (k, v) in attrs {
        pb.message(field, |kv| {
            kv.bytes(1, k.as_bytes());
            kv.message(2, |any| pb_value(any, v));
        });
    }
}

/// `Span`: trace_id 1, span_id 2, parent_span_id 4, name 5, kind 6, start 7, end 8,
/// attributes 9, events 11 (time 1, name 2, attributes 3), status 15 (message 2, code 3).
fn pb_span(pb: &mut Pb, span: &Span) {
    pb.bytes(1, &span.context.trace_id);
    pb.bytes(2, &span.context.span_id);
    if let Some(parent) = span.parent {
        pb.bytes(4, &parent);
    }
    pb.bytes(5, span.name.as_bytes());
    pb.uint(6, span.kind as u64);
    pb.fixed64(7, span.start_ns);
    pb.fixed64(8, span.end_ns);
    pb_attrs(pb, 9, &span.attributes);
    for e in &span.events {
        pb.message(11, |ev| {
            ev.fixed64(1, e.time_ns);
            ev.bytes(2, e.name.as_bytes());
            pb_attrs(ev, 3, &e.attributes);
        });
    }
    if let Status::Error(message) = &span.status {
        pb.message(15, |st| {
            st.bytes(2, message.as_bytes());
            st.uint(3, 2);
        });
    }
}

/// The protobuf `ExportTraceServiceRequest` of `spans` under `resource`: resource_spans 1 →
/// (resource 1 → attributes 1, scope_spans 2 → (scope 1 → name 1, version 2; spans 2)).
pub fn to_protobuf(resource: &Attributes, spans: &[Span]) -> Vec<u8> {
    let mut pb = Pb(Vec::new());
    pb.message(1, |rs| {
        rs.message(1, |r| pb_attrs(r, 1, resource));
        rs.message(2, |ss| {
            ss.message(1, |scope| {
                scope.bytes(1, SCOPE.as_bytes());
                scope.bytes(2, env!("CARGO_PKG_VERSION").as_bytes());
            });
            for span in spans {
                ss.message(2, |sp| pb_span(sp, span));
            }
        });
    });
    pb.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::otel::span::{SpanContext, SpanKind};

    fn span() -> Span {
        Span {
            context: SpanContext {
                trace_id: [0xab; 16],
                span_id: [0x01; 8],
            },
            parent: Some([0x02; 8]),
            name: "execute_tool Read".into(),
            kind: SpanKind::Internal,
            start_ns: 1_700_000_000_000_000_123,
            end_ns: 1_700_000_000_000_000_456,
            attributes: vec![
                ("gen_ai.usage.input_tokens".into(), AttrValue::Int(12)),
                ("r".into(), AttrValue::StrArray(vec!["end_turn".into()])),
            ],
            events: vec![SpanEvent {
                time_ns: 5,
                name: "acp.cancel".into(),
                attributes: Vec::new(),
            }],
            status: Status::Error("failed".into()),
        }
    }

    #[test]
    fn json_follows_the_otlp_json_mapping() {
        let env = |k: &str| match k {
            "OTEL_SERVICE_NAME" => Some("svc".to_string()),
            "OTEL_RESOURCE_ATTRIBUTES" => Some("deployment.environment=dev%20box, team=x".into()),
            _ => None,
        };
        let v = to_json(&resource(env), &[span()]);
        let rs = &v["resourceSpans"][0];
        assert_eq!(
            rs["resource"]["attributes"],
            json!([
                {"key": "service.name", "value": {"stringValue": "svc"}},
                {"key": "deployment.environment", "value": {"stringValue": "dev box"}},
                {"key": "team", "value": {"stringValue": "x"}},
            ])
        );
        let s = &rs["scopeSpans"][0]["spans"][0];
        assert_eq!(s["traceId"], "abababababababababababababababab");
        assert_eq!(s["spanId"], "0101010101010101");
        assert_eq!(s["parentSpanId"], "0202020202020202");
        assert_eq!(s["kind"], 1);
        assert_eq!(s["startTimeUnixNano"], "1700000000000000123");
        assert_eq!(s["attributes"][0]["value"], json!({"intValue": "12"}));
        assert_eq!(
            s["attributes"][1]["value"],
            json!({"arrayValue": {"values": [{"stringValue": "end_turn"}]}})
        );
        assert_eq!(s["events"][0]["timeUnixNano"], "5");
        assert_eq!(s["status"], json!({"code": 2, "message": "failed"}));
        assert_eq!(
            resource(|_| None)[0].1,
            AttrValue::Str("acp-journal".into())
        );
    }

    #[test]
    fn protobuf_encodes_the_fields_by_number() {
        let bytes = to_protobuf(&Vec::new(), &[span()]);
        // resource_spans (1, length-delimited)
        assert_eq!(bytes[0], 0x0a);
        let has = |needle: &[u8]| bytes.windows(needle.len()).any(|w| w == needle);
        // trace_id: field 1, 16 bytes; parent: field 4, 8 bytes; kind 6 = 1; start fixed64 (field 7)
        assert!(has(&[&[0x0a, 16][..], &[0xab; 16]].concat()));
        assert!(has(&[&[0x22, 8][..], &[0x02; 8]].concat()));
        assert!(has(&[0x30, 1]));
        assert!(has(&[
            &[0x39][..],
            &1_700_000_000_000_000_123u64.to_le_bytes()
        ]
        .concat()));
        assert!(has(b"execute_tool Read"));
        // status: field 15 (0x7a), message "failed", code 2
        assert!(has(&[
            0x7a, 10, 0x12, 6, b'f', b'a', b'i', b'l', b'e', b'd', 0x18, 2
        ]));
    }
}
