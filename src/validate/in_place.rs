//! A call's arguments validated where they lie in the request's bytes: `jsonschema`'s
//! validator, compiled for the parts the envelope's reader makes of them
//! (`jsonrpc::arguments`), walks those parts as it walks a `serde_json::Value`.

use crate::jsonrpc::arguments::{Elements, Members, Part, Slot};
use jsonschema::JsonType;
use jsonschema::json::{self, Json, NodeIdentity};
use serde_json::{Number, Value};
use std::borrow::Cow;

/// The representation the in-place validator is compiled for.
pub struct InPlace;

/// An object part, as the validator reads its members.
#[derive(Clone, Copy)]
pub struct Object<'a>(Part<'a>);

/// An array part, as the validator reads its elements.
#[derive(Clone, Copy)]
pub struct Array<'a>(Part<'a>);

impl Json for InPlace {
    type Node<'a> = Part<'a>;
    type PreparedKey = Box<str>;
    type StringBuffer = ();
    /// A lookup scans the members, so a pass over them never costs more than lookups.
    const KEYS_PER_LOOKUP: usize = 1024;

    fn prepare_key(key: &str) -> Box<str> {
        key.into()
    }

    fn with_string_node<T>(_: &mut (), string: &str, f: impl FnOnce(Part<'_>) -> T) -> T {
        let slots = [Slot::String(Cow::Borrowed(string))];
        f(Part::of(&slots))
    }
}

impl<'a> json::Node<'a, InPlace> for Part<'a> {
    type Object = Object<'a>;
    type Array = Array<'a>;
    type Number = &'a Number;

    fn as_object(&self) -> Option<Object<'a>> {
        matches!(self.slot(), Slot::Object { .. }).then_some(Object(*self))
    }

    fn as_array(&self) -> Option<Array<'a>> {
        matches!(self.slot(), Slot::Array { .. }).then_some(Array(*self))
    }

    fn as_string(&self) -> Option<Cow<'a, str>> {
        match self.slot() {
            Slot::String(s) => Some(Cow::Borrowed(s)),
            _ => None,
        }
    }

    fn as_number(&self) -> Option<&'a Number> {
        match self.slot() {
            Slot::Number(n) => Some(n),
            _ => None,
        }
    }

    fn as_boolean(&self) -> Option<bool> {
        match self.slot() {
            Slot::Bool(b) => Some(*b),
            _ => None,
        }
    }

    fn is_null(&self) -> bool {
        matches!(self.slot(), Slot::Null)
    }

    fn json_type(&self) -> JsonType {
        match self.slot() {
            Slot::Null | Slot::Key(_) => JsonType::Null,
            Slot::Bool(_) => JsonType::Boolean,
            Slot::Number(_) => JsonType::Number,
            Slot::String(_) => JsonType::String,
            Slot::Array { .. } => JsonType::Array,
            Slot::Object { .. } => JsonType::Object,
        }
    }

    fn to_value(&self) -> Cow<'a, Value> {
        Cow::Owned(self.value())
    }

    fn identity(&self) -> Option<NodeIdentity> {
        Some(NodeIdentity::new(std::ptr::from_ref(self.slot()) as usize))
    }
}

impl<'a> json::Object<'a, InPlace> for Object<'a> {
    type Node = Part<'a>;
    type MemberName = &'a str;
    type MembersIter = Members<'a>;

    fn len(&self) -> usize {
        match self.0.slot() {
            Slot::Object { len, .. } => *len as usize,
            _ => 0,
        }
    }

    fn get(&self, key: &Box<str>) -> Option<Part<'a>> {
        self.0.members().find(|(k, _)| *k == &**key).map(|(_, v)| v)
    }

    fn members(&self) -> Members<'a> {
        self.0.members()
    }
}

impl<'a> json::Array<'a, InPlace> for Array<'a> {
    type Node = Part<'a>;
    type ElementsIter = Elements<'a>;

    fn len(&self) -> usize {
        match self.0.slot() {
            Slot::Array { len, .. } => *len as usize,
            _ => 0,
        }
    }

    fn elements(&self) -> Elements<'a> {
        self.0.elements()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::arguments::Arguments;
    use crate::jsonrpc::arguments::tests::as_value;

    #[test]
    fn the_validator_reads_the_parts_as_it_reads_a_value() {
        let schema = serde_json::json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 2, "pattern": "^[a-z]+$"},
                "count": {"type": "integer", "minimum": 1},
                "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "uniqueItems": true},
                "nested": {"type": "object", "required": ["x"], "additionalProperties": false,
                           "properties": {"x": {"const": 1.0}}}
            },
            "required": ["name"],
            "additionalProperties": false
        });
        let in_place = jsonschema::options_for::<InPlace>().build(&schema).unwrap();
        let plain = jsonschema::validator_for(&schema).unwrap();
        for text in [
            r#"{"name":"ab"}"#,
            r#"{"name":"a"}"#,
            r#"{"name":"AB"}"#,
            r#"{"name":"ab","count":1}"#,
            r#"{"name":"ab","count":1.5}"#,
            r#"{"name":"ab","count":0}"#,
            r#"{"name":"ab","tags":["a","b"]}"#,
            r#"{"name":"ab","tags":["a","a"]}"#,
            r#"{"name":"ab","tags":["c"]}"#,
            r#"{"name":"ab","nested":{"x":1}}"#,
            r#"{"name":"ab","nested":{"x":2}}"#,
            r#"{"name":"ab","nested":{}}"#,
            r#"{"name":"ab","other":1}"#,
            r#"{"count":1}"#,
        ] {
            let read = Arguments::read(text).unwrap();
            let value = Value::Object(as_value(text).unwrap());
            assert_eq!(
                in_place.is_valid(read.root()),
                plain.is_valid(&value),
                "{text}"
            );
        }
    }
}
