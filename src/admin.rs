//! The admin listener: `/healthz` (the process is alive), `/readyz` (toolgate serves, and each
//! upstream's state; `?upstream=NAME` for one), `/metrics` (Prometheus text). It runs on its
//! own address so that orchestrator probes and scrapes never share the clients' port, limits or
//! origin policy.

use crate::gateway::Live;
use crate::transport::runtime::conn_timers::{ConnTimers, InServiceLayer};
use crate::transport::runtime::drain::Drain;
use crate::transport::runtime::slots::{Closable, Slots};
use crate::transport::runtime::version::{self, Builders, Version};
use crate::transport::upstream::launch::find_program;
use axum::Router;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::{StatusCode, header};
use serde_json::json;
use std::time::Duration;

/// Admin connections at once. Probes and scrapes need a few, and the address is often
/// reachable from a whole cluster: without a cap, a flood of connections there would hold
/// memory and the descriptors the client listener needs.
const MAX_CONNECTIONS: usize = 64;

/// Serves the admin listener until the process ends: at most 64 connections, a new one
/// past them taking the place of the oldest with no request in service, each timed as a
/// client's is (`limits.header_timeout`, `idle_timeout` and `send_timeout`, as in force
/// when it is accepted).
pub async fn serve(listener: tokio::net::TcpListener, live: Live) {
    use tower::{Layer, ServiceExt};
    let router = router(live.clone());
    let (builders, drain) = (Builders::new(), Drain::new());
    let slots = Slots::new(MAX_CONNECTIONS, Closable::NotServing);
    loop {
        let (stream, peer) = crate::transport::runtime::accept(&listener).await;
        let timers = ConnTimers::of(&live.load().config.limits);
        let place = slots.take(&timers).await;
        let mut io = timers.io(stream);
        let service = InServiceLayer::new(timers).layer(router.clone().boxed_clone());
        let service = hyper_util::service::TowerToHyperService::new(service);
        let (builders, drain) = (builders.clone(), drain.clone());
        tokio::spawn(async move {
            if let Ok(version) = Version::read(&mut io).await {
                let how = builders.serve(version, io, service, &drain).await;
                version::ended(how, peer.ip());
            }
            drop(place);
        });
    }
}

/// Each request reads the gateway in force, so `/readyz` and `/metrics` follow reloads.
pub fn router(live: Live) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .layer(axum::middleware::from_fn_with_state(live.clone(), origin))
        .with_state(live)
}

/// The Origin/Host rules of the client listener, on the admin listener's own address.
async fn origin(
    State(live): State<Live>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if let Err(why) = live
        .load()
        .admin_origins
        .check(req.headers(), req.uri().authority())
    {
        return (StatusCode::FORBIDDEN, format!("{why}\n")).into_response();
    }
    next.run(req).await
}

async fn metrics(State(live): State<Live>) -> Response {
    let gw = live.load();
    let catalog = crate::metrics::CatalogGauges {
        scopes: gw.catalog.scope_count(),
        schemas: gw.catalog.schema_count(),
        bytes: gw.catalog.bytes(),
        compile_failures: gw.catalog.compile_failures(),
    };
    let body = gw.metrics.render(
        catalog,
        crate::metrics::HeldGauges {
            bodies: gw.body_bytes.held(),
            answers: gw.answer_bytes.held(),
            answers_waiting: gw.answer_bytes.waiting(),
            upstream_connections: crate::net::outbound::Outbound::process().gauges(),
        },
        gw.telemetry.as_ref().map(|t| t.lost()),
    );
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        body,
    )
        .into_response()
}

/// `/readyz`: toolgate serves while it runs, so it answers 200 with each upstream's state;
/// one upstream down must not take the others out of service (an orchestrator would stop
/// sending anything). `/readyz?upstream=NAME` answers for that one: 200 when it is reachable,
/// 503 when not (what a sidecar, whose one server is its reason to be, probes), 404 for a
/// name no upstream has.
async fn readyz(State(live): State<Live>, uri: http::Uri) -> Response {
    let q = ReadyQuery::of(&uri);
    let gw = live.load();
    let mut upstreams = serde_json::Map::new();
    let mut asked = None;
    for t in &gw.targets {
        if q.upstream.as_deref().is_some_and(|n| n != &*t.name) {
            continue;
        }
        let check = if t.command.is_empty() {
            reachable(&t.url).await
        } else {
            // Each session starts its own process: ready when its program can be run.
            find_program(&t.command).map_err(|e| NotReady(e.to_string()))
        };
        asked = Some(check.is_ok());
        let state = match check {
            Ok(()) => json!({"ready": true}),
            Err(e) => json!({"ready": false, "error": e.to_string()}),
        };
        upstreams.insert(t.name.to_string(), state);
    }
    let (status, ready) = match (&q.upstream, asked) {
        (None, _) => (StatusCode::OK, true),
        (Some(_), Some(true)) => (StatusCode::OK, true),
        (Some(_), Some(false)) => (StatusCode::SERVICE_UNAVAILABLE, false),
        (Some(name), None) => {
            let why = format!("no upstream is named {name:?}");
            return (
                StatusCode::NOT_FOUND,
                axum::Json(json!({"ready": false, "error": why})),
            )
                .into_response();
        }
    };
    (
        status,
        axum::Json(json!({"ready": ready, "upstreams": upstreams})),
    )
        .into_response()
}

/// What `/readyz` was asked: `upstream=NAME` in its query, percent-decoded.
struct ReadyQuery {
    upstream: Option<String>,
}

impl ReadyQuery {
    fn of(uri: &http::Uri) -> ReadyQuery {
        let upstream = uri
            .query()
            .unwrap_or("")
            .split('&')
            .find_map(|pair| pair.strip_prefix("upstream="))
            .map(|v| crate::text::percent_decode(v).unwrap_or_else(|| v.to_owned()));
        ReadyQuery { upstream }
    }
}

/// Why an upstream is not ready: a sentence for the operator reading `/readyz`.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct NotReady(String);

impl From<&str> for NotReady {
    fn from(why: &str) -> NotReady {
        NotReady(why.to_owned())
    }
}

/// An HTTP upstream is ready when a connection to it opens within 1 s, the way its requests
/// open one: directly, or through the proxy the environment names (for a plain server
/// behind a proxy, a connection to the proxy).
async fn reachable(url: &str) -> Result<(), NotReady> {
    let uri: http::Uri = url.parse().map_err(|e| NotReady(format!("{e}")))?;
    if uri.host().is_none() {
        return Err("no host".into());
    }
    let crate::net::Server { https, host, port } = crate::net::Server::of(&uri);
    let addr = format!("{host}:{port}");
    let route = crate::net::proxy::Route::from_env(https, host, port)
        .map_err(|e| NotReady(e.to_string()))?;
    match tokio::time::timeout(Duration::from_secs(1), route.connect(&addr)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(NotReady(format!("cannot connect to {addr}: {e}"))),
        Err(_) => Err(NotReady(format!("no connection to {addr} within 1s"))),
    }
}
