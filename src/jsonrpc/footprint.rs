//! What JSON text costs once read into a `serde_json::Value`, known before it is read.
//!
//! A value's memory is not its text's: each non-empty object is a B-tree of nodes of eleven
//! slots (about 630 bytes), so `{"":0}`, seven bytes, holds about 90 times that once read. A
//! call's 4 MB of such objects, read to explain why it is refused, comes to 960 MB; a
//! 1 MB schema of them, to 570 MB with its validators. [`footprint`] walks the text as the
//! parser does without building anything, so text too costly to read is known before it
//! costs that.

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::fmt;

/// The most a value read from text that came from outside may hold: a call's arguments read
/// to be explained or repaired, JSON text within them, a result checked against its output
/// schema, a server's error. A valid call is checked where its arguments lie, without one.
pub(crate) const MAX_READ_BYTES: usize = 64 * 1024 * 1024;

/// Whether `text` read into a value would hold at most [`MAX_READ_BYTES`]. Text that is not
/// JSON passes: its reader refuses it on its own.
pub(crate) fn affordable(text: &str) -> bool {
    footprint(text).is_none_or(|bytes| bytes <= MAX_READ_BYTES)
}

/// One B-tree node of an object's members: eleven keys and eleven values, and the links.
const NODE_BYTES: usize = 11 * (size_of::<String>() + size_of::<Value>()) + 16;

/// Members an object's node holds on average: inserted one at a time, in the text's order,
/// nodes split when full and hold from five to eleven.
const MEMBERS_PER_NODE: usize = 6;

/// The bytes of heap a `Value` read from `text` holds (its strings, arrays and objects, not
/// the root itself), estimated as its allocations are made; `None` when the text is not
/// JSON, or nests deeper than the parser reads.
pub(crate) fn footprint(text: &str) -> Option<usize> {
    let mut de = serde_json::Deserializer::from_str(text);
    let bytes = Census.deserialize(&mut de).ok()?;
    de.end().ok()?;
    Some(bytes)
}

/// A value's heap bytes, counted as it is parsed.
#[derive(Clone, Copy)]
struct Census;

impl<'de> DeserializeSeed<'de> for Census {
    type Value = usize;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<usize, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Census {
    type Value = usize;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("JSON")
    }

    fn visit_bool<E>(self, _: bool) -> Result<usize, E> {
        Ok(0)
    }

    fn visit_i64<E>(self, _: i64) -> Result<usize, E> {
        Ok(0)
    }

    fn visit_u64<E>(self, _: u64) -> Result<usize, E> {
        Ok(0)
    }

    fn visit_f64<E>(self, _: f64) -> Result<usize, E> {
        Ok(0)
    }

    fn visit_unit<E>(self) -> Result<usize, E> {
        Ok(0)
    }

    fn visit_str<E>(self, s: &str) -> Result<usize, E> {
        Ok(s.len())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<usize, A::Error> {
        let (mut items, mut bytes) = (0usize, 0usize);
        while let Some(b) = seq.next_element_seed(Census)? {
            items += 1;
            bytes = bytes.saturating_add(b);
        }
        // A vector grown one push at a time: its capacity, the next power of two.
        let slots = if items == 0 {
            0
        } else {
            items.next_power_of_two().max(4)
        };
        Ok(bytes.saturating_add(slots * size_of::<Value>()))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<usize, A::Error> {
        let (mut members, mut bytes) = (0usize, 0usize);
        while let Some(key) = map.next_key_seed(Census)? {
            let value = map.next_value_seed(Census)?;
            members += 1;
            bytes = bytes.saturating_add(key).saturating_add(value);
        }
        let nodes = members.div_ceil(MEMBERS_PER_NODE);
        Ok(bytes.saturating_add(nodes * NODE_BYTES))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_objects_cost_many_times_their_text() {
        let text = format!("[{}]", vec![r#"{"":0}"#; 1000].join(","));
        let bytes = footprint(&text).unwrap();
        assert!(bytes > 80 * text.len(), "{bytes} for {} bytes", text.len());
        let strings = format!("[{}]", vec![r#""abcdefgh""#; 1000].join(","));
        let bytes = footprint(&strings).unwrap();
        assert!(bytes < 5 * strings.len(), "{bytes} for {}", strings.len());
    }

    #[test]
    fn text_past_the_bound_is_not_read_as_arguments() {
        let objects = |n: usize| format!(r#"{{"a":[{}]}}"#, vec![r#"{"":0}"#; n].join(","));
        assert!(affordable(&objects(1_000)));
        assert!(!affordable(&objects(120_000)));
        assert_eq!(
            crate::jsonrpc::parse_arguments(&objects(120_000)),
            Err(crate::jsonrpc::ArgumentsError::too_large())
        );
        assert!(
            affordable("{"),
            "left to the reader, which says what is wrong"
        );
    }

    #[test]
    fn only_json_the_parser_reads_is_measured() {
        assert_eq!(footprint("{}"), Some(0));
        assert_eq!(footprint(r#"{"a":"bc"}"#), Some(3 + NODE_BYTES));
        assert_eq!(footprint("{"), None);
        assert_eq!(footprint("[] []"), None);
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert_eq!(footprint(&deep), None);
    }
}
