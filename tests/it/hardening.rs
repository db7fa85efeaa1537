//! The attacks and bad days toolgate must survive, one test per property (docs/security.md
//! lists them), each against the real binary in every mode the property applies to:
//! `serve --upstream` (HTTP in front of HTTP), `serve -- CMD` (HTTP in front of a stdio
//! child), `stdio -- CMD` and `stdio --upstream`. The last tests keep trying whole classes
//! of inputs (id spellings, URI forms, path forms, error-set sizes) so they stay closed.

use crate::common;
use common::modes::{Front, Mode};
use common::scripted::{Script, Scripted, open_tool};
use common::stdio_gate::StdioGate;
use common::*;
use http::Method;
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The dependency-free stdio fixture, as a command.
async fn fixture() -> Vec<String> {
    crate::common::peers::stdio_fixture(&[]).await
}

/// `toolgate serve -- <fixture>` with an optional config.
async fn sidecar(config: Option<&str>) -> Toolgate {
    Toolgate::in_front_of(&fixture().await, config).await
}

fn call_id(id: &str, tool: &str, args: Value) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{args}}}}}"#
    )
}

/// The text of a stdio fixture's `seen` tool: every method it received.
fn seen_methods(answer: &Value) -> Vec<String> {
    serde_json::from_str(&result_text(answer)).unwrap()
}

async fn metrics(tg: &Toolgate) -> String {
    tg.admin_get("/metrics").await.text()
}

// ---- 1. one request cannot take the process down ----

fn wide_tool(properties: usize) -> Value {
    let props: serde_json::Map<String, Value> = (0..properties)
        .map(|i| {
            (
                format!("field_{i}"),
                json!({"type": "string", "description": "x".repeat(200)}),
            )
        })
        .collect();
    json!({"name": "wide", "inputSchema": {"type": "object", "properties": props, "additionalProperties": false}})
}

#[tokio::test]
async fn one_request_cannot_take_the_process_down() {
    for properties in [50, 1] {
        let (up, seen) = Scripted::new(vec![wide_tool(properties)]).spawn().await;
        let config = "[limits]\nmax_body_bytes = 8388608\n";
        let tg = Toolgate::serve(&up, Some(config)).await;
        // 3.8 MB of unexpected keys: each one a violation of additionalProperties.
        let args: serde_json::Map<String, Value> = (0..300_000)
            .map(|i| (format!("k{i:07}"), json!(1)))
            .collect();
        let body = call(1, "wide", Value::Object(args));
        assert!(body.len() > 3_800_000, "{}", body.len());
        let started = Instant::now();
        let r = post(&tg.url(), None, body).await;
        let answer = r.json();
        assert!(r.body.len() < 64 * 1024, "answer of {} bytes", r.body.len());
        assert_eq!(answer["result"]["isError"], true, "{answer}");
        let text = result_text(&answer);
        assert!(
            text.starts_with("Invalid arguments for tool \"wide\" (300000 problems):"),
            "{}",
            &text[..200]
        );
        assert!(
            text.contains("…and 299968 more"),
            "max_errors (32) are described"
        );
        let details = &answer["result"]["_meta"]["toolgate/validation"];
        assert_eq!(details["parameter_errors"].as_object().unwrap().len(), 32);
        assert_eq!(details["omitted"], 299_968);
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "bounded work: {:?}",
            started.elapsed()
        );
        let peak = crate::common::processes::peak_mib(tg.pid());
        assert!(
            peak < 200,
            "peak RSS {peak} MiB, under the gateway Deployment's 256 Mi"
        );
        assert!(seen.tool_calls().is_empty());
    }
}

// ---- 2. tools/call as a notification never reaches a server ----

#[tokio::test]
async fn tools_call_notifications_never_reach_the_upstream() {
    let notification =
        r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo","arguments":{}}}"#;
    let refused = json!({"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request: tools/call must be a request with an id; toolgate does not forward it as a notification"}});

    // serve --upstream, alone and inside a batch.
    let (up, seen) = Scripted::new(vec![open_tool("echo")]).spawn().await;
    let tg = Toolgate::serve(&up, None).await;
    let r = post(&tg.url(), None, notification).await;
    assert_eq!((r.status, r.json()), (400, refused.clone()));
    let r = post(
        &tg.url(),
        None,
        format!(r#"[{notification},{{"jsonrpc":"2.0","method":"notifications/initialized"}}]"#),
    )
    .await;
    // No request in the batch, so no id to answer under: one error.
    let in_a_batch = json!({"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request: toolgate does not accept tools/call inside a batch; send each call on its own"}});
    assert_eq!((r.status, r.json()), (400, in_a_batch));
    assert!(seen.seen.lock().unwrap().is_empty(), "nothing forwarded");
    assert!(
        metrics(&tg)
            .await
            .contains(r#"toolgate_tool_calls_total{upstream="default",tool="(unlisted)",outcome="refused_notification"} 1"#),
        "{}",
        metrics(&tg).await
    );

    // serve -- CMD.
    let tg = sidecar(None).await;
    let session = open_session(&tg.url()).await;
    let r = post(&tg.url(), Some(&session), notification).await;
    assert_eq!((r.status, r.json()), (400, refused.clone()));
    let a = post(&tg.url(), Some(&session), call(2, "seen", json!({}))).await;
    assert!(
        !seen_methods(&a.json())
            .iter()
            .any(|m| m.starts_with("tools/call (")),
        "{}",
        a.text()
    );

    // stdio -- CMD: nothing to answer a notification with; it is dropped and counted.
    let (mut g, _) = StdioGate::start(&fixture().await, None);
    g.initialize().await;
    g.send(notification).await;
    let a = g.ask(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "seen", "arguments": {}}})).await;
    assert_eq!(
        seen_methods(&a),
        [
            "initialize",
            "notifications/initialized (notification)",
            "tools/list",
            "tools/call"
        ]
    );

    // stdio --upstream.
    let (up, seen) = Scripted::new(vec![open_tool("echo")]).spawn().await;
    let mut g = StdioGate::start_args(vec!["stdio".into(), "--upstream".into(), up]);
    g.initialize().await;
    g.send(notification).await;
    let a = g
        .ask(json!({"jsonrpc": "2.0", "id": 4, "method": "ping"}))
        .await;
    assert_eq!(a["id"], 4);
    assert!(seen.tool_calls().is_empty(), "nothing forwarded");
}

/// A batch without a `tools/call` goes whole only from the HTTP front to an HTTP server (see
/// `gateway.rs`); over stdio, and in front of a stdio server, each line or POST is one
/// message, so a batch is refused with `-32600` and nothing reaches the server.
#[tokio::test]
async fn batches_are_refused_where_they_cannot_go_whole() {
    let batch = r#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"}]"#;
    // The batch's request answered under its id, in an array as a batch is answered; the
    // notification has no answer.
    let refused = json!([{"jsonrpc": "2.0", "id": 1, "error": {"code": -32600, "message": "Invalid Request: batches are not supported over stdio or in front of a stdio server; send one message at a time"}}]);

    // serve -- CMD.
    let tg = sidecar(None).await;
    let session = open_session(&tg.url()).await;
    let r = post(&tg.url(), Some(&session), batch).await;
    assert_eq!((r.status, r.json()), (400, refused.clone()));

    // stdio -- CMD: answered on stdout, and the session goes on.
    let (mut g, _) = StdioGate::start(&fixture().await, None);
    g.initialize().await;
    assert_eq!(answer_to_line(&mut g, batch).await, refused);
    // A batch of no request: one error, with no id to answer under.
    let notifications = r#"[{"jsonrpc":"2.0","method":"notifications/initialized"}]"#;
    assert_eq!(
        answer_to_line(&mut g, notifications).await,
        json!({"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request: batches are not supported over stdio or in front of a stdio server; send one message at a time"}})
    );
    let a = g.ask(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "seen", "arguments": {}}})).await;
    assert_eq!(
        seen_methods(&a),
        [
            "initialize",
            "notifications/initialized (notification)",
            "tools/list",
            "tools/call"
        ],
        "the batch never reached the server"
    );

    // stdio --upstream.
    let (up, seen) = Scripted::new(vec![open_tool("echo")]).spawn().await;
    let mut g = StdioGate::start_args(vec!["stdio".into(), "--upstream".into(), up]);
    g.initialize().await;
    assert_eq!(answer_to_line(&mut g, batch).await, refused);
    let raw = seen.seen_raw.lock().unwrap().clone();
    assert!(raw.iter().all(|b| !b.starts_with(b"[")), "{raw:?}");
}

/// Sends `line` and reads until a message that is not the server's own.
async fn answer_to_line(g: &mut StdioGate, line: &str) -> Value {
    g.send(line).await;
    loop {
        let m = g.recv().await;
        if m.get("method").is_none() {
            return m;
        }
    }
}

// ---- 3. /.well-known/ and every other path: plain paths, origin rules ----

#[tokio::test]
async fn well_known_dot_segments_and_foreign_origins_are_refused() {
    let (up, _) = Scripted::new(vec![]).spawn().await;
    let tg = Toolgate::serve(&up, None).await;
    let base = format!("http://{}", tg.addr);
    for (method, path) in [
        (Method::GET, "/.well-known/../admin/secret"),
        (Method::GET, "/.well-known/%2e%2e/admin/secret"),
        (Method::GET, "/.well-known/.%2E/admin"),
        (Method::DELETE, "/.well-known/../mcp"),
        (
            Method::GET,
            "/.well-known/oauth-protected-resource/..%2fmcp",
        ),
        (Method::POST, "/./mcp"),
    ] {
        let r = request(method.clone(), &format!("{base}{path}"), &[], "").await;
        assert_eq!(r.status, 400, "{method} {path}: {}", r.text());
        assert_eq!(r.json()["error"]["code"], -32600);
    }
    let doc = format!("{base}/.well-known/oauth-protected-resource/mcp");
    let r = request(Method::GET, &doc, &[("origin", "http://evil.example")], "").await;
    assert_eq!(r.status, 403, "{}", r.text());
    let r = request(Method::GET, &doc, &[("host", "evil.example")], "").await;
    assert_eq!(r.status, 403, "{}", r.text());
    let r = request(Method::GET, &doc, &[], "").await;
    assert_eq!(r.status, 200, "the plain path still passes: {}", r.text());
}

/// Over HTTP/2 the host is named by `:authority`, which every HTTP/2 client sends and which
/// usually comes without `Host`: a foreign one is refused as a foreign `Host` is, so DNS
/// rebinding does not work over HTTP/2 either.
#[tokio::test]
async fn an_http2_authority_is_held_to_the_host_rule() {
    let (up, _) = Scripted::new(vec![open_tool("echo")]).spawn().await;
    let tg = Toolgate::serve(&up, None).await;
    let stream = tokio::net::TcpStream::connect(tg.addr).await.unwrap();
    let (mut send, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    let port = tg.addr.port();
    for (authority, status) in [
        (format!("evil.example:{port}"), 403),
        ("evil.example".to_string(), 403),
        (format!("127.0.0.1:{port}"), 200),
        (format!("localhost:{port}"), 200),
    ] {
        let req = http::Request::post(format!("http://{authority}/mcp"))
            .header("content-type", "application/json")
            .header("accept", ACCEPT)
            .body(http_body_util::Full::new(bytes::Bytes::from(call(
                1,
                "echo",
                json!({}),
            ))))
            .unwrap();
        assert!(req.headers().get("host").is_none());
        let resp = send.send_request(req).await.unwrap();
        assert_eq!(resp.status().as_u16(), status, ":authority {authority}");
    }
}

// ---- 4. file URIs are read as a URL parser reads them ----

#[tokio::test]
async fn file_uri_variants_stay_confined() {
    let (up, seen) = Scripted::new(vec![open_tool("read")])
        .script("read", Script::Result(json!({"content": []})))
        .spawn()
        .await;
    let config = r#"
[[validation.tools.read.paths]]
argument = "path"
root = "/workspace"
"#;
    let tg = Toolgate::serve(&up, Some(config)).await;
    for (i, uri) in [
        "FILE:///etc/passwd",
        "file:/etc/passwd",
        "file://localhost/etc/passwd",
        "file:///workspace/%2e%2e/etc/passwd",
        "file://evil.example/workspace/notes",
        "file:///workspace/..%5C..%5Cetc/passwd",
        // What a URL parser cleans before it parses (Node's fileURLToPath reads each as
        // /etc/passwd).
        " file:///etc/passwd",
        "\tfile:///etc/passwd",
        "\u{1}file:///etc/passwd",
        "fi\tle:///etc/passwd",
        "file:///workspace/.\t./.\t./etc/passwd",
        "file:///workspace/.\n./..\r/etc/passwd",
        "file:///workspace/%2e\t%2e/%2e%2e/etc/passwd",
    ]
    .iter()
    .enumerate()
    {
        let a = post(
            &tg.url(),
            None,
            call(i as i64, "read", json!({"path": uri})),
        )
        .await
        .json();
        assert_eq!(a["result"]["isError"], true, "{uri}: {a}");
        assert!(
            result_text(&a).contains("- path: must"),
            "{uri}: {}",
            result_text(&a)
        );
    }
    let a = post(
        &tg.url(),
        None,
        call(9, "read", json!({"path": "file:///workspace/notes.md"})),
    )
    .await
    .json();
    assert_eq!(a["result"]["content"], json!([]), "{a}");
    let forwarded = seen.tool_calls().len();
    assert_eq!(forwarded, 1, "only the confined path went upstream");
}

// ---- 5. answers are matched by the id's value ----

#[tokio::test]
async fn answers_match_requests_by_id_value_in_every_mode() {
    let config = "[errors]\nmask_internal = true\n[validation]\ndeny_tools = [\"fail\"]\n";
    let respelled = [r#""\u0037""#, "7E0", "7.0"];

    // serve --upstream: the scripted server re-serialises the ids it echoes.
    let (up, _) = Scripted::new(vec![open_tool("internal"), open_tool("fail")])
        .script(
            "internal",
            Script::Error(json!({"code": -32603, "message": "db password=hunter2"})),
        )
        .spawn()
        .await;
    let tg = Toolgate::serve(&up, Some(config)).await;
    for id in respelled {
        let r = post(&tg.url(), None, call_id(id, "internal", json!({}))).await;
        assert!(!r.text().contains("hunter2"), "{id}: {}", r.text());
        let list = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list"}}"#);
        let r = post(&tg.url(), None, list).await;
        assert!(!r.text().contains("\"fail\""), "{id}: {}", r.text());
    }

    // stdio -- CMD and serve -- CMD: the Python fixture re-serialises them too.
    let (mut g, _f) = StdioGate::start(&fixture().await, Some(config));
    g.initialize().await;
    for id in respelled {
        g.send(&call_id(id, "internal", json!({}))).await;
        let a = g.recv().await;
        assert!(!a.to_string().contains("hunter2"), "{id}: {a}");
        assert_eq!(a["result"]["isError"], true, "{id}: {a}");
    }
    let tg = sidecar(Some(config)).await;
    let session = open_session(&tg.url()).await;
    for id in respelled {
        let r = post(
            &tg.url(),
            Some(&session),
            call_id(id, "internal", json!({})),
        )
        .await;
        assert!(!r.text().contains("hunter2"), "{id}: {}", r.text());
        assert_eq!(r.answer()["result"]["isError"], true, "{id}: {}", r.text());
    }

    // An answer to nothing pending goes no further (stdio -- CMD): the fixture answers
    // `seen` normally, so the only line out is that answer.
    let a = g.ask(json!({"jsonrpc": "2.0", "id": 99, "method": "tools/call", "params": {"name": "seen", "arguments": {}}})).await;
    assert_eq!(a["id"], 99);
}

/// A number past what `f64` holds (`1e400`) is JSON all the same, and a client's `_meta` that
/// holds one goes with the listing toolgate makes for the call as it was written: the first
/// call of a session, which waits for that listing, is answered as any other, in every
/// front, before a real Python server.
#[tokio::test]
async fn a_number_past_f64_in_a_calls_meta_is_carried_as_written_in_every_mode() {
    let (http, command) = common::peers::python_clock().await;
    let line = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"label","arguments":{"names":["a","b"]},"_meta":{"x":1e400}}}"#;
    let labelled = |id: u64| {
        json!({"jsonrpc": "2.0", "id": id, "result": {
            "content": [{"type": "text", "text": "a|b:"}],
            "structuredContent": {"result": "a|b:"},
            "isError": false}})
    };
    for mode in Mode::EVERY_FRONT {
        let mut front = Front::start(mode, &http.url, &command).await;
        assert_eq!(front.ask_line(line).await, labelled(1), "{mode}");
        // Still serving.
        let again = line.replace(r#""id":1"#, r#""id":2"#);
        assert_eq!(front.ask_line(&again).await, labelled(2), "{mode}");
    }
}

/// A server's error whose `data` holds a number no `f64` holds (the Python SDK writes
/// `10**400` as its digits) is still read for its code and message: a protocol signal passes
/// as it came, and a tool's failure is rewritten with its code and message, its `data` left
/// out as one too costly to read is.
#[tokio::test]
async fn an_error_holding_a_number_past_f64_is_read_for_its_code_and_message_in_every_mode() {
    #[derive(serde::Deserialize)]
    struct Answer<'a> {
        #[serde(borrow)]
        id: &'a serde_json::value::RawValue,
        #[serde(borrow)]
        error: Error<'a>,
    }
    #[derive(serde::Deserialize)]
    struct Error<'a> {
        code: i64,
        message: String,
        #[serde(borrow)]
        data: &'a serde_json::value::RawValue,
    }
    let (http, command) = common::peers::python_clock().await;
    let signal = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"overflow","arguments":{"signal":true}}}"#;
    let failure = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"overflow","arguments":{}}}"#;
    let limit = format!(r#"{{"elicitations":[],"limit":1{}}}"#, "0".repeat(400));
    for mode in Mode::EVERY_FRONT {
        let mut front = Front::start(mode, &http.url, &command).await;
        let text = front.ask_line_text(signal).await;
        let a: Answer<'_> = serde_json::from_str(&text).expect("an error");
        assert_eq!(
            (a.id.get(), a.error.code, a.error.message.as_str()),
            ("1", -32042, "URL elicitation required"),
            "{mode}"
        );
        assert_eq!(a.error.data.get(), limit, "{mode}: the data as it came");
        assert_eq!(
            front.ask_line(failure).await,
            json!({"jsonrpc": "2.0", "id": 2, "result": {
                "content": [{"type": "text", "text": "checksum overflow"}],
                "isError": true,
                "_meta": {"toolgate/upstream_error": {"code": -32603, "message": "checksum overflow"}}}}),
            "{mode}"
        );
    }
}

// ---- 6. slow heads, idle connections, and too many connections ----

async fn closed_within(stream: &mut tokio::net::TcpStream, limit: Duration) -> Duration {
    let started = Instant::now();
    let mut buf = [0u8; 1024];
    loop {
        match tokio::time::timeout(limit, stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return started.elapsed(),
            Ok(Ok(_)) => continue,
            Err(_) => panic!("still open after {limit:?}"),
        }
    }
}

/// Each listener's connections are timed alike: the client listener's and the admin
/// listener's, whose address a whole cluster may reach.
#[tokio::test]
async fn slow_heads_idle_connections_and_too_many_connections_are_bounded() {
    let (up, _) = Scripted::new(vec![]).spawn().await;
    let config = "[limits]\nheader_timeout = \"1s\"\nidle_timeout = \"3s\"\nmax_connections = 3\n";
    let tg = Toolgate::serve(&up, Some(config)).await;
    for addr in [tg.addr, tg.admin] {
        timed_connections(addr).await;
    }

    // At the cap, a fourth client waits; the admin listener answers all the while. (Another
    // gateway, whose idle timer cannot free a slot while the test looks.)
    let (up, _) = Scripted::new(vec![]).spawn().await;
    let config = "[limits]\nidle_timeout = \"60s\"\nmax_connections = 3\n";
    let tg = Toolgate::serve(&up, Some(config)).await;
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(answered_and_kept(tg.addr, "/healthz-not-here", "HTTP/1.1 404").await);
    }
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string();
    let url = tg.url();
    let waiting = tokio::spawn(async move { post(&url, None, ping).await });
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(!waiting.is_finished(), "a fourth connection is not served");
    assert_eq!(tg.admin_get("/healthz").await.status, 200);
    drop(held.pop());
    let r = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("served once a connection ended")
        .unwrap();
    assert_eq!(r.status, 200);

    // Past the cap, the oldest connection that has sent no request makes room: clients
    // with a request are not kept waiting behind connections that send none (nothing, half a
    // head, half of HTTP/2's preface).
    drop(held);
    let mut silent = Vec::new();
    for start in [
        &b""[..],
        b"POST /mcp HTTP/1.1\r\nHost: 127",
        b"PRI * HTTP/2.0\r\n",
    ] {
        let mut s = tokio::net::TcpStream::connect(tg.addr).await.unwrap();
        s.write_all(start).await.unwrap();
        silent.push(s);
    }
    let mut served = Vec::new();
    for _ in 0..3 {
        let asked = std::time::Instant::now();
        served.push(answered_and_kept(tg.addr, "/not-here", "HTTP/1.1 404").await);
        let took = asked.elapsed();
        assert!(took < Duration::from_secs(2), "{took:?}");
    }
    for mut conn in silent {
        let t = closed_within(&mut conn, Duration::from_secs(5)).await;
        assert!(t < Duration::from_secs(1), "closed to make room: {t:?}");
    }

    // The admin listener holds 64 connections. A new one past them closes the oldest with no
    // request in service: a flood of connections that send nothing never keeps a probe out.
    let mut kept = Vec::new();
    for _ in 0..64 {
        kept.push(answered_and_kept(tg.admin, "/healthz", "HTTP/1.1 200").await);
    }
    let mut silent = Vec::new();
    for _ in 0..100 {
        silent.push(tokio::net::TcpStream::connect(tg.admin).await.unwrap());
    }
    let probed = std::time::Instant::now();
    assert_eq!(tg.admin_get("/healthz").await.status, 200);
    assert!(
        probed.elapsed() < Duration::from_secs(2),
        "{:?}",
        probed.elapsed()
    );
    let (first, last) = (kept.remove(0), kept.pop().unwrap());
    for mut conn in [first, last, silent.remove(0)] {
        let conn = &mut conn;
        let t = closed_within(conn, Duration::from_secs(5)).await;
        assert!(t < Duration::from_secs(1), "closed to make room: {t:?}");
    }
}

/// A connection to `addr` whose half head, or silence, closes it after `limits.header_timeout`
/// (1 s), and whose idle time after an answer after `limits.idle_timeout` (3 s).
async fn timed_connections(addr: std::net::SocketAddr) {
    // Half a head: closed after header_timeout.
    let mut slow = tokio::net::TcpStream::connect(addr).await.unwrap();
    slow.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .await
        .unwrap();
    let t = closed_within(&mut slow, Duration::from_secs(10)).await;
    assert!(t < Duration::from_millis(2500), "{addr}: {t:?}");

    // Half of HTTP/2's connection preface, which a plaintext connection is read for first:
    // closed after header_timeout too.
    let mut slow = tokio::net::TcpStream::connect(addr).await.unwrap();
    slow.write_all(b"PRI * HTTP/2.0\r\n").await.unwrap();
    let t = closed_within(&mut slow, Duration::from_secs(10)).await;
    assert!(t < Duration::from_millis(2500), "{addr}: {t:?}");

    // Nothing at all: closed after header_timeout, from the accept.
    let mut silent = tokio::net::TcpStream::connect(addr).await.unwrap();
    let t = closed_within(&mut silent, Duration::from_secs(10)).await;
    assert!(t < Duration::from_millis(2500), "{addr}: {t:?}");

    // Between requests: closed after idle_timeout from the last answer.
    let mut idle = tokio::net::TcpStream::connect(addr).await.unwrap();
    idle.write_all(b"GET /not-here HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .unwrap();
    let t = closed_within(&mut idle, Duration::from_secs(10)).await;
    assert!(
        t > Duration::from_millis(2500) && t < Duration::from_secs(6),
        "{addr}: {t:?}"
    );
}

/// A connection to `addr` that asked for `path`, was answered with `status` and stays open.
async fn answered_and_kept(
    addr: std::net::SocketAddr,
    path: &str,
    status: &str,
) -> tokio::net::TcpStream {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    s.write_all(head.as_bytes()).await.unwrap();
    let mut buf = [0u8; 512];
    let n = s.read(&mut buf).await.unwrap();
    let answer = String::from_utf8_lossy(&buf[..n]);
    assert!(answer.starts_with(status), "{answer}");
    s
}

/// A request with its `Content-Length` twice (alike, which HTTP/1.1 readers may accept) reaches
/// the server with one: a proxy that passed both on would leave the server to decide which.
/// `fit_length` keeps the first it finds, so this holds only while the request's reader keeps
/// one.
#[tokio::test]
async fn a_length_sent_twice_goes_on_once() {
    let (up, state) = Scripted::new(vec![]).spawn().await;
    let tg = Toolgate::serve(&up, None).await;
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "ping"}).to_string();
    let mut s = tokio::net::TcpStream::connect(tg.addr).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: {ACCEPT}\r\nContent-Length: {n}\r\nContent-Length: {n}\r\nConnection: close\r\n\r\n",
        n = body.len()
    );
    s.write_all(format!("{head}{body}").as_bytes())
        .await
        .unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut answer))
        .await
        .expect("answered")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let (_, answered) = answer.split_once("\r\n\r\n").expect("a head and a body");
    assert_eq!(
        serde_json::from_str::<Value>(answered).unwrap(),
        json!({"jsonrpc": "2.0", "id": 7, "error": {"code": -32601, "message": "Method not found"}})
    );
    let headers = state.seen_headers.lock().unwrap();
    let lengths: Vec<_> = headers
        .last()
        .expect("the request reached the server")
        .get_all(http::header::CONTENT_LENGTH)
        .iter()
        .cloned()
        .collect();
    assert_eq!(lengths, [http::HeaderValue::from(body.len())]);
}

/// A body that stalls holds its connection no longer than `limits.body_timeout`, over
/// HTTP/1.1 and over HTTP/2 (where the stream is answered 408 and the connection serves on).
#[tokio::test]
async fn a_request_body_that_stalls_is_bounded() {
    let (up, _) = Scripted::new(vec![]).spawn().await;
    let config = "[limits]\nbody_timeout = \"1s\"\n";
    let tg = Toolgate::serve(&up, Some(config)).await;
    let mut slow = tokio::net::TcpStream::connect(tg.addr).await.unwrap();
    slow.write_all(
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"jsonrpc\"",
    )
    .await
    .unwrap();
    let started = Instant::now();
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(10), slow.read(&mut buf))
        .await
        .expect("answered within the bound")
        .unwrap();
    let head = String::from_utf8_lossy(&buf[..n]);
    assert!(head.starts_with("HTTP/1.1 408"), "{head}");
    assert!(started.elapsed() < Duration::from_secs(3));

    // HTTP/2: a stream whose body never ends gets 408; the same connection serves the next.
    let h2 = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .http2_only(true)
        .build_http::<http_body_util::combinators::BoxBody<bytes::Bytes, std::convert::Infallible>>(
        );
    let (_keep, rx) = tokio::sync::mpsc::channel::<
        Result<http_body::Frame<bytes::Bytes>, std::convert::Infallible>,
    >(1);
    let rx =
        futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|f| (f, rx)) });
    let stalled = http_body_util::BodyExt::boxed(http_body_util::StreamBody::new(rx));
    let req = |body| {
        http::Request::post(tg.url())
            .header("content-type", "application/json")
            .header("accept", ACCEPT)
            .body(body)
            .unwrap()
    };
    let r = tokio::time::timeout(Duration::from_secs(10), h2.request(req(stalled)))
        .await
        .expect("answered within the bound")
        .unwrap();
    assert_eq!(r.status(), 408);
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string();
    let whole = http_body_util::BodyExt::boxed(http_body_util::Full::new(bytes::Bytes::from(ping)));
    let r = h2.request(req(whole)).await.unwrap();
    assert_eq!(r.status(), 200);
}

// ---- 7. an upstream that stalls after its head ----

#[tokio::test]
async fn an_upstream_that_stalls_after_its_head_is_bounded() {
    let (up, _) = Scripted::new(vec![open_tool("json"), open_tool("sse")])
        .script("json", Script::HeadThenStall { sse: false })
        .script("sse", Script::HeadThenStall { sse: true })
        .spawn()
        .await;
    let config = "[limits]\nupstream_timeout = \"2s\"\nstream_gap_timeout = \"1s\"\n";
    let tg = Toolgate::serve(&up, Some(config)).await;
    for tool in ["json", "sse"] {
        let started = Instant::now();
        let r = post(&tg.url(), None, call(1, tool, json!({}))).await;
        let a = r.answer();
        assert_eq!(a["id"], 1, "{tool}: {}", r.text());
        assert_eq!(a["result"]["isError"], true, "{tool}: {}", r.text());
        assert!(
            result_text(&a).contains("sent nothing more"),
            "{tool}: {}",
            result_text(&a)
        );
        assert!(
            started.elapsed() < Duration::from_secs(8),
            "{tool}: {:?}",
            started.elapsed()
        );
    }
    // The same through `stdio --upstream`.
    let file = tempfile_lite::TempFile::new(config);
    let mut g = StdioGate::start_args(vec![
        "stdio".into(),
        "--upstream".into(),
        up.clone(),
        "--config".into(),
        file.path.display().to_string(),
    ]);
    g.initialize().await;
    let a = g
        .ask(serde_json::from_str(&call(5, "json", json!({}))).unwrap())
        .await;
    assert_eq!(a["id"], 5);
    assert_eq!(a["result"]["isError"], true, "{a}");
}

// ---- 9. the 2026-07-28 header rules hold without MCP-Protocol-Version ----

#[tokio::test]
async fn modern_bodies_get_the_header_rules_without_the_version_header() {
    let (up, seen) = Scripted::new(vec![open_tool("echo")]).spawn().await;
    let tg = Toolgate::serve(&up, None).await;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo", "arguments": {},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}})
    .to_string();
    for (version, method, name) in [
        (None, Some("tools/call"), Some("echo")),
        (Some("2025-11-25"), Some("tools/call"), Some("echo")),
        (None, None, None),
        (Some("2026-07-28"), Some("tools/call"), Some("other")),
    ] {
        let mut headers = vec![("content-type", "application/json"), ("accept", ACCEPT)];
        headers.extend(version.map(|v| ("mcp-protocol-version", v)));
        headers.extend(method.map(|v| ("mcp-method", v)));
        headers.extend(name.map(|v| ("mcp-name", v)));
        let r = request(Method::POST, &tg.url(), &headers, body.clone()).await;
        assert_eq!(
            r.status,
            400,
            "{version:?} {method:?} {name:?}: {}",
            r.text()
        );
        assert_eq!(r.json()["error"]["code"], -32020, "{}", r.text());
    }
    assert!(seen.seen.lock().unwrap().is_empty());
}

// ---- 10. metric series are bounded ----

#[tokio::test]
async fn made_up_tool_names_share_one_metric_series() {
    let (up, _) = Scripted::new(vec![open_tool("echo")]).spawn().await;
    let config = "[validation]\ndeny_tools = [\"forbidden-*\"]\n";
    let tg = Toolgate::serve(&up, Some(config)).await;
    for i in 0..40 {
        post(&tg.url(), None, call(i, &format!("made-up-{i}"), json!({}))).await;
        post(
            &tg.url(),
            None,
            call(i, &format!("forbidden-{i}"), json!({})),
        )
        .await;
    }
    let m = metrics(&tg).await;
    assert!(!m.contains("made-up-"), "{m}");
    assert!(!m.contains("forbidden-"), "{m}");
    assert!(
        m.contains(r#"tool="(unlisted)",outcome="unknown"} 40"#),
        "{m}"
    );
    assert!(
        m.contains(r#"tool="(unlisted)",outcome="denied"} 40"#),
        "{m}"
    );
    // Unchecked calls are named only once a server listed the name.
    let (up, _) = Scripted::new(vec![open_tool("echo")]).spawn().await;
    let tg = Toolgate::serve(&up, Some("[validation]\nmode = \"off\"\n")).await;
    for i in 0..10 {
        post(&tg.url(), None, call(i, &format!("made-up-{i}"), json!({}))).await;
    }
    let m = metrics(&tg).await;
    assert!(!m.contains("made-up-"), "{m}");
    assert!(
        m.contains(r#"tool="(unlisted)",outcome="forwarded"} 10"#),
        "{m}"
    );
}

// ---- 11. toolgate stdio answers what it cannot pass, and what is in flight at the end ----

/// toolgate's answer to call `id`, whose server answered over a limit (`what`).
fn over_limit(id: i64, what: &str) -> Value {
    let reason = format!("the tool server's answer is over the gateway's limit: {what}");
    let text = format!(
        "The tool server's answer could not be passed on: {reason}. Ask for less (a narrower query, a smaller page); the same call will fail the same way."
    );
    json!({"jsonrpc": "2.0", "id": id, "result": {
        "content": [{"type": "text", "text": text}],
        "isError": true,
        "_meta": {"toolgate/upstream": {"code": "answer_over_limit", "reason": reason}}}})
}

#[tokio::test]
async fn stdio_overlong_answers_and_stdin_close_still_answer() {
    let config = "[limits]\nmax_response_bytes = 20000\n";
    let (mut g, _f) = StdioGate::start(&fixture().await, Some(config));
    g.initialize().await;
    let a = g
        .ask(serde_json::from_str(&call(1, "big", json!({"size": 50000}))).unwrap())
        .await;
    assert_eq!(a["id"], 1, "{a}");
    assert_eq!(a["result"]["isError"], true, "{a}");
    assert!(
        a.to_string().contains("over the 20000-byte line limit"),
        "{a}"
    );
    let a = g
        .ask(serde_json::from_str(&call(2, "big", json!({"size": 10}))).unwrap())
        .await;
    assert_eq!(result_text(&a), "x".repeat(10), "the next answer is whole");
    // The same in `serve -- CMD`.
    let tg = sidecar(Some(config)).await;
    let session = open_session(&tg.url()).await;
    let r = post(
        &tg.url(),
        Some(&session),
        call(3, "big", json!({"size": 50000})),
    )
    .await;
    assert_eq!(r.answer()["id"], 3);
    assert_eq!(r.answer()["result"]["isError"], true, "{}", r.text());

    // stdio --upstream: an answer over the limits is an error that says so (and the log says
    // that, not that the answer was passed on), and the next answer is whole. A valid answer
    // of the same size passes under a larger limit.
    let text = "x".repeat(50000);
    let big = json!({"content": [{"type": "text", "text": text}]});
    // `big` answers as JSON, `bigsse` as an SSE event.
    let big_answers = |s: Scripted| {
        s.script("big", Script::Result(big.clone())).script(
            "bigsse",
            Script::Sse {
                messages: vec![json!({"jsonrpc": "2.0", "id": "$id", "result": big})],
                numbered: false,
            },
        )
    };
    let (up, _) = big_answers(Scripted::new(vec![
        open_tool("big"),
        open_tool("bigsse"),
        open_tool("small"),
    ]))
    .script(
        "small",
        Script::Result(json!({"content": [{"type": "text", "text": "x"}]})),
    )
    .spawn()
    .await;
    let limits = "[limits]\nmax_response_bytes = 20000\nmax_sse_event_bytes = 20000\n";
    let file = tempfile_lite::TempFile::new(limits);
    let args = |file: &tempfile_lite::TempFile| {
        let config = file.path.display().to_string();
        vec![
            "stdio".into(),
            "--config".into(),
            config,
            "--upstream".into(),
            up.clone(),
        ]
    };
    let mut g = StdioGate::start_args(args(&file));
    g.initialize().await;
    let over = [
        ("big", "more than 20000 bytes (limits.max_response_bytes)"),
        (
            "bigsse",
            "an event of more than 20000 bytes (limits.max_sse_event_bytes)",
        ),
    ];
    for ((tool, what), id) in over.into_iter().zip(6..) {
        let a = g
            .ask(serde_json::from_str(&call(id, tool, json!({}))).unwrap())
            .await;
        assert_eq!(a, over_limit(id, what), "{tool}");
    }
    let logs = g.logs_when(|l| l.contains("max_sse_event_bytes")).await;
    assert!(!logs.contains("passed through unread"), "{logs}");
    let a = g
        .ask(serde_json::from_str(&call(8, "small", json!({}))).unwrap())
        .await;
    assert_eq!(result_text(&a), "x", "the next answer is whole");

    // serve --upstream, a 2026-07-28 client through the session toolgate keeps with a
    // handshake-only server: its answers come under toolgate's ids, so one over the limits
    // cannot be passed on in part either; the call gets the same error.
    let (bridged, _) = big_answers(Scripted::new(vec![open_tool("big"), open_tool("bigsse")]))
        .handshake_only()
        .spawn()
        .await;
    let tg = Toolgate::serve(&bridged, Some(limits)).await;
    for ((tool, what), id) in over.into_iter().zip(11..) {
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": {}, "_meta": common::modes::modern_meta()}});
        let a = post_modern(&tg.url(), "tools/call", call).await.answer();
        let mut expected = over_limit(id, what);
        expected["result"]["resultType"] = json!("complete");
        assert_eq!(a, expected, "{tool}");
    }
    let file = tempfile_lite::TempFile::new(
        "[limits]\nmax_response_bytes = 80000\nmax_sse_event_bytes = 80000\n",
    );
    let mut g = StdioGate::start_args(args(&file));
    g.initialize().await;
    for (id, tool) in [(9, "big"), (10, "bigsse")] {
        let a = g
            .ask(serde_json::from_str(&call(id, tool, json!({}))).unwrap())
            .await;
        assert_eq!(result_text(&a), text, "{tool} under a larger limit");
    }

    // stdio --upstream: the client closes stdin with a call in flight; it is answered.
    let (up, _) = Scripted::new(vec![open_tool("slow")])
        .script(
            "slow",
            Script::Slow(
                Duration::from_millis(800),
                json!({"content": [{"type": "text", "text": "late but here"}]}),
            ),
        )
        .spawn()
        .await;
    let mut g = StdioGate::start_args(vec!["stdio".into(), "--upstream".into(), up]);
    g.initialize().await;
    g.send(&call(4, "slow", json!({}))).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    g.stdin.take();
    let a = g.recv().await;
    assert_eq!(a["id"], 4);
    assert_eq!(result_text(&a), "late but here");
    // stdio -- CMD: a call in flight when stdin closes gets its answer or an error.
    let (mut g, _) = StdioGate::start(&fixture().await, None);
    g.initialize().await;
    g.send(&call(5, "slow", json!({}))).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    g.stdin.take();
    let a = g.recv().await;
    assert_eq!(a["id"], 5, "{a}");
    let status = tokio::time::timeout(Duration::from_secs(15), g.child.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.code(), Some(0));
}

// ---- 12. the admin listener's Host, and one client's share of the stdio children ----

#[tokio::test]
async fn admin_host_check_and_per_client_session_cap() {
    let tg = sidecar(Some("[stdio]\nmax_sessions_per_client = 2\n")).await;
    let metrics_url = format!("http://{}/metrics", tg.admin);
    let r = request(
        Method::GET,
        &metrics_url,
        &[("host", "evil.example:9090")],
        "",
    )
    .await;
    assert_eq!(r.status, 403, "{}", r.text());
    let r = request(
        Method::GET,
        &metrics_url,
        &[("origin", "http://evil.example")],
        "",
    )
    .await;
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(tg.admin_get("/metrics").await.status, 200);

    let first = open_session(&tg.url()).await;
    let _second = open_session(&tg.url()).await;
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let r = post(&tg.url(), None, init.to_string()).await;
    assert_eq!(r.status, 429, "{}", r.text());
    assert!(
        r.text().contains("this client already holds 2"),
        "{}",
        r.text()
    );
    let r = request(Method::DELETE, &tg.url(), &[("mcp-session-id", &first)], "").await;
    assert_eq!(r.status, 200);
    assert_eq!(post(&tg.url(), None, init.to_string()).await.status, 200);
}

// ---- 13. Kubernetes' service variables do not stop toolgate ----

#[tokio::test]
async fn unknown_toolgate_environment_variables_are_skipped_with_a_warning() {
    let (up, _) = Scripted::new(vec![]).spawn().await;
    let serve = |config: Option<&std::path::Path>| {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolgate"));
        cmd.args(["serve", "--upstream", &up, "--listen", "127.0.0.1:0"])
            .args(["--admin-listen", "127.0.0.1:0"])
            // What Kubernetes injects for a Service named `toolgate`.
            .env("TOOLGATE_SERVICE_HOST", "10.96.0.12")
            .env("TOOLGATE_SERVICE_PORT", "8080")
            .env("TOOLGATE_PORT", "tcp://10.96.0.12:8080")
            .env("TOOLGATE_PORT_8080_TCP_PROTO", "tcp")
            .env("TOOLGATE_LOG__LEVEL", "info")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        if let Some(c) = config {
            cmd.arg("--config").arg(c);
        }
        cmd
    };
    let mut child = serve(None).spawn().unwrap();
    let mut err = tokio::io::BufReader::new(child.stderr.take().unwrap());
    let mut text = String::new();
    while !text.contains("admin listening") {
        use tokio::io::AsyncBufReadExt;
        let n = tokio::time::timeout(Duration::from_secs(20), err.read_line(&mut text))
            .await
            .expect("toolgate starts")
            .unwrap();
        assert!(n > 0, "toolgate exited: {text}");
    }
    assert!(
        text.contains("ignored TOOLGATE_* environment variables that are not configuration keys")
            && text.contains(
                "TOOLGATE_PORT, TOOLGATE_PORT_8080_TCP_PROTO, TOOLGATE_SERVICE_HOST, TOOLGATE_SERVICE_PORT"
            ),
        "{text}"
    );
    assert!(
        !text.contains("TOOLGATE_LOG__LEVEL"),
        "a real key is read: {text}"
    );
    let _ = child.kill().await;
    // Keys in a file stay strict.
    let file = tempfile_lite::TempFile::new("[limits]\nmax_errorz = 3\n");
    let out = serve(Some(&file.path)).output().await.unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("max_errorz"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

// ---- 14. a normal end is not a failure ----

#[tokio::test]
async fn normal_ends_do_not_log_as_failures() {
    let (mut g, _) = StdioGate::start(&fixture().await, None);
    g.initialize().await;
    g.stdin.take();
    let status = tokio::time::timeout(Duration::from_secs(15), g.child.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.code(), Some(0));
    let logs = g.logs_when(|l| l.contains("the client closed stdin")).await;
    assert!(logs.contains("the client closed stdin"), "{logs}");
    assert!(!logs.contains("ERROR") && !logs.contains("WARN"), "{logs}");

    let tg = sidecar(None).await;
    let session = open_session(&tg.url()).await;
    let r = request(
        Method::DELETE,
        &tg.url(),
        &[("mcp-session-id", &session)],
        "",
    )
    .await;
    assert_eq!(r.status, 200);
    let logs = tg.logs_when(|l| l.contains("session ended")).await;
    assert!(logs.contains("session ended"), "{logs}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!tg.logs().contains("WARN"), "{}", tg.logs());
}

// ---- 15. a client cannot fill the log ----

/// An HTTP/2 frame: its 9-byte head, then `payload`.
fn h2_frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).unwrap().to_be_bytes();
    let mut f = vec![len[1], len[2], len[3], kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// An HTTP/2 connection's opening: the preface and empty settings.
fn h2_opening() -> Vec<u8> {
    let mut o = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    o.extend(h2_frame(0x4, 0, 0, &[]));
    o
}

/// What HTTP/2 lets a client make the server do one frame at a time, each of which the h2
/// crate would say in a line of its own: 20,000 answers to pings never sent, on one
/// connection; streams reset as soon as they are opened (a rapid reset attack), on three,
/// each closed by toolgate. The log gains one line of toolgate's own for them, and the
/// gateway serves on.
#[tokio::test]
async fn a_client_cannot_fill_the_log_through_http2() {
    let (up, _) = Scripted::new(vec![open_tool("echo")]).spawn().await;
    let tg = Toolgate::serve(&up, None).await;
    let mut pings = h2_opening();
    for _ in 0..20_000 {
        pings.extend(h2_frame(0x6, 0x1, 0, b"abcdefgh"));
    }
    let mut c = tokio::net::TcpStream::connect(tg.addr).await.unwrap();
    c.write_all(&pings).await.unwrap();
    // POST / over http, authority "x": indexed names and values, one literal.
    let head = [0x83, 0x86, 0x84, 0x01, 0x01, b'x'];
    let mut resets = h2_opening();
    for stream in (1..60).step_by(2) {
        resets.extend(h2_frame(0x1, 0x5, stream, &head));
        resets.extend(h2_frame(0x3, 0, stream, &8u32.to_be_bytes()));
    }
    for _ in 0..3 {
        let mut r = tokio::net::TcpStream::connect(tg.addr).await.unwrap();
        r.write_all(&resets).await.unwrap();
        let mut rest = Vec::new();
        let closed = tokio::time::timeout(Duration::from_secs(10), r.read_to_end(&mut rest));
        closed.await.expect("closed by toolgate").unwrap();
    }
    let said = "closed a client's HTTP/2 connection";
    let logs = tg.logs_when(|l| l.contains(said)).await;
    assert!(logs.contains("peer=127.0.0.1"), "{logs}");
    let a = post(&tg.url(), None, call(1, "echo", json!({})))
        .await
        .json();
    let echoed = json!({"content": [{"type": "text", "text": "no script for echo"}]});
    assert_eq!(a, json!({"jsonrpc": "2.0", "id": 1, "result": echoed}));
    drop(c);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let logs = tg.logs();
    let warned = logs
        .lines()
        .filter(|l| l.contains("WARN") && l.contains(said));
    assert_eq!(warned.count(), 1, "{logs}");
    assert!(!logs.contains("h2::"), "{logs}");
    assert!(logs.lines().count() < 100, "{logs}");
}

// ---- whole classes, kept closed ----

/// `s` as a JSON string with some characters spelled as `\uXXXX`.
fn escaped(g: &mut Gen, s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        if g.next().is_multiple_of(2) {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out.push('"');
    out
}

#[tokio::test]
async fn classes_of_hostile_input_stay_closed() {
    let mut g = Gen(0x9e37_79b9_7f4a_7c15);
    let (up, seen) = Scripted::new(vec![
        open_tool("internal"),
        open_tool("read"),
        wide_tool(20),
    ])
    .script(
        "internal",
        Script::Error(json!({"code": -32603, "message": "db password=hunter2"})),
    )
    .spawn()
    .await;
    let config = r#"
[errors]
mask_internal = true

[[validation.tools.read.paths]]
argument = "path"
root = "/workspace"
"#;
    let tg = Toolgate::serve(&up, Some(config)).await;

    // Id spellings: every one is the same value to the server, so every answer is masked.
    for _ in 0..60 {
        let n = g.next() % 100_000;
        let id = match g.next() % 4 {
            0 => format!("{n}E0"),
            1 => format!("{n}.0"),
            2 => format!("{}e-2", n * 100),
            _ => escaped(&mut g, &format!("id-{n}")),
        };
        let r = post(&tg.url(), None, call_id(&id, "internal", json!({}))).await;
        assert!(!r.text().contains("hunter2"), "id {id}: {}", r.text());
        assert_eq!(
            r.answer()["result"]["isError"],
            true,
            "id {id}: {}",
            r.text()
        );
    }

    // File URI forms that lead out of the root.
    let before = seen.seen.lock().unwrap().len();
    for _ in 0..80 {
        let scheme = g.pick(&["file:", "FILE:", "File:", "fIlE:"]);
        let authority = g.pick(&["", "//", "//localhost", "//LocalHost"]);
        let mut path = String::from("/workspace");
        for _ in 0..=(g.next() % 3) {
            let dot = g.pick(&[".", "%2e", "%2E"]);
            let dot2 = g.pick(&[".", "%2e", "%2E"]);
            let sep = g.pick(&["/", "%2f", "%2F", "\\", "%5c", "%5C"]);
            path.push_str(&format!("{sep}{dot}{dot2}"));
        }
        path.push_str("/etc/passwd");
        let uri = format!("{scheme}{authority}{path}");
        let a = post(&tg.url(), None, call(1, "read", json!({"path": uri})))
            .await
            .json();
        assert_eq!(a["result"]["isError"], true, "{uri}: {a}");
    }
    let forwarded: Vec<Value> = seen.seen.lock().unwrap()[before..].to_vec();
    assert!(
        !forwarded.iter().any(|m| m["params"]["name"] == "read"),
        "no escaping path went upstream: {forwarded:?}"
    );

    // Path forms that a next hop could read as another path.
    let base = format!("http://{}", tg.addr);
    for _ in 0..60 {
        let dots = g.pick(&["..", ".", "%2e%2e", "%2E.", ".%2e", "%2e"]);
        let sep = g.pick(&["/", "%2f", "%5C"]);
        let prefix = g.pick(&["/.well-known", "", "/mcp"]);
        let path = format!("{prefix}/{dots}{sep}admin");
        let method = if g.next().is_multiple_of(2) {
            Method::GET
        } else {
            Method::DELETE
        };
        let r = request(method.clone(), &format!("{base}{path}"), &[], "").await;
        assert_eq!(r.status, 400, "{method} {path}: {}", r.text());
    }

    // Error sets of any size: described up to max_errors, the answer bounded.
    for _ in 0..10 {
        let keys = 33 + (g.next() % 5000) as usize;
        let width = (g.next() % 400) as usize;
        let args: serde_json::Map<String, Value> = (0..keys)
            .map(|i| (format!("{}{i}", "k".repeat(width)), json!(i)))
            .collect();
        let r = post(&tg.url(), None, call(1, "wide", Value::Object(args))).await;
        assert!(
            r.body.len() < 64 * 1024,
            "{keys} keys of {width}: {} bytes",
            r.body.len()
        );
        let text = result_text(&r.json());
        assert!(
            text.contains(&format!("({keys} problems)")),
            "{}",
            &text[..100]
        );
    }
}

/// On the shared stdio child, where the ids of requests without a session are toolgate's, a
/// client's `notifications/cancelled` names its own requests and no other's: bob's guesses at
/// the ids of alice's call reach nothing, alice's own cancellation reaches her call.
#[tokio::test]
async fn a_cancellation_on_the_shared_child_names_only_the_senders_requests() {
    let alice = tempfile_lite::TempFile::new("alice-token");
    let bob = tempfile_lite::TempFile::new("bob-token");
    let config = format!(
        "[[auth.tokens]]\nname = \"alice\"\nfile = \"{}\"\n[[auth.tokens]]\nname = \"bob\"\nfile = \"{}\"\n",
        alice.path.display(),
        bob.path.display()
    );
    let command = common::peers::stdio_fixture(&[]).await;
    let tg = Toolgate::in_front_of(&command, Some(&config)).await;
    let as_ = |token: &'static str, body: Value| {
        let url = tg.url();
        async move {
            let auth = format!("Bearer {token}");
            request(
                Method::POST,
                &url,
                &[
                    ("content-type", "application/json"),
                    ("accept", ACCEPT),
                    ("authorization", auth.as_str()),
                ],
                body.to_string(),
            )
            .await
        }
    };
    let cancel = |id: Value| json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id}});
    // Bob learns where toolgate's ids stand, then tries the ones around it, and alice's own.
    let seen = as_(
        "bob-token",
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "seen", "arguments": {}}}),
    )
    .await;
    let before = result_text(&seen.json())
        .matches("notifications/cancelled")
        .count();
    let slow = tokio::spawn(as_(
        "alice-token",
        json!({"jsonrpc": "2.0", "id": 7,
        "method": "tools/call", "params": {"name": "slow", "arguments": {}}}),
    ));
    tg.logs_when(|l| l.contains("slow call begun")).await;
    let request_id = seen.headers["x-request-id"].to_str().unwrap().to_owned();
    let (prefix, n) = request_id.rsplit_once('-').unwrap();
    let n: u64 = n.parse().unwrap_or(0);
    let mut guesses = vec![json!(7)];
    guesses.extend((n.saturating_sub(5)..n + 20).map(|i| json!(format!("{prefix}-{i}"))));
    for g in guesses {
        let r = as_("bob-token", cancel(g)).await;
        assert_eq!(r.status, 202, "{}", r.text());
    }
    // Alice's own cancellation reaches her call, under toolgate's id for it.
    let r = as_("alice-token", cancel(json!(7))).await;
    assert_eq!(r.status, 202, "{}", r.text());
    let _ = slow.await;
    let seen = as_(
        "bob-token",
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "seen", "arguments": {}}}),
    )
    .await;
    let after = result_text(&seen.json())
        .matches("notifications/cancelled")
        .count();
    assert_eq!(
        after,
        before + 1,
        "alice's cancellation, and none of bob's, reached the child: {}",
        seen.text()
    );
}

/// Under `mode = "off"` a made-up tool name reaches the rate limiter unchecked: names no
/// server listed share one bucket, so inventing names buys no budget (nor a Redis key each).
#[tokio::test]
async fn made_up_names_share_one_rate_bucket() {
    let (up, _) = Scripted::new(vec![open_tool("echo")]).spawn().await;
    let config = "[validation]\nmode = \"off\"\n[clients.\"*\"]\nrate_limit = \"2/minute\"\n";
    let tg = Toolgate::serve(&up, Some(config)).await;
    // The client's own listing names `echo` (toolgate does not list in this mode).
    let list = json!({"jsonrpc": "2.0", "id": 0, "method": "tools/list"}).to_string();
    post(&tg.url(), None, list).await;
    for (i, name) in ["made-up-1", "made-up-2"].iter().enumerate() {
        let a = post(&tg.url(), None, call(i as i64, name, json!({})))
            .await
            .json();
        assert!(a["result"]["_meta"]["toolgate/rate_limit"].is_null(), "{a}");
    }
    let a = post(&tg.url(), None, call(3, "made-up-3", json!({})))
        .await
        .json();
    assert_eq!(
        a["result"]["_meta"]["toolgate/rate_limit"]["code"], "rate_limited",
        "{a}"
    );
    // A tool a listing named keeps a budget of its own.
    let a = post(&tg.url(), None, call(4, "echo", json!({})))
        .await
        .json();
    assert!(a["result"]["_meta"]["toolgate/rate_limit"].is_null(), "{a}");
}

/// With authentication, a session serves only the identity that opened it: another client
/// holding its id can neither call into it, read its stream, nor end it; each is told the
/// session is not found. In front of an HTTP server (its own sessions) and of stdio children
/// (toolgate's).
#[tokio::test]
async fn sessions_are_bound_to_the_identity_that_opened_them() {
    let alice = tempfile_lite::TempFile::new("alice-token-0123456789");
    let bob = tempfile_lite::TempFile::new("bob-token-0123456789");
    let config = format!(
        "[[auth.tokens]]\nname = \"alice\"\nfile = \"{}\"\n[[auth.tokens]]\nname = \"bob\"\nfile = \"{}\"\n",
        alice.path.display(),
        bob.path.display()
    );
    let (_demo, over_http, _) = demo_behind_toolgate(Default::default(), Some(&config)).await;
    let over_stdio = sidecar(Some(&config)).await;
    for (mode, tg) in [
        ("serve --upstream", &over_http),
        ("serve -- CMD", &over_stdio),
    ] {
        let url = tg.url();
        let as_client = |token: &'static str, session: Option<String>| {
            let mut h = vec![
                ("authorization", format!("Bearer {token}")),
                ("content-type", "application/json".into()),
                ("accept", "application/json, text/event-stream".into()),
            ];
            if let Some(s) = session {
                h.push(("mcp-session-id", s));
            }
            h
        };
        let send = |method: Method, headers: Vec<(&'static str, String)>, body: String| {
            let url = url.clone();
            async move {
                let h: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
                request(method, &url, &h, body).await
            }
        };
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "alice", "version": "1"}}});
        let r = send(
            Method::POST,
            as_client("alice-token-0123456789", None),
            init.to_string(),
        )
        .await;
        assert_eq!(r.status, 200, "{mode}: {}", r.text());
        let session = r.headers["mcp-session-id"].to_str().unwrap().to_owned();
        let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string();
        let alices = || as_client("alice-token-0123456789", Some(session.clone()));
        let bobs = || as_client("bob-token-0123456789", Some(session.clone()));
        let r = send(Method::POST, alices(), list.clone()).await;
        assert_eq!(r.status, 200, "{mode}: alice in her session: {}", r.text());
        for (method, body) in [
            (Method::POST, list.clone()),
            (Method::GET, String::new()),
            (Method::DELETE, String::new()),
        ] {
            let r = send(method.clone(), bobs(), body).await;
            assert_eq!(r.status, 404, "{mode}: bob's {method} in alice's session");
            assert_eq!(r.json()["error"]["message"], "Session not found", "{mode}");
        }
        let r = send(Method::POST, alices(), list.clone()).await;
        assert_eq!(
            r.status, 200,
            "{mode}: alice's session outlived bob's DELETE"
        );
        // An id altered by one character opens nothing either.
        let mut forged = session.clone();
        let last = forged.pop().unwrap();
        forged.push(if last == '0' { '1' } else { '0' });
        let h = as_client("alice-token-0123456789", Some(forged));
        assert_eq!(
            send(Method::POST, h, list.clone()).await.status,
            404,
            "{mode}"
        );
    }
}

/// An id is free again as soon as its answer has been read: a client that sends each request
/// under the same id, one after another, gets every answer and no refusal, whether toolgate
/// answers (arguments refused) or the server does. Over stdio, in front of a child and of an
/// HTTP server.
#[tokio::test]
async fn an_id_answered_can_be_sent_again_at_once_over_stdio() {
    let tg = sidecar(None).await;
    let modes = [
        (
            "stdio -- CMD",
            [vec!["stdio".into(), "--".into()], fixture().await].concat(),
        ),
        (
            "stdio --upstream",
            vec!["stdio".into(), "--upstream".into(), tg.url()],
        ),
    ];
    for (mode, args) in modes {
        let mut g = StdioGate::start_args(args);
        g.initialize().await;
        let refusal = json!({"jsonrpc": "2.0", "id": 7, "result": {
            "content": [{"type": "text", "text": "Invalid arguments for tool \"add\" (1 problem):\n- a: expected an integer, got string \"one\" (parameter description: first)\nCorrect the arguments and call the tool again."}],
            "isError": true,
            "_meta": {"toolgate/validation": {"code": "invalid_arguments", "tool": "add",
                "parameter_errors": {"/a": "expected an integer, got string \"one\""}}}}});
        for round in 0..100 {
            let refused = g
                .ask(
                    serde_json::from_str(&call_id("7", "add", json!({"a": "one", "b": 2})))
                        .unwrap(),
                )
                .await;
            assert_eq!(refused, refusal, "{mode}, round {round}");
            let added = g
                .ask(
                    serde_json::from_str(&call_id("7", "add", json!({"a": round, "b": 2})))
                        .unwrap(),
                )
                .await;
            let sum = json!({"jsonrpc": "2.0", "id": 7, "result": {
                "content": [{"type": "text", "text": (round + 2).to_string()}]}});
            assert_eq!(added, sum, "{mode}, round {round}");
        }
    }
}

/// A second request under an id still in flight is refused by its id, and the first gets its
/// own answer: in front of a stdio child, over stdio and in a session over HTTP.
#[tokio::test]
async fn a_duplicate_id_in_flight_is_refused_and_the_first_is_answered() {
    let slow = |id: i64| json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "slow", "arguments": {}}});
    let refused = "Invalid Request: a request with this id is still in flight";

    let (mut g, _) = StdioGate::start(&fixture().await, None);
    g.initialize().await;
    g.send(&slow(5).to_string()).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    g.send(&slow(5).to_string()).await;
    let first = g.recv().await;
    assert_eq!(first["id"], 5, "{first}");
    assert!(
        first["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with(refused),
        "{first}"
    );
    let second = g.recv().await;
    assert_eq!(
        second["result"]["content"][0]["text"], "slow done",
        "{second}"
    );

    let tg = sidecar(None).await;
    let s = open_session(&tg.url()).await;
    let url = tg.url();
    let (u, sess) = (url.clone(), s.clone());
    let running = tokio::spawn(async move { post(&u, Some(&sess), slow(5).to_string()).await });
    tg.logs_when(|l| l.contains("slow call begun")).await;
    let dup = post(&url, Some(&s), slow(5).to_string()).await;
    assert_eq!(dup.status, 400, "{}", dup.text());
    assert_eq!(dup.json()["id"], 5);
    assert!(
        dup.json()["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with(refused)
    );
    let a = running.await.unwrap().answer();
    assert_eq!(a["result"]["content"][0]["text"], "slow done", "{a}");
}
