//! toolgate's rules inside an application that serves MCP itself, as a Tower layer:
//! `Router::new().route("/mcp", post(mcp_handler)).layer(ValidateLayer::new(config)?)`, with
//! no upstream URL and no second process.
//!
//! The layer is the edge's own path with the application's service as its HTTP server, called
//! in process (`net::client`'s in-process transport): every POST, GET and DELETE goes through
//! the same `observe` (the server span, the hop's client span) and the same `gate` (reading
//! and pre-checks, `pipeline::engine` with the guard and per-client policy, the era bridges,
//! `answers` with error rewriting and masking, output validation, learning from `tools/list`
//! answers and `list_changed`) as through the binary's `serve --upstream`. An invalid,
//! misspelt, denied or unknown call is answered here and the application's handler never
//! runs. A forwarded request reaches the application as it came (its target, its extensions:
//! what the application's own layers put there), with its body as the rules left it.
//!
//! Caveats: the client is who [`ClientName`] in the request's extensions says, else
//! `[clients."*"]`, and limits without a name are shared by every such client (there is no
//! peer address in process); toolgate's own requests (its `tools/list`, the era bridge's
//! handshake) go to `/mcp`, without the client's extensions; requests of other HTTP methods pass to
//! the application untouched; the application's own authentication, host and origin checks
//! and request ids are its own (the binary's `[auth]` and admission layers are not in it).

use super::gate::{Endpoints, Gate, RequestBody};
use super::observe::Observe;
use super::request::{Inbound, Outbound, Routed};
use crate::config::{Config, ConfigError};
use crate::gateway::{Gateway, Live};
use crate::net::client::AppService;
use crate::transport::exchange::Note;
use axum::body::Body;
use http::{Method, Request, Response};
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

impl<S: AppMcp> Layer<S> for ValidateLayer {
    type Service = Validate;

    fn layer(&self, inner: S) -> Validate {
        let app = in_process(inner);
        let endpoints = Endpoints::in_process(&Live::new(self.gw.clone()), app.clone());
        let gate = ToTarget(Gate::new(
            &endpoints,
            std::net::Ipv4Addr::UNSPECIFIED.into(),
        ));
        Validate {
            stack: super::observe::ObserveLayer.layer(gate),
            gw: self.gw.clone(),
            app,
        }
    }
}

/// What the layer wraps: an application's MCP service, which serves a request on a clone
/// polled ready and never fails (an error is an HTTP response).
pub trait AppMcp:
    Service<Request<Body>, Response = Response<Body>, Error = Infallible, Future: Send + 'static>
    + Clone
    + Send
    + Sync
    + 'static
{
}

impl<S> AppMcp for S where
    S: Service<
            Request<Body>,
            Response = Response<Body>,
            Error = Infallible,
            Future: Send + 'static,
        > + Clone
        + Send
        + Sync
        + 'static
{
}

/// The application's service, as the edge's in-process server: each call takes a clone,
/// polled ready, as a Tower caller does.
fn in_process<S: AppMcp>(inner: S) -> AppService {
    Arc::new(move |req| {
        let mut svc = inner.clone();
        Box::pin(async move {
            let ready = std::future::poll_fn(|cx| svc.poll_ready(cx)).await;
            let Ok(()) = ready;
            let Ok(resp) = svc.call(req).await;
            resp
        })
    })
}

/// The gate of the layer's one endpoint.
#[derive(Clone)]
struct ToTarget(Gate);

impl<B: RequestBody> Service<Inbound<B>> for ToTarget {
    type Response = Outbound;
    type Error = Infallible;
    type Future = <Gate as Service<Routed<B>>>::Future;

    fn poll_ready(&mut self, cx: &mut std::task::Context<'_>) -> Poll<Result<(), Infallible>> {
        Service::<Routed<B>>::poll_ready(&mut self.0, cx)
    }

    fn call(&mut self, mut inbound: Inbound<B>) -> Self::Future {
        inbound.note.target = Some(0);
        self.0.call(Routed { inbound, target: 0 })
    }
}

/// The service [`ValidateLayer`] makes.
#[derive(Clone)]
pub struct Validate {
    stack: Observe<ToTarget>,
    gw: Arc<Gateway>,
    /// For requests of other methods than MCP's, which pass untouched.
    app: AppService,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<B> Service<Request<B>> for Validate
where
    B: RequestBody,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> Poll<Result<(), Infallible>> {
        // Each call of the application's service is polled ready on its own.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        if ![Method::POST, Method::GET, Method::DELETE].contains(req.method()) {
            let app = self.app.clone();
            return Box::pin(async move { Ok(app(req.map(Body::new)).await) });
        }
        let mut note = Box::new(Note::new());
        note.client = req.extensions().get::<ClientName>().map(|c| c.0.clone());
        let inbound = Inbound::new(req, self.gw.clone(), note);
        let answer = self.stack.call(inbound);
        Box::pin(async move {
            let Ok(out) = answer.await;
            Ok(*out.resp)
        })
    }
}
