//! A `pattern` of the plain shape most tools declare (`^[A-Z]{3}$`, `^\d{2}/\d{2}/\d{4}$`,
//! `^[a-z0-9_-]+$`), matched by one loop over the string's bytes.
//!
//! Why: through `jsonschema`'s regex engine each such pattern cost about 0.4k instructions
//! per string matched, most of it the engine's layers, its search's start and its cache's
//! pool, not the string; a validated call with three patterns spent more on them than on
//! the rest of its schema. The loop costs a few instructions a byte.
//!
//! The shape: anchored at both ends, a sequence of atoms, each an ASCII character, `\d`,
//! `\w` or a class of those (ranges too), with `?`, `*`, `+` or `{n}`, `{n,}`, `{n,m}`. An
//! atom whose count may vary never shares a character with what can follow it, so its run
//! is the longest one and the loop never has to go back. Anything else (alternation,
//! groups, `.`, `\s`, negated classes, a non-ASCII character, `\<` and `\>`, which the
//! engine reads as word boundaries) is left to the engine.
//!
//! Only the check of arguments in place uses it (`catalog::InPlaceCheck`), and only for a
//! schema whose every pattern has this shape ([`plain_everywhere`]). It accepts exactly the
//! strings `jsonschema` accepts, whose translation of ECMA-262 reads `\d` and `\w` as ASCII
//! classes too; the check by value keeps `jsonschema`'s own, so a refusal's report reads as
//! before.

use jsonschema::json::{Json, Node};
use jsonschema::paths::Location;
use jsonschema::{Keyword, ValidationError};
use serde_json::{Map, Value};

/// A plain pattern, compiled.
#[derive(Debug)]
pub(crate) struct PlainPattern {
    atoms: Box<[Atom]>,
    /// No atom takes `"` or `\`: a match over a JSON string's text, as written, stops at
    /// its closing quote or at its first escape ([`Self::quoted_match`]).
    quote_free: bool,
}

/// One character class repeated `min` to `max` times.
#[derive(Debug, Clone, Copy)]
struct Atom {
    /// The ASCII characters it takes, one bit each, in two words: a shift of a `u128` by a
    /// variable amount takes several instructions and a branch.
    set: [u64; 2],
    min: u32,
    max: u32,
}

/// Counts past this are left to the engine, which bounds its own compiled size.
const MAX_COUNT: u32 = 1000;

const DIGITS: u128 = ((1 << 10) - 1) << b'0';
const WORD: u128 = DIGITS | (((1 << 26) - 1) << b'A') | (((1 << 26) - 1) << b'a') | 1 << b'_';

impl Atom {
    fn new(set: u128, (min, max): (u32, u32)) -> Atom {
        let set = [set as u64, (set >> 64) as u64];
        Atom { set, min, max }
    }

    fn takes(&self, b: u8) -> bool {
        b < 128 && self.set[usize::from(b >> 6)] >> (b & 63) & 1 == 1
    }

    fn shares_with(&self, other: &Atom) -> bool {
        self.set[0] & other.set[0] != 0 || self.set[1] & other.set[1] != 0
    }

    fn varies(&self) -> bool {
        self.min != self.max
    }
}

impl PlainPattern {
    /// The pattern, when it has the plain shape.
    pub(crate) fn parse(pattern: &str) -> Option<PlainPattern> {
        let body = pattern.strip_prefix('^')?.strip_suffix('$')?;
        let mut p = Parser {
            rest: body.as_bytes(),
        };
        let mut atoms = Vec::new();
        while let Some(set) = p.atom()? {
            atoms.push(Atom::new(set, p.count()?));
        }
        let quote_free = !atoms.iter().any(|a| a.takes(b'"') || a.takes(b'\\'));
        deterministic(&atoms).then(|| PlainPattern {
            atoms: atoms.into(),
            quote_free,
        })
    }

    pub(crate) fn is_match(&self, text: &str) -> bool {
        self.run(text.as_bytes()) == Some(text.len())
    }

    /// The length of a JSON string this pattern matches, read from just after its opening
    /// quote (`rest`), when the string has no escape. `None` when the pattern does not
    /// match the string's text up to its closing quote as written: the string may still
    /// match once its escapes are read.
    ///
    /// Why: the string's end is then found by the match itself, not by a scan for it first.
    pub(crate) fn quoted_match(&self, rest: &[u8]) -> Option<usize> {
        if !self.quote_free {
            return None;
        }
        let end = self.run(rest)?;
        (rest.get(end) == Some(&b'"')).then_some(end)
    }

    /// Where a match at the start of `text` ends: each atom's longest run, when each is long
    /// enough.
    fn run(&self, text: &[u8]) -> Option<usize> {
        let mut at = 0usize;
        for atom in &self.atoms {
            let start = at;
            let limit = text.len().min(start.saturating_add(atom.max as usize));
            while at < limit && atom.takes(text[at]) {
                at += 1;
            }
            if at - start < atom.min as usize {
                return None;
            }
        }
        Some(at)
    }
}

/// Whether each atom whose count varies shares no character with any atom that may come
/// right after it (those up to the next that must match once, and that one): then its run
/// in a match is the longest one.
fn deterministic(atoms: &[Atom]) -> bool {
    atoms.iter().enumerate().all(|(i, atom)| {
        if !atom.varies() {
            return true;
        }
        for next in &atoms[i + 1..] {
            if next.shares_with(atom) {
                return false;
            }
            if next.min > 0 {
                break;
            }
        }
        true
    })
}

struct Parser<'a> {
    rest: &'a [u8],
}

impl Parser<'_> {
    fn next(&mut self) -> Option<u8> {
        let (&b, rest) = self.rest.split_first()?;
        self.rest = rest;
        Some(b)
    }

    fn peek(&self) -> Option<u8> {
        self.rest.first().copied()
    }

    /// The next atom's set; `Some(None)` at the end, `None` for what is not plain.
    fn atom(&mut self) -> Option<Option<u128>> {
        let Some(b) = self.next() else {
            return Some(None);
        };
        let set = match b {
            b'[' => self.class()?,
            b'\\' => self.escape()?,
            _ if literal(b) => 1 << b,
            _ => return None,
        };
        Some(Some(set))
    }

    /// After `\`: `\d`, `\w`, or an escaped ASCII punctuation character other than `<` and
    /// `>`, which the engine reads as word boundaries (ECMA-262, as the characters).
    fn escape(&mut self) -> Option<u128> {
        match self.next()? {
            b'd' => Some(DIGITS),
            b'w' => Some(WORD),
            b'<' | b'>' => None,
            b if b.is_ascii_punctuation() => Some(1 << b),
            _ => None,
        }
    }

    /// After `[`: its members up to `]`. A negated class, an empty one, nested classes and
    /// the set operators of the engine's syntax (`&&`, `~~`, `--`) are not plain.
    fn class(&mut self) -> Option<u128> {
        let mut set = 0u128;
        let mut first = true;
        loop {
            let b = self.next()?;
            match b {
                b']' if !first => return Some(set),
                b'^' if first => return None,
                b'[' | b'&' | b'~' | b']' => return None,
                b'\\' => {
                    let escaped = self.escape()?;
                    set |= self.range_from(escaped)?;
                }
                b'-' if first || self.peek() == Some(b']') => set |= 1 << b'-',
                b'-' => return None,
                _ if literal_in_class(b) => set |= self.range_from(1 << b)?,
                _ => return None,
            }
            first = false;
        }
    }

    /// `one` (a member just read), or the range it starts when a `-` and an end follow.
    fn range_from(&mut self, one: u128) -> Option<u128> {
        if self.peek() != Some(b'-') || self.rest.get(1).is_none_or(|&b| b == b']') {
            return Some(one);
        }
        self.next();
        let end = match self.next()? {
            b'\\' => self.escape()?,
            b if literal_in_class(b) => 1 << b,
            _ => return None,
        };
        // Both ends single characters, in order.
        let (lo, hi) = (one.trailing_zeros(), end.trailing_zeros());
        let single = one.count_ones() == 1 && end.count_ones() == 1;
        (single && lo <= hi).then(|| (u128::MAX >> (127 - hi)) & (u128::MAX << lo))
    }

    /// The count after an atom: `?`, `*`, `+`, `{n}`, `{n,}`, `{n,m}`, or once. A lazy or
    /// possessive count is not plain.
    fn count(&mut self) -> Option<(u32, u32)> {
        let count = match self.peek() {
            Some(b'?') => (0, 1),
            Some(b'*') => (0, u32::MAX),
            Some(b'+') => (1, u32::MAX),
            Some(b'{') => {
                self.next();
                return self.braces();
            }
            _ => return Some((1, 1)),
        };
        self.next();
        if matches!(self.peek(), Some(b'?' | b'+')) {
            return None;
        }
        Some(count)
    }

    fn braces(&mut self) -> Option<(u32, u32)> {
        let min = self.number()?;
        let max = match self.next()? {
            b'}' => min,
            b',' if self.peek() == Some(b'}') => {
                self.next();
                u32::MAX
            }
            b',' => {
                let max = self.number()?;
                (self.next()? == b'}').then_some(max)?
            }
            _ => return None,
        };
        let lazy = matches!(self.peek(), Some(b'?' | b'+'));
        (min <= max && !lazy).then_some((min, max))
    }

    fn number(&mut self) -> Option<u32> {
        let mut n: u32 = 0;
        let mut digits = 0;
        while let Some(d @ b'0'..=b'9') = self.peek() {
            self.next();
            n = n * 10 + u32::from(d - b'0');
            digits += 1;
            if n > MAX_COUNT {
                return None;
            }
        }
        (digits > 0).then_some(n)
    }
}

/// A character that stands for itself outside a class.
fn literal(b: u8) -> bool {
    (b.is_ascii_graphic() || b == b' ') && !b"\\^$.|?*+()[]{}".contains(&b)
}

/// A character that stands for itself inside a class (`-`, `]`, `[`, `^` and the set
/// operators' characters are read apart).
fn literal_in_class(b: u8) -> bool {
    (b.is_ascii_graphic() || b == b' ') && !b"\\]-[^&~".contains(&b)
}

/// Whether every `pattern` in `schema` has the plain shape: the keyword replaces the
/// engine for all of a validator's patterns or none. Any member so named counts, wherever
/// it is, rather than following the schema's keywords: one inside a `const` that is not
/// plain costs only the loop's speed, never a wrong answer.
pub(crate) fn plain_everywhere(schema: &Value) -> bool {
    match schema {
        Value::Object(members) => members.iter().all(|(name, value)| {
            let plain = match (name.as_str(), value) {
                ("pattern", Value::String(p)) => PlainPattern::parse(p).is_some(),
                _ => true,
            };
            plain && plain_everywhere(value)
        }),
        Value::Array(items) => items.iter().all(plain_everywhere),
        _ => true,
    }
}

/// The `pattern` keyword for a validator whose schema is [`plain_everywhere`].
pub(crate) fn keyword<'a, F: Json>(
    _: &'a Map<String, Value>,
    pattern: &'a Value,
    _: Location,
) -> Result<Box<dyn for<'i> Keyword<'i, F>>, ValidationError<'a>> {
    pattern
        .as_str()
        .and_then(PlainPattern::parse)
        .map(|p| Box::new(p) as Box<dyn for<'i> Keyword<'i, F>>)
        .ok_or_else(|| ValidationError::custom("not a plain pattern"))
}

impl<'i, F: Json> Keyword<'i, F> for PlainPattern {
    fn validate(&self, instance: F::Node<'i>) -> Result<(), ValidationError<'i>> {
        if <Self as Keyword<'i, F>>::is_valid(self, instance) {
            Ok(())
        } else {
            Err(ValidationError::custom("does not match the pattern"))
        }
    }

    /// A value that is no string matches, as JSON Schema's `pattern` says.
    fn is_valid(&self, instance: F::Node<'i>) -> bool {
        instance.as_string().is_none_or(|s| self.is_match(&s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn plain_shapes_parse_and_others_are_left_to_the_engine() {
        for plain in [
            "^[A-Z]{3}$",
            r"^\d{2}/\d{2}/\d{4}$",
            "^[a-z0-9_-]+$",
            "^[-a-z]*$",
            r"^\w+$",
            r"^[a-z]+-\d+$",
            "^v?[0-9]+$",
            "^ab{2,}c$",
            r"^\$\d+$",
            "^$",
            "^[a-zA-Z][a-zA-Z0-9 ]{0,63}$",
        ] {
            assert!(PlainPattern::parse(plain).is_some(), "{plain}");
        }
        for other in [
            "[A-Z]{3}",
            "^[A-Z]{3}",
            "^(a|b)$",
            "^a.c$",
            r"^\s+$",
            "^[^a]+$",
            "^[]a]$",
            "^[a-]b]$",
            "^[a--z]$",
            "^[a&&b]$",
            "^[[a]]$",
            "^a+?$",
            "^a{2}?$",
            "^a{3,2}$",
            "^a{1001}$",
            "^a{x}$",
            r"^\b$",
            r"^\u0041$",
            "^é$",
            "^[a-z]*[a-z]$",
            "^a*a?$",
            "^[z-a]$",
            r"^[\d-z]$",
            "^a$b$",
            r"^a\<b$",
            r"^[\>]$",
        ] {
            assert!(PlainPattern::parse(other).is_none(), "{other}");
        }
    }

    /// Every string over an alphabet that meets each atom's edges, up to a length, is
    /// matched as `jsonschema`'s own `pattern` matches it.
    #[test]
    fn a_plain_pattern_accepts_what_the_engine_accepts() {
        let patterns = [
            "^[A-Z]{3}$",
            r"^\d{2}/\d{2}$",
            "^[a-c_-]+$",
            r"^a?\d*b{1,2}$",
            r"^[a-b]+-\d+$",
            "^x{2,}$",
            "^$",
            r"^\w{0,3}!$",
        ];
        let alphabet = [
            "A", "Z", "a", "b", "c", "x", "_", "-", "0", "9", "/", "!", "é", " ",
        ];
        for pattern in patterns {
            let plain = PlainPattern::parse(pattern).unwrap();
            let engine = jsonschema::options()
                .with_pattern_options(jsonschema::PatternOptions::regex())
                .build(&json!({"pattern": pattern}))
                .unwrap();
            let mut strings = vec![String::new()];
            for _ in 0..5 {
                let longer: Vec<String> = strings
                    .iter()
                    .flat_map(|s| alphabet.iter().map(move |c| format!("{s}{c}")))
                    .collect();
                for s in &longer {
                    assert_eq!(
                        plain.is_match(s),
                        engine.is_valid(&json!(s)),
                        "{pattern} against {s:?}"
                    );
                }
                strings = longer.into_iter().filter(|s| s.len() < 5).collect();
                strings.truncate(3000);
            }
        }
    }

    /// Patterns made at random from atoms and counts: each one judged plain compiles in the
    /// engine and matches random strings as it does.
    #[test]
    fn random_plain_patterns_match_as_the_engine() {
        let atoms = [
            "a", "b", "-", "_", r"\d", r"\w", "[a-c]", "[ab-]", "[-a]", r"[\d_]", r"[a\-z]", r"\.",
            r"\-", "/", " ", "[A-Z0-9]", "[z]", r"\<", r"[\<a]", r"\/", "<", r"\>", r"\_", "#",
            r"\#", r"[\]a]", r"[\[]", r"[\.-z]", r"[ -/]", "[#]", r"\\", r"[\\]",
        ];
        let counts = ["", "", "?", "*", "+", "{2}", "{1,2}", "{0,}", "{2,3}"];
        let chars = [
            "a", "b", "c", "z", "-", "_", "0", "9", ".", "/", " ", "é", "A", "\\", "<", "#", "]",
            "[",
        ];
        let mut below = crate::validate::draws(0x9e37_79b9_7f4a_7c15);
        let (mut judged, mut matched) = (0, 0);
        for _ in 0..3000 {
            let mut pattern = String::from("^");
            for _ in 0..1 + below(4) {
                pattern.push_str(atoms[below(atoms.len())]);
                pattern.push_str(counts[below(counts.len())]);
            }
            pattern.push('$');
            let Some(plain) = PlainPattern::parse(&pattern) else {
                continue;
            };
            judged += 1;
            let engine = jsonschema::options()
                .with_pattern_options(jsonschema::PatternOptions::regex())
                .build(&json!({"pattern": pattern}))
                .unwrap_or_else(|e| panic!("{pattern} is judged plain but does not compile: {e}"));
            for i in 0..50 {
                let s = if i % 2 == 0 {
                    (0..below(7)).map(|_| chars[below(chars.len())]).collect()
                } else {
                    near_match(&plain, &mut below)
                };
                let is = plain.is_match(&s);
                assert_eq!(is, engine.is_valid(&json!(s)), "{pattern} against {s:?}");
                matched += usize::from(is);
            }
        }
        assert!(judged > 500, "only {judged} patterns were plain");
        assert!(matched > judged * 10, "only {matched} strings matched");
    }

    /// A string each atom takes a run of, one character of it sometimes changed.
    fn near_match(plain: &PlainPattern, below: &mut impl FnMut(usize) -> usize) -> String {
        let mut s = Vec::new();
        for atom in &plain.atoms {
            let members: Vec<u8> = (0..128u8).filter(|&b| atom.takes(b)).collect();
            let max = atom.max.min(atom.min + 2);
            for _ in 0..atom.min + below((max - atom.min + 1) as usize) as u32 {
                s.push(members[below(members.len())]);
            }
        }
        if !s.is_empty() && below(3) == 0 {
            let at = below(s.len());
            s[at] = b"a-_0. "[below(6)];
        }
        String::from_utf8(s).unwrap()
    }

    #[test]
    fn a_schema_is_plain_only_where_every_pattern_is() {
        let plain =
            json!({"properties": {"a": {"pattern": "^[a-z]+$"}, "pattern": {"type": "string"}}});
        assert!(plain_everywhere(&plain));
        let mixed = json!({"properties": {"a": {"pattern": "^[a-z]+$"}, "b": {"items": [{"pattern": "^(x|y)$"}]}}});
        assert!(!plain_everywhere(&mixed));
    }
}
