//! With `[auth]`, each session is bound to the identity that opened it
//! (`policy::sessions`): a request's `Mcp-Session-Id` is opened for its client and goes on
//! inward as the server's own id, or the request is answered 404 ("Session not found", what
//! a server answers for an id it does not know) when the id was sealed for another identity
//! or altered; an answer's `Mcp-Session-Id` (a session just opened) is sealed for its client
//! on the way out. It is one layer for every kind of server behind the edge: an HTTP server's
//! own sessions, the sessions toolgate keeps for a bridged client, a stdio child's session.
//!
//! Caveat: without `[auth]` there is no identity to bind to (an address is shared behind a
//! proxy and changes with the network), and ids pass untouched.

use super::request::{Outbound, Routed};
use crate::jsonrpc;
use crate::mcp;
use crate::transport::exchange::reply;
use futures_util::future::{Either, Ready, ready};
use http::{HeaderValue, StatusCode};
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tower_layer::Layer;
use tower_service::Service;

/// Applies [`BindSessions`] to a service.
#[derive(Clone, Copy, Default)]
pub(crate) struct BindSessionsLayer;

impl<S> Layer<S> for BindSessionsLayer {
    type Service = BindSessions<S>;

    fn layer(&self, inner: S) -> BindSessions<S> {
        BindSessions { inner }
    }
}

/// Binds sessions to identities; see the module documentation.
#[derive(Clone)]
pub(crate) struct BindSessions<S> {
    inner: S,
}

impl<S, B> Service<Routed<B>> for BindSessions<S>
where
    S: Service<Routed<B>, Response = Outbound, Error = Infallible>,
    S::Future: Unpin,
{
    type Response = Outbound;
    type Error = Infallible;
    /// Refused at once, or the inner service's answer with its session sealed.
    type Future = Either<Ready<Result<Outbound, Infallible>>, ResponseFuture<S::Future>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut routed: Routed<B>) -> Self::Future {
        let inbound = &mut routed.inbound;
        let client = match &inbound.gw.auth {
            Some(_) => inbound.note.client.clone(),
            None => None,
        };
        let Some(client) = client else {
            return Either::Right(ResponseFuture {
                inner: self.inner.call(routed),
                client: None,
            });
        };
        let headers = &mut inbound.head.headers;
        if let Some(sealed) = headers.get(mcp::SESSION_ID) {
            let opened = sealed
                .to_str()
                .ok()
                .and_then(|s| inbound.gw.sessions.open(&client, s))
                .and_then(|id| HeaderValue::from_str(id).ok());
            match opened {
                Some(id) => {
                    headers.insert(mcp::SESSION_ID, id);
                }
                None => {
                    let r = reply::json(
                        StatusCode::NOT_FOUND,
                        jsonrpc::error_response(
                            None,
                            jsonrpc::INVALID_REQUEST,
                            "Session not found",
                            None,
                        ),
                    );
                    return Either::Left(ready(Ok(routed.inbound.answer(r))));
                }
            }
        }
        Either::Right(ResponseFuture {
            inner: self.inner.call(routed),
            client: Some(client),
        })
    }
}

/// The inner service's answer, with a session it opens sealed for `client`.
pub(crate) struct ResponseFuture<F> {
    inner: F,
    client: Option<Arc<str>>,
}

impl<F> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Outbound, Infallible>> + Unpin,
{
    type Output = Result<Outbound, Infallible>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Ok(mut out) = std::task::ready!(Pin::new(&mut self.inner).poll(cx));
        if let Some(client) = &self.client
            && let Some(id) = out.resp.headers().get(mcp::SESSION_ID)
        {
            let sealed = id.to_str().ok().map(|id| out.gw.sessions.seal(client, id));
            match sealed.and_then(|s| HeaderValue::from_str(&s).ok()) {
                Some(v) => {
                    out.resp.headers_mut().insert(mcp::SESSION_ID, v);
                }
                // An id no client could send back: not handed out unbound.
                None => {
                    out.resp.headers_mut().remove(mcp::SESSION_ID);
                }
            }
        }
        Poll::Ready(Ok(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::Gateway;
    use crate::transport::edge::request::{Inbound, test_config};
    use crate::transport::exchange::Note;
    use axum::response::Response;
    use tower::ServiceExt;

    /// A gateway with authentication (one static token).
    fn gateway() -> Arc<Gateway> {
        let mut config = test_config();
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("toolgate-bind-{}-{n}", std::process::id());
        let file = std::env::temp_dir().join(name);
        std::fs::write(&file, "a-token-value\n").unwrap();
        config.auth.tokens = vec![crate::config::StaticToken {
            name: "alice".into(),
            env: None,
            file: Some(file.to_string_lossy().into_owned()),
        }];
        let gw = Gateway::new(config).unwrap();
        // Read at load.
        let _ = std::fs::remove_file(file);
        gw
    }

    /// Sends a request from `client` naming `session`; the inner service answers with the
    /// session id it saw, and opens session `s-1` when it saw none.
    async fn send(gw: &Arc<Gateway>, client: &str, session: Option<&str>) -> Outbound {
        let inner = tower::service_fn(|routed: Routed<()>| {
            let seen = routed.inbound.head.headers.get(mcp::SESSION_ID).cloned();
            let mut resp = Response::new(axum::body::Body::empty());
            let id = seen.unwrap_or(HeaderValue::from_static("s-1"));
            resp.headers_mut().insert(mcp::SESSION_ID, id);
            std::future::ready(Ok::<_, Infallible>(routed.inbound.answer(resp)))
        });
        let mut req = http::Request::builder();
        if let Some(s) = session {
            req = req.header(mcp::SESSION_ID, s);
        }
        let mut note = Box::new(Note::new());
        note.client = Some(client.into());
        let inbound = Inbound::new(req.body(()).unwrap(), gw.clone(), note);
        BindSessionsLayer
            .layer(inner)
            .oneshot(Routed { inbound, target: 0 })
            .await
            .unwrap()
    }

    fn session(out: &Outbound) -> Option<String> {
        let id = out.resp.headers().get(mcp::SESSION_ID)?;
        Some(id.to_str().unwrap().to_owned())
    }

    #[tokio::test]
    async fn a_session_serves_only_the_identity_that_opened_it() {
        let gw = gateway();
        let opened = send(&gw, "alice", None).await;
        let sealed = session(&opened).unwrap();
        assert!(sealed.starts_with("s-1."), "{sealed}");
        let again = send(&gw, "alice", Some(&sealed)).await;
        assert_eq!(again.resp.status(), StatusCode::OK);
        assert_eq!(session(&again), Some(sealed.clone()));
        let bob = send(&gw, "bob", Some(&sealed)).await;
        assert_eq!(bob.resp.status(), StatusCode::NOT_FOUND);
        let bare = send(&gw, "alice", Some("s-1")).await;
        assert_eq!(bare.resp.status(), StatusCode::NOT_FOUND);
    }
}
