//! Small text encodings more than one module reads or writes.

/// Whether `$haystack` holds `$needle` (a constant). Its searcher is built once per call site:
/// building one per search costs more than searching a message with it, and these searches
/// run on every message (measured in docs/performance.md).
macro_rules! holds {
    ($haystack:expr, $needle:expr) => {{
        static FINDER: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
            std::sync::LazyLock::new(|| memchr::memmem::Finder::new($needle));
        FINDER.find(AsRef::<[u8]>::as_ref($haystack)).is_some()
    }};
}
pub(crate) use holds;

/// The byte order mark a text may open with. A reader of JSON (RFC 8259) and of an event
/// stream (the SSE standard) may ignore it, and the TypeScript SDK's client does; Python's
/// `json` refuses a message that opens with one.
pub(crate) const BOM: &[u8] = "\u{feff}".as_bytes();

/// `bytes` without the byte order mark they may open with: a message read so (from a client
/// or from a server) is parsed and passed on as if it had none, so that a peer that refuses
/// the mark never sees it.
pub(crate) fn without_bom(bytes: bytes::Bytes) -> bytes::Bytes {
    match bytes.starts_with(BOM) {
        true => bytes.slice(BOM.len()..),
        false => bytes,
    }
}

/// A JSON message as one line, as MCP's stdio transport delimits messages. In JSON text a
/// CR or an LF can only be whitespace (a string holds them escaped), so each becomes a
/// space: a message a client sent pretty-printed over HTTP, or a server's SSE event whose
/// data lines were joined, holds some, and written as it is it would reach a stdio peer as
/// several lines that are no message. The message itself, uncopied, when it holds none.
pub(crate) fn one_line(message: bytes::Bytes) -> bytes::Bytes {
    if memchr::memchr2(b'\n', b'\r', &message).is_none() {
        return message;
    }
    let mut line = message.to_vec();
    line_breaks_as_spaces(&mut line);
    line.into()
}

/// The same in place: each CR and LF of a JSON text made a space.
pub(crate) fn line_breaks_as_spaces(json: &mut [u8]) {
    if memchr::memchr2(b'\n', b'\r', json).is_none() {
        return;
    }
    for b in json {
        if matches!(*b, b'\n' | b'\r') {
            *b = b' ';
        }
    }
}

/// What `s` holds inside a Markdown code block, as a model writes JSON text when it writes
/// it for a reader (a fence of three backticks, the language's word after the first if any,
/// ```` ```json\n{"a": 1}\n``` ````); `None` when `s` is no such block.
pub(crate) fn unfenced(s: &str) -> Option<&str> {
    let inside = s.trim().strip_prefix("```")?.strip_suffix("```")?;
    let word = inside.bytes().take_while(u8::is_ascii_alphanumeric).count();
    let rest = &inside[word..];
    let block = match rest.starts_with(|c: char| c.is_ascii_whitespace()) {
        true => rest,
        false if word == 0 => inside,
        false => return None,
    };
    Some(block.trim()).filter(|b| !b.contains("```"))
}

/// `s` with its `%XX` escapes decoded; `None` when an escape is malformed or the result is not
/// UTF-8.
pub fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// One reference token of a JSON pointer (RFC 6901): `~` and `/` escaped.
pub fn pointer_token(seg: &str) -> String {
    seg.replace('~', "~0").replace('/', "~1")
}

/// At most the first `max` bytes of `s`, cut at a character boundary: what a log line shows
/// of a name a client made up, which may be megabytes long.
pub fn clipped(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Edits (insertions, deletions, substitutions and swaps of two neighbours) from `a` to `b`
/// when they are at most `k`, else `None`. A swap is the most common typing slip, so it
/// counts as one. Only the cells within `k` of the diagonal are computed, three rows at a
/// time, so the cost is `len × k` in time and `len` in memory, not `len²`.
pub(crate) fn edit_distance_within(a: &[char], b: &[char], k: usize) -> Option<usize> {
    if a.len().abs_diff(b.len()) > k {
        return None;
    }
    // What both begin and end with costs no edit: names near one another share most of
    // their text, and only what differs is compared.
    let same_start = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let (a, b) = (&a[same_start..], &b[same_start..]);
    let same_end = (a.iter().rev().zip(b.iter().rev()))
        .take_while(|(x, y)| x == y)
        .count();
    let (a, b) = (&a[..a.len() - same_end], &b[..b.len() - same_end]);
    let far = k + 1;
    let width = b.len() + 1;
    let (mut older, mut prev, mut row) = (vec![far; width], vec![far; width], vec![far; width]);
    for (j, cell) in prev.iter_mut().enumerate().take(k.min(b.len()) + 1) {
        *cell = j;
    }
    for i in 1..=a.len() {
        let (from, to) = (i.saturating_sub(k).max(1), (i + k).min(b.len()));
        // Only the band is read, and its two edges: the cell before it (this row's left
        // neighbour) and the one after it (the next row's upper right). Each is set here,
        // so what the row held two rows ago is never read, and the row costs its band.
        row[from - 1] = if from == 1 && i <= k { i } else { far };
        if let Some(after) = row.get_mut(to + 1) {
            *after = far;
        }
        let mut nearest = row[from - 1];
        for j in from..=to {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut d = (prev[j] + 1).min(row[j - 1] + 1).min(prev[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d = d.min(older[j - 2] + 1);
            }
            row[j] = d.min(far);
            nearest = nearest.min(row[j]);
        }
        // No cell comes back under what a row before it holds but by a swap, which costs
        // one over the row two before: a row past `k` ends the search, so names far apart
        // cost a few rows, not their length.
        if nearest > k {
            return None;
        }
        std::mem::swap(&mut older, &mut prev);
        std::mem::swap(&mut prev, &mut row);
    }
    Some(prev[b.len()]).filter(|d| *d <= k)
}

/// Where a JSON string's text stops, read from just after its opening quote: its closing
/// quote, an escape, or a control character (which no JSON string may hold). Eight bytes at
/// a time: a loop over bytes costs about five instructions a byte, and `memchr`'s setup
/// more than the scan of a short string, as most in a request are.
#[inline(always)]
pub(crate) fn string_stop(rest: &[u8]) -> Option<usize> {
    const ONES: u64 = u64::from_le_bytes([1; 8]);
    const HIGH: u64 = ONES << 7;
    // The lowest byte flagged below each test is exact (a borrow only runs upwards), so the
    // lowest flag of all three is the first byte that stops the string.
    let below = |x: u64, n: u8| x.wrapping_sub(ONES * u64::from(n)) & !x & HIGH;
    let mut at = 0;
    while let Some(chunk) = rest.get(at..at + 8) {
        let x = u64::from_le_bytes(chunk.try_into().ok()?);
        let found = below(x ^ (ONES * u64::from(b'"')), 1)
            | below(x ^ (ONES * u64::from(b'\\')), 1)
            | below(x, 0x20);
        if found != 0 {
            return Some(at + found.trailing_zeros() as usize / 8);
        }
        at += 8;
    }
    let tail = rest[at..]
        .iter()
        .position(|b| matches!(b, b'"' | b'\\' | 0..=0x1f))?;
    Some(at + tail)
}

/// A member name as a key writes it without escapes, with its closing quote, by its first
/// eight bytes as a word and a mask. The hand readers (`validate::Flat`, the envelope's) tell
/// a key from each name they look for by one word compared, and by the rest of a longer name,
/// rather than reading the key as a string first.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NameWord {
    word: u64,
    mask: u64,
}

impl NameWord {
    /// `quoted`: the name and its closing quote.
    pub(crate) const fn of(quoted: &[u8]) -> NameWord {
        let (mut word, mut mask, mut i) = (0, 0, 0);
        while i < quoted.len() && i < 8 {
            word |= (quoted[i] as u64) << (8 * i);
            mask |= 0xff << (8 * i);
            i += 1;
        }
        NameWord { word, mask }
    }

    /// Whether the key `key` starts with `quoted`, the name this was made of: `key` and
    /// `first` as [`key_first_word`] gives them.
    #[inline(always)]
    pub(crate) fn starts(self, quoted: &[u8], key: &[u8], first: u64) -> bool {
        first & self.mask == self.word && (quoted.len() <= 8 || key.starts_with(quoted))
    }
}

/// The key `rest` starts with, from just after its opening quote, and that text's first
/// eight bytes as a word; `None` when `rest` does not start with a quote and eight bytes more.
#[inline(always)]
pub(crate) fn key_first_word(rest: &[u8]) -> Option<(&[u8], u64)> {
    let key = rest.strip_prefix(b"\"")?;
    let first: [u8; 8] = key.get(..8)?.try_into().ok()?;
    Some((key, u64::from_le_bytes(first)))
}

/// A place in a JSON text, and the steps the hand readers of it share (`jsonrpc::arguments`
/// into parts, `validate::Flat` against a schema).
pub(crate) struct Cursor<'a> {
    pub(crate) text: &'a str,
    pub(crate) at: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(text: &'a str) -> Cursor<'a> {
        Cursor { text, at: 0 }
    }

    pub(crate) fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.at).copied()
    }

    pub(crate) fn space(&mut self) {
        let bytes = self.text.as_bytes();
        while matches!(bytes.get(self.at), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    /// The byte `b`, here.
    pub(crate) fn eat(&mut self, b: u8) -> Option<()> {
        (self.peek()? == b).then(|| self.at += 1)
    }

    pub(crate) fn word(&mut self, word: &str) -> Option<()> {
        self.text[self.at..]
            .starts_with(word)
            .then(|| self.at += word.len())
    }

    /// A string here with no escape and no control character, after its opening quote: its
    /// end (the closing quote's place), or `None` when it stops at anything else.
    #[inline(always)]
    pub(crate) fn plain_end(&self, start: usize) -> Option<usize> {
        let end = start + string_stop(self.text.as_bytes().get(start..)?)?;
        (self.text.as_bytes()[end] == b'"').then_some(end)
    }
}

#[cfg(test)]
mod tests {
    use super::unfenced;

    #[test]
    fn a_code_block_gives_what_it_holds() {
        for fenced in [
            "```json\n{\"a\": 1}\n```",
            "  ```JSON\r\n{\"a\": 1}```  ",
            "```\n{\"a\": 1}\n```",
            "```{\"a\": 1}```",
            "```json {\"a\": 1} ```",
        ] {
            assert_eq!(unfenced(fenced), Some("{\"a\": 1}"), "{fenced:?}");
        }
        for not_one in [
            "{\"a\": 1}",
            "```json{\"a\": 1}```",
            "```json\n{\"a\": 1}",
            "```a```\n```b```",
            "``{\"a\": 1}``",
        ] {
            assert_eq!(unfenced(not_one), None, "{not_one:?}");
        }
    }

    /// The distance over the whole table, as the definition reads: the banded one must
    /// agree with it wherever it is within the band.
    fn whole_table(a: &[char], b: &[char]) -> usize {
        let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
        for (i, row) in d.iter_mut().enumerate() {
            row[0] = i;
        }
        for (j, cell) in d[0].iter_mut().enumerate() {
            *cell = j;
        }
        for i in 1..=a.len() {
            for j in 1..=b.len() {
                let cost = usize::from(a[i - 1] != b[j - 1]);
                let mut v = (d[i - 1][j] + 1)
                    .min(d[i][j - 1] + 1)
                    .min(d[i - 1][j - 1] + cost);
                if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                    v = v.min(d[i - 2][j - 2] + 1);
                }
                d[i][j] = v;
            }
        }
        d[a.len()][b.len()]
    }

    #[test]
    fn the_banded_distance_agrees_with_the_whole_table() {
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for _ in 0..100_000 {
            let letters = 2 + next(2);
            let word = |next: &mut dyn FnMut(u64) -> u64| -> Vec<char> {
                let len = next(11);
                (0..len)
                    .map(|_| (b'a' + next(letters) as u8) as char)
                    .collect()
            };
            let (a, b) = (word(&mut next), word(&mut next));
            let k = next(6) as usize;
            let whole = whole_table(&a, &b);
            let banded = super::edit_distance_within(&a, &b, k);
            assert_eq!(
                banded,
                (whole <= k).then_some(whole),
                "{a:?} {b:?} within {k}"
            );
        }
    }

    use super::*;

    #[test]
    fn a_message_over_several_lines_is_one_line_and_reads_the_same() {
        let pretty = "{\r\n  \"id\": 1,\n  \"text\": \"a\\nb\"\r}";
        let line = one_line(bytes::Bytes::from(pretty));
        assert!(!line.contains(&b'\n') && !line.contains(&b'\r'));
        let read = |b: &[u8]| serde_json::from_slice::<serde_json::Value>(b).unwrap();
        assert_eq!(read(&line), read(pretty.as_bytes()));
        let compact = bytes::Bytes::from_static(b"{\"id\":1}");
        assert_eq!(
            one_line(compact.clone()).as_ptr(),
            compact.as_ptr(),
            "not copied"
        );
    }

    #[test]
    fn escapes_decode_and_tokens_escape() {
        assert_eq!(percent_decode("a%20b%2E").as_deref(), Some("a b."));
        assert_eq!(percent_decode("%zz"), None);
        assert_eq!(percent_decode("%"), None);
        assert_eq!(pointer_token("a/b~c"), "a~1b~0c");
        assert_eq!(clipped("abc", 2), "ab");
        assert_eq!(clipped("aé", 2), "a");
        assert_eq!(clipped("ab", 5), "ab");
    }

    #[test]
    fn a_string_stops_at_its_first_quote_escape_or_control_character() {
        for at in 0..20 {
            for stop in [b'"', b'\\', b'\n', 0, 0x1f] {
                let mut text = "é".repeat(10).into_bytes();
                text.truncate(20);
                text[at] = stop;
                text.extend_from_slice(b"\"tail\\");
                assert_eq!(string_stop(&text), Some(at), "{stop} at {at}");
            }
        }
        assert_eq!(string_stop(b"abc def ghi \x7f\xff"), None);
        assert_eq!(string_stop(b" !#[]~"), None);
    }
}
