//! The way to a stdio server's child, settled before the guard reads the message, and the
//! writing of the message to it.

use super::streamed::{self, Remapped, Streamed, stream};
use super::written::{Left, Own, Then, Written};
use crate::catalog::ScopeKey;
use crate::gateway::{Gateway, Target};
use crate::jsonrpc::{self, Message};
use crate::mcp::{self, Era};
use crate::pipeline::asked;
use crate::pipeline::bridge::{self, Declared};
use crate::pipeline::step::Bridging;
use crate::pipeline::{self, Pending};
use crate::transport::exchange::asking::{RetryServer, ReverseRounds};
use crate::transport::exchange::reply;
use crate::transport::exchange::{Note, Said};
use crate::transport::upstream::child::ChildLister;
use crate::transport::upstream::children::{NoChild, SessionChild, StdioPool};
use crate::transport::upstream::multiplex::{self, Entered, Owner, Sent};
use crate::transport::upstream::rounds::Unresumed;
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use serde_json::value::RawValue;
use std::sync::Arc;
use std::time::Duration;

/// What reaching a stdio server takes, whichever front the message came in by: the gateway
/// in force, the server's target and its children.
#[derive(Clone, Copy)]
pub(crate) struct ToChildren<'a> {
    pub(crate) gw: &'a Arc<Gateway>,
    pub(crate) target: &'a Arc<Target>,
    pub(crate) pool: &'a Arc<StdioPool>,
}

fn no_child(to: ToChildren<'_>, era: Era, m: &Message<'_>, e: NoChild) -> Response {
    let max = to.target.stdio.max_sessions;
    match e {
        NoChild::UnknownSession => reply::json(
            StatusCode::NOT_FOUND,
            jsonrpc::error_response(m.id, jsonrpc::INVALID_REQUEST, "Session not found", None),
        ),
        NoChild::TooMany => {
            let msg = format!(
                "Too many sessions: this gateway runs at most {max} of this tool server's processes; try again later"
            );
            reply::json(
                StatusCode::SERVICE_UNAVAILABLE,
                jsonrpc::error_response(m.id, jsonrpc::INTERNAL_ERROR, &msg, None),
            )
        }
        NoChild::TooManyForClient(n) => {
            let msg = format!(
                "Too many sessions: this client already holds {n}, the most one client may; end one (DELETE) or try again later"
            );
            reply::json(
                StatusCode::TOO_MANY_REQUESTS,
                jsonrpc::error_response(m.id, jsonrpc::INTERNAL_ERROR, &msg, None),
            )
        }
        NoChild::Failed(e) => match pipeline::undecided(to.gw, to.target, era, m, &e) {
            Some(a) => reply::answer(era, a),
            None => reply::undelivered(to.gw, to.target, &e),
        },
    }
}

/// How one message reaches a stdio server, settled before the guard reads it: its
/// session's child, the child a new session starts with, the shared child of the requests
/// without a session, or the stdio front's one child.
pub(crate) struct ChildWay {
    sc: Arc<SessionChild>,
    kind: Kind,
    era: Era,
    key: ScopeKey,
    timeout: Duration,
}

/// Which child a message goes to, and so whose ids it carries.
enum Kind {
    /// A session's child, under its client's ids; `Some` holds the id of the session this
    /// `initialize` opens, for the answer's header.
    Session(Option<String>),
    /// The shared child, under toolgate's ids; it holds who sends the message (`owner`),
    /// whose requests alone a cancellation may name.
    Shared(Box<str>),
    /// The stdio front's one child, under its client's ids, serving both eras; `true` for
    /// the client's `initialize`. What it sends on its own goes to the pipe as it comes, so
    /// no answer here is a stream.
    Pipe(bool),
}

impl ChildWay {
    /// `Err` is the client's answer when no child can take the message.
    pub(crate) async fn find(
        to: ToChildren<'_>,
        headers: &HeaderMap,
        m: &Message<'_>,
        era: Era,
        (caller, owner): (ScopeKey, Owner<'_>),
        note: &mut Note,
    ) -> Result<ChildWay, Response> {
        let pool = to.pool;
        // `initialize` in the 2026-07-28 era: what a server of that era answers over HTTP;
        // over stdio it answers -32022, which would send the client looking for another
        // version.
        if era == Era::Modern
            && m.method() == Some("initialize")
            && let Some(answer) = bridge::removed_method("initialize", m.id)
        {
            note.outcome = "answered";
            return Err(reply::json(StatusCode::NOT_FOUND, answer));
        }
        let session = headers.get(mcp::SESSION_ID).and_then(|v| v.to_str().ok());
        // Who sends it matters where a child is shared or a session counted against its
        // opener, not in a session's own requests.
        let found = match (session, m.method()) {
            (None, Some("initialize")) => pool
                .open(&owner.key(), headers)
                .map(|(id, sc)| (sc, Kind::Session(Some(id)))),
            (Some(s), _) => pool.session(s).map(|sc| (sc, Kind::Session(None))),
            (None, _) => {
                let client = || Declared::of(m);
                pool.shared(era, client)
                    .await
                    .map(|sc| (sc, Kind::Shared(owner.key())))
            }
        };
        let (sc, kind) = found.map_err(|e| no_child(to, era, m, e))?;
        let key = match (&kind, sc.declared()) {
            (Kind::Session(Some(id)), _) => to.gw.scope(to.target, Some(id.as_bytes()), []),
            // A bridged child lists its tools by what its clients can do.
            (_, Some(caps)) if era == Era::Modern => to.gw.narrower(caller, caps.as_bytes()),
            _ => caller,
        };
        Ok(ChildWay {
            sc,
            kind,
            era,
            key,
            timeout: to.target.limits.upstream_timeout,
        })
    }

    /// The way to the stdio front's one child, whose listings are kept under `key`;
    /// `initialize` for the client's own.
    pub(crate) fn pipe(
        sc: Arc<SessionChild>,
        era: Era,
        key: ScopeKey,
        timeout: Duration,
        initialize: bool,
    ) -> ChildWay {
        ChildWay {
            sc,
            kind: Kind::Pipe(initialize),
            era,
            key,
            timeout,
        }
    }

    /// The scope the child's listings are kept under (a new session's own).
    pub(crate) fn key(&self) -> ScopeKey {
        self.key
    }

    /// A 2026-07-28 message goes over the handshake when its child speaks only that (only a
    /// shared child or the stdio front's are ever bridged so); a handshake-era message of a
    /// session whose child speaks only 2026-07-28 goes over that.
    pub(crate) fn bridging(&self) -> Bridging<'_> {
        Bridging::of(
            self.sc.bridged().filter(|_| self.era == Era::Modern),
            self.sc
                .reverse()
                .map(|r| &**r)
                .filter(|_| self.era == Era::Legacy),
        )
    }

    pub(crate) fn lister(&self) -> ChildLister<'_> {
        ChildLister {
            child: &self.sc.child,
            timeout: self.timeout,
            bridging: self.bridging(),
        }
    }

    /// A client's cancellation of request `id`, as the child is to read it: in a session, as
    /// it came; on the shared child, under toolgate's id for that client's own request, or
    /// `None` when it names none of its requests in flight. The POST still waiting for the
    /// request ends either way. The stdio front ends its own wait: its client is answered
    /// nothing.
    fn cancelled(&self, id: &RawValue, body: Bytes) -> Option<Bytes> {
        let owner = match &self.kind {
            Kind::Pipe(_) => return Some(body),
            Kind::Session(_) => {
                self.sc.child.cancel(id.get());
                return Some(body);
            }
            Kind::Shared(owner) => owner,
        };
        let ours = self.sc.multiplexed.ours(owner, id.get())?;
        self.sc.child.cancel(&ours);
        multiplex::cancellation(&body, &ours)
    }

    /// For a handshake-era client's request (`body`) to a server of 2026-07-28, which may ask
    /// for input: what its rounds need.
    fn reverse_rounds(&self, method: &str, body: &Bytes) -> Option<ReverseRounds> {
        let reverse = self.sc.reverse().filter(|_| self.era == Era::Legacy)?;
        asked::may_ask(method).then(|| ReverseRounds {
            request: body.clone(),
            reverse: reverse.clone(),
            server: RetryServer::Child(self.sc.child.retrying(self.timeout)),
        })
    }

    /// Whether a request of `method` is a bridged call the server may ask something first.
    fn bridged_call(&self, method: &str) -> bool {
        self.era == Era::Modern && self.sc.bridged().is_some() && asked::may_ask(method)
    }

    /// Sends what the gate forwards and answers the POST with what the child answers.
    pub(crate) async fn send(
        self,
        gw: &Arc<Gateway>,
        body: Bytes,
        pending: Pending,
        said: Said<'_>,
        note: &mut Note,
    ) -> Response {
        let written = self.write(gw, body, &pending, said, note);
        written.answer(gw, &pending, note).await.into_response()
    }

    /// Writes a message to the child now, so that a front writes in its client's order;
    /// what is left is to wait for the answer ([`Written::answer`]).
    pub(crate) fn write(
        self,
        gw: &Arc<Gateway>,
        body: Bytes,
        pending: &Pending,
        said: Said<'_>,
        note: &mut Note,
    ) -> Written {
        // Served from the child's session, not written as it came: no hop to the child, as
        // none to an HTTP server.
        if let pipeline::Kind::Subscription(s) = &pending.kind {
            return Written {
                sc: self.sc,
                timeout: self.timeout,
                then: Then::Subscribe(s.clone()),
                hop: None,
            };
        }
        let hop = note.hop(self.sc.child.hop_to()).map(|(hop, _)| hop);
        let mut w = Writing {
            gw,
            pending,
            said,
            note,
        };
        let then = match (pending.id.clone(), &self.kind) {
            (None, _) => Then::Done(self.tell(&mut w, body)),
            (Some(id), Kind::Shared(owner)) => self.write_shared(owner, &mut w, (body, id)),
            (Some(id), _) => self.write_own(&mut w, (body, id)),
        };
        Written {
            sc: self.sc,
            timeout: self.timeout,
            then,
            hop,
        }
    }

    /// A notification or a client's answer. A cancellation also ends what still waits for
    /// that request.
    fn tell(&self, w: &mut Writing<'_>, mut body: Bytes) -> Response {
        if let Some(id) = w.said.cancelled {
            match self.cancelled(id, body) {
                Some(b) => body = b,
                None => {
                    w.note.outcome = "answered";
                    return reply::accepted();
                }
            }
        }
        match self.sc.child.send(body) {
            Ok(()) => {
                w.note.outcome = "forwarded";
                reply::accepted()
            }
            Err(e) => w.failed(&e),
        }
    }

    /// A request under its client's own id (a session's, the stdio front's).
    fn write_own(&self, w: &mut Writing<'_>, (body, client_id): (Bytes, Box<RawValue>)) -> Then {
        let sc = &self.sc;
        // A second request under an id the child still owes an answer to would take the first
        // one's answer: one in flight, or one given up on whose answer may still come.
        if sc.child.owes(client_id.get()) {
            return Then::Done(reply::json(
                StatusCode::BAD_REQUEST,
                jsonrpc::error_response(
                    Some(&client_id),
                    jsonrpc::INVALID_REQUEST,
                    jsonrpc::STILL_IN_FLIGHT,
                    None,
                ),
            ));
        }
        if self.bridged_call(w.said.method) {
            let call = Call {
                wire: body,
                ours: client_id.clone(),
                client_id,
                sent: None,
            };
            return self.write_bridged(w, call);
        }
        let rounds = self.reverse_rounds(w.said.method, &body);
        let token = mcp::progress_token(&body);
        // A request with a progress token is answered as a stream, its progress then its
        // answer, as an HTTP server answers it: sent to the session's GET stream, the
        // progress could reach the client after the answer.
        if matches!(self.kind, Kind::Session(None))
            && let Some(token) = token
        {
            w.note.outcome = "forwarded";
            let on = Streamed::Session(rounds);
            let (key, timeout) = (token.get(), self.timeout);
            return Then::Done(stream(w.gw, sc, body, key, w.pending.clone(), on, timeout));
        }
        // The client's handshake, which the server may refuse, and the session it opens.
        let params = || Some(w.said.params.map(ToOwned::to_owned));
        let (handshake, new_session) = match &self.kind {
            Kind::Session(Some(id)) => (params(), Some(id.clone())),
            Kind::Pipe(true) => (params(), None),
            _ => (None, None),
        };
        let own = Own {
            client_id,
            rounds,
            handshake,
            new_session,
        };
        let token = token.as_deref().map(RawValue::get);
        match sc.child.start_as(body, own.client_id.get(), token) {
            Ok(owed) => Then::Own(owed, own),
            Err(e) => Then::Done(w.failed(&e)),
        }
    }

    /// A request on the shared child, which serves every client without a session: toolgate
    /// gives it an id of its own (and the same value as its progress token), so that two
    /// clients' ids and tokens cannot collide, and puts the client's back on what comes out.
    /// When the child will send messages about the request first (its progress, a listen
    /// request's notifications), the answer is an SSE stream carrying them, then the answer.
    fn write_shared(
        &self,
        owner: &str,
        w: &mut Writing<'_>,
        (body, client_id): (Bytes, Box<RawValue>),
    ) -> Then {
        let sc = &self.sc;
        let client_token = mcp::progress_token(&body);
        let listens = w.said.method == "subscriptions/listen";
        let Entered {
            body: mut wire,
            ours,
            sent,
        } = sc
            .multiplexed
            .enter(owner, body, &client_id, w.gw.next_id());
        if client_token.is_some() {
            wire = jsonrpc::replace_at(&wire, &PROGRESS_TOKEN, &ours).map_or(wire, Bytes::from);
        }
        if self.bridged_call(w.said.method) {
            if let Some(token) = client_token {
                return self.stream_bridged(w, (wire, ours, client_id), (token, sent));
            }
            let call = Call {
                wire,
                ours,
                client_id,
                sent: Some(sent),
            };
            return self.write_bridged(w, call);
        }
        if listens || client_token.is_some() {
            w.note.outcome = "forwarded";
            let timeout = if listens { LISTEN_LIMIT } else { self.timeout };
            let key = ours.get().to_owned();
            let remapped = Remapped {
                ours,
                client_token,
                _sent: sent,
            };
            let on = Streamed::Shared(remapped);
            return Then::Done(stream(w.gw, sc, wire, &key, w.pending.clone(), on, timeout));
        }
        // No progress token: a call with one is streamed, above.
        match sc.child.start_as(wire, ours.get(), None) {
            Ok(owed) => Then::Shared {
                owed,
                client_id,
                // A 2026-07-28 client cancels by closing its response (a handshake-era
                // client's disconnection is no cancellation).
                left: Left {
                    sc: sc.clone(),
                    ours,
                    cancels: w.pending.era == Era::Modern,
                },
                _sent: sent,
            },
            Err(e) => Then::Done(w.failed(&e)),
        }
    }

    /// A 2026-07-28 client's call bridged to its child's handshake, which the server may ask
    /// something first (`child_questions`), or its retry of one of the call's rounds.
    fn write_bridged(&self, w: &mut Writing<'_>, call: Call) -> Then {
        let Call {
            wire,
            ours,
            client_id,
            sent,
        } = call;
        match self
            .sc
            .child
            .bridged_call(wire, &ours, w.pending.key, |_| ())
        {
            Ok((waiting, answers_as, ())) => Then::Bridged {
                waiting,
                // On the shared child, the child is told when the client leaves first.
                left: Left {
                    sc: self.sc.clone(),
                    ours: answers_as.clone(),
                    cancels: sent.is_some(),
                },
                answers_as,
                client_id,
                _sent: sent,
            },
            Err(e) => Then::Done(unresumed(w, &client_id, e)),
        }
    }

    /// A bridged call on the shared child whose client asked for its progress: answered as a
    /// stream of it, then the server's answer or a round. What the child sends about the
    /// call goes to it under the id the server answers it under (toolgate's, which is also
    /// its progress token; a retry's is the id of the call it resumes, which the server's
    /// progress goes on naming).
    fn stream_bridged(
        &self,
        w: &mut Writing<'_>,
        (wire, ours, client_id): (Bytes, Box<RawValue>, Box<RawValue>),
        (client_token, sent): (Box<RawValue>, Sent),
    ) -> Then {
        let sc = &self.sc;
        let relate = |answers_as: &RawValue| sc.relate(answers_as.get());
        let (waiting, answers_as, related) =
            match sc.child.bridged_call(wire, &ours, w.pending.key, relate) {
                Ok(written) => written,
                Err(e) => return Then::Done(unresumed(w, &client_id, e)),
            };
        w.note.outcome = "forwarded";
        let remapped = Remapped {
            ours: answers_as,
            client_token: Some(client_token),
            _sent: sent,
        };
        let (on, asked) = ((related, waiting, remapped), (client_id, w.pending.clone()));
        Then::Done(streamed::bridged(w.gw, sc, on, asked, self.timeout))
    }
}

/// Where the client's progress token sits in a request's params.
const PROGRESS_TOKEN: [&str; 3] = ["params", "_meta", "progressToken"];
/// How long a `subscriptions/listen` stream may stay open on the shared child.
const LISTEN_LIMIT: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// What writing one message reads of it and notes: the gateway in force, the request its
/// answer is read against, what the message said, and its note.
struct Writing<'a> {
    gw: &'a Arc<Gateway>,
    pending: &'a Pending,
    said: Said<'a>,
    note: &'a mut Note,
}

impl Writing<'_> {
    /// The message could not be written: the client's answer says why.
    fn failed(&mut self, e: &crate::error::UpstreamError) -> Response {
        reply::upstream_failed(self.gw, self.pending, e, self.note)
    }
}

/// The answer to a bridged call that could not be written: a retry naming no round of its
/// client's, or a child that is gone.
fn unresumed(w: &mut Writing<'_>, client_id: &RawValue, e: Unresumed) -> Response {
    match e {
        Unresumed::Refused(why) => {
            w.note.outcome = "answered";
            let id = Some(client_id);
            let body = jsonrpc::error_response(id, jsonrpc::INVALID_PARAMS, &why, None);
            let status = w.pending.era.status_for(jsonrpc::INVALID_PARAMS);
            reply::json(status, body)
        }
        Unresumed::Unavailable(e) => w.failed(&e),
    }
}

/// A call as it goes to its child: under toolgate's id on the shared child (holding its
/// place among the requests in flight there), else under the client's.
struct Call {
    wire: Bytes,
    ours: Box<RawValue>,
    client_id: Box<RawValue>,
    sent: Option<Sent>,
}
