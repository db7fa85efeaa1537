//! Interop: toolgate in front of real SDK servers, and the real Python SDK client through
//! toolgate. The peers are installed by the test run itself (see `common/peers.rs`).
//!
//! For each server: an invalid call gets toolgate's `isError` answer; a valid one gets the
//! server's own answer, identical to calling the server directly.

use crate::common;
use common::modes::{Front, Mode};
use common::peers::{peers, python_client, server_everything_http, wait_for_port};
use common::*;
use serde_json::{Value, json};
use std::process::Stdio;
use tokio::process::{Child, Command};

/// A peer process, killed with the test.
struct Peer {
    _child: Child,
    url: String,
}

/// The Python SDK fixture server (`mcpserver` or `lowlevel`).
async fn python_server(flavour: &str) -> Peer {
    let p = tokio::task::spawn_blocking(peers).await.unwrap();
    let mut child = Command::new(&p.python)
        .arg(p.fixtures.join("py_server.py"))
        .arg(flavour)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("the Python fixture starts");
    let port = port_line(&mut child).await;
    wait_for_port(port).await;
    Peer {
        _child: child,
        url: format!("http://127.0.0.1:{port}/mcp"),
    }
}

fn parameter_errors(answer: &Value) -> Value {
    answer["result"]["_meta"]["toolgate/validation"]["parameter_errors"].clone()
}

#[tokio::test]
async fn server_everything_behind_toolgate() {
    let se = server_everything_http().await;
    let tg = Toolgate::serve(&se.url, None).await;
    let via = open_session(&tg.url()).await;
    let direct = open_session(&se.url).await;

    // Invalid: answered by toolgate, with the exact violation.
    let a = post(
        &tg.url(),
        Some(&via),
        call(1, "get-sum", json!({"a": "abc", "b": 2})),
    )
    .await;
    assert_eq!(a.status, 200);
    let a = a.json();
    assert_eq!(a["result"]["isError"], true);
    assert_eq!(
        parameter_errors(&a),
        json!({"/a": "expected a number, got string \"abc\""})
    );
    assert!(
        result_text(&a).starts_with(
            "Invalid arguments for tool \"get-sum\" (1 problem):\n- a: expected a number"
        ),
        "{a}"
    );

    // Valid: the server's own answer, the same as calling it directly.
    let body = call(2, "get-sum", json!({"a": 1, "b": 2}));
    let through = post(&tg.url(), Some(&via), body.clone()).await.answer();
    let straight = post(&se.url, Some(&direct), body).await.answer();
    assert_eq!(through, straight);
    assert_eq!(
        through["result"]["content"][0]["text"],
        "The sum of 1 and 2 is 3."
    );

    // "10" for a number: server-everything itself refuses it; through toolgate it works.
    let refused = post(
        &se.url,
        Some(&direct),
        call(3, "get-sum", json!({"a": "10", "b": 2})),
    )
    .await
    .answer();
    assert_eq!(refused["result"]["isError"], true);
    let coerced = post(
        &tg.url(),
        Some(&via),
        call(3, "get-sum", json!({"a": "10", "b": 2})),
    )
    .await
    .answer();
    assert_eq!(
        coerced["result"]["content"][0]["text"],
        "The sum of 10 and 2 is 12."
    );

    // Unknown tool: the spec's -32602, where server-everything says isError.
    let a = post(&tg.url(), Some(&via), call(4, "get-summ", json!({})))
        .await
        .json();
    assert_eq!(a["error"]["code"], -32602);
    assert_eq!(
        a["error"]["message"],
        "Unknown tool: get-summ. Did you mean \"get-sum\"?"
    );

    // Pass-through of the server's SSE answer, event ids included.
    let r = post(
        &tg.url(),
        Some(&via),
        json!({"jsonrpc": "2.0", "id": 5, "method": "ping"}).to_string(),
    )
    .await;
    assert_eq!(r.headers["content-type"], "text/event-stream");
    assert!(r.text().starts_with("event: message\nid: "), "{}", r.text());
    assert_eq!(r.answer(), json!({"jsonrpc": "2.0", "id": 5, "result": {}}));

    // Its resource "not found" is -32602 without data; toolgate adds the SEP-2164 shape.
    let read = json!({"jsonrpc": "2.0", "id": 6, "method": "resources/read", "params": {"uri": "nosuch://nope"}}).to_string();
    let raw = post(&se.url, Some(&direct), read.clone()).await.answer();
    assert_eq!(raw["error"]["code"], -32602);
    assert!(raw["error"].get("data").is_none(), "{raw}");
    let a = post(&tg.url(), Some(&via), read).await.answer();
    assert_eq!(
        a,
        json!({"jsonrpc": "2.0", "id": 6, "error": {"code": -32602, "message": "Resource not found: nosuch://nope", "data": {"uri": "nosuch://nope"}}})
    );

    // DELETE ends the session through toolgate.
    let r = request(
        http::Method::DELETE,
        &tg.url(),
        &[("mcp-session-id", &via)],
        "",
    )
    .await;
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn python_sdk_server_behind_toolgate() {
    let py = python_server("mcpserver").await;
    let tg = Toolgate::serve(&py.url, None).await;
    let via = open_session(&tg.url()).await;
    let direct = open_session(&py.url).await;

    let a = post(
        &tg.url(),
        Some(&via),
        call(1, "book", json!({"date": "tomorrow"})),
    )
    .await
    .answer();
    assert_eq!(
        parameter_errors(&a),
        json!({"/date": "must match the pattern ^\\d{4}-\\d{2}-\\d{2}$, got \"tomorrow\""})
    );
    assert!(
        result_text(&a).contains("(parameter description: Travel date as yyyy-mm-dd)"),
        "{a}"
    );

    for (id, args) in [(2, json!({"a": 1, "b": 2})), (3, json!({"a": 40, "b": 2}))] {
        let body = call(id, "add", args);
        let through = post(&tg.url(), Some(&via), body.clone()).await.answer();
        let straight = post(&py.url, Some(&direct), body).await.answer();
        assert_eq!(through, straight);
    }
    let a = post(
        &tg.url(),
        Some(&via),
        call(4, "add", json!({"a": "10", "b": 2})),
    )
    .await
    .answer();
    assert_eq!(a["result"]["structuredContent"], json!({"result": 12}));
}

#[tokio::test]
async fn python_sdk_lowlevel_server_is_guarded() {
    // This server validates nothing: "tomorrow"-style mistakes crash its handler into code 0.
    let py = python_server("lowlevel").await;
    let tg = Toolgate::serve(&py.url, None).await;
    let direct = open_session(&py.url).await;
    let crashed = post(
        &py.url,
        Some(&direct),
        call(1, "add", json!({"a": "x", "b": 2})),
    )
    .await
    .answer();
    assert_eq!(crashed["error"]["code"], 0, "{crashed}");
    let via = open_session(&tg.url()).await;
    let a = post(
        &tg.url(),
        Some(&via),
        call(1, "add", json!({"a": "x", "b": 2})),
    )
    .await
    .answer();
    assert_eq!(
        parameter_errors(&a),
        json!({"/a": "expected an integer, got string \"x\""})
    );
    let a = post(
        &tg.url(),
        Some(&via),
        call(2, "add", json!({"a": 1, "b": 2})),
    )
    .await
    .answer();
    assert_eq!(result_text(&a), "3");
}

#[tokio::test]
async fn python_sdk_client_through_toolgate() {
    let py = python_server("mcpserver").await;
    let tg = Toolgate::serve(&py.url, None).await;
    for mode in ["legacy", "auto"] {
        let out = python_client(
            &tg.url(),
            mode,
            &[
                ("add", json!({"a": 1, "b": 2})),
                ("book", json!({"date": "tomorrow"})),
            ],
        )
        .await;
        assert_eq!(out["tools"], json!(["add", "book", "list_files"]), "{mode}");
        let ok = &out["calls"][0];
        assert_eq!(
            ok["content"],
            json!([{"type": "text", "text": "3"}]),
            "{mode}"
        );
        assert_eq!(ok["isError"], false);
        let bad = &out["calls"][1];
        assert_eq!(bad["isError"], true, "{mode}");
        assert_eq!(
            bad["_meta"]["toolgate/validation"]["parameter_errors"],
            json!({"/date": "must match the pattern ^\\d{4}-\\d{2}-\\d{2}$, got \"tomorrow\""})
        );
    }
}

#[tokio::test]
async fn python_sdk_client_falls_back_to_legacy_through_toolgate() {
    // The auto client probes server/discover first; server-everything refuses it, the
    // probe passes through toolgate untouched, and the client falls back to initialize.
    let se = server_everything_http().await;
    let tg = Toolgate::serve(&se.url, None).await;
    let out = python_client(
        &tg.url(),
        "auto",
        &[
            ("get-sum", json!({"a": 1, "b": 2})),
            ("get-sum", json!({"a": "one", "b": 2})),
        ],
    )
    .await;
    assert!(
        out["tools"].as_array().unwrap().contains(&json!("get-sum")),
        "{out}"
    );
    assert_eq!(
        out["calls"][0]["content"][0]["text"],
        "The sum of 1 and 2 is 3."
    );
    assert_eq!(out["calls"][1]["isError"], true);
    assert_eq!(
        out["calls"][1]["_meta"]["toolgate/validation"]["parameter_errors"],
        json!({"/a": "expected a number, got string \"one\""})
    );
}

/// A server of the HTTP+SSE transport of 2024-11-05 (the Python SDK's `sse_app`) given as a
/// Streamable HTTP one: `check` names the transport and the setting to give, and a client's
/// request gets an error that says where to look.
#[tokio::test]
async fn a_server_of_the_http_and_sse_transport_given_as_another_is_named() {
    let peer = common::peers::python_http("py_server.py", &["sse"]).await;
    let url = format!("http://127.0.0.1:{}/sse", peer.port);
    let (status, _, err) = run_toolgate(&["check", "--upstream", &url]).await;
    assert_eq!(status, Some(2));
    assert_eq!(
        err.trim_end(),
        format!(
            "toolgate check: cannot list the tools of {url}: the server speaks the HTTP+SSE transport of 2024-11-05 (an event stream at this URL names where messages go), which the protocol replaced with Streamable HTTP in 2025-03-26; give upstream_transport = \"sse\" (--upstream-transport sse), or transport = \"sse\" in its [[upstreams]] entry"
        )
    );
    let tg = Toolgate::serve(&url, None).await;
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let r = post(&tg.url(), None, init.to_string()).await;
    let message = "Upstream MCP server unavailable: the tool server answered with something that is not JSON-RPC: HTTP 405 with text/plain (this URL takes no messages: `toolgate check` says whether the server speaks the HTTP+SSE transport of 2024-11-05)";
    assert_eq!(
        r.json(),
        json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": message}})
    );
}

/// A server of the HTTP+SSE transport behind toolgate (`upstream_transport = "sse"`), served
/// as a stdio server's child is, through `serve` and `stdio` alike: the same rules on every
/// call, for the Python SDK's own client too, and `check` lists it.
#[tokio::test]
async fn a_server_of_the_http_and_sse_transport_is_served_under_the_rules() {
    let peer = common::peers::python_http("py_server.py", &["sse"]).await;
    let url = format!("http://127.0.0.1:{}/sse", peer.port);
    let invalid = "Invalid arguments for tool \"add\" (1 problem):\n- a: expected an integer, got string \"x\"\nCorrect the arguments and call the tool again.";
    let scenarios = [
        (
            json!({"name": "add", "arguments": {"a": 1, "b": 2}}),
            json!({"result": merged(text("3"), json!({"structuredContent": {"result": 3}}))}),
        ),
        (
            json!({"name": "add", "arguments": {"a": "10", "b": 2}}),
            json!({"result": merged(text("12"), json!({"structuredContent": {"result": 12}}))}),
        ),
        (
            json!({"name": "add", "arguments": {"a": "x", "b": 2}}),
            json!({"result": {
            "content": [{"type": "text", "text": invalid}], "isError": true,
            "_meta": {"toolgate/validation": {"code": "invalid_arguments", "tool": "add",
                "parameter_errors": {"/a": "expected an integer, got string \"x\""}}}}}),
        ),
        (
            json!({"name": "nope", "arguments": {}}),
            json!({"error": {"code": -32602, "message": "Unknown tool: nope", "data": {"tool": "nope", "suggestions": []}}}),
        ),
    ];
    for mode in [Mode::ServeUpstream, Mode::StdioUpstream] {
        let mut front =
            Front::start_with(mode, &url, &[], Some("upstream_transport = \"sse\"\n")).await;
        for (id, (params, expected)) in scenarios.iter().enumerate() {
            let call =
                json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
            let mut expected = expected.clone();
            expected["jsonrpc"] = json!("2.0");
            expected["id"] = json!(id);
            assert_eq!(front.ask(call).await, expected, "{mode}: {params}");
        }
        // A 2026-07-28 client, as a stdio child's: the server (Python SDK 2.x) speaks that
        // era on a session of its own (`serve`'s shared child), and is bridged to on the one
        // the pipe's client already opened with the handshake, which then completes the
        // result (`resultType`) without the server's `_meta`.
        let call = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
            "params": {"name": "add", "arguments": {"a": 2, "b": 2}}});
        let mut four = json!({"jsonrpc": "2.0", "id": 9, "result": {
            "content": [{"type": "text", "text": "4"}], "isError": false,
            "structuredContent": {"result": 4}, "resultType": "complete"}});
        if mode == Mode::ServeUpstream {
            let info = json!({"name": "toolgate-fixture", "version": ""});
            four["result"]["_meta"] = json!({"io.modelcontextprotocol/serverInfo": info});
        }
        assert_eq!(front.ask_modern(call).await, four, "{mode}");
    }
    // The Python SDK's own client, in both its connect modes.
    let tg = Toolgate::serve(&url, Some("upstream_transport = \"sse\"\n")).await;
    for mode in ["legacy", "auto"] {
        let calls = [
            ("add", json!({"a": 1, "b": 2})),
            ("add", json!({"a": "x", "b": 2})),
        ];
        let out = common::peers::python_client(&tg.url(), mode, &calls).await;
        assert_eq!(out["tools"], json!(["add", "book", "list_files"]), "{mode}");
        assert_eq!(
            out["calls"][0]["content"],
            json!([{"type": "text", "text": "3"}])
        );
        let violation = &out["calls"][1]["_meta"]["toolgate/validation"]["parameter_errors"];
        assert_eq!(
            violation,
            &json!({"/a": "expected an integer, got string \"x\""}),
            "{mode}"
        );
    }
    let (status, out, _) =
        run_toolgate(&["check", "--upstream", &url, "--upstream-transport", "sse"]).await;
    assert_eq!(status, Some(0), "{out}");
    assert!(
        out.starts_with(&format!("toolgate check {url}: 3 tools, 0 errors")),
        "{out}"
    );
}

/// server-everything over the HTTP+SSE transport, behind toolgate: its questions in the middle
/// of a call (sampling, elicitation, roots) reach the Python SDK's client and its answers come
/// back, its progress too, for a handshake-era client and, bridged in input-required rounds,
/// a 2026-07-28 one.
#[tokio::test]
async fn server_everything_over_http_and_sse_asks_its_client_through_toolgate() {
    let se = common::peers::server_everything_sse().await;
    let tg = Toolgate::serve(&se.url, Some("upstream_transport = \"sse\"\n")).await;
    let calls = [
        ("get-sum", json!({"a": 1, "b": 2})),
        (
            "trigger-long-running-operation",
            json!({"duration": 1, "steps": 2}),
        ),
        (
            "trigger-sampling-request",
            json!({"prompt": "hi", "maxTokens": 5}),
        ),
        ("trigger-elicitation-request", json!({})),
        ("get-roots-list", json!({})),
    ];
    for mode in ["legacy", "auto"] {
        let out = common::peers::python_client_answering(&tg.url(), mode, &calls).await;
        let text = |i: usize| {
            out["calls"][i]["content"][0]["text"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        };
        assert_eq!(text(0), "The sum of 1 and 2 is 3.", "{mode}: {out}");
        assert_eq!(
            text(1),
            "Long running operation completed. Duration: 1 seconds, Steps: 2."
        );
        assert!(text(2).contains("hi from the model"), "{mode}: {out}");
        assert_eq!(
            text(3),
            "\u{2705} User provided the requested information!",
            "{mode}"
        );
        assert!(text(4).contains("URI: file:///work/ada"), "{mode}: {out}");
    }
}

/// A session with an HTTP+SSE server goes with the credential of the client that opened it,
/// as its messages would to a Streamable HTTP server: its stream and every post. A session
/// clients share goes with none of theirs.
#[tokio::test]
async fn an_http_and_sse_session_goes_with_its_openers_credential() {
    use futures_util::StreamExt;
    use std::sync::{Arc, Mutex};
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let said = |seen: &Arc<Mutex<Vec<String>>>, what: &str, headers: &axum::http::HeaderMap| {
        let auth = headers
            .get("authorization")
            .map(|v| v.to_str().unwrap().to_owned());
        seen.lock().unwrap().push(format!("{what} {auth:?}"));
    };
    let (on_get, on_post) = (seen.clone(), seen.clone());
    let server = axum::Router::new()
        .route(
            "/sse",
            axum::routing::get(move |headers: axum::http::HeaderMap| {
                said(&on_get, "GET", &headers);
                let endpoint = "event: endpoint\ndata: /messages\n\n";
                let first = futures_util::stream::once(std::future::ready(
                    Ok::<_, std::io::Error>(bytes::Bytes::from_static(endpoint.as_bytes())),
                ));
                let body =
                    axum::body::Body::from_stream(first.chain(futures_util::stream::pending()));
                async move {
                    axum::response::Response::builder()
                        .header("content-type", "text/event-stream")
                        .body(body)
                        .unwrap()
                }
            }),
        )
        .route(
            "/messages",
            axum::routing::post(move |headers: axum::http::HeaderMap| {
                said(&on_post, "POST", &headers);
                async { axum::http::StatusCode::ACCEPTED }
            }),
        );
    let up = serve_on_loopback(server).await;
    // The server takes every message and answers none: each request ends at its timeout.
    let config = "upstream_transport = \"sse\"\n[limits]\nupstream_timeout = \"1s\"\n";
    let tg = Toolgate::serve(&format!("http://{up}/sse"), Some(config)).await;
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let alice = [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("authorization", "Bearer alice"),
    ];
    request(http::Method::POST, &tg.url(), &alice, init.to_string()).await;
    let mut bob = alice;
    bob[2].1 = "Bearer bob";
    let ping = json!({"jsonrpc": "2.0", "id": 2, "method": "ping"});
    request(http::Method::POST, &tg.url(), &bob, ping.to_string()).await;
    let seen = seen.lock().unwrap().clone();
    let alices = ["GET Some(\"Bearer alice\")", "POST Some(\"Bearer alice\")"];
    assert_eq!(&seen[..2], alices, "{seen:?}");
    assert_eq!(seen[2], "GET None", "the shared session's: {seen:?}");
    assert!(seen[3..].iter().all(|s| s.ends_with("None")), "{seen:?}");
}

/// An HTTP+SSE server that goes away mid-session: the session ends as a child's exit ends
/// one. Its calls are answered that the server is unavailable, never left waiting, and then
/// the session is gone (404), so the client opens another.
#[tokio::test]
async fn a_session_whose_http_and_sse_server_goes_away_ends() {
    let peer = common::peers::python_http("py_server.py", &["sse"]).await;
    let url = format!("http://127.0.0.1:{}/sse", peer.port);
    let tg = Toolgate::serve(&url, Some("upstream_transport = \"sse\"\n")).await;
    let session = open_session(&tg.url()).await;
    let add = call(1, "add", json!({"a": 1, "b": 2}));
    let r = post(&tg.url(), Some(&session), add.clone()).await;
    assert_eq!(r.json()["result"]["content"][0]["text"], "3");
    peer.stop().await;
    for _ in 0..50 {
        let r = post(&tg.url(), Some(&session), add.clone()).await;
        if r.status == 404 {
            return;
        }
        let a = r.json();
        assert_eq!(a["result"]["isError"], true, "{a}");
        assert_eq!(
            a["result"]["_meta"]["toolgate/upstream"]["code"], "upstream_unavailable",
            "{a}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("the session outlived its server's stream");
}

/// `a` with `b`'s members added.
fn merged(mut a: Value, b: Value) -> Value {
    if let (Some(a), Some(b)) = (a.as_object_mut(), b.as_object()) {
        a.extend(b.clone());
    }
    a
}

#[tokio::test]
async fn check_grades_server_everything() {
    let se = server_everything_http().await;
    let out = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["check", "--upstream", &se.url])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let out = String::from_utf8_lossy(&out.stdout);
    let (summary, problems, open) = check_output(&out);
    assert_eq!(
        summary,
        format!(
            "toolgate check {}: 13 tools, 0 errors, 1 warning, 13 notes",
            se.url
        )
    );
    assert_eq!(
        problems,
        ["warning  get-resource-reference: property \"resourceType\" has no description"]
    );
    assert_eq!(
        open.len(),
        13,
        "server-everything leaves every tool's properties open"
    );
}

/// The TypeScript SDK client's task-augmented calls (SEP-1686), in all four modes and through
/// the library layer, in front of server-everything over HTTP and over stdio. With arguments
/// toolgate refuses, the SDK reads toolgate's answer as the JSON-RPC error it is, with the
/// report in its data. With valid ones, the task's whole life passes: created, polled with
/// `tasks/get`, and its result fetched with `tasks/result`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typescript_sdk_task_augmented_calls_in_every_mode() {
    let p = tokio::task::spawn_blocking(peers).await.unwrap();
    let http = peers::server_everything_http().await;
    let stdio_server = [p.server_everything.display().to_string(), "stdio".into()];
    let report = "Invalid arguments for tool \"get-sum\" (1 problem):\n- b: expected a number, got string \"many\" (parameter description: Second number)\nCorrect the arguments and call the tool again.";
    let expected = json!([[{"type": "error", "code": -32602,
        "message": "MCP error -32602: Invalid arguments for tool \"get-sum\" (1 problem):",
        "data": {"code": "invalid_arguments", "tool": "get-sum", "text": report,
                 "parameter_errors": {"/b": "expected a number, got string \"many\""}}}]]);
    let calls = [
        ("get-sum", json!({"a": 1, "b": "many"})),
        ("simulate-research-query", json!({"topic": "rust"})),
    ];

    let reached = common::modes::Reached::start(&http.url, &stdio_server).await;
    // At once: the task takes four seconds of the server's in each.
    let runs = (reached.fronts.iter()).map(|(_, front)| peers::typescript_client(front, &calls));
    let outs = futures_util::future::join_all(runs).await;
    for ((mode, _), out) in reached.fronts.iter().zip(outs) {
        assert_eq!(out["calls"][0], expected[0], "{mode}");
        let task = out["calls"][1].as_array().expect("the task's messages");
        let kinds: Vec<&str> = task.iter().map(|m| m["type"].as_str().unwrap()).collect();
        assert!(kinds.len() >= 2, "{mode}: {task:?}");
        let polled = &kinds[1..kinds.len() - 1];
        assert!(
            kinds.first() == Some(&"taskCreated")
                && kinds.last() == Some(&"result")
                && polled.iter().all(|k| *k == "taskStatus"),
            "{mode}: {kinds:?}"
        );
        let report = task.last().unwrap()["result"]["content"][0]["text"].as_str();
        assert!(
            report.is_some_and(|r| r.starts_with("# Research Report: rust\n")),
            "{mode}: {task:?}"
        );
    }
    reached.stop().await;
}

/// The TypeScript SDK client's task-augmented calls that fail past the guard, in all four
/// modes and through the library layer, before the stdio fixture and a scripted HTTP server
/// that answer alike: the server's own error reaches the SDK as it came, and a server gone
/// mid-call as toolgate's `-32603`, each an error the SDK reads (a tool result would fail its
/// check for a `CreateTaskResult`, and the report with it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typescript_sdk_task_augmented_calls_read_a_failure_past_the_guard() {
    use common::scripted::{Script, Scripted, open_tool};
    let (url, _) = Scripted::new(vec![open_tool("fail"), open_tool("crash")])
        .script("fail", Script::Error(json!({"code": 0, "message": "boom"})))
        .script("crash", Script::SseThenReset(vec![]))
        .spawn()
        .await;
    let command = common::peers::stdio_fixture(&[]).await;
    let calls = [("fail", json!({})), ("crash", json!({}))];
    let reached = common::modes::Reached::start(&url, &command).await;
    let runs = (reached.fronts.iter()).map(|(_, front)| peers::typescript_client(front, &calls));
    let outs = futures_util::future::join_all(runs).await;
    for ((mode, _), out) in reached.fronts.iter().zip(outs) {
        assert_eq!(
            out["calls"][0],
            json!([{"type": "error", "code": 0, "message": "MCP error 0: boom"}]),
            "{mode}"
        );
        // Why the server went away is each transport's to say.
        let gone = &out["calls"][1][0];
        assert_eq!(gone["type"], "error", "{mode}: {out}");
        assert_eq!(gone["code"], -32603, "{mode}: {out}");
        assert_eq!(
            gone["data"]["code"], "upstream_unavailable",
            "{mode}: {out}"
        );
        let message = gone["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with("MCP error -32603: The tool server is unavailable"),
            "{mode}: {out}"
        );
        assert_eq!(out["calls"][1].as_array().map(Vec::len), Some(1), "{mode}");
    }
    reached.stop().await;
}

/// toolgate's answer to a call of `tool` it refuses for `problems`: each one's place, what is
/// wrong there, and the parameter's description as the report gives it.
fn refused(tool: &str, problems: &[(&str, &str, &str)]) -> Value {
    let lines: Vec<String> = problems
        .iter()
        .map(|(at, why, described)| format!("- {}: {why}{described}", &at[1..].replace('/', ".")))
        .collect();
    let n = problems.len();
    let text = format!(
        "Invalid arguments for tool \"{tool}\" ({n} problem{}):\n{}\nCorrect the arguments and call the tool again.",
        if n == 1 { "" } else { "s" },
        lines.join("\n")
    );
    let errors: serde_json::Map<String, Value> = problems
        .iter()
        .map(|(at, why, _)| (at.to_string(), json!(why)))
        .collect();
    json!({"content": [{"type": "text", "text": text}], "isError": true,
        "_meta": {"toolgate/validation": {"code": "invalid_arguments", "tool": tool, "parameter_errors": errors}}})
}

/// A tool's answer of one text, as a server of the SDKs writes it.
fn text(t: &str) -> Value {
    json!({"content": [{"type": "text", "text": t}], "isError": false})
}

/// The rmcp fixture's `fail`, whose JSON-RPC error toolgate rewrites for the model.
fn ledger_locked() -> Value {
    json!({"content": [{"type": "text", "text": "the ledger is locked"}], "isError": true,
        "_meta": {"toolgate/upstream_error": {"code": -32603, "message": "the ledger is locked"}}})
}

/// The Rust SDK's server (rmcp, `fixtures/rmcp`), whose schemas schemars writes
/// (sized integers with their bounds, an enum under `$defs`, a date, an optional string) and
/// which alone names only the first problem, refuses `"2"` for an `i32`, and fails a tool with
/// a JSON-RPC error: through toolgate, in every mode, the same answers to either era's client,
/// over stdio and Streamable HTTP.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rust_sdk_server_is_served_under_the_rules_in_every_mode() {
    let http = common::peers::rmcp_http().await;
    let command = common::peers::rmcp_stdio().await;
    let booked = json!({"content": [{"type": "text", "text": "{\"reference\":\"2026-12-24-economy\",\"seats\":2}"}],
        "structuredContent": {"reference": "2026-12-24-economy", "seats": 2}, "isError": false});
    let trip = json!({"passengers": 2, "date": "2026-12-24", "cabin": "economy"});
    let rows: Vec<(&str, Value, Value)> = vec![
        ("add", json!({"a": 2, "b": 3}), text("5")),
        // rmcp alone: "invalid type: string \"2\", expected i32".
        ("add", json!({"a": "2", "b": 3}), text("5")),
        (
            "add",
            json!({"a": 3_000_000_000_u64, "b": 1}),
            refused(
                "add",
                &[(
                    "/a",
                    "must be at most 2147483647, got 3000000000",
                    " (parameter description: the first addend)",
                )],
            ),
        ),
        ("book", trip.clone(), booked.clone()),
        (
            "book",
            json!({"passengers": 2, "date": "2026-12-24", "cabin": "economy", "note": null}),
            booked.clone(),
        ),
        // rmcp alone: "unknown variant `Economy`".
        (
            "book",
            json!({"passengers": 2, "date": "2026-12-24", "cabin": "Economy"}),
            booked,
        ),
        // rmcp alone names the first problem only: "unknown variant `Econmy`".
        (
            "book",
            json!({"passengers": 300, "date": "24/12/2026", "cabin": "Econmy"}),
            refused(
                "book",
                &[
                    (
                        "/cabin",
                        "must be one of [\"economy\",\"business\"], got \"Econmy\"; did you mean \"economy\"?",
                        "",
                    ),
                    (
                        "/date",
                        "must be a valid date, got \"24/12/2026\"",
                        " (parameter description: the day of departure)",
                    ),
                    (
                        "/passengers",
                        "must be at most 255, got 300",
                        " (parameter description: how many travel)",
                    ),
                ],
            ),
        ),
        // rmcp alone: a JSON-RPC error, -32603.
        ("fail", json!({}), ledger_locked()),
    ];
    for mode in Mode::EVERY_FRONT {
        let mut front = Front::start(mode, &http.url, &command).await;
        for (id, (tool, args, result)) in rows.iter().enumerate() {
            let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": tool, "arguments": args}});
            let expected = json!({"jsonrpc": "2.0", "id": id, "result": result});
            assert_eq!(front.ask(call.clone()).await, expected, "{mode}: {args}");
            let mut modern = expected;
            modern["result"]["resultType"] = json!("complete");
            assert_eq!(
                front.ask_modern(call).await,
                modern,
                "{mode}, 2026-07-28: {args}"
            );
        }
    }
}

/// The Rust SDK's client (rmcp 3.11, `fixtures/rmcp`) of either era, in all four modes and
/// through the library layer: opened with the handshake, as the SDK opens by default, and with
/// `server/discover` first (`auto`), which makes it a 2026-07-28 client. Before the SDK's own
/// server, which speaks both eras, and before the TypeScript SDK's, which speaks only the
/// handshake's: there toolgate answers the discovery and carries every request across, and
/// the client goes on in 2026-07-28 where, alone, it falls back to the handshake. The exact
/// results the SDK parsed: coerced and refused arguments, a misspelt tool named with its
/// likely one, a tool's JSON-RPC error rewritten for the model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rust_sdk_client_of_either_era_is_served_in_every_mode() {
    let unknown = |tool: &str, meant: &str| {
        json!({"error": {"code": -32602, "message": format!("Unknown tool: {tool}. Did you mean \"{meant}\"?"),
            "data": {"tool": tool, "suggestions": [meant]}}})
    };
    let rust = (
        common::peers::rmcp_http().await,
        common::peers::rmcp_stdio().await,
    );
    let rust_calls = vec![
        ("add", json!({"a": "2", "b": 3}), text("5")),
        (
            "book",
            json!({"passengers": 300, "date": "2026-12-24", "cabin": "economy"}),
            refused(
                "book",
                &[(
                    "/passengers",
                    "must be at most 255, got 300",
                    " (parameter description: how many travel)",
                )],
            ),
        ),
        ("fail", json!({}), ledger_locked()),
        ("ad", json!({"a": 1, "b": 2}), unknown("ad", "add")),
    ];
    let typescript = (
        common::peers::typescript_zod_http().await,
        common::peers::typescript_zod_stdio().await,
    );
    let letter = json!({"item": {"kind": "letter", "pages": 2}, "when": "2026-12-24T10:00:00Z"});
    let typescript_calls = vec![
        (
            "ship",
            letter.clone(),
            json!({"content": [{"type": "text", "text": letter.to_string()}]}),
        ),
        (
            "ship",
            json!({"item": {"kind": "letter", "pages": 2.5}, "when": "tomorrow"}),
            refused(
                "ship",
                &[
                    ("/item/pages", "expected an integer, got number 2.5", ""),
                    ("/when", "must be a valid date-time, got \"tomorrow\"", ""),
                ],
            ),
        ),
        ("shp", json!({}), unknown("shp", "ship")),
    ];
    let servers = [
        (
            "rmcp",
            rust.0.url.as_str(),
            rust.1,
            ["add", "book", "fail", "sign"].as_slice(),
            rust_calls,
        ),
        (
            "the TypeScript SDK",
            typescript.0.url.as_str(),
            typescript.1,
            ["find", "label", "ship"].as_slice(),
            typescript_calls,
        ),
    ];
    for (server, url, command, tools, rows) in servers {
        let reached = common::modes::Reached::start(url, &command).await;
        let calls: Vec<(&str, Value)> = rows.iter().map(|(t, a, _)| (*t, a.clone())).collect();
        for (lifecycle, protocol) in [("initialize", "2025-11-25"), ("auto", "2026-07-28")] {
            let results: Vec<Value> = rows
                .iter()
                .map(|(_, _, r)| match lifecycle {
                    "auto" if r.get("error").is_none() => {
                        merged(r.clone(), json!({"resultType": "complete"}))
                    }
                    _ => r.clone(),
                })
                .collect();
            let expected = json!({"protocol": protocol, "tools": tools, "calls": results});
            let runs = (reached.fronts.iter())
                .map(|(_, front)| common::peers::rmcp_client(lifecycle, front, &calls));
            let outs = futures_util::future::join_all(runs).await;
            for ((mode, _), out) in reached.fronts.iter().zip(outs) {
                assert_eq!(out, expected, "{server}, {mode}, {lifecycle}");
            }
        }
    }
}

/// The Rust SDK's server made to speak only 2026-07-28 (behind `fixtures/modern_only.py`)
/// asks who signs as an input-required round of its own writing (rmcp's `InputRequiredResult`);
/// the Rust SDK's client, opened with the handshake, is asked it as a server's question and
/// answers with its own callback, which toolgate carries back in the retry; opened with
/// discovery, it gets the round as it came. Over `stdio -- CMD` and `serve -- CMD`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rust_sdk_servers_own_rounds_reach_a_rust_sdk_client_of_either_era() {
    let p = tokio::task::spawn_blocking(peers).await.unwrap();
    let mut command = vec![
        p.python.display().to_string(),
        p.fixtures.join("modern_only.py").display().to_string(),
    ];
    command.extend(common::peers::rmcp_stdio().await);
    let serving = Toolgate::in_front_of(&command, None).await;
    let mut launched = vec![env!("CARGO_BIN_EXE_toolgate").to_string(), "stdio".into()];
    launched.push("--".into());
    launched.extend(command.iter().cloned());
    let fronts = [
        ("serve -- CMD", serving.url()),
        ("stdio -- CMD", format!("stdio:{}", json!(launched))),
    ];
    let calls = [("sign", json!({})), ("add", json!({"a": "2", "b": 3}))];
    for (lifecycle, protocol) in [("initialize", "2025-11-25"), ("auto", "2026-07-28")] {
        for (front, at) in &fronts {
            let out = common::peers::rmcp_client(lifecycle, at, &calls).await;
            let complete = |t: &str| merged(text(t), json!({"resultType": "complete"}));
            assert_eq!(
                out,
                json!({"protocol": protocol, "tools": ["add", "book", "fail", "sign"],
                    "calls": [complete("signed by Ada"), complete("5")]}),
                "{front}, {lifecycle}"
            );
        }
    }
}
