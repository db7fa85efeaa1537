//! An answer in HTTP form, as lines to the stdio client: an HTTP server's, once the answer
//! rules have read it (`exchange::answers`), and the rounds a server of 2026-07-28 asks a
//! handshake-era client (`exchange::asking`), from either kind of server. The rules, the
//! rounds and toolgate's own answers are the exchange's, as they are the HTTP edge's, so they
//! are alike behind either front; what is left here is what a pipe cannot carry: an HTTP
//! status, and a stream the client could resume.

use super::ToClient;
use crate::error::UpstreamError;
use crate::jsonrpc::{self, Body as Parsed, Message};
use crate::net::body::{Collected, collect_upstream};
use crate::net::client::is_event_stream;
use crate::pipeline::Pending;
use crate::transport::exchange::StreamOutcome;
use crate::transport::sse::{self, Split, Splitter};
use axum::response::Response;
use bytes::Bytes;
use http_body_util::BodyExt;
use serde_json::value::RawValue;

/// Writes the messages of `resp` to the client until the request's answer has gone out (an
/// SSE stream is left then: one answer per request). `before_answer` reads the answer just
/// before it is written. A request that gets no answer is answered with why.
pub(super) async fn write(
    to: &ToClient,
    pending: &Pending,
    resp: Response,
    before_answer: impl FnOnce(&Message<'_>),
) {
    let outcome = resp.extensions().get::<StreamOutcome>().cloned();
    let status = resp.status();
    let is_sse = is_event_stream(resp.headers());
    let mut lines = Lines {
        to,
        pending,
        outcome,
        before_answer: Some(before_answer),
    };
    let unanswered = match is_sse {
        true => lines.events(resp.into_body()).await,
        false => lines.whole(resp.into_body(), status).await,
    };
    if let Some(why) = unanswered {
        to.failed(pending, &why);
    }
}

/// The messages of one answer, on their way to the client.
struct Lines<'a, F> {
    to: &'a ToClient,
    pending: &'a Pending,
    /// How toolgate answered, when the edge answered the request itself.
    outcome: Option<StreamOutcome>,
    before_answer: Option<F>,
}

impl<F: FnOnce(&Message<'_>)> Lines<'_, F> {
    /// A JSON answer: one message.
    async fn whole(
        &mut self,
        body: axum::body::Body,
        status: http::StatusCode,
    ) -> Option<UpstreamError> {
        let max = self.to.gw.config.limits.max_response_bytes;
        let bytes = match collect_upstream(body, max).await {
            Ok(Collected::Whole(bytes)) => bytes,
            Ok(Collected::TooLarge(_)) => return Some(UpstreamError::answer_over(max)),
            Err(e) => return Some(UpstreamError::unanswered_stream(Some(e.to_string()))),
        };
        if bytes.is_empty() || !self.one(bytes) {
            return Some(UpstreamError::NotJsonRpc(format!(
                "HTTP {} without an answer to the request",
                status.as_u16()
            )));
        }
        None
    }

    /// An SSE answer: each event's message as it comes, until the answer.
    async fn events(&mut self, mut body: axum::body::Body) -> Option<UpstreamError> {
        let max = self.to.gw.config.limits.max_sse_event_bytes;
        let mut splitter = Splitter::new(max);
        // Why the server's stream is over, once it is: the events it ended on are read first.
        let mut over = None;
        loop {
            while let Some(split) = splitter.next_event() {
                let Split::Event(ev) = split else {
                    return Some(UpstreamError::event_over(max));
                };
                let Some(d) = sse::data(&ev).filter(|d| !d.is_empty()) else {
                    continue;
                };
                if self.one(Bytes::copy_from_slice(d.as_bytes())) {
                    return None;
                }
            }
            if over.is_some() {
                return over;
            }
            // Read no faster than the client reads: the server is held back by TCP.
            self.to.paced().await;
            let broke = match body.frame().await {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        splitter.push(&data);
                    }
                    continue;
                }
                Some(Err(e)) => Some(e.to_string()),
                None => None,
            };
            splitter.ended();
            over = Some(UpstreamError::unanswered_stream(broke));
        }
    }

    /// One message about the request, written; `true` once the request is answered (a
    /// notification or a client's answer is, by anything).
    fn one(&mut self, bytes: Bytes) -> bool {
        let Some(id) = self.pending.id.as_deref() else {
            return true;
        };
        // An error that names no request (a 4xx refusal of the POST itself) is this
        // request's answer: a stdio client matches answers by id, so it gets the request's.
        // Only a message that holds an error is read for one.
        if crate::text::holds!(&bytes, "\"error\"")
            && let Some(err) = jsonrpc::refusal(&bytes)
        {
            self.to
                .write_answer(self.pending, on_id(id, err), "forwarded");
            return true;
        }
        let Ok(Parsed::Single(m)) = jsonrpc::parse(&bytes) else {
            return false;
        };
        if m.method.is_some() {
            // A notification or request about this one (progress, a question): passed on,
            // already read by the rules.
            self.to.write(bytes);
            return false;
        }
        if let Some(f) = self.before_answer.take() {
            f(&m);
        }
        // It came on the request's own exchange, so it is the request's answer whatever id
        // it names (docs/contract.md §6); a stdio client matches answers by id alone.
        let names_request = m.id.is_some_and(|named| same_id(named, id));
        let bytes = match names_request {
            true => bytes,
            false => jsonrpc::replace_at(&bytes, &["id"], id).map_or(bytes, Bytes::from),
        };
        let outcome = self.outcome.as_ref().and_then(StreamOutcome::get);
        (self.to).write_answer(self.pending, bytes, outcome.unwrap_or("forwarded"));
        true
    }
}

/// Whether two ids are one by value, however each is spelled.
fn same_id(a: &RawValue, b: &RawValue) -> bool {
    jsonrpc::id_key(a.get()) == jsonrpc::id_key(b.get())
}

/// A server's refusal `err` answered on the request's `id`: its code and message, and its
/// `data` as written.
fn on_id(id: &RawValue, err: &RawValue) -> Vec<u8> {
    let head = jsonrpc::ErrorHead::read(err);
    let code = (head.code.as_ref().and_then(jsonrpc::integer)).unwrap_or(jsonrpc::INTERNAL_ERROR);
    let message = (head.message.as_deref()).unwrap_or("the server refused the request");
    jsonrpc::error_response_as_written(Some(id), code, message, head.data)
}
