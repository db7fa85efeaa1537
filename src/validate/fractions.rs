//! The `multipleOf`s of a schema that are decimal fractions binary floating point cannot
//! hold (`0.1`, `0.01`; not `0.5`). toolgate judges a multiple in decimal, as JSON Schema
//! means it (`19.99` is a multiple of `0.01`), where a validator that divides in binary
//! floating point (Python's `jsonschema`, Ajv by default) refuses some multiples of such a
//! step: a server checking with one may refuse a call toolgate forwarded (docs/contract.md
//! §7). `toolgate check` names them.

use super::applicators::schemas;
use serde_json::Value;

/// Each place of `schema` whose `multipleOf` is such a fraction, with the fraction:
/// `/properties/price (0.01)`.
pub fn decimal_multiples(schema: &Value) -> Vec<String> {
    (schemas(schema).into_iter())
        .filter_map(|(at, members)| {
            let step = members.get("multipleOf")?.as_f64()?;
            (!in_binary(step))
                .then(|| format!("{} ({step})", if at.is_empty() { "/" } else { &at }))
        })
        .collect()
}

/// Whether the decimal `step` is written as (its shortest form) is a binary fraction, whose
/// multiples floating point divides exactly: its fraction's digits `F`, over `10^d`, are one
/// when `5^d` divides `F`.
fn in_binary(step: f64) -> bool {
    let text = step.abs().to_string();
    let Some((_, fraction)) = text.split_once('.') else {
        return true;
    };
    let (Ok(digits), Ok(d)) = (fraction.parse::<u128>(), u32::try_from(fraction.len())) else {
        return false;
    };
    5u128.checked_pow(d).is_some_and(|five| digits % five == 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_steps_binary_floating_point_cannot_hold_are_named() {
        for step in [1.0, 3.0, 0.5, 0.25, 1.5, 0.125, 2.75] {
            assert!(in_binary(step), "{step}");
        }
        for step in [0.1, 0.01, 0.05, 0.2, 1.1, 19.99, 1e-7, 1e-40] {
            assert!(!in_binary(step), "{step}");
        }
        let schema = json!({
            "type": "object", "multipleOf": 0.5,
            "properties": {
                "price": {"type": "number", "multipleOf": 0.01},
                "items": {"type": "array", "items": {"$ref": "#/$defs/q"}},
                "const": {"const": {"multipleOf": 0.1}}
            },
            "$defs": {"q": {"multipleOf": 0.1}}
        });
        assert_eq!(
            decimal_multiples(&schema),
            ["/properties/price (0.01)", "/$defs/q (0.1)"]
        );
    }
}
