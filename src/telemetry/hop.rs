//! A request's hop to its server: a client span under the request's, begun and ended by the
//! way to each kind of server, and the trace context an HTTP server is handed with it.

use super::{Attr, Context, RequestTrace, Span, SpanKind, Telemetry, now_ns};
use crate::error::UpstreamError;
use http::header::HeaderName;
use http::{HeaderMap, HeaderValue};
use std::sync::Arc;

pub(crate) const TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");
pub(crate) const TRACESTATE: HeaderName = HeaderName::from_static("tracestate");

/// The trace context of an upstream hop, as the headers that carry it to an HTTP server.
pub(crate) struct HopContext {
    parent: HeaderValue,
    state: Option<HeaderValue>,
}

impl HopContext {
    /// Puts the context on a request's headers, in place of any its client's had.
    pub(crate) fn carry(self, headers: &mut HeaderMap) {
        headers.insert(TRACEPARENT, self.parent);
        match self.state {
            Some(s) => headers.insert(TRACESTATE, s),
            None => headers.remove(TRACESTATE),
        };
    }
}

/// Where a hop goes, as its span says: a stdio child, or an HTTP server at an address (read
/// only when the hop is traced).
pub(crate) enum HopTo<'a> {
    Child,
    Http(&'a http::Uri),
    /// A server of the HTTP+SSE transport, reached as a child is.
    EventStream(&'a http::Uri),
}

/// How a hop ended, as its span says. Every front's hop to the same kind of server ends in
/// the same words: this is the one place they are chosen.
pub(crate) enum HopEnd<'a> {
    /// An HTTP server's answer: a failure unless its status is 2xx.
    Status(http::StatusCode),
    /// A child's answer, or toolgate's in its place: a failure when its status is no
    /// success.
    Ended { failed: bool },
    /// No usable answer came; `error.type` says why, as toolgate's answer does.
    Unanswered(&'a UpstreamError),
    /// The client gave up on the answer first.
    Cancelled,
}

/// The span a request's hops hang under, as a front holds it while the request is away: a
/// hop ends on its own, when the server has answered, whichever front it came through.
#[derive(Clone)]
pub(crate) struct HopParent {
    tel: Arc<Telemetry>,
    trace_id: [u8; 16],
    span_id: [u8; 8],
    flags: u8,
    state: Option<String>,
}

/// A hop to a server in progress (a client span): the message's method, and where it went.
/// One given up on before it ended (its client went away, or cancelled it) ends as
/// `cancelled` when it is dropped. Boxed: a hop sits in every request's future while the
/// server answers, and only a traced one is more than nothing.
pub(crate) struct Hop(Option<Box<OpenHop>>);

struct OpenHop {
    parent: HopParent,
    span_id: [u8; 8],
    start: u64,
    name: String,
    attrs: Vec<(&'static str, Attr)>,
}

impl HopParent {
    /// Starts the client span of a hop to `to` for a message of `method`; returns the
    /// context the server gets.
    pub(crate) fn hop(self, method: &str, to: HopTo<'_>) -> (Hop, HopContext) {
        let span_id = self.tel.span_id();
        let ctx = Context {
            trace_id: self.trace_id,
            span_id,
            flags: self.flags,
            state: None,
        };
        let state = self
            .state
            .as_deref()
            .and_then(|s| HeaderValue::from_str(s).ok());
        let parent = ctx.header_for(&span_id);
        if !super::sampler::recorded(self.flags) {
            return (Hop(None), HopContext { parent, state });
        }
        let mut attrs = vec![("mcp.method.name", Attr::Str(method.to_owned()))];
        match to {
            HopTo::Child => attrs.push(("toolgate.server", Attr::Str("stdio".into()))),
            HopTo::Http(uri) => server_at(&mut attrs, "http", uri),
            HopTo::EventStream(uri) => server_at(&mut attrs, "http+sse", uri),
        }
        let hop = Hop(Some(Box::new(OpenHop {
            parent: self,
            span_id,
            start: now_ns(),
            name: method.to_owned(),
            attrs,
        })));
        (hop, HopContext { parent, state })
    }
}

/// A hop's attributes for the HTTP server of `kind` at `uri`.
fn server_at(attrs: &mut Vec<(&'static str, Attr)>, kind: &str, uri: &http::Uri) {
    attrs.push(("toolgate.server", Attr::Str(kind.into())));
    attrs.push((
        "server.address",
        Attr::Str(uri.host().unwrap_or_default().into()),
    ));
    if let Some(port) = uri.port_u16() {
        attrs.push(("server.port", Attr::Int(i64::from(port))));
    }
}

impl Hop {
    /// Ends the hop as it `end`ed, and hands its span to the exporter.
    pub(crate) fn end(mut self, end: HopEnd<'_>) {
        if let Some(open) = self.0.take() {
            (*open).end(end);
        }
    }
}

impl Drop for Hop {
    fn drop(&mut self) {
        if let Some(open) = self.0.take() {
            (*open).end(HopEnd::Cancelled);
        }
    }
}

impl OpenHop {
    fn end(self, end: HopEnd<'_>) {
        let OpenHop {
            parent,
            span_id,
            start,
            name,
            mut attrs,
        } = self;
        let error = match end {
            HopEnd::Status(status) => {
                let code = i64::from(status.as_u16());
                attrs.push(("http.response.status_code", Attr::Int(code)));
                !status.is_success()
            }
            HopEnd::Ended { failed } => failed,
            HopEnd::Unanswered(why) => {
                attrs.push(("error.type", Attr::Str(why.naming().0.into())));
                true
            }
            HopEnd::Cancelled => {
                attrs.push(("error.type", Attr::Str("cancelled".into())));
                true
            }
        };
        parent.tel.record(Span {
            trace_id: parent.trace_id,
            span_id,
            parent: Some(parent.span_id),
            trace_state: parent.state,
            name,
            kind: SpanKind::Client,
            start,
            end: now_ns(),
            attrs,
            error,
        });
    }
}

impl RequestTrace {
    /// What the request's hops hang under, from now on (after any [`adopt`](Self::adopt)).
    pub(crate) fn hop_parent(&self) -> HopParent {
        HopParent {
            tel: self.tel.clone(),
            trace_id: self.trace_id,
            span_id: self.span_id,
            flags: self.flags,
            state: self.state.clone(),
        }
    }
}
