//! Coerced arguments written back into the text they came in, only where coercion wrote.
//!
//! Why: arguments are coerced as a value, and a value holds a number as a float or a 64-bit
//! integer. Written out whole, an argument would lose what that cannot hold beside the one
//! value coercion converted: `[99999999999999999999, "2"]` would go as `[1e20, 2]`, another
//! number than the model sent. Spliced at the places coercion wrote, every other value keeps
//! the digits it was written with.

use super::lookup::unescape;
use super::report::comparable;
use serde_json::Value;
use serde_json::value::RawValue;
use std::collections::BTreeMap;

/// How many levels of a value are read to find the places coercion wrote: each level's text
/// is scanned again, so an argument nested deep would cost its depth times its size. Past
/// it, the value holding a place is written whole (a number past a float's precision there
/// is written as the float it was read as).
const MAX_LEVELS: usize = 4;

/// `text` (the JSON of one value, read as `now` before coercion) with the values at
/// `places` (JSON pointers into it, none under another) written as `now` holds them, or left
/// out where `now` holds nothing; every other value as it was written. A place where the text
/// is not of the shape `now` is there is written whole from `now`.
pub fn spliced(text: &str, now: &Value, places: &[String]) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    write_spliced(&mut out, text, now, places, MAX_LEVELS);
    out
}

/// The text of the member of `raw` that the member `name` of `now` was named from (the same
/// name spelt otherwise, [`super::Renamed`], gone from `now`), where it holds the same value.
fn renamed_from<'a>(
    raw: &BTreeMap<String, &'a RawValue>,
    now: &serde_json::Map<String, Value>,
    name: &str,
    v: &Value,
) -> Option<&'a str> {
    let spelt = comparable(name)?;
    let mut gone = raw.iter().filter(|(from, _)| !now.contains_key(*from));
    let (_, old) = gone.find(|(from, _)| comparable(from).is_some_and(|c| c == spelt))?;
    let same = serde_json::from_str::<Value>(old.get()).is_ok_and(|o| o == *v);
    same.then(|| old.get())
}

/// [`spliced`] into `out`, reading at most `levels` levels of `text`.
fn write_spliced(out: &mut String, text: &str, now: &Value, places: &[String], levels: usize) {
    if levels == 0 || places.iter().any(String::is_empty) {
        return out.push_str(&now.to_string());
    }
    let within = by_first_token(places);
    match now {
        Value::Object(members) => {
            let raw = serde_json::from_str::<BTreeMap<String, &RawValue>>(text).ok();
            let Some(raw) = raw else {
                return out.push_str(&now.to_string());
            };
            out.push('{');
            // A member `now` lacks was left out by coercion; one the text lacks was named
            // by it (a declared name spelt otherwise) and goes last, as the text of the member
            // it was named from where it holds the same value.
            let kept = raw
                .iter()
                .filter_map(|(name, old)| Some((name, Some(old.get()), members.get(name)?)));
            let named = (members.iter())
                .filter(|(name, _)| !raw.contains_key(*name))
                .map(|(name, v)| (name, None, v));
            for (i, (name, old, v)) in kept.chain(named).enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::from(name.as_str()).to_string());
                out.push(':');
                match (old, within.get(name)) {
                    (Some(old), Some(places)) => write_spliced(out, old, v, places, levels - 1),
                    (Some(old), None) => out.push_str(old),
                    (None, _) => match renamed_from(&raw, members, name, v) {
                        Some(old) => out.push_str(old),
                        None => out.push_str(&v.to_string()),
                    },
                }
            }
            out.push('}');
        }
        Value::Array(items) => {
            let raw = serde_json::from_str::<Vec<&RawValue>>(text).ok();
            let Some(raw) = raw.filter(|raw| raw.len() == items.len()) else {
                return out.push_str(&now.to_string());
            };
            out.push('[');
            for (i, (old, v)) in raw.iter().zip(items).enumerate() {
                if i > 0 {
                    out.push(',');
                }
                match within.get(&i.to_string()) {
                    Some(places) => write_spliced(out, old.get(), v, places, levels - 1),
                    None => out.push_str(old.get()),
                }
            }
            out.push(']');
        }
        _ => out.push_str(&now.to_string()),
    }
}

/// `places` by their first token (unescaped), each with the rest of its pointer.
fn by_first_token(places: &[String]) -> BTreeMap<String, Vec<String>> {
    let mut by = BTreeMap::<String, Vec<String>>::new();
    for place in places {
        let rest = place.strip_prefix('/').unwrap_or(place);
        let (first, within) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        by.entry(unescape(first))
            .or_default()
            .push(within.to_owned());
    }
    by
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn places(all: &[&str]) -> Vec<String> {
        all.iter().map(|p| p.to_string()).collect()
    }

    #[test]
    fn only_the_places_coercion_wrote_are_written_again() {
        let text = r#"{"ids": [99999999999999999999, "2"], "n": 1.50, "o": {"a": "1", "b": 1.0000000000000000001}}"#;
        let now = json!({"ids": [1e20, 2], "n": 1.5, "o": {"a": 1, "b": 1.0}});
        let out = spliced(text, &now, &places(&["/ids/1", "/o/a"]));
        assert_eq!(
            out,
            r#"{"ids":[99999999999999999999,2],"n":1.50,"o":{"a":1,"b":1.0000000000000000001}}"#
        );
    }

    #[test]
    fn a_place_left_out_a_whole_place_and_an_escaped_name() {
        let text = r#"{"a/b": {"x": null, "y": "3"}, "c": "[1,\"2\"]"}"#;
        let now = json!({"a/b": {"y": 3}, "c": [1, 2]});
        let out = spliced(text, &now, &places(&["/a~1b/x", "/a~1b/y", "/c"]));
        assert_eq!(out, r#"{"a/b":{"y":3},"c":[1,2]}"#);
        let whole = spliced(text, &now, &places(&[""]));
        assert_eq!(whole, now.to_string());
    }

    #[test]
    fn a_member_named_otherwise_keeps_its_text_unless_coerced_within() {
        let text = r#"{"max_results": 99999999999999999999, "opts": {"Depth": "2"}, "n": 1.50}"#;
        let now = json!({"maxResults": 1e20, "opts": {"depth": 2}, "n": 1.5});
        let out = spliced(text, &now, &places(&["/maxResults", "/opts/depth"]));
        assert_eq!(
            out,
            r#"{"n":1.50,"opts":{"depth":2},"maxResults":99999999999999999999}"#
        );
    }

    #[test]
    fn a_shape_that_changed_is_written_whole() {
        // A lone value put in an array, read from the text where it was not one.
        let now = json!({"tags": ["a"]});
        let out = spliced(r#"{"tags": "a"}"#, &now, &places(&["/tags/0"]));
        assert_eq!(out, r#"{"tags":["a"]}"#);
    }

    #[test]
    fn past_its_levels_a_value_is_written_whole() {
        let text = r#"{"a": [[[[99999999999999999999, "2"]], 1.50]]}"#;
        let now = json!({"a": [[[[1e20, 2]], 1.5]]});
        let out = spliced(text, &now, &places(&["/a/0/0/0/1"]));
        assert_eq!(out, r#"{"a":[[[[1e+20,2]],1.50]]}"#);
    }
}
