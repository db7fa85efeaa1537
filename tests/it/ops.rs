//! Operating toolgate: the admin endpoints, every metric family, the access log and its
//! request id, and a graceful shutdown that lets in-flight streams finish.

use crate::common;
use common::scripted::{Script, Scripted, open_tool};
use common::stdio_gate::StdioGate;
use common::*;
use serde_json::json;
use std::time::{Duration, Instant};
use toolgate::demo::Options;

#[tokio::test]
async fn health_and_readiness() {
    let (_demo, tg, upstream) = demo_behind_toolgate(Options::default(), None).await;
    let r = tg.admin_get("/healthz").await;
    assert_eq!((r.status, r.text()), (200, "ok\n".to_string()));
    let r = tg.admin_get("/readyz").await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.json(),
        json!({"ready": true, "upstreams": {"default": {"ready": true}}})
    );

    let port = closed_port();
    // Two upstreams, one of them down: toolgate still serves the other, so it is ready, and
    // the body says which one is not; each answers for itself by name.
    let config = format!(
        "[[upstreams]]\nname = \"up\"\nurl = \"{}\"\n[[upstreams]]\nname = \"gone\"\nurl = \"http://127.0.0.1:{port}/mcp\"\n",
        upstream
    );
    let down = Toolgate::start(&mut vec!["serve".to_string()], Some(&config)).await;
    let r = down.admin_get("/readyz").await;
    assert_eq!(r.status, 200, "{}", r.text());
    let body = r.json();
    assert_eq!(body["ready"], true);
    assert_eq!(body["upstreams"]["up"], json!({"ready": true}));
    assert_eq!(body["upstreams"]["gone"]["ready"], false);
    assert!(
        body["upstreams"]["gone"]["error"]
            .as_str()
            .unwrap()
            .starts_with(&format!("cannot connect to 127.0.0.1:{port}")),
        "{body}"
    );
    let r = down.admin_get("/readyz?upstream=up").await;
    assert_eq!(
        (r.status, r.json()),
        (
            200,
            json!({"ready": true, "upstreams": {"up": {"ready": true}}})
        )
    );
    let r = down.admin_get("/readyz?upstream=gone").await;
    assert_eq!(r.status, 503, "{}", r.text());
    assert_eq!(r.json()["ready"], false);
    let r = down.admin_get("/readyz?upstream=nope").await;
    assert_eq!(r.status, 404, "{}", r.text());
    assert_eq!(
        down.admin_get("/healthz").await.status,
        200,
        "alive even when not ready"
    );
}

/// Each named server is held to its own `limits.upstream_timeout` when it gives one, and to
/// `[limits]`' otherwise, whichever kind of server it is: a tool that answers in two seconds
/// is unavailable on the servers held to one second and answered on those given five.
#[tokio::test]
async fn each_named_server_is_held_to_its_own_timeout() {
    let child = json!(common::peers::stdio_fixture(&[]).await);
    let done = json!({"content": [{"type": "text", "text": "slow done"}]});
    let scripted = || {
        Scripted::new(vec![open_tool("slow")])
            .script("slow", Script::Slow(Duration::from_secs(2), done.clone()))
            .spawn()
    };
    let ((quick, _), (long, _)) = tokio::join!(scripted(), scripted());
    let config = format!(
        "[limits]\nupstream_timeout = \"1s\"\n\n[[upstreams]]\nname = \"quick\"\nurl = \"{quick}\"\n\n[[upstreams]]\nname = \"long\"\nurl = \"{long}\"\nlimits = {{ upstream_timeout = \"5s\" }}\n\n[[upstreams]]\nname = \"quick-child\"\ncommand = {child}\n\n[[upstreams]]\nname = \"long-child\"\ncommand = {child}\nlimits = {{ upstream_timeout = \"5s\" }}\n"
    );
    let tg = Toolgate::start(&mut vec!["serve".to_string()], Some(&config)).await;
    let slow_at = |name: &'static str| {
        let url = format!("http://{}/{name}/mcp", tg.addr);
        async move {
            let session = open_session(&url).await;
            post(&url, Some(&session), call(1, "slow", json!({})))
                .await
                .answer()
        }
    };
    let answers = tokio::join!(
        slow_at("quick"),
        slow_at("long"),
        slow_at("quick-child"),
        slow_at("long-child")
    );
    let unavailable = json!({"jsonrpc": "2.0", "id": 1, "result": {
        "content": [{"type": "text", "text": "The tool server is unavailable: the tool server did not answer within 1s. It may still be working or overloaded; retrying later may help."}],
        "isError": true,
        "_meta": {"toolgate/upstream": {"code": "upstream_unavailable", "reason": "the tool server did not answer within 1s"}}
    }});
    let answered = json!({"jsonrpc": "2.0", "id": 1, "result": done});
    assert_eq!(answers.0, unavailable, "quick");
    assert_eq!(answers.1, answered, "long");
    assert_eq!(answers.2, unavailable, "quick-child");
    assert_eq!(answers.3, answered, "long-child");
}

/// Each named stdio server's children are bounded by its own `[upstreams.stdio]` when it
/// gives them, and by `[stdio]` otherwise: the server held to one child refuses a second
/// session while the other opens as many as `[stdio]` allows.
#[tokio::test]
async fn each_named_stdio_server_is_held_to_its_own_bounds() {
    let child = json!(common::peers::stdio_fixture(&[]).await);
    let config = format!(
        "[stdio]\nmax_sessions = 3\n\n[[upstreams]]\nname = \"one\"\ncommand = {child}\nstdio = {{ max_sessions = 1 }}\n\n[[upstreams]]\nname = \"many\"\ncommand = {child}\n"
    );
    let tg = Toolgate::start(&mut vec!["serve".to_string()], Some(&config)).await;
    let (one, many) = (
        format!("http://{}/one/mcp", tg.addr),
        format!("http://{}/many/mcp", tg.addr),
    );
    let _held = open_session(&one).await;
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let refused = post(&one, None, init.to_string()).await;
    assert_eq!(refused.status, 503);
    assert_eq!(
        refused.json(),
        json!({"jsonrpc": "2.0", "id": 0, "error": {"code": -32603,
            "message": "Too many sessions: this gateway runs at most 1 of this tool server's processes; try again later"}})
    );
    for _ in 0..3 {
        open_session(&many).await;
    }
    assert_eq!(post(&many, None, init.to_string()).await.status, 503);
}

/// An HTTP server on `/mcp` and a stdio server toolgate starts (`[[upstreams]] command`) on
/// `/files/mcp`, behind one listener: each path reaches its own server with its own rules,
/// answers and counts, and `/readyz` names both.
#[tokio::test]
async fn an_http_server_and_a_stdio_server_each_on_its_own_path() {
    let command = json!(common::peers::stdio_fixture(&[]).await);
    let config = format!("[[upstreams]]\nname = \"files\"\ncommand = {command}\n");
    let (demo, tg, _) = demo_behind_toolgate(Options::default(), Some(&config)).await;
    let files = format!("http://{}/files/mcp", tg.addr);
    let (at_demo, at_files) = (open_session(&tg.url()).await, open_session(&files).await);

    let r = post(
        &tg.url(),
        Some(&at_demo),
        call(1, "add", json!({"a": "40", "b": 2})),
    )
    .await;
    assert_eq!(
        r.answer(),
        json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "42"}], "structuredContent": {"result": 42}}})
    );
    let r = post(
        &files,
        Some(&at_files),
        call(2, "add", json!({"a": "1", "b": 2})),
    )
    .await;
    assert_eq!(
        r.answer(),
        json!({"jsonrpc": "2.0", "id": 2, "result": {"content": [{"type": "text", "text": "3"}]}})
    );
    let r = post(
        &files,
        Some(&at_files),
        call(3, "add", json!({"a": "x", "b": 2})),
    )
    .await;
    assert_eq!(
        r.answer(),
        json!({"jsonrpc": "2.0", "id": 3, "result": {
            "content": [{"type": "text", "text": "Invalid arguments for tool \"add\" (1 problem):\n- a: expected an integer, got string \"x\" (parameter description: first)\nCorrect the arguments and call the tool again."}],
            "isError": true,
            "_meta": {"toolgate/validation": {"code": "invalid_arguments", "tool": "add",
                "parameter_errors": {"/a": "expected an integer, got string \"x\""}}}}})
    );
    // A tool only the other server has is unknown here.
    let r = post(&files, Some(&at_files), call(4, "book_flight", json!({}))).await;
    assert_eq!(
        r.answer(),
        json!({"jsonrpc": "2.0", "id": 4, "error": {"code": -32602, "message": "Unknown tool: book_flight",
            "data": {"tool": "book_flight", "suggestions": []}}})
    );
    assert_eq!(
        demo.calls().len(),
        1,
        "only /mcp's call reached the HTTP server"
    );

    let r = tg.admin_get("/readyz").await;
    assert_eq!(
        r.json(),
        json!({"ready": true, "upstreams": {"default": {"ready": true}, "files": {"ready": true}}})
    );
    let metrics = tg.admin_get("/metrics").await.text();
    for line in [
        "toolgate_tool_calls_total{upstream=\"default\",tool=\"add\",outcome=\"coerced\"} 1",
        "toolgate_tool_calls_total{upstream=\"files\",tool=\"add\",outcome=\"coerced\"} 1",
        "toolgate_tool_calls_total{upstream=\"files\",tool=\"add\",outcome=\"rejected_invalid\"} 1",
    ] {
        assert!(metrics.contains(line), "{line}\n{metrics}");
    }
    assert!(
        metrics.contains("toolgate_stdio_sessions{upstream=\"files\"} 1"),
        "{metrics}"
    );
}

#[tokio::test]
async fn every_metric_family_counts() {
    let (_demo, tg, _) = demo_behind_toolgate(Options::default(), None).await;
    let s = open_session(&tg.url()).await;
    post(&tg.url(), Some(&s), call(1, "add", json!({"a": 1, "b": 2}))).await;
    post(
        &tg.url(),
        Some(&s),
        call(2, "add", json!({"a": "1", "b": 2})),
    )
    .await;
    post(
        &tg.url(),
        Some(&s),
        call(
            3,
            "book_flight",
            json!({"origin": "lhr", "destination": "JFK", "departureDate": "01/01/2999"}),
        ),
    )
    .await;
    post(&tg.url(), Some(&s), call(4, "no_such_tool", json!({}))).await;
    post(
        &tg.url(),
        Some(&s),
        call(5, "lookup_order", json!({"orderId": "7"})),
    )
    .await;
    post(&tg.url(), Some(&s), json!({"jsonrpc": "2.0", "id": 6, "method": "resources/read", "params": {"uri": "demo://nope"}}).to_string()).await;
    post(&tg.url(), None, "{not json").await;
    let m = tg.admin_get("/metrics").await;
    assert_eq!(
        m.headers["content-type"],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    let text = m.text();
    for line in [
        "toolgate_tool_calls_total{upstream=\"default\",tool=\"add\",outcome=\"forwarded\"} 1",
        "toolgate_tool_calls_total{upstream=\"default\",tool=\"add\",outcome=\"coerced\"} 1",
        "toolgate_tool_calls_total{upstream=\"default\",tool=\"book_flight\",outcome=\"rejected_invalid\"} 1",
        "toolgate_tool_calls_total{upstream=\"default\",tool=\"(unlisted)\",outcome=\"unknown\"} 1",
        "toolgate_tool_calls_total{upstream=\"default\",tool=\"lookup_order\",outcome=\"rewritten\"} 1",
        "toolgate_violations_total{upstream=\"default\",tool=\"book_flight\",keyword=\"pattern\"} 1",
        "toolgate_rewrites_total{upstream=\"default\",kind=\"tool_error\"} 1",
        "toolgate_rewrites_total{upstream=\"default\",kind=\"resource_not_found\"} 1",
        "toolgate_requests_total{upstream=\"default\",method=\"tools/call\",outcome=\"answered\"} 2",
        "toolgate_requests_total{upstream=\"default\",method=\"tools/call\",outcome=\"forwarded\"} 3",
        "toolgate_requests_total{upstream=\"default\",method=\"initialize\",outcome=\"forwarded\"} 1",
        "toolgate_requests_total{upstream=\"default\",method=\"-\",outcome=\"rejected\"} 1",
        "toolgate_catalog_scopes 1",
        "toolgate_schema_compile_failures_total 0",
        // The scrape comes through the admin listener: no client request is in service.
        "toolgate_requests_in_flight 0",
        &format!(
            "toolgate_build_info{{version=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION")
        ),
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing {line:?} in\n{text}"
        );
    }
    assert!(
        text.contains("toolgate_upstream_latency_seconds_count{upstream=\"default\"} "),
        "{text}"
    );
    // The process, as Prometheus clients name it.
    for name in [
        "process_resident_memory_bytes",
        "process_cpu_seconds_total",
        "process_open_fds",
        "process_max_fds",
        "process_start_time_seconds",
    ] {
        assert!(
            text.lines().any(|l| l.starts_with(&format!("{name} "))),
            "missing {name} in\n{text}"
        );
    }
    assert!(
        text.lines().any(
            |l| l.starts_with("toolgate_catalog_schemas ") && l != "toolgate_catalog_schemas 0"
        ),
        "{text}"
    );
}

#[tokio::test]
async fn access_log_and_request_ids() {
    let (demo, tg, _) =
        demo_behind_toolgate(Options::default(), Some("[log]\naccess = true\n")).await;
    let secret_args =
        json!({"origin": "LHR", "destination": "JFK", "departureDate": "SECRET-VALUE-1"});
    let r = request(
        http::Method::POST,
        &tg.url(),
        &[
            ("content-type", "application/json"),
            ("accept", ACCEPT),
            ("x-request-id", "req-abc-123"),
            ("authorization", "Bearer TOKEN-XYZ"),
            ("cookie", "sid=COOKIE-QQQ"),
        ],
        call(1, "book_flight", secret_args),
    )
    .await;
    assert_eq!(r.headers["x-request-id"], "req-abc-123");
    let r = post(&tg.url(), None, call(2, "add", json!({"a": 1, "b": 2}))).await;
    let minted = r.headers["x-request-id"].to_str().unwrap().to_string();
    assert!(minted.starts_with("toolgate-"), "{minted}");
    let upstream_saw = demo
        .seen()
        .into_iter()
        .find(|x| x.body["method"] == "tools/call")
        .unwrap();
    assert_eq!(
        upstream_saw.headers["x-request-id"],
        minted.as_str(),
        "the id goes upstream too"
    );
    let logs = tg.logs_when(|l| l.contains("req-abc-123")).await;
    let line = logs
        .lines()
        .find(|l| l.contains("req-abc-123"))
        .unwrap_or_else(|| panic!("{logs}"));
    for part in [
        "method=\"tools/call\"",
        "tool=\"book_flight\"",
        "outcome=\"answered\"",
        "status=200",
        "latency_us=",
    ] {
        assert!(line.contains(part), "{part} in {line}");
    }
    for secret in ["SECRET-VALUE-1", "TOKEN-XYZ", "COOKIE-QQQ"] {
        assert!(
            !logs.contains(secret),
            "{secret} leaked into the logs:\n{logs}"
        );
    }
}

#[tokio::test]
async fn shutdown_lets_in_flight_streams_finish() {
    let (_demo, mut tg, _) = demo_behind_toolgate(
        Options::default(),
        Some("[limits]\nshutdown_grace = \"10s\"\n"),
    )
    .await;
    let s = open_session(&tg.url()).await;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "countdown", "arguments": {"steps": 3, "intervalMs": 300}, "_meta": {"progressToken": 1}}}).to_string();
    let url = tg.url();
    let stream = tokio::spawn(async move { post(&url, Some(&s), body).await });
    tokio::time::sleep(Duration::from_millis(150)).await;
    let started = Instant::now();
    std::process::Command::new("kill")
        .args(["-TERM", &tg.pid().to_string()])
        .status()
        .unwrap();
    let r = stream.await.unwrap();
    let msgs = r.messages();
    assert_eq!(
        msgs.len(),
        4,
        "three progress notifications and the answer: {msgs:?}"
    );
    assert_eq!(msgs[3]["result"]["content"][0]["text"], "Lift-off!");
    let status = tg.wait().await;
    assert!(status.success(), "{status:?}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "exited once the stream was done, before the grace period"
    );
    let logs = tg.logs_when(|l| l.contains("shutting down")).await;
    assert!(logs.contains("shutting down"), "{logs}");
}

/// With `log.format = "json"`, a refused call's line is one JSON object whose `keywords` is
/// an array and whose `outcome` is the metric's.
#[tokio::test]
async fn json_logs_keep_lists_as_arrays() {
    let (_demo, tg, _) =
        demo_behind_toolgate(Default::default(), Some("[log]\nformat = \"json\"\n")).await;
    let s = open_session(&tg.url()).await;
    let bad = json!({"origin": "lhr", "destination": "JFK", "departureDate": "01/01/2999"});
    post(&tg.url(), Some(&s), call(2, "book_flight", bad)).await;
    let logs = tg.logs_when(|l| l.contains("rejected_invalid")).await;
    let line = logs
        .lines()
        .find(|l| l.contains("rejected_invalid"))
        .expect("the refusal is logged");
    let line: serde_json::Value = serde_json::from_str(line).expect("one JSON object");
    assert_eq!(line["fields"]["keywords"], json!(["pattern"]), "{line}");
    assert_eq!(line["fields"]["outcome"], "rejected_invalid", "{line}");
    assert_eq!(line["fields"]["tool"], "book_flight", "{line}");
}

/// An answer passed on unread (a method no rule reads) whose body breaks off after its head:
/// the HTTP client's connection breaks with it, as nothing else can tell it, and the log
/// says why, at the rate a server's failures are said. Over stdio the request is answered
/// with why, and said once: by its answer, not by the body too.
#[tokio::test]
async fn an_answer_passed_on_unread_that_breaks_off_is_said() {
    use http_body_util::BodyExt;
    let said = |logs: &str, level: &str| {
        (logs.lines())
            .filter(|l| l.contains(level) && l.contains("no usable answer from the tool server"))
            .filter(|l| l.contains("the stream broke before the answer"))
            .count()
    };
    let scripted = || {
        Scripted::new(vec![open_tool("add")])
            .script("prompt cut", Script::JsonThenReset(json!({"messages": []})))
    };
    let ask =
        json!({"jsonrpc": "2.0", "id": 7, "method": "prompts/get", "params": {"name": "cut"}});
    let (up, _) = scripted().spawn().await;
    let tg = Toolgate::serve(&up, None).await;
    let req = http::Request::post(tg.url())
        .header("content-type", "application/json")
        .header("accept", common::ACCEPT)
        .body(http_body_util::Full::new(bytes::Bytes::from(
            ask.to_string(),
        )))
        .unwrap();
    let resp = common::client().request(req).await.unwrap();
    assert_eq!(resp.status(), 200, "the head went as the server sent it");
    let got = resp.into_body().collect().await.map(|b| b.to_bytes());
    assert!(got.is_err(), "the body breaks off: {got:?}");
    let logs = tg.logs_when(|l| said(l, "") == 1).await;
    assert_eq!(said(&logs, "WARN"), 1, "{logs}");

    let (up, _) = scripted().spawn().await;
    let mut g = StdioGate::start_args(vec!["stdio".into(), "--upstream".into(), up]);
    let why = "Upstream MCP server unavailable: could not reach the tool server: the stream broke before the answer: error reading a body from connection";
    for id in [7, 8] {
        let mut ask = ask.clone();
        ask["id"] = json!(id);
        let a = g.ask(ask).await;
        assert_eq!(
            a,
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603, "message": why}})
        );
    }
    // Each answer's line is written before the answer: once both are read, any second line
    // for either would follow within a moment.
    g.logs_when(|l| said(l, "") >= 2).await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let logs = g.logs_when(|_| true).await;
    // The first said, the second at the rate.
    let lines = (said(&logs, "WARN"), said(&logs, "DEBUG"));
    assert_eq!(lines, (1, 1), "{logs}");
}

/// A server that is down fails every request sent to it. The log says so once, not once per
/// request, whichever front the requests came through; each request is still answered with
/// why, and counted.
#[tokio::test]
async fn a_server_that_is_down_is_said_once_not_per_request() {
    const CALLS: usize = 20;
    let port = closed_port();
    let gone = format!("http://127.0.0.1:{port}/mcp");
    let said = |logs: &str, level: &str| {
        logs.lines()
            .filter(|l| l.contains(level) && l.contains("no usable answer from the tool server"))
            .count()
    };
    // The answer a call gets, `reason` being why (the same in every mode).
    let unavailable = |id: i64, reason: &str, hint: &str| {
        json!({"jsonrpc": "2.0", "id": id, "result": {
            "content": [{"type": "text", "text": format!("The tool server is unavailable: {reason}. {hint}")}],
            "isError": true,
            "_meta": {"toolgate/upstream": {"code": "upstream_unavailable", "reason": reason}}}})
    };
    let refused = format!(
        "could not reach the tool server: connecting to 127.0.0.1:{port}: Connection refused (os error 111)"
    );
    let retry = "Retrying in a moment may help if the server is restarting.";

    let tg = Toolgate::serve(&gone, None).await;
    for id in 0..CALLS as i64 {
        let a = post(&tg.url(), None, call(id, "add", json!({}))).await;
        assert_eq!(a.json(), unavailable(id, &refused, retry));
    }
    let logs = tg.logs_when(|l| said(l, "") == CALLS).await;
    assert_eq!(
        (said(&logs, "WARN"), said(&logs, "DEBUG")),
        (1, CALLS - 1),
        "{logs}"
    );
    let metrics = tg.admin_get("/metrics").await.text();
    assert!(
        metrics.contains(&format!(
            "toolgate_tool_calls_total{{upstream=\"default\",tool=\"(unlisted)\",outcome=\"upstream_error\"}} {CALLS}"
        )),
        "{metrics}"
    );

    let mut g = StdioGate::start_args(vec!["stdio".into(), "--upstream".into(), gone]);
    for id in 0..CALLS as i64 {
        let a = g.ask(serde_json::from_str(&call(id, "add", json!({}))).unwrap());
        assert_eq!(a.await, unavailable(id, &refused, retry));
    }
    let logs = g.logs_when(|l| said(l, "") == CALLS).await;
    assert_eq!(
        (said(&logs, "WARN"), said(&logs, "DEBUG")),
        (1, CALLS - 1),
        "{logs}"
    );

    // In front of stdio children whose program is not there: each session it would start
    // fails, said once at ERROR (the configuration's fault) past the line at start.
    let gone = ["/nonexistent/toolgate-test-server".to_string()];
    let tg = Toolgate::in_front_of(&gone, None).await;
    let cannot =
        "the tool server cannot be started: cannot start \"/nonexistent/toolgate-test-server\"";
    let fix =
        "This is a configuration problem of the gateway; retrying will not help until it is fixed.";
    for id in 0..CALLS as i64 {
        let a = post(&tg.url(), None, call(id, "add", json!({})))
            .await
            .json();
        let reason = a["result"]["_meta"]["toolgate/upstream"]["reason"].as_str();
        let reason = reason.unwrap_or_else(|| panic!("{a}"));
        assert!(reason.starts_with(cannot), "{a}");
        assert_eq!(a, unavailable(id, reason, fix));
    }
    let logs = tg.logs_when(|l| said(l, "") == CALLS).await;
    assert_eq!(
        (said(&logs, "ERROR"), said(&logs, "DEBUG")),
        (1, CALLS - 1),
        "{logs}"
    );
}

/// Other causes that repeat with each request or session are said at the same rate as a
/// server that is down: a server whose listings toolgate cannot read, a handshake-era client
/// whose capabilities are too large to bridge, a server that will not open a session for a
/// 2026-07-28 client, a server whose answers come in events too large to read. Each request
/// still gets its answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cause_that_repeats_is_said_at_a_rate() {
    const TIMES: i64 = 10;
    let (url, _server) = Scripted::new(vec![open_tool("add")])
        .list_extra(json!({"tools": 5}))
        .spawn()
        .await;
    let tg = Toolgate::serve(&url, None).await;
    for id in 0..TIMES {
        let list = json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"});
        let a = post(&tg.url(), None, list.to_string()).await;
        assert_eq!(
            a.json(),
            json!({"jsonrpc": "2.0", "id": id, "result": {"tools": 5}})
        );
    }
    said_at_rate(&tg, "could not read a tools/list answer", TIMES).await;

    let url = crate::bridge::serve_in_process(
        axum::routing::post(crate::bridge::modern_only).with_state(Default::default()),
    )
    .await;
    let tg = Toolgate::serve(&url, None).await;
    let big = "x".repeat(17 * 1024);
    for id in 0..TIMES {
        let init = json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {"experimental": {"big": big}},
            "clientInfo": {"name": "big", "version": "1"}}});
        let a = post(&tg.url(), None, init.to_string()).await.json();
        assert_eq!(
            a,
            json!({"jsonrpc": "2.0", "id": id, "result": {"protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}}, "serverInfo": {"name": "modern-only", "version": "1"}}})
        );
    }
    said_at_rate(
        &tg,
        "capabilities is over 16384 bytes; it is not bridged",
        TIMES,
    )
    .await;

    let refusal = json!({"code": -32603, "message": "no sessions today"});
    let (url, _server) = Scripted::new(vec![open_tool("add")])
        .handshake_only()
        .script("initialize", Script::Error(refusal))
        .spawn()
        .await;
    let tg = Toolgate::serve(&url, None).await;
    let no_session = json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32000,
        "message": "Bad Request: No valid session ID provided"}});
    for id in 0..TIMES {
        let ping = json!({"jsonrpc": "2.0", "id": id, "method": "ping",
            "params": {"_meta": common::modes::modern_meta()}});
        let a = post_modern(&tg.url(), "ping", ping).await;
        assert_eq!((a.status, a.json()), (400, no_session.clone()));
    }
    said_at_rate(&tg, "could not open a session with the upstream", TIMES).await;

    let text = "x".repeat(30_000);
    let big = json!({"jsonrpc": "2.0", "id": "$id", "result": {"content": [{"type": "text", "text": text}]}});
    let (url, _server) = Scripted::new(vec![open_tool("big")])
        .script(
            "big",
            Script::Sse {
                messages: vec![big],
                numbered: false,
            },
        )
        .spawn()
        .await;
    let tg = Toolgate::serve(&url, Some("[limits]\nmax_sse_event_bytes = 20000\n")).await;
    for id in 0..TIMES {
        let a = post(&tg.url(), None, call(id, "big", json!({}))).await;
        assert_eq!(
            a.answer(),
            json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": text}]}})
        );
    }
    said_at_rate(
        &tg,
        "over max_sse_event_bytes; the rest of the stream passed",
        TIMES,
    )
    .await;
}

/// Of `times` lines saying `what`, the first is at `WARN` and the rest at `DEBUG`.
async fn said_at_rate(tg: &Toolgate, what: &str, times: i64) {
    let said = |logs: &str, level: &str| {
        logs.lines()
            .filter(|l| l.contains(level) && l.contains(what))
            .count() as i64
    };
    let logs = tg.logs_when(|l| said(l, "") >= times).await;
    let levels = (said(&logs, " WARN "), said(&logs, "DEBUG"));
    assert_eq!(levels, (1, times - 1), "{logs}");
}

/// A text logged from outside (here a server's error, logged under the reference its client
/// got) cannot start a line of its own: its line breaks are written escaped, so no value can
/// forge a line that reads as toolgate's.
#[tokio::test]
async fn a_logged_text_cannot_forge_a_line() {
    let forged = "2026-11-30T00:00:00.000000Z ERROR toolgate: forged";
    let (up, _) = Scripted::new(vec![open_tool("fail")])
        .script(
            "fail",
            Script::Error(json!({"code": -32603, "message": format!("boom\n{forged}\rX")})),
        )
        .spawn()
        .await;
    let tg = Toolgate::serve(&up, Some("[errors]\nmask_internal = true\n")).await;
    let a = post(&tg.url(), None, call(1, "fail", json!({})))
        .await
        .json();
    let reference = a["result"]["_meta"]["toolgate/upstream_error"]["reference"].as_str();
    let reference = reference.unwrap_or_else(|| panic!("{a}"));
    assert_eq!(
        a,
        json!({"jsonrpc": "2.0", "id": 1, "result": {
            "content": [{"type": "text", "text": format!("The tool \"fail\" failed with an internal error (reference {reference}).")}],
            "isError": true,
            "_meta": {"toolgate/upstream_error": {"code": -32603, "reference": reference}}}})
    );
    let logs = tg
        .logs_when(|l| l.contains("masked an upstream error"))
        .await;
    let line = logs
        .lines()
        .find(|l| l.contains("masked an upstream error"))
        .unwrap();
    assert!(line.contains(&format!("boom\\n{forged}\\rX")), "{line}");
    assert!(!logs.lines().any(|l| l.starts_with(forged)), "{logs}");
}
