//! The answer to a forwarded HTTP request, on its way back to the client.
//!
//! Every JSON-RPC message in it goes past [`pipeline::settle`]: a JSON body when the rules
//! may need it (answers to `tools/call`, `tools/list`, `resources/read`), and every event of an
//! SSE stream, split as it arrives and forwarded byte for byte unless a rule rewrote it.
//! A request answered with something that is not JSON-RPC (an HTML error page), or whose
//! stream breaks before its answer, gets an answer toolgate writes, so the client never waits
//! forever. A stream that ends cleanly after numbering its events is left alone: the client
//! may resume it (SEP-1699).

use super::StreamOutcome;
use super::asking::{self, ReverseRounds};
use super::relayed::passed_on;
use super::reply;
use super::resume::{NotResumed, Resumer};
use crate::catalog::ScopeKey;
use crate::error::UpstreamError;
use crate::gateway::{Gateway, Target};
use crate::jsonrpc::{self, Body as Parsed};
use crate::lograte::warn_at_rate;
use crate::mcp;
use crate::net::body::{Begun, Collected};
use crate::net::client::{Media, UpstreamBody, fit_length, strip_hop_by_hop};
use crate::pipeline::asked;
use crate::pipeline::bridge;
use crate::pipeline::carried::{Carried, Carrying, carried};
use crate::pipeline::{self, Kind, Pending};
use crate::policy::held::{ByteBudget, Held};
use crate::transport::sse::{self, Split, Splitter};
use crate::transport::upstream::http_bridge::Unresumed;
use crate::transport::upstream::http_client::{HttpUpstream, no_message, relayed_as_is};
use crate::transport::upstream::multiplex::Sent;
use crate::transport::upstream::rounds::{Listening, Parked, Rounds, StreamRest};
use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use futures_util::future::Either;
use http::HeaderMap;
use http::StatusCode;
use http::header::{CONTENT_LENGTH, CONTENT_TYPE, HeaderValue};
use http_body_util::BodyExt;
use serde_json::value::RawValue;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

/// How an answer is read besides its rules: whether the request was in the client's own
/// session, and for a call bridged to a server of the handshake era, where the server's
/// questions wait for the client's answer (an input-required round).
pub(crate) struct Reading {
    pub(crate) has_session: bool,
    /// Boxed, as is `reverse_rounds`: both are rare, and every request's future carries the
    /// reading as it goes down to the server and back.
    pub(crate) parking: Option<Box<Parking>>,
    /// For a handshake-era client's request to a server of 2026-07-28: what its rounds
    /// need, should the server ask for input.
    pub(crate) reverse_rounds: Option<Box<ReverseRounds>>,
    /// For a request to a server that numbers its streams: how to ask for its stream
    /// again should the server end it before the answer.
    pub(crate) resume: Option<Box<Resumer>>,
    /// For a client's GET: the server whose answers on numbered streams it may carry again.
    pub(crate) replays_of: Option<Arc<HttpUpstream>>,
    /// Whether the answer goes to the stdio front's client, which cannot read an answer in
    /// part and is answered with why when its answer breaks off: an answer too large to read
    /// is refused rather than passed on, and one passed on unread that breaks is said by the
    /// front as it answers (`pipeline::unanswered`), not here too (`relayed::passed_on`).
    pub(crate) to_pipe: bool,
}

impl Reading {
    /// An answer read by its rules alone.
    pub(crate) fn of(has_session: bool) -> Reading {
        Reading {
            has_session,
            parking: None,
            reverse_rounds: None,
            resume: None,
            replays_of: None,
            to_pipe: false,
        }
    }
}

/// Where a bridged call's stream waits while its client answers the server's question.
pub(crate) struct Parking {
    pub(crate) rounds: Arc<Rounds>,
    pub(crate) key: ScopeKey,
    /// The session's headers, for the answer to the question.
    pub(crate) session: HeaderMap,
    /// The id the server answers under (toolgate's), and the client's: the request's own, or
    /// on a round's retry, the retry's.
    pub(crate) renumber: Option<(Box<RawValue>, Box<RawValue>)>,
    /// The request's entry among those in flight in the session, kept until its answer.
    pub(crate) _entry: Option<Sent>,
    /// The call's place among those the server's questions on the session's own stream go
    /// to (`roots/list` from a handler names no request to answer on).
    pub(crate) listening: Option<Listening>,
}

/// The answer `resp` to the request `pending`, read as `reading` says.
///
/// Decided when called, without a wait, unless the rules must read the body whole: the
/// future then holds only what that reading needs. An `async fn` would also hold each
/// argument as it was given, the answer's head among them, and the future of every call
/// whose answer is read would carry both (docs/performance.md).
pub fn response(
    gw: &Arc<Gateway>,
    pending: Pending,
    reading: Reading,
    resp: http::Response<UpstreamBody>,
) -> impl Future<Output = Response> + Send + '_ {
    match at_once(gw, pending, reading, resp) {
        Now::Answer(answer) => Either::Left(std::future::ready(answer)),
        Now::ReadFirst(unsettled) => Either::Right(unsettled.read(gw)),
    }
}

/// What an answer's head settles at once.
enum Now<B> {
    /// The answer: a stream, a pass-through, a refusal.
    Answer(Response),
    /// The rules read the body whole first.
    ReadFirst(Unsettled<B>),
}

/// An answer the rules settle once its body is read whole.
struct Unsettled<B> {
    parts: http::response::Parts,
    body: B,
    /// The body read whole is as long as the head's `Content-Length` says, when it has one
    /// ([`UpstreamBody::held_to_its_length`]).
    held_to_its_length: bool,
    pending: Pending,
    parking: Option<Box<Parking>>,
    reverse_rounds: Option<Box<ReverseRounds>>,
    to_pipe: bool,
}

/// The answer when it is settled without reading the body whole, else what reading it
/// whole needs.
fn at_once(
    gw: &Arc<Gateway>,
    pending: Pending,
    reading: Reading,
    resp: http::Response<UpstreamBody>,
) -> Now<UpstreamBody> {
    let Reading {
        has_session,
        parking,
        reverse_rounds,
        resume,
        replays_of,
        to_pipe,
    } = reading;
    let status = resp.status();
    if status == StatusCode::NOT_FOUND && has_session {
        // The session is gone upstream; so is what its tools were.
        gw.catalog.forget(&pending.key);
    }
    let (mut parts, body) = resp.into_parts();
    strip_hop_by_hop(&mut parts.headers);
    // As the upstream client read it, where the head arrived.
    let media = body.media();
    if media == Media::EventStream {
        // Its events may be rewritten as they pass: the server's length no longer holds.
        parts.headers.remove(CONTENT_LENGTH);
        let outcome = StreamOutcome::default();
        parts.extensions.insert(outcome.clone());
        let mut inspector = SseInspector::new(gw.clone(), pending, outcome);
        inspector.parking = parking.map(|p| *p);
        inspector.reverse_rounds = reverse_rounds.map(|r| *r);
        (inspector.resume, inspector.replays_of) = (resume, replays_of);
        return Now::Answer(Response::from_parts(parts, sse_stream(inspector, body)));
    }
    if pending.id.is_none() {
        // A notification's or a response's acknowledgement: nothing to answer.
        return Now::Answer(Response::from_parts(parts, Body::new(body)));
    };
    if relayed_as_is(status, has_session) {
        let body = passed_on(body, pending.target, to_pipe);
        return Now::Answer(Response::from_parts(parts, body));
    }
    if media != Media::Json {
        let e = no_message(status, &parts.headers);
        return Now::Answer(unusable(gw, &pending, &e));
    }
    // In a session toolgate shares between clients, the answer comes under toolgate's id.
    let renumbered = (parking.as_ref()).is_some_and(|p| p.renumber.is_some());
    if pending.kind == Kind::Other
        && status.is_success()
        && pending.completion().is_none()
        && !renumbered
    {
        // Pass-through methods: streamed, never read.
        let body = passed_on(body, pending.target, to_pipe);
        return Now::Answer(Response::from_parts(parts, body));
    }
    Now::ReadFirst(Unsettled {
        parts,
        held_to_its_length: body.held_to_its_length(),
        body,
        pending,
        parking,
        reverse_rounds,
        to_pipe,
    })
}

impl<B> Unsettled<B>
where
    B: http_body::Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    /// The body read whole (bounded), then the answer rules. A block, not an `async fn`,
    /// which would hold the answer twice (as given, and as its body takes it apart).
    fn read(self, gw: &Arc<Gateway>) -> impl Future<Output = Response> + Send + '_ {
        let Unsettled {
            parts,
            mut body,
            held_to_its_length,
            pending,
            parking,
            reverse_rounds,
            to_pipe,
        } = self;
        async move {
            let status = parts.status;
            let begun = match Begun::first_frame(&mut body).await {
                Ok(begun) => begun,
                Err(e) => {
                    let e = UpstreamError::unanswered_stream(Some(e.to_string()));
                    return unusable(gw, &pending, &e);
                }
            };
            let Some(mut held) = answer_share(gw, &pending, begun.len(&body)).await else {
                let e = UpstreamError::no_room(pending.target.limits.upstream_timeout);
                return unusable(gw, &pending, &e);
            };
            let renumber = (parking.as_ref()).and_then(|p| p.renumber.as_ref());
            let bytes = match begun
                .collect(body, gw.config.limits.max_response_bytes)
                .await
            {
                Ok(Collected::Whole(bytes)) => bytes,
                Ok(Collected::TooLarge(_)) if renumber.is_some() || to_pipe => {
                    // Passed on in part, it would reach its client under an id it does not
                    // know, or a pipe's client that could not read it.
                    let max = gw.config.limits.max_response_bytes;
                    return unusable(gw, &pending, &UpstreamError::answer_over(max));
                }
                Ok(Collected::TooLarge(rest)) => {
                    let target = &pending.target;
                    warn_at_rate!(target.repeats, "answer_over", { upstream = %target.name, },
                        "an answer over max_response_bytes; passed through unread");
                    // What was read goes first, and stays counted until it has gone.
                    let rest = Holding::new(rest, held);
                    let body = passed_on(rest, pending.target.clone(), to_pipe);
                    return Response::from_parts(parts, body);
                }
                Err(e) => {
                    let e = UpstreamError::unanswered_stream(Some(e.to_string()));
                    return unusable(gw, &pending, &e);
                }
            };
            // Read, and passed on, without a byte order mark: a client need not ignore one.
            held.shrink_to(bytes.len());
            let read = bytes.len();
            let bytes = crate::text::without_bom(bytes);
            let held_to_its_length = held_to_its_length && bytes.len() == read;
            let (bytes, as_sent) = match renumber {
                Some((from, to)) => (bridge::renumbered(&bytes, from, to).unwrap_or(bytes), false),
                None => (bytes, held_to_its_length),
            };
            if let Some(reverse_rounds) = reverse_rounds
                && status.is_success()
                && asked::input_required(&bytes).is_some()
            {
                return asking::answer(gw, pending, bytes, *reverse_rounds);
            }
            json_answer(gw, &pending, parts, (bytes, held), as_sent)
        }
    }
}

/// The answer's share of the bytes requests hold ([`Gateway::answer_bytes`]), taken once its
/// first frame has come ([`Begun`]): as long as it is known to be, else as long as it may
/// be, until it is read. It came and must not be lost, so with no room it waits for the
/// requests before it to give theirs back, as long as the server may take to answer; `None`
/// past that.
async fn answer_share(
    gw: &Gateway,
    pending: &Pending,
    len: Option<u64>,
) -> Option<Held<Arc<ByteBudget>>> {
    let max = gw.config.limits.max_response_bytes;
    let share = len.map_or(max, |n| max.min(usize::try_from(n).unwrap_or(max)));
    if let Some(held) = ByteBudget::take_owned(&gw.answer_bytes, share) {
        return Some(held);
    }
    let wait = pending.target.limits.upstream_timeout;
    tokio::time::timeout(wait, gw.answer_bytes.room_for(share))
        .await
        .ok()
}

/// The body of an answer over `limits.max_response_bytes`, passed on unread after what was
/// read of it, with the share that reading took: given back once the body has gone to its
/// client, or the client has gone. (An answer read whole counts its bytes themselves,
/// [`Held::keeping`].)
///
/// Passed on in pieces of at most [`PIECE`]: the HTTP server polls a body for more only as
/// its client takes what came before, so a piece is all that waits in its buffers once the
/// share is given back. Handed over whole, what was read would sit in them, its share gone,
/// for a client that never reads it.
struct Holding<B> {
    body: B,
    /// What is left of the frame being passed on.
    rest: Bytes,
    _held: Held<Arc<ByteBudget>>,
}

/// The most of an answer read whole that is handed to the HTTP server at once.
const PIECE: usize = 64 * 1024;

impl<B> Holding<B> {
    fn new(body: B, held: Held<Arc<ByteBudget>>) -> Holding<B> {
        Holding {
            body,
            rest: Bytes::new(),
            _held: held,
        }
    }

    fn piece(&mut self) -> http_body::Frame<Bytes> {
        let n = self.rest.len().min(PIECE);
        http_body::Frame::data(self.rest.split_to(n))
    }
}

impl<B: http_body::Body<Data = Bytes> + Unpin> http_body::Body for Holding<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, B::Error>>> {
        use std::task::Poll;
        let this = &mut *self;
        if !this.rest.is_empty() {
            return Poll::Ready(Some(Ok(this.piece())));
        }
        match std::pin::Pin::new(&mut this.body).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                Ok(data) => {
                    this.rest = data;
                    Poll::Ready(Some(Ok(this.piece())))
                }
                Err(frame) => Poll::Ready(Some(Ok(frame))),
            },
            other => other,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.rest.is_empty() && self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        let (body, rest) = (self.body.size_hint(), self.rest.len() as u64);
        let mut hint = http_body::SizeHint::new();
        if let Some(upper) = body.upper() {
            hint.set_upper(upper.saturating_add(rest));
        }
        hint.set_lower(body.lower().saturating_add(rest));
        hint
    }
}

/// A JSON answer, read whole, after the answer rules. `as_sent`: `bytes` are the server's
/// own, as long as its `Content-Length` says when it has one.
fn json_answer(
    gw: &Gateway,
    pending: &Pending,
    mut parts: http::response::Parts,
    (bytes, held): (Bytes, Held<Arc<ByteBudget>>),
    as_sent: bool,
) -> Response {
    let status = parts.status;
    if status.is_success() && !needs_reading(pending, &bytes) {
        // A completion may change them.
        let as_sent = as_sent && pending.completion().is_none();
        return unchanged(parts, (bridge::complete(pending, bytes), held), as_sent);
    }
    // A refusal of the request itself (a 4xx whose error names no request: "No valid
    // session ID", "Bad Request") is the transport's word, not the tool's answer: the client
    // must see it as it came to recover (re-initialize, fix its headers).
    if status.is_client_error() && jsonrpc::refusal(&bytes).is_some() {
        return unchanged(parts, (bytes, held), as_sent);
    }
    let settled = match jsonrpc::parse(&bytes) {
        Ok(Parsed::Single(m)) => pipeline::settle(gw, pending, &m, bytes.clone()),
        _ => return unusable(gw, pending, &no_message(status, &parts.headers)),
    };
    if settled.rewritten {
        parts.status = settled
            .error_code
            .map_or(StatusCode::OK, |c| pending.era.status_for(c));
        parts
            .headers
            .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    }
    whole(parts, (settled.body, held))
}

/// An answer read whole, sent as `bytes` with their share: the server's `Content-Length`
/// goes on only when it is still their length (a rule, the completion or a renumbering may
/// have changed them).
fn whole(mut parts: http::response::Parts, answer: (Bytes, Held<Arc<ByteBudget>>)) -> Response {
    fit_length(&mut parts.headers, answer.0.len());
    sent(parts, answer)
}

/// An answer read whole and passed on as it came: its length is not looked up again when it
/// is known to hold (`as_sent`), about 0.2k instructions on nearly every validated call.
fn unchanged(
    parts: http::response::Parts,
    answer: (Bytes, Held<Arc<ByteBudget>>),
    as_sent: bool,
) -> Response {
    if as_sent {
        return sent(parts, answer);
    }
    whole(parts, answer)
}

/// The response that sends an answer read whole, its share held until the answer is gone.
fn sent(parts: http::response::Parts, answer: (Bytes, Held<Arc<ByteBudget>>)) -> Response {
    let (bytes, held) = answer;
    Response::from_parts(parts, Body::from(held.keeping(bytes)))
}

/// toolgate's answer to a request whose server answered nothing usable. Its outcome goes with
/// it, as a stream's does, for the request's span and for a front that reads the response.
fn unusable(gw: &Gateway, pending: &Pending, e: &UpstreamError) -> Response {
    let mut resp = reply::unanswered(gw, pending, e);
    let outcome = StreamOutcome::default();
    outcome.set(e.outcome());
    resp.extensions_mut().insert(outcome);
    resp
}

/// Whether a JSON answer must be parsed. A successful `tools/call` answer is rewritten only
/// when it is an error, or when its output is checked; a body that holds no `"error"` and is
/// one whole JSON object cannot be either, so the common case skips the parse. Anything that
/// is not plainly one object is still read, so a truncated or foreign body is caught.
fn needs_reading(pending: &Pending, body: &[u8]) -> bool {
    if !matches!(pending.kind, Kind::Call { output: false, .. }) {
        return true;
    }
    let trimmed = body.trim_ascii();
    let one_object = trimmed.first() == Some(&b'{') && trimmed.last() == Some(&b'}');
    !one_object || crate::text::holds!(body, "\"error\"")
}

struct SseInspector {
    gw: Arc<Gateway>,
    pending: Pending,
    splitter: Splitter,
    /// Past an oversized event, the stream passes through uninspected.
    raw: bool,
    /// Past an oversized event in a stream whose answer is renumbered, nothing more of the
    /// stream is passed on: its answer would reach the client under an id it does not know.
    dropping: bool,
    answered: bool,
    /// The answer as sent, kept for a client that asks the server for it again.
    sent: Option<Bytes>,
    /// The id of the server's last numbered event: a clean end before the answer may be
    /// resumed from it (by toolgate when it can, else by the client).
    last_id: Option<Bytes>,
    /// The time the server asked a resuming client to wait.
    retry: Option<Duration>,
    /// Messages read: a resumption that brings one is progress.
    heard: u64,
    /// Why the stream, ended before the answer, was not resumed.
    not_resumed: Option<NotResumed>,
    /// How to ask for the stream again ([`Reading::resume`]).
    resume: Option<Box<Resumer>>,
    /// A client's GET: whose answers it may carry again ([`Reading::replays_of`]).
    replays_of: Option<Arc<HttpUpstream>>,
    out: VecDeque<Bytes>,
    /// Set when toolgate answers the request itself, at the stream's end.
    outcome: StreamOutcome,
    /// For a bridged call: where the stream waits when the server asks the client something.
    parking: Option<Parking>,
    /// The server asked: the round's state and the question's id; the stream waits.
    parked: Option<(String, Box<RawValue>)>,
    /// For a handshake-era client of a server of 2026-07-28: what the rounds need when the
    /// server's answer asks for input.
    reverse_rounds: Option<ReverseRounds>,
    /// That answer, held: the stream goes on with the rounds.
    held: Option<Bytes>,
}

impl SseInspector {
    fn new(gw: Arc<Gateway>, pending: Pending, outcome: StreamOutcome) -> SseInspector {
        let max = gw.config.limits.max_sse_event_bytes;
        SseInspector {
            gw,
            pending,
            splitter: Splitter::new(max),
            raw: false,
            dropping: false,
            answered: false,
            sent: None,
            last_id: None,
            retry: None,
            heard: 0,
            not_resumed: None,
            resume: None,
            replays_of: None,
            out: VecDeque::new(),
            outcome,
            parking: None,
            parked: None,
            reverse_rounds: None,
            held: None,
        }
    }

    fn feed(&mut self, chunk: Bytes) {
        if self.dropping {
            return;
        }
        if self.raw {
            self.out.push_back(chunk);
            return;
        }
        self.splitter.push(&chunk);
        while let Some(split) = self.splitter.next_event() {
            match split {
                Split::Event(ev) => {
                    let ev = self.on_event(ev);
                    if self.held.is_some() {
                        // The rest of the server's stream answers nothing now.
                        break;
                    }
                    self.out.push_back(ev);
                    if self.parked.is_some() {
                        // The rest waits for the client's answer, unread.
                        break;
                    }
                }
                Split::Overflow(_) if self.renumbers() => {
                    self.over_limit();
                    break;
                }
                Split::Overflow(held) => {
                    let target = &self.pending.target;
                    warn_at_rate!(target.repeats, "sse_event_over", { upstream = %target.name, },
                        "an SSE event over max_sse_event_bytes; the rest of the stream passed through uninspected");
                    self.raw = true;
                    self.out.push_back(held);
                    break;
                }
            }
        }
    }

    /// Whether the request's answer comes under toolgate's id, in a session it shares
    /// between clients.
    fn renumbers(&self) -> bool {
        self.parking.as_ref().is_some_and(|p| p.renumber.is_some())
    }

    /// An event over `limits.max_sse_event_bytes` in a renumbered stream: the request is
    /// answered with why, unless it has been, and the rest of the stream is dropped.
    fn over_limit(&mut self) {
        // Said as the request's failure is (`pipeline::unanswered`).
        tracing::debug!(upstream = %self.pending.target.name, "an SSE event over max_sse_event_bytes in a shared session: the request is answered with why");
        self.dropping = true;
        if self.answered {
            return;
        }
        self.answered = true;
        let why = UpstreamError::event_over(self.gw.config.limits.max_sse_event_bytes);
        if let Some(a) = pipeline::unanswered(&self.gw, &self.pending, &why) {
            self.outcome.set(why.outcome());
            self.out.push_back(sse::event(&a.body));
        }
    }

    /// Runs the rules on an event that may matter. Until the answer has passed, every event
    /// is read: the answer's id may be spelled differently from the request's, so no text
    /// search can tell which event it is. After it, only `list_changed` needs the rules.
    fn on_event(&mut self, ev: Bytes) -> Bytes {
        let place = sse::place(&ev);
        if let Some(id) = place.id {
            if self.last_id.is_none() {
                self.pending.target.numbered_a_stream();
            }
            self.last_id = Some(shared(&ev, id));
        }
        if let Some(ms) = place.retry {
            self.retry = Some(Duration::from_millis(ms));
        }
        let Some(data) = sse::data(&ev) else {
            return ev;
        };
        self.heard += u64::from(!data.is_empty());
        let about_us = !self.answered && self.pending.id.is_some();
        if !about_us && let Some(answer) = self.replayed(&ev, &data) {
            return answer;
        }
        if !about_us && !data.contains(mcp::TOOLS_LIST_CHANGED) {
            return ev;
        }
        let data = shared(&ev, data);
        if !about_us {
            return self.settled(&ev, data);
        }
        let how = Carrying {
            asks: self.parking.is_some(),
            holds_rounds: self.reverse_rounds.is_some(),
            renumber: (self.parking.as_ref())
                .and_then(|p| p.renumber.as_ref())
                .map(|(from, to)| (&**from, &**to)),
        };
        match carried(&data, &how) {
            Carried::InputRequired => {
                self.answered = true;
                self.held = Some(data);
                Bytes::new()
            }
            Carried::Question(asked) => self.ask_client(&ev, asked),
            Carried::Renumbered(renumbered) => {
                self.settled(&sse::with_data(&ev, &renumbered), renumbered)
            }
            Carried::AsItCame => self.settled(&ev, data),
        }
    }

    /// `ev`, whose data is `data`, after the answer rules.
    fn settled(&mut self, ev: &Bytes, data: Bytes) -> Bytes {
        let (ev, answer) = settled_event(&self.gw, &self.pending, ev, data);
        if answer.is_some() {
            self.answered = true;
            self.sent = answer;
        }
        ev
    }

    /// On a client's GET, an answer the server sends again to a request of a numbered
    /// stream, under that request's rules; `None` for anything else.
    fn replayed(&self, ev: &Bytes, data: &str) -> Option<Bytes> {
        let up = self.replays_of.as_ref()?;
        if !crate::text::holds!(data.as_bytes(), "\"id\"") {
            return None;
        }
        let Ok(Parsed::Single(m)) = jsonrpc::parse(data.as_bytes()) else {
            return None;
        };
        let id = m.id.filter(|_| m.method.is_none())?;
        let (pending, sent) = up.numbered.found(self.pending.key, id.get())?;
        // Sent again as it was first sent: read again, it would be counted, logged and
        // masked under a new reference each time.
        if let Some(sent) = sent {
            return Some(sse::with_data(ev, &sent));
        }
        let data = Bytes::copy_from_slice(data.as_bytes());
        let (ev, answer) = settled_event(&self.gw, &pending, ev, data);
        if let Some(answer) = answer {
            up.numbered.keep(&pending, Some(answer));
        }
        Some(ev)
    }

    /// The stream again, when the server ended it cleanly before the answer and toolgate can
    /// ask for it; why not is kept for the request's answer.
    async fn resumed(&mut self) -> Option<UpstreamBody> {
        let from = self.resumes_from()?;
        let resume = self.resume.as_deref_mut()?;
        // What is left of an event cut off by the end is dropped, as the SSE standard has it.
        self.splitter.finish();
        match resume.resume(&from, self.retry, self.heard).await {
            Ok(body) => Some(body),
            Err(why) => {
                tracing::debug!(upstream = %self.pending.target.name, why = %why, "a stream the server ended before its answer was not resumed");
                self.not_resumed = Some(why);
                None
            }
        }
    }

    /// The server asked the client something: the client's call is answered with the
    /// question as an input-required round, and the stream waits for the retry.
    fn ask_client(&mut self, ev: &Bytes, asked: bridge::Question) -> Bytes {
        sse::with_data(ev, &self.round(asked))
    }

    /// The server asked on the session's own stream: the same, in an event of toolgate's.
    /// Once the call is answered, a question is too late for it.
    fn asked_aside(&mut self, asked: bridge::Question) {
        if !self.answered && self.parked.is_none() {
            let round = self.round(asked);
            self.out.push_back(sse::event(&round));
        }
    }

    /// The input-required round that answers the call with `asked`; the stream waits.
    fn round(&mut self, asked: bridge::Question) -> Vec<u8> {
        let state = Rounds::state();
        let id = self.pending.id.as_deref().expect("a request's stream");
        let body = bridge::input_required(id, &asked, &state);
        self.parked = Some((state, asked.id));
        self.answered = true;
        body
    }

    /// The rounds of an answer held because it asks for input; the server's stream is done.
    fn rounds(&mut self) -> Option<asking::AskingStream> {
        let held = self.held.take()?;
        let reverse_rounds = self.reverse_rounds.take()?;
        let (gw, pending) = (&self.gw, self.pending.clone());
        Some(asking::AskingStream::start(
            gw,
            pending,
            held,
            reverse_rounds,
            self.outcome.clone(),
        ))
    }

    /// Keeps the rest of the stream (`body`, and what the splitter holds) for the round's
    /// retry.
    fn park(&mut self, body: Body) {
        let (Some((state, asked)), Some(parking)) = (self.parked.take(), &mut self.parking) else {
            return;
        };
        let answers_as = match &parking.renumber {
            Some((from, _)) => from.clone(),
            None => self.pending.id.clone().expect("a request's stream"),
        };
        let max = self.gw.config.limits.max_sse_event_bytes;
        let parked = Parked {
            key: parking.key,
            asked,
            answers_as,
            rest: StreamRest {
                session: parking.session.clone(),
                splitter: std::mem::replace(&mut self.splitter, Splitter::new(max)),
                body,
                listening: parking.listening.take(),
            },
        };
        parking.rounds.park(state, parked);
    }

    /// The event to resume the stream from, when the server ended it cleanly before the
    /// answer and it can go on.
    fn resumes_from(&self) -> Option<Bytes> {
        let open = !self.answered && !self.raw && !self.dropping && self.held.is_none();
        self.last_id
            .clone()
            .filter(|_| open && self.pending.id.is_some())
    }

    /// The server's stream has ended or broken off: the event a CR, its last byte, ends
    /// (`data: …\r\r`) is read now.
    fn ended(&mut self) {
        if !self.raw && !self.dropping {
            self.splitter.ended();
            self.feed(Bytes::new());
        }
    }

    fn end(&mut self, broke: Option<String>) {
        let rest = self.splitter.finish().filter(|_| !self.dropping);
        let resumable = self.last_id.is_some() && self.not_resumed.is_none();
        if self.answered || self.raw || (broke.is_none() && resumable) {
            // Nothing follows it: what is left of the stream goes as it came.
            self.out.extend(rest);
            return;
        }
        let why = UpstreamError::unanswered_stream(broke.or(self.not_resumed.take()));
        let Some(a) = pipeline::unanswered(&self.gw, &self.pending, &why) else {
            self.out.extend(rest);
            return;
        };
        // toolgate's own event follows, and what is left of an event cut off by the end
        // would run into it: that is dropped, as the SSE standard has a reader drop it.
        self.outcome.set(why.outcome());
        self.out.push_back(sse::event(&a.body));
    }
}

/// A field's text read from `ev`: usually one line of it, shared rather than copied; joined
/// or mended text (several `data` lines, a byte that is not UTF-8) in bytes of its own.
fn shared(ev: &Bytes, text: std::borrow::Cow<'_, str>) -> Bytes {
    match text {
        std::borrow::Cow::Borrowed(t) => ev.slice_ref(t.as_bytes()),
        std::borrow::Cow::Owned(t) => Bytes::from(t),
    }
}

/// A round's retry in a bridged session (`upstream::rounds`): the client's answer goes to
/// the server's question, and the rest of the server's stream, kept since it asked, answers
/// the retry, read by the same rules, its answer under the retry's id; another question makes
/// another round.
pub(crate) async fn resume(
    (gw, target): (&Arc<Gateway>, &Target),
    up: &HttpUpstream,
    retry: &bridge::Retry,
    key: ScopeKey,
    pending: &Pending,
) -> Result<Response, Unresumed> {
    let wait = (&target.limits).into();
    let parked = up.bridge.resume(up, retry, key, wait).await?;
    let StreamRest {
        session,
        splitter,
        body,
        listening,
    } = parked.rest;
    // The call's place among those the session's questions go to comes with its stream.
    let parking = Parking {
        listening,
        rounds: up.bridge.rounds.clone(),
        key,
        session,
        renumber: (pending.id.clone()).map(|to| (parked.answers_as, to)),
        _entry: None,
    };
    let outcome = StreamOutcome::default();
    let mut inspector = SseInspector::new(gw.clone(), pending.clone(), outcome.clone());
    inspector.splitter = splitter;
    inspector.parking = Some(parking);
    // What was read past the question first.
    inspector.feed(Bytes::new());
    let mut resp = Response::new(sse_stream(inspector, body));
    // Its span ends with the stream, as a first answer's does.
    resp.extensions_mut().insert(outcome);
    let headers = resp.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(
        http::header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache"),
    );
    Ok(resp)
}

/// Streams the upstream body through the inspector, one event at a time; a stream the
/// server ends before the answer is asked for again and read on, when the inspector can.
fn sse_stream<B>(inspector: SseInspector, body: B) -> Body
where
    B: http_body::Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    struct State<B> {
        insp: SseInspector,
        /// The server's stream: the first, or one resumed.
        body: Option<http_body_util::Either<B, UpstreamBody>>,
        done: bool,
        /// The server's answer asked for input: the rest is toolgate's rounds.
        rounds: Option<asking::AskingStream>,
    }
    let stream = futures_util::stream::unfold(
        State {
            insp: inspector,
            body: Some(http_body_util::Either::Left(body)),
            done: false,
            rounds: None,
        },
        |mut st| async move {
            loop {
                // Kept before the question goes out, so that the retry finds it.
                if let Some(body) = st.body.take_if(|_| st.insp.parked.is_some()) {
                    st.insp.park(Body::new(body));
                    st.done = true;
                }
                if let Some(b) = st.insp.out.pop_front() {
                    return Some((Ok::<_, std::convert::Infallible>(b), st));
                }
                if let Some(rounds) = st.rounds.as_mut() {
                    let b = rounds.next().await?;
                    return Some((Ok(b), st));
                }
                if let Some(rounds) = st.insp.rounds() {
                    st.rounds = Some(rounds);
                    continue;
                }
                if st.done {
                    return None;
                }
                let body = st.body.as_mut()?;
                let listening = st.insp.parking.as_mut().and_then(|p| p.listening.as_mut());
                let next = match listening {
                    Some(l) => tokio::select! {
                        frame = body.frame() => frame,
                        Some(asked) = l.recv() => {
                            st.insp.asked_aside(asked);
                            continue;
                        }
                    },
                    None => body.frame().await,
                };
                match next {
                    Some(Ok(frame)) => {
                        if let Ok(data) = frame.into_data() {
                            st.insp.feed(data);
                        }
                    }
                    Some(Err(e)) => {
                        st.done = true;
                        st.insp.ended();
                        st.insp.end(Some(e.to_string()));
                    }
                    None => {
                        st.insp.ended();
                        if let Some(body) = st.insp.resumed().await {
                            st.body = Some(http_body_util::Either::Right(body));
                            continue;
                        }
                        st.done = true;
                        st.insp.end(None);
                    }
                }
            }
        },
    );
    Body::from_stream(stream)
}

/// `ev`, whose data is `data`, after the answer rules for `pending`; and whether it is the
/// request's answer.
/// `ev`, whose data is `data`, after the answer rules; and, when it answers `pending`, the
/// answer as sent.
fn settled_event(
    gw: &Gateway,
    pending: &Pending,
    ev: &Bytes,
    data: Bytes,
) -> (Bytes, Option<Bytes>) {
    let Some(s) = pipeline::settle_bytes(gw, pending, data) else {
        return (ev.clone(), None);
    };
    let ev = match s.rewritten || (s.answers && pending.completion().is_some()) {
        true => sse::with_data(ev, &s.body),
        false => ev.clone(),
    };
    (ev, s.answers.then_some(s.body))
}

impl Drop for SseInspector {
    /// A request's numbered stream, done: its client may ask the server for it again, and
    /// the answer it gets there is read by this request's rules (`upstream::numbered`).
    fn drop(&mut self) {
        if let Some(resume) = &self.resume
            && self.last_id.is_some()
        {
            resume
                .server()
                .numbered
                .keep(&self.pending, self.sent.take());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body::Body as _;

    #[tokio::test]
    async fn an_answer_goes_in_pieces_and_gives_its_share_back_when_gone() {
        let budget = Arc::new(ByteBudget::new(1 << 20));
        let held = ByteBudget::take_owned(&budget, 150_000).unwrap();
        let answer = Bytes::from(vec![b'x'; 150_000]);
        let mut body = Holding::new(http_body_util::Full::new(answer), held);
        assert_eq!(body.size_hint().exact(), Some(150_000));
        let mut pieces = Vec::new();
        while let Some(frame) = body.frame().await {
            pieces.push(frame.unwrap().into_data().unwrap().len());
            assert_eq!(budget.held(), 150_000, "held while some is left to pass on");
        }
        assert_eq!(pieces, [PIECE, PIECE, 150_000 - 2 * PIECE]);
        assert!(body.is_end_stream());
        drop(body);
        assert_eq!(budget.held(), 0);
    }
}
