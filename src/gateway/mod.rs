//! The HTTP gateway: one route per upstream, each message routed to the rule it needs.
//!
//! Processing phases, in order, for a POST:
//! 1. `origin`: DNS-rebinding protection (403).
//! 2. body read under the size limit (413), envelope parse (`-32700` / `-32600`, 400).
//! 3. `guard` for `tools/call`: answer here or forward (DESIGN.md 1.1).
//! 4. forward; `inspect` the answer on its way back (learn, invalidate, never hang).
//!
//! GET (the server's stream) and DELETE (end of session) are forwarded; their answers are
//! inspected the same way.

mod guard;
mod inspect;
mod origin;
pub mod reply;

use crate::catalog::{Catalog, CompileSettings, ScopeKey};
use crate::config::{Config, ConfigError, parse_upstream_url};
use crate::jsonrpc::{self, Body as Parsed};
use crate::mcp::{self, Era};
use crate::upstream::{self, ReadError, Upstream};
use axum::Router;
use axum::extract::{Request, State};
use axum::response::Response;
use axum::routing::any;
use bytes::Bytes;
use http::header::{AUTHORIZATION, CONTENT_LENGTH};
use http::request::Parts;
use http::{HeaderMap, Method, StatusCode};
use inspect::{Kind, Pending};
use origin::OriginPolicy;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

pub struct Gateway {
    pub config: Config,
    pub catalog: Catalog,
    origins: OriginPolicy,
    upstreams: Vec<(String, Arc<Upstream>)>,
    /// Keys scope hashes of credentials, so catalogs never hold a token as it came.
    hasher: RandomState,
    /// Request ids toolgate mints carry a random per-process prefix, so they cannot collide
    /// with a client's ids.
    id_prefix: String,
    id_seq: AtomicU64,
}

#[derive(Clone)]
struct Route {
    gw: Arc<Gateway>,
    up: Arc<Upstream>,
}

impl Gateway {
    pub fn new(config: Config) -> Result<Arc<Gateway>, ConfigError> {
        config.check()?;
        let client = upstream::client();
        let timeout = config.limits.upstream_timeout;
        let mut upstreams = Vec::new();
        if let Some(url) = &config.upstream {
            upstreams.push((
                "/mcp".to_string(),
                Arc::new(Upstream::new(
                    "default",
                    parse_upstream_url(url)?,
                    client.clone(),
                    timeout,
                )),
            ));
        }
        for u in &config.upstreams {
            let up = Upstream::new(
                &u.name,
                parse_upstream_url(&u.url)?,
                client.clone(),
                timeout,
            );
            upstreams.push((format!("/{}/mcp", u.name), Arc::new(up)));
        }
        if upstreams.is_empty() {
            return Err(ConfigError(
                "no upstream: give --upstream URL or [[upstreams]] in the config file".into(),
            ));
        }
        let hasher = RandomState::new();
        let id_prefix = format!("toolgate-{:016x}", hasher.hash_one(std::process::id()));
        Ok(Arc::new(Gateway {
            catalog: Catalog::new(
                CompileSettings::from_config(&config.limits, &config.validation),
                config.limits.max_scopes,
            ),
            origins: OriginPolicy::new(&config.allowed_origins, config.listen.ip().is_loopback()),
            upstreams,
            hasher,
            id_prefix,
            id_seq: AtomicU64::new(0),
            config,
        }))
    }

    /// A fresh id for a request toolgate sends on its own behalf.
    pub fn next_request_id(&self) -> String {
        format!(
            "{}-{}",
            self.id_prefix,
            self.id_seq.fetch_add(1, Ordering::Relaxed)
        )
    }

    /// Which catalog a request reads: its session's, or (stateless) its credentials'.
    fn scope(&self, up: &Upstream, headers: &HeaderMap) -> ScopeKey {
        let context = if let Some(s) = headers.get(mcp::SESSION_ID) {
            format!("s:{}", String::from_utf8_lossy(s.as_bytes()))
        } else if let Some(a) = headers.get(AUTHORIZATION) {
            format!("a:{:016x}", self.hasher.hash_one(a.as_bytes()))
        } else {
            "-".to_string()
        };
        ScopeKey {
            upstream: up.name.clone(),
            context: context.into(),
        }
    }

    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.upstreams.iter().map(|(p, _)| p.as_str())
    }
}

/// The gateway's router; tests and `main` serve it on any listener.
pub fn app(gw: &Arc<Gateway>) -> Router {
    let mut router = Router::new();
    for (path, up) in &gw.upstreams {
        let route = Route {
            gw: gw.clone(),
            up: up.clone(),
        };
        router = router.route(path, any(handle).with_state(route));
    }
    router.fallback(|| async {
        reply::transport(
            StatusCode::NOT_FOUND,
            jsonrpc::INVALID_REQUEST,
            "Not found: no MCP endpoint at this path",
        )
    })
}

async fn handle(State(rt): State<Route>, req: Request) -> Response {
    if let Err(why) = rt.gw.origins.check(req.headers()) {
        return reply::transport(StatusCode::FORBIDDEN, jsonrpc::INVALID_REQUEST, why);
    }
    match *req.method() {
        Method::POST => post(rt, req).await,
        Method::GET | Method::DELETE => bodiless(rt, req).await,
        _ => {
            let mut r = reply::transport(
                StatusCode::METHOD_NOT_ALLOWED,
                jsonrpc::INVALID_REQUEST,
                "Method not allowed: use POST, GET or DELETE",
            );
            r.headers_mut().insert(
                http::header::ALLOW,
                http::HeaderValue::from_static("GET, POST, DELETE"),
            );
            r
        }
    }
}

#[derive(Deserialize)]
struct ListParams<'a> {
    #[serde(borrow, default)]
    cursor: Option<&'a RawValue>,
}

async fn post(rt: Route, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let limit = rt.gw.config.limits.max_body_bytes;
    let too_large = || {
        reply::transport(
            StatusCode::PAYLOAD_TOO_LARGE,
            jsonrpc::INVALID_REQUEST,
            &format!("Invalid Request: the body is over the {limit}-byte limit"),
        )
    };
    let declared = parts
        .headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return too_large();
    }
    let bytes = match upstream::read_limited(body, limit).await {
        Ok(b) => b,
        Err(ReadError::TooLarge) => return too_large(),
        Err(ReadError::Broken(e)) => {
            return reply::transport(
                StatusCode::BAD_REQUEST,
                jsonrpc::PARSE_ERROR,
                &format!("Parse error: the body could not be read: {e}"),
            );
        }
    };
    let parsed = match jsonrpc::parse(&bytes) {
        Ok(p) => p,
        Err(rejection) => {
            return reply::transport(
                StatusCode::BAD_REQUEST,
                rejection.code(),
                &rejection.message(),
            );
        }
    };
    let key = rt.gw.scope(&rt.up, &parts.headers);
    let era = Era::detect(
        parts
            .headers
            .get(mcp::PROTOCOL_VERSION)
            .and_then(|v| v.to_str().ok()),
        None,
    );
    let has_session = parts.headers.contains_key(mcp::SESSION_ID);
    let m = match parsed {
        Parsed::Batch(msgs) => {
            if msgs
                .iter()
                .any(|m| m.is_request() && m.method() == Some(mcp::TOOLS_CALL))
            {
                return reply::transport(
                    StatusCode::BAD_REQUEST,
                    jsonrpc::INVALID_REQUEST,
                    "Invalid Request: toolgate does not accept tools/call inside a batch; send each call on its own",
                );
            }
            let pending = Pending {
                id: None,
                kind: Kind::Other,
                era,
                key,
                has_session,
            };
            return forward(&rt, &parts, bytes.clone(), pending).await;
        }
        Parsed::Single(m) => m,
    };
    let kind = match (m.is_request(), m.method()) {
        (true, Some(mcp::TOOLS_CALL)) => {
            return guard::call(&rt, parts, bytes.clone(), &m, key).await;
        }
        (true, Some(mcp::TOOLS_LIST)) => {
            let cursor = m
                .params
                .and_then(|p| serde_json::from_str::<ListParams<'_>>(p.get()).ok())
                .and_then(|p| p.cursor);
            Kind::List {
                first_page: cursor.is_none_or(|c| c.get() == "null"),
            }
        }
        _ => Kind::Other,
    };
    let id = if m.is_request() {
        m.id.map(|i| i.to_owned())
    } else {
        None
    };
    let pending = Pending {
        id,
        kind,
        era,
        key,
        has_session,
    };
    forward(&rt, &parts, bytes.clone(), pending).await
}

async fn bodiless(rt: Route, req: Request) -> Response {
    let (parts, _) = req.into_parts();
    let key = rt.gw.scope(&rt.up, &parts.headers);
    let has_session = parts.headers.contains_key(mcp::SESSION_ID);
    let era = Era::detect(
        parts
            .headers
            .get(mcp::PROTOCOL_VERSION)
            .and_then(|v| v.to_str().ok()),
        None,
    );
    let pending = Pending {
        id: None,
        kind: Kind::Other,
        era,
        key: key.clone(),
        has_session,
    };
    let resp = forward(&rt, &parts, Bytes::new(), pending).await;
    if parts.method == Method::DELETE && resp.status().is_success() && has_session {
        rt.gw.catalog.forget(&key);
    }
    resp
}

/// Sends a message upstream and inspects the answer on its way back.
async fn forward(rt: &Route, parts: &Parts, body: Bytes, pending: Pending) -> Response {
    match rt.up.send(parts.method.clone(), &parts.headers, body).await {
        Ok(resp) => inspect::response(&rt.gw, pending, resp).await,
        Err(e) => {
            tracing::warn!(upstream = %rt.up.name, error = %e, "upstream unavailable");
            reply::upstream_failed(
                pending.era,
                pending.id.as_deref(),
                pending.kind == Kind::Call,
                &e,
            )
        }
    }
}

/// Serves the gateway until `shutdown` resolves, finishing in-flight requests.
pub async fn serve(
    listener: tokio::net::TcpListener,
    gw: Arc<Gateway>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, app(&gw))
        .with_graceful_shutdown(shutdown)
        .await
}
