//! A message rewritten where it changes, the rest of its text kept as it was written.
//!
//! Why: a bridged call's request and answer are each rewritten (an id of toolgate's, then
//! the client's again; a result completed for its era). Read into a map and written out
//! again, every member of the message was copied twice and every string scanned twice more,
//! about three times a validated call's own work; spliced, a rewrite is one pass over the
//! text to find where, and one copy. Spliced text also keeps the member order and spacing
//! the server wrote.

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;
use std::fmt;

/// The value of member `name` of the JSON object `text` (its last, as `serde_json` reads a
/// name given twice): `Some(None)` when the object has none, `None` when `text` is no
/// object.
pub(crate) fn member<'a>(text: &'a str, name: &str) -> Option<Option<&'a RawValue>> {
    read_object(text, Member(name))
}

/// Which of `names` the JSON object `text` has, a bit each in their order; `None` when
/// `text` is no object.
pub(crate) fn names_present(text: &str, names: &[&str]) -> Option<u32> {
    debug_assert!(names.len() <= 32);
    read_object(text, Present(names))
}

/// The result object of response `text` (a slice of it) and which of `names` it has, a bit
/// each in their order; `None` when it has no result object. Read by hand in one pass where
/// it can be, as nearly every answer can (`quick`), else by `serde_json`.
pub(crate) fn result_names<'a>(text: &'a str, names: &[&str]) -> Option<(&'a str, u32)> {
    if let Some(read) = super::quick::result_members(text, names) {
        return Some(read);
    }
    let result = member(text, "result")??.get();
    Some((result, names_present(result, names)?))
}

/// Whether the result of `text` reads alike by hand and through `serde_json`, when the hand
/// reader takes it at all (the fuzz target's check).
#[cfg(feature = "fuzzing")]
pub(crate) fn result_read_alike(text: &str, names: &[&str]) -> bool {
    let Some(by_hand) = super::quick::result_members(text, names) else {
        return true;
    };
    let result = member(text, "result").flatten();
    result.is_some_and(|r| r.get() == by_hand.0 && names_present(r.get(), names) == Some(by_hand.1))
}

/// `text` with `part` (a slice of it) replaced by `with`.
pub(crate) fn replaced(text: &str, part: &str, with: &str) -> String {
    let start = offset(text, part);
    let mut out = String::with_capacity(text.len() - part.len() + with.len());
    out.push_str(&text[..start]);
    out.push_str(with);
    out.push_str(&text[start + part.len()..]);
    out
}

/// `text` with `members` (`"name":value` pairs joined by commas) made the first members of
/// `object`, a JSON object in `text` (a slice of it, as [`member`] gives).
pub(crate) fn with_members_first(text: &str, object: &str, members: &str) -> String {
    let inside = offset(text, object) + object.find('{').map_or(0, |at| at + 1);
    let empty = text[inside..].trim_start().starts_with('}');
    let mut out = String::with_capacity(text.len() + members.len() + 1);
    out.push_str(&text[..inside]);
    out.push_str(members);
    if !empty {
        out.push(',');
    }
    out.push_str(&text[inside..]);
    out
}

/// Where `part`, a slice of `text`, starts in it.
fn offset(text: &str, part: &str) -> usize {
    let at = (part.as_ptr() as usize).wrapping_sub(text.as_ptr() as usize);
    assert!(at + part.len() <= text.len(), "a part of the text");
    at
}

/// The whole of `text` read as one object by `visitor`.
fn read_object<'a, V: Visitor<'a>>(text: &'a str, visitor: V) -> Option<V::Value> {
    let mut de = serde_json::Deserializer::from_str(text);
    let value = de.deserialize_map(visitor).ok()?;
    de.end().ok()?;
    Some(value)
}

struct Member<'n>(&'n str);

impl<'de> Visitor<'de> for Member<'_> {
    type Value = Option<&'de RawValue>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut found = None;
        while let Some(is) = map.next_key_seed(NameIn(&[self.0]))? {
            match is {
                Some(_) => found = Some(map.next_value()?),
                None => drop(map.next_value::<IgnoredAny>()?),
            }
        }
        Ok(found)
    }
}

struct Present<'n>(&'n [&'n str]);

impl<'de> Visitor<'de> for Present<'_> {
    type Value = u32;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<u32, A::Error> {
        let mut present = 0;
        while let Some(at) = map.next_key_seed(NameIn(self.0))? {
            present |= at.map_or(0, |i| 1 << i);
            map.next_value::<IgnoredAny>()?;
        }
        Ok(present)
    }
}

/// A member's name, told by where it is among some names (with its escapes read: a name
/// is what it says, however it is written).
struct NameIn<'n>(&'n [&'n str]);

impl<'de> DeserializeSeed<'de> for NameIn<'_> {
    type Value = Option<usize>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<usize>, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for NameIn<'_> {
    type Value = Option<usize>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a member name")
    }

    fn visit_str<E>(self, name: &str) -> Result<Option<usize>, E> {
        Ok(self.0.iter().position(|n| *n == name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_member_is_found_where_it_is_written() {
        let text = r#"{ "a" : [1, {"b": 2}], "b":"x" , "\u0062": 3 }"#;
        let b = member(text, "b").unwrap().unwrap();
        assert_eq!(
            b.get(),
            "3",
            "the last of a name given twice, its escape read"
        );
        assert_eq!(
            replaced(text, b.get(), "4"),
            r#"{ "a" : [1, {"b": 2}], "b":"x" , "\u0062": 4 }"#
        );
        assert!(member(text, "c").unwrap().is_none());
        assert!(member("[1]", "a").is_none());
        assert!(
            member(r#"{"a":1} x"#, "a").is_none(),
            "the whole text or nothing"
        );
        assert!(member(r#"{"a":1,}"#, "a").is_none());
    }

    #[test]
    fn names_present_are_told_by_their_place() {
        let names = ["x", "y", "z"];
        assert_eq!(
            names_present(r#"{"z":{"x":1},"x":[]}"#, &names),
            Some(0b101)
        );
        assert_eq!(names_present("{}", &names), Some(0));
        assert_eq!(names_present("null", &names), None);
    }

    #[test]
    fn members_put_first_keep_the_rest_as_written() {
        let text = r#"{"id":1,"result": { "content":[] }}"#;
        let result = member(text, "result").unwrap().unwrap().get();
        let out = with_members_first(text, result, r#""k":true"#);
        assert_eq!(out, r#"{"id":1,"result": {"k":true, "content":[] }}"#);
        let text = r#"{"result":{ }}"#;
        let result = member(text, "result").unwrap().unwrap().get();
        assert_eq!(
            with_members_first(text, result, r#""k":1"#),
            r#"{"result":{"k":1 }}"#
        );
    }
}
