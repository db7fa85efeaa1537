//! The ranges of the integer `format`s a schema generator writes for a language's integer
//! types: schemars (`rmcp`'s tools) writes a Rust `u32` as `"format": "uint32"` with only
//! `minimum: 0`, and an `i32` as `"format": "int32"` with no bound at all; OpenAPI names
//! `int32` and `int64` so. JSON Schema checks `format` only on strings, so `3000000000` for
//! an `i32` passed, and the server refused it in its own words. The copy of the schema that
//! is checked bounds each such integer as its type does.

use super::applicators::schemas;
use serde_json::Value;

/// `schema` with `minimum` and `maximum` where an integer's `format` bounds it and the schema
/// does not; `None` when no place needs one.
pub fn with_integer_bounds(schema: &Value) -> Option<Value> {
    let places: Vec<(String, i128, i128)> = (schemas(schema).into_iter())
        .filter(|(_, members)| takes_integers(members.get("type")))
        .filter_map(|(at, members)| {
            let (low, high) = range(members.get("format")?.as_str()?)?;
            let bounded = members.contains_key("minimum") && members.contains_key("maximum");
            (!bounded).then_some((at, low, high))
        })
        .collect();
    if places.is_empty() {
        return None;
    }
    let mut bounded = schema.clone();
    for (at, low, high) in places {
        if let Some(Value::Object(members)) = bounded.pointer_mut(&at) {
            members.entry("minimum").or_insert_with(|| number(low));
            members.entry("maximum").or_insert_with(|| number(high));
        }
    }
    Some(bounded)
}

/// Whether `type` names `integer`, alone or in a list.
fn takes_integers(kind: Option<&Value>) -> bool {
    match kind {
        Some(Value::String(t)) => t == "integer",
        Some(Value::Array(types)) => types.iter().any(|t| t == "integer"),
        _ => false,
    }
}

/// The range of an integer format: schemars' names for Rust's types (`uint` and `int` are
/// `usize` and `isize`, 64 bits on the platforms servers run on) and OpenAPI's `int32` and
/// `int64`. The 128-bit ones are past what a JSON number holds exactly, and left as they are.
fn range(format: &str) -> Option<(i128, i128)> {
    let bits = |signed: bool, n: u32| match signed {
        true => (-(1i128 << (n - 1)), (1i128 << (n - 1)) - 1),
        false => (0, (1i128 << n) - 1),
    };
    Some(match format {
        "int8" => bits(true, 8),
        "int16" => bits(true, 16),
        "int32" => bits(true, 32),
        "int64" | "int" => bits(true, 64),
        "uint8" => bits(false, 8),
        "uint16" => bits(false, 16),
        "uint32" => bits(false, 32),
        "uint64" | "uint" => bits(false, 64),
        _ => return None,
    })
}

/// A bound as a JSON number: every one of them fits an `i64` or a `u64`.
fn number(n: i128) -> Value {
    match i64::try_from(n) {
        Ok(n) => Value::from(n),
        Err(_) => Value::from(u64::try_from(n).unwrap_or(u64::MAX)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_integer_format_bounds_what_it_does_not_bound_already() {
        let schema = json!({
            "type": "object",
            "properties": {
                "small": {"type": "integer", "format": "int32"},
                "count": {"type": "integer", "format": "uint8", "minimum": 0, "maximum": 255},
                "pages": {"type": "integer", "format": "uint32", "minimum": 1},
                "big": {"type": ["integer", "null"], "format": "uint64", "minimum": 0},
                "id": {"type": "string", "format": "int64"},
                "huge": {"type": "integer", "format": "uint128"}
            },
            "$defs": {"Tiny": {"type": "integer", "format": "int8"}}
        });
        let bounded = with_integer_bounds(&schema).expect("four are unbounded");
        let p = &bounded["properties"];
        assert_eq!(
            p["small"],
            json!({"type": "integer", "format": "int32", "minimum": -2147483648i64, "maximum": 2147483647})
        );
        assert_eq!(p["count"], schema["properties"]["count"]);
        assert_eq!(
            p["pages"],
            json!({"type": "integer", "format": "uint32", "minimum": 1, "maximum": 4294967295u64})
        );
        assert_eq!(p["big"]["maximum"], json!(u64::MAX));
        assert_eq!(p["id"], schema["properties"]["id"], "a string");
        assert_eq!(p["huge"], schema["properties"]["huge"]);
        assert_eq!(bounded["$defs"]["Tiny"]["minimum"], -128);
        assert_eq!(
            with_integer_bounds(
                &json!({"type": "integer", "format": "uint8", "minimum": 0, "maximum": 9})
            ),
            None
        );
    }
}
