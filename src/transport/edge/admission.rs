//! The edge's outermost layer: what may reach any route at all, judged by the gateway in force.
//!
//! A path that a server or proxy further on could read as another path (a `.` or `..` segment,
//! plain or percent-encoded, an encoded `/` or `\` inside a segment, a backslash) is refused
//! with 400; a request from a foreign browser origin, or naming a foreign `Host` on a loopback
//! listener, with 403 ([`crate::policy::origin`]). Both come before any routing decision: a
//! request that may not reach toolgate may not reach what lies behind it either. A page at an
//! origin the operator listed is served CORS here ([`cors`]): its origin is found in the same
//! pass.
//!
//! The request admitted goes on as an [`Inbound`] carrying the gateway it was judged by, so
//! the layers within read one configuration per request, and a reload applies from the next
//! request on, also on a kept connection.
//!
//! Caveat: a refusal here carries no `X-Request-Id` and is neither counted nor logged; it
//! names no endpoint to count it under.

use super::cors;
use super::request::{Inbound, Outbound};
use crate::gateway::Live;
use crate::jsonrpc;
use crate::metrics::Entered;
use crate::transport::exchange::Note;
use crate::transport::exchange::reply;
use axum::response::Response;
use futures_util::future::{Either, Ready, ready};
use http::{HeaderValue, StatusCode};
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tower_layer::Layer;
use tower_service::Service;

/// Refuses a path that a server or proxy further on could read as another path. Refused
/// rather than normalised: no MCP client sends them, and a refusal cannot be normalised
/// differently by the next hop.
fn plain_path(path: &str) -> Result<(), &'static str> {
    // Every path a client sends (`/mcp`) has none of these: it is read no further.
    if !path.bytes().any(|b| matches!(b, b'%' | b'.' | b'\\')) {
        return Ok(());
    }
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

/// Applies [`Admission`] to a service.
#[derive(Clone)]
pub(crate) struct AdmissionLayer {
    live: Live,
}

impl AdmissionLayer {
    pub(crate) fn new(live: Live) -> AdmissionLayer {
        AdmissionLayer { live }
    }
}

impl<S> Layer<S> for AdmissionLayer {
    type Service = Admission<S>;

    fn layer(&self, inner: S) -> Admission<S> {
        Admission {
            inner,
            // Its own handle: the stack is cloned for each request, and a clone of the handle
            // every connection shares would write one count from every worker thread.
            live: Arc::new(self.live.clone()),
        }
    }
}

/// Refuses what may reach no route; hands the rest in with the gateway in force.
#[derive(Clone)]
pub(crate) struct Admission<S> {
    inner: S,
    live: Arc<Live>,
}

impl<S, B> Service<http::Request<B>> for Admission<S>
where
    S: Service<Inbound<B>, Response = Outbound, Error = Infallible>,
    S::Future: Unpin,
{
    type Response = Response;
    type Error = Infallible;
    /// Refused at once, or the inner service's answer.
    type Future = Either<Ready<Result<Response, Infallible>>, ResponseFuture<S::Future>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let refuse = |status, why| {
            let r = reply::transport(status, jsonrpc::INVALID_REQUEST, why);
            Either::Left(ready(Ok(r)))
        };
        if let Err(why) = plain_path(req.uri().path()) {
            return refuse(StatusCode::BAD_REQUEST, why);
        }
        let gw = self.live.load();
        let shared = match gw.origins.check(req.headers(), req.uri().authority()) {
            Ok(shared) => shared,
            Err(why) => return refuse(StatusCode::FORBIDDEN, why),
        };
        if let Some(origin) = &shared
            && cors::is_preflight(&req)
        {
            return Either::Left(ready(Ok(cors::preflight(origin.clone(), req.headers()))));
        }
        let note = Box::new(Note::new());
        let entered = Entered::enter();
        Either::Right(ResponseFuture {
            inner: self.inner.call(Inbound::new(req, gw, note)),
            _in_service: entered,
            shared,
        })
    }
}

/// The inner service's answer, as a plain response. The request counts as in service
/// until this is dropped: answered, or its client gone.
pub(crate) struct ResponseFuture<F> {
    inner: F,
    _in_service: Entered,
    /// The origin whose page may read the answer.
    shared: Option<HeaderValue>,
}

impl<F> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Outbound, Infallible>> + Unpin,
{
    type Output = Result<Response, Infallible>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Ok(out) = std::task::ready!(Pin::new(&mut self.inner).poll(cx));
        let mut resp = *out.resp;
        if let Some(origin) = self.shared.take() {
            cors::shared_with(resp.headers_mut(), origin);
        }
        Poll::Ready(Ok(resp))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::Gateway;
    use crate::transport::edge::request::test_config;
    use tower::ServiceExt;

    fn live() -> Live {
        Live::new(Gateway::new(test_config()).unwrap())
    }

    /// Answers 200 "reached" to what passes the layer.
    async fn status(path: &str, headers: &[(&str, &str)]) -> u16 {
        let inner = tower::service_fn(|inbound: Inbound<String>| {
            let resp = Response::new(axum::body::Body::from("reached"));
            ready(Ok::<_, Infallible>(inbound.answer(resp)))
        });
        let mut req = http::Request::builder().uri(path);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let svc = AdmissionLayer::new(live()).layer(inner);
        let resp = svc.oneshot(req.body(String::new()).unwrap()).await.unwrap();
        resp.status().as_u16()
    }

    #[tokio::test]
    async fn plain_paths_from_local_origins_pass() {
        assert_eq!(status("/mcp", &[("host", "127.0.0.1:8080")]).await, 200);
        let local = [
            ("host", "localhost:8080"),
            ("origin", "http://localhost:3000"),
        ];
        assert_eq!(status("/mcp", &local).await, 200);
    }

    #[tokio::test]
    async fn paths_another_hop_could_read_differently_are_refused() {
        for path in [
            "/mcp/../admin",
            "/%2e%2e/mcp",
            "/a%2fb/mcp",
            "/a%5Cb",
            "/x\\y",
        ] {
            assert_eq!(status(path, &[("host", "127.0.0.1")]).await, 400, "{path}");
        }
    }

    #[tokio::test]
    async fn foreign_origins_are_refused() {
        let foreign = [("host", "127.0.0.1"), ("origin", "https://evil.example")];
        assert_eq!(status("/mcp", &foreign).await, 403);
    }
}
