//! Validation cost per call: the schemas of the demo server (small, typical, with refs and
//! arrays) and a large generated one, valid and invalid arguments. "flat" is a valid call's
//! whole check where the schema has the flat shape most tools have (its arguments' text
//! checked as it is read, `validate::flat`); "in place" is the common path of the other
//! schemas (its arguments read where they lie and validated there); "check" is the check of
//! a value, the path of calls that are refused or coerced, with the argument parse that
//! guards against duplicate keys and the walk for undeclared arguments beside it (zero where
//! the schema's closed form settles it; the "open" row is the typical schema as most servers
//! list it, without). Run with `cargo bench --bench validation`.

use serde_json::{Value, json};
use std::hint::black_box;
use std::time::Instant;
use toolgate::bench::{Arguments, CompileSettings, Judge, Verdict, compile, parse_arguments};
use toolgate::config::UnknownDialect;

fn per_op(iters: u32, mut f: impl FnMut()) -> f64 {
    for _ in 0..iters / 10 {
        f();
    }
    let t = Instant::now();
    for _ in 0..iters {
        f();
    }
    t.elapsed().as_nanos() as f64 / iters as f64
}

fn main() {
    let settings = CompileSettings {
        max_schema_bytes: 1 << 24,
        validate_formats: true,
        unknown_dialect: UnknownDialect::Reject,
    };
    let mut large_props = serde_json::Map::new();
    let mut large_args = serde_json::Map::new();
    for i in 0..50 {
        large_props.insert(
            format!("field{i}"),
            json!({"type": "string", "maxLength": 64, "description": "a field"}),
        );
        large_args.insert(format!("field{i}"), json!("value"));
    }
    let cases: Vec<(&str, Value, Value, Value)> = vec![
        (
            "small (add)",
            json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}),
            json!({"a": 1, "b": 2}),
            json!({"a": "x", "b": 2}),
        ),
        (
            "typical (book_flight)",
            json!({"type": "object", "properties": {
                "origin": {"type": "string", "pattern": "^[A-Z]{3}$"},
                "destination": {"type": "string", "pattern": "^[A-Z]{3}$"},
                "departureDate": {"type": "string", "pattern": "^\\d{2}/\\d{2}/\\d{4}$"},
                "passengers": {"type": "integer", "minimum": 1, "maximum": 9}},
                "required": ["origin", "destination", "departureDate"], "additionalProperties": false}),
            json!({"origin": "LHR", "destination": "JFK", "departureDate": "01/02/2999", "passengers": 2}),
            json!({"origin": "LHR", "destination": "jfk", "departureDate": "2999-02-01", "passengers": 12}),
        ),
        (
            "typical, open",
            json!({"type": "object", "properties": {
                "origin": {"type": "string", "pattern": "^[A-Z]{3}$"},
                "destination": {"type": "string", "pattern": "^[A-Z]{3}$"},
                "departureDate": {"type": "string", "pattern": "^\\d{2}/\\d{2}/\\d{4}$"},
                "passengers": {"type": "integer", "minimum": 1, "maximum": 9}},
                "required": ["origin", "destination", "departureDate"]}),
            json!({"origin": "LHR", "destination": "JFK", "departureDate": "01/02/2999", "passengers": 2}),
            json!({"origin": "LHR", "destination": "jfk", "departureDate": "2999-02-01", "passenger": 12}),
        ),
        (
            "refs+arrays (plan_trip)",
            json!({"type": "object", "$defs": {"t": {"type": "object", "properties": {"name": {"type": "string", "minLength": 1}, "age": {"type": "integer", "minimum": 0}, "class": {"enum": ["economy", "business", "first"]}}, "required": ["name", "age"], "additionalProperties": false}},
                "properties": {"travellers": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/t"}}, "mode": {"enum": ["air", "rail", "road"]}}, "required": ["travellers", "mode"]}),
            json!({"mode": "air", "travellers": [{"name": "Ada", "age": 36, "class": "first"}, {"name": "Alan", "age": 41}]}),
            json!({"mode": "boat", "travellers": [{"name": "", "age": -1}]}),
        ),
        (
            "large (50 properties)",
            json!({"type": "object", "properties": large_props, "additionalProperties": false}),
            Value::Object(large_args.clone()),
            {
                let mut a = large_args.clone();
                a.insert("field7".into(), json!(7));
                Value::Object(a)
            },
        ),
    ];
    println!(
        "{:<24} {:>12} {:>12} {:>8} {:>14} {:>12} {:>14} {:>14} {:>14}",
        "schema",
        "compile µs",
        "is_valid ns",
        "flat ns",
        "in place ns",
        "check ns",
        "undeclared ns",
        "parse args ns",
        "invalid+report µs"
    );
    for (name, schema, valid, invalid) in cases {
        let raw = schema.to_string();
        let t = Instant::now();
        let compiled = compile(&raw, &settings);
        // Validators are made on first use: asked for here, they count in the compile time.
        let v = compiled.validator().expect("compiles");
        let in_place = compiled.in_place().expect("compiles in place");
        let compile_us = t.elapsed().as_nanos() as f64 / 1000.0;
        let is_valid = per_op(200_000, || {
            black_box(v.is_valid(black_box(&valid)));
        });
        // What a valid call costs on the guard's path: its arguments read in place and
        // checked there (against the closed form, where there is one).
        let valid_raw = serde_json::value::RawValue::from_string(valid.to_string()).unwrap();
        let settled = in_place.closed;
        // Schemas of another shape have no flat check (shown as "-").
        let flat = in_place.judge_flat(valid_raw.get()).map(|accepted| {
            assert!(accepted, "{name}: the flat check accepts the valid call");
            per_op(200_000, || {
                black_box(in_place.judge_flat(black_box(valid_raw.get())));
            })
        });
        // Objects past the in-place reader's bound are read as values (shown as "-").
        let checked_in_place = Arguments::read(valid_raw.get()).map(|_| {
            per_op(200_000, || {
                let args = Arguments::read(black_box(valid_raw.get())).unwrap();
                assert!(in_place.validator.is_valid(args.root()));
            })
        });
        let checked = per_op(200_000, || {
            let mut args = black_box(&valid).clone();
            black_box(toolgate::bench::check(
                name,
                compiled.compiled(v),
                &mut args,
                true,
                32,
            ));
        });
        let clone = per_op(200_000, || {
            black_box(black_box(&valid).clone());
        });
        let undeclared = match (&compiled.shape, settled) {
            (Some(shape), false) => per_op(200_000, || {
                let found = shape.undeclared(black_box(&valid), Judge::Typos, 32, &[]);
                assert!(found.list.is_empty());
                black_box(found);
            }),
            _ => 0.0,
        };
        let parse = per_op(100_000, || {
            black_box(parse_arguments(black_box(valid_raw.get())).unwrap());
        });
        let report = per_op(20_000, || {
            let mut args = invalid.clone();
            let verdict = toolgate::bench::check(name, compiled.compiled(v), &mut args, true, 32);
            assert!(matches!(verdict, Verdict::Invalid { .. }));
            if let Verdict::Invalid { report: r, .. } = verdict {
                black_box(r.text());
            }
        });
        println!(
            "{name:<24} {compile_us:>12.1} {is_valid:>12.0} {:>8} {:>14} {:>12.0} {undeclared:>14.0} {parse:>14.0} {:>14.1}",
            flat.map_or("-".into(), |ns| format!("{ns:.0}")),
            checked_in_place.map_or("-".into(), |ns| format!("{ns:.0}")),
            checked - clone,
            report / 1000.0
        );
    }
    large_arguments();
}

/// The argument readers on 4 MB of arguments: one long string per element, against the
/// worst case of the in-place reader's duplicate check (objects of 32 keys of one length,
/// each differing only at its end).
fn large_arguments() {
    let key = |i: usize| format!("{}{i:02}", "k".repeat(4000));
    let object = || {
        let members: Vec<String> = (0..32).map(|i| format!("\"{}\":1", key(i))).collect();
        format!("{{{}}}", members.join(","))
    };
    let keyed = format!("{{\"a\":[{}]}}", vec![object(); 32].join(","));
    let string = format!("\"{}\"", "k".repeat(4002 * 32 + 40));
    let plain = format!("{{\"a\":[{}]}}", vec![string; 32].join(","));
    println!(
        "\n{:<32} {:>10} {:>14} {:>14}",
        "4 MB of arguments", "bytes", "in place µs", "as value µs"
    );
    for (name, text) in [("long strings", plain), ("objects of 32 long keys", keyed)] {
        let raw = serde_json::value::RawValue::from_string(text.clone()).unwrap();
        let in_place = per_op(20, || {
            black_box(Arguments::read(black_box(&text)).unwrap());
        });
        let as_value = per_op(20, || {
            black_box(parse_arguments(black_box(raw.get())).unwrap());
        });
        println!(
            "{name:<32} {:>10} {:>14.0} {:>14.0}",
            text.len(),
            in_place / 1000.0,
            as_value / 1000.0
        );
    }
}
