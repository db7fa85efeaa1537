//! A Python or JavaScript literal's text read as the JSON text it means. A model that writes
//! its tool calls as Python, or a framework that passes a value on through `str()`, sends a
//! list or a dict argument as its `repr`: `"['a', 'b']"`, `"{'when': None, 'all': True}"`;
//! one that writes them as JavaScript names an object's members bare, as Node's
//! `util.inspect` writes them too: `"{ city: 'Paris', days: 3 }"`. JSON does not read
//! either, so a server refuses it as a string where it wants an array or an object.
//!
//! Only what means one thing in each language and in JSON is carried over: lists, dicts and
//! objects, strings in either quote, numbers, `True`, `False`, `None` and JSON's own words
//! for them, a name before a colon in an object (a member's name, as JavaScript reads it),
//! and a comma before a closing bracket. A line break or a tab typed into a string, which
//! JSON's reader refuses bare, is the character it is: JSON text that holds one (a model
//! writing code into an argument) is read here too. Anything else (a tuple, a set, a name
//! anywhere else, a comment, an escape JSON has no form for) is no such text, and the
//! value is left as it came.

use std::fmt::Write;

/// `text`, a Python or JavaScript literal, as JSON text; `None` where it holds anything JSON
/// cannot say alike. What it returns still has to read as JSON: a number is carried over as
/// written, and JSON's reader is the judge of it (`1_000` and `0x10` do not read).
pub(crate) fn as_json(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len() + 16);
    let mut at = 0;
    while let Some(&b) = bytes.get(at) {
        at = match b {
            b'\'' | b'"' => string(text, at, &mut out)?,
            b',' => {
                let next = text[at + 1..].trim_start().bytes().next();
                if !matches!(next, Some(b']' | b'}')) {
                    out.push(',');
                }
                at + 1
            }
            b'[' | b']' | b'{' | b'}' | b':' | b' ' | b'\t' | b'\n' | b'\r' => {
                out.push(char::from(b));
                at + 1
            }
            b'-' | b'+' | b'.' | b'0'..=b'9' | b'a'..=b'z' | b'A'..=b'Z' | b'_' | b'$' => {
                let len = (bytes[at..].iter())
                    .take_while(|b| b.is_ascii_alphanumeric() || b"_$.+-".contains(b))
                    .count();
                let w = &text[at..at + len];
                match word(w) {
                    Some(json) => out.push_str(json),
                    None if is_member_name(w, &out, &text[at + len..]) => {
                        out.push('"');
                        out.push_str(w);
                        out.push('"');
                    }
                    None => return None,
                }
                at + len
            }
            _ => return None,
        };
    }
    Some(out)
}

/// A bare word or a number as JSON writes it.
fn word(w: &str) -> Option<&str> {
    match w {
        "True" | "true" => Some("true"),
        "False" | "false" => Some("false"),
        "None" | "null" => Some("null"),
        _ if w.starts_with(|c: char| c.is_ascii_digit() || matches!(c, '-' | '.')) => Some(w),
        _ => None,
    }
}

/// Whether the bare word `w`, after what is `written` and before the text `after` it, is a
/// member's name as JavaScript writes one: a name where an object's member begins (after
/// its `{` or a comma), followed by its colon.
fn is_member_name(w: &str, written: &str, after: &str) -> bool {
    let name = w.starts_with(|c: char| c.is_ascii_alphabetic() || matches!(c, '_' | '$'))
        && w.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'$'));
    let begins = matches!(written.trim_end().bytes().last(), Some(b'{' | b','));
    name && begins && after.trim_start().starts_with(':')
}

/// The Python string opening at `start`, written to `out` as a JSON string; the place past
/// its closing quote.
fn string(text: &str, start: usize, out: &mut String) -> Option<usize> {
    let bytes = text.as_bytes();
    let quote = bytes[start];
    out.push('"');
    let mut at = start + 1;
    loop {
        let run = (bytes[at..].iter())
            .position(|&b| b == quote || b == b'\\' || b == b'"' || b < 0x20)?;
        out.push_str(&text[at..at + run]);
        at += run;
        match bytes[at] {
            b if b == quote => {
                out.push('"');
                return Some(at + 1);
            }
            b'"' => out.push_str("\\\""),
            b'\\' => {
                at += escape(text, at, quote, out)?;
                continue;
            }
            // A line break or a tab typed into a string (a model writing code or text into
            // JSON does): the character it is, as JSON must escape it.
            c => {
                let _ = write!(out, "\\u{c:04x}");
            }
        }
        at += 1;
    }
}

/// The escape at `at` (a backslash), in a string opened with `quote`, written as JSON writes
/// it; its length. `\/` is JSON's `/` in a string of JSON's quotes; in Python it is two
/// characters, so it is read in neither meaning there.
fn escape(text: &str, at: usize, quote: u8, out: &mut String) -> Option<usize> {
    let e = *text.as_bytes().get(at + 1)?;
    match e {
        b'\'' => out.push('\''),
        b'/' if quote == b'"' => out.push('/'),
        b'"' => out.push_str("\\\""),
        b'\\' | b'n' | b't' | b'r' | b'b' | b'f' | b'u' => {
            out.push('\\');
            out.push(char::from(e));
        }
        b'x' => {
            let hex = text.get(at + 2..at + 4)?;
            if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return None;
            }
            out.push_str("\\u00");
            out.push_str(hex);
            return Some(4);
        }
        _ => return None,
    }
    Some(2)
}

#[cfg(test)]
mod tests {
    use super::as_json;
    use serde_json::{Value, json};

    fn read(text: &str) -> Option<Value> {
        serde_json::from_str(&as_json(text)?).ok()
    }

    #[test]
    fn a_python_literal_reads_as_the_value_it_means() {
        for (text, value) in [
            ("['a', 'b']", json!(["a", "b"])),
            ("[1, 2.5, -3, 1e3,]", json!([1, 2.5, -3, 1000.0])),
            (
                "{'when': None, 'all': True, 'any': False}",
                json!({"when": null, "all": true, "any": false}),
            ),
            (
                r#"[{'question': "It's late?", 'choices': ['2-4', '5+']}]"#,
                json!([{"question": "It's late?", "choices": ["2-4", "5+"]}]),
            ),
            (
                r#"['say "hi"', 'it\'s', 'a\\b']"#,
                json!(["say \"hi\"", "it's", "a\\b"]),
            ),
            (
                r"['caf\xe9', '\u00e9', 'tab\tend']",
                json!(["café", "é", "tab\tend"]),
            ),
            ("['naïve', \"日本\"]", json!(["naïve", "日本"])),
            (
                "{\"code\": \"def f():\n\treturn 1\r\n\", \"url\": \"a\\/b\"}",
                json!({"code": "def f():\n\treturn 1\r\n", "url": "a/b"}),
            ),
            ("['line\nbreak', '\u{1}']", json!(["line\nbreak", "\u{1}"])),
            ("{'a': {'b': [None, ]}, }", json!({"a": {"b": [null]}})),
        ] {
            assert_eq!(read(text), Some(value), "{text}");
        }
    }

    #[test]
    fn a_javascript_object_literal_reads_as_the_object_it_means() {
        for (text, value) in [
            (
                "{ city: 'Paris', days: 3, tags: [ 'a', 'b' ] }",
                json!({"city": "Paris", "days": 3, "tags": ["a", "b"]}),
            ),
            (
                "{'all': true, 'when': null, \"any\": false}",
                json!({"all": true, "when": null, "any": false}),
            ),
            (
                "{ $ref: 1, _id: 'x', nested: { deep_1: [ { a: null } ] }, }",
                json!({"$ref": 1, "_id": "x", "nested": {"deep_1": [{"a": null}]}}),
            ),
        ] {
            assert_eq!(read(text), Some(value), "{text}");
        }
    }

    #[test]
    fn what_python_and_json_do_not_say_alike_is_not_read() {
        for text in [
            "('a', 'b')",
            "{'a', 'b'}",
            "[a, b]",
            "[float('nan')]",
            "['unclosed]",
            "['\\0']",
            "['\\U0001F600']",
            "['\\xZZ']",
            r"['a\/b']",
            "[1_000]",
            "[0x10]",
            "[inf]",
            "# [1]",
            "[1] # a comment",
            "{1: 'a'}",
            "{a: b}",
            "[a: 1]",
            "{'a': 1, b}",
            "{a-b: 1}",
            "{a.b: 1}",
            "{true: 1}",
            "{a: 1 /* one */}",
            "{a: 1} // one",
            "{a: undefined}",
        ] {
            assert_eq!(read(text), None, "{text}");
        }
    }
}
