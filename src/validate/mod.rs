//! The input boundary: one `tools/call`'s arguments against the tool's schema.
//!
//! The cheap path is `is_valid` alone; error details are computed only for calls that fail.
//! Coercion is guided by the validator's own type errors, so it reaches properties behind
//! `$ref`, `allOf` and nested arrays without a second schema walker.

mod compiled;
mod flat;
mod in_place;
pub(crate) mod plain_pattern;
mod report;
mod undeclared;

pub use compiled::Compiled;
pub(crate) use flat::Flat;
pub use in_place::InPlace;
pub use report::{Found, MAX_TEXT_BYTES, Report, Violation, alternatives, closest, violations};
pub use undeclared::{Judge, Shape};

/// Numbers below a bound, drawn from `seed` (xorshift): the randomized tests draw the same
/// cases on every run.
#[cfg(test)]
pub(crate) fn draws(seed: u64) -> impl FnMut(usize) -> usize {
    let mut state = seed;
    move |n| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n as u64) as usize
    }
}

use jsonschema::JsonType;
use jsonschema::error::{TypeKind, ValidationErrorKind};
use serde_json::Value;

/// Rounds of coercion: a JSON-encoded array may hold strings that need converting too.
const MAX_COERCE_ROUNDS: usize = 4;

#[derive(Debug)]
pub enum Verdict {
    Valid,
    /// Valid once some strings were converted; forward the converted arguments instead.
    /// `changed`: the arguments (top-level names) that hold a converted value; the others go
    /// upstream as they came, byte for byte.
    Coerced {
        changed: Vec<String>,
    },
    Invalid(Report),
}

/// Checks arguments and, with `coerce`, repairs strings the schema wants as another type.
/// The repair happens in place, so the caller forwards (or checks further) exactly what was
/// validated. At most `max_errors` errors are examined: a hostile schema can make them grow
/// exponentially with the instance's depth.
pub fn check(
    tool: &str,
    schema: Compiled<'_>,
    args: &mut Value,
    coerce: bool,
    max_errors: usize,
) -> Verdict {
    let validator = schema.validator;
    if validator.is_valid(args) {
        return Verdict::Valid;
    }
    // Repair reads the validator's errors too: not for a value too large to explain.
    if coerce && report::explainable(schema.alternatives, args).is_ok() {
        let mut changed: Vec<String> = Vec::new();
        for round in 0..MAX_COERCE_ROUNDS {
            let errors: Vec<_> = validator.iter_errors(args).take(max_errors).collect();
            let fixes: Vec<(String, Value)> = errors
                .iter()
                .filter_map(|e| match (e.kind(), e.instance().as_ref()) {
                    (ValidationErrorKind::Type { kind }, Value::String(s)) => {
                        convert(s, kind).map(|v| (e.instance_path().as_str().to_owned(), v))
                    }
                    _ => None,
                })
                .collect();
            if fixes.is_empty() && round == 0 {
                // Nothing to repair: these are the errors the report explains.
                let report = Report::of_errors(tool, schema.value, &errors, max_errors);
                return Verdict::Invalid(report);
            }
            drop(errors);
            if fixes.is_empty() {
                break;
            }
            for (pointer, v) in fixes {
                if let Some(slot) = args.pointer_mut(&pointer) {
                    *slot = v;
                    let top = pointer.split('/').nth(1).unwrap_or_default();
                    let top = top.replace("~1", "/").replace("~0", "~");
                    if !changed.contains(&top) {
                        changed.push(top);
                    }
                }
            }
            if validator.is_valid(args) {
                return Verdict::Coerced { changed };
            }
        }
    }
    Verdict::Invalid(Report::build(tool, schema, args, max_errors))
}

/// Converts a string to a value of one of the wanted types, when it reads as one exactly.
fn convert(s: &str, kind: &TypeKind) -> Option<Value> {
    let wants = |t: JsonType| match kind {
        TypeKind::Single(k) => *k == t,
        TypeKind::Multiple(set) => set.contains(t),
    };
    let t = s.trim();
    if wants(JsonType::Integer) || wants(JsonType::Number) {
        if let Ok(i) = t.parse::<i64>() {
            return Some(Value::from(i));
        }
        if let Ok(u) = t.parse::<u64>() {
            return Some(Value::from(u));
        }
    }
    if wants(JsonType::Number)
        && let Some(n) = t.parse::<f64>().ok().and_then(serde_json::Number::from_f64)
    {
        return Some(Value::Number(n));
    }
    if wants(JsonType::Boolean) {
        match t {
            "true" => return Some(Value::Bool(true)),
            "false" => return Some(Value::Bool(false)),
            _ => {}
        }
    }
    if wants(JsonType::Array) || wants(JsonType::Object) {
        match serde_json::from_str::<Value>(t) {
            Ok(v @ Value::Array(_)) if wants(JsonType::Array) => return Some(v),
            Ok(v @ Value::Object(_)) if wants(JsonType::Object) => return Some(v),
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{CompileSettings, Schema, compile};
    use crate::config::UnknownDialect;
    use serde_json::json;

    fn schema(v: Value) -> Schema {
        compile(
            &v.to_string(),
            &CompileSettings {
                max_schema_bytes: 1 << 20,
                validate_formats: true,
                unknown_dialect: UnknownDialect::Reject,
            },
        )
    }

    fn run(s: &Schema, mut args: Value, coerce: bool) -> (Verdict, Value) {
        let v = check(
            "t",
            s.compiled(s.validator().unwrap()),
            &mut args,
            coerce,
            32,
        );
        (v, args)
    }

    #[test]
    fn strings_become_what_the_schema_wants() {
        let s = schema(json!({
            "type": "object",
            "$defs": {"n": {"type": "integer"}},
            "properties": {
                "a": {"$ref": "#/$defs/n"},
                "flag": {"type": "boolean"},
                "tags": {"type": "array", "items": {"type": "integer"}},
                "ratio": {"type": "number"}
            }
        }));
        let (v, args) = run(
            &s,
            json!({"a": "10", "flag": "true", "tags": "[\"1\", 2]", "ratio": "0.5"}),
            true,
        );
        assert!(matches!(v, Verdict::Coerced { .. }), "{v:?}");
        assert_eq!(
            args,
            json!({"a": 10, "flag": true, "tags": [1, 2], "ratio": 0.5})
        );
    }

    #[test]
    fn strict_mode_and_unconvertible_values_are_violations() {
        let s = schema(json!({"type": "object", "properties": {"a": {"type": "integer"}}}));
        assert!(matches!(
            run(&s, json!({"a": "10"}), false).0,
            Verdict::Invalid(_)
        ));
        assert!(matches!(
            run(&s, json!({"a": "abc"}), true).0,
            Verdict::Invalid(_)
        ));
        assert!(matches!(
            run(&s, json!({"a": "1.5"}), true).0,
            Verdict::Invalid(_)
        ));
        assert!(matches!(run(&s, json!({"a": 3}), true).0, Verdict::Valid));
    }
}
