//! A request answered as an SSE stream: what its child sends about it (its progress, a listen
//! request's notifications), then its answer.

use super::written::{client_left, finish};
use crate::gateway::Gateway;
use crate::jsonrpc;
use crate::pipeline::{self, Pending, asked};
use crate::transport::exchange::StreamOutcome;
use crate::transport::exchange::asking::{AskingStream, ReverseRounds};
use crate::transport::upstream::children::{Relation, SessionChild};
use crate::transport::upstream::multiplex::Sent;
use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::header::{CACHE_CONTROL, CONTENT_TYPE};
use serde_json::value::RawValue;
use std::sync::Arc;
use std::time::Duration;

/// On the shared child, toolgate's id for a request (also its progress token) and the
/// client's progress token, put back on what comes out.
pub(super) struct Remapped {
    pub(super) ours: Box<RawValue>,
    pub(super) client_token: Option<Box<RawValue>>,
    /// The request stays cancellable by its sender while its stream lasts.
    pub(super) _sent: Sent,
}

/// Answers a request as an SSE stream: what the child sends about it (registered under
/// `key`, its progress token or toolgate's id), then its answer. `remapped` on the shared
/// child; in a session the ids and tokens are the client's own.
pub(super) fn stream(
    gw: &Arc<Gateway>,
    sc: &Arc<SessionChild>,
    wire: Bytes,
    key: &str,
    pending: Pending,
    on: Streamed,
    timeout: Duration,
) -> Response {
    let (remapped, reverse_rounds) = match on {
        Streamed::Session(rounds) => (None, rounds),
        Streamed::Shared(remapped) => (Some(remapped), None),
    };
    let (relation, related) = sc.relate(key);
    let id = match &remapped {
        Some(r) => r.ours.get().to_owned(),
        None => pending
            .id
            .as_deref()
            .map_or("null", RawValue::get)
            .to_owned(),
    };
    let stream = RelatedStream {
        gw: gw.clone(),
        sc: sc.clone(),
        remapped,
        pending,
        answered: false,
        reverse_rounds,
        rounds: None,
        _relation: relation,
    };
    // Written now, once what the child sends about it has a place to go.
    let owed = sc.child.start(wire, &id);
    let answer = async move { owed?.answer(timeout).await };
    let events = futures_util::stream::unfold(
        (stream, related, Box::pin(answer)),
        |(mut s, mut related, mut answer)| async move {
            if let Some(rounds) = s.rounds.as_mut() {
                let event = rounds.next().await?;
                return Some((Ok(event), (s, related, answer)));
            }
            if s.answered {
                return None;
            }
            let event = tokio::select! {
                biased;
                Some(line) = related.recv() => s.restore(line),
                a = &mut answer => {
                    s.answered = true;
                    match s.asks(a) {
                        Ok(mut rounds) => {
                            let event = rounds.next().await;
                            s.rounds = Some(rounds);
                            return Some((Ok(event?), (s, related, answer)));
                        }
                        Err(a) => s.last(a),
                    }
                }
            };
            Some((
                Ok::<_, std::convert::Infallible>(crate::transport::sse::event(&event)),
                (s, related, answer),
            ))
        },
    );
    Response::builder()
        .header(CONTENT_TYPE, "text/event-stream")
        .header(CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(events))
        .expect("valid response")
}

/// The state of one request answered as a stream.
struct RelatedStream {
    gw: Arc<crate::gateway::Gateway>,
    sc: Arc<SessionChild>,
    remapped: Option<Remapped>,
    pending: Pending,
    answered: bool,
    /// For a handshake-era client of a server of 2026-07-28: what the rounds need when the
    /// answer asks for input, and then the rounds.
    reverse_rounds: Option<ReverseRounds>,
    rounds: Option<AskingStream>,
    _relation: Relation,
}

/// Which child a streamed request is on: a session's (whose server may ask its handshake-era
/// client for input), or the shared one, where toolgate's ids stand for the client's.
pub(super) enum Streamed {
    Session(Option<ReverseRounds>),
    Shared(Remapped),
}

impl RelatedStream {
    /// The rounds of an answer that asks for input, when the client is to be asked; the
    /// answer back otherwise.
    fn asks(
        &mut self,
        answer: Result<Bytes, crate::error::UpstreamError>,
    ) -> Result<AskingStream, Result<Bytes, crate::error::UpstreamError>> {
        match (answer, self.reverse_rounds.take()) {
            (Ok(held), Some(rounds)) if asked::input_required(&held).is_some() => {
                let outcome = StreamOutcome::default();
                let pending = self.pending.clone();
                Ok(AskingStream::start(
                    &self.gw, pending, held, rounds, outcome,
                ))
            }
            (answer, _) => Err(answer),
        }
    }

    /// A message about the request, with the client's token or id where toolgate's was.
    fn restore(&self, line: Bytes) -> Bytes {
        let Some(remapped) = &self.remapped else {
            return line;
        };
        let client_id = self.pending.id.as_deref().expect("a request has an id");
        let put = |path: &[&str], v: &RawValue| jsonrpc::replace_at(&line, path, v);
        let restored = match &remapped.client_token {
            Some(token) if crate::text::holds!(&line, "progressToken") => {
                put(&["params", "progressToken"], token)
            }
            _ => put(
                &["params", "_meta", "io.modelcontextprotocol/subscriptionId"],
                client_id,
            ),
        };
        restored.map_or(line, Bytes::from)
    }

    /// The answer (or why there is none), last on the stream.
    fn last(&self, answer: Result<Bytes, crate::error::UpstreamError>) -> Bytes {
        match answer {
            Ok(a) => {
                let a = match (&self.remapped, self.pending.id.as_deref()) {
                    (Some(_), Some(id)) => {
                        jsonrpc::replace_at(&a, &["id"], id).map_or(a, Bytes::from)
                    }
                    _ => a,
                };
                finish(&self.gw, &self.pending, a).1
            }
            Err(e) => pipeline::unanswered(&self.gw, &self.pending, &e)
                .map_or_else(Bytes::new, |a| Bytes::from(a.body)),
        }
    }
}

impl Drop for RelatedStream {
    /// The client left before the answer. On the shared child, the child is told, so a
    /// listen request (which would otherwise stay open for good) ends and nothing waits for
    /// it. In a session, a handshake-era client's disconnection cancels nothing: the answer
    /// is no longer waited for, and the child's late answer is dropped.
    fn drop(&mut self) {
        if !self.answered
            && let Some(r) = &self.remapped
        {
            client_left(&self.sc, &r.ours);
        }
    }
}
