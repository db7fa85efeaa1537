//! A request's envelope read by hand, in one pass over its text.
//!
//! Why: through `serde_json`'s generic visitor a `tools/call`'s envelope cost about 23
//! instructions a byte, most of them in skipping the arguments as text and in matching
//! member names. Requests come in a few plain shapes, and this reader takes those only: a
//! request or notification whose only member kept raw is its id, with a `tools/call`'s
//! params read typed and its arguments kept as their text, checked as JSON, and read into
//! the validator's parts as it goes when they nest (`arguments`). Another method's params,
//! a response's result or error (members kept raw, which `serde_json` would scan a second
//! time to make), a member name with an escape, a `\u` escape anywhere, a member named
//! twice, a `tools/call` whose params do not read, nesting past [`MAX_DEPTH`] or text that
//! is not JSON all give `None`, and `serde_json` reads the message as before and says what
//! is wrong. What it takes it reads as `serde_json` reads it, to the byte of every member
//! it keeps; the fuzz target for the envelope asserts that (`fuzzing::envelope`).

use super::arguments::Arguments;
use super::{CallParams, Envelope, Params};
use crate::mcp::{META_PROTOCOL_VERSION, TOOLS_CALL};
use crate::text::{NameWord, key_first_word, string_stop};
use serde_json::value::RawValue;
use std::borrow::Cow;

/// Deeper text is left to `serde_json`, whose own limit is 128.
const MAX_DEPTH: usize = 64;

/// The envelope of `text`, or `None` when `serde_json` must read it.
pub(super) fn envelope(text: &str) -> Option<Envelope<'_>> {
    let mut s = Scan { text, at: 0 };
    let mut env = Envelope::default();
    let mut seen = Seen(0);
    // Made a raw value once the message is known to be taken: a response gives way at its
    // result, and its id would have been read twice.
    let mut id = None;
    s.space();
    s.object(&ENVELOPE, |s, name| {
        let bit = match name {
            Some(i @ 0..4) => 1 << i,
            // A response's result or error: see below.
            Some(_) => return None,
            None => return s.skip(1),
        };
        seen.once(bit)?;
        match bit {
            1 => env.jsonrpc = Some(s.text_of()?),
            2 => id = Some(s.text_of()?),
            4 => env.method = s.text_or_null()?.map(Cow::Borrowed),
            // Typed only when the method came first, as `serde_json`'s reader does.
            8 if env.method.as_deref() == Some(TOOLS_CALL) => {
                env.params = Some(Params::Call(s.call_params()?));
            }
            // Another method's params (as a response's result or error): kept raw, which
            // only `serde_json` can make, scanning them again; it reads the message once.
            _ => return None,
        }
        Some(())
    })?;
    s.space();
    (s.at == text.len()).then_some(())?;
    if let Some(id) = id {
        env.id = Some(serde_json::from_str(id).ok()?);
    }
    Some(env)
}

/// A response's result (its text), and which of `names` are its members, a bit each in
/// their order; `None` where `serde_json` must read it (above), or where the message is no
/// object with a result object.
pub(super) fn result_members<'a>(text: &'a str, names: &[&str]) -> Option<(&'a str, u32)> {
    const RESULT: usize = 4;
    let mut s = Scan { text, at: 0 };
    let mut found = None;
    s.space();
    s.object(&ENVELOPE, |s, name| {
        if name != Some(RESULT) {
            return s.skip(1);
        }
        // A result given twice: `serde_json`'s reader says which one counts.
        found.is_none().then_some(())?;
        let (start, mut present) = (s.at, 0);
        s.members(b'{', b'}', |s| {
            let key = s.text()?;
            present |= names.iter().position(|n| *n == key).map_or(0, |i| 1 << i);
            s.space();
            (s.peek()? == b':').then(|| s.at += 1)?;
            s.space();
            s.skip(2)
        })?;
        found = Some((text.get(start..s.at)?, present));
        Some(())
    })?;
    s.space();
    (s.at == text.len()).then_some(())?;
    found
}

/// The string member `name` of the JSON object `text`: `Some(None)` when it has none, `None`
/// where `serde_json` must read it (an escape, a member named twice, a value of `name` that
/// is no plain string, text that is no object).
pub(super) fn string_member<'a>(text: &'a str, name: &str) -> Option<Option<&'a str>> {
    let mut s = Scan { text, at: 0 };
    s.space();
    let found = s.string_member(name, 1)?;
    s.space();
    (s.at == text.len()).then_some(found)
}

/// A member name the reader looks for, as a key writes it (with its closing quote).
struct Name {
    quoted: &'static [u8],
    word: NameWord,
}

impl Name {
    const fn new(quoted: &'static [u8]) -> Name {
        Name {
            quoted,
            word: NameWord::of(quoted),
        }
    }
}

/// The envelope's members by position; the first four are a request's.
const ENVELOPE: [Name; 6] = [
    Name::new(b"jsonrpc\""),
    Name::new(b"id\""),
    Name::new(b"method\""),
    Name::new(b"params\""),
    Name::new(b"result\""),
    Name::new(b"error\""),
];

/// A `tools/call`'s params' members, by position.
const CALL_PARAMS: [Name; 5] = [
    Name::new(b"name\""),
    Name::new(b"arguments\""),
    Name::new(b"_meta\""),
    Name::new(b"requestState\""),
    Name::new(b"task\""),
];

/// The members seen so far, one bit each.
struct Seen(u8);

impl Seen {
    /// `None` for a member seen before: `serde_json`'s reader names it.
    fn once(&mut self, bit: u8) -> Option<()> {
        (self.0 & bit == 0).then(|| self.0 |= bit)
    }
}

struct Scan<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Scan<'a> {
    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    fn peek(&self) -> Option<u8> {
        self.bytes().get(self.at).copied()
    }

    fn space(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    /// A `tools/call`'s params, as the derived reader of [`CallParams`] reads an object.
    fn call_params(&mut self) -> Option<CallParams<'a>> {
        let (mut name, mut arguments, mut read, mut state, mut task) =
            (None, None, None, None, None);
        let (mut meta, mut version) = (None, None);
        let mut seen = Seen(0);
        self.object(&CALL_PARAMS, |s, member| {
            let bit = match member {
                Some(i) => 1 << i,
                None => return s.skip(1),
            };
            seen.once(bit)?;
            match bit {
                1 => name = Some(Cow::Borrowed(s.text()?)),
                2 => (arguments, read) = s.arguments()?,
                4 => (meta, version) = s.meta()?,
                8 => state = s.raw_or_null()?,
                _ => task = s.raw_or_null()?,
            }
            Some(())
        })?;
        Some(CallParams {
            name: name?,
            arguments,
            read,
            meta,
            version,
            request_state: state,
            task,
        })
    }

    /// A call's arguments: their text, checked as JSON, and their parts when they nest.
    ///
    /// Why both: arguments that are all scalars, as most are, are checked on their text
    /// against a flat schema (`validate::Flat`), so they are only skipped here. Nested ones
    /// cannot pass that check, and the validator walks their parts: read here, in this
    /// pass, the scan of the members before the first container is all the work done
    /// twice.
    fn arguments(&mut self) -> Option<(Option<&'a str>, Option<Box<Arguments<'a>>>)> {
        let start = self.at;
        let mut nested = false;
        let scalars = self.peek()? == b'{'
            && self
                .members(b'{', b'}', |s| {
                    s.string()?;
                    s.space();
                    (s.peek()? == b':').then(|| s.at += 1)?;
                    s.space();
                    nested = matches!(s.peek()?, b'{' | b'[');
                    if nested {
                        return None;
                    }
                    s.skip(1)
                })
                .is_some();
        let mut read = None;
        if !scalars {
            if self.text.as_bytes()[start] == b'{' && !nested {
                return None;
            }
            self.at = start;
            match Arguments::read_at(self.text, start) {
                Some((parts, end)) => (read, self.at) = (Some(Box::new(parts)), end),
                // Not an object, or past the parts' bounds: checked as JSON only.
                None => self.skip(1)?,
            }
        }
        Some((Some(self.text.get(start..self.at)?), read))
    }

    /// An object at this place, each member's value read by `member` given which of `names`
    /// it is, if any.
    fn object<const N: usize>(
        &mut self,
        names: &[Name; N],
        mut member: impl FnMut(&mut Self, Option<usize>) -> Option<()>,
    ) -> Option<()> {
        self.members(b'{', b'}', |s| {
            let name = s.name(names)?;
            s.space();
            (s.peek()? == b':').then(|| s.at += 1)?;
            s.space();
            member(s, name)
        })
    }

    /// A container from `open` to `close`, each member read by `member` after the space
    /// before it.
    fn members(
        &mut self,
        open: u8,
        close: u8,
        mut member: impl FnMut(&mut Self) -> Option<()>,
    ) -> Option<()> {
        (self.peek()? == open).then(|| self.at += 1)?;
        self.space();
        if self.peek()? == close {
            self.at += 1;
            return Some(());
        }
        loop {
            self.space();
            member(self)?;
            self.space();
            match self.peek()? {
                b',' => self.at += 1,
                b if b == close => {
                    self.at += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// Which of `names` the member name here is: compared as written, a word each, else
    /// read (a key near the text's end, or another name). Inlined over a fixed list, the
    /// comparisons unroll, and cost less than reading the key (docs/performance.md).
    #[inline(always)]
    fn name<const N: usize>(&mut self, names: &[Name; N]) -> Option<Option<usize>> {
        if let Some((key, first)) = key_first_word(&self.bytes()[self.at..])
            && let Some(i) = names
                .iter()
                .position(|n| n.word.starts(n.quoted, key, first))
        {
            self.at += 1 + names[i].quoted.len();
            return Some(Some(i));
        }
        let name = self.text()?.as_bytes();
        let found = |n: &Name| n.quoted.strip_suffix(b"\"").is_some_and(|q| q == name);
        Some(names.iter().position(found))
    }

    /// The value here, checked as JSON, as the text it was written as.
    fn text_of(&mut self) -> Option<&'a str> {
        let start = self.at;
        self.skip(1)?;
        self.text.get(start..self.at)
    }

    /// The value here as a raw JSON value, which only `serde_json` can make: it reads the
    /// value again (about 0.5k instructions for a short one). A call's arguments, the long
    /// member of a request, are kept as text and parts instead, and its `_meta` as text.
    fn raw(&mut self) -> Option<&'a RawValue> {
        serde_json::from_str(self.text_of()?).ok()
    }

    /// As [`Self::raw`], with `null` read as no value (an `Option`'s reading).
    fn raw_or_null(&mut self) -> Option<Option<&'a RawValue>> {
        if self.word(b"null").is_some() {
            return Some(None);
        }
        self.raw().map(Some)
    }

    /// A call's `_meta` (`null` read as none, an `Option`'s reading) and the protocol
    /// version it names, read in this pass: each 2026-07-28 request names it there, and its
    /// era and header rules go by it. A name with an escape, the version named twice or as
    /// no plain string, leave the message to `serde_json`.
    fn meta(&mut self) -> Option<(Option<&'a str>, Option<&'a str>)> {
        if self.word(b"null").is_some() {
            return Some((None, None));
        }
        let start = self.at;
        let version = if self.peek()? == b'{' {
            self.string_member(META_PROTOCOL_VERSION, 2)?
        } else {
            self.skip(1)?;
            None
        };
        Some((Some(self.text.get(start..self.at)?), version))
    }

    /// The object here, and its string member `name` (`None` when it has none); the
    /// object's other members skipped at `depth`. A name with an escape, `name` given twice
    /// or as no plain string, give `None` whole.
    fn string_member(&mut self, name: &str, depth: usize) -> Option<Option<&'a str>> {
        let mut found = None;
        self.members(b'{', b'}', |s| {
            let key = s.text()?;
            s.space();
            (s.peek()? == b':').then(|| s.at += 1)?;
            s.space();
            if key != name {
                return s.skip(depth);
            }
            found.is_none().then_some(())?;
            found = Some(s.text()?);
            Some(())
        })?;
        Some(found)
    }

    /// A string without escapes, or `null`.
    fn text_or_null(&mut self) -> Option<Option<&'a str>> {
        if self.word(b"null").is_some() {
            return Some(None);
        }
        self.text().map(Some)
    }

    /// A string without escapes: what it says.
    fn text(&mut self) -> Option<&'a str> {
        (self.peek()? == b'"').then_some(())?;
        let start = self.at + 1;
        let end = start + string_stop(self.bytes().get(start..)?)?;
        (self.bytes()[end] == b'"').then_some(())?;
        self.at = end + 1;
        self.text.get(start..end)
    }

    /// Skips the value here, checking it as `serde_json` checks a value it skips. A scalar
    /// is skipped in its container's loop, and only a container is a call of its own: a
    /// call's arguments are mostly scalars, and a call for each cost more than its skip.
    #[inline(always)]
    fn skip(&mut self, depth: usize) -> Option<()> {
        match self.peek()? {
            b'"' => self.string(),
            b'-' | b'0'..=b'9' => self.number(),
            b't' => self.word(b"true"),
            b'f' => self.word(b"false"),
            b'n' => self.word(b"null"),
            _ => self.container(depth),
        }
    }

    fn container(&mut self, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        match self.peek()? {
            b'{' => self.members(b'{', b'}', |s| {
                s.string()?;
                s.space();
                (s.peek()? == b':').then(|| s.at += 1)?;
                s.space();
                s.skip(depth + 1)
            }),
            b'[' => self.members(b'[', b']', |s| s.skip(depth + 1)),
            _ => None,
        }
    }

    fn word(&mut self, word: &[u8]) -> Option<()> {
        self.bytes()[self.at..]
            .starts_with(word)
            .then(|| self.at += word.len())
    }

    /// Skips a string: no control character, and only the escapes that stand for one
    /// character (`\u` is left to `serde_json`, which knows its surrogates).
    #[inline(always)]
    fn string(&mut self) -> Option<()> {
        (self.peek()? == b'"').then_some(())?;
        let bytes = self.bytes();
        let mut at = self.at + 1;
        loop {
            at += string_stop(bytes.get(at..)?)?;
            match bytes[at] {
                b'"' => {
                    self.at = at + 1;
                    return Some(());
                }
                b'\\'
                    if matches!(
                        bytes.get(at + 1)?,
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't'
                    ) =>
                {
                    at += 2
                }
                _ => return None,
            }
        }
    }

    /// Skips a number written as JSON writes one: `-`, then `0` or digits not starting with
    /// `0`, then an optional fraction and exponent, each with at least one digit.
    fn number(&mut self) -> Option<()> {
        let bytes = self.bytes();
        let digits = |at: usize| {
            bytes
                .get(at..)
                .map_or(0, |r| r.iter().take_while(|b| b.is_ascii_digit()).count())
        };
        let mut at = self.at + usize::from(bytes[self.at] == b'-');
        match bytes.get(at)? {
            b'0' => at += 1,
            b'1'..=b'9' => at += digits(at),
            _ => return None,
        }
        if bytes.get(at) == Some(&b'.') {
            let n = digits(at + 1);
            (n > 0).then_some(())?;
            at += 1 + n;
        }
        if matches!(bytes.get(at), Some(b'e' | b'E')) {
            at += 1 + usize::from(matches!(bytes.get(at + 1), Some(b'+' | b'-')));
            let n = digits(at);
            (n > 0).then_some(())?;
            at += n;
        }
        self.at = at;
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_the_plain_shapes_of_requests() {
        for text in [
            r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
            r#" { "jsonrpc" : "2.0" , "id" : "a-1" , "method" : "tools/list" , "x" : { } } "#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t","arguments":{"s":"a\"b\\c\n","n":[-0.5e+3,0,1E2,true,false,null,{}]},"_meta":{"progressToken":1},"task":null,"other":[1]}}"#,
        ] {
            let env = envelope(text);
            assert!(env.is_some(), "{text}");
            assert!(super::super::read_alike(text), "{text}");
        }
        let Some(Params::Call(call)) = envelope(
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t","arguments": {"a" : 1} ,"_meta":null}}"#,
        )
        .and_then(|e| e.params) else {
            panic!("a call's params read typed")
        };
        assert_eq!((&*call.name, call.arguments), ("t", Some(r#"{"a" : 1}"#)));
        assert!(
            call.meta.is_none(),
            "a null `_meta` is none, as an `Option` reads it"
        );
    }

    #[test]
    fn a_calls_protocol_version_is_read_in_the_pass() {
        let call = |meta: &str| {
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"t","_meta":{meta}}}}}"#
            )
        };
        fn version(text: &str) -> Option<Option<&str>> {
            match envelope(text).and_then(|e| e.params) {
                Some(Params::Call(c)) => Some(c.version),
                _ => None,
            }
        }
        for (meta, read) in [
            (
                r#"{"io.modelcontextprotocol/clientCapabilities":{"x":[{}]},"io.modelcontextprotocol/protocolVersion":"2026-07-28"}"#,
                Some("2026-07-28"),
            ),
            (r#"{"progressToken":"a\nb"}"#, None),
            (
                r#"{"x":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}"#,
                None,
            ),
            ("null", None),
            ("[1]", None),
        ] {
            let text = call(meta);
            assert_eq!(version(&text), Some(read), "{meta}");
            assert!(super::super::read_alike(&text), "{meta}");
        }
        for given_way in [
            r#"{"io.modelcontextprotocol/protocolVersion":1}"#,
            r#"{"io.modelcontextprotocol/protocolVersion":"a","io.modelcontextprotocol/protocolVersion":"a"}"#,
            r#"{"io.modelcontextprotocol\/protocolVersion":"2026-07-28"}"#,
        ] {
            assert_eq!(version(&call(given_way)), None, "{given_way}");
            assert!(super::super::read_alike(&call(given_way)), "{given_way}");
        }
    }

    #[test]
    fn a_plain_string_member_is_read_by_hand_and_anything_else_left_to_serde_json() {
        const V: &str = "io.modelcontextprotocol/protocolVersion";
        let read = |text| string_member(text, V);
        let plain = r#" { "io.modelcontextprotocol/clientCapabilities" : {"a":[1,{"b":null}]}, "io.modelcontextprotocol/protocolVersion" : "2026-07-28" } "#;
        assert_eq!(read(plain), Some(Some("2026-07-28")));
        assert!(super::super::string_member_read_alike(plain, V));
        assert_eq!(
            read(r#"{"progressToken":1,"x":{"io.modelcontextprotocol/protocolVersion":"no"}}"#),
            Some(None)
        );
        assert_eq!(read("{}"), Some(None));
        for given_way in [
            r#"{"io.modelcontextprotocol/protocolVersion":"a","io.modelcontextprotocol/protocolVersion":"a"}"#,
            r#"{"io.modelcontextprotocol/protocolVersion":"2026\u002d07-28"}"#,
            r#"{"io.modelcontextprotocol/protocolVersion":20260728}"#,
            r#"{"io.modelcontextprotocol/protocolVersion":null}"#,
            r#"{"k\n":1,"io.modelcontextprotocol/protocolVersion":"2026-07-28"}"#,
            r#"["io.modelcontextprotocol/protocolVersion"]"#,
            r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28"} x"#,
        ] {
            assert_eq!(read(given_way), None, "{given_way}");
        }
    }

    #[test]
    fn member_names_are_told_as_written_and_at_the_text_end() {
        for text in [
            // Names that start as a known one, or that one starts as.
            r#"{"jsonrpcx":1,"ids":2,"i":3,"method2":4,"jsonrpc":"2.0","id":1,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"names":0,"nam":1,"argumentsX":{},"argument":2,"requestStateX":3,"name":"t","arguments":{}}}"#,
            // Known names too near the text's end for a word: read as text.
            r#"{"method":"m","jsonrpc":"2.0","id":1}"#,
            r#"{"jsonrpc":"2.0","method":"tools/call","id":7,"params":{"arguments":{},"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","task":null}}"#,
        ] {
            assert!(envelope(text).is_some(), "{text}");
            assert!(super::super::read_alike(text), "{text}");
        }
        let env = envelope(r#"{"ids":2,"id":5,"method":"m","jsonrpcx":"1.0","jsonrpc":"2.0"}"#)
            .expect("read by hand");
        assert_eq!(env.id.map(RawValue::get), Some("5"));
        assert_eq!(env.jsonrpc, Some(r#""2.0""#));
        // A name met twice, once told by its word and once read at the end, is left to
        // `serde_json`, as any name met twice.
        let twice = r#"{"id":1,"jsonrpc":"2.0","method":"m","id":2}"#;
        assert!(envelope(twice).is_none(), "{twice}");
    }

    #[test]
    fn arguments_are_read_into_parts_only_when_they_nest() {
        let call = |arguments: &str| {
            let text = format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"t","arguments":{arguments}}}}}"#
            );
            assert!(super::super::read_alike(&text), "{text}");
            match envelope(&text).and_then(|e| e.params) {
                Some(Params::Call(c)) => (c.arguments.map(str::to_owned), c.read.is_some()),
                _ => panic!("{text} reads"),
            }
        };
        for (arguments, in_parts) in [
            (r#"{"a":"x","b":1,"c":true,"d":null}"#, false),
            (r#"{}"#, false),
            (r#"{"a":"x","b":[1,{"c":2}]}"#, true),
            (r#"{"a":{}}"#, true),
            (r#"[1]"#, false),
            (r#"7"#, false),
        ] {
            assert_eq!(
                call(arguments),
                (Some(arguments.into()), in_parts),
                "{arguments}"
            );
        }
        for not_json in [r#"{"a":tru}"#, r#"{"a":1,}"#, r#"{"a":[1,}"#] {
            let text = format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"t","arguments":{not_json}}}}}"#
            );
            assert!(envelope(&text).is_none(), "{text}");
        }
    }

    #[test]
    fn leaves_to_serde_json_what_it_does_not_take() {
        for text in [
            // A member's name, or any string, with an escape `serde_json` must decode.
            r#"{"jsonrpc":"2.0","\u0069d":1,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":"\u00e9","method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools\/call","params":{"name":"t"}}"#,
            // A member named twice, in the envelope or a call's params.
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","name":"u"}}"#,
            // A call's params the derived reader refuses: no name, a name of another type,
            // an array.
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":7}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":["t",{}]}"#,
            // Not JSON: a control character in a string, a leading zero, a trailing comma,
            // text after the message, a bare word.
            "{\"jsonrpc\":\"2.0\",\"id\":\"a\tb\",\"method\":\"ping\"}",
            r#"{"jsonrpc":"2.0","id":01,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":[1,],"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping"} x"#,
            r#"{"jsonrpc":"2.0","id":nul,"method":"ping"}"#,
            r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
            // A member kept raw that `serde_json` would have to scan again: a response's
            // result or error, another method's params.
            r#"{"jsonrpc":"2.0","id":3,"result":{"content":[]}}"#,
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"no"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":"c"}}"#,
        ] {
            assert!(envelope(text).is_none(), "{text}");
        }
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"m","params":{}{}}}"#,
            "[".repeat(MAX_DEPTH + 1),
            "]".repeat(MAX_DEPTH + 1)
        );
        assert!(envelope(&deep).is_none(), "nesting past the bound");
    }
}
