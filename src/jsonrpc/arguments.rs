//! A call's arguments read in place: one flat list of parts that borrow the request's text.
//!
//! Why: reading arguments into a `serde_json::Value` allocates every key and string and
//! builds a map per object, and drops it all again, for a call that is forwarded as the
//! bytes it came in. The envelope's reader (`quick`) reads a call's nested arguments so in
//! its own pass, the guard any others that the check of their text (`validate::Flat`)
//! cannot decide, and the validator walks the parts (`validate::InPlace`). A call that
//! fails, or that a rule must read as a value (coercion, reports, the undeclared-argument
//! walk, path rules), is read as a `Value` after all.
//!
//! What the reader accepts is JSON, and it reads it as `serde_json` would: the same numbers
//! (anything but a plain unsigned integer is parsed by `serde_json` itself) and the same
//! strings (any with an escape or a control character is read by `serde_json` too, which
//! refuses the second). Whatever it does not take (a duplicate key, an object with more than
//! [`MAX_MEMBERS`] members, nesting past [`MAX_DEPTH`], text that is not JSON) goes the
//! `Value` way, whose reader says what is wrong.

use crate::text::Cursor;
use serde_json::{Map, Number, Value};
use std::borrow::Cow;

/// Deeper arguments are read as a `Value`, whose reader refuses them past `serde_json`'s own
/// limit (128): kept well under it, so that nothing this reader takes is refused there.
const MAX_DEPTH: usize = 64;
/// Keys are checked for duplicates against each other, so an object's members are bounded;
/// a larger object is read as a `Value`, whose map finds duplicates as it inserts.
const MAX_MEMBERS: usize = 32;

/// One part of the arguments: a scalar, an object's key, or the head of a container, whose
/// members follow it up to `end`.
#[derive(Debug)]
pub(crate) enum Slot<'a> {
    Null,
    Bool(bool),
    Number(Number),
    String(Cow<'a, str>),
    Key(Cow<'a, str>),
    Array { len: u32, end: u32 },
    Object { len: u32, end: u32 },
}

/// A call's arguments, read in place: an object.
#[derive(Debug)]
pub struct Arguments<'a> {
    slots: Vec<Slot<'a>>,
}

impl<'a> Arguments<'a> {
    /// The arguments in `text`, or `None` when they must be read as a `Value`: not an
    /// object, a duplicate key, past a bound, or not JSON.
    pub fn read(text: &'a str) -> Option<Arguments<'a>> {
        let (args, end) = Arguments::read_at(text, 0)?;
        let rest = text.as_bytes().get(end..)?;
        rest.iter()
            .all(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
            .then_some(args)
    }

    /// The arguments that start at `at` in `text` (the envelope's reader, in its pass), and
    /// where they end; `None` as for [`Self::read`].
    pub(crate) fn read_at(text: &'a str, at: usize) -> Option<(Arguments<'a>, usize)> {
        let mut r = Reader {
            c: Cursor { text, at },
            slots: Vec::with_capacity(16),
        };
        r.c.space();
        if r.c.peek()? != b'{' {
            return None;
        }
        r.value(0)?;
        Some((Arguments { slots: r.slots }, r.c.at))
    }

    /// No arguments: an empty object.
    pub fn empty() -> Arguments<'static> {
        Arguments {
            slots: vec![Slot::Object { len: 0, end: 1 }],
        }
    }

    pub fn root(&self) -> Part<'_> {
        Part {
            slots: &self.slots,
            at: 0,
        }
    }

    /// Whether a number among the arguments is a whole number written as a float (`2.0`),
    /// which coercion may write as an integer (`validate::check`).
    pub(crate) fn has_whole_float(&self) -> bool {
        self.slots
            .iter()
            .any(|s| matches!(s, Slot::Number(n) if whole_float(n).is_some()))
    }

    /// The arguments as a map, as the `Value` reader would have made them.
    pub fn to_map(&self) -> Map<String, Value> {
        match self.root().value() {
            Value::Object(map) => map,
            _ => Map::new(),
        }
    }
}

/// `n` as an integer, when it was written as a float (`2.0`, `1e2`) and is whole and within
/// an `i64`.
pub(crate) fn whole_float(n: &Number) -> Option<i64> {
    let f = n.as_f64().filter(|_| n.is_f64())?;
    // `i64::MAX as f64` is 2^63, the first float past the range.
    (f.fract() == 0.0 && (i64::MIN as f64..i64::MAX as f64).contains(&f)).then_some(f as i64)
}

struct Reader<'a> {
    c: Cursor<'a>,
    slots: Vec<Slot<'a>>,
}

impl<'a> Reader<'a> {
    fn eat(&mut self, b: u8) -> Option<()> {
        self.c.space();
        self.c.eat(b)
    }

    fn value(&mut self, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        let slot = match self.c.peek()? {
            b'{' => return self.object(depth),
            b'[' => return self.array(depth),
            b'"' => Slot::String(self.string()?),
            b't' => self.word("true", Slot::Bool(true))?,
            b'f' => self.word("false", Slot::Bool(false))?,
            b'n' => self.word("null", Slot::Null)?,
            b'-' | b'0'..=b'9' => Slot::Number(self.number()?),
            _ => return None,
        };
        self.slots.push(slot);
        Some(())
    }

    fn word(&mut self, word: &str, slot: Slot<'a>) -> Option<Slot<'a>> {
        self.c.word(word).map(|()| slot)
    }

    fn object(&mut self, depth: usize) -> Option<()> {
        let head = self.slots.len();
        self.slots.push(Slot::Object { len: 0, end: 0 });
        let len = self.members(b'}', |r, len| {
            if r.c.peek()? != b'"' {
                return None;
            }
            let key = r.string()?;
            if len as usize == MAX_MEMBERS || r.has_key(head, &key) {
                return None;
            }
            r.slots.push(Slot::Key(key));
            r.eat(b':')?;
            r.c.space();
            r.value(depth + 1)
        })?;
        let end = u32::try_from(self.slots.len()).ok()?;
        self.slots[head] = Slot::Object { len, end };
        Some(())
    }

    fn has_key(&self, head: usize, key: &str) -> bool {
        let part = Part {
            slots: &self.slots,
            at: head,
        };
        let mut at = head + 1;
        while at < self.slots.len() {
            if matches!(&self.slots[at], Slot::Key(k) if k == key) {
                return true;
            }
            at = part.after(at + 1);
        }
        false
    }

    fn array(&mut self, depth: usize) -> Option<()> {
        let head = self.slots.len();
        self.slots.push(Slot::Array { len: 0, end: 0 });
        let len = self.members(b']', |r, _| r.value(depth + 1))?;
        let end = u32::try_from(self.slots.len()).ok()?;
        self.slots[head] = Slot::Array { len, end };
        Some(())
    }

    /// A container's members, from its opening bracket to `close`, each read by `member`
    /// (given how many came before it); how many there were.
    fn members(
        &mut self,
        close: u8,
        mut member: impl FnMut(&mut Self, u32) -> Option<()>,
    ) -> Option<u32> {
        self.c.at += 1;
        self.c.space();
        if self.c.peek()? == close {
            self.c.at += 1;
            return Some(0);
        }
        let mut len: u32 = 0;
        loop {
            self.c.space();
            member(self, len)?;
            len = len.checked_add(1)?;
            self.c.space();
            match self.c.peek()? {
                b',' => self.c.at += 1,
                b if b == close => {
                    self.c.at += 1;
                    return Some(len);
                }
                _ => return None,
            }
        }
    }

    /// A string at `"`: borrowed when it has no escape and no control character, else read
    /// by `serde_json`, which unescapes the first and refuses the second.
    fn string(&mut self) -> Option<Cow<'a, str>> {
        let start = self.c.at + 1;
        if let Some(end) = self.c.plain_end(start) {
            self.c.at = end + 1;
            return self.c.text.get(start..end).map(Cow::Borrowed);
        }
        self.escaped(start)
    }

    #[cold]
    fn escaped(&mut self, start: usize) -> Option<Cow<'a, str>> {
        let bytes = self.c.text.as_bytes();
        let mut at = start;
        loop {
            match *bytes.get(at)? {
                b'"' => break,
                b'\\' => at += 2,
                _ => at += 1,
            }
        }
        self.c.at = at + 1;
        serde_json::from_str(self.c.text.get(start - 1..=at)?)
            .ok()
            .map(Cow::Owned)
    }

    /// A number: a plain unsigned integer read here, any other by `serde_json`.
    fn number(&mut self) -> Option<Number> {
        let bytes = self.c.text.as_bytes();
        let start = self.c.at;
        let mut at = start;
        while matches!(
            bytes.get(at),
            Some(b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')
        ) {
            at += 1;
        }
        self.c.at = at;
        let digits = &bytes[start..at];
        let plain = digits.len() <= 19
            && digits.iter().all(u8::is_ascii_digit)
            && (digits[0] != b'0' || digits.len() == 1);
        if plain {
            let n = digits
                .iter()
                .fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
            return Some(Number::from(n));
        }
        serde_json::from_str(&self.c.text[start..at]).ok()
    }
}

/// One value of the arguments, as the validator walks them (`validate::InPlace`).
#[derive(Clone, Copy)]
pub struct Part<'a> {
    slots: &'a [Slot<'a>],
    at: usize,
}

impl<'a> Part<'a> {
    /// A value of one slot alone (a string the validator makes).
    pub(crate) fn of(slots: &'a [Slot<'a>]) -> Part<'a> {
        Part { slots, at: 0 }
    }

    pub(crate) fn slot(&self) -> &'a Slot<'a> {
        &self.slots[self.at]
    }

    /// The slot after the value at `at`, with all its members.
    fn after(&self, at: usize) -> usize {
        match &self.slots[at] {
            Slot::Array { end, .. } | Slot::Object { end, .. } => *end as usize,
            _ => at + 1,
        }
    }

    fn at(&self, at: usize) -> Part<'a> {
        Part {
            slots: self.slots,
            at,
        }
    }

    pub(crate) fn value(&self) -> Value {
        match self.slot() {
            Slot::Null | Slot::Key(_) => Value::Null,
            Slot::Bool(b) => Value::Bool(*b),
            Slot::Number(n) => Value::Number(n.clone()),
            Slot::String(s) => Value::String(s.to_string()),
            Slot::Array { .. } => Value::Array(self.elements().map(|e| e.value()).collect()),
            Slot::Object { .. } => Value::Object(
                self.members()
                    .map(|(k, v)| (k.to_owned(), v.value()))
                    .collect(),
            ),
        }
    }

    /// An object's members (called on an object only).
    pub(crate) fn members(&self) -> Members<'a> {
        Members {
            part: *self,
            next: self.at + 1,
            end: self.after(self.at),
        }
    }

    /// An array's elements (called on an array only).
    pub(crate) fn elements(&self) -> Elements<'a> {
        Elements {
            part: *self,
            next: self.at + 1,
            end: self.after(self.at),
        }
    }
}

pub struct Members<'a> {
    part: Part<'a>,
    next: usize,
    end: usize,
}

impl<'a> Iterator for Members<'a> {
    type Item = (&'a str, Part<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        if self.next >= self.end {
            return None;
        }
        let Slot::Key(key) = &self.part.slots[self.next] else {
            return None;
        };
        let value = self.part.at(self.next + 1);
        self.next = self.part.after(self.next + 1);
        Some((key, value))
    }
}

pub struct Elements<'a> {
    part: Part<'a>,
    next: usize,
    end: usize,
}

impl<'a> Iterator for Elements<'a> {
    type Item = Part<'a>;

    fn next(&mut self) -> Option<Part<'a>> {
        if self.next >= self.end {
            return None;
        }
        let element = self.part.at(self.next);
        self.next = self.part.after(self.next);
        Some(element)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::jsonrpc::parse_arguments;
    use serde_json::value::RawValue;

    pub(crate) fn as_value(text: &str) -> Option<Map<String, Value>> {
        parse_arguments(RawValue::from_string(text.into()).unwrap().get()).ok()
    }

    #[test]
    fn what_is_read_in_place_is_what_the_value_reader_reads() {
        for text in [
            r#"{}"#,
            r#" { "a" : 1 , "b":[1, -2, 3.5, 1e3, -0, 0, 18446744073709551615, 18446744073709551616] } "#,
            r#"{"s":"plain","t":"tab\tand \u00e9 and \"quotes\"","u":"\ud83e\udd80"}"#,
            r#"{"n":null,"t":true,"f":false,"o":{"x":{"y":[{}, [], [[]]]}}}"#,
            r#"{"esc\"aped":1,"escaped":2}"#,
            r#"{"a":{"a":{"a":1}},"b":[{"a":1},{"a":1}]}"#,
        ] {
            let read = Arguments::read(text).unwrap_or_else(|| panic!("{text}"));
            assert_eq!(Some(read.to_map()), as_value(text), "{text}");
        }
    }

    #[test]
    fn what_only_the_value_reader_can_judge_is_left_to_it() {
        let wide = format!(
            "{{{}}}",
            (0..=MAX_MEMBERS)
                .map(|i| format!("\"k{i}\":{i}"))
                .collect::<Vec<_>>()
                .join(",")
        );
        let deep = format!("{{\"a\":{}1{}}}", "[".repeat(200), "]".repeat(200));
        for text in [
            r#"[1]"#,
            r#""text""#,
            r#"{"a":1,"a":2}"#,
            r#"{"o":{"b":1,"b":1}}"#,
            r#"{"a\u0062":1,"ab":2}"#,
            r#"{"n":1e400}"#,
            r#"{"s":"\ud800"}"#,
            r#"{"\udc00":1}"#,
            r#"{"a":1} x"#,
            r#"{"a":01}"#,
            wide.as_str(),
            deep.as_str(),
        ] {
            assert!(Arguments::read(text).is_none(), "{text}");
        }
    }

    #[test]
    fn nesting_the_value_reader_refuses_is_never_read_in_place() {
        let nested = |n: usize| format!("{{\"a\":{}1{}}}", "[".repeat(n), "]".repeat(n));
        let deepest = (0..200)
            .take_while(|n| as_value(&nested(*n)).is_some())
            .last()
            .unwrap();
        assert!(Arguments::read(&nested(deepest + 1)).is_none());
        assert!(Arguments::read(&nested(MAX_DEPTH - 1)).is_some());
        assert!(Arguments::read(&nested(MAX_DEPTH)).is_none());
    }
}
