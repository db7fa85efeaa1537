//! Small text encodings more than one module reads or writes.

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
