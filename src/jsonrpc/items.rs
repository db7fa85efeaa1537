//! The items of a JSON array taken one at a time, as written.
//!
//! Read into a `Vec` first, an array costs a slot per item whatever its item's size: 16 bytes
//! for each `0` of `[0,0,…]`, eight times its text, and more again when each item is copied
//! out. Gathered so, a listing of seven million such entries beside one tool holds 267 MiB;
//! taken one at a time, 57 MiB, about what a listing of the same size whose bulk is text
//! holds (54 MiB; `docs/security.md`).

use serde::de::{Deserializer, SeqAccess, Visitor};
use serde_json::value::RawValue;
use std::fmt;

/// Calls `each` with every item of the JSON array `text`, as written, in order; `Err` when
/// `text` is no array.
pub(crate) fn each<'a>(
    text: &'a str,
    each: impl FnMut(&'a RawValue),
) -> Result<(), serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(text);
    de.deserialize_seq(Items(each))?;
    de.end()
}

/// Whether `text` is an empty JSON array.
pub(crate) fn is_empty(text: &str) -> bool {
    let mut any = false;
    each(text, |_| any = true).is_ok() && !any
}

struct Items<F>(F);

impl<'de, F: FnMut(&'de RawValue)> Visitor<'de> for Items<F> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array")
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        while let Some(item) = seq.next_element::<&'de RawValue>()? {
            (self.0)(item);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_item_comes_as_written() {
        let mut seen = Vec::new();
        each(r#" [1, {"a": [2]} ,"x\"" ] "#, |i| seen.push(i.get())).unwrap();
        assert_eq!(seen, ["1", r#"{"a": [2]}"#, r#""x\"""#]);
        assert!(each(r#"{"a":1}"#, |_| {}).is_err());
        assert!(each("[1,", |_| {}).is_err());
        assert!(each("[1] x", |_| {}).is_err());
        assert!(is_empty(" [ ] "));
        assert!(!is_empty("[0]"));
        assert!(!is_empty("{}"));
    }
}
