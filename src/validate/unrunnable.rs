//! The `pattern`s of a schema that toolgate's regular-expression engine cannot run: a
//! lookaround or a backreference, which a linear-time engine has no way to match (zod writes
//! `(?!...)` into a `duration()`'s pattern). One such pattern would leave the whole schema
//! unchecked; without it, the rest is checked, and the server still checks its own pattern.

use super::applicators::{Part, applied_at};
use serde_json::Value;

/// `schema` without the `pattern`s `runs` refuses, with where each was (JSON pointers into
/// the schema); `None` when it has none. Only keywords in a schema's place are read: a
/// member named `pattern` inside a `const` or an `enum` is a value, not a keyword.
pub fn without_unrunnable(
    schema: &Value,
    runs: impl Fn(&str) -> bool,
) -> Option<(Value, Vec<String>)> {
    let mut found = Vec::new();
    let mut todo = vec![(String::new(), schema)];
    while let Some((at, s)) = todo.pop() {
        let Value::Object(members) = s else {
            continue;
        };
        if let Some(Value::String(p)) = members.get("pattern")
            && !runs(p)
        {
            found.push(at.clone());
        }
        for (keyword, v) in members {
            let place = format!("{at}/{}", escaped(keyword));
            for (_, part, child) in applied_at(keyword, v) {
                todo.push((within(&place, part), child));
            }
            // Definitions are schemas too, reached by reference.
            if let ("$defs" | "definitions", Value::Object(defs)) = (keyword.as_str(), v) {
                let named = defs
                    .iter()
                    .map(|(name, s)| (within(&place, Part::Member(name)), s));
                todo.extend(named);
            }
        }
    }
    if found.is_empty() {
        return None;
    }
    let mut without = schema.clone();
    for at in &found {
        if let Some(Value::Object(members)) = without.pointer_mut(at) {
            members.remove("pattern");
        }
    }
    found.sort();
    Some((without, found))
}

/// The pointer to `part` of the keyword's value at `place`.
fn within(place: &str, part: Part<'_>) -> String {
    match part {
        Part::Whole => place.to_owned(),
        Part::Member(name) => format!("{place}/{}", escaped(name)),
        Part::Item(i) => format!("{place}/{i}"),
    }
}

/// A name as a JSON pointer writes it.
fn escaped(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_the_patterns_that_do_not_run_are_left_out_and_only_keywords_are() {
        let schema = json!({
            "type": "object",
            "properties": {
                "every": {"type": "string", "pattern": "^P(?!.*W)", "format": "duration"},
                "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
                "a/b": {"anyOf": [{"pattern": "(a)\\\\1"}, {"type": "null"}]},
                "fixed": {"const": {"pattern": "(?=x)"}}
            },
            "$defs": {"later": {"pattern": "(?<=y)z"}}
        });
        let runs = |p: &str| !p.contains("(?") && !p.contains("\\1");
        let (without, at) = without_unrunnable(&schema, runs).expect("three do not run");
        assert_eq!(
            at,
            [
                "/$defs/later",
                "/properties/a~1b/anyOf/0",
                "/properties/every"
            ]
        );
        let mut expected = schema.clone();
        for place in &at {
            expected
                .pointer_mut(place)
                .unwrap()
                .as_object_mut()
                .unwrap()
                .remove("pattern");
        }
        assert_eq!(without, expected);
        assert_eq!(without["properties"]["code"]["pattern"], "^[A-Z]{3}$");
        assert_eq!(
            without["properties"]["fixed"]["const"]["pattern"], "(?=x)",
            "a value"
        );
        assert!(without_unrunnable(&json!({"pattern": "^a$"}), runs).is_none());
    }
}
