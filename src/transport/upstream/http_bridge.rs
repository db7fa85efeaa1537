//! The era bridge over HTTP (`pipeline::bridge` holds the rules; this holds the sessions):
//! 2026-07-28 clients in front of a Streamable HTTP server that speaks only the handshake era,
//! and handshake-era clients in front of one that speaks only 2026-07-28 (`HttpBridge::reverse`).
//!
//! The upstream is asked `server/discover` on its first 2026-07-28 request. A server that
//! refuses the request itself, outside a session (HTTP 400, 404 or 405: a handshake-era
//! server says "no valid session ID"), is bridged. One that answers it, even with a JSON-RPC
//! error, serves requests outside a session, and they go to it as they are. A bridged server
//! gets a session: toolgate opens a session with `initialize`
//! per credential (the catalog's scope key for a 2026-07-28 request: a keyed hash of its
//! `Authorization`), so that one client's session never carries another's requests. An answer
//! that is neither (401, 403, a server that cannot be reached) decides nothing, and the
//! question is asked again on the next request. An answer decides for five minutes, then the
//! question is asked again (a server is upgraded, a deployment rolls back). The probe carries
//! toolgate's own headers and the client's credential, nothing else of the client's: an
//! encoding or an expectation a server cannot take would make it decide wrong.

use crate::auth::UpstreamCredential;
use crate::catalog::ScopeKey;
use crate::config::Limits;
use crate::error::UpstreamError;
use crate::gateway::Gateway;
use crate::jsonrpc::Body as Parsed;
use crate::locks::MutexExt;
use crate::lograte::{LogRate, warn_at_rate};
use crate::mcp;
use crate::pipeline::bridge::{Declared, Retry, Reverse, answer_to};
use crate::pipeline::guard::{self, ListFailed};
use crate::transport::sse;
use crate::transport::upstream::http_client::{HttpUpstream, exchange};
use crate::transport::upstream::multiplex::Multiplexed;
use crate::transport::upstream::own::{self, HttpSession, Unresulted};
pub use crate::transport::upstream::rounds::Unresumed;
use crate::transport::upstream::rounds::{Listening, Offered, Parked, Questions};
use crate::transport::upstream::session_stream;
use crate::transport::upstream::subscribers::Subscribers;
use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_ENCODING, CONTENT_TYPE, HeaderValue};
use http::{HeaderMap, StatusCode};
use serde_json::value::RawValue;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

/// How long an answer to `server/discover` decides an upstream's era.
const ERA_DECIDED_FOR: std::time::Duration = std::time::Duration::from_secs(300);

/// An upstream's era as the last answer to `server/discover` decided it, read by every
/// 2026-07-28 request without a lock: two atomics, written once in five minutes.
#[derive(Default)]
struct EraDecision {
    /// 0: undecided; 1: it speaks 2026-07-28; 2: only the handshake (bridged).
    state: std::sync::atomic::AtomicU8,
    /// When, in milliseconds since [`EraDecision::now`]'s origin.
    at: std::sync::atomic::AtomicU64,
}

impl EraDecision {
    /// Milliseconds since the first time this process asked.
    fn now() -> u64 {
        static ORIGIN: std::sync::LazyLock<std::time::Instant> =
            std::sync::LazyLock::new(std::time::Instant::now);
        ORIGIN.elapsed().as_millis() as u64
    }

    fn decide(&self, bridged: bool) {
        use std::sync::atomic::Ordering;
        self.at.store(EraDecision::now(), Ordering::Relaxed);
        self.state.store(1 + u8::from(bridged), Ordering::Release);
    }

    /// The decision in force at `now`: `Some(true)` when bridged, `None` when undecided or
    /// older than [`ERA_DECIDED_FOR`].
    fn at(&self, now: u64) -> Option<bool> {
        use std::sync::atomic::Ordering;
        let state = self.state.load(Ordering::Acquire);
        let fresh = now.saturating_sub(self.at.load(Ordering::Relaxed))
            < ERA_DECIDED_FOR.as_millis() as u64;
        (state != 0 && fresh).then_some(state == 2)
    }
}

/// The most bridged sessions one upstream has at once, each way.
const MAX_SESSIONS: usize = 1024;

/// Locks sessions are opened under ([`HttpBridge::opening`]): two credentials that share one
/// open their sessions in turn, which only a burst of new credentials meets.
const OPENING_STRIPES: usize = 32;

/// toolgate's session with a handshake-era server, for the 2026-07-28 clients of one
/// credential.
pub struct Session {
    /// `None` for a server that keeps no sessions.
    pub id: Option<HeaderValue>,
    /// The server's `initialize` result, for `server/discover`.
    pub init: Box<RawValue>,
    /// The version the server agreed to, for `MCP-Protocol-Version`.
    pub version: HeaderValue,
    /// The bridged calls waiting in the session, for what the server asks on the session's
    /// own stream (`roots/list` from a handler, which names no request to answer on).
    questions: Arc<Questions>,
    /// Its clients' requests in flight, each under an id of toolgate's: clients of one scope
    /// share the session, and their ids may be equal.
    pub(crate) multiplexed: Arc<Multiplexed>,
    /// Its clients' `subscriptions/listen` streams, which what the server announces on the
    /// session's own stream goes to.
    pub(crate) subscribers: Arc<Subscribers>,
    /// That stream, read while the session is kept.
    _stream: SessionStream,
    /// How the server is asked to end the session; `None` once it was, or once the server
    /// ended it itself.
    ending: Mutex<Option<Ending>>,
}

impl Drop for Session {
    /// Forgotten (lost, ended by the server, pushed out by another) and used by no request
    /// any more: what its streams wait for will not come, so they end, and their clients
    /// listen anew in another session; and the server is asked to end it, unless it did.
    fn drop(&mut self) {
        self.subscribers.end();
        let ending = self
            .ending
            .get_mut()
            .map_or_else(|e| e.into_inner().take(), Option::take);
        if let (Some(ending), Ok(runtime)) = (ending, tokio::runtime::Handle::try_current()) {
            runtime.spawn(ending.send());
        }
    }
}

/// The DELETE that ends a session, as a client should once it needs a session no more: a
/// server keeps one until told, or until it expires it, and some (the TypeScript SDK's)
/// never expire one.
struct Ending {
    up: Weak<HttpUpstream>,
    /// The headers toolgate's requests in the session went with first (the credential, the
    /// session, its version).
    headers: HeaderMap,
}

/// How long toolgate waits for a server to end a session it asked it to end ([`Ending`]):
/// the answer tells toolgate nothing, and at shutdown a server that does not answer would
/// hold the exit.
const ENDING_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

impl Ending {
    async fn send(self) {
        let Some(up) = self.up.upgrade() else {
            return;
        };
        let wait = crate::net::client::Wait {
            answer: ENDING_WAIT,
            stream_gap: ENDING_WAIT,
        };
        let (delete, none) = (http::Method::DELETE, Bytes::new());
        match up.http.send(delete, self.headers, none, wait).await {
            Ok(r) => tracing::debug!(
                status = r.status().as_u16(),
                "ended a bridged session with the upstream"
            ),
            Err(e) => {
                tracing::debug!(error = %e, "could not end a bridged session with the upstream")
            }
        }
    }
}

/// The task reading a session's own stream, ended with the session.
struct SessionStream(tokio::task::JoinHandle<()>);

impl Drop for SessionStream {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Session {
    /// Asks the server to end the session now (at shutdown) rather than once it is dropped.
    async fn end(&self) {
        let ending = self.ending.locked().take();
        if let Some(ending) = ending {
            ending.send().await;
        }
    }

    /// A bridged call's place among those the server's questions on the session's own
    /// stream go to (`upstream::rounds::Questions`).
    pub(crate) fn listen(&self) -> Listening {
        self.questions.listen()
    }

    /// The client's headers made into a handshake-era request in this session: the
    /// 2026-07-28 headers go, the session and its version come.
    pub fn headers(&self, headers: &mut HeaderMap) {
        headers.remove(mcp::METHOD_HEADER);
        headers.remove(mcp::NAME_HEADER);
        match &self.id {
            Some(id) => headers.insert(mcp::SESSION_ID, id.clone()),
            None => headers.remove(mcp::SESSION_ID),
        };
        headers.insert(mcp::PROTOCOL_VERSION, self.version.clone());
    }
}

/// toolgate's own `tools/list` to an HTTP server, for either front: sent with the headers the
/// client's message goes with (its session's, or its own credentials statelessly), less what
/// names the call, and written for the server's era ([`listing`]). The headers are copied only
/// when a listing is needed.
pub struct HttpLister<'a> {
    pub up: &'a HttpUpstream,
    pub headers: &'a HeaderMap,
    /// toolgate's session for a bridged 2026-07-28 client, and the credential it is kept
    /// under (`HttpBridge::session`).
    pub session: Option<&'a Session>,
    pub key: ScopeKey,
    /// A handshake-era client bridged to a server that speaks only 2026-07-28 (its
    /// `headers` are then already 2026-07-28 ones).
    pub reverse: Option<&'a Reverse>,
    pub client_is_modern: bool,
    pub limits: &'a Limits,
}

impl guard::Lister for HttpLister<'_> {
    /// Boxed: a response is large next to the other failures.
    type Relay = Box<axum::response::Response>;

    async fn list(
        &self,
        request: Bytes,
        id: &str,
    ) -> Result<Box<RawValue>, ListFailed<Self::Relay>> {
        let mut headers = own_headers(self.headers);
        let request = listing(
            request,
            &mut headers,
            self.session,
            self.reverse,
            self.client_is_modern,
        );
        let listed = exchange(self.up, &headers, request, id, self.limits)
            .await
            .map(|(_, result)| result);
        // toolgate's own bridged session, lost: forgotten, and the call may be retried, as
        // a message that meets it is answered (`HttpBridge::lost`).
        if let Err(ListFailed::Relay(resp)) = &listed
            && self.session.is_some_and(|s| s.id.is_some())
            && let Some(e) = (self.up.bridge)
                .lost_session(self.up, resp.status(), &headers, self.key, self.limits)
                .await
        {
            return Err(ListFailed::Unavailable(e));
        }
        match listed {
            Err(ListFailed::Relay(resp)) => {
                let has_session = headers.contains_key(mcp::SESSION_ID);
                Err(super::http_client::refused(resp, has_session, id, self.limits).await)
            }
            listed => listed,
        }
    }
}

/// toolgate's own listing for a client the bridge may serve, written for the server's era:
/// with the envelope a handshake-era client's `initialize` stood for (`reverse`), in toolgate's
/// session and without the envelope for a 2026-07-28 client (`session`), or as it is. The
/// headers are set to match: a 2026-07-28 listing goes with that era's headers and no
/// session, a handshake-era one without `Mcp-Method`.
fn listing(
    request: Bytes,
    headers: &mut HeaderMap,
    session: Option<&Session>,
    reverse: Option<&Reverse>,
    client_is_modern: bool,
) -> Bytes {
    let (request, modern) = match (reverse, session) {
        (Some(reverse), _) => (reverse.with_envelope(request), true),
        (None, Some(session)) => {
            session.headers(headers);
            (crate::pipeline::bridge::strip_envelope(request), false)
        }
        (None, None) => (request, client_is_modern),
    };
    if modern {
        headers.remove(mcp::SESSION_ID);
        headers.insert(
            mcp::PROTOCOL_VERSION,
            HeaderValue::from_static(mcp::MODERN_VERSION),
        );
        headers.insert(
            mcp::METHOD_HEADER,
            HeaderValue::from_static(mcp::TOOLS_LIST),
        );
    } else {
        headers.remove(mcp::METHOD_HEADER);
    }
    request
}

/// Whether an answer of `status` to a request in the session `headers` carry says the server
/// has forgotten that session. The spec's answer to an unknown session is 404; servers built
/// on the TypeScript SDK answer 400 "No valid session ID provided" instead, which a request
/// the server found malformed also gets. After a 400, a `ping` in the same session tells
/// them apart: refused too (400 or 404), the session is gone. For sessions of toolgate's own.
pub async fn session_lost(
    up: &HttpUpstream,
    status: StatusCode,
    headers: &HeaderMap,
    limits: &Limits,
) -> bool {
    if status == StatusCode::NOT_FOUND {
        return true;
    }
    if status != StatusCode::BAD_REQUEST || !headers.contains_key(mcp::SESSION_ID) {
        return false;
    }
    let mut headers = own_headers(headers);
    headers.remove(mcp::METHOD_HEADER);
    let ping = r#"{"jsonrpc":"2.0","id":"toolgate-session-check","method":"ping"}"#;
    let sent = up.http.send(
        http::Method::POST,
        headers,
        Bytes::from_static(ping.as_bytes()),
        limits.into(),
    );
    // Boxed: rare (after a 400), and it would otherwise widen every bridged request's future.
    match Box::pin(sent).await {
        Ok(r) => matches!(r.status(), StatusCode::BAD_REQUEST | StatusCode::NOT_FOUND),
        Err(_) => false,
    }
}

/// What one HTTP upstream speaks to clients of the other era.
#[derive(Default)]
pub struct HttpBridge {
    /// Whether the upstream speaks only the handshake, and when an answer decided it.
    era: EraDecision,
    sessions: Mutex<HashMap<ScopeKey, Arc<Session>>>,
    /// One opening of a session per credential at a time (striped by the credential's key):
    /// the requests that come while it is under way wait and take the session it opens,
    /// where each would otherwise ask the era and open a session of its own, kept by the
    /// server and used by no one.
    opening: [tokio::sync::Mutex<()>; OPENING_STRIPES],
    /// The sessions toolgate keeps for handshake-era clients of a server that speaks only
    /// 2026-07-28 (`pipeline::bridge::Reverse`), by the session id toolgate gave them.
    reversed: Mutex<HashMap<String, Arc<Reverse>>>,
    /// Bridged calls waiting for their client's answer to the server's question.
    pub rounds: Arc<super::rounds::Rounds>,
    /// How often the log says that the server would not open a session for a client: once
    /// per request while it will not.
    refused: LogRate,
    /// Set when toolgate shuts down: what it follows for its reverse-bridged clients
    /// (`upstream::announced`) ends.
    closing: tokio::sync::watch::Sender<bool>,
}

/// A client's message as toolgate's own requests in its name go: its headers, and the
/// server's credential of toolgate's, if it has one (`gateway::Target::credential`).
pub(crate) type ClientHeaders<'a> = (&'a HeaderMap, Option<&'a UpstreamCredential>);

/// The headers of a request toolgate writes itself: the client's (its credentials, its
/// session), for a plain JSON body, without the name of the client's own call. What
/// describes the client's own body goes: a `Content-Encoding` it claimed would make the
/// server misread toolgate's (and a probe that fails so decides the era for every client).
pub(crate) fn own_headers(client: &HeaderMap) -> HeaderMap {
    let mut headers = client.clone();
    headers.remove(CONTENT_ENCODING);
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(
        ACCEPT,
        HeaderValue::from_static("application/json, text/event-stream"),
    );
    headers.remove(mcp::NAME_HEADER);
    headers
}

/// The headers of a probe of toolgate's own: JSON in, JSON or SSE out, and the credential
/// the client's requests go with: the client's own (`auth::CLIENT_CREDENTIALS`), or the
/// server's (`credential`, whatever its header's name) when `[auth]` replaces the client's.
fn probe_headers(client: &HeaderMap, credential: Option<&UpstreamCredential>) -> HeaderMap {
    let mut headers = crate::auth::carried(Some(client), credential);
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(
        ACCEPT,
        HeaderValue::from_static("application/json, text/event-stream"),
    );
    headers
}

/// The client's headers, as toolgate's own request outside a session carries them.
fn own_request(client: &HeaderMap) -> HeaderMap {
    let mut headers = own_headers(client);
    headers.remove(mcp::SESSION_ID);
    headers
}

/// Tells a handshake-era server, inside toolgate's session with it (`session` holds its
/// headers), that the bridged 2026-07-28 client gave up on request `id` (it closed its
/// response, which is how that era cancels). Sent on a task of its own: the client is gone.
pub fn cancel_in_session(
    up: Arc<HttpUpstream>,
    session: &HeaderMap,
    id: &RawValue,
    limits: &Limits,
) {
    let mut headers = own_headers(session);
    headers.remove(mcp::METHOD_HEADER);
    let note = format!(
        r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{},"reason":"the client closed its response"}}}}"#,
        id.get()
    );
    let wait = limits.into();
    tokio::spawn(async move {
        let sent = up
            .http
            .send(http::Method::POST, headers, Bytes::from(note), wait)
            .await;
        if let Err(e) = sent {
            tracing::debug!(error = %e, "a bridged cancellation did not reach the server");
        }
    });
}

/// `server/discover` with toolgate's own headers, the 2026-07-28 ones and the client's
/// credential: nothing else of the client's (an encoding, an expectation) can make the probe
/// fail and the server be taken for what it is not.
async fn discover(
    up: &HttpUpstream,
    (client, credential): ClientHeaders<'_>,
    id: &str,
    limits: &Limits,
) -> Result<Box<RawValue>, Unresulted> {
    let mut headers = probe_headers(client, credential);
    headers.insert(
        mcp::PROTOCOL_VERSION,
        HeaderValue::from_static(mcp::MODERN_VERSION),
    );
    headers.insert(
        mcp::METHOD_HEADER,
        HeaderValue::from_static("server/discover"),
    );
    own::discover(&HttpSession::new(up, headers, limits), id).await
}

/// Where what a bridged session's server says of its tools is learned: the gateway it was
/// opened under, and the session's scope.
type Learns = (Weak<Gateway>, ScopeKey);

/// What the server sent on a bridged session's own stream, learned from as anything it sends
/// on its own is (`tools/list_changed` drops the scope's listing).
fn learn((gw, key): &Learns, message: &[u8]) {
    if !crate::text::holds!(message, crate::mcp::TOOLS_LIST_CHANGED) {
        return;
    }
    if let (Some(gw), Ok(Parsed::Single(m))) = (gw.upgrade(), crate::jsonrpc::parse(message)) {
        crate::pipeline::observe_unsolicited(&gw, key, &m);
    }
}

/// Refusals waiting to be sent to a server on a bridged session's own stream.
const REFUSALS: usize = 16;

/// A bridged session's own stream (GET): each question the server asks there goes to the
/// bridged call waiting (the server is refused when several wait); what it announces (a list
/// changed, a resource updated) goes to the `subscriptions/listen` streams that hold it;
/// anything else goes no further (the 2026-07-28 clients have no stream to take it). A
/// server without one answers 405; one that ends it has it opened again
/// (`upstream::session_stream`). Once it is gone for good, nothing more is heard, and the
/// streams are told so.
async fn read_session_stream(
    up: std::sync::Weak<HttpUpstream>,
    headers: HeaderMap,
    (questions, subscribers, learns): (Weak<Questions>, Weak<Subscribers>, Learns),
    limits: Limits,
) {
    let (max_event, wait) = (limits.max_sse_event_bytes, (&limits).into());
    // The server is not kept while the stream lasts: it outlives no reload. Nor is it
    // opened again once the session is gone.
    let asking = questions.clone();
    let open = |last_id| {
        let (up, headers, asked) = (up.clone(), headers.clone(), asking.clone());
        async move {
            match (up.upgrade(), asked.strong_count()) {
                (Some(server), 1..) => session_stream::open(&server, headers, last_id, wait).await,
                _ => session_stream::Opened::Never,
            }
        }
    };
    // Refusals are sent from here, in order, while the reading goes on; a server that asks
    // faster than it takes its refusals has its stream read no further until it does.
    let (refused, mut refusals) = tokio::sync::mpsc::channel::<Vec<u8>>(REFUSALS);
    let answer = async {
        while let Some(refusal) = refusals.recv().await {
            let Some(server) = up.upgrade() else { return };
            let mut headers = headers.clone();
            headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            let both = "application/json, text/event-stream";
            headers.insert(ACCEPT, HeaderValue::from_static(both));
            let (post, wait) = (http::Method::POST, (&limits).into());
            let _ = server
                .http
                .send(post, headers, Bytes::from(refusal), wait)
                .await;
        }
    };
    // One event is read at a time: room for its refusal is there before it is read.
    let waits = refused.clone();
    let room = move || {
        let refused = waits.clone();
        async move { drop(refused.reserve().await) }
    };
    let heard = subscribers.clone();
    let read = session_stream::follow(open, max_event, room, move |d| {
        let Some(questions) = questions.upgrade() else {
            return false;
        };
        match questions.offer(d.as_bytes()) {
            Offered::Taken => {}
            Offered::Left => {
                learn(&learns, d.as_bytes());
                let announced = subscribers.upgrade().is_some_and(|s| s.offer(d.as_bytes()));
                if !announced {
                    tracing::debug!(
                        "the server sent a message on the bridged session's own stream that no call waits for; dropped"
                    );
                }
            }
            Offered::Ambiguous(refusal) => {
                let _ = refused.try_send(refusal);
            }
        }
        true
    });
    if let (sse::Read::Overflowed, ()) = tokio::join!(read, answer) {
        tracing::warn!(
            "an event on a bridged session's own stream is over max_sse_event_bytes; the rest of that stream is not read"
        );
    }
    if let Some(s) = heard.upgrade() {
        s.deafen();
    }
}

impl HttpBridge {
    /// Ends the `subscriptions/listen` streams of every session on purpose (toolgate shuts
    /// down), so that none holds its connection open until the grace period is over.
    pub(crate) fn end_subscriptions(&self) {
        for session in self.sessions.locked().values() {
            session.subscribers.close();
        }
        self.closing.send_replace(true);
    }

    /// Told when toolgate shuts down ([`Self::end_subscriptions`]).
    pub(crate) fn closing(&self) -> tokio::sync::watch::Receiver<bool> {
        self.closing.subscribe()
    }

    /// Whether a 2026-07-28 request may go through a session of toolgate's: not when the
    /// server was found to speak 2026-07-28 itself (nothing of the client's envelope is then
    /// read for a handshake).
    pub fn may_bridge(&self) -> bool {
        self.decided() != Some(false)
    }

    /// A 2026-07-28 client's retry of a round (`upstream::rounds`): its answer goes to the
    /// server's question, in the session the question came in, and the rest of the server's
    /// stream is handed back to answer the retry.
    pub async fn resume(
        &self,
        up: &HttpUpstream,
        retry: &Retry,
        key: ScopeKey,
        wait: crate::net::client::Wait,
    ) -> Result<Parked, Unresumed> {
        let (parked, result) = self.rounds.answered(retry, key)?;
        let mut headers = parked.rest.session.clone();
        headers.remove(mcp::METHOD_HEADER);
        headers.remove(mcp::NAME_HEADER);
        let answer = Bytes::from(answer_to(&parked.asked, result));
        up.http
            .send(http::Method::POST, headers, answer, wait)
            .await
            .map_err(Unresumed::Unavailable)?;
        Ok(parked)
    }

    /// What [`Self::session`] gives for scope `key` when the answer is at hand, without a
    /// word to the server: `Some(None)` when the server needs no bridge, `Some(session)` when
    /// it is open; `None` when only [`Self::session`] can tell.
    pub fn session_at_hand(&self, key: ScopeKey) -> Option<Option<Arc<Session>>> {
        match self.decided() {
            Some(false) => Some(None),
            Some(true) => self.sessions.locked().get(&key).cloned().map(Some),
            None => None,
        }
    }

    /// The session a 2026-07-28 request of credential `key` goes through, or `None` when the
    /// upstream speaks 2026-07-28 itself (or could not be asked: the request then goes as it
    /// came, and its own answer tells the client what is wrong).
    pub async fn session(
        &self,
        up: &Arc<HttpUpstream>,
        client: ClientHeaders<'_>,
        (key, declared): (ScopeKey, &Declared),
        gw: &Arc<Gateway>,
        limits: &Limits,
    ) -> Option<Arc<Session>> {
        let ids = || gw.next_id();
        if let Some(at_hand) = self.session_at_hand(key) {
            return at_hand;
        }
        let stripe = (key.context as usize ^ key.upstream as usize) % OPENING_STRIPES;
        let _turn = self.opening[stripe].lock().await;
        if let Some(at_hand) = self.session_at_hand(key) {
            return at_hand;
        }
        if self.decided().is_none() {
            // Boxed, as the opening below: rare, and large next to a request's future.
            let decided = Box::pin(self.ask_era(up, client, &ids(), limits)).await?;
            self.era.decide(decided);
            if let Some(at_hand) = self.session_at_hand(key) {
                return at_hand;
            }
        }
        let (learns, id) = ((Arc::downgrade(gw), key), ids());
        let opening = self.open(up, client.0, &id, (declared, learns), limits);
        let opened = Arc::new(Box::pin(opening).await?);
        let mut sessions = self.sessions.locked();
        // Credentials come from clients: past the bound, one session is forgotten to make
        // room (and ended once its requests are done), and its credential's next request
        // opens another.
        if sessions.len() >= MAX_SESSIONS
            && !sessions.contains_key(&key)
            && let Some(old) = sessions.keys().next().copied()
        {
            sessions.remove(&old);
        }
        Some(sessions.entry(key).or_insert(opened).clone())
    }

    /// Ends every session toolgate holds with the server (at shutdown, once the clients'
    /// requests are done), all at once.
    pub(crate) async fn end_sessions(&self) {
        let sessions: Vec<_> = self.sessions.locked().drain().map(|(_, s)| s).collect();
        futures_util::future::join_all(sessions.iter().map(|s| s.end())).await;
    }

    /// After the server refused a handshake-era client's `initialize`: when it answers
    /// `server/discover`, it speaks only 2026-07-28, and this is the `initialize` result to
    /// give the client, with the session id toolgate keeps for it.
    pub async fn reverse(
        &self,
        up: &HttpUpstream,
        client: ClientHeaders<'_>,
        params: Option<&RawValue>,
        id: &str,
        limits: &Limits,
    ) -> Option<(String, serde_json::Value)> {
        let discovered = discover(up, client, id, limits).await.ok()?;
        tracing::info!("the upstream speaks only 2026-07-28; bridging its handshake-era client");
        let result = Reverse::initialize_result(&discovered, params);
        // The edge looks sessions up by this prefix only (`edge::reversed_session`).
        let session = format!("toolgate-bridged-{id}");
        let mut reversed = self.reversed.locked();
        if reversed.len() >= MAX_SESSIONS
            && let Some(old) = reversed.keys().next().cloned()
        {
            reversed.remove(&old);
        }
        reversed.insert(session.clone(), Arc::new(Reverse::new(params)));
        Some((session, result))
    }

    /// The bridged session a handshake-era client's `Mcp-Session-Id` names, if it is one.
    pub fn reversed(&self, session: &str) -> Option<Arc<Reverse>> {
        self.reversed.locked().get(session).cloned()
    }

    /// The client ended its bridged session (DELETE); `false` when it was none.
    pub fn end_reversed(&self, session: &str) -> bool {
        self.reversed.locked().remove(session).is_some()
    }

    /// A handshake-era client's request made into a 2026-07-28 one: no session, the
    /// 2026-07-28 version and the headers it mirrors from the body.
    pub fn modern_headers(headers: &mut HeaderMap, m: &crate::jsonrpc::Message<'_>) {
        headers.remove(mcp::SESSION_ID);
        crate::transport::modern::mirror(headers, m);
    }

    /// After an answer (`status`) to a request sent with `headers` in toolgate's session for
    /// `key`: when the server no longer knows the session ([`session_lost`]), it is
    /// forgotten, and this is the error the request gets. One policy for toolgate's sessions,
    /// whichever front sent the request.
    pub async fn lost_session(
        &self,
        up: &HttpUpstream,
        status: StatusCode,
        headers: &HeaderMap,
        key: ScopeKey,
        limits: &Limits,
    ) -> Option<UpstreamError> {
        session_lost(up, status, headers, limits)
            .await
            .then(|| self.lost(key, headers.get(mcp::SESSION_ID)))
    }

    /// The server ended session `id` of credential `key` (HTTP 404): the next request opens
    /// another (unless one already has). A 2026-07-28 client has no session to lose, so the
    /// request that met the 404 gets the returned error, which says it may retry.
    fn lost(&self, key: ScopeKey, id: Option<&HeaderValue>) -> UpstreamError {
        let mut sessions = self.sessions.locked();
        if let Some(s) = sessions.get(&key)
            && s.id.as_ref() == id
        {
            s.ending.locked().take();
            sessions.remove(&key);
        }
        UpstreamError::Unreachable(
            "the tool server ended the session toolgate bridges this client through; retry the request"
                .into(),
        )
    }

    /// The session already open for credential `key`, for what a bridged 2026-07-28 client
    /// sends that is not a request (a cancellation, an answer to the server): it belongs in
    /// the session its requests went through, and opens none.
    pub fn existing(&self, key: ScopeKey) -> Option<Arc<Session>> {
        if self.decided() != Some(true) {
            return None;
        }
        self.sessions.locked().get(&key).cloned()
    }

    /// Whether the upstream speaks only the handshake, while the last answer that decided it
    /// is recent: a server is upgraded, or a deployment rolls back, so the question is asked
    /// again after [`ERA_DECIDED_FOR`].
    fn decided(&self) -> Option<bool> {
        self.era.at(EraDecision::now())
    }

    /// `Some(true)`: handshake only. `None`: the answer decided nothing.
    async fn ask_era(
        &self,
        up: &HttpUpstream,
        client: ClientHeaders<'_>,
        id: &str,
        limits: &Limits,
    ) -> Option<bool> {
        match discover(up, client, id, limits).await {
            Ok(_) => Some(false),
            // It read a request outside any session and answered it: whatever it thinks of
            // `server/discover`, it serves such requests, and they go to it as they are.
            Err(Unresulted::Refused(why)) => {
                tracing::debug!(answer = %why, "server/discover refused inside a JSON-RPC answer; requests go as they are");
                Some(false)
            }
            Err(Unresulted::Status(status @ (400 | 404 | 405))) => {
                tracing::info!(
                    status,
                    "the upstream does not speak 2026-07-28; bridging its clients over the 2025-11-25 handshake"
                );
                Some(true)
            }
            Err(e) => {
                tracing::debug!(error = %e, "server/discover decided nothing");
                None
            }
        }
    }

    /// Opens a session for a 2026-07-28 client that says `declared` of itself, whose
    /// capabilities and name the server reads as a handshake client's.
    async fn open(
        &self,
        up: &Arc<HttpUpstream>,
        client: &HeaderMap,
        id: &str,
        (declared, learns): (&Declared, Learns),
        limits: &Limits,
    ) -> Option<Session> {
        let mut headers = own_request(client);
        headers.remove(mcp::METHOD_HEADER);
        headers.remove(mcp::PROTOCOL_VERSION);
        let opening = HttpSession::new(up, headers, limits);
        let params = declared.initialize_params();
        let init = match own::handshake(&opening, id, Some(&params)).await {
            Ok(init) => init,
            Err(why) => {
                warn_at_rate!(self.refused, "bridge_session_refused", { error = %why, },
                    "could not open a session with the upstream for a 2026-07-28 client; its request goes as it came");
                return None;
            }
        };
        let headers = opening.into_headers();
        // The session's own stream, opened at once: a server asks there from the start.
        let (questions, subscribers) = (Arc::default(), Arc::default());
        let mut ending = Ending {
            up: Arc::downgrade(up),
            headers: headers.clone(),
        };
        ending.headers.remove(CONTENT_TYPE);
        ending.headers.remove(ACCEPT);
        let mut listen = headers.clone();
        listen.remove(CONTENT_TYPE);
        listen.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        let heard = (
            Arc::downgrade(&questions),
            Arc::downgrade(&subscribers),
            learns,
        );
        let read = read_session_stream(Arc::downgrade(up), listen, heard, limits.clone());
        Some(Session {
            id: headers.get(mcp::SESSION_ID).cloned(),
            version: headers
                .get(mcp::PROTOCOL_VERSION)
                .cloned()
                .unwrap_or_else(|| HeaderValue::from_static(mcp::LEGACY_VERSION)),
            init,
            questions,
            multiplexed: Arc::default(),
            subscribers,
            _stream: SessionStream(tokio::spawn(read)),
            ending: Mutex::new(
                ending
                    .headers
                    .contains_key(mcp::SESSION_ID)
                    .then_some(ending),
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_era_probe_carries_only_toolgates_headers_and_the_credential() {
        let mut client = HeaderMap::new();
        client.insert(
            http::header::AUTHORIZATION,
            HeaderValue::from_static("Bearer t"),
        );
        client.insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        client.insert(
            http::header::EXPECT,
            HeaderValue::from_static("100-continue"),
        );
        client.insert(mcp::SESSION_ID, HeaderValue::from_static("s"));
        client.insert("x-request-id", HeaderValue::from_static("r"));
        client.append(http::header::COOKIE, HeaderValue::from_static("a=1"));
        client.append(http::header::COOKIE, HeaderValue::from_static("b=2"));
        client.insert("x-api-key", HeaderValue::from_static("k1"));
        let probe = probe_headers(&client, None);
        let mut names: Vec<&str> = probe.keys().map(|k| k.as_str()).collect();
        names.sort_unstable();
        assert_eq!(
            names,
            [
                "accept",
                "authorization",
                "content-type",
                "cookie",
                "x-api-key"
            ]
        );
        assert_eq!(probe.get_all(http::header::COOKIE).iter().count(), 2);
        // The server's own credential, whatever its header's name, with the client's gone
        // as `[auth]` leaves it.
        let mut client = HeaderMap::new();
        client.insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        let key = (
            http::HeaderName::from_static("x-api-key"),
            HeaderValue::from_static("k"),
        );
        let probe = probe_headers(&client, Some(&key));
        let mut names: Vec<&str> = probe.keys().map(|k| k.as_str()).collect();
        names.sort_unstable();
        assert_eq!(names, ["accept", "content-type", "x-api-key"]);
    }

    #[test]
    fn an_era_decided_is_asked_again_after_a_while() {
        let bridge = HttpBridge::default();
        assert_eq!(bridge.decided(), None);
        bridge.era.decide(true);
        assert_eq!(bridge.decided(), Some(true));
        let at = bridge.era.at.load(std::sync::atomic::Ordering::Relaxed);
        let window = ERA_DECIDED_FOR.as_millis() as u64;
        assert_eq!(bridge.era.at(at + window - 1), Some(true));
        assert_eq!(bridge.era.at(at + window), None);
        bridge.era.decide(false);
        assert_eq!(bridge.decided(), Some(false));
    }

    #[test]
    fn toolgate_s_own_requests_do_not_claim_the_client_s_body_encoding() {
        let mut client = HeaderMap::new();
        client.insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        client.insert("authorization", HeaderValue::from_static("Bearer t"));
        client.insert(mcp::SESSION_ID, HeaderValue::from_static("s"));
        let own = own_request(&client);
        assert!(own.get(CONTENT_ENCODING).is_none());
        assert_eq!(own["authorization"], "Bearer t");
        assert!(own.get(mcp::SESSION_ID).is_none());
        assert_eq!(own[CONTENT_TYPE], "application/json");
    }
}
