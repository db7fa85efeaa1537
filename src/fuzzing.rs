//! Entry points for the fuzz targets in `fuzz/`, shared with their replay in `cargo test`
//! (`tests/it/fuzz_replay.rs`), so CI exercises the same code without a nightly toolchain.
//! Each function must never panic, whatever the bytes; the SSE one also checks the splitter's
//! invariant (the events are the input, byte for byte), the envelope's that a refusal is
//! answered under no id but the body's, and the engine's that every answer is one a client
//! can read.
#![doc(hidden)]

use crate::catalog::{CompileSettings, compile};
use crate::config::{Config, OutputMode, UnknownDialect};
use crate::gateway::Gateway;
use crate::jsonrpc::arguments::Arguments;
use crate::jsonrpc::{self, Body};
use crate::mcp::Era;
use crate::pipeline::{self, Kind, Pending};
use crate::transport::sse::{self, Split, Splitter};
use crate::validate;
use std::sync::{Arc, OnceLock};

mod engine;
pub use engine::engine;

/// The envelope parser and both argument readers: what is read in place must be what the
/// duplicate-safe value reader reads.
pub fn envelope(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        assert!(
            jsonrpc::read_alike(text),
            "an envelope read by hand must read as serde_json reads it: {text:?}"
        );
    }
    match jsonrpc::parse_from_client(data) {
        Ok(Body::Single(m)) => {
            let _ = pipeline::classify(&m, true);
            if let Some(p) = m.raw_params() {
                arguments(p);
            }
        }
        Ok(Body::Batch(_)) => {}
        Err(rejection) => refused(data, &rejection.answer()),
    }
    if let Ok(text) = std::str::from_utf8(data)
        && let Ok(raw) = serde_json::value::RawValue::from_string(text.to_string())
    {
        arguments(&raw);
    }
    rewritten(data);
    if let Ok(text) = std::str::from_utf8(data) {
        let names = ["resultType", "task", "x"];
        assert!(
            jsonrpc::splice::result_read_alike(text, &names),
            "a result read by hand must read as serde_json reads it: {text:?}"
        );
    }
}

/// A refusal's answer is JSON-RPC errors, one or a non-empty array of them, each under no id
/// or one that the refused body names (or, where it is no JSON, holds). Ids are compared as
/// written: one such as `1e400` is JSON, answered as it came, though no `Value` holds it.
fn refused(sent: &[u8], answer: &[u8]) {
    use serde_json::value::RawValue;
    #[derive(serde::Deserialize)]
    struct Named<'a> {
        #[serde(borrow)]
        id: Option<&'a RawValue>,
    }
    #[derive(serde::Deserialize)]
    struct Error<'a> {
        #[serde(borrow)]
        id: Option<&'a RawValue>,
        error: Code,
    }
    #[derive(serde::Deserialize)]
    struct Code {
        code: i64,
    }
    let errors: Vec<Error<'_>> = match answer.first() {
        Some(b'[') => serde_json::from_slice(answer),
        _ => serde_json::from_slice(answer).map(|one| vec![one]),
    }
    .unwrap_or_else(|e| panic!("a refusal's answer is errors ({e}): {answer:?}"));
    assert!(!errors.is_empty(), "a refusal's answer is no empty array");
    assert!(
        errors.iter().all(|e| e.error.code < 0),
        "a refusal's code is JSON-RPC's: {answer:?}"
    );
    let items: Vec<&RawValue> = match serde_json::from_slice::<Vec<&RawValue>>(sent) {
        Ok(items) => items,
        Err(_) => serde_json::from_slice(sent)
            .map(|one| vec![one])
            .unwrap_or_default(),
    };
    // A body that is no JSON is answered under an id it began with, its text as written.
    let named = |id: &RawValue| match items.is_empty() {
        true => sent
            .windows(id.get().len())
            .any(|w| w == id.get().as_bytes()),
        false => items.iter().any(|item| {
            serde_json::from_str::<Named<'_>>(item.get())
                .is_ok_and(|n| n.id.is_some_and(|named| named.get() == id.get()))
        }),
    };
    for error in errors.iter().filter_map(|e| e.id) {
        assert!(
            named(error),
            "a refusal's answer, under an id the body names: {}",
            error.get()
        );
    }
}

/// A message rewritten in place reads as the message read whole with that member set.
fn rewritten(data: &[u8]) {
    use serde_json::Value;
    let Ok(message) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let seven = serde_json::value::RawValue::from_string("7".into()).expect("JSON");
    for path in [&["id"][..], &["params", "_meta", "progressToken"]] {
        fn set(v: &mut Value, path: &[&str]) -> Option<()> {
            let (first, rest) = path.split_first()?;
            let object = v.as_object_mut()?;
            match rest.is_empty() {
                true => drop(object.insert((*first).into(), 7.into())),
                false => set(
                    object
                        .entry(*first)
                        .or_insert(Value::Object(Default::default())),
                    rest,
                )?,
            }
            Some(())
        }
        let mut expected = message.clone();
        let expected = set(&mut expected, path).map(|()| expected);
        let spliced = jsonrpc::replace_at(data, path, &seven)
            .map(|out| serde_json::from_slice::<Value>(&out).expect("a spliced message is JSON"));
        assert_eq!(
            spliced,
            expected,
            "{path:?} set in place in {:?}",
            String::from_utf8_lossy(data)
        );
    }
}

fn arguments(raw: &serde_json::value::RawValue) {
    let as_value = jsonrpc::parse_arguments(raw.get());
    if let Some(in_place) = Arguments::read(raw.get()) {
        assert_eq!(
            Ok(in_place.to_map()),
            as_value,
            "arguments read in place must read as the value reader reads them"
        );
    }
}

/// The SSE splitter under the chunking the input's first byte chooses: the events and the
/// remainder must be the input, byte for byte.
pub fn sse(data: &[u8]) {
    let Some((&step, rest)) = data.split_first() else {
        return;
    };
    let step = usize::from(step % 17) + 1;
    let mut s = Splitter::new(4096);
    let mut out = Vec::with_capacity(rest.len());
    for chunk in rest.chunks(step) {
        s.push(chunk);
        while let Some(split) = s.next_event() {
            let bytes = match split {
                Split::Event(e) => {
                    let _ = sse::data(&e);
                    let _ = sse::place(&e);
                    let _ = sse::with_data(&e, b"{}");
                    e
                }
                Split::Overflow(b) => b,
            };
            out.extend_from_slice(&bytes);
        }
    }
    out.extend_from_slice(&s.finish().unwrap_or_default());
    assert_eq!(
        out, rest,
        "the splitter must give back exactly what it was given"
    );
}

/// Schema compilation and validation with report: `schema NUL arguments`.
pub fn validate(data: &[u8]) {
    let Some(nul) = data.iter().position(|b| *b == 0) else {
        return;
    };
    let (Ok(schema), Ok(args)) = (
        std::str::from_utf8(&data[..nul]),
        std::str::from_utf8(&data[nul + 1..]),
    ) else {
        return;
    };
    let settings = CompileSettings {
        max_schema_bytes: 64 * 1024,
        validate_formats: true,
        unknown_dialect: UnknownDialect::Reject,
    };
    let compiled = compile(schema, &settings);
    let Ok(v) = compiled.validator() else { return };
    let Ok(raw) = serde_json::value::RawValue::from_string(args.to_string()) else {
        return;
    };
    let Ok(map) = jsonrpc::parse_arguments(raw.get()) else {
        return;
    };
    let mut args = serde_json::Value::Object(map);
    if compiled.reaches(&args).is_err() {
        return;
    }
    if let Some(valid) = compiled.in_place().and_then(|c| c.judge_flat(raw.get())) {
        assert_eq!(
            valid,
            v.is_valid(&args),
            "the check of a flat schema judges as the validator"
        );
    }
    if let (Some(check), Some(in_place)) = (compiled.in_place(), Arguments::read(raw.get())) {
        let valid = check.validator.is_valid(in_place.root());
        // The closed form refuses more than the schema does, never less.
        if valid || !check.closed {
            assert_eq!(
                valid,
                v.is_valid(&args),
                "the check in place answers as the value's"
            );
        }
    }
    if let validate::Verdict::Invalid { report: r, .. } =
        validate::check("fuzz", compiled.compiled(v), &mut args, true, 32)
    {
        let _ = r.text();
        let _ = r.details();
    }
}

fn gateway() -> &'static Arc<Gateway> {
    static GW: OnceLock<Arc<Gateway>> = OnceLock::new();
    GW.get_or_init(|| {
        let mut cfg = Config {
            upstream: Some("http://127.0.0.1:9/mcp".into()),
            ..Config::default()
        };
        cfg.validation.output = OutputMode::Enforce;
        cfg.validation.deny_tools = vec!["denied".into()];
        Gateway::new(cfg).expect("a fixed configuration is valid")
    })
}

/// The answer rules (learn, rewrite) on one upstream message, for every kind of request.
pub fn canon(data: &[u8]) {
    let gw = gateway();
    let target = gw.targets[0].clone();
    let key = gw.scope(&target, Some(b"fuzz"), []);
    for (id, kind) in [
        (
            "1",
            Kind::Call {
                tool: "t".into(),
                outcome: "forwarded",
                retry: false,
                output: false,
                task: false,
            },
        ),
        ("\"a\"", Kind::List { first_page: true }),
        ("2", Kind::List { first_page: false }),
        (
            "3",
            Kind::Read {
                uri: Some("x://y".into()),
            },
        ),
        ("4", Kind::Other),
    ] {
        for era in [Era::Legacy, Era::Modern] {
            let pending = Pending {
                id: serde_json::value::RawValue::from_string(id.into()).ok(),
                kind: kind.clone(),
                era,
                key,
                target: target.clone(),
                client: None,
                bridged: None,
            };
            let message = bytes::Bytes::copy_from_slice(data);
            if let Some(s) = pipeline::settle_bytes(gw, &pending, message) {
                assert!(
                    matches!(jsonrpc::parse(&s.body), Ok(Body::Single(_))),
                    "what the client is sent must be one JSON-RPC message"
                );
                assert!(
                    !(s.rewritten && passes_as_it_came(&pending.kind, data)),
                    "an error no rule rewrites (a protocol signal) must pass as it came"
                );
            }
        }
    }
}

/// A call's error whose code is an integer no row of docs/contract.md §3 rewrites: a
/// protocol signal (`-32042`, `-32020..-32022`, `-32601`, …), which the client acts on.
fn passes_as_it_came(kind: &Kind, data: &[u8]) -> bool {
    let Ok(Body::Single(m)) = jsonrpc::parse(data) else {
        return false;
    };
    let rewritten = |c: i64| c >= 0 || matches!(c, -32603 | -32602 | -32019..=-32000);
    matches!(kind, Kind::Call { .. }) && m.error_code().is_some_and(|c| !rewritten(c))
}

#[cfg(test)]
mod tests {
    /// Messages of many shapes, spaced and escaped every way, made from one seed.
    struct Maker(u64);

    impl Maker {
        fn next(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n
        }

        fn space(&mut self, out: &mut String) {
            out.push_str(["", " ", "\n\t ", ""][self.next(4) as usize]);
        }

        fn value(&mut self, out: &mut String, depth: u32) {
            let kinds = if depth > 3 { 4 } else { 6 };
            match self.next(kinds) {
                0 => out.push_str(
                    ["1", "-2.5e3", "123456789012345678901234567890"][self.next(3) as usize],
                ),
                1 => {
                    out.push_str(["\"a\"", r#""q\"\\u00e9\u00e9""#, "\"\""][self.next(3) as usize])
                }
                2 => out.push_str(["true", "null"][self.next(2) as usize]),
                3 => out.push_str("[]"),
                4 => {
                    out.push('[');
                    for i in 0..self.next(3) {
                        if i > 0 {
                            out.push(',');
                        }
                        self.space(out);
                        self.value(out, depth + 1);
                    }
                    out.push(']');
                }
                _ => self.object(out, depth + 1),
            }
        }

        fn object(&mut self, out: &mut String, depth: u32) {
            const NAMES: [&str; 9] = [
                r#""id""#,
                r#""params""#,
                r#""_meta""#,
                r#""progressToken""#,
                r#""\u0069d""#,
                r#""x""#,
                r#""result""#,
                r#""resultType""#,
                r#""task""#,
            ];
            out.push('{');
            for i in 0..self.next(4) {
                if i > 0 {
                    out.push(',');
                }
                self.space(out);
                out.push_str(NAMES[self.next(9) as usize]);
                self.space(out);
                out.push(':');
                self.space(out);
                self.value(out, depth);
            }
            self.space(out);
            out.push('}');
        }
    }

    #[test]
    fn generated_messages_read_alike_every_way() {
        let mut maker = Maker(0x2545_f491_4f6c_dd1d);
        for _ in 0..20_000 {
            let mut message = String::new();
            maker.object(&mut message, 0);
            super::envelope(message.as_bytes());
        }
    }
}
