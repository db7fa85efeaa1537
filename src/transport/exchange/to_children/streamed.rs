//! A request answered as an SSE stream: what its child sends about it (its progress, a listen
//! request's notifications), then its answer.

use super::written::{client_left, finish, kept};
use crate::error::UpstreamError;
use crate::gateway::Gateway;
use crate::jsonrpc;
use crate::pipeline::{self, Pending, asked};
use crate::transport::exchange::StreamOutcome;
use crate::transport::exchange::asking::{AskingStream, ReverseRounds};
#[cfg(doc)]
use crate::transport::upstream::child::ChildProcess;
use crate::transport::upstream::child::{Given, Waiting};
use crate::transport::upstream::child_questions::Answered;
use crate::transport::upstream::children::{Relation, SessionChild};
use crate::transport::upstream::multiplex::Sent;
use crate::transport::upstream::paced;
use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::header::{CACHE_CONTROL, CONTENT_TYPE};
use serde_json::value::RawValue;
use std::future::Future;
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
    // The progress token the child is sent: the client's, or toolgate's id in its place (a
    // listen request on the shared child may carry none).
    let token = match &remapped {
        Some(r) if r.client_token.is_none() => None,
        _ => Some(key),
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
    let stream = RelatedStream::new((gw, sc), relation, remapped, pending, reverse_rounds);
    // Written now, once what the child sends about it has a place to go.
    let owed = sc.child.start_as(wire, &id, token);
    let answer = async move { owed?.given(timeout).await.map(Last::Answer) };
    respond(stream, related, answer)
}

/// A bridged 2026-07-28 call on the shared child whose client asked for its progress,
/// already written ([`ChildProcess::bridged_call`]) once what the child sends about it has
/// a place to go (`related`, under the id the server answers it under, `remapped.ours`):
/// its progress as it comes, then the server's answer or, when it asks first, a round.
pub(super) fn bridged(
    gw: &Arc<Gateway>,
    sc: &Arc<SessionChild>,
    (related, waiting, remapped): ((Relation, paced::Receiver), Waiting, Remapped),
    (client_id, pending): (Box<RawValue>, Pending),
    timeout: Duration,
) -> Response {
    let (child, key, answers_as) = (sc.child.clone(), pending.key, remapped.ours.clone());
    let (relation, related) = related;
    let stream = RelatedStream::new((gw, sc), relation, Some(remapped), pending, None);
    let answer = async move {
        let ids = (&*answers_as, &*client_id);
        Ok(
            match child.bridged_answer(waiting, ids, key, timeout).await? {
                Answered::Server(given) => Last::Answer(given),
                Answered::Round(round) => Last::Round(round.into()),
            },
        )
    };
    respond(stream, related, answer)
}

/// What ends a streamed request: the answer, read by its rules, or a round of a bridged
/// call, which is toolgate's own and goes as it is.
enum Last {
    Answer(Given),
    Round(Bytes),
}

/// The SSE response: what the child sends about the request (`related`) until `answer`
/// comes, then the answer, or the rounds it asks of a handshake-era client.
fn respond(
    stream: RelatedStream,
    related: paced::Receiver,
    answer: impl Future<Output = Result<Last, UpstreamError>> + Send + 'static,
) -> Response {
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
            // The child's answer's share, kept by the event that carries it.
            let mut share = None;
            let event = tokio::select! {
                biased;
                Some(line) = related.recv() => s.restore(line),
                a = &mut answer => {
                    s.answered = true;
                    match a {
                        Ok(Last::Round(round)) => round,
                        Ok(Last::Answer(given)) => {
                            let a;
                            (a, share) = given.into_parts();
                            match s.asks(Ok(a)) {
                                Ok(mut rounds) => {
                                    let event = rounds.next().await;
                                    s.rounds = Some(rounds);
                                    return Some((Ok(event?), (s, related, answer)));
                                }
                                Err(a) => s.last(a),
                            }
                        }
                        Err(e) => s.last(Err(e)),
                    }
                }
            };
            let event = kept(crate::transport::sse::event(&event), share);
            Some((
                Ok::<_, std::convert::Infallible>(event),
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
    fn new(
        (gw, sc): (&Arc<Gateway>, &Arc<SessionChild>),
        relation: Relation,
        remapped: Option<Remapped>,
        pending: Pending,
        reverse_rounds: Option<ReverseRounds>,
    ) -> RelatedStream {
        RelatedStream {
            gw: gw.clone(),
            sc: sc.clone(),
            remapped,
            pending,
            answered: false,
            reverse_rounds,
            rounds: None,
            _relation: relation,
        }
    }

    /// The rounds of an answer that asks for input, when the client is to be asked; the
    /// answer back otherwise.
    fn asks(
        &mut self,
        answer: Result<Bytes, UpstreamError>,
    ) -> Result<AskingStream, Result<Bytes, UpstreamError>> {
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
    fn last(&self, answer: Result<Bytes, UpstreamError>) -> Bytes {
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
