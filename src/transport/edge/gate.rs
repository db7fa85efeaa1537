//! The gate: what toolgate does with each MCP message for an endpoint (docs/contract.md), the
//! innermost service of the edge's stack. A POST's body is read under the size limit and
//! parsed (`-32700` / `-32600`, 400); a body in the 2026-07-28 envelope is held to that era's
//! header rules (`-32020` on a mismatch: they compare headers with the parsed body, so they
//! live here and not in a layer of their own); a `tools/call` goes through
//! `pipeline::guard` and is answered here or forwarded; every answer comes back through
//! `answers` (learn, rewrite, never hang). GET (the server's stream) and DELETE (the end of a
//! session) are forwarded and their answers inspected the same way. An endpoint in front of
//! a stdio server hands its messages to `stdio_children`.

use super::answers;
use super::reply;
use super::request::{
    Context, Endpoint, Inbound, Note, Outbound, Route, Routed, TRACEPARENT, TRACESTATE, Upstream,
};
use crate::config::parse_upstream_url;
use crate::gateway::Live;
use crate::jsonrpc::{self, Body as Parsed};
use crate::mcp::{self, Era};
use crate::metrics;
use crate::pipeline::bridge::Reverse;
use crate::pipeline::guard;
use crate::pipeline::policy::Client;
use crate::pipeline::step::{self, Bridging, Sender, Step};
use crate::pipeline::{self, Kind, Pending};
use crate::telemetry;
use crate::transport::upstream::children::StdioPool;
use crate::transport::upstream::http_bridge::{self, HttpBridge};
use crate::transport::upstream::http_client::{self, HttpUpstream, ReadError};
use axum::response::Response;
use bytes::Bytes;
use http::header::HeaderValue;
use http::request::Parts;
use http::{HeaderMap, Method, StatusCode};
use serde_json::value::RawValue;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Instant;
use tower_service::Service;

type Request = http::Request<hyper::body::Incoming>;

/// Where each target's messages go: an HTTP upstream, or a pool of stdio children. Built once
/// per listener; the stdio pools are stopped with it.
#[derive(Clone)]
pub(crate) struct Upstreams {
    pub(crate) endpoints: Arc<[Endpoint]>,
    pools: Arc<[Arc<StdioPool>]>,
}

impl Upstreams {
    /// One endpoint per target of the gateway in force; `Err` when an upstream's TLS settings
    /// are unusable (a server name no certificate can carry).
    pub(crate) fn new(live: &Live) -> Result<Upstreams, String> {
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
        Ok(Upstreams {
            endpoints: endpoints.into(),
            pools: pools.into(),
        })
    }

    /// Stops every stdio child (at shutdown).
    pub(crate) async fn close(&self) {
        for p in self.pools.iter() {
            p.close_all().await;
        }
    }
}

/// The gate for the requests of one connection, whose client address it carries (limits per
/// client key on it when the client has no authenticated name).
#[derive(Clone)]
pub(crate) struct Gate {
    /// Per connection: the stack is cloned for each request, and cloning a handle every
    /// connection shares would write one count from every worker thread.
    endpoints: Arc<Arc<[Endpoint]>>,
    peer: std::net::IpAddr,
}

impl Gate {
    pub(crate) fn new(upstreams: &Upstreams, peer: std::net::IpAddr) -> Gate {
        Gate {
            endpoints: Arc::new(upstreams.endpoints.clone()),
            peer,
        }
    }
}

impl Service<Routed<hyper::body::Incoming>> for Gate {
    type Response = Outbound;
    type Error = Infallible;
    /// Boxed: the handlers borrow the request's route across their awaits, and a Tower
    /// service names its future. The one allocation per request the stack makes.
    type Future = Pin<Box<dyn Future<Output = Result<Outbound, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, routed: Routed<hyper::body::Incoming>) -> Self::Future {
        let (endpoints, peer) = (self.endpoints.clone(), self.peer);
        Box::pin(async move {
            let Routed { inbound, target } = routed;
            let Inbound { req, gw, mut note } = inbound;
            let resp = {
                let rt = Route {
                    target: &gw.targets[target],
                    gw: &gw,
                    up: &endpoints[target].up,
                    peer,
                };
                dispatch(&rt, req, &mut note).await
            };
            Ok(Outbound { resp, gw, note })
        })
    }
}

/// A request for the endpoint, by HTTP method.
async fn dispatch(rt: &Route<'_>, req: Request, note: &mut Note) -> Response {
    let client = rt.gw.client(note.client.clone());
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
            note.method = "batch";
            if let Err(why) = step::batch(&msgs, matches!(rt.up, Upstream::Http(_))) {
                return reply::transport(StatusCode::BAD_REQUEST, jsonrpc::INVALID_REQUEST, why);
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
    let lister = http_bridge::Lister {
        up,
        headers: reversed.as_ref().map_or(&parts.headers, |(_, h)| h),
        session: session.as_deref(),
        reverse: reversed.as_ref().map(|(r, _)| &**r),
        client_is_modern: era == Era::Modern,
        limits: &rt.gw.config.limits,
    };
    let bridging = Bridging::of(
        session.as_ref().map(|s| &*s.init),
        reversed.as_ref().map(|(r, _)| &**r),
    );
    // For the access log when toolgate answers: the guard takes the params.
    let name = note.wants_names(rt.gw).then(|| m.params_name()).flatten();
    let sender = Sender {
        target: rt.target,
        key: ctx.key,
        era,
        client: ctx.client.clone(),
    };
    let step = step::decide(rt.gw, sender, &mut m, &bytes, bridging, &lister).await;
    let (body, pending) = match step {
        Step::Forward { body, pending } => (body, pending),
        Step::Answer(a) => {
            note.outcome = "answered";
            note.validation = a.outcome;
            note.tool = name.map(Into::into);
            return reply::answer(era, a);
        }
        Step::Relay(resp) => {
            note.outcome = "relayed";
            return *resp;
        }
        Step::Consumed => {
            note.outcome = "answered";
            return accepted();
        }
    };
    note.forwarding(rt.gw, &pending.kind);
    if let Some((_, headers)) = reversed {
        let mut parts = parts;
        parts.headers = headers;
        return forward(rt, parts, body, pending, false, note).await;
    }
    let Some(session) = session else {
        if era == Era::Legacy && !ctx.has_session && m.method() == Some("initialize") {
            return initialize(rt, up, parts, body, pending, &m, note).await;
        }
        return forward(rt, parts, body, pending, ctx.has_session, note).await;
    };
    let mut parts = parts;
    session.headers(&mut parts.headers);
    let (is_call, answer_id) = (
        matches!(pending.kind, Kind::Call { .. }),
        pending.id.clone(),
    );
    let resp = forward(rt, parts, body, pending, false, note).await;
    if resp.status() != StatusCode::NOT_FOUND {
        return resp;
    }
    let e = up.bridge.lost(ctx.key);
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
