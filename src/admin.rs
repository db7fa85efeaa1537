//! The admin listener: `/healthz` (the process is alive), `/readyz` (each upstream is
//! reachable), `/metrics` (Prometheus text). It runs on its own address so that orchestrator
//! probes and scrapes never share the clients' port, limits or origin policy.

use crate::gateway::Live;
use axum::Router;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::{StatusCode, header};
use serde_json::json;
use std::time::Duration;

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
    let body = gw.metrics.render(
        gw.catalog.scope_count(),
        gw.catalog.schema_count(),
        gw.catalog.compile_failures(),
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

/// Ready when every upstream accepts a TCP connection within a second; the body says which
/// one is not, so a failing probe explains itself.
async fn readyz(State(live): State<Live>) -> Response {
    let gw = live.load();
    let mut upstreams = serde_json::Map::new();
    let mut ready = true;
    for t in &gw.targets {
        let check = if t.command.is_empty() {
            reachable(&t.url).await
        } else {
            startable(&t.command)
        };
        let state = match check {
            Ok(()) => json!({"ready": true}),
            Err(e) => {
                ready = false;
                json!({"ready": false, "error": e.to_string()})
            }
        };
        upstreams.insert(t.name.to_string(), state);
    }
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (
        status,
        axum::Json(json!({"ready": ready, "upstreams": upstreams})),
    )
        .into_response()
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

/// A stdio upstream is ready when its program can be found (each session starts its own).
fn startable(command: &[String]) -> Result<(), NotReady> {
    let program = command.first().ok_or("no command")?;
    let found = if program.contains('/') {
        std::path::Path::new(program).is_file()
    } else {
        std::env::var_os("PATH")
            .is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(program).is_file()))
    };
    if found {
        Ok(())
    } else {
        Err(NotReady(format!("cannot find the program {program:?}")))
    }
}

async fn reachable(url: &str) -> Result<(), NotReady> {
    let uri: http::Uri = url.parse().map_err(|e| NotReady(format!("{e}")))?;
    let host = uri
        .host()
        .ok_or("no host")?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let port = uri.port_u16().unwrap_or(80);
    match tokio::time::timeout(
        Duration::from_secs(1),
        tokio::net::TcpStream::connect((host.as_str(), port)),
    )
    .await
    {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(NotReady(format!("cannot connect to {host}:{port}: {e}"))),
        Err(_) => Err(NotReady(format!(
            "no connection to {host}:{port} within 1s"
        ))),
    }
}
