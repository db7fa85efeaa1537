//! A value nearly as its `format` writes it, written so: the same value in the text every
//! reader of the format takes; and a date-time with an offset as the pattern beside its format
//! takes it, in UTC. Coercion sends it in place of what came; a refusal in strict mode names
//! it.

use jsonschema::ValidationError;
use jsonschema::error::ValidationErrorKind;
use serde_json::{Value, json};
use std::sync::LazyLock;

/// `s` as `format` writes it, where it is not so written and can be without changing what it
/// names: a date-time or a time with its seconds left out ([`super::local_time::canonical`]);
/// a URI with a space or a character outside ASCII after its authority, percent-encoded as a
/// browser, `new URL()` (zod's `url()`) and Pydantic's `AnyUrl` encode it; a UUID without
/// its hyphens, in braces or as a URN, as Pydantic's `UUID` reads it.
pub(super) fn as_written(s: &str, format: &str) -> Option<String> {
    match format {
        "date-time" | "time" => super::local_time::canonical(s, format),
        "uri" | "uri-reference" => encoded(s, format),
        "uuid" => hyphenated(s),
        _ => None,
    }
}

/// The same instant in UTC, where the pattern `e` refused a date-time with another offset and
/// takes it so.
pub(super) fn utc_taken(e: &ValidationError<'_>) -> Option<String> {
    let ValidationErrorKind::Pattern { pattern } = e.kind() else {
        return None;
    };
    let given = e.instance().as_str()?;
    let utc = super::local_time::in_utc(given).filter(|utc| utc != given)?;
    takes(pattern, &utc).then_some(utc)
}

/// Whether `pattern` matches `s`; `false` for a pattern too large for a bounded engine. The
/// last pattern is kept compiled on its thread: a refusal of many date-times asks of one
/// pattern many times (zod's takes a quarter of a millisecond to compile).
pub(super) fn takes(pattern: &str, s: &str) -> bool {
    type Last = Option<(String, Option<regex::Regex>)>;
    thread_local!(static LAST: std::cell::RefCell<Last> = const { std::cell::RefCell::new(None) });
    LAST.with_borrow_mut(|last| {
        if last.as_ref().is_none_or(|(p, _)| p != pattern) {
            let engine = regex::RegexBuilder::new(pattern)
                .size_limit(1 << 20)
                .build();
            *last = Some((pattern.to_owned(), engine.ok()));
        }
        let engine = last.as_ref().and_then(|(_, engine)| engine.as_ref());
        engine.is_some_and(|engine| engine.is_match(s))
    })
}

/// A UUID's 32 hexadecimal digits in their groups of 8, 4, 4, 4 and 12, from the same digits
/// written without hyphens, in braces (`{…}`) or after `urn:uuid:`.
fn hyphenated(s: &str) -> Option<String> {
    let bare = (s.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
        .or_else(|| s.strip_prefix("urn:uuid:"))
        .unwrap_or(s);
    let digits: Vec<u8> = bare.bytes().filter(|&b| b != b'-').collect();
    let grouped = bare.len() == 36 && [8, 13, 18, 23].iter().all(|&i| bare.as_bytes()[i] == b'-');
    if digits.len() != 32
        || !digits.iter().all(u8::is_ascii_hexdigit)
        || !(grouped || bare.len() == 32)
    {
        return None;
    }
    let text = std::str::from_utf8(&digits).ok()?;
    let written = [
        &text[..8],
        &text[8..12],
        &text[12..16],
        &text[16..20],
        &text[20..],
    ]
    .join("-");
    (written != s).then_some(written)
}

/// A URI's path, query and fragment with each character a URI cannot hold percent-encoded
/// (RFC 3987 §3.1, an IRI's mapping to a URI, which leaves a URI's own characters as they
/// are). Its scheme and authority stay as they came: a host outside ASCII is a name to map
/// (IDNA), which encoding would not mean.
fn encoded(s: &str, format: &str) -> Option<String> {
    let rest = s.find("://").map_or(0, |at| at + 3);
    let start = rest + s[rest..].find(['/', '?', '#']).unwrap_or(s.len() - rest);
    let (head, tail) = s.split_at(start);
    if head.bytes().any(|b| !held(b)) || tail.bytes().all(held) {
        return None;
    }
    let mut written = head.to_owned();
    for b in tail.bytes() {
        if held(b) {
            written.push(char::from(b));
        } else {
            written.push_str(&format!("%{b:02X}"));
        }
    }
    let checker = match format {
        "uri" => &URI,
        _ => &URI_REFERENCE,
    };
    checker.is_valid(&json!(written)).then_some(written)
}

/// A byte a URI holds as it is: RFC 3986's unreserved and reserved characters, and `%`.
fn held(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~:/?#[]@!$&'()*+,;=%".contains(&b)
}

/// The validator's own checks of the formats, so that what is written is what it takes.
static URI: LazyLock<jsonschema::Validator> = LazyLock::new(|| format_checker("uri"));
static URI_REFERENCE: LazyLock<jsonschema::Validator> =
    LazyLock::new(|| format_checker("uri-reference"));

fn format_checker(format: &str) -> jsonschema::Validator {
    let schema: Value = json!({"type": "string", "format": format});
    jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .expect("a schema of one format compiles")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::{duration, local_time};

    /// Strings made of pieces at the formats' edges: whatever comes, nothing panics, and what
    /// is written is what the format's own check takes.
    #[test]
    fn whatever_comes_what_is_written_is_what_the_format_takes() {
        const PIECES: [&str; 24] = [
            "2026-11-30T10:00",
            "2024-02-29 23:59",
            "T",
            "t",
            " ",
            "10:00",
            ":00",
            ":5",
            ".25",
            "Z",
            "+0200",
            "-01:30",
            "+",
            "https://x",
            "x.example",
            "/",
            "?q=",
            "#",
            "a b",
            "é",
            "%",
            "{",
            "}",
            "1b4e28ba2fa111d2883f0016d3cca427",
        ];
        let format_takes = |format: &str, s: &str| {
            let schema = json!({"type": "string", "format": format});
            let checker = jsonschema::options()
                .should_validate_formats(true)
                .with_format("date-time", local_time::date_time)
                .with_format("time", local_time::time)
                .build(&schema)
                .expect("one format compiles");
            checker.is_valid(&json!(s))
        };
        // Every string of up to three of them.
        let (mut strings, mut last) = (Vec::new(), vec![String::new()]);
        for _ in 0..3 {
            last = (last.iter())
                .flat_map(|s| PIECES.iter().map(move |p| format!("{s}{p}")))
                .collect();
            strings.extend(last.iter().cloned());
        }
        for s in strings {
            for format in ["date-time", "time", "uri", "uri-reference", "uuid", "email"] {
                if let Some(written) = as_written(&s, format) {
                    assert_ne!(written, s);
                    assert!(
                        format_takes(format, &written),
                        "{format}: {s:?} as {written:?}"
                    );
                }
            }
            if let Some(utc) = local_time::in_utc(&s) {
                let taken = local_time::date_time(&utc) && utc.ends_with('Z');
                assert!(taken, "{s:?} in UTC as {utc:?}");
            }
            let _ = duration::duration(&s);
        }
    }

    #[test]
    fn a_uri_with_what_it_cannot_hold_is_percent_encoded_after_its_authority() {
        for (given, written) in [
            (
                "https://x.example/search?q=rust tokio",
                "https://x.example/search?q=rust%20tokio",
            ),
            ("https://x.example/ünï", "https://x.example/%C3%BCn%C3%AF"),
            ("http://x.example/a b#c d", "http://x.example/a%20b#c%20d"),
            (
                "http://x.example/{id}|\"x\"",
                "http://x.example/%7Bid%7D%7C%22x%22",
            ),
            (
                "mailto:ada@x.example?subject=hi there",
                "mailto:ada@x.example?subject=hi%20there",
            ),
        ] {
            assert_eq!(
                as_written(given, "uri").as_deref(),
                Some(written),
                "{given}"
            );
        }
        assert_eq!(
            as_written("a b/c", "uri-reference").as_deref(),
            None,
            "no path before its authority's end"
        );
        assert_eq!(
            as_written("/a b", "uri-reference").as_deref(),
            Some("/a%20b")
        );
        for (given, written) in [
            (
                "1b4e28ba2fa111d2883f0016d3cca427",
                "1b4e28ba-2fa1-11d2-883f-0016d3cca427",
            ),
            (
                "{1B4E28BA-2FA1-11D2-883F-0016D3CCA427}",
                "1B4E28BA-2FA1-11D2-883F-0016D3CCA427",
            ),
            (
                "urn:uuid:1b4e28ba-2fa1-11d2-883f-0016d3cca427",
                "1b4e28ba-2fa1-11d2-883f-0016d3cca427",
            ),
        ] {
            assert_eq!(
                as_written(given, "uuid").as_deref(),
                Some(written),
                "{given}"
            );
        }
        for none in [
            "1b4e28ba-2fa1-11d2-883f-0016d3cca427",
            "1b4e28ba-2fa111d2-883f-0016d3cca427",
            "1b4e28ba2fa111d2883f0016d3cca42",
            "1b4e28ba2fa111d2883f0016d3cca42g",
            " 1b4e28ba2fa111d2883f0016d3cca427",
            "{1b4e28ba2fa111d2883f0016d3cca427",
            "1b4e28ba2fa111d2883f0016d3cca427é",
        ] {
            assert_eq!(as_written(none, "uuid"), None, "{none}");
        }
        for (none, format) in [
            ("https://x.example/a", "uri"),
            ("https://ü.example/a b", "uri"),
            ("https://x example/a", "uri"),
            ("x.example/a b", "uri"),
            (" https://x.example/", "uri"),
            ("https://x.example/a b", "iri"),
        ] {
            assert_eq!(as_written(none, format), None, "{none}");
        }
    }
}
