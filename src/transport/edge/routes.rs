//! Which endpoint a request is for: each upstream's path, the `/.well-known/` documents, or
//! nothing (404). A path match over a handful of endpoints costs less than a general router,
//! and this runs on every message.
//!
//! The `/.well-known/` documents are answered here, without authentication: a client reads
//! them to learn how to authenticate. Everything for an endpoint goes on as a [`Routed`]
//! naming its target.

use super::request::{Endpoint, Inbound, Outbound, Routed};
use super::well_known;
use crate::jsonrpc;
use crate::transport::exchange::reply;
use futures_util::future::{Either, Ready, ready};
use http::StatusCode;
use http::request::Parts;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tower_layer::Layer;
use tower_service::Service;

/// Applies [`Routes`] to the service for the endpoints.
#[derive(Clone)]
pub(crate) struct RoutesLayer {
    endpoints: Arc<[Endpoint]>,
}

impl RoutesLayer {
    pub(crate) fn new(endpoints: Arc<[Endpoint]>) -> RoutesLayer {
        RoutesLayer { endpoints }
    }
}

impl<S> Layer<S> for RoutesLayer {
    type Service = Routes<S>;

    fn layer(&self, inner: S) -> Routes<S> {
        Routes {
            inner,
            // Its own handle, as `admission`'s: the stack is cloned for each request.
            endpoints: Arc::new(self.endpoints.clone()),
        }
    }
}

/// Routes each request to an endpoint, answers the well-known documents and 404s the rest.
#[derive(Clone)]
pub(crate) struct Routes<S> {
    inner: S,
    endpoints: Arc<Arc<[Endpoint]>>,
}

/// An answer toolgate writes without the endpoint's service: a document, or a 404.
type Own = Either<Ready<Result<Outbound, Infallible>>, Pin<Box<WellKnown>>>;
type WellKnown = dyn Future<Output = Result<Outbound, Infallible>> + Send;

impl<S, B> Service<Inbound<B>> for Routes<S>
where
    S: Service<Routed<B>, Response = Outbound, Error = Infallible>,
{
    type Response = Outbound;
    type Error = Infallible;
    type Future = Either<Own, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut inbound: Inbound<B>) -> Self::Future {
        let path = inbound.head.uri.path();
        if let Some(ep) = self.endpoints.iter().find(|e| e.path == path) {
            let target = ep.index;
            inbound.note.target = Some(target);
            return Either::Right(self.inner.call(Routed { inbound, target }));
        }
        if path.starts_with("/.well-known/") {
            let Inbound { head, gw, note, .. } = inbound;
            let endpoints = Arc::clone(&self.endpoints);
            return Either::Left(Either::Right(Box::pin(async move {
                let Parts {
                    uri,
                    method,
                    headers,
                    ..
                } = *head;
                let resp =
                    well_known::serve(&gw, &endpoints, &method, uri.path(), uri.query(), headers)
                        .await;
                Ok(Outbound {
                    resp: Box::new(resp),
                    gw,
                    note,
                })
            })));
        }
        let resp = reply::transport(
            StatusCode::NOT_FOUND,
            jsonrpc::INVALID_REQUEST,
            "Not found: no MCP endpoint at this path",
        );
        Either::Left(Either::Left(ready(Ok(inbound.answer(resp)))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::Gateway;
    use crate::transport::edge::request::{Server, test_config};
    use crate::transport::exchange::Note;
    use crate::transport::upstream::http_client::HttpUpstream;
    use axum::response::Response;
    use tower::ServiceExt;

    /// Two endpoints, `/a` and `/b`; the inner service answers with the target it was given.
    async fn route(path: &str) -> (u16, String) {
        let endpoint = |path: &str, index| {
            let uri = "http://127.0.0.1:9/mcp".parse().unwrap();
            let up = HttpUpstream::new(uri, &Default::default()).unwrap();
            let path = path.into();
            let server = Server::Http(Arc::new(up));
            Endpoint {
                path,
                index,
                server,
            }
        };
        let endpoints: Arc<[Endpoint]> = vec![endpoint("/a", 0), endpoint("/b", 1)].into();
        let inner = tower::service_fn(|routed: Routed<()>| {
            assert_eq!(routed.inbound.note.target, Some(routed.target));
            let resp = Response::new(axum::body::Body::from(routed.target.to_string()));
            ready(Ok::<_, Infallible>(routed.inbound.answer(resp)))
        });
        let req = http::Request::builder().uri(path).body(()).unwrap();
        let inbound = Inbound::new(
            req,
            Gateway::new(test_config()).unwrap(),
            Box::new(Note::new()),
        );
        let svc = RoutesLayer::new(endpoints).layer(inner);
        let out = svc.oneshot(inbound).await.unwrap();
        let status = out.resp.status().as_u16();
        let body = axum::body::to_bytes(out.resp.into_body(), 1024)
            .await
            .unwrap();
        (status, String::from_utf8(body.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn each_endpoint_path_goes_to_its_target() {
        assert_eq!(route("/a").await, (200, "0".into()));
        assert_eq!(route("/b").await, (200, "1".into()));
    }

    #[tokio::test]
    async fn any_other_path_is_not_found_with_a_json_rpc_error() {
        for path in ["/", "/a/", "/c", "/b/x"] {
            let (status, body) = route(path).await;
            assert_eq!(status, 404, "{path}");
            assert!(body.contains("\"code\":-32600"), "{path}: {body}");
        }
    }
}
