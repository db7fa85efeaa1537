//! The `pattern`s of a schema that toolgate's regular-expression engine cannot run: a
//! lookaround or a backreference, which a linear-time engine has no way to match (zod writes
//! `(?!...)` into a `duration()`'s pattern). One such pattern would leave the whole schema
//! unchecked; without it, the rest is checked, and the server still checks its own pattern.
//! A `patternProperties` name that does not run is left out with its schema, and with it the
//! `additionalProperties` beside it and every `unevaluatedProperties`: the members its pattern
//! would have taken go unchecked rather than refused as undeclared.

use super::applicators::{Part, schemas, within};
use serde_json::Value;

/// `schema` without the `pattern`s and `patternProperties` names `runs` refuses, with where
/// each was (JSON pointers into the schema); `None` when it has none. Only keywords in a
/// schema's place are read: a member named `pattern` inside a `const` or an `enum` is a
/// value, not a keyword.
pub fn without_unrunnable(
    schema: &Value,
    runs: impl Fn(&str) -> bool,
) -> Option<(Value, Vec<String>)> {
    let (mut found, mut names) = (Vec::new(), Vec::new());
    for (at, members) in schemas(schema) {
        if let Some(Value::String(p)) = members.get("pattern")
            && !runs(p)
        {
            found.push(at.clone());
        }
        if let Some(Value::Object(patterns)) = members.get("patternProperties") {
            let unrunnable = patterns.keys().filter(|name| !runs(name));
            names.extend(unrunnable.map(|name| (at.clone(), name.clone())));
        }
    }
    if found.is_empty() && names.is_empty() {
        return None;
    }
    let mut without = schema.clone();
    for at in &found {
        if let Some(Value::Object(members)) = without.pointer_mut(at) {
            members.remove("pattern");
        }
    }
    for (at, name) in &names {
        if let Some(Value::Object(members)) = without.pointer_mut(at) {
            if let Some(Value::Object(patterns)) = members.get_mut("patternProperties") {
                patterns.remove(name);
            }
            members.remove("additionalProperties");
        }
        let patterns = within(at, Part::Member("patternProperties"));
        found.push(within(&patterns, Part::Member(name)));
    }
    if !names.is_empty() {
        // Which members count as evaluated changes with a name left out.
        let evaluating: Vec<String> = (schemas(&without).into_iter())
            .filter(|(_, members)| members.contains_key("unevaluatedProperties"))
            .map(|(at, _)| at)
            .collect();
        for at in evaluating {
            if let Some(Value::Object(members)) = without.pointer_mut(&at) {
                members.remove("unevaluatedProperties");
            }
        }
    }
    found.sort();
    Some((without, found))
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

    #[test]
    fn a_member_name_that_does_not_run_is_left_out_with_what_would_refuse_its_members() {
        let schema = json!({
            "type": "object",
            "properties": {
                "env": {
                    "type": "object",
                    "patternProperties": {"^(?!TMP)[A-Z]+$": {"type": "string"}, "^x-": {"type": "integer"}},
                    "additionalProperties": false
                },
                "n": {"type": "integer"}
            },
            "allOf": [{"properties": {"k": true}}],
            "unevaluatedProperties": false
        });
        let runs = |p: &str| !p.contains("(?");
        let (without, at) = without_unrunnable(&schema, runs).expect("one does not run");
        assert_eq!(at, ["/properties/env/patternProperties/^(?!TMP)[A-Z]+$"]);
        assert_eq!(
            without,
            json!({
                "type": "object",
                "properties": {
                    "env": {"type": "object", "patternProperties": {"^x-": {"type": "integer"}}},
                    "n": {"type": "integer"}
                },
                "allOf": [{"properties": {"k": true}}]
            })
        );
    }
}
