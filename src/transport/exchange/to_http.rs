//! How a message reaches a Streamable HTTP server, from whichever front it came in by
//! (`serve --upstream URL`, `ValidateLayer`, `stdio --upstream URL`). The message goes upstream
//! with the client's own headers and its answer streams back through `answers`; the client
//! keeps the session it has with the server. Two bridges keep a session of toolgate's instead
//! (docs/contract.md §5): a 2026-07-28 client's request to a server that speaks only the
//! handshake goes through toolgate's handshake with it, and a handshake-era client of a server
//! that speaks only 2026-07-28 is answered `initialize` here and given a session toolgate
//! keeps.

use super::answers::{self, Parking, Reading};
use super::asking::{RetryServer, ReverseRounds};
use super::reply;
use super::resume::Resumer;
use super::subscription;
use super::{Note, Said};
use crate::catalog::ScopeKey;
use crate::gateway::{Gateway, Target};
use crate::jsonrpc::{self, Message};
use crate::mcp::{self, Era};
use crate::net::abandon::{Abandon, UntilEnd};
use crate::pipeline::asked;
use crate::pipeline::bridge::{self, Declared, Reverse};
use crate::pipeline::step::Bridging;
use crate::pipeline::subscriptions::Subscription;
use crate::pipeline::{Kind, Pending};
use crate::telemetry::hop::{HopEnd, HopTo};
use crate::transport::upstream::http_bridge::{self, HttpBridge, Session, Unresumed};
use crate::transport::upstream::http_client::{HttpRetrying, HttpUpstream};
use crate::transport::upstream::multiplex::{self, Owner, Sent};
use crate::transport::upstream::own::HttpSession;
use crate::transport::upstream::subscribers::{self, Release};
use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use futures_util::future::Either;
use http::header::HeaderValue;
use http::request::Parts;
use http::{HeaderMap, StatusCode};
use serde_json::value::RawValue;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// What reaching an HTTP server takes, whichever front the message came in by: the gateway
/// in force, the server's target and the server.
#[derive(Clone, Copy)]
pub(crate) struct ToHttp<'a> {
    pub(crate) gw: &'a Arc<Gateway>,
    pub(crate) target: &'a Arc<Target>,
    pub(crate) up: &'a Arc<HttpUpstream>,
}

/// How one message reaches the HTTP server, settled before the guard reads it.
pub(crate) struct HttpWay {
    era: Era,
    /// The request's scope, and whether the client names a session of its own.
    key: ScopeKey,
    has_session: bool,
    /// toolgate's session with a server that speaks only the handshake, for a 2026-07-28
    /// client's request.
    session: Option<Arc<Session>>,
    /// Who sends the message into that session, which other clients share
    /// (`upstream::multiplex`).
    owner: Option<Box<str>>,
    /// For a cancellation in that session, the id of toolgate's that the request it names
    /// went with (`None` when no request of the client's in flight has that id), found now,
    /// while that request is in flight: a stdio front ends its exchange as soon as it reads
    /// the cancellation.
    cancelled: Option<Option<Box<str>>>,
    /// A handshake-era client in the session toolgate keeps for it in front of a server
    /// that speaks only 2026-07-28, and the 2026-07-28 headers its message goes with (the
    /// params are whole). Boxed: it is rare, and every request's future holds the way.
    reversed: Option<Box<(Arc<Reverse>, HeaderMap)>>,
    /// Whether the client is the stdio front's. An HTTP client cancels a bridged request by
    /// giving up on its answer, which the server is then told of, and sees an answer that
    /// breaks off only as its connection breaking, so toolgate's log says why; a stdio client
    /// sends its cancellation, which goes in the session under the id its request went with,
    /// and is answered with why when its answer breaks off, which the front says.
    pipe: bool,
}

impl HttpWay {
    /// The way of `m`, of `era`, sent with `headers` by `owner`, a client in scope `key`
    /// (with a session of its own, whose id is `session_id`, or not).
    pub(crate) async fn find(
        to: ToHttp<'_>,
        headers: &HeaderMap,
        m: &Message<'_>,
        era: Era,
        (key, session_id, owner): (ScopeKey, Option<&HeaderValue>, Owner<'_>),
    ) -> HttpWay {
        let has_session = session_id.is_some();
        let (gw, up) = (to.gw, to.up);
        // A 2026-07-28 client that declares capabilities is bridged in a session of its own
        // capabilities (what a handshake server lists and asks depends on them), and its
        // tools are learned in that session's scope.
        let declared = match era {
            Era::Modern if up.bridge.may_bridge() => Declared::of(m),
            _ => Declared::default(),
        };
        let narrowed = match &declared.capabilities {
            Some(caps) => gw.narrower(key, caps.get().as_bytes()),
            None => key,
        };
        let session = match (era, m.is_request()) {
            (Era::Modern, true) => match up.bridge.session_at_hand(narrowed) {
                Some(at_hand) => at_hand,
                // Boxed: learning the server's era, or opening a session, is rare, and would
                // otherwise sit in every request's future.
                None => {
                    let limits = &to.target.limits;
                    let client = (headers, to.target.credential.as_ref());
                    Box::pin(
                        up.bridge
                            .session(up, client, (narrowed, &declared), gw, limits),
                    )
                    .await
                }
            },
            // A cancellation goes inside the session the request went through.
            (Era::Modern, false) => up.bridge.existing(narrowed),
            (Era::Legacy, _) => None,
        };
        // The narrower scope is the bridged session's; a server of 2026-07-28 keeps the
        // request's own.
        let key = if session.is_some() { narrowed } else { key };
        let reversed = match era {
            Era::Legacy => session_id.and_then(|id| reversed(up, id)).map(|r| {
                let mut headers = headers.clone();
                HttpBridge::modern_headers(&mut headers, m);
                Box::new((r, headers))
            }),
            Era::Modern => None,
        };
        let owner = session.as_ref().map(|_| owner.key());
        let cancelled = (session.as_deref().zip(owner.as_deref()))
            .and_then(|(session, owner)| cancelled_in(session, owner, m));
        HttpWay {
            era,
            key,
            has_session,
            session,
            owner,
            cancelled,
            reversed,
            pipe: false,
        }
    }

    /// The way of a message in its client's own session, which nothing bridges: one sent
    /// again once its client's session was opened anew.
    pub(crate) fn in_client_session(key: ScopeKey) -> HttpWay {
        HttpWay {
            era: Era::Legacy,
            key,
            has_session: true,
            session: None,
            owner: None,
            cancelled: None,
            reversed: None,
            pipe: true,
        }
    }

    /// For the stdio front's client, which cancels with a notification rather than by giving
    /// up on the answer (nothing is sent for it when its answer is dropped unread), and is
    /// answered with why when an answer breaks off.
    pub(crate) fn for_pipe(mut self) -> HttpWay {
        self.pipe = true;
        self
    }

    /// `m`, of `owner`'s, in toolgate's bridged session `session` although it did not say
    /// its era (a 2026-07-28 client's cancellation without the envelope, over stdio).
    pub(crate) fn in_session(
        mut self,
        session: Option<Arc<Session>>,
        owner: Owner<'_>,
        m: &Message<'_>,
    ) -> HttpWay {
        if let (None, Some(session)) = (&self.session, session) {
            let owner = owner.key();
            self.cancelled = cancelled_in(&session, &owner, m);
            self.session = Some(session);
            self.owner = Some(owner);
        }
        self
    }

    /// Whether the message goes through a session toolgate keeps with the server (which
    /// toolgate, not its client, opens again when the server loses it).
    pub(crate) fn in_own_session(&self) -> bool {
        self.session.is_some() || self.reversed.is_some()
    }

    pub(crate) fn key(&self) -> ScopeKey {
        self.key
    }

    pub(crate) fn bridging(&self) -> Bridging<'_> {
        Bridging::of(
            self.session.as_ref().map(|s| &*s.init),
            self.reversed.as_ref().map(|r| &*r.0),
        )
    }

    /// toolgate's own `tools/list`, sent the way the client's message would go (`headers`
    /// are the client's).
    pub(crate) fn lister<'l>(
        &'l self,
        to: ToHttp<'l>,
        headers: &'l HeaderMap,
    ) -> http_bridge::HttpLister<'l> {
        http_bridge::HttpLister {
            up: to.up,
            headers: self.reversed.as_ref().map_or(headers, |r| &r.1),
            session: self.session.as_deref(),
            key: self.key,
            reverse: self.reversed.as_ref().map(|r| &*r.0),
            client_is_modern: self.era == Era::Modern,
            limits: &to.target.limits,
        }
    }

    /// Sends what the gate forwards; the answer comes back through `answers`. A common
    /// call's future is `forward`'s own, not an `async fn` awaiting it: that would hold this
    /// way's parts beside it, and every request would carry and copy both
    /// (docs/performance.md).
    pub(crate) fn send<'a>(
        mut self,
        to: ToHttp<'a>,
        mut parts: Box<Parts>,
        mut body: Bytes,
        pending: Pending,
        said: Said<'a>,
        note: &'a mut Note,
    ) -> impl Future<Output = Response> + Send + 'a {
        let up = to.up;
        let mut reading = Reading::of(self.has_session);
        reading.to_pipe = self.pipe;
        // Boxed: what a bridged request keeps for after its answer is rare, and would
        // otherwise sit in every request's future.
        let mut bridged = None;
        if let Some((reverse, headers)) = self.reversed.take().map(|r| *r) {
            parts.headers = headers;
            reading.has_session = false;
            if pending.id.is_some() && asked::may_ask(said.method) {
                // The server may ask for input, which its handshake-era client is asked.
                let limits = &to.target.limits;
                let retry = HttpRetrying::new(up.clone(), parts.headers.clone(), limits);
                reading.reverse_rounds = Some(Box::new(ReverseRounds {
                    request: body.clone(),
                    reverse,
                    server: RetryServer::Http(Box::new(retry)),
                }));
            }
        } else if let Some(session) = &self.session {
            session.headers(&mut parts.headers);
            if let Kind::Subscription(s) = &pending.kind {
                // Boxed: a stream opened now and then, held for long.
                let (session, s) = (session.clone(), (**s).clone());
                let served = subscribe(to, session, parts.headers, (s, pending), note);
                return Either::Right(Box::pin(served) as Rare<'a>);
            }
            if let Some(retry) = bridge::retry(&body) {
                // Boxed: a round's retry is rare next to a call.
                let round = Round {
                    retry,
                    key: self.key,
                };
                return Either::Right(Box::pin(round.resume(to, pending, note)) as Rare<'a>);
            }
            let Some((multiplexed, entered)) = self.multiplexed(to, session, body, &pending) else {
                // A cancellation naming no request of the client's in flight: nothing to tell.
                note.outcome = "answered";
                return Either::Right(Box::pin(std::future::ready(reply::accepted())));
            };
            body = multiplexed;
            let headers = parts.headers.clone();
            let abandon = match (&entered, self.pipe) {
                (Some((ours, _)), false) => Some(cancels(to, &headers, ours)),
                _ => None,
            };
            // What the server asks on the session's own stream meanwhile is for this call too,
            // when it is a tool's: a read's or a prompt's questions come on its own stream,
            // and one waiting while the server asks something of its own accord (roots, right
            // after the handshake) must not be answered with that.
            let is_call = matches!(pending.kind, Kind::Call { .. });
            let listening = (is_call && pending.id.is_some()).then(|| session.listen());
            reading = Reading {
                has_session: false,
                reverse_rounds: None,
                resume: None,
                replays_of: None,
                to_pipe: reading.to_pipe,
                parking: Some(Box::new(Parking {
                    rounds: up.bridge.rounds.clone(),
                    key: self.key,
                    session: headers.clone(),
                    listening,
                    renumber: (entered.as_ref())
                        .zip(pending.id.clone())
                        .map(|((ours, _), client)| (ours.clone(), client)),
                    _entry: entered.map(|(_, sent)| sent),
                })),
            };
            bridged = Some(Box::new((headers, abandon, pending.clone())));
        } else if self.era == Era::Legacy && !self.has_session && said.method == "initialize" {
            // Boxed: once per session, and larger than a call's whole path.
            let asked = (parts, body, pending, said);
            return Either::Right(Box::pin(initialize(to, asked, reading, note)));
        }
        match bridged {
            None => Either::Left(forward(to, parts, body, pending, reading, note)),
            // Boxed: rare, and its wait for the session's fate would sit in every request's
            // future.
            Some(b) => Either::Right(Box::pin(async move {
                let resp = forward(to, parts, body, pending, reading, note).await;
                bridged_end(to, self.key, resp, *b, note).await
            })),
        }
    }
}

/// The future of a message that takes a rare way: boxed, so that a common call's does not
/// carry its size.
type Rare<'a> = Pin<Box<dyn Future<Output = Response> + Send + 'a>>;

/// A request in toolgate's session: the id it went under, and its entry among those in
/// flight.
type InSession = (Box<RawValue>, Sent);

impl HttpWay {
    /// The message as it goes into toolgate's `session`, which the clients of one scope
    /// share: a request under an id of toolgate's, with its entry among those in flight; a
    /// cancellation under the id its request went with. `None` for a cancellation that names
    /// no request of the client's in flight, which is not sent.
    fn multiplexed(
        &self,
        to: ToHttp<'_>,
        session: &Session,
        body: Bytes,
        pending: &Pending,
    ) -> Option<(Bytes, Option<InSession>)> {
        let owner = self.owner.as_deref().unwrap_or_default();
        match (pending.id.as_deref(), &self.cancelled) {
            (Some(id), _) => {
                let e = session.multiplexed.enter(owner, body, id, to.gw.next_id());
                Some((e.body, Some((e.ours, e.sent))))
            }
            (None, Some(ours)) => Some((multiplex::cancellation(&body, ours.as_deref()?)?, None)),
            (None, None) => Some((body, None)),
        }
    }
}

/// When `m` is `owner`'s cancellation in toolgate's `session`: the id of toolgate's that the
/// request it names went with, if that request is in flight.
fn cancelled_in(session: &Session, owner: &str, m: &Message<'_>) -> Option<Option<Box<str>>> {
    if m.method() != Some("notifications/cancelled") {
        return None;
    }
    let named = m.cancelled_id();
    Some(named.and_then(|id| session.multiplexed.ours(owner, id.get())))
}

/// What a bridged request's answer becomes: an error the client may retry when toolgate's
/// session with the server was lost (`HttpBridge::lost_session`), else the answer, with the
/// server told of a cancellation should the client give up on it.
async fn bridged_end(
    to: ToHttp<'_>,
    key: ScopeKey,
    resp: Response,
    (headers, abandon, pending): (HeaderMap, Option<Abandon>, Pending),
    note: &mut Note,
) -> Response {
    let (limits, up) = (&to.target.limits, to.up);
    let status = resp.status();
    let Some(e) = (up.bridge)
        .lost_session(up, status, &headers, key, limits)
        .await
    else {
        return match abandon {
            Some(a) => resp.map(|b| Body::new(UntilEnd::new(b, a))),
            None => resp,
        };
    };
    if let Some(a) = abandon {
        a.disarm();
    }
    reply::upstream_failed(to.gw, &pending, &e, note)
}

/// A 2026-07-28 client's `subscriptions/listen`, served from the bridged `session`, in which
/// toolgate's own requests go with `headers` (the client's, made the session's).
async fn subscribe(
    to: ToHttp<'_>,
    session: Arc<Session>,
    headers: HeaderMap,
    (subscription, pending): (Subscription, Pending),
    note: &mut Note,
) -> Response {
    let headers = http_bridge::own_headers(&headers);
    let (up, limits, gw) = (to.up.clone(), to.target.limits.clone(), to.gw.clone());
    let in_session = headers.clone();
    let release: Release = Box::new(move |uris, releasing| {
        tokio::spawn(async move {
            let _releasing = releasing;
            let server = HttpSession::new(&up, in_session, &limits);
            subscribers::unsubscribe(&server, uris, || gw.next_id()).await;
        });
    });
    let server = HttpSession::new(to.up, headers, &to.target.limits);
    let session = (&server, &session.subscribers);
    subscription::serve(to.gw, session, (subscription, &pending), release, note).await
}

/// A 2026-07-28 client's retry of an input-required round, in the bridged session
/// (`upstream::rounds`).
struct Round {
    retry: bridge::Retry,
    key: ScopeKey,
}

impl Round {
    /// The client's answer goes to the server's question, and what the server says next
    /// (its answer, or another question) answers the retry.
    async fn resume(self, to: ToHttp<'_>, pending: Pending, note: &mut Note) -> Response {
        match answers::resume((to.gw, to.target), to.up, &self.retry, self.key, &pending).await {
            Ok(resp) => {
                note.outcome = "forwarded";
                resp
            }
            Err(Unresumed::Refused(why)) => {
                note.outcome = "answered";
                let id = pending.id.as_deref();
                let body = jsonrpc::error_response(id, jsonrpc::INVALID_PARAMS, &why, None);
                reply::json(pending.era.status_for(jsonrpc::INVALID_PARAMS), body)
            }
            Err(Unresumed::Unavailable(e)) => reply::upstream_failed(to.gw, &pending, &e, note),
        }
    }
}

/// For a bridged request, sent as `ours`: a 2026-07-28 client cancels by closing its
/// response (or its connection), which the handshake server behind toolgate's session
/// cannot see, so it is told with `notifications/cancelled` in that session if the client
/// gives up first.
fn cancels(to: ToHttp<'_>, session: &HeaderMap, ours: &RawValue) -> Abandon {
    let (up, session, id) = (to.up.clone(), session.clone(), ours.to_owned());
    let limits = to.target.limits.clone();
    Abandon::new(move || http_bridge::cancel_in_session(up, &session, &id, &limits))
}

/// The reverse-bridged session a client's `Mcp-Session-Id` names. Only ids toolgate minted
/// for one are looked up, so every other request pays a prefix comparison.
pub(crate) fn reversed_session(up: &HttpUpstream, headers: &HeaderMap) -> Option<Arc<Reverse>> {
    reversed(up, headers.get(mcp::SESSION_ID)?)
}

/// The reverse-bridged session of the session id `id`, as [`reversed_session`].
fn reversed(up: &HttpUpstream, id: &HeaderValue) -> Option<Arc<Reverse>> {
    let id = id.to_str().ok()?;
    id.starts_with(REVERSED_PREFIX)
        .then(|| up.bridge.reversed(id))
        .flatten()
}

const REVERSED_PREFIX: &str = "toolgate-bridged-";

/// A handshake-era client's `initialize`. When the server refuses it (HTTP 4xx) and answers
/// `server/discover`, it speaks only 2026-07-28: toolgate answers the client itself and keeps
/// a session for it (docs/contract.md §5, "Eras bridged the other way").
async fn initialize(
    to: ToHttp<'_>,
    (parts, body, pending, said): (Box<Parts>, Bytes, Pending, Said<'_>),
    reading: Reading,
    note: &mut Note,
) -> Response {
    let headers = parts.headers.clone();
    let resp = forward(to, parts, body, pending, reading, note).await;
    if !resp.status().is_client_error() {
        return resp;
    }
    let Some(id) = said.id else { return resp };
    let (up, own_id) = (to.up, to.gw.next_id());
    let limits = &to.target.limits;
    match up
        .bridge
        .reverse(
            up,
            (&headers, to.target.credential.as_ref()),
            said.params,
            &own_id,
            limits,
        )
        .await
    {
        Some((session, result)) => {
            note.outcome = "answered";
            let mut r = reply::json(StatusCode::OK, jsonrpc::result_response(id, &result));
            if let Ok(v) = HeaderValue::from_str(&session) {
                r.headers_mut().insert(mcp::SESSION_ID, v);
            }
            r
        }
        None => resp,
    }
}

/// Sends a message upstream; its answer goes back through the rules.
///
/// The request is made and handed to the upstream client when this is called; the future
/// holds only what reading the answer needs. An `async fn` would keep each argument twice
/// (as it was given, and as its body binds it), the request's head among them, and every
/// request's future above it would carry and copy both (docs/performance.md).
pub(crate) fn forward<'a>(
    to: ToHttp<'a>,
    mut parts: Box<Parts>,
    body: Bytes,
    pending: Pending,
    mut reading: Reading,
    note: &'a mut Note,
) -> impl Future<Output = Response> + Send + 'a {
    let (gw, up) = (to.gw, to.up);
    let wait = (&to.target.limits).into();
    let hop = note.hop(HopTo::Http(&up.http.uri)).map(|(hop, context)| {
        context.carry(&mut parts.headers);
        hop
    });
    if pending.id.is_some() && to.target.numbers_streams() {
        // Its headers, should the server end its stream before the answer: kept only for a
        // server that numbers its streams (no other can be asked for one again), so that a
        // request to any other pays nothing for it.
        let headers = parts.headers.clone();
        reading.resume = Some(Box::new(Resumer::new(up.clone(), headers, wait)));
    }
    // Both boxed: the upstream client's future and the answer's reading would otherwise
    // sit in every level of a request's future above this one, each of which copies it as
    // it is made (docs/performance.md).
    let sent = Box::pin(up.http.send_as(parts, body, wait));
    async move {
        let sent = sent.await;
        if let Some(hop) = hop {
            hop.end(match &sent {
                Ok(r) => HopEnd::Status(r.status()),
                Err(e) => HopEnd::Unanswered(e),
            });
        }
        match sent {
            Ok(resp) => {
                note.outcome = "forwarded";
                Box::pin(answers::response(gw, pending, reading, resp)).await
            }
            Err(e) => reply::upstream_failed(gw, &pending, &e, note),
        }
    }
}
