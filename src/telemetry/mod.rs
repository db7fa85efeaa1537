//! OpenTelemetry traces, exported over OTLP/HTTP (protobuf); off unless an endpoint is given
//! (`[telemetry] otlp_endpoint`, or the standard `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` /
//! `OTEL_EXPORTER_OTLP_ENDPOINT`); `OTEL_SDK_DISABLED=true` turns it off whatever they say.
//! A hosted backend's credentials come in the standard
//! `OTEL_EXPORTER_OTLP_TRACES_HEADERS` / `OTEL_EXPORTER_OTLP_HEADERS`, never logged.
//!
//! A request's spans are built on the request path as plain data and handed to a bounded
//! queue; one task batches them (up to 512, or every second) and posts them to the collector.
//! A full queue drops spans, and a collector that does not answer costs a batch, never a
//! request. Spans lost either way are counted ([`SpansLost`]), and the log says once when
//! the collector stops taking them and once when it takes them again: a wrong endpoint is
//! otherwise silent. Spans carry names and identifiers, never argument values.

pub(crate) mod hop;
mod otlp;
mod sampler;

use crate::config::{ConfigError, TelemetryConfig};
use crate::metrics::SpansLost;
use crate::net::client::{HttpClient, Wait};
use bytes::Bytes;
use http::HeaderValue;
use sampler::{Sampler, recorded};
use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};
use tokio::sync::mpsc;

/// Spans waiting for export; past it, new ones are dropped (and counted).
const QUEUE: usize = 4096;
/// The most of a collector's answer read (an OTLP answer is a few bytes of partial success).
const MAX_COLLECTOR_ANSWER: usize = 64 * 1024;
const BATCH: usize = 512;
const EVERY: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpanKind {
    Server,
    Client,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Attr {
    Str(String),
    Int(i64),
}

/// The most bytes of one text in a span (its name, an attribute's value); W3C `tracestate`
/// is itself at most 512.
const MAX_SPAN_TEXT: usize = 512;

/// One finished span.
#[derive(Debug, Clone)]
pub struct Span {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    pub parent: Option<[u8; 8]>,
    pub trace_state: Option<String>,
    pub name: String,
    pub kind: SpanKind,
    /// Nanoseconds since the Unix epoch.
    pub start: u64,
    pub end: u64,
    pub attrs: Vec<(&'static str, Attr)>,
    pub error: bool,
}

/// A W3C trace context (`traceparent`, `tracestate`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Context {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    pub flags: u8,
    pub state: Option<String>,
}

impl Context {
    /// `00-<32 hex>-<16 hex>-<2 hex>`; anything else (or all-zero ids) is no context.
    pub fn parse(traceparent: &str, tracestate: Option<&str>) -> Option<Context> {
        let mut parts = traceparent.trim().split('-');
        let (version, trace, span, flags) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        if version.len() != 2 || version == "ff" || (version == "00" && parts.next().is_some()) {
            return None;
        }
        let mut trace_id = [0u8; 16];
        let mut span_id = [0u8; 8];
        hex(trace, &mut trace_id)?;
        hex(span, &mut span_id)?;
        let mut f = [0u8; 1];
        hex(flags, &mut f)?;
        if trace_id == [0; 16] || span_id == [0; 8] {
            return None;
        }
        Some(Context {
            trace_id,
            span_id,
            flags: f[0],
            state: tracestate
                .map(str::trim)
                .filter(|s| !s.is_empty() && s.len() <= 512)
                .map(str::to_owned),
        })
    }

    /// The `traceparent` value for a child whose span is `span_id`.
    /// A trace context a client put in `params._meta` (`traceparent`, `tracestate`), as the
    /// spec allows where there are no headers to carry it.
    pub fn from_meta(m: &crate::jsonrpc::Message<'_>) -> Option<Context> {
        #[derive(serde::Deserialize)]
        struct Meta {
            traceparent: Option<String>,
            tracestate: Option<String>,
        }
        #[derive(serde::Deserialize)]
        struct WithMeta {
            #[serde(rename = "_meta")]
            meta: Option<Meta>,
        }
        let meta: Meta = match &m.params {
            Some(crate::jsonrpc::Params::Call(c)) => serde_json::from_str(c.meta?).ok()?,
            Some(crate::jsonrpc::Params::Raw(raw)) => {
                serde_json::from_str::<WithMeta>(raw.get()).ok()?.meta?
            }
            None => return None,
        };
        Context::parse(meta.traceparent.as_deref()?, meta.tracestate.as_deref())
    }

    pub fn header_for(&self, span_id: &[u8; 8]) -> HeaderValue {
        let text = format!(
            "00-{}-{}-{:02x}",
            to_hex(&self.trace_id),
            to_hex(span_id),
            self.flags
        );
        HeaderValue::from_str(&text).expect("hex is a valid header value")
    }
}

fn hex(s: &str, out: &mut [u8]) -> Option<()> {
    if s.len() != out.len() * 2 {
        return None;
    }
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(s.get(i * 2..i * 2 + 2)?, 16).ok()?;
    }
    Some(())
}

pub fn to_hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

pub fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// The exporter's handle: where spans go, and fresh ids.
pub struct Telemetry {
    tx: mpsc::Sender<Span>,
    /// Asks the exporter to send what it holds now, and says when it has.
    flushes: mpsc::Sender<tokio::sync::oneshot::Sender<()>>,
    ids: RandomState,
    next: AtomicU64,
    lost: Arc<Lost>,
    sampler: Sampler,
}

/// Spans that never reached the collector, by why.
#[derive(Default)]
struct Lost {
    queue_full: AtomicU64,
    unreachable: AtomicU64,
    refused: AtomicU64,
}

impl Telemetry {
    /// Starts the exporter when an endpoint is configured (`None` otherwise). Needs a runtime.
    pub fn start(cfg: &TelemetryConfig) -> Result<Option<Arc<Telemetry>>, ConfigError> {
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        // The standard switch, over any endpoint: tracing off without editing the file.
        if env("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
            return Ok(None);
        }
        let endpoint = match (
            cfg.otlp_endpoint.clone(),
            env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
            env("OTEL_EXPORTER_OTLP_ENDPOINT"),
        ) {
            (Some(base), _, _) | (None, None, Some(base)) => {
                let base = base.trim_end_matches('/');
                if base.ends_with("/v1/traces") {
                    base.to_owned()
                } else {
                    format!("{base}/v1/traces")
                }
            }
            (None, Some(full), _) => full,
            (None, None, None) => return Ok(None),
        };
        let uri = crate::config::parse_upstream_url(&endpoint)
            .map_err(|e| ConfigError(format!("telemetry endpoint: {}", e.0)))?;
        let up = HttpClient::new(uri, &cfg.tls)
            .map_err(|e| ConfigError(format!("telemetry endpoint: {e}")))?;
        let mut resource = vec![(
            "service.name".to_owned(),
            env("OTEL_SERVICE_NAME").unwrap_or_else(|| "toolgate".into()),
        )];
        resource.push(("service.version".into(), env!("CARGO_PKG_VERSION").into()));
        if let Some(attrs) = env("OTEL_RESOURCE_ATTRIBUTES") {
            for pair in attrs.split(',') {
                if let Some((k, v)) = pair.split_once('=') {
                    // The values are percent-encoded; a malformed one is taken as it is.
                    let v = v.trim();
                    let (k, v) = (
                        k.trim(),
                        crate::text::percent_decode(v).unwrap_or_else(|| v.to_owned()),
                    );
                    if !k.is_empty() && k != "service.name" {
                        resource.push((k.to_owned(), v));
                    }
                }
            }
        }
        let (tx, rx) = mpsc::channel(QUEUE);
        let (flushes, flush_rx) = mpsc::channel(1);
        let headers = otlp_headers(
            env("OTEL_EXPORTER_OTLP_TRACES_HEADERS")
                .map(|v| ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", v))
                .or_else(|| {
                    env("OTEL_EXPORTER_OTLP_HEADERS").map(|v| ("OTEL_EXPORTER_OTLP_HEADERS", v))
                }),
        )?;
        let lost = Arc::new(Lost::default());
        let exporter = Exporter {
            up,
            headers,
            resource,
            lost: lost.clone(),
            failing: false,
        };
        tokio::spawn(export(rx, flush_rx, exporter));
        tracing::info!(endpoint = %endpoint, "exporting traces over OTLP/HTTP");
        Ok(Some(Arc::new(Telemetry {
            tx,
            flushes,
            ids: RandomState::new(),
            next: AtomicU64::new(1),
            lost,
            sampler: Sampler::from_env(
                env("OTEL_TRACES_SAMPLER").as_deref(),
                env("OTEL_TRACES_SAMPLER_ARG").as_deref(),
            ),
        })))
    }

    /// The spans lost so far, for the metrics.
    pub fn lost(&self) -> SpansLost {
        let read = |c: &AtomicU64| c.load(Ordering::Relaxed);
        SpansLost {
            queue_full: read(&self.lost.queue_full),
            unreachable: read(&self.lost.unreachable),
            refused: read(&self.lost.refused),
        }
    }

    fn id64(&self) -> u64 {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        self.ids.hash_one(n).max(1)
    }

    pub fn span_id(&self) -> [u8; 8] {
        self.id64().to_be_bytes()
    }

    pub fn trace_id(&self) -> [u8; 16] {
        let mut t = [0u8; 16];
        t[..8].copy_from_slice(&self.id64().to_be_bytes());
        t[8..].copy_from_slice(&self.id64().to_be_bytes());
        t
    }

    /// Sends what the exporter holds now, waiting `within` at most: a process about to end
    /// (`toolgate stdio` when its client goes) would lose the last second's spans.
    pub async fn flush(&self, within: Duration) {
        let (done, sent) = tokio::sync::oneshot::channel();
        if self.flushes.try_send(done).is_ok() {
            let _ = tokio::time::timeout(within, sent).await;
        }
    }

    /// Hands a finished span to the exporter; dropped when the queue is full. Its text is
    /// clipped first: names and ids come from clients, and the queue is bounded by count, so
    /// only a bound on each span's size bounds its memory.
    pub fn record(&self, mut span: Span) {
        span.clip();
        if self.tx.try_send(span).is_err() {
            self.lost.queue_full.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Span {
    fn clip(&mut self) {
        // Truncated and given back: a cut string keeps its whole allocation otherwise.
        let clip = |s: &mut String| {
            let kept = crate::text::clipped(s, MAX_SPAN_TEXT).len();
            if kept < s.len() {
                s.truncate(kept);
                s.shrink_to_fit();
            }
        };
        clip(&mut self.name);
        if let Some(state) = &mut self.trace_state {
            clip(state);
        }
        for (_, value) in &mut self.attrs {
            if let Attr::Str(s) = value {
                clip(s);
            }
        }
    }
}

/// What every front says of one request in its server span, so that spans read alike
/// whatever the transport: named `{mcp.method.name} {tool}`, with the attributes of the
/// OpenTelemetry conventions for MCP and toolgate's outcome, never an argument value.
pub struct SpanFacts<'a> {
    pub method: &'a str,
    pub tool: Option<&'a str>,
    /// `forwarded`, `answered`, `upstream_error`, … (the request metric's values).
    pub outcome: &'a str,
    /// For a call toolgate answered, why (`rejected_invalid`, `unknown`, …).
    pub validation: Option<&'a str>,
    pub upstream: &'a str,
}

/// One request's server span, until it ends.
pub struct RequestTrace {
    tel: Arc<Telemetry>,
    trace_id: [u8; 16],
    parent: Option<[u8; 8]>,
    state: Option<String>,
    flags: u8,
    span_id: [u8; 8],
    start: u64,
    /// The request's JSON-RPC id, as text.
    pub request_id: Option<String>,
}

impl RequestTrace {
    /// A server span, continuing the client's trace when it sent one.
    pub fn begin(tel: &Arc<Telemetry>, parent: Option<Context>) -> RequestTrace {
        let (trace_id, parent_id, state, parent_flags) = match parent {
            Some(c) => (c.trace_id, Some(c.span_id), c.state, Some(c.flags)),
            None => (tel.trace_id(), None, None, None),
        };
        let flags = tel.sampler.flags(&trace_id, parent_flags);
        RequestTrace {
            tel: tel.clone(),
            trace_id,
            parent: parent_id,
            state,
            flags,
            span_id: tel.span_id(),
            start: now_ns(),
            request_id: None,
        }
    }

    pub fn has_parent(&self) -> bool {
        self.parent.is_some()
    }

    /// Continues the trace a client named in `params._meta` rather than in its headers.
    pub fn adopt(&mut self, parent: Context) {
        self.trace_id = parent.trace_id;
        self.parent = Some(parent.span_id);
        self.flags = self.tel.sampler.flags(&parent.trace_id, Some(parent.flags));
        self.state = parent.state;
    }

    /// Ends the server span as [`SpanFacts`] say, with what only the front knows (`extra`:
    /// an HTTP status, a session, a protocol version).
    pub fn finish_with(self, facts: &SpanFacts<'_>, extra: Vec<(&'static str, Attr)>) {
        if !recorded(self.flags) {
            return;
        }
        let mut attrs = vec![
            ("mcp.method.name", Attr::Str(facts.method.to_owned())),
            ("toolgate.upstream", Attr::Str(facts.upstream.to_owned())),
            ("toolgate.outcome", Attr::Str(facts.outcome.to_owned())),
        ];
        attrs.extend(extra);
        if let Some(tool) = facts.tool {
            attrs.push(("gen_ai.tool.name", Attr::Str(tool.to_owned())));
            attrs.push(("gen_ai.operation.name", Attr::Str("execute_tool".into())));
        }
        if let Some(v) = facts.validation {
            attrs.push(("toolgate.validation", Attr::Str(v.to_owned())));
        }
        if let Some(id) = &self.request_id {
            attrs.push(("jsonrpc.request.id", Attr::Str(id.clone())));
        }
        let failed = facts.outcome != "forwarded";
        if failed {
            // For a call toolgate refused, why: `rejected_invalid`, `unknown`, `denied`, ….
            let why = facts
                .validation
                .filter(|_| facts.outcome == "answered")
                .unwrap_or(facts.outcome);
            attrs.push(("error.type", Attr::Str(why.to_owned())));
        }
        let name = match facts.tool {
            Some(tool) => format!("{} {tool}", facts.method),
            None => facts.method.to_owned(),
        };
        self.finish(name, attrs, failed);
    }

    /// Ends the server span and hands it to the exporter.
    pub fn finish(self, name: String, attrs: Vec<(&'static str, Attr)>, error: bool) {
        if !recorded(self.flags) {
            return;
        }
        let span = Span {
            trace_id: self.trace_id,
            span_id: self.span_id,
            parent: self.parent,
            trace_state: self.state,
            name,
            kind: SpanKind::Server,
            start: self.start,
            end: now_ns(),
            attrs,
            error,
        };
        self.tel.record(span);
    }
}

/// An export's headers: the protobuf media type, and those of `given`, an environment
/// variable's name and its value in the OpenTelemetry form (`key=value` pairs, comma-separated,
/// values percent-encoded). Marked sensitive, and no value is ever in an error: they are
/// credentials.
fn otlp_headers(given: Option<(&str, String)>) -> Result<http::HeaderMap, ConfigError> {
    let mut headers = http::HeaderMap::new();
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-protobuf"),
    );
    let Some((var, list)) = given else {
        return Ok(headers);
    };
    for (n, pair) in list
        .split(',')
        .enumerate()
        .filter(|(_, p)| !p.trim().is_empty())
    {
        let bad = |why: &str| ConfigError(format!("{var}: entry {}: {why}", n + 1));
        let (k, v) = pair.split_once('=').ok_or_else(|| bad("not key=value"))?;
        let name = http::HeaderName::from_bytes(k.trim().as_bytes())
            .map_err(|_| bad("not a header name"))?;
        let v = v.trim();
        let decoded = crate::text::percent_decode(v).unwrap_or_else(|| v.to_owned());
        let mut value = HeaderValue::from_str(&decoded).map_err(|_| bad("not a header value"))?;
        value.set_sensitive(true);
        headers.append(name, value);
    }
    Ok(headers)
}

/// What the export task sends with, and whether the collector is taking spans.
struct Exporter {
    up: HttpClient,
    /// Each export's headers: its media type, and any the environment gives.
    headers: http::HeaderMap,
    resource: Vec<(String, String)>,
    lost: Arc<Lost>,
    /// The last batch was lost: said once, until one goes through.
    failing: bool,
}

async fn export(
    mut rx: mpsc::Receiver<Span>,
    mut flushes: mpsc::Receiver<tokio::sync::oneshot::Sender<()>>,
    mut exporter: Exporter,
) {
    let mut batch = Vec::with_capacity(BATCH);
    let mut tick = tokio::time::interval(EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let mut asked = None;
        let flush = tokio::select! {
            span = rx.recv() => match span {
                Some(s) => {
                    batch.push(s);
                    batch.len() >= BATCH
                }
                None => true,
            },
            _ = tick.tick() => !batch.is_empty(),
            Some(done) = flushes.recv() => {
                while let Ok(s) = rx.try_recv() {
                    batch.push(s);
                }
                asked = Some(done);
                true
            }
        };
        if flush && !batch.is_empty() {
            exporter.send(&batch).await;
            batch.clear();
        }
        if let Some(done) = asked {
            let _ = done.send(());
        }
        if rx.is_closed() && rx.is_empty() && batch.is_empty() {
            return;
        }
    }
}

impl Exporter {
    async fn send(&mut self, spans: &[Span]) {
        let body = Bytes::from(otlp::encode(&self.resource, spans));
        let headers = self.headers.clone();
        let wait = Wait {
            answer: Duration::from_secs(5),
            stream_gap: Duration::from_secs(5),
        };
        let n = spans.len() as u64;
        match self.up.send(http::Method::POST, headers, body, wait).await {
            Ok(resp) if resp.status().is_success() => {
                // Read to the end, so the connection is kept, but no further than a
                // collector's answer needs: one that never ends must not fill the memory.
                let _ =
                    crate::net::body::read_limited(resp.into_body(), MAX_COLLECTOR_ANSWER).await;
                if std::mem::take(&mut self.failing) {
                    tracing::info!("traces: the collector takes spans again");
                }
            }
            Ok(resp) => {
                self.lost.refused.fetch_add(n, Ordering::Relaxed);
                self.lost_batch(&format!("the collector answered {}", resp.status()));
            }
            Err(e) => {
                self.lost.unreachable.fetch_add(n, Ordering::Relaxed);
                self.lost_batch(&e.to_string());
            }
        }
    }

    /// Says the first of a run of lost batches; the rest are counted and debug-logged only.
    fn lost_batch(&mut self, why: &str) {
        if std::mem::replace(&mut self.failing, true) {
            tracing::debug!(error = why, "traces: a batch of spans was lost");
        } else {
            tracing::warn!(
                error = why,
                "traces: the collector did not take a batch of spans; spans are lost until it does"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn export_headers_come_from_the_opentelemetry_list_and_no_value_is_in_an_error() {
        let h = otlp_headers(None).unwrap();
        assert_eq!(h.len(), 1);
        let var = "OTEL_EXPORTER_OTLP_HEADERS";
        let h = otlp_headers(Some((var, "x-api-key=s3cret, tenant = team%20a,,".into()))).unwrap();
        assert_eq!(h["x-api-key"], "s3cret");
        assert_eq!(h["tenant"], "team a");
        assert!(h["x-api-key"].is_sensitive());
        assert_eq!(h["content-type"], "application/x-protobuf");
        for (list, why) in [
            ("a=1,s3cret", "entry 2: not key=value"),
            ("bad name=s3cret", "entry 1: not a header name"),
            ("a=s3cret%0A", "entry 1: not a header value"),
        ] {
            let e = otlp_headers(Some((var, list.into()))).unwrap_err().0;
            assert_eq!(e, format!("{var}: {why}"));
            assert!(!e.contains("s3cret"));
        }
    }

    #[test]
    fn a_span_holds_at_most_a_bounded_text_whatever_the_client_sent() {
        let long = "n".repeat(1_000_000);
        let mut span = Span {
            trace_id: [1; 16],
            span_id: [2; 8],
            parent: None,
            trace_state: Some(long.clone()),
            name: format!("tools/call {long}"),
            kind: SpanKind::Server,
            start: 0,
            end: 0,
            attrs: vec![
                ("gen_ai.tool.name", Attr::Str(long.clone())),
                ("n", Attr::Int(1)),
            ],
            error: false,
        };
        span.clip();
        assert_eq!(span.name.len(), MAX_SPAN_TEXT);
        assert!(
            span.name.capacity() < 2 * MAX_SPAN_TEXT,
            "the rest is given back"
        );
        assert_eq!(
            span.trace_state.as_deref().map(str::len),
            Some(MAX_SPAN_TEXT)
        );
        assert_eq!(span.attrs[0].1, Attr::Str("n".repeat(MAX_SPAN_TEXT)));
        assert_eq!(span.attrs[1].1, Attr::Int(1));
    }

    #[test]
    fn traceparent_reads_and_writes() {
        let c = Context::parse(
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            Some("vendor=x"),
        )
        .unwrap();
        assert_eq!(to_hex(&c.trace_id), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(c.state.as_deref(), Some("vendor=x"));
        assert_eq!(
            c.header_for(&[1, 2, 3, 4, 5, 6, 7, 8]),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0102030405060708-01"
        );
        for bad in [
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "garbage",
        ] {
            assert!(Context::parse(bad, None).is_none(), "{bad}");
        }
    }
}
