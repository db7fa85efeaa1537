//! The Streamable HTTP transport: one route per upstream.
//!
//! Processing phases, in order, for a POST:
//! 1. `origin`: DNS-rebinding protection (403).
//! 2. body read under the size limit (413); envelope parse (`-32700` / `-32600`, 400).
//! 3. `pipeline::guard` for `tools/call`: answered here or forwarded (docs/contract.md §1).
//! 4. forward; the answer goes back through `answers` (learn, rewrite, never hang).
//!
//! GET (the server's stream) and DELETE (end of session) are forwarded; their answers are
//! inspected the same way.

pub(crate) mod answers;
pub mod layer;
pub(crate) mod origin;
mod reply;
mod request;
mod stdio_children;
pub mod tls;
mod well_known;

use crate::auth::Refusal;
use crate::config::parse_upstream_url;
use crate::gateway::{Gateway, Live};
use crate::jsonrpc::{self, Body as Parsed};
use crate::mcp::{self, Era};
use crate::metrics;
use crate::pipeline::bridge::{self, Bridged, Completion, Reverse};
use crate::pipeline::guard::{self, Call, Decision, ListFailed, Lister};
use crate::pipeline::policy::Client;
use crate::pipeline::{self, Kind, Pending};
use crate::telemetry;
use crate::transport::runtime::conn_timers::{ConnTimers, InService};
use crate::transport::upstream::children::StdioPool;
use crate::transport::upstream::http_bridge::{self, HttpBridge, Session};
use crate::transport::upstream::http_client::{self, HttpUpstream, ReadError};
use axum::response::Response;
use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE, HeaderName, HeaderValue, WWW_AUTHENTICATE};
use http::request::Parts;
use http::{HeaderMap, Method, StatusCode};
use request::{Context, Endpoint, Note, Route, Upstream};
use serde_json::value::RawValue;
use std::sync::Arc;
use std::time::Instant;

type Request = http::Request<hyper::body::Incoming>;

/// The gateway's HTTP service, a plain hyper service: a path match over a handful of
/// endpoints costs less than a general router, and this runs on every message.
#[derive(Clone)]
pub struct App {
    live: Live,
    endpoints: Arc<[Endpoint]>,
    pools: Arc<[Arc<StdioPool>]>,
}

impl App {
    /// The service for the gateway in force; `Err` when an upstream's TLS settings are
    /// unusable (a server name no certificate can carry).
    pub fn new(live: &Live) -> Result<App, String> {
        let gw = live.load();
        let mut endpoints = Vec::new();
        let mut pools = Vec::new();
        for (index, target) in gw.targets.iter().enumerate() {
            let up = if target.command.is_empty() {
                let uri = parse_upstream_url(&target.url).map_err(|e| e.0)?;
                let up = HttpUpstream::new(uri, &target.tls)
                    .map_err(|e| format!("upstream {}: {e}", target.name))?;
                Upstream::Http(Arc::new(up))
            } else {
                let pool = StdioPool::new(live.clone(), index);
                pools.push(pool.clone());
                Upstream::Stdio(pool)
            };
            endpoints.push(Endpoint {
                path: target.path.clone(),
                index,
                up,
            });
        }
        Ok(App {
            live: live.clone(),
            endpoints: endpoints.into(),
            pools: pools.into(),
        })
    }

    pub async fn call(&self, req: Request, peer: std::net::IpAddr) -> Response {
        let path = req.uri().path();
        // Before any routing decision, on every path: a request that may not reach toolgate
        // may not reach what lies behind it either.
        if let Err(why) = plain_path(path) {
            return reply::transport(StatusCode::BAD_REQUEST, jsonrpc::INVALID_REQUEST, why);
        }
        let gw = self.live.load();
        if let Err(why) = gw.origins.check(req.headers()) {
            return reply::transport(StatusCode::FORBIDDEN, jsonrpc::INVALID_REQUEST, why);
        }
        if path.starts_with("/.well-known/") {
            let (parts, _) = req.into_parts();
            return crate::transport::edge::well_known::serve(
                &gw,
                &self.endpoints,
                &parts.method,
                parts.uri.path(),
                parts.uri.query(),
                parts.headers,
            )
            .await;
        }
        let Some(ep) = self.endpoints.iter().find(|e| e.path == path) else {
            return reply::transport(
                StatusCode::NOT_FOUND,
                jsonrpc::INVALID_REQUEST,
                "Not found: no MCP endpoint at this path",
            );
        };
        let rt = Route {
            target: &gw.targets[ep.index],
            gw: &gw,
            up: &ep.up,
            peer,
        };
        handle(&rt, req).await
    }

    /// Stops every stdio child (at shutdown).
    pub async fn close(&self) {
        for p in self.pools.iter() {
            p.close_all().await;
        }
    }
}

/// Serves the gateway until `shutdown` resolves, then lets in-flight requests and streams
/// finish (the caller bounds how long) and stops the stdio children.
pub async fn serve(
    listener: tokio::net::TcpListener,
    live: Live,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    use hyper_util::rt::{TokioExecutor, TokioIo};
    let app = App::new(&live).map_err(std::io::Error::other)?;
    let tls = match &live.load().config.tls {
        Some(t) => {
            Some(crate::transport::edge::tls::Acceptor::new(t).map_err(std::io::Error::other)?)
        }
        None => None,
    };
    let drain = crate::transport::runtime::drain::Drain::new();
    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    // A connection holds a permit for its life; past the cap, clients wait in the listen
    // queue while the admin listener (its own accept loop) keeps answering.
    let permits = Arc::new(tokio::sync::Semaphore::new(connection_cap(
        live.load().config.limits.max_connections,
    )));
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            p = permits.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
            () = &mut shutdown => break,
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, addr)) => (stream, addr.ip()),
                Err(e) => {
                    // Out of descriptors or the like: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let limits = &live.load().config.limits;
        let timers = ConnTimers::new(limits.header_timeout, limits.idle_timeout);
        // Under TLS too: the handshake is timed like a request head.
        let io = timers.io(stream);
        // One handle per connection: cloning the shared `App` for each request would write
        // the reference counts that every connection's requests share.
        let app = Arc::new(app.clone());
        let service = hyper::service::service_fn(move |req: Request| {
            let app = app.clone();
            let in_service = timers.in_service();
            async move {
                let resp = app.call(req, peer).await;
                Ok::<_, std::convert::Infallible>(resp.map(|body| InServiceBody {
                    body,
                    _in_service: in_service,
                }))
            }
        });
        match &tls {
            None => {
                let conn = builder
                    .serve_connection(TokioIo::new(io), service)
                    .into_owned();
                let conn = drain.watch(conn);
                // Re-polled in place when it wakes itself: see `repoll`.
                tokio::spawn(crate::transport::runtime::repoll::Repoll::new(async move {
                    let _ = conn.await;
                    drop(permit);
                }));
            }
            Some(tls) => {
                let (acceptor, builder, drain) = (tls.current(), builder.clone(), drain.clone());
                tokio::spawn(crate::transport::runtime::repoll::Repoll::new(async move {
                    match acceptor.accept(io).await {
                        Ok(stream) => {
                            let conn = builder
                                .serve_connection(TokioIo::new(stream), service)
                                .into_owned();
                            let _ = drain.watch(conn).await;
                        }
                        Err(e) => tracing::debug!(error = %e, "TLS handshake with a client failed"),
                    }
                    drop(permit);
                }));
            }
        }
    }
    drop(listener);
    drain.shutdown().await;
    app.close().await;
    Ok(())
}

/// `limits.max_connections`, but never more than half the descriptor limit: upstream
/// connections, stdio children's pipes and the admin listener need descriptors too, and a
/// listener out of them stops answering everyone.
fn connection_cap(configured: usize) -> usize {
    use nix::sys::resource::{Resource, getrlimit};
    let budget = getrlimit(Resource::RLIMIT_NOFILE)
        .map(|(soft, _)| usize::try_from(soft / 2).unwrap_or(usize::MAX))
        .unwrap_or(usize::MAX)
        .max(16);
    if configured > budget {
        tracing::info!(
            configured,
            cap = budget,
            "limits.max_connections is over half the descriptor limit: capped"
        );
    }
    configured.min(budget).max(1)
}

/// A response body that keeps its request "in service" (see `conn_timers`) until it has
/// been sent or dropped, so a quiet stream is never taken for an idle connection.
struct InServiceBody {
    body: axum::body::Body,
    _in_service: InService,
}

impl http_body::Body for InServiceBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        std::pin::Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

async fn handle(rt: &Route<'_>, mut req: Request) -> Response {
    // The clock is read only for the access log; the metrics time the upstream alone.
    let started = rt.gw.config.log.access.then(Instant::now);
    let request_id = request_id(rt.gw, req.headers_mut());
    let trace = rt.gw.telemetry.as_ref().map(|t| {
        let h = req.headers();
        let header = |name| h.get(name).and_then(|v: &HeaderValue| v.to_str().ok());
        let parent =
            header(TRACEPARENT).and_then(|p| telemetry::Context::parse(p, header(TRACESTATE)));
        Box::new(telemetry::RequestTrace::begin(t, parent))
    });
    let session = trace
        .as_ref()
        .and_then(|_| req.headers().get(mcp::SESSION_ID).cloned());
    let version = trace
        .as_ref()
        .and_then(|_| req.headers().get(mcp::PROTOCOL_VERSION).cloned());
    let mut note = Note {
        client: None,
        method: "-",
        tool: None,
        outcome: "rejected",
        trace,
        validation: None,
    };
    let mut resp = route(rt, req, &mut note).await;
    resp.headers_mut().insert(REQUEST_ID, request_id.clone());
    if let Some(trace) = note.trace.take() {
        end_trace(rt, &note, *trace, resp.status(), session, version);
    }
    rt.gw
        .metrics
        .requests
        .inc(&[&rt.target.name, note.method, note.outcome]);
    if let Some(started) = started {
        tracing::info!(
            target: "toolgate::access",
            request_id = request_id.to_str().unwrap_or("-"),
            upstream = %rt.target.name,
            client = note.client.as_deref().unwrap_or("-"),
            method = note.method,
            tool = note.tool.as_deref().unwrap_or("-"),
            outcome = note.outcome,
            status = resp.status().as_u16(),
            latency_us = started.elapsed().as_micros() as u64,
            "request"
        );
    }
    resp
}

const TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");
const TRACESTATE: HeaderName = HeaderName::from_static("tracestate");

/// The server span of one request: named `{mcp.method.name} {target}` and carrying the
/// attributes of the OpenTelemetry conventions for MCP, toolgate's outcome, and never an
/// argument value.
fn end_trace(
    rt: &Route<'_>,
    note: &Note,
    trace: telemetry::RequestTrace,
    status: StatusCode,
    session: Option<HeaderValue>,
    version: Option<HeaderValue>,
) {
    use telemetry::Attr;
    let text = |v: &Option<HeaderValue>| {
        v.as_ref()
            .and_then(|v| v.to_str().ok())
            .map(|s| Attr::Str(s.to_owned()))
    };
    let mut attrs = vec![
        ("mcp.method.name", Attr::Str(note.method.to_owned())),
        ("toolgate.upstream", Attr::Str(rt.target.name.to_string())),
        ("toolgate.outcome", Attr::Str(note.outcome.to_owned())),
        (
            "http.response.status_code",
            Attr::Int(i64::from(status.as_u16())),
        ),
    ];
    if let Some(tool) = &note.tool {
        attrs.push(("gen_ai.tool.name", Attr::Str(tool.to_string())));
        attrs.push(("gen_ai.operation.name", Attr::Str("execute_tool".into())));
    }
    if let Some(v) = note.validation {
        attrs.push(("toolgate.validation", Attr::Str(v.to_owned())));
    }
    if let Some(id) = &trace.request_id {
        attrs.push(("jsonrpc.request.id", Attr::Str(id.clone())));
    }
    if let Some(s) = text(&session) {
        attrs.push(("mcp.session.id", s));
    }
    if let Some(v) = text(&version) {
        attrs.push(("mcp.protocol.version", v));
    }
    let failed = !matches!(note.outcome, "forwarded");
    if failed {
        // For a call toolgate refused, why: `rejected_invalid`, `unknown`, `denied`, ….
        let why = note
            .validation
            .filter(|_| note.outcome == "answered")
            .unwrap_or(note.outcome);
        attrs.push(("error.type", Attr::Str(why.to_owned())));
    }
    let name = match &note.tool {
        Some(tool) => format!("{} {tool}", note.method),
        None => note.method.to_owned(),
    };
    trace.finish(name, attrs, failed);
}

const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The client's `X-Request-Id` when it is a sane token, else a fresh one; either way it goes
/// upstream too, so one id follows the request through every log. One header value serves
/// the request, the response and the log.
fn request_id(gw: &Gateway, headers: &mut HeaderMap) -> HeaderValue {
    if let Some(v) = headers.get(&REQUEST_ID)
        && (1..=128).contains(&v.len())
        && v.as_bytes().iter().all(|b| b.is_ascii_graphic())
    {
        return v.clone();
    }
    let id = HeaderValue::from_maybe_shared(Bytes::from(gw.next_id()))
        .expect("minted ids are visible ASCII");
    headers.insert(REQUEST_ID, id.clone());
    id
}

/// Refuses a path that a server or proxy further on could read as another path: a `.` or
/// `..` segment, plain or percent-encoded, and an encoded `/` or `\` inside a segment.
/// Refused rather than normalised: no MCP client sends them, and a refusal cannot be
/// normalised differently by the next hop.
fn plain_path(path: &str) -> Result<(), &'static str> {
    for seg in path.split('/') {
        let lower = seg.to_ascii_lowercase();
        let decoded = lower.replace("%2e", ".");
        if decoded == "." || decoded == ".." || lower.contains("%2f") || lower.contains("%5c") {
            return Err("Bad Request: the path has a dot segment or an encoded separator");
        }
        if seg.contains('\\') {
            return Err("Bad Request: the path has a backslash");
        }
    }
    Ok(())
}

async fn route(rt: &Route<'_>, mut req: Request, note: &mut Note) -> Response {
    let identity = match &rt.gw.auth {
        None => None,
        Some(auth) => match auth.authenticate(req.headers(), &rt.target.path).await {
            Ok(identity) => {
                auth.to_upstream(req.headers_mut());
                Some(identity.name)
            }
            Err(refusal) => {
                note.outcome = if matches!(refusal, Refusal::InsufficientScope) {
                    "forbidden"
                } else {
                    "unauthorized"
                };
                let (status, challenge, message) = auth.challenge(&refusal, &rt.target.path);
                let mut r = reply::transport(status, jsonrpc::INVALID_REQUEST, &message);
                if let Ok(v) = HeaderValue::from_str(&challenge) {
                    r.headers_mut().insert(WWW_AUTHENTICATE, v);
                }
                return r;
            }
        },
    };
    note.client = identity.clone();
    let client = rt.gw.client(identity);
    match *req.method() {
        Method::POST => post(rt, req, client, note).await,
        Method::GET | Method::DELETE => bodiless(rt, req, client, note).await,
        _ => {
            let mut r = reply::transport(
                StatusCode::METHOD_NOT_ALLOWED,
                jsonrpc::INVALID_REQUEST,
                "Method not allowed: use POST, GET or DELETE",
            );
            r.headers_mut().insert(
                http::header::ALLOW,
                HeaderValue::from_static("GET, POST, DELETE"),
            );
            r
        }
    }
}

/// A trace context the client put in `params._meta` (`traceparent`, `tracestate`), as the
/// spec allows where there are no headers to carry it.
fn meta_trace(m: &jsonrpc::Message<'_>) -> Option<telemetry::Context> {
    #[derive(serde::Deserialize)]
    struct Meta {
        traceparent: Option<String>,
        tracestate: Option<String>,
    }
    #[derive(serde::Deserialize)]
    struct WithMeta {
        #[serde(rename = "_meta")]
        meta: Option<Meta>,
    }
    let meta: Meta = match &m.params {
        Some(jsonrpc::Params::Call(c)) => serde_json::from_str(c.meta?.get()).ok()?,
        Some(jsonrpc::Params::Raw(raw)) => serde_json::from_str::<WithMeta>(raw.get()).ok()?.meta?,
        None => return None,
    };
    telemetry::Context::parse(meta.traceparent.as_deref()?, meta.tracestate.as_deref())
}

async fn post(rt: &Route<'_>, req: Request, client: Option<Client>, note: &mut Note) -> Response {
    let (parts, body) = req.into_parts();
    let limit = rt.gw.config.limits.max_body_bytes;
    // A declared length over the limit is refused before any of the body is read.
    let bytes = match http_client::read_limited(body, limit).await {
        Ok(b) => b,
        Err(ReadError::TooLarge) => {
            return reply::transport(
                StatusCode::PAYLOAD_TOO_LARGE,
                jsonrpc::INVALID_REQUEST,
                &format!("Invalid Request: the body is over the {limit}-byte limit"),
            );
        }
        Err(ReadError::Broken(e)) => {
            return reply::transport(
                StatusCode::BAD_REQUEST,
                jsonrpc::PARSE_ERROR,
                &format!("Parse error: the body could not be read: {e}"),
            );
        }
    };
    let parsed = match jsonrpc::parse(&bytes) {
        Ok(p) => p,
        Err(rejection) => {
            return reply::transport(
                StatusCode::BAD_REQUEST,
                rejection.code(),
                &rejection.message(),
            );
        }
    };
    let ctx = Context::of(rt, &parts.headers, client);
    let mut m = match parsed {
        Parsed::Batch(msgs) => {
            if let Some(why) = guard::refuse_batch(&msgs) {
                return reply::transport(StatusCode::BAD_REQUEST, jsonrpc::INVALID_REQUEST, why);
            }
            note.method = "batch";
            if matches!(rt.up, Upstream::Stdio(_)) {
                return reply::transport(
                    StatusCode::BAD_REQUEST,
                    jsonrpc::INVALID_REQUEST,
                    "Invalid Request: batches are not supported in front of a stdio server",
                );
            }
            let pending = pending(rt, &ctx, None, Kind::Other, Era::Legacy);
            return forward(rt, parts, bytes.clone(), pending, ctx.has_session, note).await;
        }
        Parsed::Single(m) => m,
    };
    let era = ctx.era(m.version_text());
    let id = if m.is_request() { m.id } else { None };
    note.method = metrics::method_label(m.method());
    if let Some(trace) = &mut note.trace {
        trace.request_id = id.map(|i| i.get().trim_matches('"').to_owned());
        if !trace.has_parent()
            && memchr::memmem::find(&bytes, b"traceparent").is_some()
            && let Some(parent) = meta_trace(&m)
        {
            trace.adopt(parent);
        }
    }
    // A body in the 2026-07-28 envelope is held to that era's header rules whatever the
    // headers claim: a missing or older `MCP-Protocol-Version` must not switch them off.
    let body_era = match ctx.version {
        None => era,
        Some(_) => Era::detect(None, m.version_text()),
    };
    if (era == Era::Modern || body_era == Era::Modern)
        && let Err(why) = crate::transport::modern::check(&parts.headers, &m)
    {
        let message = format!("Header mismatch: {why}");
        return reply::json(
            StatusCode::BAD_REQUEST,
            jsonrpc::error_response(
                id,
                crate::transport::modern::HEADER_MISMATCH,
                &message,
                None,
            ),
        );
    }
    if let Some(why) = guard::refuse_call_notification(rt.gw, rt.target, &m) {
        note.outcome = "answered";
        return reply::transport(StatusCode::BAD_REQUEST, jsonrpc::INVALID_REQUEST, why);
    }
    if let Upstream::Stdio(pool) = &rt.up {
        return crate::transport::edge::stdio_children::post(
            rt,
            pool,
            &parts.headers,
            bytes.clone(),
            &mut m,
            &ctx,
            note,
        )
        .await;
    }
    let Upstream::Http(up) = &rt.up else {
        unreachable!("stdio routes are served by stdio_children")
    };
    // A 2026-07-28 request to a server that speaks only the handshake goes through toolgate's
    // session with it (docs/contract.md §5, "Eras bridged").
    let session = match era == Era::Modern && m.is_request() {
        true => {
            let limits = &rt.gw.config.limits;
            up.bridge
                .session(up, &parts.headers, ctx.key, || rt.gw.next_id(), limits)
                .await
        }
        false => None,
    };
    // A handshake-era client in the session toolgate keeps for it in front of a server that
    // speaks only 2026-07-28; its headers are made 2026-07-28 ones while the params are whole.
    let reversed = match era {
        Era::Legacy => reversed_session(up, &parts.headers).map(|r| {
            let mut headers = parts.headers.clone();
            HttpBridge::modern_headers(&mut headers, &m);
            (r, headers)
        }),
        Era::Modern => None,
    };
    let (body, kind) = if m.is_request() && m.method() == Some(mcp::TOOLS_CALL) {
        let lister = HttpLister {
            rt,
            up,
            client_headers: reversed.as_ref().map_or(&parts.headers, |(_, h)| h),
            era,
            session: session.as_deref(),
            reverse: reversed.as_ref().map(|(r, _)| &**r),
        };
        // For the access log when toolgate answers: the guard takes the params.
        let name = note.wants_names(rt.gw).then(|| m.params_name()).flatten();
        let call = Call {
            target: rt.target,
            key: &ctx.key,
            era,
            id: m.id.expect("a request has an id"),
            params: m.params.take(),
            bytes: &bytes,
            client: ctx.client.as_ref(),
            retry: false,
        };
        match guard::tools_call(rt.gw, call, &lister).await {
            Decision::Forward(body, kind) => (body, kind),
            Decision::Answer(a) => {
                note.outcome = "answered";
                note.validation = a.outcome;
                note.tool = name.map(Into::into);
                return reply::answer(era, a);
            }
            Decision::Relay(resp) => {
                note.outcome = "relayed";
                return *resp;
            }
        }
    } else {
        (bytes.clone(), pipeline::classify(&m))
    };
    // The tool's name is only for the access log and the trace.
    if note.wants_names(rt.gw)
        && let Kind::Call { tool, outcome, .. } = &kind
    {
        note.tool = Some(tool.clone());
        note.validation = Some(outcome);
    }
    if let Some((reverse, headers)) = reversed {
        let body = match reverse.request(m.method().unwrap_or(""), id, &body) {
            Some(Bridged::Forward(b)) => b,
            Some(Bridged::Answer(_, answer)) => {
                note.outcome = "answered";
                return reply::json(StatusCode::OK, answer);
            }
            None => {
                note.outcome = "answered";
                return accepted();
            }
        };
        let mut parts = parts;
        parts.headers = headers;
        return forward(
            rt,
            parts,
            body,
            pending(rt, &ctx, id, kind, era),
            false,
            note,
        )
        .await;
    }
    let Some(session) = session else {
        let pending = pending(rt, &ctx, id, kind, era);
        if era == Era::Legacy && !ctx.has_session && m.method() == Some("initialize") {
            return initialize(rt, up, parts, body, pending, &m, note).await;
        }
        return forward(rt, parts, body, pending, ctx.has_session, note).await;
    };
    let method = m.method().unwrap_or("");
    let body = match bridge::request(method, id, &body, &session.init) {
        Bridged::Forward(b) => b,
        Bridged::Answer(code, answer) => {
            note.outcome = "answered";
            return reply::json(code.map_or(StatusCode::OK, |c| era.status_for(c)), answer);
        }
    };
    let mut parts = parts;
    session.headers(&mut parts.headers);
    let mut pending = pending(rt, &ctx, id, kind, era);
    pending.bridged = Some(Completion::of(method));
    let (is_call, answer_id) = (
        matches!(pending.kind, Kind::Call { .. }),
        pending.id.clone(),
    );
    let resp = forward(rt, parts, body, pending, false, note).await;
    if resp.status() != StatusCode::NOT_FOUND {
        return resp;
    }
    // The server ended toolgate's session; the next request opens another. A 2026-07-28
    // client has no session to lose, so it gets an error it may retry.
    up.bridge.lost(ctx.key);
    let e = pipeline::UpstreamError::Unreachable(
        "the tool server ended the session toolgate bridges this client through; retry the request"
            .into(),
    );
    reply::answer(
        era,
        pipeline::answer::Answer::upstream_failed(era, answer_id.as_deref(), is_call, &e),
    )
}

/// The reverse-bridged session a client's `Mcp-Session-Id` names. Only ids toolgate minted
/// for one are looked up, so every other request pays a prefix comparison.
fn reversed_session(up: &HttpUpstream, headers: &HeaderMap) -> Option<Arc<Reverse>> {
    let session = headers.get(mcp::SESSION_ID)?.to_str().ok()?;
    session
        .starts_with(REVERSED_PREFIX)
        .then(|| up.bridge.reversed(session))
        .flatten()
}

const REVERSED_PREFIX: &str = "toolgate-bridged-";

/// A handshake-era client's `initialize`. When the server refuses it (HTTP 4xx) and answers
/// `server/discover`, it speaks only 2026-07-28: toolgate answers the client itself and keeps
/// a session for it (docs/contract.md §5, "Eras bridged the other way").
async fn initialize(
    rt: &Route<'_>,
    up: &HttpUpstream,
    parts: Parts,
    body: Bytes,
    pending: Pending,
    m: &jsonrpc::Message<'_>,
    note: &mut Note,
) -> Response {
    let headers = parts.headers.clone();
    let resp = forward(rt, parts, body, pending, false, note).await;
    if !resp.status().is_client_error() {
        return resp;
    }
    let Some(id) = m.id else { return resp };
    let own_id = rt.gw.next_id();
    let limits = &rt.gw.config.limits;
    match up
        .bridge
        .reverse(up, &headers, m.raw_params(), &own_id, limits)
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

fn accepted() -> Response {
    Response::builder()
        .status(StatusCode::ACCEPTED)
        .body(axum::body::Body::empty())
        .expect("valid response")
}

fn pending(rt: &Route<'_>, ctx: &Context, id: Option<&RawValue>, kind: Kind, era: Era) -> Pending {
    Pending {
        id: id.map(RawValue::to_owned),
        kind,
        era,
        key: ctx.key,
        target: rt.target.clone(),
        client: ctx.client.clone(),
        bridged: None,
    }
}

async fn bodiless(
    rt: &Route<'_>,
    req: Request,
    client: Option<Client>,
    note: &mut Note,
) -> Response {
    let (parts, _) = req.into_parts();
    if let Upstream::Stdio(pool) = &rt.up {
        note.method = if parts.method == Method::DELETE {
            "DELETE"
        } else {
            "GET"
        };
        return crate::transport::edge::stdio_children::bodiless(
            pool,
            &parts.method,
            &parts.headers,
            note,
        )
        .await;
    }
    let ctx = Context::of(rt, &parts.headers, client);
    let era = ctx.era(None);
    let is_delete = parts.method == Method::DELETE;
    note.method = if is_delete { "DELETE" } else { "GET" };
    if let Upstream::Http(up) = &rt.up
        && reversed_session(up, &parts.headers).is_some()
    {
        // toolgate's own session for the client: it ends here, and it has no stream (a
        // 2026-07-28 server sends nothing outside a request's answer).
        note.outcome = "answered";
        if is_delete {
            let id = parts
                .headers
                .get(mcp::SESSION_ID)
                .and_then(|v| v.to_str().ok());
            up.bridge.end_reversed(id.unwrap_or_default());
            return Response::builder()
                .status(StatusCode::OK)
                .body(axum::body::Body::empty())
                .expect("valid response");
        }
        let mut r = reply::transport(
            StatusCode::METHOD_NOT_ALLOWED,
            jsonrpc::INVALID_REQUEST,
            "Method not allowed: this session has no stream",
        );
        r.headers_mut().insert(
            http::header::ALLOW,
            HeaderValue::from_static("POST, DELETE"),
        );
        return r;
    }
    let resp = forward(
        rt,
        parts,
        Bytes::new(),
        pending(rt, &ctx, None, Kind::Other, era),
        ctx.has_session,
        note,
    )
    .await;
    if is_delete && resp.status().is_success() && ctx.has_session {
        rt.gw.catalog.forget(&ctx.key);
    }
    resp
}

/// Sends a message upstream; its answer goes back through the rules.
async fn forward(
    rt: &Route<'_>,
    parts: Parts,
    body: Bytes,
    pending: Pending,
    has_session: bool,
    note: &mut Note,
) -> Response {
    let Upstream::Http(up) = &rt.up else {
        unreachable!("stdio routes are served by stdio_children");
    };
    let started = Instant::now();
    let wait = (&rt.gw.config.limits).into();
    let mut parts = parts;
    let hop = note.trace.as_ref().map(|t| {
        let (hop, parent, state) = t.hop();
        parts.headers.insert(TRACEPARENT, parent);
        match state {
            Some(s) => parts.headers.insert(TRACESTATE, s),
            None => parts.headers.remove(TRACESTATE),
        };
        hop
    });
    let sent = up.send(parts.method, parts.headers, body, wait).await;
    if let (Some(trace), Some(hop)) = (note.trace.as_mut(), hop) {
        use telemetry::Attr;
        let mut attrs = vec![
            ("mcp.method.name", Attr::Str(note.method.to_owned())),
            (
                "server.address",
                Attr::Str(up.uri.host().unwrap_or_default().to_owned()),
            ),
        ];
        if let Some(port) = up.uri.port_u16() {
            attrs.push(("server.port", Attr::Int(i64::from(port))));
        }
        let failed = match &sent {
            Ok(r) => {
                attrs.push((
                    "http.response.status_code",
                    Attr::Int(i64::from(r.status().as_u16())),
                ));
                !r.status().is_success()
            }
            Err(_) => {
                attrs.push(("error.type", Attr::Str("upstream_unavailable".into())));
                true
            }
        };
        trace.end_hop(hop, note.method.to_owned(), attrs, failed);
    }
    rt.gw
        .metrics
        .upstream_latency
        .observe(&rt.target.name, started.elapsed());
    match sent {
        Ok(resp) => {
            note.outcome = "forwarded";
            answers::response(rt.gw, pending, has_session, resp).await
        }
        Err(e) => {
            note.outcome = "upstream_error";
            tracing::warn!(upstream = %rt.target.name, error = %e, "upstream unavailable");
            if pending.id.is_none() {
                return reply::transport(
                    StatusCode::BAD_GATEWAY,
                    jsonrpc::INTERNAL_ERROR,
                    &format!("Upstream MCP server unavailable: {e}"),
                );
            }
            let is_call = matches!(&pending.kind, Kind::Call { tool, .. } if { rt.gw.metrics.tool_calls.inc(&[&rt.target.name, tool, "upstream_error"]); true });
            reply::answer(
                pending.era,
                pipeline::answer::Answer::upstream_failed(
                    pending.era,
                    pending.id.as_deref(),
                    is_call,
                    &e,
                ),
            )
        }
    }
}

/// toolgate's own `tools/list`, sent with the client's headers inside its session (or with
/// its credentials, statelessly). The headers are copied only when a listing is needed.
struct HttpLister<'a> {
    rt: &'a Route<'a>,
    up: &'a HttpUpstream,
    client_headers: &'a HeaderMap,
    era: Era,
    /// toolgate's session for a bridged 2026-07-28 client.
    session: Option<&'a Session>,
    /// A handshake-era client bridged to a server that speaks only 2026-07-28 (its
    /// `client_headers` are then already 2026-07-28 ones).
    reverse: Option<&'a Reverse>,
}

impl Lister for HttpLister<'_> {
    /// Boxed: a response is large next to the other failures.
    type Relay = Box<Response>;

    async fn list(
        &self,
        request: Bytes,
        id: &str,
    ) -> Result<Box<RawValue>, ListFailed<Box<Response>>> {
        let mut headers = self.client_headers.clone();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(
            ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        headers.remove(mcp::NAME_HEADER);
        let (request, modern) = http_bridge::listing(
            request,
            &mut headers,
            self.session,
            self.reverse,
            self.era == Era::Modern,
        );
        if modern {
            headers.insert(
                mcp::METHOD_HEADER,
                HeaderValue::from_static(mcp::TOOLS_LIST),
            );
        } else {
            headers.remove(mcp::METHOD_HEADER);
        }
        let limits = &self.rt.gw.config.limits;
        http_client::exchange(self.up, &headers, request, id, limits)
            .await
            .map(|(_, result)| result)
    }
}
