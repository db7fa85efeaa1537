//! `toolgate stdio --upstream URL`: a desktop client on stdin/stdout, a Streamable HTTP server
//! upstream. toolgate is the HTTP client: it keeps the session (`Mcp-Session-Id` and the
//! protocol version from `initialize`), sends each message as a POST, streams SSE answers out
//! line by line as they arrive, and opens the session's GET stream for what the server sends
//! on its own. The rules are the pipeline's, as everywhere.

use crate::catalog::ScopeKey;
use crate::gateway::{Gateway, Target};
use crate::jsonrpc::{self, Body as Parsed};
use crate::mcp::{self, Era};
use crate::pipeline::answer::Answer;
use crate::pipeline::bridge::{self, Reverse};
use crate::pipeline::guard::{self, ListFailed, Lister};
use crate::pipeline::step::{self, Bridging, Sender, Step};
use crate::pipeline::{self, Kind, Pending, UpstreamError};
use crate::transport::sse::{self, Split, Splitter};
use crate::transport::stdio::{Out, next_message, spawn_writer};
use crate::transport::upstream::http_bridge::{self, HttpBridge, Session as BridgeSession};
use crate::transport::upstream::http_client::exchange;
use crate::transport::upstream::http_client::{self, Collected, HttpUpstream};
use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE, HeaderValue};
use http::{HeaderMap, Method};
use http_body_util::BodyExt;
use serde_json::value::RawValue;
use std::sync::{Arc, Mutex};
use tokio::io::BufReader;
use tokio::sync::mpsc::UnboundedSender;

/// The session toolgate holds with the upstream for its one client.
#[derive(Default)]
struct Session {
    id: Option<HeaderValue>,
    version: Option<HeaderValue>,
    /// The client's `initialize` params, to open a new session with when the server has
    /// lost this one (restarted, or expired it).
    init_params: Option<Box<RawValue>>,
}

struct Ctx {
    gw: Arc<Gateway>,
    target: Arc<Target>,
    up: HttpUpstream,
    session: Mutex<Session>,
    /// Set when the server refused the client's `initialize` and answered
    /// `server/discover`: it speaks only 2026-07-28, and the client is bridged to it.
    reverse: Mutex<Option<Arc<Reverse>>>,
    out: UnboundedSender<Out>,
}

impl Ctx {
    fn timeout(&self) -> crate::transport::upstream::http_client::Wait {
        (&self.gw.config.limits).into()
    }

    fn headers(&self) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        h.insert(
            ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        let s = self.session.lock().unwrap_or_else(|p| p.into_inner());
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

    fn key(&self) -> ScopeKey {
        let s = self.session.lock().unwrap_or_else(|p| p.into_inner());
        self.gw
            .scope(&self.target, s.id.as_ref().map(|v| v.as_bytes()), None)
    }

    fn write(&self, line: Vec<u8>) {
        let _ = self.out.send(Out::Line(line));
    }

    /// A 404 on a session means the server no longer knows it. The client of a stdio pipe
    /// cannot see that status, so toolgate opens a new session itself, with the client's
    /// own `initialize` params; the answer to that stays here. `false`: no new session.
    async fn reinitialize(&self) -> bool {
        let (params, lost) = {
            let mut s = self.session.lock().unwrap_or_else(|p| p.into_inner());
            (s.init_params.clone(), s.id.take())
        };
        let (Some(params), Some(_)) = (params, lost) else {
            return false;
        };
        let id = self.gw.next_id();
        let request = serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": params});
        let body = Bytes::from(request.to_string());
        let mut headers = self.headers();
        headers.remove(mcp::PROTOCOL_VERSION);
        let limits = &self.gw.config.limits;
        let Ok((answer_headers, _)) = exchange(&self.up, &headers, body, &id, limits).await else {
            return false;
        };
        let Some(sid) = answer_headers.get(mcp::SESSION_ID).cloned() else {
            return false;
        };
        self.session.lock().unwrap_or_else(|p| p.into_inner()).id = Some(sid);
        let note = serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let _ = self
            .up
            .send(
                Method::POST,
                self.headers(),
                Bytes::from(note.to_string()),
                self.timeout(),
            )
            .await;
        tracing::info!(upstream = %self.target.name, "the server lost the session; a new one is open");
        true
    }
}

struct UpLister<'a> {
    ctx: &'a Ctx,
    /// The era of the call it lists for: a 2026-07-28 listing has no session and the
    /// mirrored headers.
    era: Era,
    /// toolgate's session for a bridged 2026-07-28 client.
    session: Option<&'a BridgeSession>,
    /// A handshake-era client bridged to a server that speaks only 2026-07-28.
    reverse: Option<&'a Reverse>,
}

impl Lister for UpLister<'_> {
    type Relay = Box<axum::response::Response>;

    async fn list(
        &self,
        request: Bytes,
        id: &str,
    ) -> Result<Box<RawValue>, ListFailed<Self::Relay>> {
        let mut headers = self.ctx.headers();
        let request = http_bridge::listing(
            request,
            &mut headers,
            self.session,
            self.reverse,
            self.era == Era::Modern,
        );
        exchange(
            &self.ctx.up,
            &headers,
            request,
            id,
            &self.ctx.gw.config.limits,
        )
        .await
        .map(|(_, r)| r)
    }
}

pub async fn run(gw: Arc<Gateway>, url: &str) -> i32 {
    let uri = match crate::config::parse_upstream_url(url) {
        Ok(u) => u,
        Err(e) => {
            tracing::error!("{e}");
            return 1;
        }
    };
    let target = gw.targets[0].clone();
    let up = match HttpUpstream::new(uri, &gw.config.upstream_tls) {
        Ok(up) => up,
        Err(e) => {
            tracing::error!("{e}");
            return 1;
        }
    };
    let (out, writer) = spawn_writer();
    let ctx = Arc::new(Ctx {
        gw: gw.clone(),
        target,
        up,
        session: Mutex::default(),
        reverse: Mutex::default(),
        out: out.clone(),
    });
    let limits = gw.config.limits.clone();
    let mut stdin = BufReader::new(tokio::io::stdin());
    let mut tasks = tokio::task::JoinSet::new();
    let mut stream: Option<tokio::task::JoinHandle<()>> = None;
    // SIGTERM ends the session as stdin's end does (see `stdio::Terminate`).
    let mut term = crate::transport::stdio::Terminate::new();
    loop {
        let next = tokio::select! {
            () = term.recv() => break,
            m = next_message(&mut stdin, limits.max_body_bytes, &out) => m,
        };
        let Some(line) = next else {
            break;
        };
        // `initialize` must finish first: its answer carries the session the rest need.
        let is_initialize = matches!(jsonrpc::parse(&line), Ok(Parsed::Single(ref m)) if m.method() == Some("initialize"));
        let c = ctx.clone();
        if is_initialize {
            from_client(&c, line).await;
            let get = ctx.clone();
            if let Some(old) =
                stream.replace(tokio::spawn(async move { server_stream(&get).await }))
            {
                old.abort();
            }
        } else {
            tasks.spawn(async move { from_client(&c, line).await });
        }
        while tasks.try_join_next().is_some() {}
    }
    // The client is gone: requests in flight still get their answers (each is bounded by the
    // upstream timeout), then the session ends.
    if let Some(s) = stream {
        s.abort();
    }
    while tasks.join_next().await.is_some() {}
    let headers = ctx.headers();
    if headers.contains_key(mcp::SESSION_ID) {
        let _ = ctx
            .up
            .send(Method::DELETE, headers, Bytes::new(), ctx.timeout())
            .await;
    }
    let _ = out.send(Out::Exit(0));
    drop(out);
    drop(ctx);
    writer.await.unwrap_or(1)
}

async fn from_client(ctx: &Ctx, line: Bytes) {
    let mut m = match jsonrpc::parse(&line) {
        Ok(Parsed::Single(m)) => m,
        Ok(Parsed::Batch(msgs)) => {
            // Always refused here: over stdio each line is one message.
            if let Err(why) = step::batch(&msgs, false) {
                ctx.write(jsonrpc::error_response(
                    None,
                    jsonrpc::INVALID_REQUEST,
                    why,
                    None,
                ));
            }
            return;
        }
        Err(rejection) => {
            return ctx.write(jsonrpc::error_response(
                None,
                rejection.code(),
                &rejection.message(),
                None,
            ));
        }
    };
    if guard::refuse_call_notification(&ctx.gw, &ctx.target, &m).is_some() {
        // A notification gets no answer on stdio; it is counted and goes no further.
        return;
    }
    let era = Era::detect(None, m.version_text());
    // Before the guard takes the params: the 2026-07-28 headers mirror them.
    let mut headers = ctx.headers_for(&m, era);
    let key = ctx.key();
    let client = ctx.gw.client(None);
    // A 2026-07-28 request to a server that speaks only the handshake goes through toolgate's
    // session with it (docs/contract.md §5, "Eras bridged").
    let session = match era == Era::Modern && m.is_request() {
        true => {
            let limits = &ctx.gw.config.limits;
            let ids = || ctx.gw.next_id();
            ctx.up
                .bridge
                .session(&ctx.up, &HeaderMap::new(), key, ids, limits)
                .await
        }
        false => None,
    };
    let reverse = match era {
        Era::Legacy => ctx
            .reverse
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone(),
        Era::Modern => None,
    };
    if reverse.is_some() {
        HttpBridge::modern_headers(&mut headers, &m);
    }
    let lister = UpLister {
        ctx,
        era,
        session: session.as_deref(),
        reverse: reverse.as_deref(),
    };
    let bridging = Bridging::of(session.as_ref().map(|s| &*s.init), reverse.as_deref());
    let sender = Sender {
        target: &ctx.target,
        key,
        era,
        client,
    };
    let (body, pending) =
        match step::decide(&ctx.gw, sender, &mut m, &line, bridging, &lister).await {
            Step::Forward { body, pending } => (body, pending),
            Step::Answer(a) => return ctx.write(a.body),
            Step::Relay(resp) => {
                let e = UpstreamError::Unreachable(format!(
                    "the server refused the listing with HTTP {}",
                    resp.status()
                ));
                return ctx.write(Answer::upstream_failed(era, m.id, true, &e).body);
            }
            Step::Consumed => return,
        };
    if let Some(session) = &session {
        session.headers(&mut headers);
    }
    let is_initialize = m.method() == Some("initialize");
    let is_call = matches!(pending.kind, Kind::Call { .. });
    if is_initialize && let Some(p) = m.raw_params() {
        ctx.session
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .init_params = Some(p.to_owned());
    }
    let mut sent = ctx
        .up
        .send(Method::POST, headers.clone(), body.clone(), ctx.timeout())
        .await;
    if session.is_some() && matches!(&sent, Ok(r) if r.status() == http::StatusCode::NOT_FOUND) {
        sent = Err(ctx.up.bridge.lost(key));
    }
    // The session is gone upstream: a new one, and the message once more.
    if !is_initialize
        && matches!(&sent, Ok(r) if r.status() == http::StatusCode::NOT_FOUND)
        && ctx.reinitialize().await
    {
        sent = ctx
            .up
            .send(Method::POST, ctx.headers_for(&m, era), body, ctx.timeout())
            .await;
    }
    let resp = match sent {
        Ok(r) => r,
        Err(e) => {
            if pending.id.is_some() {
                ctx.write(Answer::upstream_failed(era, pending.id.as_deref(), is_call, &e).body);
            }
            return;
        }
    };
    if is_initialize
        && resp.status().is_client_error()
        && let Some(id) = pending.id.as_deref()
    {
        // Refused: a server that answers `server/discover` speaks only 2026-07-28, and the
        // client is bridged to it (docs/contract.md §5, "Eras bridged the other way").
        let limits = &ctx.gw.config.limits;
        let own_id = ctx.gw.next_id();
        let bridge = &ctx.up.bridge;
        if let Some((session, result)) = bridge
            .reverse(&ctx.up, &HeaderMap::new(), m.raw_params(), &own_id, limits)
            .await
        {
            *ctx.reverse.lock().unwrap_or_else(|p| p.into_inner()) = bridge.reversed(&session);
            return ctx.write(jsonrpc::result_response(id, &result));
        }
    }
    if is_initialize && let Some(sid) = resp.headers().get(mcp::SESSION_ID) {
        ctx.session.lock().unwrap_or_else(|p| p.into_inner()).id = Some(sid.clone());
    }
    let status = resp.status();
    let is_sse = resp
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let mut answered = false;
    let deliver = |bytes: &[u8], answered: &mut bool| {
        let Ok(Parsed::Single(am)) = jsonrpc::parse(bytes) else {
            return;
        };
        if is_initialize
            && let Some(v) = am
                .result
                .and_then(|r| serde_json::from_str::<serde_json::Value>(r.get()).ok())
                .and_then(|r| r["protocolVersion"].as_str().map(str::to_owned))
            && let Ok(v) = HeaderValue::from_str(&v)
        {
            ctx.session
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .version = Some(v);
        }
        if *answered && am.method.is_none() {
            // One answer per request: a second response (an `id: null` error next to the
            // real answer) would answer it twice.
            tracing::warn!(upstream = %ctx.target.name, "a second answer to one request; dropped");
            return;
        }
        // An error that names no request (a 4xx refusal of the POST itself) is this
        // request's answer: a stdio client matches answers by id, so it gets the request's.
        if let (Some(err), Some(id)) = (am.error, pending.id.as_deref())
            && am.method.is_none()
            && am.id.is_none_or(|i| i.get() == "null")
        {
            *answered = true;
            let e: serde_json::Value = serde_json::from_str(err.get()).unwrap_or_default();
            let code = e["code"].as_i64().unwrap_or(jsonrpc::INTERNAL_ERROR);
            let message = e["message"]
                .as_str()
                .unwrap_or("the server refused the request");
            return ctx.write(jsonrpc::error_response(
                Some(id),
                code,
                message,
                e.get("data"),
            ));
        }
        let seen = pipeline::observe(&ctx.gw, &pending, &am);
        *answered |= seen.answers;
        ctx.write(match (seen.replacement, pending.completion()) {
            (Some(a), _) => a.body,
            (None, Some(c)) => bridge::answer(Bytes::copy_from_slice(bytes), c).to_vec(),
            (None, None) => bytes.to_vec(),
        });
    };
    let mut body = resp.into_body();
    if is_sse {
        let mut splitter = Splitter::new(ctx.gw.config.limits.max_sse_event_bytes);
        while let Some(Ok(frame)) = body.frame().await {
            let Ok(data) = frame.into_data() else {
                continue;
            };
            splitter.push(&data);
            while let Some(Split::Event(ev)) = splitter.next_event() {
                if let Some(d) = sse::data(&ev).filter(|d| !d.is_empty()) {
                    deliver(d.as_bytes(), &mut answered);
                }
            }
        }
    } else if let Ok(Collected::Whole(bytes)) =
        http_client::collect_upstream(body, ctx.gw.config.limits.max_response_bytes).await
        && !bytes.is_empty()
    {
        deliver(&bytes, &mut answered);
    }
    if !answered && pending.id.is_some() {
        let e = UpstreamError::NotJsonRpc(format!(
            "HTTP {} without an answer to the request",
            status.as_u16()
        ));
        ctx.write(Answer::upstream_failed(era, pending.id.as_deref(), is_call, &e).body);
    }
}

/// The session's GET stream: what the server sends on its own (a 405 means it has none).
async fn server_stream(ctx: &Ctx) {
    let mut headers = ctx.headers();
    if !headers.contains_key(mcp::SESSION_ID) {
        return;
    }
    headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
    let Ok(resp) = ctx
        .up
        .send(Method::GET, headers, Bytes::new(), ctx.timeout())
        .await
    else {
        return;
    };
    if !resp.status().is_success() {
        return;
    }
    let any = Pending {
        id: None,
        kind: Kind::Other,
        era: Era::Legacy,
        key: ctx.key(),
        target: ctx.target.clone(),
        client: None,
        bridged: None,
    };
    let mut splitter = Splitter::new(ctx.gw.config.limits.max_sse_event_bytes);
    let mut body = resp.into_body();
    while let Some(Ok(frame)) = body.frame().await {
        let Ok(data) = frame.into_data() else {
            continue;
        };
        splitter.push(&data);
        while let Some(Split::Event(ev)) = splitter.next_event() {
            if let Some(d) = sse::data(&ev).filter(|d| !d.is_empty())
                && let Ok(Parsed::Single(m)) = jsonrpc::parse(d.as_bytes())
            {
                let seen = pipeline::observe(&ctx.gw, &any, &m);
                ctx.write(
                    seen.replacement
                        .map_or_else(|| d.as_bytes().to_vec(), |a| a.body),
                );
            }
        }
    }
}
