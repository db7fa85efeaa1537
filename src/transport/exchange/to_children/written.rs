//! What is left of a message once it is written to its child: its answer to wait for, read
//! as its client is to read it.

use super::super::Note;
use super::super::asking::{self, ReverseRounds};
use super::super::reply;
use super::super::subscription;
use crate::error::UpstreamError;
use crate::gateway::Gateway;
use crate::jsonrpc;
use crate::mcp;
use crate::pipeline::subscriptions::Subscription;
use crate::pipeline::{self, Pending, asked};
use crate::telemetry::hop::{Hop, HopEnd};
use crate::transport::upstream::child::{Given, Owed, Share, Waiting, Within};
use crate::transport::upstream::child_questions::Answered;
use crate::transport::upstream::children::SessionChild;
use crate::transport::upstream::multiplex::Sent;
use crate::transport::upstream::subscribers::{self, Release};
use axum::response::Response;
use bytes::Bytes;
use http::StatusCode;
use http::header::HeaderValue;
use serde_json::value::RawValue;
use std::sync::Arc;
use std::time::Duration;

/// A message written to its child, and what is left of its exchange.
pub(crate) struct Written {
    pub(super) sc: Arc<SessionChild>,
    pub(super) timeout: Duration,
    pub(super) then: Then,
    /// The message's hop to the child, when traced: it ends with the answer.
    pub(super) hop: Option<Hop>,
}

/// What a written message waits for.
pub(super) enum Then {
    /// Nothing: toolgate's answer, the child's acceptance, or a stream that waits on its own.
    Done(Response),
    /// The answer to a request under its client's id.
    Own(Owed, Own),
    /// The answer to a request on the shared child, under toolgate's id.
    Shared {
        owed: Owed,
        client_id: Box<RawValue>,
        left: Left,
        _sent: Sent,
    },
    /// A bridged `subscriptions/listen`, served from the child's session: nothing of it is
    /// written as it came.
    Subscribe(Box<Subscription>),
    /// A bridged call's answer, or the round the server's question makes of it.
    Bridged {
        waiting: Waiting,
        answers_as: Box<RawValue>,
        client_id: Box<RawValue>,
        left: Left,
        _sent: Option<Sent>,
    },
}

/// What a request under its client's id reads its answer against.
pub(super) struct Own {
    pub(super) client_id: Box<RawValue>,
    /// For a handshake-era client of a server of 2026-07-28: what the rounds need when the
    /// answer asks for input.
    pub(super) rounds: Option<ReverseRounds>,
    /// The params of an `initialize` the server may refuse.
    pub(super) handshake: Option<Option<Box<RawValue>>>,
    /// The id of the session this `initialize` opens, for the answer's header.
    pub(super) new_session: Option<String>,
}

/// What a child's way gives its front, in HTTP form: most often one JSON message, with the
/// status its error code maps to, which the stdio front writes as it is; else a response of
/// its own (a stream, toolgate's refusal, the POST's 202, a new session's header).
pub(crate) enum ChildReply {
    One(StatusCode, Bytes),
    Response(Response),
}

impl ChildReply {
    fn status(&self) -> StatusCode {
        match self {
            ChildReply::One(status, _) => *status,
            ChildReply::Response(resp) => resp.status(),
        }
    }

    pub(crate) fn into_response(self) -> Response {
        match self {
            ChildReply::One(status, body) => reply::json(status, body),
            ChildReply::Response(resp) => resp,
        }
    }
}

impl Written {
    /// Waits for the child's answer and answers the client with it.
    pub(crate) async fn answer(
        self,
        gw: &Arc<Gateway>,
        pending: &Pending,
        note: &mut Note,
    ) -> ChildReply {
        let Written {
            sc,
            timeout,
            then,
            hop,
        } = self;
        // One block, not a function awaited here: a future of its own would hold the
        // message's wait twice (as it was given it, and as it awaits it), and every request
        // would copy both (docs/performance.md).
        let mut cancelled = false;
        let answered: Result<ChildReply, UpstreamError> = 'wait: {
            match then {
                Then::Done(resp) => Ok(ChildReply::Response(resp)),
                Then::Subscribe(s) => {
                    // Boxed: rare, and held while the stream is opened.
                    let served = subscribe(gw, &sc, *s, pending, timeout, note);
                    Ok(ChildReply::Response(Box::pin(served).await))
                }
                Then::Own(owed, own) => {
                    let answer = match owed.given(timeout).await {
                        Ok(given) => read_given(given, &mut cancelled),
                        Err(e) => break 'wait Err(e),
                    };
                    note.outcome = "forwarded";
                    Ok(own.answer(gw, &sc, timeout, pending, answer).await)
                }
                Then::Shared {
                    owed,
                    client_id,
                    mut left,
                    _sent,
                } => {
                    let answer = owed.given(timeout).await;
                    left.cancels = false;
                    let (answer, share) = match answer {
                        Ok(given) => read_given(given, &mut cancelled),
                        Err(e) => break 'wait Err(e),
                    };
                    note.outcome = "forwarded";
                    let answer = jsonrpc::replace_at(&answer, &["id"], &client_id)
                        .map_or(answer, Bytes::from);
                    let (status, body) = finish(gw, pending, answer);
                    Ok(ChildReply::One(status, kept(body, share)))
                }
                Then::Bridged {
                    waiting,
                    answers_as,
                    client_id,
                    mut left,
                    _sent,
                } => {
                    let ids = (&*answers_as, &*client_id);
                    // Boxed, as the rare path it is: every request's future would carry its
                    // size.
                    let answered =
                        Box::pin((sc.child).bridged_answer(waiting, ids, pending.key, timeout))
                            .await;
                    left.cancels = false;
                    note.outcome = "forwarded";
                    answered.map(|a| match a {
                        Answered::Server(given) => {
                            let (answer, share) = read_given(given, &mut cancelled);
                            let (status, body) = finish(gw, pending, answer);
                            ChildReply::One(status, kept(body, share))
                        }
                        Answered::Round(round) => ChildReply::One(StatusCode::OK, round.into()),
                    })
                }
            }
        };
        if let Some(hop) = hop {
            hop.end(match &answered {
                Ok(_) if cancelled => HopEnd::Cancelled,
                Ok(reply) => HopEnd::Ended {
                    failed: !reply.status().is_success(),
                },
                Err(e) => HopEnd::Unanswered(e),
            });
        }
        answered
            .unwrap_or_else(|e| ChildReply::Response(reply::upstream_failed(gw, pending, &e, note)))
    }
}

/// A 2026-07-28 client's `subscriptions/listen` (the request `pending`), served from the
/// bridged child `sc`, asked each of toolgate's own requests within `timeout`.
async fn subscribe(
    gw: &Arc<Gateway>,
    sc: &SessionChild,
    subscription: Subscription,
    pending: &Pending,
    timeout: Duration,
    note: &mut Note,
) -> Response {
    let (child, ids) = (sc.child.clone(), gw.clone());
    let release: Release = Box::new(move |uris, releasing| {
        tokio::spawn(async move {
            let _releasing = releasing;
            let server = Within(&child, timeout);
            subscribers::unsubscribe(&server, uris, || ids.next_id()).await;
        });
    });
    let server = (&Within(&sc.child, timeout), &sc.subscribers);
    subscription::serve(gw, server, (subscription, pending), release, note).await
}

impl Own {
    /// The child's answer: the rounds it asks of a handshake-era client, toolgate's answer to
    /// a handshake the server refused, else the answer itself.
    async fn answer(
        self,
        gw: &Arc<Gateway>,
        sc: &Arc<SessionChild>,
        timeout: Duration,
        pending: &Pending,
        (answer, share): (Bytes, Option<Share>),
    ) -> ChildReply {
        if let Some(rounds) = self.rounds
            && asked::input_required(&answer).is_some()
        {
            return ChildReply::Response(asking::answer(gw, pending.clone(), answer, rounds));
        }
        // A handshake the server refused: one that answers `server/discover` speaks only
        // 2026-07-28, and the session is bridged to it (`bridge::Reverse`).
        let reversed = match &self.handshake {
            Some(params) => {
                let (ids, id) = (|| gw.next_id(), &*self.client_id);
                // Boxed: a handshake's path, once per session.
                Box::pin(
                    sc.child
                        .reverse_if_refused(ids, timeout, id, params.as_deref(), &answer),
                )
                .await
            }
            None => None,
        };
        let (status, body) = match reversed {
            Some((ours, reverse)) => {
                sc.set_reverse(reverse, gw.clone());
                (StatusCode::OK, Bytes::from(ours))
            }
            None => {
                let (status, body) = finish(gw, pending, answer);
                (status, kept(body, share))
            }
        };
        let Some(id) = self.new_session else {
            return ChildReply::One(status, body);
        };
        let mut resp = reply::json(status, body);
        if let Ok(v) = HeaderValue::from_str(&id) {
            resp.headers_mut().insert(mcp::SESSION_ID, v);
        }
        ChildReply::Response(resp)
    }
}

/// What a request was given, as its client is answered, with the share its answer keeps;
/// `cancelled` says whether it was toolgate's answer to a cancelled request rather than the
/// child's.
fn read_given(given: Given, cancelled: &mut bool) -> (Bytes, Option<Share>) {
    *cancelled = matches!(given, Given::Cancelled(_));
    given.into_parts()
}

/// `body`, the answer its client is given, holding the share of the child's answer it was
/// made from until it has gone: rewritten or not, it is about as large.
pub(super) fn kept(body: Bytes, share: Option<Share>) -> Bytes {
    match share {
        Some(share) => share.keeping(body),
        None => body,
    }
}

/// The child's answer, with its client's id, as the client reads it ([`pipeline::settle`]),
/// and the status it goes with: the answer's error code mapped by the request's era.
pub(super) fn finish(gw: &Gateway, pending: &Pending, answer: Bytes) -> (StatusCode, Bytes) {
    match pipeline::settle_bytes(gw, pending, answer.clone()) {
        Some(s) => (
            s.error_code
                .map_or(StatusCode::OK, |c| pending.era.status_for(c)),
            s.body,
        ),
        None => (StatusCode::OK, answer),
    }
}

/// A shared-child request whose client may leave before its answer; see [`client_left`].
pub(super) struct Left {
    pub(super) sc: Arc<SessionChild>,
    pub(super) ours: Box<RawValue>,
    /// Cleared once the answer came.
    pub(super) cancels: bool,
}

impl Drop for Left {
    fn drop(&mut self) {
        if self.cancels {
            client_left(&self.sc, &self.ours);
        }
    }
}

/// The client of the shared child's request `ours` left before its answer: nothing waits for
/// the answer any more, and the child is sent `notifications/cancelled` for it.
pub(super) fn client_left(sc: &SessionChild, ours: &RawValue) {
    sc.child.cancel(ours.get());
    let cancelled = serde_json::json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": ours, "reason": "the client went away"}});
    let _ = sc.child.send(Bytes::from(cancelled.to_string()));
}
