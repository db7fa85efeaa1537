//! `toolgate stdio --upstream URL`: the stdio front in front of a Streamable HTTP server.
//! toolgate is the stdio client's HTTP client: it keeps the client's session
//! (`Mcp-Session-Id` and the protocol version from `initialize`), sends each message the way
//! the HTTP edge sends it (`exchange::to_http::HttpWay`: the era bridges both ways and their
//! rounds, the answer rules), writes what comes back as lines (`lines`), and opens the
//! session's GET stream for what the server sends on its own. A 404 on the session opens a
//! new one with the client's own `initialize` params, since a stdio client cannot see that
//! status.

use super::{Forwarded, Handshake, ToClient, Upstream, lines};
use crate::catalog::ScopeKey;
use crate::error::UpstreamError;
use crate::gateway::{Gateway, Target};
use crate::jsonrpc::{self, Message};
use crate::locks::MutexExt;
use crate::mcp::{self, Era};
use crate::metrics;
use crate::net::client::Wait;
use crate::pipeline::Pending;
use crate::pipeline::bridge::Reverse;
use crate::pipeline::guard::{ListFailed, Lister};
use crate::pipeline::step::Bridging;
use crate::telemetry::hop::HopParent;
use crate::transport::exchange::to_http::{self, HttpWay, ToHttp};
use crate::transport::exchange::{Note, Said};
use crate::transport::sse;
use crate::transport::upstream::announced;
use crate::transport::upstream::http_bridge;
use crate::transport::upstream::http_client::HttpUpstream;
use crate::transport::upstream::multiplex::Owner;
use crate::transport::upstream::own::{self, HttpSession};
use crate::transport::upstream::session_stream;
use axum::response::Response;
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
    /// The scope of the last 2026-07-28 request bridged through a session of toolgate's:
    /// a cancellation that came without the envelope goes in that session.
    bridged: Option<ScopeKey>,
}

/// The HTTP server behind the front, and the client's session with it.
pub(crate) struct Http {
    gw: Arc<Gateway>,
    target: Arc<Target>,
    up: Arc<HttpUpstream>,
    session: Mutex<Session>,
    /// The session's GET stream, opened after each `initialize`.
    stream: Mutex<Option<JoinHandle<()>>>,
    to: ToClient,
}

/// How one message reaches the server: the HTTP edge's way, the headers it goes with, and
/// its method as the edge's `Said` names it.
pub(crate) struct SessionWay {
    way: HttpWay,
    headers: HeaderMap,
    method: &'static str,
}

impl Http {
    fn to_http(&self) -> ToHttp<'_> {
        ToHttp {
            gw: &self.gw,
            target: &self.target,
            up: &self.up,
        }
    }

    fn timeout(&self) -> Wait {
        (&self.target.limits).into()
    }

    /// The scope of the client's session (or of no session).
    fn session_key(&self) -> ScopeKey {
        let s = self.session.locked();
        self.gw
            .scope(&self.target, s.id.as_ref().map(|v| v.as_bytes()), [])
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
        // The server's credential with every request (`auth.upstream_header`): the client
        // that launched toolgate is the pipe's only one, so it needs no authentication in
        // front of it, as the HTTP edge's does (`Gateway::for_pipe`).
        if let Some((name, value)) = &self.target.credential {
            h.insert(name, value.clone());
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
        let opening = HttpSession::new(&self.up, headers, &self.target.limits);
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
/// one and is sent once more, as the client's own messages are (`Http::again_if_lost`).
pub(crate) struct SessionLister<'a> {
    http: &'a Arc<Http>,
    way: &'a SessionWay,
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
        let (http, way) = (self.http, &self.way.way);
        let headers = &self.way.headers;
        let listed = way
            .lister(http.to_http(), headers)
            .list(request.clone(), id)
            .await;
        let Err(ListFailed::Relay(resp)) = &listed else {
            return listed;
        };
        let limits = &http.target.limits;
        if way.in_own_session()
            || !http_bridge::session_lost(&http.up, resp.status(), headers, limits).await
            || !http.reinitialize().await
        {
            return listed;
        }
        let headers = http.in_new_session(headers.clone());
        way.lister(http.to_http(), &headers).list(request, id).await
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
        stream: Mutex::default(),
        to: to.clone(),
    });
    super::serve(http, to, writer, None).await
}

impl Upstream for Http {
    type Way = SessionWay;
    type Lister<'a> = SessionLister<'a>;

    const IN_ORDER: bool = false;

    fn target(&self) -> &Arc<Target> {
        &self.target
    }

    fn key(&self, way: &SessionWay) -> ScopeKey {
        way.way.key()
    }

    async fn way(&self, m: &Message<'_>, era: Era) -> SessionWay {
        // Before the guard takes the params: the 2026-07-28 headers mirror them.
        let headers = self.headers_for(m, era);
        let session = headers.get(mcp::SESSION_ID);
        let has_session = session.is_some();
        let client = (self.session_key(), session, Owner::Pipe);
        let way = HttpWay::find(self.to_http(), &headers, m, era, client).await;
        let mut way = way.for_pipe();
        match (era, m.is_request()) {
            (Era::Modern, true) if way.in_own_session() => {
                self.session.locked().bridged = Some(way.key());
            }
            // A 2026-07-28 client's cancellation without the envelope on it (it has no session
            // of its own, having never sent `initialize`): in the session its request went
            // through.
            (Era::Legacy, false) if !has_session => {
                let bridged = self.session.locked().bridged;
                let session = bridged.and_then(|k| self.up.bridge.existing(k));
                way = way.in_session(session, Owner::Pipe, m);
            }
            _ => {}
        }
        SessionWay {
            way,
            headers,
            method: metrics::method_label(m.method()),
        }
    }

    fn bridging(way: &SessionWay) -> Bridging<'_> {
        way.way.bridging()
    }

    fn lister<'a>(self: &'a Arc<Self>, way: &'a SessionWay) -> SessionLister<'a> {
        SessionLister { http: self, way }
    }

    async fn exchange(self: Arc<Self>, way: SessionWay, sent: Forwarded) {
        self.post(way, sent).await
    }

    async fn end(&self, _grace: Duration) -> String {
        if let Some(s) = self.stream.locked().take() {
            s.abort();
        }
        self.up.bridge.end_sessions().await;
        let headers = self.headers();
        let Some(id) = headers.get(mcp::SESSION_ID) else {
            return "keeps no session".into();
        };
        if to_http::reversed_session(&self.up, &headers).is_some() {
            self.up.bridge.end_reversed(id.to_str().unwrap_or_default());
            return "ended the session toolgate kept with it".into();
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
    /// One message as the HTTP edge sends it, and what comes back written to the client.
    async fn post(self: Arc<Self>, way: SessionWay, sent: Forwarded) {
        let Forwarded {
            body,
            pending,
            handshake,
            hop_parent,
            to,
        } = sent;
        if let Some(h) = &handshake {
            self.session.locked().init_params = h.params.clone();
        }
        let SessionWay {
            way,
            headers,
            method,
        } = way;
        // Only the client's own session is opened again here; toolgate's are the way's.
        // A message in the client's session is sent again should the server have lost it; its
        // headers then are the session's, which the client's own message carries too.
        let in_client_session = headers.contains_key(mcp::SESSION_ID) && !way.in_own_session();
        let again = (in_client_session && handshake.is_none()).then(|| body.clone());
        let said = (method, handshake.as_ref());
        let resp = self
            .send(way, headers, body, &pending, said, hop_parent.as_deref())
            .await;
        let resp = match again {
            Some(body) => {
                let resent = (&pending, method, hop_parent.as_deref());
                self.again_if_lost(resp, body, resent).await
            }
            None => resp,
        };
        if handshake.is_some()
            && let Some(sid) = resp.headers().get(mcp::SESSION_ID)
        {
            self.session.locked().id = Some(sid.clone());
        }
        if pending.id.is_none() {
            // A notification or a client's answer: nothing comes back to write.
            return;
        }
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

    /// Sends one message the way the HTTP edge sends it (`HttpWay::send`), its hop under
    /// `hop_parent` when traced.
    async fn send(
        &self,
        way: HttpWay,
        headers: HeaderMap,
        body: Bytes,
        pending: &Pending,
        (method, handshake): (&'static str, Option<&Handshake>),
        hop_parent: Option<&HopParent>,
    ) -> Response {
        let (mut parts, ()) = http::Request::new(()).into_parts();
        parts.method = Method::POST;
        parts.headers = headers;
        let said = Said {
            id: pending.id.as_deref(),
            method,
            params: handshake.and_then(|h| h.params.as_deref()),
            cancelled: None,
        };
        let mut note = Note {
            method,
            hop_parent: hop_parent.cloned().map(Box::new),
            ..Note::default()
        };
        let to = self.to_http();
        way.send(to, Box::new(parts), body, pending.clone(), said, &mut note)
            .await
    }

    /// The answer of a message in the client's session. A 404 (or a 400 that
    /// `http_bridge::session_lost` reads as one) means the server no longer knows the
    /// session: it is opened again, and the message sent once more in the new one.
    async fn again_if_lost(
        self: &Arc<Self>,
        resp: Response,
        body: Bytes,
        (pending, method, hop_parent): (&Pending, &'static str, Option<&HopParent>),
    ) -> Response {
        let limits = &self.target.limits;
        if !http_bridge::session_lost(&self.up, resp.status(), &self.headers(), limits).await
            || !self.reinitialize().await
        {
            return resp;
        }
        let way = HttpWay::in_client_session(self.session_key());
        let (headers, said) = (self.headers(), (method, None));
        self.send(way, headers, body, pending, said, hop_parent)
            .await
    }

    /// The protocol version the server's answer to `initialize` names, for the session's
    /// next requests.
    fn keep_version(&self, answer: &Message<'_>) {
        /// Read for its version alone: the rest (capabilities) may hold many times its text.
        #[derive(serde::Deserialize)]
        struct Agreed {
            #[serde(rename = "protocolVersion")]
            version: Option<String>,
        }
        if let Some(v) = answer
            .result
            .and_then(|r| serde_json::from_str::<Agreed>(r.get()).ok())
            .and_then(|r| r.version)
            && let Ok(v) = HeaderValue::from_str(&v)
        {
            self.session.locked().version = Some(v);
        }
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

    /// The session's GET stream: what the server sends on its own, opened again when it
    /// ends (`upstream::session_stream`; a 405 means it has none). In the session toolgate
    /// keeps before a server of 2026-07-28, what that server announces instead
    /// (`upstream::announced`).
    async fn server_stream(&self) {
        let headers = self.headers();
        if let Some(reverse) = to_http::reversed_session(&self.up, &headers) {
            return self.announced(&reverse, &headers).await;
        }
        if !headers.contains_key(mcp::SESSION_ID) {
            return;
        }
        let (max, wait) = (self.gw.config.limits.max_sse_event_bytes, self.timeout());
        let open = |last_id| session_stream::open(&self.up, headers.clone(), last_id, wait);
        let paced = || self.to.paced();
        let read = session_stream::follow(open, max, paced, |d| {
            let line = Bytes::copy_from_slice(d.as_bytes());
            self.to.unsolicited(self.session_key(), line, None);
            true
        })
        .await;
        if read == sse::Read::Overflowed {
            tracing::warn!(
                "an event on the session's own stream is over max_sse_event_bytes; the rest of that stream is not read"
            );
        }
    }

    /// What a server of 2026-07-28 announces to this handshake-era client, written to the
    /// pipe as it comes, no faster than the client reads.
    async fn announced(&self, reverse: &Reverse, headers: &HeaderMap) {
        let (tx, mut rx) = tokio::sync::mpsc::channel(1);
        let ids = || self.gw.next_id();
        let limits = &self.target.limits;
        let follow = announced::follow(&self.up, headers, reverse, (ids, limits), tx);
        let write = async {
            while let Some(line) = rx.recv().await {
                self.to.paced().await;
                self.to.unsolicited(self.session_key(), line, None);
            }
        };
        tokio::join!(follow, write);
    }
}
