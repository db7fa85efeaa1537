//! The gate: what toolgate does with each MCP message for an endpoint (docs/contract.md), the
//! innermost service of the edge's stack. A POST's body is read under the size limit and parsed
//! (`-32700` / `-32600`, 400); a body in the 2026-07-28 envelope is held to that era's header
//! rules (`-32020` on a mismatch: they compare headers with the parsed body, so they live here
//! and not in a layer of their own). Then, for either kind of server, one path: the message's
//! [`EndpointWay`] to the server is settled (`exchange::to_http`: the era bridges' sessions;
//! `exchange::to_children`: which child), `pipeline::step` decides it with a listing sent that
//! same way, and toolgate answers it or the way sends it. What comes back goes through
//! `pipeline::settle` (over HTTP in `answers`, which also streams). GET (the server's stream)
//! and DELETE (the end of a session) are each way's own.

use super::message;
use super::passing;
use super::request::{Caller, Endpoint, Inbound, Outbound, Route, Routed, Server};
use crate::catalog::ScopeKey;
use crate::config::{ConfigError, parse_upstream_url};
use crate::gateway::Live;
use crate::jsonrpc::{self, Body as Parsed};
use crate::transport::exchange::reply;
use crate::transport::exchange::to_children::{self, ChildWay, ToChildren};
use crate::transport::exchange::to_http::{HttpWay, ToHttp};
use crate::transport::exchange::{Note, Said};

use crate::metrics;

use crate::pipeline::Pending;
use crate::pipeline::engine::{self, Handled, Origin, Way};
use crate::pipeline::guard::{ListFailed, Lister};
use crate::pipeline::step::{self, Bridging};
use crate::policy::clients::Client;
use crate::telemetry;
use crate::transport::upstream::child::ChildSource;
use crate::transport::upstream::children::StdioPool;
use crate::transport::upstream::http_client::HttpUpstream;
use axum::response::Response;
use bytes::Bytes;
use futures_util::future::Either;
use http::request::Parts;
use http::{Method, StatusCode};
use serde_json::value::RawValue;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use tower_service::Service;

/// What a request's body may be: hyper's from a connection, or an application's (the
/// layer in process).
pub(crate) trait RequestBody:
    http_body::Body<Data = Bytes, Error: std::fmt::Display> + Send + Unpin + 'static
{
}

impl<B> RequestBody for B where
    B: http_body::Body<Data = Bytes, Error: std::fmt::Display> + Send + Unpin + 'static
{
}

/// Where each target's messages go: an HTTP upstream, or a pool of stdio children. Built once
/// per listener; the stdio pools are stopped with it.
#[derive(Clone)]
pub(crate) struct Endpoints {
    pub(crate) endpoints: Arc<[Endpoint]>,
    pools: Arc<[Arc<StdioPool>]>,
}

impl Endpoints {
    /// One endpoint per target of the gateway in force; `Err` when an upstream's TLS settings
    /// are unusable (a server name no certificate can carry).
    pub(crate) fn new(live: &Live) -> Result<Endpoints, ConfigError> {
        let gw = live.load();
        let mut endpoints = Vec::new();
        let mut pools = Vec::new();
        for (index, target) in gw.targets.iter().enumerate() {
            let server = match ChildSource::of(target).map_err(ConfigError)? {
                None => {
                    let uri = parse_upstream_url(&target.url)?;
                    let up = HttpUpstream::new(uri, &target.tls)
                        .map_err(|e| ConfigError(format!("upstream {}: {e}", target.name)))?;
                    Server::Http(Arc::new(up))
                }
                Some(source) => {
                    let pool = StdioPool::new(live.clone(), index, source);
                    pools.push(pool.clone());
                    Server::Stdio(pool)
                }
            };
            endpoints.push(Endpoint {
                path: target.path.clone(),
                index,
                server,
            });
        }
        Ok(Endpoints {
            endpoints: endpoints.into(),
            pools: pools.into(),
        })
    }

    /// The one endpoint of a gateway inside an application: its own service, in process.
    pub(crate) fn in_process(live: &Live, app: crate::net::client::AppService) -> Endpoints {
        let gw = live.load();
        let target = &gw.targets[0];
        let uri =
            parse_upstream_url(&target.url).unwrap_or_else(|_| http::Uri::from_static("/mcp"));
        let server = Server::Http(Arc::new(HttpUpstream::in_process(uri, app)));
        Endpoints {
            endpoints: [Endpoint {
                path: target.path.clone(),
                index: 0,
                server,
            }]
            .into(),
            pools: Arc::new([]),
        }
    }

    /// Ends the `subscriptions/listen` streams toolgate serves itself (at shutdown, before
    /// the connections drain): they would otherwise hold the drain to its end.
    pub(crate) async fn end_subscriptions(&self) {
        for e in self.endpoints.iter() {
            match &e.server {
                Server::Http(up) => up.bridge.end_subscriptions(),
                Server::Stdio(pool) => pool.end_subscriptions().await,
            }
        }
    }

    /// Stops every stdio child and ends the sessions toolgate opened with HTTP servers for
    /// bridged clients (at shutdown).
    pub(crate) async fn close(&self) {
        for p in self.pools.iter() {
            p.close_all().await;
        }
        for e in self.endpoints.iter() {
            if let Server::Http(up) = &e.server {
                up.bridge.end_sessions().await;
            }
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
    pub(crate) fn new(endpoints: &Endpoints, peer: std::net::IpAddr) -> Gate {
        Gate {
            endpoints: Arc::new(endpoints.endpoints.clone()),
            peer,
        }
    }
}

impl<B: RequestBody> Service<Routed<B>> for Gate {
    type Response = Outbound;
    type Error = Infallible;
    /// Boxed: the handlers borrow the request's route across their awaits, and a Tower
    /// service names its future. The one future the stack boxes per request.
    type Future = Pin<Box<dyn Future<Output = Result<Outbound, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, routed: Routed<B>) -> Self::Future {
        let (endpoints, peer) = (self.endpoints.clone(), self.peer);
        Box::pin(async move {
            let Routed { inbound, target } = routed;
            let Inbound {
                head,
                body,
                gw,
                mut note,
            } = inbound;
            let resp = {
                let rt = Route {
                    target: &gw.targets[target],
                    gw: &gw,
                    server: &endpoints[target].server,
                    peer,
                };
                dispatch(&rt, head, body, &mut note).await
            };
            Ok(Outbound {
                resp: Box::new(resp),
                gw,
                note,
            })
        })
    }
}

/// A request for the endpoint, by HTTP method. The method's own future, not an `async fn`
/// awaiting it: a level that only passes the request on would hold it twice, and every
/// request would carry and copy both (docs/performance.md).
fn dispatch<'a, B: RequestBody>(
    rt: &'a Route<'a>,
    parts: Box<Parts>,
    body: B,
    note: &'a mut Note,
) -> impl Future<Output = Response> + Send + 'a {
    let client = rt.gw.client(note.client.clone());
    match parts.method {
        Method::POST => Either::Left(post(rt, parts, body, client, note)),
        // Boxed: streams and session ends are rare next to POSTs, and their futures large.
        Method::GET | Method::DELETE => {
            Either::Right(Either::Left(Box::pin(bodiless(rt, parts, client, note))))
        }
        _ => Either::Right(Either::Right(std::future::ready(
            reply::method_not_allowed("use POST, GET or DELETE", "GET, POST, DELETE"),
        ))),
    }
}

/// A POST's message, through the engine. A block, not an `async fn`, so that it keeps the
/// request's parts once, not also as it was given them.
#[expect(
    clippy::manual_async_fn,
    reason = "an `async fn` keeps its arguments apart from what its body moves them into"
)]
fn post<'a, B: RequestBody>(
    rt: &'a Route<'a>,
    parts: Box<Parts>,
    body: B,
    client: Option<Client>,
    note: &'a mut Note,
) -> impl Future<Output = Response> + Send + 'a {
    async move {
        // Its share of the bytes the front holds, kept until it is answered.
        let (bytes, _held) = match message::read(body, rt.gw).await {
            Ok(read) => read,
            Err(refused) => return *refused,
        };
        // Matched as parsed, not bound first: a binding would keep the parse's place in every
        // state of this future after it.
        let mut m = match message::parse(&bytes) {
            Err(refused) => return *refused,
            Ok(Parsed::Batch(msgs)) => {
                note.method = "batch";
                let whole = match &rt.server {
                    Server::Http(up) => Some(up),
                    Server::Stdio(_) => None,
                };
                if let Err(answer) = step::batch(&msgs, whole.is_some()) {
                    return reply::json(StatusCode::BAD_REQUEST, answer);
                }
                let up = whole.expect("step::batch refuses a batch for a stdio server");
                let ctx = Caller::of(rt.gw, rt.target, &parts.headers, client);
                return Box::pin(passing::batch(rt, up, parts, bytes.clone(), &ctx, note)).await;
            }
            Ok(Parsed::Single(m)) => m,
        };
        let (to, origin) = match find_way(rt, &parts, &m, &bytes, client, note).await {
            Ok(settled) => settled,
            Err(refused) => return refused,
        };
        // For the access log when toolgate answers: the guard takes the params.
        let name = note.wants_names(rt.gw).then(|| m.params_name()).flatten();
        let era = origin.era;
        let said = Said::of(&m, note.method);
        // The send is awaited outside the block, which ends the way's place and the
        // decision's in this future before it: the way, lent to the decision, would
        // otherwise keep its own place beside the send's, which holds it.
        let send = {
            let way = EdgeWay {
                to,
                rt,
                parts,
                said,
                note: &mut *note,
            };
            let forward = match engine::handle(rt.gw, origin, &mut m, &bytes, &way).await {
                Handled::Forward(f) => f,
                Handled::Answered(a) => {
                    note.outcome = "answered";
                    note.validation = a.outcome;
                    note.tool = name.map(Into::into);
                    return reply::answer(era, a);
                }
                Handled::Relayed(resp) => {
                    note.outcome = "relayed";
                    return *resp;
                }
                Handled::Consumed => {
                    note.outcome = "answered";
                    return reply::accepted();
                }
            };
            forward.send(way, &**rt.gw, &**rt.target)
        };
        send.await
    }
}

/// One message's header rules, and its way to the server settled, with where it comes from.
/// A future of its own: what it reads of the caller is not kept in the request's future
/// while the answer is awaited, which keeps that future, boxed once per request, within the
/// allocator's fast size (docs/performance.md).
async fn find_way<'a>(
    rt: &'a Route<'a>,
    parts: &Parts,
    m: &jsonrpc::Message<'_>,
    bytes: &Bytes,
    client: Option<Client>,
    note: &mut Note,
) -> Result<(EndpointWay<'a>, Origin<'a>), Response> {
    let ctx = Caller::of(rt.gw, rt.target, &parts.headers, client);
    let era = ctx.era(|| m.names_version());
    trace(note, m, bytes);
    message::header_rules(&parts.headers, &ctx, m, era).map_err(|refused| *refused)?;
    if let Err(refused) = message::call_notification(rt.gw, rt.target, m) {
        note.outcome = "answered";
        return Err(*refused);
    }
    let to = match &rt.server {
        Server::Http(up) => {
            let to = rt.to_http(up);
            let caller = (ctx.key, ctx.session.as_ref(), ctx.owner(rt.peer));
            EndpointWay::Http(HttpWay::find(to, &parts.headers, m, era, caller).await, to)
        }
        Server::Stdio(pool) => {
            let to = rt.to_children(pool);
            let caller = (ctx.key, ctx.owner(rt.peer));
            let way = Box::pin(ChildWay::find(to, &parts.headers, m, era, caller, note)).await?;
            EndpointWay::Child(way, to)
        }
    };
    let origin = Origin {
        target: rt.target,
        era,
        client: ctx.client,
    };
    Ok((to, origin))
}

/// What the trace says of one message: its request id, and a parent it carries in `_meta`.
fn trace(note: &mut Note, m: &jsonrpc::Message<'_>, bytes: &Bytes) {
    let id = if m.is_request() { m.id } else { None };
    note.method = metrics::method_label(m.method());
    if let Some(trace) = &mut note.trace {
        trace.request_id = id.map(|i| i.get().trim_matches('"').to_owned());
        if !trace.has_parent()
            && crate::text::holds!(bytes, "traceparent")
            && let Some(parent) = telemetry::Context::from_meta(m)
        {
            trace.adopt(parent);
        }
    }
}

/// Which kind of server one message goes to, settled before the guard reads it (the era
/// bridge, a session of toolgate's, which child).
enum EndpointWay<'a> {
    Http(HttpWay, ToHttp<'a>),
    Child(ChildWay, ToChildren<'a>),
}

/// The edge's [`Way`] for one message: its way to the server, and what sending it takes
/// from the request (its route, its head, what the message said, the note it fills in).
struct EdgeWay<'a> {
    to: EndpointWay<'a>,
    rt: &'a Route<'a>,
    parts: Box<Parts>,
    said: Said<'a>,
    note: &'a mut Note,
}

impl Way for EdgeWay<'_> {
    type Reply = Response;

    /// The scope the server's listings are kept under: the request's own, or a session's
    /// toolgate opens with it.
    fn key(&self) -> ScopeKey {
        match &self.to {
            EndpointWay::Http(way, _) => way.key(),
            EndpointWay::Child(way, _) => way.key(),
        }
    }

    fn bridging(&self) -> Bridging<'_> {
        match &self.to {
            EndpointWay::Http(way, _) => way.bridging(),
            EndpointWay::Child(way, _) => way.bridging(),
        }
    }

    /// The way's own future, not an `async fn` awaiting it: that would be a level of its own
    /// holding this way's parts twice (as it was given them, and inside the way's future),
    /// and every request would carry and copy both (docs/performance.md).
    fn send(self, body: Bytes, pending: Pending) -> impl Future<Output = Response> + Send {
        let EdgeWay {
            to,
            rt,
            parts,
            said,
            note,
        } = self;
        note.forwarding(rt.gw, &pending.kind);
        match to {
            EndpointWay::Http(way, to) => {
                Either::Left(way.send(to, parts, body, pending, said, note))
            }
            // Boxed: a child's path is several times an HTTP server's, whose requests would
            // otherwise carry (and copy) its size.
            EndpointWay::Child(way, to) => {
                Either::Right(Box::pin(way.send(to.gw, body, pending, said, note)))
            }
        }
    }
}

/// toolgate's own `tools/list`, sent the way the message goes.
impl Lister for EdgeWay<'_> {
    /// An HTTP server's refusal the client must see as it came; a child has none.
    type Relay = Box<Response>;

    async fn list(
        &self,
        request: Bytes,
        id: &str,
    ) -> Result<Box<RawValue>, ListFailed<Self::Relay>> {
        match &self.to {
            EndpointWay::Http(way, to) => {
                way.lister(*to, &self.parts.headers).list(request, id).await
            }
            EndpointWay::Child(way, _) => {
                way.lister().list(request, id).await.map_err(|e| match e {
                    ListFailed::Relay(never) => match never {},
                    ListFailed::Unavailable(e) => ListFailed::Unavailable(e),
                    ListFailed::Refused(why) => ListFailed::Refused(why),
                })
            }
        }
    }
}

async fn bodiless(
    rt: &Route<'_>,
    parts: Box<Parts>,
    client: Option<Client>,
    note: &mut Note,
) -> Response {
    note.method = if parts.method == Method::DELETE {
        "DELETE"
    } else {
        "GET"
    };
    match &rt.server {
        Server::Http(up) => {
            let ctx = Caller::of(rt.gw, rt.target, &parts.headers, client);
            passing::bodiless(rt, up, parts, &ctx, note).await
        }
        Server::Stdio(pool) => {
            to_children::bodiless(pool, &parts.method, &parts.headers, note).await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::Gateway;
    use crate::transport::edge::request::test_config;
    use http_body::Frame;

    /// A request body the size of hyper's, which the edge's connections carry.
    struct HypersSize {
        _room: [u64; size_of::<hyper::body::Incoming>() / 8],
    }

    impl http_body::Body for HypersSize {
        type Data = Bytes;
        type Error = Infallible;

        fn poll_frame(
            self: Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
            Poll::Ready(None)
        }
    }

    /// mimalloc hands out an aligned block of up to 1 KiB from the thread's free list, and a
    /// larger one by a path several times as long; the gate's future is the one block the
    /// edge allocates for every request (docs/performance.md).
    #[tokio::test]
    async fn the_gates_future_fits_the_allocators_fast_size() {
        let live = Live::new(Gateway::new(test_config()).unwrap());
        let endpoints = Endpoints::new(&live).unwrap();
        let mut gate = Gate::new(&endpoints, std::net::Ipv4Addr::LOCALHOST.into());
        let body = HypersSize {
            _room: [0; size_of::<hyper::body::Incoming>() / 8],
        };
        let req = http::Request::post("/mcp").body(body).unwrap();
        let inbound = Inbound::new(req, live.load(), Box::new(Note::new()));
        let future = gate.call(Routed { inbound, target: 0 });
        let size = size_of_val(&*future);
        assert!(size <= 1024, "the gate's future is {size} bytes");
    }
}
