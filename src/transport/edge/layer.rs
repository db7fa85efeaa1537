//! toolgate's validation inside an application that serves MCP itself, as a Tower layer:
//! `Router::new().route("/mcp", post(mcp_handler)).layer(ValidateLayer::new(config)?)`, with
//! no upstream URL and no second process.
//!
//! A `tools/call` is decided by the same guard as in the gateway (docs/contract.md §1): an
//! invalid, misspelt, denied or unknown call is answered here, and the application's handler
//! never runs; a valid one goes in (coerced where that applies). The tools' schemas come from
//! the application itself: on the first call of a scope (a session, or a credential) the layer
//! sends its own `tools/list` through the inner service and reads every page.
//!
//! Caveats: answers are not inspected on their way out (no error rewriting, no output
//! validation, no learning from `list_changed`): a scope's tools are listed again only when a
//! call names a tool the scope does not know. GET and DELETE pass untouched.

use crate::config::{Config, ConfigError};
use crate::error::UpstreamError;
use crate::gateway::Gateway;
use crate::jsonrpc::{self, Body as Parsed};
use crate::mcp::{self, Era};
use crate::net::body::{ReadError, read_limited};
use crate::pipeline::guard::{self, Call, Decision, ListFailed, Lister};
use crate::transport::edge::reply;
use crate::transport::sse::{self, Split, Splitter};
use axum::body::Body;
use bytes::Bytes;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body_util::BodyExt;
use serde_json::value::RawValue;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tower_layer::Layer;
use tower_service::Service;

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
            gw: Gateway::new(config)?,
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

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
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
    let limit = gw.config.limits.max_body_bytes;
    let bytes = match read_limited(body, limit).await {
        Ok(b) => b,
        Err(ReadError::TooLarge) => {
            let why = format!("Invalid Request: the body is over the {limit}-byte limit");
            return reply::transport(
                StatusCode::PAYLOAD_TOO_LARGE,
                jsonrpc::INVALID_REQUEST,
                &why,
            );
        }
        Err(ReadError::Broken(e)) => {
            let why = format!("Parse error: the body could not be read: {e}");
            return reply::transport(StatusCode::BAD_REQUEST, jsonrpc::PARSE_ERROR, &why);
        }
    };
    let forward = |bytes: Bytes| Request::from_parts(parts.clone(), Body::from(bytes));
    let decided = match jsonrpc::parse(&bytes) {
        Ok(Parsed::Single(mut m)) if m.method() == Some(mcp::TOOLS_CALL) => {
            if let Some(why) = guard::refuse_call_notification(&gw, &gw.targets[0], &m) {
                return reply::transport(StatusCode::BAD_REQUEST, jsonrpc::INVALID_REQUEST, why);
            }
            let target = &gw.targets[0];
            let header = |name| parts.headers.get(name).map(HeaderValue::as_bytes);
            let key = gw.scope(target, header(mcp::SESSION_ID), header(AUTHORIZATION));
            let version = parts
                .headers
                .get(mcp::PROTOCOL_VERSION)
                .and_then(|v| v.to_str().ok());
            let era = Era::detect(version, m.version_text());
            let lister = InnerLister {
                inner: inner.clone(),
                headers: parts.headers.clone(),
                era,
                max: gw.config.limits.max_response_bytes,
            };
            let Some(id) = m.id else {
                return reply::transport(
                    StatusCode::BAD_REQUEST,
                    jsonrpc::INVALID_REQUEST,
                    "Invalid Request",
                );
            };
            let call = Call {
                target,
                key: &key,
                era,
                id,
                params: m.params.take(),
                bytes: &bytes,
                client: None,
                retry: false,
            };
            match guard::tools_call(&gw, call, &lister).await {
                Decision::Forward(body, _) => Ok(body),
                Decision::Answer(a) => Err(reply::answer(era, a)),
                Decision::Relay(never) => match never {},
            }
        }
        _ => Ok(bytes),
    };
    match decided {
        Ok(body) => call(&mut inner, forward(body)).await,
        Err(answer) => answer,
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

/// The layer's own `tools/list`, through the application's service, with the caller's
/// session and credentials.
struct InnerLister<S> {
    inner: S,
    headers: http::HeaderMap,
    era: Era,
    max: usize,
}

impl<S> Lister for InnerLister<S>
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
            if let Some(v) = self.headers.get(&name) {
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
        let is_sse = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let unreadable = |e: String| ListFailed::Unavailable(UpstreamError::NotJsonRpc(e));
        let body = read_limited(resp.into_body(), self.max)
            .await
            .map_err(|_| unreadable("the tools/list answer is over max_response_bytes".into()))?;
        let found = if is_sse {
            let mut splitter = Splitter::new(self.max);
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
            Some(Err(message)) => Err(ListFailed::Refused(message)),
            None => Err(unreadable("no answer to toolgate's tools/list".into())),
        }
    }
}
