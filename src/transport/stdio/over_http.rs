//! `toolgate stdio --upstream URL`: the stdio front in front of a Streamable HTTP server.
//! toolgate is the HTTP client: it keeps the session (`Mcp-Session-Id` and the protocol
//! version from `initialize`), sends each message as a POST, streams SSE answers out line by
//! line as they arrive, and opens the session's GET stream for what the server sends on its
//! own. A 404 on the session opens a new one with the client's own `initialize` params, since
//! a stdio client cannot see that status.

use super::{Forwarded, Handshake, Reversed, ToClient, Upstream};
use crate::catalog::ScopeKey;
use crate::error::UpstreamError;
use crate::gateway::{Gateway, Target};
use crate::jsonrpc::{self, Body as Parsed, Message};
use crate::locks::MutexExt;
use crate::mcp::{self, Era};
use crate::net::body::{Collected, collect_upstream};
use crate::net::client::{UpstreamBody, Wait};
use crate::pipeline::Pending;
use crate::pipeline::asked;
use crate::pipeline::bridge::{self, Declared, Reverse};
use crate::pipeline::carried::{Carried, Carrying, carried};
use crate::pipeline::guard::{ListFailed, Lister};
use crate::pipeline::step::Bridging;
use crate::transport::sse::{self, Split, Splitter};
use crate::transport::upstream::http_bridge::{
    self, HttpBridge, Session as BridgeSession, Unresumed,
};
use crate::transport::upstream::http_client::{HttpRetrying, HttpUpstream};
use crate::transport::upstream::own::{self, HttpSession};
use crate::transport::upstream::rounds::{Listening, Parked, Rounds, StreamRest};
use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE, HeaderValue};
use http::{HeaderMap, Method};
use http_body_util::BodyExt;
use serde_json::value::RawValue;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::JoinHandle;

/// The session toolgate holds with the upstream for its one client.
#[derive(Default)]
struct Session {
    id: Option<HeaderValue>,
    version: Option<HeaderValue>,
    /// The client's `initialize` params, to open a new session with when the server has
    /// lost this one (restarted, or expired it).
    init_params: Option<Box<RawValue>>,
}

/// The HTTP server behind the front, and toolgate's session with it.
pub(crate) struct Http {
    gw: Arc<Gateway>,
    target: Arc<Target>,
    up: Arc<HttpUpstream>,
    session: Mutex<Session>,
    reverse: Reversed,
    /// The session's GET stream, opened after each `initialize`.
    stream: Mutex<Option<JoinHandle<()>>>,
    to: ToClient,
}

/// How one message reaches the server.
pub(crate) struct SessionWay {
    /// The session's headers, or a 2026-07-28 message's own.
    headers: HeaderMap,
    /// toolgate's session for a 2026-07-28 client bridged to a handshake-only server.
    session: Option<Arc<BridgeSession>>,
    reverse: Option<Arc<Reverse>>,
    /// The server may ask its client something before it answers (a call, a prompt, a read).
    may_ask: bool,
}

impl Http {
    fn timeout(&self) -> Wait {
        (&self.gw.config.limits).into()
    }

    /// What a 2026-07-28 message says of its client, read only when the server may need a
    /// handshake of toolgate's for it.
    fn declared(&self, m: &Message<'_>) -> Declared {
        match self.up.bridge.may_bridge() {
            true => Declared::of(m),
            false => Declared::default(),
        }
    }

    fn headers(&self) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        h.insert(
            ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        let s = self.session.locked();
        if let Some(id) = &s.id {
            h.insert(mcp::SESSION_ID, id.clone());
        }
        if let Some(v) = &s.version {
            h.insert(mcp::PROTOCOL_VERSION, v.clone());
        }
        h
    }

    /// The headers for one message: the session's, or in the 2026-07-28 era (a body in its
    /// envelope) no session and the headers that era mirrors from the body.
    fn headers_for(&self, m: &jsonrpc::Message<'_>, era: Era) -> HeaderMap {
        let mut h = self.headers();
        if era == Era::Modern {
            h.remove(mcp::SESSION_ID);
            crate::transport::modern::mirror(&mut h, m);
        }
        h
    }

    /// A 404 on a session means the server no longer knows it. The client of a stdio pipe
    /// cannot see that status, so toolgate opens a new session itself, with the client's
    /// own `initialize` params; the answer to that stays here. `false`: no new session.
    async fn reinitialize(self: &Arc<Self>) -> bool {
        let (params, lost) = {
            let mut s = self.session.locked();
            (s.init_params.clone(), s.id.take())
        };
        let (Some(params), Some(_)) = (params, lost) else {
            return false;
        };
        let id = self.gw.next_id();
        let mut headers = self.headers();
        headers.remove(mcp::PROTOCOL_VERSION);
        let opening = HttpSession::new(&self.up, headers, &self.gw.config.limits);
        if own::handshake(&opening, &id, Some(&params)).await.is_err() {
            return false;
        }
        let Some(sid) = opening.into_headers().get(mcp::SESSION_ID).cloned() else {
            return false;
        };
        self.session.locked().id = Some(sid);
        tracing::info!(upstream = %self.target.name, "the server lost the session; a new one is open");
        self.open_stream();
        true
    }

    /// Opens the session's GET stream, for what the server sends on its own, in place of
    /// the last one.
    fn open_stream(self: &Arc<Self>) {
        let me = self.clone();
        let stream = tokio::spawn(async move { me.server_stream().await });
        let old = self.stream.locked().replace(stream);
        if let Some(old) = old {
            old.abort();
        }
    }
}

/// toolgate's own `tools/list`, the way the message goes. In the client's session, which a
/// stdio client cannot open again itself, a listing that finds the session lost opens a new
/// one and is sent once more, as the client's own messages are (`Http::send`).
pub(crate) struct SessionLister<'a> {
    http: &'a Arc<Http>,
    way: &'a SessionWay,
    era: Era,
}

impl SessionLister<'_> {
    fn with<'h>(&'h self, headers: &'h HeaderMap) -> http_bridge::HttpLister<'h> {
        let http = &**self.http;
        http_bridge::HttpLister {
            up: &http.up,
            headers,
            session: self.way.session.as_deref(),
            key: http.key(),
            reverse: self.way.reverse.as_deref(),
            client_is_modern: self.era == Era::Modern,
            limits: &http.gw.config.limits,
        }
    }
}

impl Lister for SessionLister<'_> {
    /// A stdio client cannot be handed an HTTP refusal: the listing is unavailable, and the
    /// guard answers the call as it answers any listing that failed.
    type Relay = std::convert::Infallible;

    async fn list(
        &self,
        request: Bytes,
        id: &str,
    ) -> Result<Box<RawValue>, ListFailed<Self::Relay>> {
        self.list_in_session(request, id)
            .await
            .map_err(|e| match e {
                ListFailed::Relay(resp) => ListFailed::Unavailable(UpstreamError::Unreachable(
                    format!("the server refused the listing with HTTP {}", resp.status()),
                )),
                ListFailed::Unavailable(e) => ListFailed::Unavailable(e),
                ListFailed::Refused(why) => ListFailed::Refused(why),
            })
    }
}

impl SessionLister<'_> {
    async fn list_in_session(
        &self,
        request: Bytes,
        id: &str,
    ) -> Result<Box<RawValue>, ListFailed<Box<axum::response::Response>>> {
        let headers = &self.way.headers;
        let listed = self.with(headers).list(request.clone(), id).await;
        let Err(ListFailed::Relay(resp)) = &listed else {
            return listed;
        };
        let (http, limits) = (self.http, &self.http.gw.config.limits);
        if self.way.session.is_some()
            || !http_bridge::session_lost(&http.up, resp.status(), headers, limits).await
            || !http.reinitialize().await
        {
            return listed;
        }
        let headers = http.in_new_session(headers.clone());
        self.with(&headers).list(request, id).await
    }
}

/// Runs until the client goes away; returns the process exit status.
pub async fn run(gw: Arc<Gateway>, url: &str) -> i32 {
    let uri = match crate::config::parse_upstream_url(url) {
        Ok(u) => u,
        Err(e) => {
            tracing::error!("{e}");
            return 1;
        }
    };
    let up = match HttpUpstream::new(uri, &gw.config.upstream_tls) {
        Ok(up) => up,
        Err(e) => {
            tracing::error!("{e}");
            return 1;
        }
    };
    let (to, writer) = ToClient::open(gw.clone());
    let http = Arc::new(Http {
        target: gw.targets[0].clone(),
        gw,
        up: Arc::new(up),
        session: Mutex::default(),
        reverse: Reversed::default(),
        stream: Mutex::default(),
        to: to.clone(),
    });
    super::serve(http, to, writer, None).await
}

impl Upstream for Http {
    type Way = SessionWay;
    type Lister<'a> = SessionLister<'a>;

    const IN_ORDER: bool = false;
    const SERVER: &'static str = "http";

    fn target(&self) -> &Arc<Target> {
        &self.target
    }

    fn key(&self) -> ScopeKey {
        let s = self.session.locked();
        self.gw
            .scope(&self.target, s.id.as_ref().map(|v| v.as_bytes()), None)
    }

    async fn way(&self, m: &Message<'_>, era: Era) -> SessionWay {
        // Before the guard takes the params: the 2026-07-28 headers mirror them.
        let mut headers = self.headers_for(m, era);
        // A 2026-07-28 request to a server that speaks only the handshake goes through
        // toolgate's session with it (docs/contract.md §5, "Eras bridged").
        let session = match (era, m.is_request()) {
            (Era::Modern, true) => {
                let limits = &self.gw.config.limits;
                let ids = || self.gw.next_id();
                self.up
                    .bridge
                    .session(
                        &self.up,
                        &HeaderMap::new(),
                        (self.key(), &self.declared(m)),
                        ids,
                        limits,
                    )
                    .await
            }
            // A cancellation goes inside the session the request went through: a 2026-07-28
            // client's, whether or not it wrote the envelope on it (it has no session of its
            // own, having never sent `initialize`).
            (era, false) if era == Era::Modern || self.session.locked().id.is_none() => {
                self.up.bridge.existing(self.key())
            }
            _ => None,
        };
        let reverse = self.reverse.for_era(era);
        if reverse.is_some() {
            HttpBridge::modern_headers(&mut headers, m);
        }
        if let Some(session) = &session {
            session.headers(&mut headers);
        }
        SessionWay {
            headers,
            session,
            reverse,
            may_ask: m.method().is_some_and(asked::may_ask),
        }
    }

    fn bridging(way: &SessionWay) -> Bridging<'_> {
        Bridging::of(
            way.session.as_ref().map(|s| &*s.init),
            way.reverse.as_deref(),
        )
    }

    fn lister<'a>(self: &'a Arc<Self>, way: &'a SessionWay, era: Era) -> SessionLister<'a> {
        SessionLister {
            http: self,
            way,
            era,
        }
    }

    async fn exchange(self: Arc<Self>, way: SessionWay, sent: Forwarded) {
        self.post(way, sent).await
    }

    async fn end(&self, _grace: Duration) -> String {
        if let Some(s) = self.stream.locked().take() {
            s.abort();
        }
        let headers = self.headers();
        if !headers.contains_key(mcp::SESSION_ID) {
            return "keeps no session".into();
        }
        match self
            .up
            .http
            .send(Method::DELETE, headers, Bytes::new(), self.timeout())
            .await
        {
            Ok(r) => format!(
                "was asked to end the session (HTTP {})",
                r.status().as_u16()
            ),
            Err(e) => format!("could not be asked to end the session: {e}"),
        }
    }
}

/// Where a bridged call's server questions go: the client's scope, and the session's
/// headers for the answers.
struct Asking {
    key: ScopeKey,
    session: HeaderMap,
}

/// An SSE answer being read: what was read and not yet split, the rest of the body, and on
/// a round's retry, the id the server answers under and the retry's own.
struct Stream<B> {
    splitter: Splitter,
    body: B,
    renumber: Option<(Box<RawValue>, Box<RawValue>)>,
    /// A bridged call's place among those the server's questions on the session's own
    /// stream go to.
    listening: Option<Listening>,
}

/// Whom an answer's events are for.
struct Reader<'a> {
    to: &'a ToClient,
    pending: &'a Pending,
    handshake: bool,
    asking: Option<&'a Asking>,
    /// A handshake-era client's request to a server of 2026-07-28: an input-required answer
    /// is held for its rounds (`pipeline::asked`) rather than written.
    holds_rounds: bool,
    /// A bridged call's place among those the server's questions on the session's own
    /// stream go to.
    listening: Option<Listening>,
}

impl Http {
    /// One message as a POST, and what comes back written to the client.
    async fn post(self: Arc<Self>, way: SessionWay, sent: Forwarded) {
        let Forwarded {
            body,
            pending,
            handshake,
            to,
            ..
        } = sent;
        if let Some(h) = &handshake {
            self.session.locked().init_params = h.params.clone();
        }
        // A call bridged to a server of the handshake era may be asked something by it
        // (docs/contract.md §5, "The bridged client keeps what it has").
        let asking = way.session.as_ref().map(|_| Asking {
            key: self.key(),
            session: way.headers.clone(),
        });
        if let Some(asking) = &asking
            && let Some(retry) = bridge::retry(&body)
        {
            return self.resume(asking, retry, &pending, &to).await;
        }
        let rounds = (way.reverse.clone())
            .filter(|_| way.may_ask)
            .map(|r| (body.clone(), r, way.headers.clone()));
        let listening = match &way.session {
            Some(s) if way.may_ask && pending.id.is_some() => Some(s.listen()),
            _ => None,
        };
        let resp = match self.send(way, body, handshake.is_some()).await {
            Ok(r) => r,
            Err(e) => return to.failed(&pending, &e),
        };
        if let Some(h) = &handshake {
            if let Some(id) = pending.id.as_deref()
                && let Some(ours) = self.reverse_if_refused(&resp, id, h).await
            {
                return to.write(ours);
            }
            if let Some(sid) = resp.headers().get(mcp::SESSION_ID) {
                self.session.locked().id = Some(sid.clone());
            }
        }
        let reader = Reader {
            to: &to,
            pending: &pending,
            handshake: handshake.is_some(),
            asking: asking.as_ref(),
            holds_rounds: rounds.is_some(),
            listening,
        };
        let read = self.read(resp, reader).await;
        if handshake.is_some() {
            self.open_stream();
        }
        match (read, rounds) {
            (Ok(Some(held)), Some((request, reverse, headers))) => {
                let limits = &self.gw.config.limits;
                let server = HttpRetrying::new(self.up.clone(), headers, limits);
                let asked = (&request[..], &*reverse);
                to.answer_after_rounds(&pending, asked, held, &server).await;
            }
            (Err(e), _) => to.failed(&pending, &e),
            _ => {}
        }
    }

    /// Sends the POST. A 404 (or a 400 that `http_bridge::session_lost` reads as one) means
    /// the server no longer knows the session: toolgate's own (era bridge) is forgotten and
    /// the request fails with a hint to retry; the client's is opened again, and the message
    /// sent once more.
    async fn send(
        self: &Arc<Self>,
        way: SessionWay,
        body: Bytes,
        handshake: bool,
    ) -> Result<http::Response<UpstreamBody>, UpstreamError> {
        let SessionWay {
            headers, session, ..
        } = way;
        let key = self.key();
        let sent = self
            .up
            .http
            .send(Method::POST, headers.clone(), body.clone(), self.timeout())
            .await;
        let (Ok(r), false) = (&sent, handshake) else {
            return sent;
        };
        let limits = &self.gw.config.limits;
        if session.is_some() {
            let bridge = &self.up.bridge;
            let lost = bridge.lost_session(&self.up, r.status(), &headers, key, limits);
            return match lost.await {
                Some(e) => Err(e),
                None => sent,
            };
        }
        if !http_bridge::session_lost(&self.up, r.status(), &headers, limits).await
            || !self.reinitialize().await
        {
            return sent;
        }
        self.up
            .http
            .send(
                Method::POST,
                self.in_new_session(headers),
                body,
                self.timeout(),
            )
            .await
    }

    /// `headers` of a message in the client's session, moved to the session opened since.
    fn in_new_session(&self, mut headers: HeaderMap) -> HeaderMap {
        if headers.contains_key(mcp::SESSION_ID)
            && let Some(id) = self.headers().get(mcp::SESSION_ID)
        {
            headers.insert(mcp::SESSION_ID, id.clone());
        }
        headers
    }

    /// The client's `initialize`, refused: a server that answers `server/discover` speaks
    /// only 2026-07-28, and the client is bridged to it (docs/contract.md §5, "Eras bridged
    /// the other way"). toolgate's answer to the client then.
    async fn reverse_if_refused(
        &self,
        resp: &http::Response<UpstreamBody>,
        id: &RawValue,
        handshake: &Handshake,
    ) -> Option<Vec<u8>> {
        if !resp.status().is_client_error() {
            return None;
        }
        let own_id = self.gw.next_id();
        let bridge = &self.up.bridge;
        let (session, result) = bridge
            .reverse(
                &self.up,
                &HeaderMap::new(),
                handshake.params.as_deref(),
                &own_id,
                &self.gw.config.limits,
            )
            .await?;
        self.reverse.set(bridge.reversed(&session));
        Some(jsonrpc::result_response(id, &result))
    }

    /// Reads the answer, JSON or SSE, out to the client, until the request's answer has
    /// gone out (an SSE stream is left then: one answer per request), or is held for its
    /// rounds (returned); `Err` says why none came, classified as the HTTP edge classifies
    /// it.
    async fn read(
        &self,
        resp: http::Response<UpstreamBody>,
        mut r: Reader<'_>,
    ) -> Result<Option<Bytes>, UpstreamError> {
        let status = resp.status();
        let is_sse = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let body = resp.into_body();
        let unanswered = || {
            UpstreamError::NotJsonRpc(format!(
                "HTTP {} without an answer to the request",
                status.as_u16()
            ))
        };
        if !is_sse {
            let limit = self.gw.config.limits.max_response_bytes;
            return match collect_upstream(body, limit).await {
                Ok(Collected::Whole(bytes))
                    if r.holds_rounds && asked::input_required(&bytes).is_some() =>
                {
                    Ok(Some(bytes))
                }
                Ok(Collected::Whole(bytes))
                    if !bytes.is_empty()
                        && self.deliver(r.to, r.pending, r.handshake, bytes.clone()) =>
                {
                    Ok(None)
                }
                Err(e) => Err(UpstreamError::unanswered_stream(Some(e.to_string()))),
                _ => Err(unanswered()),
            };
        }
        let stream = Stream {
            splitter: Splitter::new(self.gw.config.limits.max_sse_event_bytes),
            body,
            renumber: None,
            listening: r.listening.take(),
        };
        self.events(stream, r).await
    }

    /// Reads an SSE answer's events out to the client, until the request's answer has gone
    /// out, or (a bridged call) the server asks the client something: the client is then
    /// answered with an input-required round, and the rest of the stream waits for its retry.
    /// An input-required answer the reader holds is returned.
    async fn events<B>(
        &self,
        mut stream: Stream<B>,
        r: Reader<'_>,
    ) -> Result<Option<Bytes>, UpstreamError>
    where
        B: http_body::Body<Data = Bytes> + Send + Unpin + 'static,
        B::Error: std::fmt::Display + Into<axum::BoxError>,
    {
        loop {
            while let Some(Split::Event(ev)) = stream.splitter.next_event() {
                let Some(d) = sse::data(&ev).filter(|d| !d.is_empty()) else {
                    continue;
                };
                let data = Bytes::copy_from_slice(d.as_bytes());
                let how = Carrying {
                    asks: r.asking.is_some(),
                    holds_rounds: r.holds_rounds,
                    renumber: (stream.renumber.as_ref()).map(|(from, to)| (&**from, &**to)),
                };
                let data = match (carried(&data, &how), r.asking) {
                    (Carried::Question(asked), Some(asking)) => {
                        self.ask_client(asking, asked, stream, &r);
                        return Ok(None);
                    }
                    (Carried::InputRequired, _) => return Ok(Some(data)),
                    (Carried::Renumbered(renumbered), _) => renumbered,
                    _ => data,
                };
                if self.deliver(r.to, r.pending, r.handshake, data) {
                    return Ok(None);
                }
            }
            let broke = |e: B::Error| UpstreamError::unanswered_stream(Some(e.to_string()));
            let next = match (&mut stream.listening, r.asking) {
                (Some(l), Some(asking)) => tokio::select! {
                    frame = stream.body.frame() => frame,
                    Some(asked) = l.recv() => {
                        // Asked on the session's own stream: a round all the same.
                        self.ask_client(asking, asked, stream, &r);
                        return Ok(None);
                    }
                },
                _ => stream.body.frame().await,
            };
            match next {
                Some(frame) => {
                    if let Ok(data) = frame.map_err(broke)?.into_data() {
                        stream.splitter.push(&data);
                    }
                }
                None => return Err(UpstreamError::unanswered_stream(None)),
            }
        }
    }

    /// Answers the client's request with the server's question, as an input-required round,
    /// and keeps the rest of `stream` for the retry.
    fn ask_client<B>(
        &self,
        asking: &Asking,
        asked: bridge::Question,
        stream: Stream<B>,
        r: &Reader<'_>,
    ) where
        B: http_body::Body<Data = Bytes> + Send + Unpin + 'static,
        B::Error: Into<axum::BoxError>,
    {
        let Some(id) = r.pending.id.as_deref() else {
            return;
        };
        let state = Rounds::state();
        let answers_as = match &stream.renumber {
            Some((from, _)) => from.clone(),
            None => id.to_owned(),
        };
        let round = bridge::input_required(id, &asked, &state);
        let parked = Parked {
            key: asking.key,
            asked: asked.id,
            answers_as,
            rest: StreamRest {
                session: asking.session.clone(),
                splitter: stream.splitter,
                body: axum::body::Body::new(stream.body),
                listening: stream.listening,
            },
        };
        // Kept before the question goes out, so that the retry finds it.
        self.up.bridge.rounds.park(state, parked);
        r.to.answered_by_toolgate(r.pending, round, "forwarded");
    }

    /// A round's retry: the client's answer goes to the server's question, and the rest of
    /// the server's stream answers the retry (under its id), or asks again.
    async fn resume(
        &self,
        asking: &Asking,
        retry: bridge::Retry,
        pending: &Pending,
        to: &ToClient,
    ) {
        let parked = match self
            .up
            .bridge
            .resume(&self.up, &retry, asking.key, self.timeout())
            .await
        {
            Ok(parked) => parked,
            Err(Unresumed::Refused(why)) => {
                let id = pending.id.as_deref();
                let refusal = jsonrpc::error_response(id, jsonrpc::INVALID_PARAMS, &why, None);
                return to.answered_by_toolgate(pending, refusal, "answered");
            }
            Err(Unresumed::Unavailable(e)) => return to.failed(pending, &e),
        };
        let stream = Stream {
            splitter: parked.rest.splitter,
            body: parked.rest.body,
            renumber: pending.id.clone().map(|id| (parked.answers_as, id)),
            listening: parked.rest.listening,
        };
        let reader = Reader {
            to,
            pending,
            handshake: false,
            asking: Some(asking),
            holds_rounds: false,
            listening: None,
        };
        if let Err(e) = self.events(stream, reader).await {
            to.failed(pending, &e);
        }
    }

    /// One message the server sent about the request; `true` when it is the answer.
    fn deliver(&self, to: &ToClient, pending: &Pending, handshake: bool, bytes: Bytes) -> bool {
        // An error that names no request (a 4xx refusal of the POST itself) is this
        // request's answer: a stdio client matches answers by id, so it gets the request's.
        // Only a message that holds an error is read for one.
        if let Some(id) = pending.id.as_deref()
            && memchr::memmem::find(&bytes, b"\"error\"").is_some()
            && let Some(err) = jsonrpc::refusal(&bytes)
        {
            let e: serde_json::Value = serde_json::from_str(err.get()).unwrap_or_default();
            let code = e["code"].as_i64().unwrap_or(jsonrpc::INTERNAL_ERROR);
            let message = e["message"]
                .as_str()
                .unwrap_or("the server refused the request");
            to.write(jsonrpc::error_response(
                Some(id),
                code,
                message,
                e.get("data"),
            ));
            return true;
        }
        let Ok(Parsed::Single(am)) = jsonrpc::parse(&bytes) else {
            return false;
        };
        if handshake
            && let Some(v) = am
                .result
                .and_then(|r| serde_json::from_str::<serde_json::Value>(r.get()).ok())
                .and_then(|r| r["protocolVersion"].as_str().map(str::to_owned))
            && let Ok(v) = HeaderValue::from_str(&v)
        {
            self.session.locked().version = Some(v);
        }
        if am.method.is_some() {
            // A notification or request about this one (progress, sampling): passed on.
            to.unsolicited(self.key(), bytes);
            return false;
        }
        to.answer_message(pending, &am, bytes.clone())
    }

    /// The session's GET stream: what the server sends on its own (a 405 means it has none).
    async fn server_stream(&self) {
        let mut headers = self.headers();
        if !headers.contains_key(mcp::SESSION_ID) {
            return;
        }
        headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        let Ok(resp) = self
            .up
            .http
            .send(Method::GET, headers, Bytes::new(), self.timeout())
            .await
        else {
            return;
        };
        if !resp.status().is_success() {
            return;
        }
        let max = self.gw.config.limits.max_sse_event_bytes;
        let read = sse::each_data(resp.into_body(), max, |d| {
            let line = Bytes::copy_from_slice(d.as_bytes());
            self.to.unsolicited(self.key(), line);
            true
        })
        .await;
        if read == sse::Read::Overflowed {
            tracing::warn!(
                "an event on the session's own stream is over max_sse_event_bytes; the rest of that stream is not read"
            );
        }
    }
}
