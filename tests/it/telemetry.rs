//! OpenTelemetry traces against a real OTLP/HTTP receiver started here, which decodes the
//! protobuf with the OpenTelemetry project's own generated types: span names and attributes,
//! the client's `traceparent` (header or `params._meta`) continued, the upstream given the
//! hop's `traceparent`, the resource from the standard variables, and no argument value
//! anywhere. A collector that is not there costs requests nothing.

use crate::common;
use common::scripted::{Script, Scripted, open_tool};
use common::tempfile_lite::TempFile;
use common::*;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A collector on `127.0.0.1:0` keeping every request it decodes.
pub(crate) async fn collector() -> (String, Arc<Mutex<Vec<ExportTraceServiceRequest>>>) {
    let (endpoint, got, _) = collector_seeing_headers().await;
    (endpoint, got)
}

/// [`collector`], also keeping each export's headers.
async fn collector_seeing_headers() -> (
    String,
    Arc<Mutex<Vec<ExportTraceServiceRequest>>>,
    Arc<Mutex<Vec<http::HeaderMap>>>,
) {
    let got: Arc<Mutex<Vec<ExportTraceServiceRequest>>> = Arc::default();
    let seen: Arc<Mutex<Vec<http::HeaderMap>>> = Arc::default();
    let (sink, heads) = (got.clone(), seen.clone());
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |headers: http::HeaderMap, body: axum::body::Bytes| {
            let (sink, heads) = (sink.clone(), heads.clone());
            async move {
                assert_eq!(
                    headers.get("content-type").unwrap(),
                    "application/x-protobuf"
                );
                let req = ExportTraceServiceRequest::decode(body).expect("valid OTLP protobuf");
                sink.lock().unwrap().push(req);
                heads.lock().unwrap().push(headers);
                ""
            }
        }),
    );
    let addr = serve_on_loopback(app).await;
    (format!("http://{addr}"), got, seen)
}

fn text(v: &Option<AnyValue>) -> String {
    match v.as_ref().and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        other => format!("{other:?}"),
    }
}

fn attrs(kv: &[KeyValue]) -> Vec<(String, String)> {
    kv.iter().map(|a| (a.key.clone(), text(&a.value))).collect()
}

pub(crate) fn attr(span: &Span, key: &str) -> Option<String> {
    attrs(&span.attributes)
        .into_iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v)
}

/// The server span (a request's) named `name`.
fn request_span<'a>(spans: &'a [Span], name: &str) -> &'a Span {
    spans
        .iter()
        .find(|s| s.kind == 2 && s.name == name)
        .unwrap_or_else(|| panic!("no request span {name} in {spans:?}"))
}

/// The hop (a client span) under a request's span.
fn hop_under<'a>(spans: &'a [Span], request: &Span) -> &'a Span {
    spans
        .iter()
        .find(|s| s.kind == 3 && s.parent_span_id == request.span_id)
        .unwrap_or_else(|| panic!("no hop under {}: {spans:?}", request.name))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Every span received so far, once at least `n` are there (or after 10 s).
pub(crate) async fn spans(got: &Mutex<Vec<ExportTraceServiceRequest>>, n: usize) -> Vec<Span> {
    let all = || -> Vec<Span> {
        got.lock()
            .unwrap()
            .iter()
            .flat_map(|r| &r.resource_spans)
            .flat_map(|rs| &rs.scope_spans)
            .flat_map(|ss| ss.spans.clone())
            .collect()
    };
    for _ in 0..100 {
        if all().len() >= n {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    all()
}

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT: &str = "00f067aa0ba902b7";

#[tokio::test]
async fn requests_become_spans_that_continue_the_client_s_trace() {
    let (endpoint, got, export_headers) = collector_seeing_headers().await;
    let (up, seen) = Scripted::new(vec![
        json!({"name": "echo", "inputSchema": {"type": "object",
        "properties": {"secret": {"type": "string"}, "n": {"type": "integer"}}}}),
    ])
    .script(
        "echo",
        Script::Result(json!({"content": [{"type": "text", "text": "echoed"}]})),
    )
    .spawn()
    .await;
    let args = vec![
        "serve".to_string(),
        "--upstream".into(),
        up,
        "--listen".into(),
        "127.0.0.1:0".into(),
        "--admin-listen".into(),
        "127.0.0.1:0".into(),
    ];
    let tg = Toolgate::start_raw_env(
        args,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("OTEL_SERVICE_NAME", "gateway-under-test"),
            (
                "OTEL_EXPORTER_OTLP_HEADERS",
                "authorization=Bearer%20collector-s3cret, x-tenant=t1",
            ),
            (
                "OTEL_RESOURCE_ATTRIBUTES",
                "deployment.environment=test,team=a%20b",
            ),
        ],
    )
    .await;
    let traceparent = format!("00-{TRACE}-{PARENT}-01");
    let headers = [
        ("content-type", "application/json"),
        ("accept", ACCEPT),
        ("traceparent", traceparent.as_str()),
        ("tracestate", "vendor=1"),
    ];
    // A valid call, with a secret among its arguments.
    let body = call(7, "echo", json!({"secret": "hunter2-argument", "n": 1}));
    let r = request(http::Method::POST, &tg.url(), &headers, body).await;
    assert_eq!(result_text(&r.answer()), "echoed");
    // An invalid one, refused by toolgate.
    let body = call(
        8,
        "echo",
        json!({"secret": "hunter2-argument", "n": "many"}),
    );
    let r = request(http::Method::POST, &tg.url(), &headers, body).await;
    assert_eq!(r.answer()["result"]["isError"], true);
    // A trace context in params._meta, no header.
    let in_meta = json!({"jsonrpc": "2.0", "id": "m1", "method": "tools/call", "params": {
        "name": "echo", "arguments": {"n": 2},
        "_meta": {"traceparent": format!("00-{TRACE}-aaaaaaaaaaaaaaaa-01")}}});
    let r = post(&tg.url(), None, in_meta.to_string()).await;
    assert_eq!(result_text(&r.answer()), "echoed");

    // Three server spans, and a client span for each of the two forwarded calls.
    let spans = spans(&got, 5).await;
    let servers: Vec<&Span> = spans.iter().filter(|s| s.kind == 2).collect();
    let clients: Vec<&Span> = spans.iter().filter(|s| s.kind == 3).collect();
    let valid = servers
        .iter()
        .find(|s| attr(s, "jsonrpc.request.id").as_deref() == Some("7"))
        .expect("a server span for request 7");
    assert_eq!(valid.name, "tools/call echo");
    assert_eq!(hex(&valid.trace_id), TRACE);
    assert_eq!(
        hex(&valid.parent_span_id),
        PARENT,
        "continues the client's span"
    );
    assert_eq!(valid.trace_state, "vendor=1");
    for (k, v) in [
        ("mcp.method.name", "tools/call"),
        ("gen_ai.tool.name", "echo"),
        ("toolgate.outcome", "forwarded"),
        ("toolgate.validation", "forwarded"),
    ] {
        assert_eq!(attr(valid, k).as_deref(), Some(v), "{k}");
    }
    assert!(attr(valid, "error.type").is_none());
    // The upstream hop: a client span under the server span, and the upstream got it.
    let hop = clients
        .iter()
        .find(|c| c.parent_span_id == valid.span_id)
        .expect("a client span for the hop");
    assert_eq!(hop.trace_id, valid.trace_id);
    let sent = traceparents(&seen);
    assert!(
        sent.contains(&format!("00-{TRACE}-{}-01", hex(&hop.span_id))),
        "{sent:?}"
    );
    // The refused call: no hop, and why.
    let refused = servers
        .iter()
        .find(|s| attr(s, "jsonrpc.request.id").as_deref() == Some("8"))
        .unwrap();
    assert_eq!(
        attr(refused, "error.type").as_deref(),
        Some("rejected_invalid")
    );
    assert_eq!(refused.status.as_ref().map(|s| s.code), Some(2));
    assert!(!clients.iter().any(|c| c.parent_span_id == refused.span_id));
    // The context from _meta.
    let meta = servers
        .iter()
        .find(|s| attr(s, "jsonrpc.request.id").as_deref() == Some("m1"))
        .unwrap();
    assert_eq!(hex(&meta.trace_id), TRACE);
    assert_eq!(hex(&meta.parent_span_id), "aaaaaaaaaaaaaaaa");
    // The resource, and no argument value anywhere.
    let resource = attrs(
        &got.lock().unwrap()[0].resource_spans[0]
            .resource
            .as_ref()
            .unwrap()
            .attributes,
    );
    for (k, v) in [
        ("service.name", "gateway-under-test"),
        ("deployment.environment", "test"),
        ("team", "a b"),
    ] {
        assert!(
            resource.contains(&(k.to_string(), v.to_string())),
            "{resource:?}"
        );
    }
    let everything = format!("{:?}", got.lock().unwrap());
    assert!(
        !everything.contains("hunter2"),
        "argument values never leave"
    );
    // The collector's credentials, from the standard variable, on every export; never logged.
    for h in export_headers.lock().unwrap().iter() {
        assert_eq!(h["authorization"], "Bearer collector-s3cret");
        assert_eq!(h["x-tenant"], "t1");
    }
    assert!(!tg.logs().contains("collector-s3cret"), "{}", tg.logs());
}

#[tokio::test]
async fn a_missing_collector_costs_requests_nothing() {
    let closed = format!("127.0.0.1:{}", common::closed_port());
    let (up, _) = echo_upstream().await;
    let config = format!("[telemetry]\notlp_endpoint = \"http://{closed}\"\n");
    let tg = Toolgate::serve(&up, Some(&config)).await;
    for i in 0..50 {
        let r = post(&tg.url(), None, call(i, "echo", json!({}))).await;
        assert_eq!(result_text(&r.answer()), "echoed");
    }
    assert!(
        tg.logs().contains("exporting traces over OTLP/HTTP"),
        "{}",
        tg.logs()
    );
    // What was lost is counted, and said once.
    let lost = lost_spans(&tg, "unreachable", |n| n >= 100).await;
    assert_eq!(lost_spans(&tg, "refused", |_| true).await, 0);
    let logs = tg.logs();
    assert_eq!(logs.matches(STOPPED).count(), 1, "{logs}");
    assert!(
        logs.lines()
            .any(|l| l.contains(STOPPED) && l.contains("WARN")),
        "{logs}"
    );
    assert!(lost >= 100, "two spans a call: {lost}");
}

/// A client that sampled its trace out (`traceparent` flags `00`) gets no spans of
/// toolgate's, and the server behind is told the same; a sampled trace's spans are made. With
/// `OTEL_TRACES_SAMPLER=always_off`, a trace toolgate starts is not recorded either.
#[tokio::test]
async fn a_trace_the_client_sampled_out_gets_no_spans_and_passes_on_unsampled() {
    let (endpoint, got) = collector().await;
    let (up, seen) = echo_upstream().await;
    let args = |up: &str| {
        [
            "serve",
            "--upstream",
            up,
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "127.0.0.1:0",
        ]
        .map(String::from)
        .to_vec()
    };
    let tg =
        Toolgate::start_raw_env(args(&up), &[("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)]).await;
    let unsampled = "11111111111111111111111111111111";
    for (id, trace, flags) in [(1, unsampled, "00"), (2, TRACE, "01")] {
        let traceparent = format!("00-{trace}-{PARENT}-{flags}");
        let headers = [
            ("content-type", "application/json"),
            ("accept", ACCEPT),
            ("traceparent", traceparent.as_str()),
        ];
        let r = request(
            http::Method::POST,
            &tg.url(),
            &headers,
            call(id, "echo", json!({})),
        )
        .await;
        assert_eq!(result_text(&r.answer()), "echoed");
    }
    // The sampled call's server and client spans; the other's would have come first.
    let spans = spans(&got, 2).await;
    assert_eq!(spans.len(), 2, "{spans:?}");
    assert!(spans.iter().all(|s| hex(&s.trace_id) == TRACE));
    let sent = traceparents(&seen);
    assert!(
        sent.iter()
            .any(|t| t.starts_with(&format!("00-{unsampled}-")) && t.ends_with("-00")),
        "{sent:?}"
    );
    assert!(
        sent.iter()
            .any(|t| t.starts_with(&format!("00-{TRACE}-")) && t.ends_with("-01"))
    );

    let (endpoint, _) = collector().await;
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_TRACES_SAMPLER", "always_off"),
    ];
    let tg = Toolgate::start_raw_env(args(&up), &env).await;
    let r = post(&tg.url(), None, call(3, "echo", json!({}))).await;
    assert_eq!(result_text(&r.answer()), "echoed");
    // The decision the server is told is the one its spans follow (unit-tested).
    let last = seen.seen_headers.lock().unwrap().last().cloned().unwrap();
    assert!(
        last["traceparent"].to_str().unwrap().ends_with("-00"),
        "{last:?}"
    );
}

/// `OTEL_SDK_DISABLED=true` turns tracing off over an endpoint the configuration gives.
#[tokio::test]
async fn the_standard_switch_turns_tracing_off() {
    let (endpoint, _) = collector().await;
    let (up, _) = echo_upstream().await;
    let config = TempFile::new(&format!("[telemetry]\notlp_endpoint = \"{endpoint}\"\n"));
    let args = [
        "serve",
        "--upstream",
        &up,
        "--listen",
        "127.0.0.1:0",
        "--admin-listen",
        "127.0.0.1:0",
        "--config",
        &config.path.display().to_string(),
    ]
    .map(String::from)
    .to_vec();
    let tg = Toolgate::start_raw_env(args, &[("OTEL_SDK_DISABLED", "true")]).await;
    let r = post(&tg.url(), None, call(1, "echo", json!({}))).await;
    assert_eq!(result_text(&r.answer()), "echoed");
    assert!(!tg.logs().contains("exporting traces"), "{}", tg.logs());
    let metrics = tg.admin_get("/metrics").await.text();
    assert!(!metrics.contains("toolgate_spans_lost_total"), "{metrics}");
}

/// The `traceparent` of every request the server got.
fn traceparents(seen: &Scripted) -> Vec<String> {
    seen.seen_headers
        .lock()
        .unwrap()
        .iter()
        .filter_map(|h| h.get("traceparent").map(|v| v.to_str().unwrap().to_owned()))
        .collect()
}

/// A server with one tool, `echo`, answering "echoed".
async fn echo_upstream() -> (String, Arc<Scripted>) {
    Scripted::new(vec![open_tool("echo")])
        .script(
            "echo",
            Script::Result(json!({"content": [{"type": "text", "text": "echoed"}]})),
        )
        .spawn()
        .await
}

/// What the log says when the collector stops taking spans, and when it takes them again.
const STOPPED: &str = "the collector did not take a batch of spans";
const AGAIN: &str = "the collector takes spans again";

/// `toolgate_spans_lost_total` for `reason`, once `ready` holds for it (or after 10 s).
async fn lost_spans(tg: &Toolgate, reason: &str, ready: impl Fn(u64) -> bool) -> u64 {
    let series = format!("toolgate_spans_lost_total{{reason=\"{reason}\"}} ");
    let mut n = 0;
    for _ in 0..200 {
        let metrics = tg.admin_get("/metrics").await.text();
        n = metrics
            .lines()
            .find_map(|l| l.strip_prefix(&series))
            .unwrap_or_else(|| panic!("no {series} in {metrics}"))
            .parse()
            .unwrap();
        if ready(n) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    n
}

/// A collector that refuses (503) is counted apart from one not there; the warning comes
/// once for a run of lost batches, and the log says when spans go through again.
#[tokio::test]
async fn a_refusing_collector_is_counted_and_said_once_until_it_takes_spans_again() {
    let refusing = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let taken = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (r, t) = (refusing.clone(), taken.clone());
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move || {
            let (r, t) = (r.clone(), t.clone());
            async move {
                if r.load(std::sync::atomic::Ordering::SeqCst) {
                    http::StatusCode::SERVICE_UNAVAILABLE
                } else {
                    t.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    http::StatusCode::OK
                }
            }
        }),
    );
    let addr = serve_on_loopback(app).await;
    let (up, _) = echo_upstream().await;
    let config = format!("[telemetry]\notlp_endpoint = \"http://{addr}\"\n");
    let tg = Toolgate::serve(&up, Some(&config)).await;

    for round in 0..2 {
        let r = post(&tg.url(), None, call(round, "echo", json!({}))).await;
        assert_eq!(result_text(&r.answer()), "echoed");
        lost_spans(&tg, "refused", |n| n >= 2 * (round as u64 + 1)).await;
    }
    assert_eq!(lost_spans(&tg, "refused", |_| true).await, 4);
    assert_eq!(lost_spans(&tg, "unreachable", |_| true).await, 0);
    let logs = tg.logs_when(|l| l.contains(STOPPED)).await;
    assert_eq!(logs.matches(STOPPED).count(), 1, "{logs}");
    assert!(logs.contains("503"), "{logs}");

    refusing.store(false, std::sync::atomic::Ordering::SeqCst);
    let r = post(&tg.url(), None, call(9, "echo", json!({}))).await;
    assert_eq!(result_text(&r.answer()), "echoed");
    let logs = tg.logs_when(|l| l.contains(AGAIN)).await;
    assert_eq!(logs.matches(AGAIN).count(), 1, "{logs}");
    assert_eq!(taken.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(lost_spans(&tg, "refused", |_| true).await, 4);
    assert_eq!(logs.matches(STOPPED).count(), 1, "{logs}");
}

/// `toolgate stdio` traces as `serve` does: a server span per request, named and attributed
/// alike, continuing a `traceparent` the client put in `params._meta`, ended when its answer
/// is written or toolgate answers it, with the hop to the server a client span under it; the
/// last spans are sent before the process ends.
#[tokio::test]
async fn the_stdio_front_traces_its_requests_alike() {
    let (endpoint, got) = collector().await;
    let config = format!("[telemetry]\notlp_endpoint = \"{endpoint}\"\n");
    let command = common::peers::stdio_fixture(&[]).await;
    let (mut g, _file) = common::stdio_gate::StdioGate::start(&command, Some(&config));
    g.initialize().await;
    let traced = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "add", "arguments": {"a": 1, "b": 2},
        "_meta": {"traceparent": format!("00-{TRACE}-{PARENT}-01")}}});
    assert_eq!(g.ask(traced).await["result"]["content"][0]["text"], "3");
    let invalid = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "add", "arguments": {"a": 1, "b": "SECRET-VALUE"}}});
    assert_eq!(g.ask(invalid).await["result"]["isError"], true);
    // A call its client cancels: its hop ends then, as cancelled.
    let slow = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
        "name": "slow", "arguments": {}}});
    g.send(&slow.to_string()).await;
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 4, "reason": "the user moved on"}});
    g.send(&cancel.to_string()).await;
    let after = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
        "name": "add", "arguments": {"a": 2, "b": 2}}});
    // The next call is answered as it is.
    assert_eq!(
        g.ask(after).await,
        json!({"jsonrpc": "2.0", "id": 5, "result": {"content": [{"type": "text", "text": "4"}]}})
    );
    drop(g.stdin.take());
    let _ = tokio::time::timeout(Duration::from_secs(10), g.child.wait()).await;
    // The server spans, and the hops of the forwarded requests.
    let spans = spans(&got, 5).await;
    let named = |name: &str, id: &str| {
        spans
            .iter()
            .find(|s| s.name == name && attr(s, "jsonrpc.request.id").as_deref() == Some(id))
            .unwrap_or_else(|| panic!("no span {name} for request {id} in {spans:?}"))
            .clone()
    };
    let forwarded = named("tools/call add", "2");
    assert_eq!(hex(&forwarded.trace_id), TRACE);
    assert_eq!(hex(&forwarded.parent_span_id), PARENT);
    assert_eq!(
        attr(&forwarded, "toolgate.outcome").as_deref(),
        Some("forwarded")
    );
    assert_eq!(attr(&forwarded, "gen_ai.tool.name").as_deref(), Some("add"));
    assert_eq!(
        attr(&forwarded, "mcp.method.name").as_deref(),
        Some("tools/call")
    );
    assert_eq!(attr(&forwarded, "error.type"), None);
    // The hop to the child is a client span under the call's, as over HTTP.
    let hop = hop_under(&spans, &forwarded);
    assert_eq!(hop.trace_id, forwarded.trace_id);
    assert_eq!(attr(hop, "mcp.method.name").as_deref(), Some("tools/call"));
    assert_eq!(attr(hop, "toolgate.server").as_deref(), Some("stdio"));
    let refused = named("tools/call add", "3");
    assert_eq!(
        attr(&refused, "toolgate.outcome").as_deref(),
        Some("answered")
    );
    assert_eq!(
        attr(&refused, "error.type").as_deref(),
        Some("rejected_invalid")
    );
    named("initialize", "0");
    let cancelled = named("tools/call slow", "4");
    assert_eq!(
        attr(&cancelled, "toolgate.outcome").as_deref(),
        Some("cancelled")
    );
    let hop = hop_under(&spans, &cancelled);
    assert_eq!(attr(hop, "error.type").as_deref(), Some("cancelled"));
    let everything = format!("{spans:?}");
    assert!(
        !everything.contains("SECRET-VALUE"),
        "no argument value in a span"
    );
}

/// `toolgate stdio --upstream URL` hands the HTTP server its hop's trace context, as `serve`
/// does: the server's `traceparent` names the client span under the call's.
#[tokio::test]
async fn the_stdio_front_hands_an_http_server_the_hops_trace_context() {
    let (endpoint, got) = collector().await;
    let (url, seen) = echo_upstream().await;
    let config = common::tempfile_lite::TempFile::new(&format!(
        "[telemetry]\notlp_endpoint = \"{endpoint}\"\n"
    ));
    let path = config.path.display().to_string();
    let args = ["stdio", "--config", &path, "--upstream", &url].map(String::from);
    let mut g = common::stdio_gate::StdioGate::start_args(args.to_vec());
    g.initialize().await;
    let traced = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "echo", "arguments": {},
        "_meta": {"traceparent": format!("00-{TRACE}-{PARENT}-01")}}});
    assert_eq!(
        g.ask(traced).await["result"]["content"][0]["text"],
        "echoed"
    );
    drop(g.stdin.take());
    let _ = tokio::time::timeout(Duration::from_secs(10), g.child.wait()).await;
    let spans = spans(&got, 4).await;
    let call = spans
        .iter()
        .find(|s| s.kind == 2 && s.name == "tools/call echo")
        .unwrap_or_else(|| panic!("no span for the call in {spans:?}"));
    assert_eq!(hex(&call.trace_id), TRACE);
    assert_eq!(hex(&call.parent_span_id), PARENT);
    let hop = hop_under(&spans, call);
    assert_eq!(attr(hop, "toolgate.server").as_deref(), Some("http"));
    let sent = traceparents(&seen);
    let expected = format!("00-{TRACE}-{}-01", hex(&hop.span_id));
    assert!(sent.contains(&expected), "{expected} in {sent:?}");
}

/// `serve -- CMD` in front of the stdio fixture, its spans exported to a collector of the
/// test's own.
async fn traced_in_front_of_stdio_fixture() -> (Toolgate, Arc<Mutex<Vec<ExportTraceServiceRequest>>>)
{
    let (endpoint, got) = collector().await;
    let config = format!("[telemetry]\notlp_endpoint = \"{endpoint}\"\n");
    let command = common::peers::stdio_fixture(&[]).await;
    (Toolgate::in_front_of(&command, Some(&config)).await, got)
}

/// In front of a stdio server (`serve -- CMD`) the hop to the child is a client span under
/// the request's server span, as the hop to an HTTP server is. A call its client cancels is
/// answered `-32800` by toolgate, and its hop says it was cancelled, as behind every front.
#[tokio::test]
async fn the_hop_to_a_stdio_child_is_a_client_span() {
    let (tg, got) = traced_in_front_of_stdio_fixture().await;
    let s = open_session(&tg.url()).await;
    let a = post(&tg.url(), Some(&s), call(1, "add", json!({"a": 1, "b": 2})))
        .await
        .json();
    assert_eq!(result_text(&a), "3");
    let (url, sid) = (tg.url(), s.clone());
    let slow =
        tokio::spawn(async move { post(&url, Some(&sid), call(2, "slow", json!({}))).await });
    tg.logs_when(|l| l.contains("slow call begun")).await;
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 2, "reason": "the user moved on"}});
    assert_eq!(
        post(&tg.url(), Some(&s), cancel.to_string()).await.status,
        202
    );
    assert_eq!(
        slow.await.unwrap().json(),
        json!({"jsonrpc": "2.0", "id": 2, "error": {"code": -32800, "message": "Request cancelled"}})
    );
    let spans = spans(&got, 8).await;
    let cancelled = request_span(&spans, "tools/call slow");
    let hop = hop_under(&spans, cancelled);
    assert_eq!(attr(hop, "error.type").as_deref(), Some("cancelled"));
    let server = request_span(&spans, "tools/call add");
    let hop = hop_under(&spans, server);
    assert_eq!(hop.trace_id, server.trace_id);
    assert_eq!(attr(hop, "mcp.method.name").as_deref(), Some("tools/call"));
    assert_eq!(attr(hop, "toolgate.server").as_deref(), Some("stdio"));
}

/// A 2026-07-28 client's call to a handshake-era stdio server (`serve -- CMD`, bridged),
/// cancelled by the client's own `notifications/cancelled`: the POST is answered `-32800`
/// under the client's id, and the hop says it was cancelled, as an unbridged call's does.
#[tokio::test]
async fn a_bridged_call_cancelled_ends_its_hop_as_cancelled() {
    let (tg, got) = traced_in_front_of_stdio_fixture().await;
    let meta = common::modes::modern_meta();
    let slow = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "slow", "arguments": {}, "_meta": meta}});
    let url = tg.url();
    let call = tokio::spawn(async move { post_modern(&url, "tools/call", slow).await });
    tg.logs_when(|l| l.contains("slow call begun")).await;
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 7, "reason": "the user moved on", "_meta": meta}});
    let r = post_modern(&tg.url(), "notifications/cancelled", cancel).await;
    assert_eq!(r.status, 202, "{}", r.text());
    assert_eq!(
        call.await.unwrap().json(),
        json!({"jsonrpc": "2.0", "id": 7, "error": {"code": -32800, "message": "Request cancelled"}})
    );
    let spans = spans(&got, 3).await;
    let hop = hop_under(&spans, request_span(&spans, "tools/call slow"));
    assert_eq!(attr(hop, "error.type").as_deref(), Some("cancelled"));
}
