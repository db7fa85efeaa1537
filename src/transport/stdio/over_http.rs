//! `toolgate stdio --upstream URL`: the stdio front in front of a Streamable HTTP server.
//! toolgate is the HTTP client: it keeps the session (`Mcp-Session-Id` and the protocol
//! version from `initialize`), sends each message as a POST, reads what comes back by the
//! HTTP edge's rules (`edge::answers`) and writes its messages out as lines as they arrive,
//! and opens the session's GET stream for what the server sends on its own. A 404 on the session opens a new one with the client's own `initialize` params, since
//! a stdio client cannot see that status.

use super::{Forwarded, Handshake, Reversed, ToClient, Upstream, lines};
use crate::catalog::ScopeKey;
use crate::error::UpstreamError;
use crate::gateway::{Gateway, Target};
use crate::jsonrpc::{self, Message};
use crate::locks::MutexExt;
use crate::mcp::{self, Era};
use crate::net::client::{UpstreamBody, Wait};
use crate::pipeline::Pending;
use crate::pipeline::asked;
use crate::pipeline::bridge::{self, Declared, Reverse};
use crate::pipeline::guard::{ListFailed, Lister};
use crate::pipeline::step::Bridging;
use crate::transport::edge::answers::{self, Parking, Reading};
use crate::transport::edge::asking::{RetryServer, ReverseRounds};
use crate::transport::sse;
use crate::transport::upstream::http_bridge::{
    self, HttpBridge, Session as BridgeSession, Unresumed,
};
use crate::transport::upstream::http_client::{HttpRetrying, HttpUpstream};
use crate::transport::upstream::own::{self, HttpSession};
use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE, HeaderValue};
use http::{HeaderMap, Method};
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

impl Http {
    /// One message as a POST, and what comes back written to the client, read by the same
    /// rules as the HTTP edge's (`edge::answers`).
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
        if pending.id.is_none() {
            // A notification or a client's answer: nothing comes back to write.
            let _ = self.send(way, body, false).await;
            return;
        }
        if way.session.is_some()
            && let Some(retry) = bridge::retry(&body)
        {
            return self.resume(retry, &pending, &to).await;
        }
        let reading = self.reading(&way, &body, &pending);
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
        let resp = answers::response(&self.gw, pending.clone(), reading, resp).await;
        // The session's protocol version, kept before the client can send its next message.
        let keep_version = |m: &Message<'_>| {
            if handshake.is_some() {
                self.keep_version(m);
            }
        };
        lines::write(&to, &pending, resp, keep_version).await;
        if handshake.is_some() {
            self.open_stream();
        }
    }

    /// How the answer is read besides its rules: a call bridged to a server of the handshake
    /// era waits, when the server asks its client something, for the client's answer (an
    /// input-required round); a handshake-era client's request to a server of 2026-07-28 is
    /// asked what the server asks, and the server retried (`pipeline::asked`).
    fn reading(&self, way: &SessionWay, body: &Bytes, pending: &Pending) -> Reading {
        let mut reading = Reading::of(false);
        let asks = way.may_ask && pending.id.is_some();
        if let (Some(reverse), true) = (&way.reverse, asks) {
            let limits = &self.gw.config.limits;
            let retry = HttpRetrying::new(self.up.clone(), way.headers.clone(), limits);
            reading.reverse_rounds = Some(Box::new(ReverseRounds {
                request: body.clone(),
                reverse: reverse.clone(),
                server: RetryServer::Http(Box::new(retry)),
            }));
        }
        if let Some(session) = &way.session {
            reading.parking = Some(Box::new(Parking {
                rounds: self.up.bridge.rounds.clone(),
                key: pending.key,
                session: way.headers.clone(),
                renumber: None,
                listening: asks.then(|| session.listen()),
            }));
        }
        reading
    }

    /// The protocol version the server's answer to `initialize` names, for the session's
    /// next requests.
    fn keep_version(&self, answer: &Message<'_>) {
        if let Some(v) = answer
            .result
            .and_then(|r| serde_json::from_str::<serde_json::Value>(r.get()).ok())
            .and_then(|r| r["protocolVersion"].as_str().map(str::to_owned))
            && let Ok(v) = HeaderValue::from_str(&v)
        {
            self.session.locked().version = Some(v);
        }
    }

    /// A round's retry: the client's answer goes to the server's question, and the rest of
    /// the server's stream answers the retry (under its id), or asks again.
    async fn resume(&self, retry: bridge::Retry, pending: &Pending, to: &ToClient) {
        match answers::resume(&self.gw, &self.up, &retry, pending.key, pending).await {
            Ok(resp) => lines::write(to, pending, resp, |_| {}).await,
            Err(Unresumed::Refused(why)) => {
                let id = pending.id.as_deref();
                let refusal = jsonrpc::error_response(id, jsonrpc::INVALID_PARAMS, &why, None);
                to.write_answer(pending, refusal, "answered");
            }
            Err(Unresumed::Unavailable(e)) => to.failed(pending, &e),
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
