//! What each request leaves behind: its count in `toolgate_requests_total`, its access-log line
//! and its server span. The inner layers fill the request's [`Note`] (the method, the tool,
//! the client, the outcome); this reads it when the answer comes out.
//!
//! The span is begun here, before routing, so that the hops within (the upstream's client
//! span, the trace context in `params._meta`) hang under it; it continues the client's
//! `traceparent` when there is one.
//!
//! A streamed answer's span ends with its stream, and says what the stream settled as (a
//! stream that broke before its answer is `upstream_error`, as the stdio front says it).
//!
//! Caveats: a request that reached no endpoint is neither counted, logged nor traced (a
//! scanner must not grow the metric series); and what a streamed answer sends after its head
//! is not in the request count or the log line, whose latency is the time to the head.

use super::request::{Inbound, Outbound};
use crate::gateway::Gateway;
use crate::mcp;
use crate::telemetry::hop::{TRACEPARENT, TRACESTATE};
use crate::telemetry::{self, Attr};
use crate::transport::exchange::{Note, StreamOutcome};
use http::{HeaderValue, StatusCode};
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;
use tower_layer::Layer;
use tower_service::Service;

/// Applies [`Observe`] to a service.
#[derive(Clone, Copy, Default)]
pub(crate) struct ObserveLayer;

impl<S> Layer<S> for ObserveLayer {
    type Service = Observe<S>;

    fn layer(&self, inner: S) -> Observe<S> {
        Observe { inner }
    }
}

/// Counts, logs and traces each request; see the module documentation.
#[derive(Clone)]
pub(crate) struct Observe<S> {
    inner: S,
}

impl<S, B> Service<Inbound<B>> for Observe<S>
where
    S: Service<Inbound<B>, Response = Outbound, Error = Infallible>,
    S::Future: Unpin,
{
    type Response = Outbound;
    type Error = Infallible;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut inbound: Inbound<B>) -> Self::Future {
        // The clock is read only for the access log; the metrics time the upstream alone.
        let started = inbound.gw.config.log.access.then(Instant::now);
        let mut span = None;
        if let Some(t) = &inbound.gw.telemetry {
            let h = &inbound.head.headers;
            let header = |name| h.get(name).and_then(|v: &HeaderValue| v.to_str().ok());
            let parent =
                header(TRACEPARENT).and_then(|p| telemetry::Context::parse(p, header(TRACESTATE)));
            inbound.note.trace = Some(Box::new(telemetry::RequestTrace::begin(t, parent)));
            span = Some(SpanHeaders {
                session: h.get(mcp::SESSION_ID).cloned(),
                version: h.get(mcp::PROTOCOL_VERSION).cloned(),
            });
        }
        ResponseFuture {
            inner: self.inner.call(inbound),
            started,
            span,
        }
    }
}

/// What the span says that only the request's headers know.
struct SpanHeaders {
    session: Option<HeaderValue>,
    version: Option<HeaderValue>,
}

/// The inner service's answer, once it is counted, logged and traced.
pub(crate) struct ResponseFuture<F> {
    inner: F,
    started: Option<Instant>,
    span: Option<SpanHeaders>,
}

impl<F> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Outbound, Infallible>> + Unpin,
{
    type Output = Result<Outbound, Infallible>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Ok(mut out) = std::task::ready!(Pin::new(&mut self.inner).poll(cx));
        if let Some(target) = out.note.target {
            let status = out.resp.status();
            record(&out.gw, target, &out.note, status, self.started);
            if let Some(span) = self.span.take()
                && out.note.trace.is_some()
            {
                trace(&mut out, target, status, span);
            }
        }
        Poll::Ready(Ok(out))
    }
}

/// Ends the request's span: now, or for an answer streamed past its head (whose outcome may
/// still change), when its body ends.
fn trace(out: &mut Outbound, target: usize, status: StatusCode, span: SpanHeaders) {
    let Some(streamed) = out.resp.extensions().get::<StreamOutcome>().cloned() else {
        let upstream = &out.gw.targets[target].name;
        if let Some(trace) = out.note.trace.take() {
            end_trace(upstream, &out.note, *trace, status, span);
        }
        return;
    };
    let late = LateSpan {
        gw: out.gw.clone(),
        target,
        note: std::mem::take(&mut out.note),
        status,
        span: Some(span),
        streamed,
    };
    let body = std::mem::take(out.resp.body_mut());
    *out.resp.body_mut() = axum::body::Body::new(Traced { body, late });
}

/// A streamed answer's body, which ends its request's span when it ends (or is dropped).
struct Traced {
    body: axum::body::Body,
    late: LateSpan,
}

struct LateSpan {
    gw: std::sync::Arc<Gateway>,
    target: usize,
    note: Note,
    status: StatusCode,
    span: Option<SpanHeaders>,
    streamed: StreamOutcome,
}

impl LateSpan {
    fn end(&mut self) {
        let (Some(trace), Some(span)) = (self.note.trace.take(), self.span.take()) else {
            return;
        };
        if let Some(outcome) = self.streamed.get() {
            self.note.outcome = outcome;
        }
        let upstream = &self.gw.targets[self.target].name;
        end_trace(upstream, &self.note, *trace, self.status, span);
    }
}

impl Drop for Traced {
    fn drop(&mut self) {
        self.late.end();
    }
}

impl http_body::Body for Traced {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<bytes::Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        if matches!(polled, Poll::Ready(None | Some(Err(_)))) {
            self.late.end();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// Counts the request and writes its access-log line, when its head goes out.
fn record(gw: &Gateway, target: usize, note: &Note, status: StatusCode, started: Option<Instant>) {
    let upstream = &gw.targets[target];
    (upstream.series).request(&gw.metrics, note.method, note.outcome);
    if let Some(started) = started {
        let request_id = note.request_id.as_ref().and_then(|v| v.to_str().ok());
        tracing::info!(
            target: "toolgate::access",
            request_id = request_id.unwrap_or("-"),
            upstream = %upstream.name,
            client = note.client.as_deref().unwrap_or("-"),
            method = note.method,
            tool = note.tool.as_deref().unwrap_or("-"),
            outcome = note.outcome,
            status = status.as_u16(),
            latency_us = started.elapsed().as_micros() as u64,
            "request"
        );
    }
}

/// The server span of one request: named `{mcp.method.name} {tool}` and carrying the
/// attributes of the OpenTelemetry conventions for MCP, toolgate's outcome, and never an
/// argument value.
fn end_trace(
    upstream: &str,
    note: &Note,
    trace: telemetry::RequestTrace,
    status: StatusCode,
    span: SpanHeaders,
) {
    let text = |v: &Option<HeaderValue>| {
        v.as_ref()
            .and_then(|v| v.to_str().ok())
            .map(|s| Attr::Str(s.to_owned()))
    };
    let mut extra = vec![(
        "http.response.status_code",
        Attr::Int(i64::from(status.as_u16())),
    )];
    // A session id is a credential of sorts (whoever holds it is in the session): the
    // trace carries a digest, which still ties a session's requests together.
    if let Some(s) = span.session.as_ref() {
        extra.push(("mcp.session.id", Attr::Str(session_digest(s.as_bytes()))));
    }
    if let Some(v) = text(&span.version) {
        extra.push(("mcp.protocol.version", v));
    }
    let facts = telemetry::SpanFacts {
        method: note.method,
        tool: note.tool.as_deref(),
        outcome: note.outcome,
        validation: note.validation,
        upstream,
    };
    trace.finish_with(&facts, extra);
}

/// The first 16 hex digits of the SHA-256 of a session id.
fn session_digest(id: &[u8]) -> String {
    let d = ring::digest::digest(&ring::digest::SHA256, id);
    d.as_ref()[..8].iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::edge::request::test_config;
    use axum::response::Response;
    use tower::ServiceExt;

    /// Sends one request through the layer to an inner service that routes it to target 0
    /// (or to none) and says it was forwarded.
    async fn observed(gw: &std::sync::Arc<Gateway>, routed: bool) -> Outbound {
        let inner = tower::service_fn(move |mut inbound: Inbound<()>| {
            inbound.note.target = routed.then_some(0);
            inbound.note.method = "tools/call";
            inbound.note.outcome = "forwarded";
            let resp = Response::new(axum::body::Body::empty());
            std::future::ready(Ok::<_, Infallible>(inbound.answer(resp)))
        });
        let inbound = Inbound::new(http::Request::new(()), gw.clone(), Box::new(Note::new()));
        ObserveLayer.layer(inner).oneshot(inbound).await.unwrap()
    }

    fn counted(gw: &Gateway) -> String {
        let text = gw
            .metrics
            .render(Default::default(), Default::default(), None);
        text.lines()
            .filter(|l| l.starts_with("toolgate_requests_total{"))
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[tokio::test]
    async fn a_routed_request_is_counted_under_its_outcome() {
        let config = test_config();
        let gw = Gateway::new(config).unwrap();
        observed(&gw, true).await;
        observed(&gw, true).await;
        let line = counted(&gw);
        assert!(line.contains(r#"method="tools/call""#), "{line}");
        assert!(line.contains(r#"outcome="forwarded""#), "{line}");
        assert!(line.ends_with(" 2"), "{line}");
    }

    #[tokio::test]
    async fn a_request_for_no_endpoint_is_not_counted() {
        let config = test_config();
        let gw = Gateway::new(config).unwrap();
        observed(&gw, false).await;
        assert_eq!(counted(&gw), "");
    }
}
