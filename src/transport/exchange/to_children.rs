//! How a message reaches a stdio server's children and is answered in HTTP form (`toolgate
//! serve -- CMD`, the sidecar case).
//!
//! Sessions are toolgate's: `initialize` without a session starts a child and mints the id,
//! and the session's requests are answered as one JSON message each, through the same
//! pipeline as any other; a session's GET is an SSE stream of what its child sends on its own.
//! Requests without a session (every 2026-07-28 request) go to a shared child per era with
//! their ids and progress tokens remapped, so concurrent clients cannot collide. A request
//! that will hear from the child before its answer (a progress token, `subscriptions/listen`
//! on the shared child) is answered, in a session or not, as an SSE stream of those messages,
//! then the answer (docs/contract.md, section 7).

use super::asking::{self, AskingStream, RetryServer, ReverseRounds};
use super::reply;
use super::{Note, Said, StreamOutcome};
use crate::catalog::ScopeKey;
use crate::gateway::{Gateway, Target};
use crate::jsonrpc::{self, Message};
use crate::mcp::{self, Era};
use crate::pipeline::asked;
use crate::pipeline::bridge::{self, Declared};
use crate::pipeline::step::Bridging;
use crate::pipeline::{self, Pending};
use crate::transport::upstream::child::ChildLister;
use crate::transport::upstream::child_questions::Answered;
use crate::transport::upstream::children::{NoChild, SessionChild, StdioPool};
use crate::transport::upstream::multiplex::{self, Entered, Owner, Sent};
use crate::transport::upstream::rounds::Unresumed;
use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderValue};
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
    let max = to.gw.config.stdio.max_sessions;
    match e {
        NoChild::UnknownSession => reply::json(
            StatusCode::NOT_FOUND,
            jsonrpc::error_response(m.id, jsonrpc::INVALID_REQUEST, "Session not found", None),
        ),
        NoChild::TooMany => {
            let msg = format!(
                "Too many sessions: this gateway runs at most {max} tool server processes; try again later"
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
/// session's child, the child a new session starts with, or the shared child of the requests
/// without a session.
pub(crate) struct ChildWay {
    sc: Arc<SessionChild>,
    /// Who sends the message (`owner`): on the shared child, whose requests a cancellation
    /// may name.
    owner: Box<str>,
    /// The id of the session this `initialize` opens, for the answer's header.
    new_session: Option<String>,
    shared: bool,
    era: Era,
    key: ScopeKey,
    timeout: Duration,
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
        let owner = owner.key();
        let found = match (session, m.method()) {
            (None, Some("initialize")) => pool.open(&owner).map(|(id, sc)| (sc, Some(id), false)),
            (Some(s), _) => pool.session(s).map(|sc| (sc, None, false)),
            (None, _) => {
                let client = || Declared::of(m);
                pool.shared(era, client).await.map(|sc| (sc, None, true))
            }
        };
        let (sc, new_session, shared) = found.map_err(|e| no_child(to, era, m, e))?;
        let key = match (&new_session, sc.declared()) {
            (Some(id), _) => to.gw.scope(to.target, Some(id.as_bytes()), None),
            // A bridged child lists its tools by what its clients can do.
            (None, Some(caps)) if era == Era::Modern => to.gw.narrower(caller, caps.as_bytes()),
            (None, _) => caller,
        };
        Ok(ChildWay {
            sc,
            owner,
            new_session,
            shared,
            era,
            key,
            timeout: to.gw.config.limits.upstream_timeout,
        })
    }

    /// The scope the child's listings are kept under (a new session's own).
    pub(crate) fn key(&self) -> ScopeKey {
        self.key
    }

    /// Only the shared child is bridged for a 2026-07-28 client (a session is the
    /// handshake's); a session's child that speaks only 2026-07-28 is bridged for its
    /// handshake-era client.
    pub(crate) fn bridging(&self) -> Bridging<'_> {
        Bridging::of(
            self.sc
                .bridged()
                .filter(|_| self.shared && self.era == Era::Modern),
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
    /// it came (the ids are the client's own); on the shared child, under toolgate's id for
    /// that client's own request, or `None` when it names none of its requests in flight.
    /// The POST still waiting for the request ends either way.
    fn cancelled(&self, id: &RawValue, body: Bytes) -> Option<Bytes> {
        if !self.shared {
            self.sc.child.cancel(id.get());
            return Some(body);
        }
        let ours = self.sc.multiplexed.ours(&self.owner, id.get())?;
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

    /// Sends what the gate forwards and answers the POST with what the child answers.
    pub(crate) async fn send(
        self,
        to: ToChildren<'_>,
        body: Bytes,
        pending: Pending,
        said: Said<'_>,
        note: &mut Note,
    ) -> Response {
        let sc = &self.sc;
        let Some(client_id) = pending.id.as_deref() else {
            // A notification or a client's answer. A cancellation also ends the POST still
            // waiting for that request.
            let mut body = body;
            if let Some(id) = said.cancelled {
                match self.cancelled(id, body) {
                    Some(b) => body = b,
                    None => {
                        note.outcome = "answered";
                        return reply::accepted();
                    }
                }
            }
            return match sc.child.send(body) {
                Ok(()) => {
                    note.outcome = "forwarded";
                    reply::accepted()
                }
                Err(e) => reply::upstream_failed(to.gw, &pending, &e, note),
            };
        };
        if self.shared {
            return shared_exchange(to, sc, &self.owner, body, said, pending, note).await;
        }
        // A second request under an id in flight in the session would take the first one's
        // answer.
        if sc.child.waits_for(client_id.get()) {
            return reply::json(
                StatusCode::BAD_REQUEST,
                jsonrpc::error_response(
                    Some(client_id),
                    jsonrpc::INVALID_REQUEST,
                    "Invalid Request: a request with this id is still in flight in this session; send each request with an id of its own",
                    None,
                ),
            );
        }
        // A request with a progress token is answered as a stream, its progress then its
        // answer, as an HTTP server answers it: sent to the session's GET stream, the
        // progress could reach the client after the answer.
        if self.new_session.is_none()
            && let Some(token) = progress_token(&body)
        {
            note.outcome = "forwarded";
            let on = Streamed::Session(self.reverse_rounds(said.method, &body));
            return stream(to, sc, body, token.get(), pending, on, self.timeout);
        }
        let reverse_rounds = self.reverse_rounds(said.method, &body);
        let answer = match sc.child.request(body, client_id.get(), self.timeout).await {
            Ok(a) => a,
            Err(e) => return reply::upstream_failed(to.gw, &pending, &e, note),
        };
        note.outcome = "forwarded";
        if let Some(reverse_rounds) = reverse_rounds
            && asked::input_required(&answer).is_some()
        {
            return asking::answer(to.gw, pending, answer, reverse_rounds);
        }
        // A session's `initialize` the server refused: one that answers `server/discover`
        // speaks only 2026-07-28, and the session is bridged to it (`bridge::Reverse`).
        let reversed = match self.new_session {
            Some(_) => {
                let ids = || to.gw.next_id();
                sc.child
                    .reverse_if_refused(ids, self.timeout, client_id, said.params, &answer)
                    .await
            }
            None => None,
        };
        let (status, body) = match reversed {
            Some((ours, reverse)) => {
                sc.set_reverse(reverse);
                (StatusCode::OK, Bytes::from(ours))
            }
            None => finish(to.gw, &pending, answer),
        };
        let mut resp = reply::json(status, body);
        if let Some(id) = self.new_session
            && let Ok(v) = HeaderValue::from_str(&id)
        {
            resp.headers_mut().insert(mcp::SESSION_ID, v);
        }
        resp
    }
}

/// The child's answer, with its client's id, as the client reads it ([`pipeline::settle`]),
/// and the status it goes with: the answer's error code mapped by the request's era.
fn finish(gw: &crate::gateway::Gateway, pending: &Pending, answer: Bytes) -> (StatusCode, Bytes) {
    match pipeline::settle_bytes(gw, pending, answer.clone()) {
        Some(s) => (
            s.error_code
                .map_or(StatusCode::OK, |c| pending.era.status_for(c)),
            s.body,
        ),
        None => (StatusCode::OK, answer),
    }
}

/// Where the client's progress token sits in a request's params.
const PROGRESS_TOKEN: [&str; 3] = ["params", "_meta", "progressToken"];
/// How long a `subscriptions/listen` stream may stay open on the shared child.
const LISTEN_LIMIT: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

#[derive(serde::Deserialize)]
struct Progress<'a> {
    #[serde(borrow)]
    params: Option<ProgressParams<'a>>,
}

#[derive(serde::Deserialize)]
struct ProgressParams<'a> {
    #[serde(borrow, rename = "_meta")]
    meta: Option<ProgressMeta<'a>>,
}

#[derive(serde::Deserialize)]
struct ProgressMeta<'a> {
    #[serde(borrow, rename = "progressToken")]
    token: Option<&'a RawValue>,
}

/// A request's progress token, read from its bytes: a `tools/call`'s params have been taken
/// by the guard.
fn progress_token(body: &[u8]) -> Option<Box<RawValue>> {
    memchr::memmem::find(body, b"progressToken")?;
    serde_json::from_slice::<Progress<'_>>(body)
        .ok()
        .and_then(|p| p.params?.meta?.token.map(ToOwned::to_owned))
}

/// A request on the shared child, which serves every client without a session: toolgate
/// gives it an id of its own (and the same value as its progress token), so that two clients'
/// ids and tokens cannot collide, and puts the client's back on what comes out. When the
/// child will send messages about the request first (its progress, a listen request's
/// notifications), the answer is an SSE stream carrying them, then the answer.
async fn shared_exchange(
    to: ToChildren<'_>,
    sc: &Arc<SessionChild>,
    owner: &str,
    body: Bytes,
    said: Said<'_>,
    pending: Pending,
    note: &mut Note,
) -> Response {
    let client_id = pending.id.clone().expect("a request has an id");
    let client_token = progress_token(&body);
    let listens = said.method == "subscriptions/listen";
    let Entered {
        body: mut wire,
        ours,
        sent,
    } = sc
        .multiplexed
        .enter(owner, body, &client_id, to.gw.next_id());
    if client_token.is_some() {
        wire = jsonrpc::replace_at(&wire, &PROGRESS_TOKEN, &ours).map_or(wire, Bytes::from);
    }
    let timeout = if listens {
        LISTEN_LIMIT
    } else {
        to.gw.config.limits.upstream_timeout
    };
    let streams = listens || client_token.is_some();
    if !streams && sc.bridged().is_some() && asked::may_ask(said.method) {
        // Boxed: a bridged call is rare next to a plain one.
        let call = Call {
            wire,
            ours,
            client_id,
        };
        return Box::pin(bridged_exchange(to, sc, call, pending, note)).await;
    }
    if !streams {
        // A 2026-07-28 client cancels by closing its response (a handshake-era client's
        // disconnection is no cancellation): if this future is dropped before the answer,
        // the child is told.
        let mut left = Left {
            sc,
            ours: &ours,
            cancels: pending.era == Era::Modern,
        };
        let answer = sc.child.request(wire, ours.get(), timeout).await;
        left.cancels = false;
        drop(sent);
        let answer = match answer {
            Ok(a) => a,
            Err(e) => return reply::upstream_failed(to.gw, &pending, &e, note),
        };
        note.outcome = "forwarded";
        let answer = jsonrpc::replace_at(&answer, &["id"], &client_id).map_or(answer, Bytes::from);
        let (status, body) = finish(to.gw, &pending, answer);
        return reply::json(status, body);
    }
    note.outcome = "forwarded";
    let remapped = Remapped {
        ours,
        client_token,
        _sent: sent,
    };
    let key = remapped.ours.get().to_owned();
    stream(
        to,
        sc,
        wire,
        &key,
        pending,
        Streamed::Shared(remapped),
        timeout,
    )
}

/// A 2026-07-28 client's call on the shared child, bridged to its handshake.
struct Call {
    /// The call as it goes to the child.
    wire: Bytes,
    /// toolgate's id for it on the child, and the client's.
    ours: Box<RawValue>,
    client_id: Box<RawValue>,
}

/// A bridged call on the shared child, which the server may ask something first
/// (`child_questions`): the client is then answered with an input-required round, and its
/// retry's answer goes to the server's question and waits for the call's answer again.
async fn bridged_exchange(
    to: ToChildren<'_>,
    sc: &SessionChild,
    call: Call,
    pending: Pending,
    note: &mut Note,
) -> Response {
    let timeout = to.gw.config.limits.upstream_timeout;
    let (waiting, answers_as) = match sc.child.bridged_call(call.wire, &call.ours, pending.key) {
        Ok(call) => call,
        Err(Unresumed::Refused(why)) => {
            note.outcome = "answered";
            let id = Some(&*call.client_id);
            let body = jsonrpc::error_response(id, jsonrpc::INVALID_PARAMS, &why, None);
            return reply::json(pending.era.status_for(jsonrpc::INVALID_PARAMS), body);
        }
        Err(Unresumed::Unavailable(e)) => {
            return reply::upstream_failed(to.gw, &pending, &e, note);
        }
    };
    let mut left = Left {
        sc,
        ours: &answers_as,
        cancels: true,
    };
    let ids = (&*answers_as, &*call.client_id);
    let answered = sc
        .child
        .bridged_answer(waiting, ids, pending.key, timeout)
        .await;
    left.cancels = false;
    note.outcome = "forwarded";
    match answered {
        Ok(Answered::Server(answer)) => {
            let (status, body) = finish(to.gw, &pending, answer);
            reply::json(status, body)
        }
        Ok(Answered::Round(round)) => reply::json(StatusCode::OK, round),
        Err(e) => reply::upstream_failed(to.gw, &pending, &e, note),
    }
}

/// On the shared child, toolgate's id for a request (also its progress token) and the
/// client's progress token, put back on what comes out.
struct Remapped {
    ours: Box<RawValue>,
    client_token: Option<Box<RawValue>>,
    /// The request stays cancellable by its sender while its stream lasts.
    _sent: Sent,
}

/// Answers a request as an SSE stream: what the child sends about it (registered under
/// `key`, its progress token or toolgate's id), then its answer. `remapped` on the shared
/// child; in a session the ids and tokens are the client's own.
fn stream(
    to: ToChildren<'_>,
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
        gw: to.gw.clone(),
        sc: sc.clone(),
        remapped,
        pending,
        answered: false,
        reverse_rounds,
        rounds: None,
        _relation: relation,
    };
    let answer = {
        let sc = sc.clone();
        async move { sc.child.request(wire, &id, timeout).await }
    };
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
    _relation: crate::transport::upstream::children::Relation,
}

/// Which child a streamed request is on: a session's (whose server may ask its handshake-era
/// client for input), or the shared one, where toolgate's ids stand for the client's.
enum Streamed {
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
            Some(token) if line_has(&line, "progressToken") => {
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

/// A shared-child request whose client may leave before its answer; see [`client_left`].
struct Left<'a> {
    sc: &'a SessionChild,
    ours: &'a RawValue,
    cancels: bool,
}

impl Drop for Left<'_> {
    fn drop(&mut self) {
        if self.cancels {
            client_left(self.sc, self.ours);
        }
    }
}

/// The client of the shared child's request `ours` left before its answer: nothing waits for
/// the answer any more, and the child is sent `notifications/cancelled` for it.
fn client_left(sc: &SessionChild, ours: &RawValue) {
    sc.child.cancel(ours.get());
    let cancelled = serde_json::json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": ours, "reason": "the client went away"}});
    let _ = sc.child.send(Bytes::from(cancelled.to_string()));
}

fn line_has(line: &[u8], what: &str) -> bool {
    memchr::memmem::find(line, what.as_bytes()).is_some()
}

/// GET: the session's stream of what its child sends on its own. DELETE: end the session.
pub(crate) async fn bodiless(
    pool: &StdioPool,
    method: &http::Method,
    headers: &HeaderMap,
    note: &mut Note,
) -> Response {
    let Some(session) = headers
        .get(mcp::SESSION_ID)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
    else {
        note.outcome = "answered";
        return reply::method_not_allowed("no session to stream or end", "POST");
    };
    note.outcome = "answered";
    if method == http::Method::DELETE {
        return if pool.close(&session).await {
            Response::builder()
                .status(StatusCode::OK)
                .body(Body::empty())
                .expect("valid response")
        } else {
            reply::transport(
                StatusCode::NOT_FOUND,
                jsonrpc::INVALID_REQUEST,
                "Session not found",
            )
        };
    }
    let sc = match pool.session(&session) {
        Ok(sc) => sc,
        Err(_) => {
            return reply::transport(
                StatusCode::NOT_FOUND,
                jsonrpc::INVALID_REQUEST,
                "Session not found",
            );
        }
    };
    let (earlier, rx) = sc.subscribe();
    let earlier = futures_util::stream::iter(
        earlier
            .into_iter()
            .map(|line| Ok::<_, std::convert::Infallible>(crate::transport::sse::event(&line))),
    );
    let live = futures_util::stream::unfold(rx, |mut rx| async move {
        loop {
            match rx.recv().await {
                Ok(line) => {
                    return Some((
                        Ok::<_, std::convert::Infallible>(crate::transport::sse::event(&line)),
                        rx,
                    ));
                }
                Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                    tracing::warn!("a slow GET stream missed {n} messages")
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
            }
        }
    });
    use futures_util::StreamExt;
    let stream = earlier.chain(live);
    Response::builder()
        .header(CONTENT_TYPE, "text/event-stream")
        .header(CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(stream))
        .expect("valid response")
}
