//! The check of a flat schema, run on the arguments' text where it lies in the request.
//!
//! Why: most tools take an object of a few scalar arguments (`book_flight`: three strings
//! with patterns, one integer with bounds). Read into parts and walked by `jsonschema`'s
//! validator, such a call's four arguments cost about 3.7k instructions; read once here,
//! each key found among the declared names and each value held to its property's few
//! constraints as it is read, they cost a fraction of that (docs/performance.md).
//!
//! The flat shape: an object schema whose only keywords are `type: "object"`,
//! `properties`, `required`, `additionalProperties` and annotations, each property of
//! `type` `string` (with `minLength`, `maxLength`, a plain `pattern`, an `enum` of strings),
//! `integer` or `number` (with integer `minimum` and `maximum`) or `boolean`, with
//! annotations. Any other keyword anywhere leaves the schema to the validator.
//!
//! The check says whether the schema accepts the arguments with each of them declared, or
//! that it refuses them, or that it cannot tell: a string with an escape, a number that is
//! not a plain unsigned integer, a repeated key, or an undeclared one that the schema does
//! not refuse. A call it cannot tell about takes the common path (parts and validator); a
//! refused one goes straight to the check by value, whose report says why (a refusal costs
//! no more than before). It refuses no call itself, and it answers only where the validator
//! answers alike: its tests and the fuzz replay hold it to that.

use super::plain_pattern::PlainPattern;
use crate::text::{Cursor, NameWord, key_first_word};
use Stop::{CannotTell, Refused};
use serde_json::{Map, Value};

/// Keywords that say nothing about what is valid.
const ANNOTATIONS: [&str; 6] = [
    "title",
    "description",
    "$comment",
    "default",
    "examples",
    "$schema",
];

/// Seen keys are bits of one word.
const MAX_PROPERTIES: usize = 64;

/// A flat schema, compiled for its check.
#[derive(Debug)]
pub(crate) struct Flat {
    properties: Box<[Property]>,
    /// The required properties, one bit each, by their place in `properties`.
    required: u64,
    /// `additionalProperties: false`: an undeclared argument is refused.
    closed: bool,
}

/// Why a read stopped short of a valid call.
enum Stop {
    Refused,
    CannotTell,
}

#[derive(Debug)]
struct Property {
    name: Box<str>,
    /// The name as a key writes it without escapes, with its closing quote; `None` for a
    /// name only an escape can write (a quote, a backslash, a control character).
    quoted: Option<Box<[u8]>>,
    /// `quoted`'s first word: a key is compared with every name by a word each.
    word: NameWord,
    kind: Kind,
}

impl Property {
    fn new(name: &str, kind: Kind) -> Property {
        let plain = !name.bytes().any(|b| matches!(b, b'"' | b'\\' | 0..=0x1f));
        let quoted: Option<Box<[u8]>> = plain.then(|| [name.as_bytes(), b"\""].concat().into());
        Property {
            name: name.into(),
            word: NameWord::of(quoted.as_deref().unwrap_or_default()),
            quoted,
            kind,
        }
    }

    /// Whether the key `key` starts with this name and its closing quote (`key` and
    /// `first` as [`key_first_word`] gives them).
    fn written_at(&self, key: &[u8], first: u64) -> bool {
        (self.quoted.as_deref()).is_some_and(|q| self.word.starts(q, key, first))
    }
}

/// A property's type and constraints.
#[derive(Debug)]
enum Kind {
    String {
        min: u64,
        max: u64,
        pattern: Option<PlainPattern>,
        choices: Option<Box<[Box<str>]>>,
    },
    /// `integer` or `number`: only plain unsigned integers are read here, and either type
    /// takes them.
    Integer {
        min: i128,
        max: i128,
    },
    Boolean,
}

impl Flat {
    /// The schema's check, when it has the flat shape.
    pub(crate) fn of(schema: &Value) -> Option<Flat> {
        let root = schema.as_object()?;
        let mut properties = Vec::new();
        for (keyword, value) in root {
            match keyword.as_str() {
                "type" => (value == "object").then_some(())?,
                "properties" => {
                    for (name, schema) in value.as_object()? {
                        let kind = Kind::of(schema.as_object()?)?;
                        properties.push(Property::new(name, kind));
                    }
                }
                // No undeclared argument passes, whatever `additionalProperties` says.
                "required" | "additionalProperties" => {}
                k if ANNOTATIONS.contains(&k) => {}
                _ => return None,
            }
        }
        if properties.len() > MAX_PROPERTIES {
            return None;
        }
        let mut required = 0;
        for name in root
            .get("required")
            .map_or(Some(&[][..]), |r| r.as_array().map(Vec::as_slice))?
        {
            let at = properties
                .iter()
                .position(|p| Some(&*p.name) == name.as_str())?;
            required |= 1 << at;
        }
        Some(Flat {
            properties: properties.into(),
            required,
            closed: root.get("additionalProperties") == Some(&Value::Bool(false)),
        })
    }

    /// Whether the schema accepts `text`, a call's arguments (JSON text), with every
    /// argument declared: `Some(true)`, or `Some(false)` when it refuses them; `None` when
    /// this check cannot tell.
    pub(crate) fn judge(&self, text: &str) -> Option<bool> {
        match self.read(&mut Cursor::new(text)) {
            Ok(()) => Some(true),
            Err(Refused) => Some(false),
            Err(CannotTell) => None,
        }
    }

    fn read(&self, c: &mut Cursor<'_>) -> Result<(), Stop> {
        c.space();
        c.eat(b'{').ok_or(CannotTell)?;
        c.space();
        let mut seen = 0u64;
        if c.peek() == Some(b'}') {
            c.at += 1;
        } else {
            loop {
                let at = self.key(c)?;
                let bit = 1 << at;
                if seen & bit != 0 {
                    return Err(CannotTell);
                }
                seen |= bit;
                c.space();
                c.eat(b':').ok_or(CannotTell)?;
                c.space();
                self.properties[at].kind.read(c)?;
                c.space();
                match c.peek() {
                    Some(b',') => c.at += 1,
                    Some(b'}') => {
                        c.at += 1;
                        break;
                    }
                    _ => return Err(CannotTell),
                }
                c.space();
            }
        }
        c.space();
        if c.at != c.text.len() {
            return Err(CannotTell);
        }
        (seen & self.required == self.required)
            .then_some(())
            .ok_or(Refused)
    }

    /// The place among the properties of the one the key here names. Each name is first
    /// compared with the key as written, a word at a time: that costs less than reading the
    /// key to its end and then looking it up.
    fn key(&self, c: &mut Cursor<'_>) -> Result<usize, Stop> {
        if let Some((key, first)) = key_first_word(&c.text.as_bytes()[c.at..]) {
            let found = self
                .properties
                .iter()
                .position(|p| p.written_at(key, first));
            if let Some(at) = found {
                c.at += 1 + self.properties[at].quoted.as_ref().map_or(0, |q| q.len());
                return Ok(at);
            }
        }
        let key = plain_string(c).ok_or(CannotTell)?;
        let found = self.properties.iter().position(|p| &*p.name == key);
        found.ok_or(if self.closed { Refused } else { CannotTell })
    }
}

impl Kind {
    fn of(schema: &Map<String, Value>) -> Option<Kind> {
        let mut kind = match schema.get("type")?.as_str()? {
            "string" => Kind::String {
                min: 0,
                max: u64::MAX,
                pattern: None,
                choices: None,
            },
            "integer" | "number" => Kind::Integer {
                min: i128::MIN,
                max: i128::MAX,
            },
            "boolean" => Kind::Boolean,
            _ => return None,
        };
        for (keyword, value) in schema {
            match (keyword.as_str(), &mut kind) {
                ("type", _) => {}
                ("minLength", Kind::String { min, .. }) => *min = value.as_u64()?,
                ("maxLength", Kind::String { max, .. }) => *max = value.as_u64()?,
                ("pattern", Kind::String { pattern, .. }) => {
                    *pattern = Some(PlainPattern::parse(value.as_str()?)?);
                }
                ("enum", Kind::String { choices, .. }) => {
                    let strings = value.as_array()?.iter().map(|c| c.as_str().map(Into::into));
                    *choices = Some(strings.collect::<Option<_>>()?);
                }
                ("minimum", Kind::Integer { min, .. }) => *min = integer(value)?,
                ("maximum", Kind::Integer { max, .. }) => *max = integer(value)?,
                (k, _) if ANNOTATIONS.contains(&k) => {}
                _ => return None,
            }
        }
        Some(kind)
    }

    /// Reads a value of this kind that meets its constraints. The value is JSON: one that
    /// starts as another kind's does is refused.
    fn read(&self, c: &mut Cursor<'_>) -> Result<(), Stop> {
        let first = c.peek().ok_or(CannotTell)?;
        let ok = match self {
            Kind::String {
                min,
                max,
                pattern,
                choices,
            } => {
                (first == b'"').then_some(()).ok_or(Refused)?;
                let s = matching_string(c, pattern.as_ref())?;
                let bounded = *min > 0 || *max < u64::MAX;
                (!bounded || (*min..=*max).contains(&(s.chars().count() as u64)))
                    && choices.as_ref().is_none_or(|c| c.iter().any(|x| **x == *s))
            }
            Kind::Integer { min, max } => {
                matches!(first, b'0'..=b'9' | b'-')
                    .then_some(())
                    .ok_or(Refused)?;
                let n = i128::from(plain_integer(c).ok_or(CannotTell)?);
                (*min..=*max).contains(&n)
            }
            Kind::Boolean => c.word("true").or_else(|| c.word("false")).is_some(),
        };
        ok.then_some(()).ok_or(Refused)
    }
}

/// A schema's bound, when it is an integer.
fn integer(value: &Value) -> Option<i128> {
    value
        .as_i64()
        .map(i128::from)
        .or_else(|| value.as_u64().map(i128::from))
}

/// A string here with no escape and no control character that `pattern` matches: what it
/// says. Its end is found by the match when it can be ([`PlainPattern::quoted_match`]).
fn matching_string<'a>(
    c: &mut Cursor<'a>,
    pattern: Option<&PlainPattern>,
) -> Result<&'a str, Stop> {
    let Some(pattern) = pattern else {
        return plain_string(c).ok_or(CannotTell);
    };
    let start = c.at + 1;
    if let Some(len) = pattern.quoted_match(&c.text.as_bytes()[start..]) {
        c.at = start + len + 1;
        return c.text.get(start..start + len).ok_or(CannotTell);
    }
    let s = plain_string(c).ok_or(CannotTell)?;
    pattern.is_match(s).then_some(s).ok_or(Refused)
}

/// A string here with no escape and no control character: what it says.
#[inline(always)]
fn plain_string<'a>(c: &mut Cursor<'a>) -> Option<&'a str> {
    c.eat(b'"')?;
    let start = c.at;
    let end = c.plain_end(start)?;
    c.at = end + 1;
    c.text.get(start..end)
}

/// A number here written as a plain unsigned integer (digits, no leading zero) that fits a
/// `u64`; any other number is not read.
fn plain_integer(c: &mut Cursor<'_>) -> Option<u64> {
    let bytes = c.text.as_bytes();
    let start = c.at;
    let mut n: u64 = 0;
    while let Some(d) = bytes.get(c.at).filter(|b| b.is_ascii_digit()) {
        n = n.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
        c.at += 1;
    }
    let digits = c.at - start;
    let plain = digits > 0
        && (bytes[start] != b'0' || digits == 1)
        && !matches!(bytes.get(c.at), Some(b'.' | b'e' | b'E' | b'-' | b'+'));
    plain.then_some(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn book_flight() -> Value {
        json!({
            "type": "object",
            "properties": {
                "origin": {"type": "string", "pattern": "^[A-Z]{3}$", "description": "IATA code"},
                "date": {"type": "string", "pattern": "^\\d{2}/\\d{2}/\\d{4}$"},
                "passengers": {"type": "integer", "minimum": 1, "maximum": 9},
                "class": {"type": "string", "enum": ["economy", "business"]},
                "name": {"type": "string", "minLength": 2, "maxLength": 4},
                "direct": {"type": "boolean"},
                "weight": {"type": "number"}
            },
            "required": ["origin", "date"],
            "additionalProperties": false
        })
    }

    #[test]
    fn flat_schemas_compile_and_others_do_not() {
        assert!(Flat::of(&book_flight()).is_some());
        assert!(Flat::of(&json!({"type": "object"})).is_some());
        for not_flat in [
            json!({"type": "object", "properties": {"a": {"type": "string", "format": "email"}}}),
            json!({"type": "object", "properties": {"a": {"type": ["string", "null"]}}}),
            json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "^(a|b)$"}}}),
            json!({"type": "object", "properties": {"a": {"type": "integer", "minimum": 1.5}}}),
            json!({"type": "object", "properties": {"a": {"type": "string", "minimum": 1}}}),
            json!({"type": "object", "properties": {"a": {"type": "string", "enum": ["x", 1]}}}),
            json!({"type": "object", "properties": {"a": {"type": "object"}}}),
            json!({"type": "object", "properties": {"a": true}}),
            json!({"type": "object", "patternProperties": {"^a": {"type": "string"}}}),
            json!({"type": "object", "required": ["undeclared"]}),
            json!({"type": "object", "minProperties": 1}),
            json!({"$ref": "#/$defs/a"}),
            json!({"type": "array"}),
        ] {
            assert!(Flat::of(&not_flat).is_none(), "{not_flat}");
        }
    }

    #[test]
    fn judges_only_where_the_schema_answers_alike() {
        let flat = Flat::of(&book_flight()).unwrap();
        let cases = [
            (Some(true), r#"{"origin":"LHR","date":"01/02/2999"}"#),
            (
                Some(true),
                r#" { "origin" : "LHR" , "date":"01/02/2999", "passengers": 9 } "#,
            ),
            (
                Some(true),
                r#"{"date":"01/02/2999","origin":"LHR","class":"business","direct":false}"#,
            ),
            (
                Some(true),
                r#"{"origin":"LHR","date":"01/02/2999","name":"Zoë","weight":0}"#,
            ),
            (Some(false), r#"{"origin":"LHR"}"#),
            (Some(false), r#"{}"#),
            (Some(false), r#"{"origin":"LH","date":"01/02/2999"}"#),
            (
                Some(false),
                r#"{"origin":"LHR","date":"01/02/2999","passengers":10}"#,
            ),
            (
                Some(false),
                r#"{"origin":"LHR","date":"01/02/2999","passengers":0}"#,
            ),
            (
                Some(false),
                r#"{"origin":"LHR","date":"01/02/2999","passengers":"2"}"#,
            ),
            (
                Some(false),
                r#"{"origin":"LHR","date":"01/02/2999","passengers":[2]}"#,
            ),
            (Some(false), r#"{"origin":3,"date":"01/02/2999"}"#),
            (
                Some(false),
                r#"{"origin":"LHR","date":"01/02/2999","class":"first"}"#,
            ),
            (
                Some(false),
                r#"{"origin":"LHR","date":"01/02/2999","name":"Zoëy!"}"#,
            ),
            (
                Some(false),
                r#"{"origin":"LHR","date":"01/02/2999","direct":null}"#,
            ),
            (
                Some(false),
                r#"{"origin":"LHR","date":"01/02/2999","direct":"true"}"#,
            ),
            (
                Some(false),
                r#"{"origin":"LHR","date":"01/02/2999","extra":1}"#,
            ),
            (None, r#"{"origin":"L\u0048R","date":"01/02/2999"}"#),
            (
                None,
                r#"{"origin":"LHR","date":"01/02/2999","passengers":2.0}"#,
            ),
            (
                None,
                r#"{"origin":"LHR","date":"01/02/2999","passengers":-1}"#,
            ),
            (None, r#"{"origin":"LHR","date":"01/02/2999","weight":1e3}"#),
            (
                None,
                r#"{"origin":"LHR","origin":"LHR","date":"01/02/2999"}"#,
            ),
            (
                None,
                r#"{"origin":"LHR","date":"01/02/2999","passengers":99999999999999999999}"#,
            ),
            (None, r#"{"origin":"LHR","date":"01/02/2999"} x"#),
            (None, r#"[]"#),
        ];
        for (judged, text) in cases {
            assert_eq!(flat.judge(text), judged, "{text}");
        }
        // Keys compared as written: names one another's prefix, longer than a word, alike in
        // their first word, or only an escape can write; a pattern that takes a quote.
        let names = Flat::of(&json!({"type": "object", "properties": {
            "a": {"type": "integer"},
            "ab": {"type": "integer"},
            "departure_a": {"type": "string", "pattern": "^[a-z]+$"},
            "departure_b": {"type": "string", "pattern": "^[a-z\"]+$"},
            "q\"uote": {"type": "boolean"}
        }, "additionalProperties": false}))
        .unwrap();
        for (judged, text) in [
            (Some(true), r#"{"ab":1,"a":2}"#),
            (Some(true), r#"{"departure_b":"xy","departure_a":"z"}"#),
            (Some(false), r#"{"departure_a":"xY"}"#),
            (Some(false), r#"{"departure_b":"x1"}"#),
            (Some(false), r#"{"departure_c":"x"}"#),
            (Some(false), r#"{"abc":1}"#),
            (None, r#"{"departure_b":"x\"y"}"#),
            (None, r#"{"departure_a":"\u0078"}"#),
            (None, r#"{"q\"uote":true}"#),
        ] {
            assert_eq!(names.judge(text), judged, "{text}");
        }
        assert_eq!(
            flat.judge(r#"{"origin":"LHRX","date":"01/02/2999"}"#),
            Some(false)
        );
        let open = Flat::of(&json!({"properties": {"a": {"type": "string"}}})).unwrap();
        assert_eq!(open.judge(r#"{"a":"x"}"#), Some(true));
        assert_eq!(
            open.judge(r#"{"a":"x","b":1}"#),
            None,
            "an undeclared argument it allows"
        );
    }

    /// Schemas and arguments made at random from the kinds and the values around their
    /// bounds: wherever the check judges, `jsonschema` judges alike.
    #[test]
    fn random_calls_are_judged_as_the_validator_judges_them() {
        let kinds = [
            json!({"type": "string"}),
            json!({"type": "string", "pattern": "^[A-Z]{3}$"}),
            json!({"type": "string", "minLength": 1, "maxLength": 3}),
            json!({"type": "string", "enum": ["a", "é", "b c"]}),
            json!({"type": "integer", "minimum": 1, "maximum": 9}),
            json!({"type": "integer", "minimum": -5}),
            json!({"type": "number", "maximum": 18446744073709551615u64}),
            json!({"type": "boolean", "description": "a flag"}),
        ];
        let values = [
            r#""ABC""#,
            r#""AB""#,
            r#""abc""#,
            r#""""#,
            r#""é""#,
            r#""a""#,
            r#""b c""#,
            r#""\u0041BC""#,
            r#""A\"B""#,
            "0",
            "1",
            "9",
            "10",
            "-1",
            "-6",
            "2.0",
            "1e2",
            "0.5",
            "18446744073709551615",
            "18446744073709551616",
            "true",
            "false",
            "null",
            "[]",
            "{}",
            r#"["ABC"]"#,
            r#"{"a":1}"#,
        ];
        let names = ["a", "b", "c", "d"];
        let mut below = crate::validate::draws(0x2545_f491_4f6c_dd1d);
        let mut judged = [0; 2];
        for _ in 0..400 {
            let mut properties = Map::new();
            let mut required = Vec::new();
            for name in &names[..1 + below(names.len())] {
                properties.insert((*name).into(), kinds[below(kinds.len())].clone());
                if below(2) == 0 {
                    required.push(json!(name));
                }
            }
            let mut schema = json!({"type": "object", "properties": properties});
            if !required.is_empty() {
                schema["required"] = required.into();
            }
            if below(2) == 0 {
                schema["additionalProperties"] = false.into();
            }
            let flat = Flat::of(&schema).unwrap_or_else(|| panic!("{schema} is flat"));
            let validator = jsonschema::validator_for(&schema).unwrap();
            for _ in 0..50 {
                let mut names: Vec<&str> = (0..below(5))
                    .map(|_| ["a", "b", "c", "d", "e"][below(5)])
                    .collect();
                let members: Vec<String> = (names.iter())
                    .map(|name| format!(r#""{name}" : {}"#, values[below(values.len())]))
                    .collect();
                let text = format!("{{{}}}", members.join(","));
                let Some(valid) = flat.judge(&text) else {
                    continue;
                };
                // A name twice is refused as unreadable, whatever the check says short of
                // passing; `serde_json` would keep the last.
                let count = names.len();
                names.sort_unstable();
                names.dedup();
                if names.len() < count {
                    assert!(!valid, "{schema} passes {text}");
                    continue;
                }
                judged[usize::from(valid)] += 1;
                let args: Value = serde_json::from_str(&text).unwrap();
                assert_eq!(valid, validator.is_valid(&args), "{schema} against {text}");
            }
        }
        assert!(judged.iter().all(|&n| n > 1000), "judged only {judged:?}");
    }
}
