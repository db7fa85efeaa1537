//! Who is calling, when `[auth]` is configured: a request for an endpoint must carry a bearer
//! token toolgate accepts (a static token, or a JWT checked against the JWKS), else it is
//! answered 401 (403 for a token without the scope) with a `WWW-Authenticate` challenge that
//! names the endpoint's protected-resource metadata; a client whose `[clients]` rules keep it
//! from the endpoint's server (`upstreams`) is answered 403 as well. The client's name goes
//! into the note, where the gate's per-client rules and the access log read it; the client's
//! `Authorization` never goes upstream (the endpoint's server's own credential does, when set).
//!
//! Caveat: without `[auth]`, every request passes untouched and unnamed; limits per client
//! then key on the client's address.

use super::request::{Inbound, Outbound, Routed};
use crate::auth::Refusal;
use crate::jsonrpc;
use crate::transport::exchange::reply;
use futures_util::future::Either;
use http::HeaderValue;
use http::header::WWW_AUTHENTICATE;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use tower_layer::Layer;
use tower_service::Service;

/// Applies [`Authenticate`] to a service.
#[derive(Clone, Copy, Default)]
pub(crate) struct AuthenticateLayer;

impl<S> Layer<S> for AuthenticateLayer {
    type Service = Authenticate<S>;

    fn layer(&self, inner: S) -> Authenticate<S> {
        Authenticate { inner }
    }
}

/// Authenticates each request for an endpoint; see the module documentation.
#[derive(Clone)]
pub(crate) struct Authenticate<S> {
    inner: S,
}

type Checked = dyn Future<Output = Result<Outbound, Infallible>> + Send;

impl<S, B> Service<Routed<B>> for Authenticate<S>
where
    S: Service<Routed<B>, Response = Outbound, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send,
    B: Send + 'static,
{
    type Response = Outbound;
    type Error = Infallible;
    /// Straight through without `[auth]`; boxed with it (checking a JWT may fetch keys).
    type Future = Either<S::Future, Pin<Box<Checked>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, routed: Routed<B>) -> Self::Future {
        if routed.inbound.gw.auth.is_none() {
            return Either::Left(self.inner.call(routed));
        }
        // The ready service goes into the future; this one keeps a fresh clone.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        Either::Right(Box::pin(async move {
            let Routed {
                mut inbound,
                target,
            } = routed;
            let Inbound { head, gw, note, .. } = &mut inbound;
            let to = &gw.targets[target];
            let Some(auth) = &gw.auth else {
                // The gateway `call` found `[auth]` in; never taken, and no panic if it were.
                return inner.call(Routed { inbound, target }).await;
            };
            let reaches =
                |name: &str| (gw.rules_of(Some(name))).is_none_or(|r| r.reaches(&to.name));
            let authenticated = match auth.authenticate(&head.headers, &to.path).await {
                Ok(identity) if !reaches(&identity.name) => Err(Refusal::NotForThisServer),
                other => other,
            };
            match authenticated {
                Ok(identity) => {
                    auth.to_upstream(&mut head.headers, to.credential.as_ref());
                    note.client = Some(identity.name);
                }
                Err(refusal) => {
                    note.outcome = match refusal {
                        Refusal::InsufficientScope | Refusal::NotForThisServer => "forbidden",
                        _ => "unauthorized",
                    };
                    let (status, challenge, message) = auth.challenge(&refusal, &to.path);
                    // Why, for an operator whose issuer or audience does not match (never the
                    // token): the access log says only that it was refused.
                    tracing::debug!(upstream = %to.name, why = %message, "credentials refused");
                    let mut r = reply::transport(status, jsonrpc::INVALID_REQUEST, &message);
                    if let Ok(v) = HeaderValue::from_str(&challenge) {
                        r.headers_mut().insert(WWW_AUTHENTICATE, v);
                    }
                    return Ok(inbound.answer(r));
                }
            }
            inner.call(Routed { inbound, target }).await
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::Gateway;
    use crate::transport::edge::request::test_config;
    use crate::transport::exchange::Note;
    use axum::response::Response;
    use tower::ServiceExt;

    /// Sends a request with `authorization` through the layer; the inner service answers 200
    /// with the `Authorization` it saw (or "none").
    async fn send(auth: bool, authorization: Option<&str>) -> Outbound {
        send_to(0, test_config(), auth, authorization).await
    }

    /// [`send`], for the endpoint of `target` of `config`.
    async fn send_to(
        target: usize,
        mut config: crate::config::Config,
        auth: bool,
        authorization: Option<&str>,
    ) -> Outbound {
        let mut token_file = None;
        if auth {
            static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
            let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let name = format!("toolgate-auth-{}-{n}", std::process::id());
            let file = std::env::temp_dir().join(name);
            std::fs::write(&file, "s3cret-token-value\n").unwrap();
            token_file = Some(file.clone());
            config.auth.tokens = vec![crate::config::StaticToken {
                name: "ci".into(),
                env: None,
                file: Some(file.to_string_lossy().into_owned()),
            }];
        }
        let inner = tower::service_fn(|routed: Routed<()>| {
            let seen = routed.inbound.head.headers.get(http::header::AUTHORIZATION);
            let seen = seen.map_or("none".to_owned(), |v| v.to_str().unwrap().to_owned());
            let resp = Response::new(axum::body::Body::from(seen));
            std::future::ready(Ok::<_, Infallible>(routed.inbound.answer(resp)))
        });
        let mut req = http::Request::builder();
        if let Some(a) = authorization {
            req = req.header(http::header::AUTHORIZATION, a);
        }
        let gw = Gateway::new(config).unwrap();
        // Read at load.
        if let Some(file) = token_file {
            let _ = std::fs::remove_file(file);
        }
        let inbound = Inbound::new(req.body(()).unwrap(), gw, Box::new(Note::new()));
        let routed = Routed { inbound, target };
        AuthenticateLayer
            .layer(inner)
            .oneshot(routed)
            .await
            .unwrap()
    }

    async fn body(out: Outbound) -> String {
        let bytes = axum::body::to_bytes(out.resp.into_body(), 4096)
            .await
            .unwrap();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    #[tokio::test]
    async fn without_auth_requests_pass_untouched_and_unnamed() {
        let out = send(false, Some("Bearer anything")).await;
        assert_eq!(out.note.client, None);
        assert_eq!(body(out).await, "Bearer anything");
    }

    #[tokio::test]
    async fn a_known_token_names_the_client_and_stays_here() {
        let out = send(true, Some("Bearer s3cret-token-value")).await;
        assert_eq!(out.resp.status(), 200);
        assert_eq!(out.note.client.as_deref(), Some("ci"));
        assert_eq!(body(out).await, "none");
    }

    #[tokio::test]
    async fn a_missing_or_unknown_token_gets_a_challenge() {
        for authorization in [None, Some("Bearer wrong-token-value")] {
            let out = send(true, authorization).await;
            assert_eq!(out.resp.status(), 401, "{authorization:?}");
            assert!(out.resp.headers().contains_key(WWW_AUTHENTICATE));
            assert_eq!(out.note.outcome, "unauthorized");
            assert!(body(out).await.contains("\"code\":-32600"));
        }
    }

    #[tokio::test]
    async fn a_client_kept_from_a_server_is_forbidden_at_its_endpoint() {
        let mut config = test_config();
        config.upstreams = vec![crate::config::NamedUpstream {
            name: "other".into(),
            url: Some("http://127.0.0.1:9/other".into()),
            ..Default::default()
        }];
        let rules = crate::config::ClientPolicy {
            upstreams: vec!["default".into()],
            ..Default::default()
        };
        config.clients.insert("ci".into(), rules);
        let token = Some("Bearer s3cret-token-value");
        let out = send_to(1, config.clone(), true, token).await;
        assert_eq!(out.resp.status(), 403);
        assert_eq!(out.note.outcome, "forbidden");
        let challenge = out.resp.headers()[WWW_AUTHENTICATE].to_str().unwrap();
        assert!(
            challenge.contains("error=\"insufficient_scope\""),
            "{challenge}"
        );
        assert!(
            body(out)
                .await
                .contains("this client may not use the server")
        );
        let out = send_to(0, config, true, token).await;
        assert_eq!(out.resp.status(), 200);
        assert_eq!(out.note.client.as_deref(), Some("ci"));
    }
}
