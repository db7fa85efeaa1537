//! Incremental, byte-faithful splitting of a `text/event-stream` into events.
//!
//! Each event comes out as the exact bytes it arrived as, blank-line terminator included, so
//! forwarding every event unchanged reproduces the stream byte for byte: priming events with
//! empty data, `id:`, `retry:` and comment lines all survive. Only `data:` is ever read, and
//! only by a caller that needs to.
//!
//! Security note: one event is capped; past the cap the caller gets the buffered bytes back
//! and should pass the rest of the stream through uninspected rather than buffer without end.

use bytes::{Bytes, BytesMut};
use std::borrow::Cow;

/// How a reading of a stream's events ([`each_event`]) ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Read {
    /// The reader said to stop.
    Stopped,
    /// The body ended.
    Ended,
    /// The body broke off, for this reason.
    Broke(String),
    /// An event was over the cap; the rest is not read.
    Overflowed,
}

/// Hands the data of each event of a stream that is read rather than passed on (the answer
/// to one of toolgate's own requests) to `each`, as it comes, until the body ends or breaks,
/// an event is over `max_event` bytes, or `each` says to stop (`false`).
pub(crate) async fn each_data<B>(
    body: B,
    max_event: usize,
    mut each: impl FnMut(&str) -> bool,
) -> Read
where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    each_event(body, max_event, |ev| {
        match data(ev).filter(|d| !d.is_empty()) {
            Some(d) => each(&d),
            None => true,
        }
    })
    .await
}

/// The same with each whole event, its fields and all.
pub(crate) async fn each_event<B>(
    body: B,
    max_event: usize,
    mut each: impl FnMut(&[u8]) -> bool,
) -> Read
where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let mut events = Events::new(body, max_event);
    loop {
        match events.next().await {
            Ok(Some(ev)) if !each(&ev) => return Read::Stopped,
            Ok(Some(_)) => {}
            Ok(None) => return Read::Ended,
            Err(end) => return end,
        }
    }
}

/// A stream's events, read one at a time, for a reader that waits between them (a session
/// with a server of the HTTP+SSE transport).
pub(crate) struct Events<B> {
    body: B,
    splitter: Splitter,
}

impl<B> Events<B>
where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    pub(crate) fn new(body: B, max_event: usize) -> Events<B> {
        Events {
            body,
            splitter: Splitter::new(max_event),
        }
    }

    /// The next event, whole; `Ok(None)` at the body's end, else why no more can be read
    /// ([`Read::Broke`], [`Read::Overflowed`]). Cancel-safe: what was read stays.
    pub(crate) async fn next(&mut self) -> Result<Option<Bytes>, Read> {
        use http_body_util::BodyExt;
        loop {
            match self.splitter.next_event() {
                Some(Split::Event(ev)) => return Ok(Some(ev)),
                Some(_) => return Err(Read::Overflowed),
                None => {}
            }
            let Some(frame) = self.body.frame().await else {
                self.splitter.ended();
                return match self.splitter.next_event() {
                    Some(Split::Event(ev)) => Ok(Some(ev)),
                    Some(_) => Err(Read::Overflowed),
                    None => Ok(None),
                };
            };
            match frame.map(http_body::Frame::into_data) {
                Ok(Ok(chunk)) => self.splitter.push(&chunk),
                Ok(Err(_)) => {}
                Err(e) => return Err(Read::Broke(e.to_string())),
            }
        }
    }
}

pub struct Splitter {
    buf: BytesMut,
    /// Where scanning resumes; bytes before it hold no event boundary.
    scan: usize,
    /// Start of the line being scanned.
    line_start: usize,
    max_event: usize,
    /// The stream has ended: a CR at the end of what came ends its line, as no LF can
    /// follow it now.
    ended: bool,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Split {
    Event(Bytes),
    /// One event grew past the cap; these are all the bytes held so far.
    Overflow(Bytes),
}

impl Splitter {
    pub fn new(max_event: usize) -> Splitter {
        Splitter {
            buf: BytesMut::new(),
            scan: 0,
            line_start: 0,
            max_event,
            ended: false,
        }
    }

    pub fn push(&mut self, chunk: &[u8]) {
        self.buf.extend_from_slice(chunk);
    }

    /// The next complete event, if the bytes pushed so far hold one.
    pub fn next_event(&mut self) -> Option<Split> {
        let b = &self.buf[..];
        let mut i = self.scan;
        while i < b.len() {
            let term_end = match b[i] {
                b'\n' => i + 1,
                b'\r' => {
                    // A CR at the end of what we have may be the first half of CRLF, until
                    // the stream has ended.
                    match b.get(i + 1) {
                        None if !self.ended => break,
                        Some(b'\n') => i + 2,
                        _ => i + 1,
                    }
                }
                _ => {
                    i += 1;
                    continue;
                }
            };
            if i == self.line_start {
                // An empty line ends the event; one over the cap is refused whole as well,
                // however its bytes were cut into reads.
                if term_end > self.max_event {
                    return Some(self.overflow());
                }
                let ev = self.buf.split_to(term_end).freeze();
                self.scan = 0;
                self.line_start = 0;
                return Some(Split::Event(ev));
            }
            self.line_start = term_end;
            i = term_end;
        }
        self.scan = i;
        (self.buf.len() > self.max_event).then(|| self.overflow())
    }

    fn overflow(&mut self) -> Split {
        self.scan = 0;
        self.line_start = 0;
        Split::Overflow(self.buf.split().freeze())
    }

    /// The stream has ended: the events [`Splitter::next_event`] gives now include one that
    /// a CR, the stream's last byte, ends (`data: x\r\r`).
    pub fn ended(&mut self) {
        self.ended = true;
    }

    /// What is left when the stream ends: an event without its terminating blank line. The
    /// splitter is then ready for another stream.
    pub fn finish(&mut self) -> Option<Bytes> {
        self.scan = 0;
        self.line_start = 0;
        self.ended = false;
        (!self.buf.is_empty()).then(|| self.buf.split().freeze())
    }
}

/// An event's fields, as bytes: a stream may open with a byte order mark, which the SSE
/// standard has a reader ignore (the TypeScript SDK's client does); it stays in the bytes
/// passed on.
fn fields(event: &[u8]) -> &[u8] {
    event.strip_prefix(crate::text::BOM).unwrap_or(event)
}

/// An event's fields as text, read as the SSE standard reads a stream: UTF-8, with each
/// sequence that is not read as U+FFFD, so that a stray byte in one field (an `id`, a
/// comment) hides none of the others from the rules, as it hides none from a client's SDK.
/// Borrowed, with no copy, when the event is UTF-8, as nearly every one is.
fn text(event: &[u8]) -> Cow<'_, str> {
    String::from_utf8_lossy(fields(event))
}

/// The event's data: its `data` lines joined by newlines, or `None` when it has none.
pub fn data(event: &[u8]) -> Option<Cow<'_, str>> {
    match text(event) {
        Cow::Borrowed(text) => data_in(text),
        Cow::Owned(text) => data_in(&text).map(|d| Cow::Owned(d.into_owned())),
    }
}

fn data_in(text: &str) -> Option<Cow<'_, str>> {
    let mut out: Option<Cow<'_, str>> = None;
    for line in text.split(['\n', '\r']) {
        let value = if let Some(rest) = line.strip_prefix("data:") {
            rest.strip_prefix(' ').unwrap_or(rest)
        } else if line == "data" {
            ""
        } else {
            continue;
        };
        out = Some(match out {
            None => Cow::Borrowed(value),
            Some(prev) => Cow::Owned(format!("{prev}\n{value}")),
        });
    }
    out
}

/// The event's type: its `event` field, the last one, or `message` when it has none, as
/// the SSE standard has it.
pub fn name(event: &[u8]) -> Cow<'_, str> {
    match text(event) {
        Cow::Borrowed(text) => Cow::Borrowed(name_in(text)),
        Cow::Owned(text) => Cow::Owned(name_in(&text).to_owned()),
    }
}

fn name_in(text: &str) -> &str {
    let mut name = "message";
    for line in text.split(['\n', '\r']) {
        if let Some(value) = line.strip_prefix("event:") {
            let value = value.strip_prefix(' ').unwrap_or(value);
            name = if value.is_empty() { "message" } else { value };
        }
    }
    name
}

/// Where an event leaves its stream for a client that resumes it: the event id it sets,
/// and the reconnection time it asks for, in milliseconds.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Place<'a> {
    pub id: Option<Cow<'a, str>>,
    pub retry: Option<u64>,
}

/// The event's `id` and `retry` fields, the last of each (an empty `id` clears the one
/// before, as the SSE standard has it, and a `retry` that is not digits is ignored).
pub fn place(event: &[u8]) -> Place<'_> {
    let bytes = fields(event);
    // Nearly every event of a call's stream is `event:` and `data:` lines alone.
    let may_name = |field: &[u8]| {
        bytes.starts_with(field)
            || (bytes.windows(field.len() + 1))
                .any(|w| matches!(w[0], b'\n' | b'\r') && &w[1..] == field)
    };
    if !may_name(b"id") && !may_name(b"retry") {
        return Place::default();
    }
    match text(event) {
        Cow::Borrowed(text) => place_in(text),
        Cow::Owned(text) => {
            let Place { id, retry } = place_in(&text);
            let id = id.map(|id| Cow::Owned(id.into_owned()));
            Place { id, retry }
        }
    }
}

fn place_in(text: &str) -> Place<'_> {
    let mut place = Place::default();
    for line in text.split(['\n', '\r']) {
        let (name, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match name {
            "id" if !value.contains('\0') => {
                place.id = Some(Cow::Borrowed(value)).filter(|v| !v.is_empty())
            }
            "retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                place.retry = value.parse().ok()
            }
            _ => {}
        }
    }
    place
}

/// The same event with its data replaced: `id:`, `event:` and other fields are kept, so a
/// rewritten event keeps its place in a resumable stream.
pub fn with_data(event: &[u8], json: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(json.len() + 64);
    for line in text(event).split(['\n', '\r']) {
        if line.is_empty() || line.starts_with("data") {
            continue;
        }
        out.extend_from_slice(line.as_bytes());
        out.extend_from_slice(b"\n");
    }
    put_data(&mut out, json);
    out.freeze()
}

/// An SSE event carrying one JSON-RPC message, as toolgate writes its own.
pub fn event(json: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(json.len() + 20);
    out.extend_from_slice(b"event: message\n");
    put_data(&mut out, json);
    out.freeze()
}

/// `json` as an event's one `data` line, and the blank line that ends the event. A message
/// whose text holds line breaks (a server's data lines joined, a member spliced in as it was
/// written) would end the line early and leave the rest as no field: in JSON they can only
/// be whitespace, so each is written as a space (`text::one_line`).
fn put_data(out: &mut BytesMut, json: &[u8]) {
    out.extend_from_slice(b"data: ");
    let start = out.len();
    out.extend_from_slice(json);
    crate::text::line_breaks_as_spaces(&mut out[start..]);
    out.extend_from_slice(b"\n\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A body of these chunks, then, if `broken`, an error.
    fn body(
        chunks: &[&'static str],
        broken: bool,
    ) -> impl http_body::Body<Data = Bytes, Error = String> + Unpin {
        let mut frames: Vec<Result<http_body::Frame<Bytes>, String>> = chunks
            .iter()
            .map(|c| Ok(http_body::Frame::data(Bytes::from_static(c.as_bytes()))))
            .collect();
        if broken {
            frames.push(Err("reset".into()));
        }
        http_body_util::StreamBody::new(futures_util::stream::iter(frames))
    }

    #[tokio::test]
    async fn each_data_says_how_the_reading_ended() {
        let two = ["data: a\n\n", "data: b\n", "\n"];
        let mut seen = Vec::new();
        let read = each_data(body(&two, false), 64, |d| {
            seen.push(d.to_owned());
            true
        });
        assert_eq!(read.await, Read::Ended);
        assert_eq!(seen, ["a", "b"]);
        let read = each_data(body(&two, false), 64, |d| d != "a");
        assert_eq!(read.await, Read::Stopped);
        let read = each_data(body(&two, true), 64, |_| true);
        assert_eq!(read.await, Read::Broke("reset".into()));
        let read = each_data(
            body(&["data: far too long for the cap, and no end yet"], false),
            8,
            |_| true,
        );
        assert_eq!(read.await, Read::Overflowed);
    }

    fn split_all(chunks: &[&[u8]]) -> Vec<Bytes> {
        let mut s = Splitter::new(1 << 20);
        let mut out = Vec::new();
        for c in chunks {
            s.push(c);
            while let Some(Split::Event(e)) = s.next_event() {
                out.push(e);
            }
        }
        out.extend(s.finish());
        out
    }

    const STREAM: &[u8] = b"id: 1\ndata: \n\n: keep-alive\n\nevent: message\r\ndata: {\"a\":1}\r\n\r\nretry: 5\rdata: x\rdata: y\r\rdata: tail";

    #[test]
    fn events_are_the_exact_bytes_under_any_chunking() {
        let whole = split_all(&[STREAM]);
        assert_eq!(whole.len(), 5);
        assert_eq!(whole.concat(), STREAM);
        for size in 1..STREAM.len() {
            let chunks: Vec<&[u8]> = STREAM.chunks(size).collect();
            assert_eq!(split_all(&chunks), whole, "chunk size {size}");
        }
    }

    #[test]
    fn data_lines_are_joined() {
        let evs = split_all(&[STREAM]);
        assert_eq!(data(&evs[0]).as_deref(), Some(""));
        assert_eq!(data(&evs[1]), None);
        assert_eq!(data(&evs[2]).as_deref(), Some("{\"a\":1}"));
        assert_eq!(data(&evs[3]).as_deref(), Some("x\ny"));
    }

    #[test]
    fn rewritten_events_keep_their_fields() {
        let ev = b"event: message\r\nid: 42\r\ndata: {\"old\":1}\r\n\r\n";
        assert_eq!(place(ev).id.as_deref(), Some("42"));
        assert_eq!(
            &with_data(ev, b"{\"new\":2}")[..],
            b"event: message\nid: 42\ndata: {\"new\":2}\n\n"
        );
    }

    /// A message whose text holds line breaks is written as one `data` line, which reads
    /// back as the message.
    #[test]
    fn a_message_over_several_lines_is_one_data_line() {
        let json = b"{\"id\": 1,\n \"result\": {}\r}";
        let rewritten = with_data(b"id: 7\ndata: {}\n\n", json);
        assert_eq!(
            &rewritten[..],
            b"id: 7\ndata: {\"id\": 1,  \"result\": {} }\n\n"
        );
        let own = event(json);
        assert_eq!(
            &own[..],
            b"event: message\ndata: {\"id\": 1,  \"result\": {} }\n\n"
        );
        let read: serde_json::Value = serde_json::from_str(&data(&own).unwrap()).unwrap();
        assert_eq!(read, serde_json::json!({"id": 1, "result": {}}));
    }

    #[test]
    fn a_byte_order_mark_opening_the_stream_is_no_part_of_its_first_field() {
        let ev = "\u{feff}id: 1\ndata: {\"a\":1}\n\n".as_bytes();
        assert_eq!(data(ev).as_deref(), Some("{\"a\":1}"));
        assert_eq!(place(ev).id.as_deref(), Some("1"));
        assert_eq!(&with_data(ev, b"{}")[..], b"id: 1\ndata: {}\n\n");
    }

    /// A stray byte in one field hides none of the others: the SSE standard reads a stream
    /// as UTF-8 with U+FFFD for what does not read, and so does a client's SDK.
    #[test]
    fn a_byte_that_is_not_utf8_hides_no_field() {
        let ev = b"id: \xff\nevent: message\n: \xfe\ndata: {\"a\":1}\n\n";
        assert_eq!(data(ev).as_deref(), Some("{\"a\":1}"));
        assert_eq!(name(ev), "message");
        assert_eq!(place(ev).id.as_deref(), Some("\u{fffd}"));
        assert_eq!(
            &with_data(ev, b"{}")[..],
            "id: \u{fffd}\nevent: message\n: \u{fffd}\ndata: {}\n\n".as_bytes()
        );
        let ev = b"event: endpoint\ndata: \"a\xffb\"\n\n";
        assert_eq!(data(ev).as_deref(), Some("\"a\u{fffd}b\""));
        assert_eq!(name(ev), "endpoint");
    }

    /// A CR ends a line as an LF does; at the end of what came it may be the first half of
    /// a CRLF, until the stream ends.
    #[test]
    fn a_stream_that_ends_in_a_lone_cr_ends_its_last_event() {
        let mut s = Splitter::new(64);
        s.push(b"data: x\r\r");
        assert_eq!(s.next_event(), None);
        s.ended();
        assert_eq!(
            s.next_event(),
            Some(Split::Event(Bytes::from_static(b"data: x\r\r")))
        );
        assert_eq!(s.finish(), None);
        s.push(b"data: y\r");
        assert_eq!(s.next_event(), None, "a new stream waits again");
    }

    #[tokio::test]
    async fn a_read_stream_gives_the_event_a_lone_cr_ends() {
        let mut seen = Vec::new();
        let read = each_data(body(&["data: a\r\rdata: b\r", "\r"], false), 64, |d| {
            seen.push(d.to_owned());
            true
        });
        assert_eq!(read.await, Read::Ended);
        assert_eq!(seen, ["a", "b"]);
    }

    #[test]
    fn an_event_says_where_a_resumed_stream_starts() {
        let at = |id: Option<&'static str>, retry| Place {
            id: id.map(Cow::Borrowed),
            retry,
        };
        for (ev, expected) in [
            (&b"data: x\n\n"[..], at(None, None)),
            (
                b"id: s1_7\nretry: 500\ndata: \n\n",
                at(Some("s1_7"), Some(500)),
            ),
            (b"retry:250\nid:9\n\n", at(Some("9"), Some(250))),
            (b"id: 1\nid\ndata: x\n\n", at(None, None)),
            (b"id: a\0b\nretry: 5s\n\n", at(None, None)),
            (b"data: {\"identity\":1}\nretrying: 1\n\n", at(None, None)),
        ] {
            assert_eq!(place(ev), expected, "{}", String::from_utf8_lossy(ev));
        }
    }

    #[test]
    fn an_endless_event_overflows() {
        let mut s = Splitter::new(8);
        s.push(b"data: 0123456789");
        assert_eq!(
            s.next_event(),
            Some(Split::Overflow(Bytes::from_static(b"data: 0123456789")))
        );
    }

    #[test]
    fn an_event_over_the_cap_overflows_though_it_came_whole() {
        let mut s = Splitter::new(12);
        s.push(b"data: 1\n\ndata: 0123456789\n\ndata: 2\n\n");
        assert_eq!(
            s.next_event(),
            Some(Split::Event(Bytes::from_static(b"data: 1\n\n")))
        );
        assert_eq!(
            s.next_event(),
            Some(Split::Overflow(Bytes::from_static(
                b"data: 0123456789\n\ndata: 2\n\n"
            )))
        );
        assert_eq!(s.next_event(), None);
    }
}
