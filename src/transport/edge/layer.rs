//! toolgate's rules inside an application that serves MCP itself, as a Tower layer:
//! `Router::new().route("/mcp", post(mcp_handler)).layer(ValidateLayer::new(config)?)`, with
//! no upstream URL and no second process.
//!
//! Each POSTed message takes the path it takes through the binary, with the application's
//! own service as the server (an `engine::Way`): the same reading and pre-checks
//! (`message`), the same driver (`pipeline::engine`: the guard, per-client policy), and its
//! answer read by the same rules (`answers::response`: error rewriting and masking, output
//! validation, learning from `tools/list` answers and `list_changed`). An invalid, misspelt,
//! denied or unknown call is answered here and the application's handler never runs. The
//! tools' schemas come from the application: on the first call of a scope (a session, or a
//! credential) the layer sends its own `tools/list` through the inner service and reads
//! every page.
//!
//! Caveats: the application is taken to speak its client's era (no era bridge in process);
//! the client is who [`ClientName`] in the request's extensions says, else `[clients."*"]`;
//! GET and DELETE pass untouched.

use super::request::Caller;
use super::{answers, message, reply};
use crate::catalog::ScopeKey;
use crate::config::{Config, ConfigError};
use crate::error::UpstreamError;
use crate::gateway::Gateway;
use crate::jsonrpc::{self, Body as Parsed};
use crate::mcp::{self, Era};
use crate::net::body::read_limited;
use crate::pipeline::Pending;
use crate::pipeline::engine::{self, Handled, Origin, Way};
use crate::pipeline::guard::{self, ListFailed, Lister};
use crate::pipeline::step::{self, Bridging};
use crate::transport::sse::{self, Split, Splitter};
use axum::body::Body;
use bytes::Bytes;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body_util::BodyExt;
use serde_json::value::RawValue;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use tower_layer::Layer;
use tower_service::Service;

/// Who calls, as the application's own authentication established it: put in a request's
/// extensions before the layer, it selects the `[clients.NAME]` rules for that request, as an
/// authenticated name does in the gateway. Without it, `[clients."*"]` applies.
#[derive(Debug, Clone)]
pub struct ClientName(pub Arc<str>);

/// Adds validation to an MCP service; see the module documentation.
#[derive(Clone)]
pub struct ValidateLayer {
    gw: Arc<Gateway>,
}

impl ValidateLayer {
    /// The rules of `config` (`[validation]`, `[clients."*"]`, limits); its upstream settings
    /// are not used.
    pub fn new(mut config: Config) -> Result<ValidateLayer, ConfigError> {
        config.command.clear();
        config.upstreams.clear();
        // The rules hang on a target; this one is never dialed.
        config.upstream = Some("http://in-process.invalid/mcp".into());
        Ok(ValidateLayer {
            gw: Gateway::in_process(config)?,
        })
    }

    /// The gateway state the layer decides with (its metrics, its catalog).
    pub fn gateway(&self) -> &Arc<Gateway> {
        &self.gw
    }
}

impl<S> Layer<S> for ValidateLayer {
    type Service = Validate<S>;

    fn layer(&self, inner: S) -> Validate<S> {
        Validate {
            inner,
            gw: self.gw.clone(),
        }
    }
}

/// The service [`ValidateLayer`] makes.
#[derive(Clone)]
pub struct Validate<S> {
    inner: S,
    gw: Arc<Gateway>,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, B> Service<Request<B>> for Validate<S>
where
    S: Service<Request<Body>, Response = Response<Body>, Error = Infallible>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send,
    B: http_body::Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: std::fmt::Display,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<Response<Body>, Infallible>>;

    fn poll_ready(&mut self, cx: &mut std::task::Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        // The inner service that was polled ready serves this request; a clone takes its place.
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let gw = self.gw.clone();
        Box::pin(async move { Ok(validate(gw, inner, req).await) })
    }
}

async fn validate<S, B>(gw: Arc<Gateway>, mut inner: S, req: Request<B>) -> Response<Body>
where
    S: Service<Request<Body>, Response = Response<Body>, Error = Infallible> + Clone + Send + Sync,
    S::Future: Send,
    B: http_body::Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: std::fmt::Display,
{
    let (parts, body) = req.into_parts();
    if parts.method != Method::POST {
        let req = Request::from_parts(
            parts,
            Body::new(body.map_err(|e| axum::Error::new(e.to_string()))),
        );
        return call(&mut inner, req).await;
    }
    let bytes = match message::read(body, &gw.config.limits).await {
        Ok(b) => b,
        Err(refused) => return *refused,
    };
    let mut m = match message::parse(&bytes) {
        Ok(Parsed::Single(m)) => m,
        Ok(Parsed::Batch(msgs)) => {
            if let Err(why) = step::batch(&msgs, true) {
                return reply::transport(StatusCode::BAD_REQUEST, jsonrpc::INVALID_REQUEST, why);
            }
            return call(&mut inner, Request::from_parts(parts, Body::from(bytes))).await;
        }
        Err(refused) => return *refused,
    };
    let target = &gw.targets[0];
    let identity = parts.extensions.get::<ClientName>().map(|c| c.0.clone());
    let ctx = Caller::of(&gw, target, &parts.headers, gw.client(identity));
    let era = ctx.era(m.version_text());
    if let Err(refused) = message::header_rules(&parts.headers, &ctx, &m, era)
        .and_then(|()| message::call_notification(&gw, target, &m))
    {
        return *refused;
    }
    let origin = Origin {
        target,
        era,
        client: ctx.client,
    };
    let way = InProcess {
        gw: &gw,
        inner,
        parts,
        key: ctx.key,
        era,
        has_session: ctx.has_session,
    };
    match engine::handle(&gw, origin, &mut m, &bytes, way).await {
        Handled::Forward(f) => f.send(&*gw, &**target).await,
        Handled::Answered(a) => reply::answer(era, a),
        Handled::Relayed(never) => match never {},
        Handled::Consumed => reply::accepted(),
    }
}

async fn call<S>(inner: &mut S, req: Request<Body>) -> Response<Body>
where
    S: Service<Request<Body>, Response = Response<Body>, Error = Infallible>,
{
    match std::future::poll_fn(|cx| inner.poll_ready(cx)).await {
        Ok(()) => match inner.call(req).await {
            Ok(r) => r,
            Err(never) => match never {},
        },
        Err(never) => match never {},
    }
}

/// The application's own service as the server of one message: the request's head goes
/// with it, and toolgate's own `tools/list` goes through the service with the caller's
/// session and credentials.
struct InProcess<'a, S> {
    gw: &'a Arc<Gateway>,
    inner: S,
    parts: http::request::Parts,
    key: ScopeKey,
    era: Era,
    has_session: bool,
}

impl<S> Way for InProcess<'_, S>
where
    S: Service<Request<Body>, Response = Response<Body>, Error = Infallible> + Clone + Send + Sync,
    S::Future: Send,
{
    type Reply = Response<Body>;

    fn key(&self) -> ScopeKey {
        self.key
    }

    /// The application is taken to speak its client's era.
    fn bridging(&self) -> Bridging<'_> {
        Bridging::Direct
    }

    async fn send(self, body: Bytes, pending: Pending) -> Response<Body> {
        let InProcess {
            gw,
            mut inner,
            mut parts,
            has_session,
            ..
        } = self;
        // The body may have changed (coerced arguments): its own length is the one that holds.
        parts.headers.remove(CONTENT_LENGTH);
        let resp = call(&mut inner, Request::from_parts(parts, Body::from(body))).await;
        answers::response(gw, pending, has_session, resp).await
    }
}

impl<S> Lister for InProcess<'_, S>
where
    S: Service<Request<Body>, Response = Response<Body>, Error = Infallible> + Clone + Send + Sync,
    S::Future: Send,
{
    type Relay = Infallible;

    async fn list(
        &self,
        request: Bytes,
        id: &str,
    ) -> Result<Box<RawValue>, ListFailed<Infallible>> {
        let mut req = Request::post("/mcp")
            .body(Body::from(request))
            .expect("a request from static parts");
        for name in [mcp::SESSION_ID, AUTHORIZATION, mcp::PROTOCOL_VERSION] {
            if let Some(v) = self.parts.headers.get(&name) {
                req.headers_mut().insert(name, v.clone());
            }
        }
        req.headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        req.headers_mut().insert(
            ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        if self.era == Era::Modern {
            req.headers_mut().insert(
                mcp::METHOD_HEADER,
                HeaderValue::from_static(mcp::TOOLS_LIST),
            );
        }
        let resp = call(&mut self.inner.clone(), req).await;
        let max = self.gw.config.limits.max_response_bytes;
        let is_sse = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let unreadable = |e: String| ListFailed::Unavailable(UpstreamError::NotJsonRpc(e));
        let body = read_limited(resp.into_body(), max)
            .await
            .map_err(|_| unreadable("the tools/list answer is over max_response_bytes".into()))?;
        let found = if is_sse {
            let mut splitter = Splitter::new(max);
            splitter.push(&body);
            let mut found = None;
            while let Some(Split::Event(ev)) = splitter.next_event() {
                if let Some(r) = sse::data(&ev).and_then(|d| guard::match_answer(d.as_bytes(), id))
                {
                    found = Some(r);
                    break;
                }
            }
            found
        } else {
            guard::match_answer(&body, id)
        };
        match found {
            Some(Ok(result)) => Ok(result),
            Some(Err(message)) => Err(ListFailed::Refused(message.0)),
            None => Err(unreadable("no answer to toolgate's tools/list".into())),
        }
    }
}
