//! What one request on the HTTP edge is served with and carries along: its route (the
//! gateway in force, its target, where its messages go), what its headers say, and what the
//! access log, metrics and trace will say of it. Shared by the edge's handlers, so none of
//! them imports another for its types.

use crate::gateway::{Gateway, Target};
use crate::mcp::{self, Era};
use crate::policy::clients::Client;
use crate::telemetry;
use crate::transport::upstream::children::StdioPool;
use crate::transport::upstream::http_client::HttpUpstream;
use crate::transport::upstream::multiplex::Owner;
use axum::response::Response;
use http::header::{AUTHORIZATION, HeaderName};
use http::{HeaderMap, HeaderValue};
use serde_json::value::RawValue;
use std::sync::Arc;

/// What one request is served with: the gateway in force when it arrived, its upstream's
/// target in that gateway, and where its messages go.
///
/// Borrowed for the request's lifetime: cloning three `Arc`s per request would move their
/// counts' cache lines between the worker threads on every call.
pub(super) struct Route<'a> {
    pub(super) gw: &'a Arc<Gateway>,
    pub(super) target: &'a Arc<Target>,
    pub(super) up: &'a Upstream,
    /// The client's address, for limits per client when it has no authenticated name.
    pub(super) peer: std::net::IpAddr,
}

/// One upstream's endpoint. It names its target by position: a reload rebuilds the targets'
/// rules, never the set of upstreams, so positions are stable while connections and stdio
/// children live on.
pub(super) struct Endpoint {
    pub(super) path: String,
    pub(super) index: usize,
    pub(super) up: Upstream,
}

/// Where a route's messages go.
#[derive(Clone)]
pub(super) enum Upstream {
    Http(Arc<HttpUpstream>),
    Stdio(Arc<StdioPool>),
}

/// A request inside the edge's stack, with what the outer layers settled: the gateway in force
/// when it arrived (loaded once, by `admission`: every load writes a count all threads share)
/// and the note they read back when the answer comes out.
pub(crate) struct Inbound<B> {
    pub(crate) req: http::Request<B>,
    pub(crate) gw: Arc<Gateway>,
    pub(crate) note: Note,
}

/// A request past `routes`: the target it is for. Endpoint `i` serves target `i`.
pub(crate) struct Routed<B> {
    pub(crate) inbound: Inbound<B>,
    pub(crate) target: usize,
}

/// An answer on its way out through the stack, with the gateway and note its request came in
/// with.
pub(crate) struct Outbound {
    pub(crate) resp: Response,
    pub(crate) gw: Arc<Gateway>,
    pub(crate) note: Note,
}

impl<B> Inbound<B> {
    /// The answer to this request, for a layer that answers it itself.
    pub(crate) fn answer(self, resp: Response) -> Outbound {
        Outbound {
            resp,
            gw: self.gw,
            note: self.note,
        }
    }
}

pub(crate) const TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");
pub(crate) const TRACESTATE: HeaderName = HeaderName::from_static("tracestate");

/// What a streamed answer settled as after its head went out, put in the answer's
/// extensions by the stream and read by `observe` when the stream ends: the span of a request
/// whose stream broke before its answer then ends with toolgate's answer, as over stdio.
#[derive(Clone, Default)]
pub(crate) struct StreamOutcome(Arc<std::sync::OnceLock<&'static str>>);

impl StreamOutcome {
    pub(crate) fn set(&self, outcome: &'static str) {
        let _ = self.0.set(outcome);
    }

    pub(crate) fn get(&self) -> Option<&'static str> {
        self.0.get().copied()
    }
}

/// What the access log, the request metrics and the trace say about one request.
#[derive(Default)]
pub(crate) struct Note {
    /// The target the request was routed to; a request for no endpoint is not counted.
    pub(crate) target: Option<usize>,
    /// Its `X-Request-Id` (see `request_id`).
    pub(crate) request_id: Option<HeaderValue>,
    pub(crate) client: Option<Arc<str>>,
    pub(crate) method: &'static str,
    pub(crate) tool: Option<Box<str>>,
    pub(crate) outcome: &'static str,
    /// The request's spans, when traces are exported.
    pub(crate) trace: Option<Box<telemetry::RequestTrace>>,
    /// What the guard made of a `tools/call` (`forwarded`, `rejected_invalid`, …).
    pub(crate) validation: Option<&'static str>,
}

impl Note {
    /// Whether the tool's name is wanted (by the access log or a span): only then is it kept.
    pub(super) fn wants_names(&self, gw: &Gateway) -> bool {
        gw.config.log.access || self.trace.is_some()
    }

    /// What the access log and the trace say of a message that goes to the server: for a
    /// call, its tool and what the guard made of it (kept only when wanted).
    pub(super) fn forwarding(&mut self, gw: &Gateway, kind: &crate::pipeline::Kind) {
        if self.wants_names(gw)
            && let crate::pipeline::Kind::Call { tool, .. } = kind
        {
            self.tool = Some(tool.clone());
            self.validation = kind.call_outcome();
        }
    }

    /// A request nothing has been learnt of yet: refused unless something says otherwise.
    pub(crate) fn new() -> Note {
        Note {
            method: "-",
            outcome: "rejected",
            ..Note::default()
        }
    }
}

/// Who sent a request and what its headers say of it: its scope, its protocol version,
/// whether it has a session, and the client whose rules apply.
pub(super) struct Caller {
    pub(super) key: crate::catalog::ScopeKey,
    pub(super) version: Option<String>,
    pub(super) has_session: bool,
    pub(super) client: Option<Client>,
}

impl Caller {
    /// Who sent the request, among the clients of a session toolgate shares between them:
    /// the authenticated name, else the client's address.
    pub(super) fn owner(&self, peer: std::net::IpAddr) -> Owner<'_> {
        match &self.client {
            Some(c) => Owner::Named(&c.name),
            None => Owner::At(peer),
        }
    }

    pub(super) fn of(
        gw: &Gateway,
        target: &Target,
        headers: &HeaderMap,
        client: Option<Client>,
    ) -> Caller {
        let session = headers.get(mcp::SESSION_ID);
        Caller {
            client,
            key: gw.scope(
                target,
                session.map(|s| s.as_bytes()),
                headers.get(AUTHORIZATION).map(|a| a.as_bytes()),
            ),
            version: headers
                .get(mcp::PROTOCOL_VERSION)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
            has_session: session.is_some(),
        }
    }

    pub(super) fn era(&self, params: Option<&RawValue>) -> Era {
        Era::detect(self.version.as_deref(), params)
    }
}

/// The default rules in front of one upstream that is never dialed, for the layers' tests.
#[cfg(test)]
pub(crate) fn test_config() -> crate::config::Config {
    crate::config::Config {
        upstream: Some("http://127.0.0.1:9/mcp".into()),
        ..crate::config::Config::default()
    }
}

/// What sending a message reads of it once the guard has taken a call's params: its id, its
/// method (as `Note::method` labels it), and its params left as text.
#[derive(Clone, Copy)]
pub(crate) struct Said<'a> {
    pub(crate) id: Option<&'a RawValue>,
    pub(crate) method: &'static str,
    pub(crate) params: Option<&'a RawValue>,
    /// The request a `notifications/cancelled` names.
    pub(crate) cancelled: Option<&'a RawValue>,
}

impl<'a> Said<'a> {
    /// `method` is the message's label (`metrics::method_label`), already read for the note.
    pub(super) fn of(m: &crate::jsonrpc::Message<'a>, method: &'static str) -> Said<'a> {
        Said {
            id: m.id,
            method,
            params: m.raw_params(),
            cancelled: match method {
                "notifications/cancelled" => m.cancelled_id(),
                _ => None,
            },
        }
    }
}
