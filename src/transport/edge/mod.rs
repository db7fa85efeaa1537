//! The Streamable HTTP server side: a Tower stack, one job per layer, outermost first:
//!
//! 1. [`conn_timers`](crate::transport::runtime::conn_timers): the request is in service (its
//!    connection is not idle) until its answer's body is gone;
//! 2. [`admission`]: paths no hop may misread (400), foreign origins and hosts (403), CORS
//!    for the origins listed ([`cors`]); the gateway in force is read here, once per request;
//! 3. [`request_id`]: one `X-Request-Id` both ways;
//! 4. [`observe`]: the request count, the access log, the server span;
//! 5. [`routes`]: which endpoint, the `/.well-known/` documents, or 404;
//! 6. [`authenticate`]: who is calling (401/403);
//! 7. [`gate`]: the MCP rules (docs/contract.md), then the upstream.
//!
//! The stack is built once per connection and served through hyper-util's Tower adapter, by
//! hyper's server for the connection's HTTP version; the runtime's tricks (the version,
//! re-poll, drain, connection timers) wrap the connection, not the stack.

mod admission;
mod authenticate;
mod bind_sessions;
mod cors;
mod gate;
pub mod layer;
mod message;
mod observe;
mod passing;
mod request;
mod request_id;
mod routes;
pub mod tls;
mod well_known;

use crate::gateway::Live;
use crate::transport::runtime::conn_timers::{ConnTimers, InServiceLayer};
use admission::AdmissionLayer;
use authenticate::AuthenticateLayer;
use bind_sessions::BindSessionsLayer;
use gate::{Endpoints, Gate};
use observe::ObserveLayer;
use request_id::RequestIdLayer;
use routes::RoutesLayer;

/// The edge's layers around the gate, for the connections of one listener.
#[derive(Clone)]
pub struct App {
    live: Live,
    endpoints: Endpoints,
}

impl App {
    /// The edge for the gateway in force; `Err` when an upstream's TLS settings are unusable
    /// (a server name no certificate can carry).
    pub fn new(live: &Live) -> Result<App, crate::config::ConfigError> {
        Ok(App {
            live: live.clone(),
            endpoints: Endpoints::new(live)?,
        })
    }

    /// The stack for one connection from `peer`; see the module documentation for its layers.
    pub fn service(
        &self,
        timers: ConnTimers,
        peer: std::net::IpAddr,
    ) -> impl tower_service::Service<
        http::Request<hyper::body::Incoming>,
        Response = http::Response<
            crate::transport::runtime::conn_timers::InServiceBody<axum::body::Body>,
        >,
        Error = std::convert::Infallible,
        Future: Send,
    > + Clone
    + Send
    + 'static {
        tower::ServiceBuilder::new()
            .layer(InServiceLayer::new(timers))
            .layer(AdmissionLayer::new(self.live.clone()))
            .layer(RequestIdLayer)
            .layer(ObserveLayer)
            .layer(RoutesLayer::new(self.endpoints.endpoints.clone()))
            .layer(AuthenticateLayer)
            .layer(BindSessionsLayer)
            .service(Gate::new(&self.endpoints, peer))
    }

    /// Stops every stdio child and ends toolgate's own sessions with HTTP servers (at shutdown).
    pub async fn close(&self) {
        self.endpoints.close().await;
    }
}

/// What the client listener serves with: the edge, and TLS when `[tls]` asks for it. Built
/// before anything listens, so that what the configuration names and cannot be used (a
/// certificate file, an upstream's TLS settings) stops toolgate at its start.
pub struct Edge {
    app: App,
    tls: Option<tls::Acceptor>,
}

impl Edge {
    pub fn new(live: &Live) -> Result<Edge, crate::config::ConfigError> {
        let app = App::new(live)?;
        let tls = match &live.load().config.tls {
            Some(t) => Some(tls::Acceptor::new(t)?),
            None => None,
        };
        Ok(Edge { app, tls })
    }
}

/// Serves the gateway until `shutdown` resolves, then lets in-flight requests and streams
/// finish (the caller bounds how long) and stops the stdio children.
pub async fn serve(
    listener: tokio::net::TcpListener,
    edge: Edge,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    use crate::transport::runtime::repoll::Repoll;
    use crate::transport::runtime::slots::{Closable, Slots};
    use crate::transport::runtime::version::{self, Builders, Version};
    let Edge { app, tls } = edge;
    let live = app.live.clone();
    say_unstartable(&live.load());
    let drain = crate::transport::runtime::drain::Drain::new();
    let builders = Builders::new();
    // A connection holds a place for its life; past the cap, the oldest that has sent no
    // request makes room, or the new one waits (and clients behind it in the listen queue),
    // while the admin listener (its own accept loop) keeps answering.
    let cap = connection_cap(live.load().config.limits.max_connections);
    let slots = Slots::new(cap, Closable::NoRequest);
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            (stream, addr) = crate::transport::runtime::accept(&listener) => (stream, addr.ip()),
            () = &mut shutdown => break,
        };
        let timers = ConnTimers::of(&live.load().config.limits);
        let place = tokio::select! {
            place = slots.take(&timers) => place,
            () = &mut shutdown => break,
        };
        // Under TLS too: the handshake is timed like a request head.
        let mut io = timers.io(stream);
        let service = hyper_util::service::TowerToHyperService::new(app.service(timers, peer));
        let (builders, drain) = (builders.clone(), drain.clone());
        // Re-polled in place when it wakes itself: see `repoll`. A task of its own for each
        // kind of connection, so that a plaintext one's future carries no TLS state.
        match &tls {
            None => tokio::spawn(Repoll::new(async move {
                match Version::read(&mut io).await {
                    Ok(version) => {
                        let how = builders.serve(version, io, service, &drain).await;
                        version::ended(how, peer);
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "a client connection ended before its first request")
                    }
                }
                drop(place);
            })),
            Some(tls) => {
                let acceptor = tls.current();
                tokio::spawn(Repoll::new(async move {
                    match acceptor.accept(io).await {
                        Ok(stream) => {
                            let version = Version::negotiated(stream.get_ref().1.alpn_protocol());
                            let how = builders.serve(version, stream, service, &drain).await;
                            version::ended(how, peer);
                        }
                        Err(e) => tracing::debug!(error = %e, "TLS handshake with a client failed"),
                    }
                    drop(place);
                }))
            }
        };
    }
    drop(listener);
    app.endpoints.end_subscriptions().await;
    drain.shutdown().await;
    app.close().await;
    Ok(())
}

/// A stdio server whose program cannot be found is said once, at start: toolgate serves on
/// (the other servers, and this one once its program is there), refusing its sessions, as
/// `/readyz` says.
fn say_unstartable(gw: &crate::gateway::Gateway) {
    use crate::transport::upstream::launch::find_program;
    for t in gw.targets.iter().filter(|t| !t.command.is_empty()) {
        if let Err(e) = find_program(&t.command) {
            tracing::error!(
                upstream = %t.name,
                error = %e,
                "the tool server cannot be started: its sessions are refused until its program is found"
            );
        }
    }
}

/// `limits.max_connections`, but never more than half the descriptor limit: connections to
/// servers (a quarter, `net::outbound`), stdio children's pipes and the admin listener need
/// descriptors too, and a listener out of them stops answering everyone.
fn connection_cap(configured: usize) -> usize {
    let budget = crate::net::outbound::descriptor_limit().map_or(usize::MAX, |d| (d / 2).max(16));
    if configured > budget {
        tracing::info!(
            configured,
            cap = budget,
            "limits.max_connections is over half the descriptor limit: capped"
        );
    }
    configured.min(budget)
}
