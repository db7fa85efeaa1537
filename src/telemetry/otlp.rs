//! The OTLP/HTTP protobuf body for a batch of spans (`ExportTraceServiceRequest`,
//! opentelemetry-proto `trace/v1`), written field by field: the few messages toolgate sends do
//! not justify a code generator and its runtime.

use super::{Attr, Span, SpanKind};

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn tag(out: &mut Vec<u8>, field: u32, wire: u8) {
    varint(out, (u64::from(field) << 3) | u64::from(wire));
}

fn bytes(out: &mut Vec<u8>, field: u32, b: &[u8]) {
    tag(out, field, 2);
    varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn message(out: &mut Vec<u8>, field: u32, write: impl FnOnce(&mut Vec<u8>)) {
    let mut inner = Vec::new();
    write(&mut inner);
    bytes(out, field, &inner);
}

fn fixed64(out: &mut Vec<u8>, field: u32, v: u64) {
    tag(out, field, 1);
    out.extend_from_slice(&v.to_le_bytes());
}

fn uint(out: &mut Vec<u8>, field: u32, v: u64) {
    tag(out, field, 0);
    varint(out, v);
}

/// `KeyValue { key = 1; AnyValue value = 2 }`, `AnyValue { string_value = 1; int_value = 3 }`.
fn key_value(out: &mut Vec<u8>, field: u32, key: &str, value: &Attr) {
    message(out, field, |kv| {
        bytes(kv, 1, key.as_bytes());
        message(kv, 2, |any| match value {
            Attr::Str(s) => bytes(any, 1, s.as_bytes()),
            Attr::Int(i) => uint(any, 3, *i as u64),
        });
    });
}

/// One request body: one resource, one scope, the spans.
pub fn encode(resource: &[(String, String)], spans: &[Span]) -> Vec<u8> {
    let mut out = Vec::new();
    // ExportTraceServiceRequest.resource_spans = 1
    message(&mut out, 1, |rs| {
        // ResourceSpans.resource = 1 { attributes = 1 }
        message(rs, 1, |r| {
            for (k, v) in resource {
                key_value(r, 1, k, &Attr::Str(v.clone()));
            }
        });
        // ResourceSpans.scope_spans = 2
        message(rs, 2, |ss| {
            // ScopeSpans.scope = 1 { name = 1; version = 2 }
            message(ss, 1, |scope| {
                bytes(scope, 1, b"toolgate");
                bytes(scope, 2, env!("CARGO_PKG_VERSION").as_bytes());
            });
            for span in spans {
                // ScopeSpans.spans = 2
                message(ss, 2, |s| encode_span(s, span));
            }
        });
    });
    out
}

fn encode_span(s: &mut Vec<u8>, span: &Span) {
    bytes(s, 1, &span.trace_id);
    bytes(s, 2, &span.span_id);
    if let Some(state) = &span.trace_state {
        bytes(s, 3, state.as_bytes());
    }
    if let Some(parent) = &span.parent {
        bytes(s, 4, parent);
    }
    bytes(s, 5, span.name.as_bytes());
    uint(
        s,
        6,
        match span.kind {
            SpanKind::Server => 2,
            SpanKind::Client => 3,
        },
    );
    fixed64(s, 7, span.start);
    fixed64(s, 8, span.end);
    for (k, v) in &span.attrs {
        key_value(s, 9, k, v);
    }
    // Status { message = 2; code = 3 } (2 = error); unset otherwise.
    if span.error {
        message(s, 15, |st| uint(st, 3, 2));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_lengths_follow_the_wire_format() {
        let mut v = Vec::new();
        varint(&mut v, 300);
        assert_eq!(v, [0xac, 0x02]);
        let mut m = Vec::new();
        bytes(&mut m, 5, b"abc");
        assert_eq!(m, [0x2a, 3, b'a', b'b', b'c']);
    }
}
