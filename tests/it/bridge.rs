//! Eras bridged (docs/contract.md §5): a 2026-07-28 client in front of a server that speaks
//! only the 2025-11-25 handshake (server-everything), in all four modes: over stdio
//! (`serve -- CMD`, `stdio -- CMD`) and over HTTP (`serve --upstream`, `stdio --upstream`),
//! with the Python SDK 2.3 client pinned to 2026-07-28, negotiating (`auto`), and in legacy
//! mode.

use crate::common;
use common::Toolgate;
use common::modes::{Front, Mode};
use common::peers::{
    peers, python_client, python_client_answering, python_http, server_everything_http,
};
use common::scripted::{Script, Scripted, open_tool};
use common::stdio_gate::StdioGate;
use common::{next_frame, post_modern, post_modern_stream, post_modern_stream_as, sse_messages};
use serde_json::{Value, json};

async fn in_front_of_server_everything() -> Toolgate {
    let p = tokio::task::spawn_blocking(peers).await.unwrap();
    let command = [p.server_everything.display().to_string(), "stdio".into()];
    Toolgate::in_front_of(&command, None).await
}

/// The calls every mode makes: one that passes, one the guard answers.
fn calls() -> [(&'static str, Value); 2] {
    [
        ("echo", json!({"message": "across eras"})),
        ("get-sum", json!({"a": 1, "b": "two"})),
    ]
}

fn assert_served(out: &Value, protocol: &str) {
    assert_eq!(out["protocol"], protocol, "{out}");
    let tools: Vec<&str> = out["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(
        tools.contains(&"echo") && tools.contains(&"get-sum"),
        "{out}"
    );
    let echo = &out["calls"][0];
    assert_eq!(echo["content"][0]["text"], "Echo: across eras", "{out}");
    assert_eq!(echo["isError"], false);
    let refused = &out["calls"][1];
    assert_eq!(refused["isError"], true, "{out}");
    assert_eq!(
        refused["_meta"]["toolgate/validation"]["parameter_errors"]["/b"],
        "expected a number, got string \"two\"",
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2026_client_is_served_by_a_handshake_only_stdio_server() {
    let tg = in_front_of_server_everything().await;
    for mode in ["2026-07-28", "auto"] {
        let out = python_client(&tg.url(), mode, &calls()).await;
        assert_served(&out, "2026-07-28");
    }
    let out = python_client(&tg.url(), "legacy", &calls()).await;
    assert_served(&out, "2025-11-25");
    let logs = tg.logs_when(|l| l.contains("bridging its clients")).await;
    assert!(logs.contains("does not speak 2026-07-28"), "{logs}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bridge_answers_discover_from_the_handshake_and_refuses_a_listen_without_a_filter() {
    let tg = in_front_of_server_everything().await;
    let envelope = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
    });
    let ask = |id: i64, method: &str| json!({"jsonrpc": "2.0", "id": id, "method": method, "params": {"_meta": envelope}});
    let url = tg.url();
    let post = |method: &'static str, body: Value| {
        let url = url.clone();
        async move {
            common::request(
                http::Method::POST,
                &url,
                &[
                    ("content-type", "application/json"),
                    ("accept", common::ACCEPT),
                    ("mcp-protocol-version", "2026-07-28"),
                    ("mcp-method", method),
                ],
                body.to_string(),
            )
            .await
        }
    };
    let r = post("server/discover", ask(1, "server/discover")).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let d = r.answer();
    assert_eq!(d["id"], 1);
    assert_eq!(d["result"]["supportedVersions"], json!(["2026-07-28"]));
    // What the server announces reaches a 2026-07-28 client through subscriptions/listen.
    assert_eq!(
        d["result"]["capabilities"]["tools"]["listChanged"], true,
        "{d}"
    );
    assert_eq!(d["result"]["resultType"], "complete");
    assert_eq!(d["result"]["ttlMs"], 0);
    assert_eq!(
        d["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "mcp-servers/everything"
    );

    let r = post("tools/list", ask(2, "tools/list")).await;
    let l = r.answer();
    assert_eq!(l["id"], 2);
    assert_eq!(l["result"]["resultType"], "complete", "{l}");
    assert_eq!(l["result"]["cacheScope"], "private");
    assert!(l["result"]["tools"].as_array().unwrap().len() > 5);

    let r = post("subscriptions/listen", ask(3, "subscriptions/listen")).await;
    assert_eq!(r.status, 400, "{}", r.text());
    let e = r.answer();
    assert_eq!(e["id"], 3);
    assert_eq!(e["error"]["code"], -32602);
    let msg = e["error"]["message"].as_str().unwrap();
    assert!(
        msg.starts_with("Invalid params: subscriptions/listen takes params.notifications"),
        "{msg}"
    );
}

/// The same over `toolgate stdio -- CMD`, the front a desktop client launches: the pipe's
/// server is asked once, on the client's first 2026-07-28 request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2026_client_over_stdio_is_served_by_a_handshake_only_server() {
    let p = tokio::task::spawn_blocking(peers).await.unwrap();
    let command = json!([
        env!("CARGO_BIN_EXE_toolgate"),
        "stdio",
        "--",
        p.server_everything.display().to_string(),
        "stdio"
    ]);
    let server = format!("stdio:{command}");
    for mode in ["2026-07-28", "auto"] {
        let out = python_client(&server, mode, &calls()).await;
        assert_served(&out, "2026-07-28");
    }
    let out = python_client(&server, "legacy", &calls()).await;
    assert_served(&out, "2025-11-25");
}

/// In front of a handshake-only Streamable HTTP server: `serve --upstream` and
/// `stdio --upstream`, through the session toolgate opens for the client's credential.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2026_client_is_served_by_a_handshake_only_http_server() {
    let se = server_everything_http().await;
    let tg = Toolgate::serve(&se.url, None).await;
    let over_stdio = json!([
        env!("CARGO_BIN_EXE_toolgate"),
        "stdio",
        "--upstream",
        se.url
    ]);
    for server in [tg.url(), format!("stdio:{over_stdio}")] {
        for mode in ["2026-07-28", "auto"] {
            let out = python_client(&server, mode, &calls()).await;
            assert_served(&out, "2026-07-28");
        }
        let out = python_client(&server, "legacy", &calls()).await;
        assert_served(&out, "2025-11-25");
    }
    let logs = tg.logs_when(|l| l.contains("bridging its clients")).await;
    assert!(
        logs.contains("the upstream does not speak 2026-07-28"),
        "{logs}"
    );
}

/// A Streamable HTTP server of the handshake era only, in this process: it refuses what
/// comes outside a session (HTTP 400, as the SDKs do), mints a session per `initialize`
/// (remembering whose credential opened it), and can be told to forget one (then 404).
#[derive(Default)]
struct HandshakeOnly {
    /// Session id → the credential that opened it.
    opened: std::sync::Mutex<Vec<(String, String)>>,
    ended: std::sync::Mutex<Vec<String>>,
    /// (session, credential) of every DELETE.
    deleted: std::sync::Mutex<Vec<(String, String)>>,
    /// (session, credential) of every `tools/call`.
    calls: std::sync::Mutex<Vec<(String, String)>>,
}

async fn handshake_only(
    axum::extract::State(s): axum::extract::State<std::sync::Arc<HandshakeOnly>>,
    headers: http::HeaderMap,
    body: axum::body::Bytes,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let m: Value = serde_json::from_slice(&body).unwrap_or_default();
    // The client's credential, in whichever header it travels.
    let auth = ["authorization", "x-api-key", "cookie"]
        .iter()
        .find_map(|name| headers.get(*name))
        .map_or("", |v| v.to_str().unwrap())
        .to_string();
    let session = headers
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_string());
    let json = |status: u16, v: Value| {
        (
            http::StatusCode::from_u16(status).unwrap(),
            [("content-type", "application/json")],
            v.to_string(),
        )
            .into_response()
    };
    if m["method"] == "initialize" {
        let mut opened = s.opened.lock().unwrap();
        let id = format!("s{}", opened.len() + 1);
        opened.push((id.clone(), auth));
        let mut r = json(
            200,
            json!({"jsonrpc": "2.0", "id": m["id"], "result": {"protocolVersion": "2025-11-25",
                "capabilities": {"tools": {"listChanged": true}}, "serverInfo": {"name": "handshake-only", "version": "1"}}}),
        );
        r.headers_mut()
            .insert("mcp-session-id", id.parse().unwrap());
        return r;
    }
    let Some(session) = session else {
        return json(
            400,
            json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32000, "message": "Bad Request: No valid session ID provided"}}),
        );
    };
    if s.ended.lock().unwrap().contains(&session) {
        return json(
            404,
            json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32001, "message": "Session not found"}}),
        );
    }
    match m["method"].as_str() {
        None | Some("notifications/initialized") => {
            (http::StatusCode::ACCEPTED, "").into_response()
        }
        Some("tools/list") => json(
            200,
            json!({"jsonrpc": "2.0", "id": m["id"], "result": {"tools": [{"name": "add",
                "inputSchema": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}}]}}),
        ),
        Some("tools/call") => {
            s.calls.lock().unwrap().push((session, auth));
            let a = &m["params"]["arguments"];
            let sum = a["a"].as_i64().unwrap() + a["b"].as_i64().unwrap();
            json(
                200,
                json!({"jsonrpc": "2.0", "id": m["id"], "result": {"content": [{"type": "text", "text": sum.to_string()}]}}),
            )
        }
        _ => json(
            200,
            json!({"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32601, "message": "Method not found"}}),
        ),
    }
}

/// [`handshake_only`]'s DELETE: the session is ended.
async fn handshake_end(
    axum::extract::State(s): axum::extract::State<std::sync::Arc<HandshakeOnly>>,
    headers: http::HeaderMap,
) -> http::StatusCode {
    let text = |name| headers.get(name).map_or("", |v| v.to_str().unwrap());
    let session = text("mcp-session-id").to_string();
    s.deleted
        .lock()
        .unwrap()
        .push((session.clone(), text("authorization").into()));
    s.ended.lock().unwrap().push(session);
    http::StatusCode::OK
}

async fn modern_add(url: &str, id: i64, auth: &str, a: Value) -> Value {
    modern_add_as(url, id, ("authorization", auth), a).await
}

/// [`modern_add`] with the credential in `header`.
async fn modern_add_as(url: &str, id: i64, (header, auth): (&str, &str), a: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "add", "arguments": {"a": a, "b": 2},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}}}});
    common::request(
        http::Method::POST,
        url,
        &[
            ("content-type", "application/json"),
            ("accept", common::ACCEPT),
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "add"),
            (header, auth),
        ],
        body.to_string(),
    )
    .await
    .answer()
}

/// Over HTTP the bridge opens one session per credential, whatever header carries it (MCP's
/// `Authorization`, an API key, a cookie), replaces a session the server ended, and completes
/// what the server's results lack.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bridged_http_sessions_follow_credentials_and_come_back_after_a_404() {
    let cases = [
        ("authorization", "Bearer alice", "Bearer bob"),
        ("x-api-key", "alice-key", "bob-key"),
        ("cookie", "sid=alice", "sid=bob"),
    ];
    for (header, alice, bob) in cases {
        let state = std::sync::Arc::new(HandshakeOnly::default());
        let url =
            serve_in_process(axum::routing::post(handshake_only).with_state(state.clone())).await;
        let tg = Toolgate::serve(&url, None).await;
        let add = |id, auth, a| {
            let url = tg.url();
            async move { modern_add_as(&url, id, (header, auth), a).await }
        };

        let r = add(1, alice, json!(1)).await;
        assert_eq!(r["id"], 1);
        assert_eq!(r["result"]["content"][0]["text"], "3", "{header}: {r}");
        assert_eq!(r["result"]["resultType"], "complete");
        let r = add(2, bob, json!(40)).await;
        assert_eq!(r["result"]["content"][0]["text"], "42", "{header}: {r}");
        // Checked against the schema listed through the bridge, never sent.
        let r = add(3, bob, json!("forty")).await;
        assert_eq!(r["result"]["isError"], true, "{r}");
        assert_eq!(r["result"]["resultType"], "complete");
        let each = [
            ("s1".to_string(), alice.to_string()),
            ("s2".to_string(), bob.to_string()),
        ];
        assert_eq!(*state.opened.lock().unwrap(), each, "{header}");
        assert_eq!(
            *state.calls.lock().unwrap(),
            each,
            "{header}: each credential's calls go through its own session"
        );

        state.ended.lock().unwrap().push("s1".into());
        let r = add(4, alice, json!(1)).await;
        assert_eq!(r["id"], 4);
        let text = r["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default();
        assert!(text.contains("ended the session"), "{r}");
        let r = add(5, alice, json!(2)).await;
        assert_eq!(r["result"]["content"][0]["text"], "4", "{r}");
        assert_eq!(state.opened.lock().unwrap()[2], ("s3".into(), alice.into()));
    }
}

/// Requests that come at the same time for a credential without a session yet open one
/// session between them: the rest wait for it, rather than each open one that the server
/// keeps and no one uses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_first_requests_opens_one_session_per_credential() {
    let state = std::sync::Arc::new(HandshakeOnly::default());
    let url = serve_in_process(axum::routing::post(handshake_only).with_state(state.clone())).await;
    let tg = Toolgate::serve(&url, None).await;
    let calls = (0..40).map(|i| {
        let (url, who) = (tg.url(), ["Bearer alice", "Bearer bob"][i % 2]);
        async move { (i, modern_add(&url, i as i64, who, json!(i)).await) }
    });
    for (i, r) in futures_util::future::join_all(calls).await {
        assert_eq!(r["id"], i, "{r}");
        assert_eq!(
            r["result"]["content"][0]["text"],
            (i + 2).to_string(),
            "{r}"
        );
    }
    let mut opened: Vec<String> = (state.opened.lock().unwrap().iter())
        .map(|(_, who)| who.clone())
        .collect();
    opened.sort();
    assert_eq!(opened, ["Bearer alice", "Bearer bob"]);
}

/// toolgate ends the sessions it opened for its bridged clients when it stops, as a client
/// that needs a session no more should: on SIGTERM (`serve --upstream`), and when its stdio
/// client closes the pipe (`stdio --upstream`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn toolgate_ends_its_bridged_sessions_when_it_stops() {
    let server = || async {
        let state = std::sync::Arc::new(HandshakeOnly::default());
        let route = axum::routing::post(handshake_only).delete(handshake_end);
        (
            serve_in_process(route.with_state(state.clone())).await,
            state,
        )
    };
    let (url, state) = server().await;
    let mut tg = Toolgate::serve(&url, None).await;
    for (id, who) in [(1, "Bearer alice"), (2, "Bearer bob")] {
        let r = modern_add(&tg.url(), id, who, json!(1)).await;
        assert_eq!(r["result"]["content"][0]["text"], "3", "{r}");
    }
    let pid = nix::unistd::Pid::from_raw(tg.pid() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    assert!(tg.wait().await.success());
    let mut ended = state.deleted.lock().unwrap().clone();
    ended.sort();
    let each = [("s1", "Bearer alice"), ("s2", "Bearer bob")];
    assert_eq!(ended, each.map(|(s, who)| (s.to_string(), who.to_string())));

    // Past 1,024 credentials, the session pushed out to make room is ended too.
    let (url, state) = server().await;
    let tg = Toolgate::serve(&url, None).await;
    for i in 0..=1024 {
        let r = modern_add(&tg.url(), i, &format!("Bearer {i}"), json!(1)).await;
        assert_eq!(r["result"]["content"][0]["text"], "3", "{r}");
    }
    assert!(common::processes::wait_for(|| !state.deleted.lock().unwrap().is_empty()).await);
    assert_eq!(state.deleted.lock().unwrap().len(), 1);

    let (url, state) = server().await;
    let mut gate = StdioGate::start_args(vec!["stdio".into(), "--upstream".into(), url]);
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "add", "arguments": {"a": 1, "b": 2},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}}}});
    let r = gate.ask(call).await;
    assert_eq!(r["result"]["content"][0]["text"], "3", "{r}");
    gate.stdin = None;
    let deleted = || state.deleted.lock().unwrap().len() == 1;
    assert!(
        common::processes::wait_for(deleted).await,
        "{}",
        gate.logs()
    );
}

/// The other way: a handshake-era client in front of a stdio server that speaks only
/// 2026-07-28 (the Python SDK server behind `fixtures/modern_only.py`, which refuses
/// `initialize` as such a server does), through `serve -- CMD` and `stdio -- CMD`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handshake_client_is_served_by_a_2026_only_stdio_server() {
    let p = tokio::task::spawn_blocking(peers).await.unwrap();
    let python = p.python.display().to_string();
    let server = [
        python.clone(),
        p.fixtures.join("modern_only.py").display().to_string(),
        python,
        p.fixtures
            .join("conformance_server.py")
            .display()
            .to_string(),
        "stdio".into(),
    ];
    let tg = Toolgate::in_front_of(&server, None).await;
    let mut over_stdio = vec![
        env!("CARGO_BIN_EXE_toolgate").to_string(),
        "stdio".into(),
        "--".into(),
    ];
    over_stdio.extend(server.iter().cloned());
    let calls = [
        ("greet", json!({"name": "across eras"})),
        ("slow_compute", json!({"seconds": "soon"})),
    ];
    for url in [tg.url(), format!("stdio:{}", json!(over_stdio))] {
        for (mode, protocol) in [("legacy", "2025-11-25"), ("auto", "2026-07-28")] {
            let out = python_client(&url, mode, &calls).await;
            assert_eq!(out["protocol"], protocol, "{url} {mode}: {out}");
            assert!(
                out["tools"].as_array().unwrap().contains(&json!("greet")),
                "{out}"
            );
            assert_eq!(
                out["calls"][0]["content"][0]["text"], "Hello, across eras!",
                "{out}"
            );
            let refused = &out["calls"][1];
            assert_eq!(refused["isError"], true, "{out}");
            assert!(
                refused["_meta"]["toolgate/validation"]["parameter_errors"]["/seconds"]
                    .as_str()
                    .is_some_and(|e| e.contains("expected a number")),
                "{out}"
            );
        }
    }
    let logs = tg
        .logs_when(|l| l.contains("bridging its handshake-era"))
        .await;
    assert!(logs.contains("speaks only 2026-07-28"), "{logs}");
}

/// A Streamable HTTP server of 2026-07-28 only, in this process: `initialize` is a removed
/// method (404, -32601), every request must carry the `_meta` envelope (else 400, -32602)
/// and, for `tools/call`, an `Mcp-Name` that matches.
pub(crate) async fn modern_only(
    axum::extract::State(seen): axum::extract::State<std::sync::Arc<std::sync::Mutex<Vec<Value>>>>,
    headers: http::HeaderMap,
    body: axum::body::Bytes,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let m: Value = serde_json::from_slice(&body).unwrap_or_default();
    seen.lock().unwrap().push(m.clone());
    let json = |status: u16, v: Value| {
        (
            http::StatusCode::from_u16(status).unwrap(),
            [("content-type", "application/json")],
            v.to_string(),
        )
            .into_response()
    };
    let error = |status: u16, code: i64, message: &str| {
        json(
            status,
            json!({"jsonrpc": "2.0", "id": m["id"], "error": {"code": code, "message": message}}),
        )
    };
    if m.get("id").is_none() {
        return (http::StatusCode::ACCEPTED, "").into_response();
    }
    let method = m["method"].as_str().unwrap_or_default();
    if method == "initialize" {
        return error(404, -32601, "Method not found");
    }
    let meta = &m["params"]["_meta"];
    if meta["io.modelcontextprotocol/protocolVersion"] != "2026-07-28"
        || !meta["io.modelcontextprotocol/clientCapabilities"].is_object()
        || headers.get("mcp-session-id").is_some()
    {
        return error(
            400,
            -32602,
            "Invalid params: the 2026-07-28 envelope is missing",
        );
    }
    let result = match method {
        "server/discover" => {
            json!({"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
            "resultType": "complete", "ttlMs": 0, "cacheScope": "private",
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "modern-only", "version": "1"}}})
        }
        "tools/list" => json!({"tools": [{"name": "add", "inputSchema": {"type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}}],
            "resultType": "complete", "ttlMs": 0, "cacheScope": "private"}),
        "tools/call" => {
            if headers.get("mcp-name").is_none_or(|n| n != "add") {
                return error(400, -32020, "Header mismatch: Mcp-Name");
            }
            let a = &m["params"]["arguments"];
            let sum = a["a"].as_i64().unwrap() + a["b"].as_i64().unwrap();
            let mut r = json!({"content": [{"type": "text", "text": sum.to_string()}], "resultType": "complete"});
            // As a careless 2026-07-28 server might, for `a = 0`.
            if a["a"] == 0 {
                r.as_object_mut().unwrap().remove("resultType");
            }
            r
        }
        _ => return error(404, -32601, "Method not found"),
    };
    json(
        200,
        json!({"jsonrpc": "2.0", "id": m["id"], "result": result}),
    )
}

/// The other way over HTTP: a handshake-era client through `serve --upstream` and
/// `stdio --upstream` in front of a server that speaks only 2026-07-28.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handshake_client_is_served_by_a_2026_only_http_server() {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let url = serve_in_process(axum::routing::post(modern_only).with_state(seen.clone())).await;
    let tg = Toolgate::serve(&url, None).await;
    let calls = [
        ("add", json!({"a": 1, "b": 2})),
        ("add", json!({"a": 1, "b": "two"})),
    ];
    let over_stdio = json!([env!("CARGO_BIN_EXE_toolgate"), "stdio", "--upstream", url]);
    for server in [tg.url(), format!("stdio:{over_stdio}")] {
        let out = python_client(&server, "legacy", &calls).await;
        assert_eq!(out["protocol"], "2025-11-25", "{out}");
        assert_eq!(out["tools"], json!(["add"]));
        assert_eq!(out["calls"][0]["content"][0]["text"], "3", "{out}");
        assert_eq!(out["calls"][1]["isError"], true, "{out}");
        assert_eq!(
            out["calls"][1]["_meta"]["toolgate/validation"]["parameter_errors"]["/b"],
            "expected an integer, got string \"two\"",
            "{out}"
        );
    }
    // Every request that reached the server carried the envelope the client's
    // `initialize` stood for (the server refused any other with 400).
    let seen = seen.lock().unwrap().clone();
    let call = seen.iter().find(|m| m["method"] == "tools/call").unwrap();
    let meta = &call["params"]["_meta"];
    assert_eq!(
        meta["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
    assert!(
        meta["io.modelcontextprotocol/clientInfo"]["name"].is_string(),
        "the client's own clientInfo: {call}"
    );
    assert_eq!(
        seen.iter().filter(|m| m["method"] == "tools/call").count(),
        2,
        "one valid call per front; the invalid ones never reached the server"
    );
    let logs = tg
        .logs_when(|l| l.contains("bridging its handshake-era"))
        .await;
    assert!(
        logs.contains("the upstream speaks only 2026-07-28"),
        "{logs}"
    );
}

/// A server that drops requests it does not know (no answer at all) is asked its era once,
/// for a bounded time, and then served as it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_answers_discover_is_asked_once() {
    let server = crate::common::peers::stdio_fixture(&["--silent-on-unknown"]).await;
    let (mut g, _config) = common::stdio_gate::StdioGate::start(
        &server,
        Some("[limits]\nupstream_timeout = \"1s\"\n"),
    );
    let envelope = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}});
    let call = |id: i64, tool: &str| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": {"a": 1, "b": 2}, "_meta": envelope}})
    };
    let a = g.ask_past_notifications(call(1, "add")).await;
    assert_eq!(a["result"]["content"][0]["text"], "3", "{a}");
    let a = g.ask_past_notifications(call(2, "seen")).await;
    let seen: Vec<String> =
        serde_json::from_str(a["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(
        seen.iter().filter(|m| *m == "server/discover").count(),
        1,
        "asked once: {seen:?}"
    );
    let logs = g
        .logs_when(|l| l.contains("did not answer server/discover"))
        .await;
    assert!(logs.contains("requests go to it as they are"), "{logs}");
}

/// A `tools/call` to the 2026-07-28 Python server in `modern_only.py`, with the envelope.
fn modern_greet(id: i64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "greet", "arguments": {"name": "careless"},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {},
                  "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}}}})
}

/// A 2026-07-28 server that leaves `resultType` out of a `tools/call` result: a 2026-07-28
/// client gets it completed (`"complete"`: the result asks for no input), in all four modes.
/// A result that carries it passes as it came.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2026_servers_call_result_gains_the_result_type_it_left_out() {
    // Over HTTP: the in-process server answers `a = 0` without `resultType`.
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let url = serve_in_process(axum::routing::post(modern_only).with_state(seen)).await;
    let direct = modern_add(&url, 1, "Bearer t", json!(0)).await;
    assert!(direct["result"].get("resultType").is_none(), "{direct}");
    let tg = Toolgate::serve(&url, None).await;
    // What the client must get: the server's own answer, with `resultType` added.
    let completed = |mut answer: Value| {
        answer["result"]["resultType"] = json!("complete");
        answer
    };
    let expected = completed(direct.clone());
    let r = modern_add(&tg.url(), 1, "Bearer t", json!(0)).await;
    assert_eq!(r, expected);
    assert_eq!(
        expected,
        json!({"jsonrpc": "2.0", "id": 1, "result": {
            "content": [{"type": "text", "text": "2"}], "resultType": "complete"}})
    );
    // One the server completed itself passes as it came.
    let r = modern_add(&tg.url(), 2, "Bearer t", json!(1)).await;
    assert_eq!(r, modern_add(&url, 2, "Bearer t", json!(1)).await);
    let mut g = StdioGate::start_args(vec!["stdio".into(), "--upstream".into(), url]);
    let call = |id: i64, a: i64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "add", "arguments": {"a": a, "b": 2},
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": {}}}})
    };
    assert_eq!(g.ask_past_notifications(call(1, 0)).await, expected);

    // Over stdio: the Python server behind `modern_only.py --without-result-type`.
    let p = tokio::task::spawn_blocking(peers).await.unwrap();
    let python = p.python.display().to_string();
    let server = vec![
        python.clone(),
        p.fixtures.join("modern_only.py").display().to_string(),
        "--without-result-type".into(),
        python,
        p.fixtures
            .join("conformance_server.py")
            .display()
            .to_string(),
        "stdio".into(),
    ];
    let direct = ask_directly(&server, modern_greet(1)).await;
    assert_eq!(
        direct["result"]["content"][0]["text"], "Hello, careless!",
        "{direct}"
    );
    assert!(direct["result"].get("resultType").is_none(), "{direct}");
    let tg = Toolgate::in_front_of(&server, None).await;
    let r = common::request(
        http::Method::POST,
        &tg.url(),
        &[
            ("content-type", "application/json"),
            ("accept", common::ACCEPT),
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "greet"),
        ],
        modern_greet(1).to_string(),
    )
    .await
    .answer();
    let expected = completed(direct);
    assert_eq!(r, expected);
    let mut args = vec!["stdio".to_string(), "--".into()];
    args.extend(server);
    let mut g = StdioGate::start_args(args);
    assert_eq!(g.ask_past_notifications(modern_greet(1)).await, expected);
}

/// The answer a stdio server gives `msg` with no toolgate in between.
async fn ask_directly(server: &[String], msg: Value) -> Value {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let mut child = tokio::process::Command::new(&server[0])
        .args(&server[1..])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(format!("{msg}\n").as_bytes())
        .await
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let answer = tokio::time::timeout(std::time::Duration::from_secs(30), async {
        loop {
            let line = lines.next_line().await.unwrap().expect("an answer");
            let m: Value = serde_json::from_str(&line).unwrap();
            if m["id"] == msg["id"] && m.get("method").is_none() {
                return m;
            }
        }
    })
    .await
    .expect("an answer in time");
    drop(stdin);
    let _ = child.kill().await;
    answer
}

/// Serves `route` at `/mcp` on a loopback port of its own, in this process; its URL.
pub(crate) async fn serve_in_process(route: axum::routing::MethodRouter) -> String {
    let app = axum::Router::new().route("/mcp", route);
    format!("http://{}/mcp", common::serve_on_loopback(app).await)
}

/// A 2026-07-28 client's cancellation reaches a handshake-only HTTP server inside the session
/// toolgate bridges its requests through, with or without the envelope on it.
#[tokio::test]
async fn a_bridged_cancellation_goes_inside_the_session() {
    use common::scripted::{Script, Scripted, open_tool};
    let slow = json!({"content": [{"type": "text", "text": "slow done"}]});
    let (url, scripted) = Scripted::new(vec![open_tool("slow")])
        .handshake_only()
        .script(
            "slow",
            Script::Slow(std::time::Duration::from_secs(2), slow),
        )
        .spawn()
        .await;
    let mut g = StdioGate::start_args(vec!["stdio".into(), "--upstream".into(), url]);
    let meta = common::modes::modern_meta();
    for (id, envelope) in [(1, true), (2, false)] {
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                          "params": {"name": "slow", "arguments": {}, "_meta": meta}});
        g.send(&call.to_string()).await;
        let mut params = json!({"requestId": id, "reason": "the user stopped it"});
        if envelope {
            params["_meta"] = meta.clone();
        }
        let cancel =
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params});
        // After the call reached the server: a cancellation must name a request it has.
        for _ in 0..100 {
            if scripted.tool_calls().len() == id as usize {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        g.send(&cancel.to_string()).await;
    }
    let found = cancellations(&scripted, 2).await;
    let session = Some(http::HeaderValue::from_static("scripted-session"));
    let calls = call_ids(&scripted, "slow");
    assert_eq!(
        found,
        [
            (calls[0].clone(), session.clone()),
            (calls[1].clone(), session)
        ],
        "each cancellation went inside the bridged session, naming the call as the server knows it"
    );
}

/// A 2026-07-28 client over HTTP cancels by closing its response (here an HTTP/2 stream it
/// resets); the handshake-only server behind toolgate's session is then told inside that
/// session.
#[tokio::test]
async fn a_2026_client_closing_its_response_cancels_inside_the_bridged_session() {
    use common::scripted::{Script, Scripted, open_tool};
    use std::time::Duration;
    let slow = json!({"content": [{"type": "text", "text": "slow done"}]});
    let (url, scripted) = Scripted::new(vec![open_tool("slow")])
        .handshake_only()
        .script("slow", Script::Slow(Duration::from_secs(3), slow))
        .spawn()
        .await;
    let tg = Toolgate::serve(&url, None).await;
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "slow", "arguments": {}, "_meta": common::modes::modern_meta()}});
    let h2 = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .http2_only(true)
        .build_http::<http_body_util::Full<bytes::Bytes>>();
    let req = http::Request::post(tg.url())
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "slow")
        .body(http_body_util::Full::new(bytes::Bytes::from(
            call.to_string(),
        )))
        .unwrap();
    let gave_up = tokio::time::timeout(Duration::from_millis(700), h2.request(req)).await;
    assert!(gave_up.is_err(), "the slow call is still running");
    drop(h2);
    let found = cancellations(&scripted, 1).await.into_iter().next();
    let calls = call_ids(&scripted, "slow");
    assert_eq!(
        found,
        Some((
            calls[0].clone(),
            Some(http::HeaderValue::from_static("scripted-session"))
        )),
        "the server was told, inside toolgate's session, of the call as it knows it"
    );
}

/// The ids of the calls of `tool` a scripted server was sent, in order: in a session toolgate
/// shares between clients, ids of toolgate's, never the client's.
fn call_ids(scripted: &common::scripted::Scripted, tool: &str) -> Vec<Value> {
    let seen = scripted.seen.lock().unwrap();
    let ids: Vec<Value> = (seen.iter())
        .filter(|m| m["method"] == "tools/call" && m["params"]["name"] == tool)
        .map(|m| m["id"].clone())
        .collect();
    assert!(ids.iter().all(Value::is_string), "toolgate's ids: {ids:?}");
    ids
}

/// The cancellations a scripted server was sent, each with the session it came in, once `n`
/// have come (or what came within five seconds).
async fn cancellations(
    scripted: &common::scripted::Scripted,
    n: usize,
) -> Vec<(Value, Option<http::HeaderValue>)> {
    let mut found = Vec::new();
    for _ in 0..100 {
        let seen = scripted.seen.lock().unwrap().clone();
        let headers = scripted.seen_headers.lock().unwrap().clone();
        found = seen
            .iter()
            .zip(&headers)
            .filter(|(m, _)| m["method"] == "notifications/cancelled")
            .map(|(m, h)| {
                (
                    m["params"]["requestId"].clone(),
                    h.get("mcp-session-id").cloned(),
                )
            })
            .collect();
        if found.len() >= n {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    found
}

/// Two 2026-07-28 clients of one scope share the session toolgate keeps with a server of the
/// handshake era, and may send their requests under the same id at once: each gets its own
/// answer, under its own id. Behind every front that serves many clients, in front of
/// server-everything (a TypeScript SDK server, which routes answers by id).
#[tokio::test]
async fn two_clients_sending_one_id_at_once_each_get_their_own_answer() {
    let server = server_everything_http().await;
    let p = tokio::task::spawn_blocking(peers).await.unwrap();
    let command = [p.server_everything.display().to_string(), "stdio".into()];
    let long = json!({"name": "trigger-long-running-operation",
                      "arguments": {"duration": 2, "steps": 2}});
    let read = json!({"uri": "test://nonexistent-resource-for-conformance-testing"});
    for mode in [Mode::ServeUpstream, Mode::ServeCommand, Mode::Layer] {
        let front = Front::start(mode, &server.url, &command).await;
        let url = url_of(&front);
        let call = modern(7, "tools/call", long.clone());
        let to = url.clone();
        let long = tokio::spawn(async move { post_modern(&to, "tools/call", call).await });
        // The read goes while the long call runs.
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let read = post_modern(
            &url,
            "resources/read",
            modern(7, "resources/read", read.clone()),
        );
        let (long, read) = tokio::time::timeout(
            std::time::Duration::from_secs(20),
            futures_util::future::join(long, read),
        )
        .await
        .unwrap_or_else(|_| panic!("{mode}: both requests are answered"));
        let (long, read) = (long.unwrap().answer(), read.answer());
        let done = "Long running operation completed. Duration: 2 seconds, Steps: 2.";
        assert_eq!(
            long,
            json!({"jsonrpc": "2.0", "id": 7, "result": {
                "content": [{"type": "text", "text": done}], "resultType": "complete"}}),
            "{mode}"
        );
        let uri = "test://nonexistent-resource-for-conformance-testing";
        let not_found = json!({"jsonrpc": "2.0", "id": 7, "error": {"code": -32602,
            "message": format!("Resource not found: {uri}"), "data": {"uri": uri}}});
        assert_eq!(read, not_found, "{mode}");
    }
}

/// A 2026-07-28 request of id `id`, in the envelope of a client that declares nothing.
fn modern(id: i64, method: &str, params: Value) -> Value {
    let mut params = params;
    params["_meta"] = common::modes::modern_meta();
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// With authentication, a session toolgate keeps for a handshake-era client of a server that
/// speaks only 2026-07-28 serves only the identity that opened it: another client holding its
/// id is told it is not found, and nothing goes to the server with the first client's
/// `clientInfo`.
#[tokio::test]
async fn a_reverse_bridged_session_serves_only_its_own_client() {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let url = serve_in_process(axum::routing::post(modern_only).with_state(seen.clone())).await;
    let alice = common::tempfile_lite::TempFile::new("alice-token-0123456789");
    let bob = common::tempfile_lite::TempFile::new("bob-token-0123456789");
    let config = format!(
        "[[auth.tokens]]\nname = \"alice\"\nfile = \"{}\"\n[[auth.tokens]]\nname = \"bob\"\nfile = \"{}\"\n",
        alice.path.display(),
        bob.path.display()
    );
    let tg = Toolgate::serve(&url, Some(&config)).await;
    let send = |token: &str, session: Option<&str>, body: Value| {
        let mut h = vec![
            ("authorization".to_string(), format!("Bearer {token}")),
            ("content-type".to_string(), "application/json".to_string()),
            ("accept".to_string(), common::ACCEPT.to_string()),
        ];
        if let Some(s) = session {
            h.push(("mcp-session-id".to_string(), s.to_string()));
        }
        let url = tg.url();
        async move {
            let h: Vec<(&str, &str)> = h.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            common::request(http::Method::POST, &url, &h, body.to_string()).await
        }
    };
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "alice-client", "version": "1"}}});
    let r = send("alice-token-0123456789", None, init).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let session = r.headers["mcp-session-id"].to_str().unwrap().to_owned();
    let add = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                     "params": {"name": "add", "arguments": {"a": 1, "b": 2}}});
    let r = send("bob-token-0123456789", Some(&session), add.clone()).await;
    assert_eq!(r.status, 404, "{}", r.text());
    let r = send("alice-token-0123456789", Some(&session), add).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let calls: Vec<Value> = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|m| m["method"] == "tools/call")
        .cloned()
        .collect();
    assert_eq!(
        calls.len(),
        1,
        "only alice's call reached the server: {calls:?}"
    );
}

/// A 2026-07-28 request in the envelope of a client that can answer elicitation, sampling
/// and roots, named `capable-client`.
fn capable(id: i64, method: &str, params: Value) -> Value {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}, "sampling": {}, "roots": {}},
        "io.modelcontextprotocol/clientInfo": {"name": "capable-client", "version": "7"},
    });
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// The URL a 2026-07-28 client posts to.
fn url_of(front: &Front) -> String {
    match front {
        Front::Http { tg, .. } => tg.url(),
        Front::Stdio { .. } => unreachable!("an HTTP front"),
    }
}

/// A server of the handshake era that asks its client something in the middle of a call
/// (server-everything's elicitation and sampling tools) serves a 2026-07-28 client through
/// toolgate: the bridged session carries the client's capabilities (so the server lists
/// those tools), the question comes back as an input-required round, and the client's retry
/// with its answer gets the server's result. A round is its client's: a retry from another
/// scope, or naming no round, is refused. Through `serve --upstream` and `ValidateLayer`.
#[tokio::test]
async fn a_servers_questions_become_input_required_rounds_for_a_2026_client() {
    let server = server_everything_http().await;
    for mode in [Mode::ServeUpstream, Mode::Layer] {
        let front = Front::start(mode, &server.url, &[]).await;
        let url = url_of(&front);
        let list = post_modern(&url, "tools/list", capable(1, "tools/list", json!({})))
            .await
            .answer();
        let names: Vec<&str> = list["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["name"].as_str())
            .collect();
        for tool in [
            "trigger-elicitation-request",
            "trigger-sampling-request",
            "get-roots-list",
        ] {
            assert!(names.contains(&tool), "{mode}: {names:?}");
        }

        let rounds = [
            (
                "trigger-elicitation-request",
                json!({}),
                "elicitation/create",
                json!({"action": "accept", "content": {"name": "Ada", "check": true, "email": "ada@example.com"}}),
                "- Name: Ada",
            ),
            (
                "trigger-sampling-request",
                json!({"prompt": "Say hi"}),
                "sampling/createMessage",
                json!({"role": "assistant", "content": {"type": "text", "text": "hi from the model"}, "model": "test-model"}),
                "hi from the model",
            ),
            // Asked on the session's own stream, which names no request: the call waiting
            // carries it.
            (
                "get-roots-list",
                json!({}),
                "roots/list",
                json!({"roots": [{"uri": "file:///work/ada", "name": "ada"}]}),
                "URI: file:///work/ada",
            ),
        ];
        for (i, (tool, args, method, answer, said)) in rounds.into_iter().enumerate() {
            let id = 10 * (i as i64 + 1);
            let call = capable(id, "tools/call", json!({"name": tool, "arguments": args}));
            let asked = post_modern(&url, "tools/call", call).await.answer();
            let result = &asked["result"];
            assert_eq!(
                (asked["id"].clone(), result["resultType"].clone()),
                (json!(id), json!("input_required")),
                "{mode}: {asked}"
            );
            let requests = result["inputRequests"].as_object().unwrap();
            assert_eq!(requests.len(), 1, "{mode}: {asked}");
            let (key, request) = requests.iter().next().unwrap();
            assert_eq!(request["method"], method, "{mode}: {asked}");
            let state = result["requestState"].as_str().unwrap().to_owned();

            // Another client (another capability set, listing the same tools) cannot take the
            // round, nor a made-up one.
            let mut other = capable(
                id + 1,
                "tools/call",
                json!({"name": tool, "arguments": args, "requestState": state, "inputResponses": {key: answer}}),
            );
            other["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] =
                json!({"elicitation": {}, "sampling": {}, "roots": {}, "experimental": {}});
            let no_round = |id: i64| {
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32602,
                "message": "Invalid params: requestState names no round waiting here (unknown, expired, or another client's); call the tool again without it"}})
            };
            let refused = post_modern(&url, "tools/call", other).await.answer();
            assert_eq!(refused, no_round(id + 1), "{mode}");
            let made_up = capable(
                id + 2,
                "tools/call",
                json!({"name": tool, "arguments": args, "requestState": "toolgate-round-0", "inputResponses": {key: answer}}),
            );
            let refused = post_modern(&url, "tools/call", made_up).await.answer();
            assert_eq!(refused, no_round(id + 2), "{mode}");

            let retry = capable(
                id + 3,
                "tools/call",
                json!({"name": tool, "arguments": args, "requestState": state, "inputResponses": {key: answer}}),
            );
            let done = post_modern(&url, "tools/call", retry).await.answer();
            assert_eq!(done["id"], id + 3, "{mode}: {done}");
            assert_eq!(done["result"]["resultType"], "complete", "{mode}: {done}");
            let text = done["result"]["content"].to_string();
            assert!(text.contains(said), "{mode}: {done}");
        }
    }
}

/// The Python and Rust SDKs' clients, negotiating (`auto`, which directly falls back to the
/// handshake, where they have no `subscriptions/listen`), listen through toolgate for every
/// list change and two resources' updates of server-everything, which speaks only the
/// handshake: the stream
/// is acknowledged with what the server's capabilities say it announces (here, all of it), and
/// once a tool makes the server announce, each resource's update comes on it. In all four
/// modes and the layer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2026_client_listens_to_a_handshake_server_through_every_mode() {
    let p = tokio::task::spawn_blocking(peers).await.unwrap();
    let http = server_everything_http().await;
    let command = [p.server_everything.display().to_string(), "stdio".into()];
    let uris = common::peers::ANNOUNCED;
    let reached = common::modes::Reached::start(&http.url, &command).await;
    let tool = "toggle-subscriber-updates";
    let runs = (reached.fronts.iter())
        .map(|(_, front)| common::peers::python_listener(front, "auto", tool, &uris));
    let outs = futures_util::future::join_all(runs).await;
    let acknowledged = json!({"toolsListChanged": true, "promptsListChanged": true,
        "resourcesListChanged": true, "resourceSubscriptions": uris});
    let updated: Vec<String> = uris.iter().map(|u| format!("ResourceUpdated{u}")).collect();
    for ((mode, _), out) in reached.fronts.iter().zip(outs) {
        assert_eq!(out["protocol"], "2026-07-28", "{mode}: {out}");
        assert_eq!(out["honored"], acknowledged, "{mode}");
        let events: Vec<&str> = (out["events"].as_array().unwrap().iter())
            .map(|e| e.as_str().unwrap())
            .collect();
        for u in &updated {
            assert!(events.contains(&u.as_str()), "{mode}: {events:?}");
        }
        let announced = |e: &&str| updated.iter().any(|u| u == e) || *e == "ToolsListChanged";
        assert!(events.iter().all(announced), "{mode}: {events:?}");
    }

    // The Rust SDK's client, which checks that what is acknowledged was asked for and that
    // each message carries its stream's id. One front at a time: the client gives
    // `server/discover` ten seconds before it falls back to the handshake, and a front that
    // starts its server for the client (`stdio -- CMD`) may take longer on a loaded machine
    // while four others start theirs.
    let calls = [("listen", acknowledged.clone()), (tool, json!({}))];
    let mut outs = Vec::new();
    for (_, front) in &reached.fronts {
        outs.push(common::peers::rmcp_client("auto", front, &calls).await);
    }
    for ((mode, _), out) in reached.fronts.iter().zip(outs) {
        let listened = &out["listened"];
        assert_eq!(listened["acknowledged"], acknowledged, "{mode}: {out}");
        let events = listened["events"].as_array().unwrap();
        for u in uris {
            let update = json!(["notifications/resources/updated", u]);
            assert!(events.contains(&update), "{mode}: {events:?}");
        }
        let tools = json!(["notifications/tools/list_changed", null]);
        let announced = |e: &&Value| e[0] == "notifications/resources/updated" || **e == tools;
        assert!(events.iter().all(|e| announced(&e)), "{mode}: {events:?}");
    }
    reached.stop().await;
}

/// What the server is asked for the streams of a bridged session, as it sees it: each stream's
/// resources subscribed to before it is acknowledged (one the server refuses left out of the
/// acknowledgment, as is a list change it does not announce, and those it does not answer
/// within `limits.upstream_timeout`, one timeout for them all, the rest asked meanwhile), and a
/// resource unsubscribed from once no stream holds it, as each client leaves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bridged_sessions_resources_are_subscribed_while_a_stream_holds_them() {
    let refused = Script::Error(json!({"code": -32602, "message": "no such resource"}));
    let server = Scripted::new(vec![open_tool("t")])
        .handshake_only()
        .capabilities(json!({"tools": {}, "resources": {"subscribe": true}}))
        .script("resources/subscribe a://refused", refused)
        .script("resources/subscribe a://hang", Script::Hang)
        .script("resources/subscribe a://hang2", Script::Hang)
        // The session's own stream, open and quiet: what the server announces would come
        // there.
        .own_stream(json!({}), 0);
    let (url, server) = server.spawn().await;
    let tg = Toolgate::serve(&url, Some("[limits]\nupstream_timeout = \"1s\"\n")).await;
    let subscribing = |seen: &[Value]| -> Vec<String> {
        (seen.iter())
            .filter(|m| {
                m["method"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("resources/"))
            })
            .map(|m| format!("{} {}", m["method"].as_str().unwrap(), m["params"]["uri"]))
            .collect()
    };
    let listen = |id: i64, uris: &[&str]| {
        let filter = json!({"toolsListChanged": true, "resourceSubscriptions": uris});
        modern(
            id,
            "subscriptions/listen",
            json!({ "notifications": filter }),
        )
    };
    let acknowledged = |frame: &str| sse_messages(frame)[0]["params"]["notifications"].clone();
    let wait = std::time::Duration::from_secs(10);

    let asked_at = std::time::Instant::now();
    let mut first = post_modern_stream(
        &tg.url(),
        "subscriptions/listen",
        listen(
            1,
            &["a://hang", "a://1", "a://hang2", "a://2", "a://refused"],
        ),
    )
    .await;
    let ack = acknowledged(&next_frame(&mut first, wait).await);
    assert_eq!(ack, json!({"resourceSubscriptions": ["a://1", "a://2"]}));
    let waited = asked_at.elapsed();
    assert!(waited < std::time::Duration::from_secs(2), "{waited:?}");
    let mut second =
        post_modern_stream(&tg.url(), "subscriptions/listen", listen(2, &["a://1"])).await;
    let ack = acknowledged(&next_frame(&mut second, wait).await);
    assert_eq!(ack, json!({"resourceSubscriptions": ["a://1"]}));
    // A stream's resources are asked about together, in any order.
    let mut subscribed = subscribing(&server.seen.lock().unwrap());
    subscribed[..5].sort();
    let asked = [
        r#"resources/subscribe "a://1""#,
        r#"resources/subscribe "a://2""#,
        r#"resources/subscribe "a://hang""#,
        r#"resources/subscribe "a://hang2""#,
        r#"resources/subscribe "a://refused""#,
        r#"resources/subscribe "a://1""#,
    ];
    assert_eq!(subscribed, asked);

    let before = subscribed.len();
    let until = |n: usize| {
        let server = server.clone();
        async move {
            for _ in 0..500 {
                let seen = subscribing(&server.seen.lock().unwrap());
                if seen.len() >= n {
                    return seen[before..].to_vec();
                }
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            panic!("the server was not asked in time")
        }
    };
    drop(first);
    assert_eq!(until(7).await, [r#"resources/unsubscribe "a://2""#]);
    drop(second);
    let released = [
        r#"resources/unsubscribe "a://2""#,
        r#"resources/unsubscribe "a://1""#,
    ];
    assert_eq!(until(8).await, released);
}

/// Clients of two credentials listen for the same resource: each is served from its own
/// bridged session, so what the server announces in one client's session (server-everything
/// updates a resource for the session that asked it to) reaches that client's stream only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listen_stream_hears_only_its_own_credentials_session() {
    let http = server_everything_http().await;
    let tg = Toolgate::serve(&http.url, None).await;
    let uri = common::peers::ANNOUNCED[0];
    let filter = json!({"notifications": {"resourceSubscriptions": [uri]}});
    let wait = std::time::Duration::from_secs(10);
    let mut streams = Vec::new();
    for (id, auth) in [(1, "Bearer ada"), (2, "Bearer bob")] {
        let listen = modern(id, "subscriptions/listen", filter.clone());
        let headers = [("authorization", auth)];
        let mut s =
            post_modern_stream_as(&tg.url(), "subscriptions/listen", listen, &headers).await;
        let ack = sse_messages(&next_frame(&mut s, wait).await);
        assert_eq!(
            ack[0]["params"]["notifications"]["resourceSubscriptions"],
            json!([uri])
        );
        streams.push(s);
    }
    let toggle = modern(
        3,
        "tools/call",
        json!({"name": "toggle-subscriber-updates", "arguments": {}}),
    );
    let ada = [("authorization", "Bearer ada")];
    let r = common::post_modern_as(&tg.url(), "tools/call", toggle, &ada).await;
    assert_eq!(
        r.answer()["result"]["resultType"],
        "complete",
        "{}",
        r.text()
    );
    let updated = sse_messages(&next_frame(&mut streams[0], wait).await);
    assert_eq!(
        updated,
        [
            json!({"jsonrpc": "2.0", "method": "notifications/resources/updated",
            "params": {"uri": uri, "_meta": {"io.modelcontextprotocol/subscriptionId": 1}}})
        ]
    );
    use http_body_util::BodyExt;
    let other = tokio::time::timeout(std::time::Duration::from_secs(2), streams[1].frame()).await;
    assert!(
        other.is_err(),
        "the other client's stream heard something: {other:?}"
    );
}

/// On SIGTERM the `subscriptions/listen` streams toolgate serves end at once, each with its
/// result (closed, not lost), rather than hold their connections open for the whole grace
/// period: `serve --upstream` and `serve -- CMD`, before server-everything; and so does a
/// handshake-era client's GET on which toolgate follows a server of 2026-07-28 only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listen_stream_ends_with_its_result_when_toolgate_shuts_down() {
    let p = tokio::task::spawn_blocking(peers).await.unwrap();
    let http = server_everything_http().await;
    let command = [p.server_everything.display().to_string(), "stdio".into()];
    let config = "[limits]\nshutdown_grace = \"60s\"\n";
    let over_http = Toolgate::serve(&http.url, Some(config)).await;
    let over_stdio = Toolgate::in_front_of(&command, Some(config)).await;
    let filter = json!({"notifications": {"toolsListChanged": true}});
    let listen = modern(1, "subscriptions/listen", filter);
    for mut tg in [over_http, over_stdio] {
        let mut stream =
            post_modern_stream(&tg.url(), "subscriptions/listen", listen.clone()).await;
        let wait = std::time::Duration::from_secs(10);
        let ack = sse_messages(&next_frame(&mut stream, wait).await);
        assert_eq!(ack[0]["method"], "notifications/subscriptions/acknowledged");
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(tg.pid() as i32),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap();
        let mut rest = Vec::new();
        use http_body_util::BodyExt;
        while let Ok(Some(Ok(frame))) = tokio::time::timeout(wait, stream.frame()).await {
            if let Ok(data) = frame.into_data() {
                rest.extend(sse_messages(&String::from_utf8_lossy(&data)));
            }
        }
        // server-everything over stdio announces a change of its tools once it starts.
        let subscription = json!({"io.modelcontextprotocol/subscriptionId": 1});
        let ended = json!({"jsonrpc": "2.0", "id": 1,
            "result": {"_meta": subscription, "resultType": "complete"}});
        assert_eq!(rest.last(), Some(&ended), "{rest:?}");
        let announced = |m: &Value| m["method"] == "notifications/tools/list_changed";
        assert!(rest[..rest.len() - 1].iter().all(announced), "{rest:?}");
        let status = tokio::time::timeout(wait, tg.wait())
            .await
            .expect("toolgate ends well before its grace period");
        assert!(status.success());
    }

    // The other way: a handshake-era client's GET, on which toolgate follows a server of
    // 2026-07-28 only, ends too.
    let modern = python_http("py_server.py", &["announcing-modern"]).await;
    let mut tg = Toolgate::serve(&modern.url, Some(config)).await;
    let session = common::open_session(&tg.url()).await;
    let mut stream = common::get_stream(&tg.url(), &session).await;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(tg.pid() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let wait = std::time::Duration::from_secs(10);
    use http_body_util::BodyExt;
    while let Ok(Some(Ok(_))) = tokio::time::timeout(wait, stream.frame()).await {}
    let status = tokio::time::timeout(wait, tg.wait())
        .await
        .expect("toolgate ends well before its grace period");
    assert!(status.success());
}

/// The shared child of `serve -- CMD` dies under a listening client: its stream ends without a
/// result (lost, not closed), the death is said at WARN, and the client's next listen is served
/// by the child that takes its place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listen_stream_ends_when_its_shared_child_dies_and_the_next_is_served() {
    let tg = in_front_of_server_everything().await;
    let filter = json!({"notifications": {"toolsListChanged": true}});
    let wait = std::time::Duration::from_secs(10);
    let mut stream = post_modern_stream(
        &tg.url(),
        "subscriptions/listen",
        modern(1, "subscriptions/listen", filter.clone()),
    )
    .await;
    let ack = sse_messages(&next_frame(&mut stream, wait).await);
    assert_eq!(ack[0]["method"], "notifications/subscriptions/acknowledged");
    let logs = tg
        .logs_when(|l| l.contains("session=shared-2026-07-28"))
        .await;
    let pid: i32 = (logs.lines())
        .find(|l| l.contains("started the tool server session=shared-2026-07-28"))
        .and_then(|l| l.split("pid=").nth(1))
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("{logs}"));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let mut rest = Vec::new();
    use http_body_util::BodyExt;
    while let Some(Ok(frame)) = tokio::time::timeout(wait, stream.frame())
        .await
        .expect("it ends")
    {
        if let Ok(data) = frame.into_data() {
            rest.extend(sse_messages(&String::from_utf8_lossy(&data)));
        }
    }
    assert!(rest.iter().all(|m| m.get("result").is_none()), "{rest:?}");
    let logs = tg.logs_when(|l| l.contains("starts another")).await;
    assert!(
        logs.lines().any(|l| l.contains("WARN")
            && l.contains("the next request without a session starts another")),
        "{logs}"
    );
    let mut again = post_modern_stream(
        &tg.url(),
        "subscriptions/listen",
        modern(2, "subscriptions/listen", filter),
    )
    .await;
    let ack = sse_messages(&next_frame(&mut again, wait).await);
    assert_eq!(
        ack[0]["params"]["notifications"],
        json!({"toolsListChanged": true})
    );
}

/// A change of tools the server announces on a bridged session's own stream is learned from,
/// whether or not a client listens: the session's listing is dropped, and the next call lists
/// the tools again before it is checked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_change_on_a_bridged_sessions_stream_drops_its_listing() {
    let changed = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
    let server = Scripted::new(vec![open_tool("slow")])
        .handshake_only()
        .script(
            "slow",
            Script::Slow(std::time::Duration::from_millis(300), json!({})),
        )
        // Sent once two calls wait.
        .own_stream(changed, 1);
    let (url, server) = server.spawn().await;
    let tg = Toolgate::serve(&url, None).await;
    let call = |id: i64| {
        let url = tg.url();
        async move {
            let m = modern(id, "tools/call", json!({"name": "slow", "arguments": {}}));
            post_modern(&url, "tools/call", m).await.answer()
        }
    };
    let both = futures_util::future::join(call(1), call(2)).await;
    assert_eq!(both.0["result"]["resultType"], "complete", "{both:?}");
    assert_eq!(both.1["result"]["resultType"], "complete", "{both:?}");
    for _ in 0..500 {
        if server
            .own_stream_taken
            .load(std::sync::atomic::Ordering::Relaxed)
            == 1
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let before = server.listings();
    // The change is read as soon as it is taken; a moment for it to be heard.
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    call(3).await;
    assert_eq!(server.listings(), before + 1, "listed again once");
}

/// A 2026-07-28 client that asks for its calls' progress (the Rust SDK's client gives a
/// token on every request) of a server of the handshake era: the progress comes on the call's
/// way under the client's token, then the result, and a question the server asks first is
/// still a round, which the retry (with a token of its own) answers. In all four modes and
/// the layer, before server-everything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bridged_call_asking_for_progress_gets_its_progress_and_its_rounds() {
    let p = tokio::task::spawn_blocking(peers).await.unwrap();
    let http = server_everything_http().await;
    let command = [p.server_everything.display().to_string(), "stdio".into()];
    // Able to answer an elicitation and nothing else: server-everything asks a client that
    // has roots for them of its own accord after its handshake, which a call waiting then
    // would take as its round.
    let with_token = |id: i64, params: Value, token: Value| {
        let mut msg = modern(id, "tools/call", params);
        msg["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] =
            json!({"elicitation": {}});
        msg["params"]["_meta"]["progressToken"] = token;
        msg
    };
    let long =
        json!({"name": "trigger-long-running-operation", "arguments": {"duration": 1, "steps": 2}});
    let elicit = json!({"name": "trigger-elicitation-request", "arguments": {}});
    let ada = json!({"action": "accept", "content": {"name": "Ada", "check": true, "email": "ada@example.com"}});
    for mode in Mode::EVERY_FRONT {
        let mut front = Front::start(mode, &http.url, &command).await;
        let call = with_token(1, long.clone(), json!("p-long"));
        let got = front.exchange_modern(call).await;
        let progress: Vec<&Value> = (got.iter())
            .filter(|m| m["method"] == "notifications/progress")
            .map(|m| &m["params"])
            .collect();
        assert_eq!(
            progress,
            [
                &json!({"progress": 1, "total": 2, "progressToken": "p-long"}),
                &json!({"progress": 2, "total": 2, "progressToken": "p-long"})
            ],
            "{mode}: {got:?}"
        );
        let done = "Long running operation completed. Duration: 1 seconds, Steps: 2.";
        assert_eq!(
            got.last(),
            Some(
                &json!({"jsonrpc": "2.0", "id": 1, "result": {"resultType": "complete",
                "content": [{"type": "text", "text": done}]}})
            ),
            "{mode}"
        );

        let call = with_token(2, elicit.clone(), json!(7));
        let asked = front.exchange_modern(call).await.pop().unwrap();
        let result = &asked["result"];
        assert_eq!(
            (&asked["id"], &result["resultType"]),
            (&json!(2), &json!("input_required")),
            "{mode}: {asked}"
        );
        let (key, request) = result["inputRequests"]
            .as_object()
            .unwrap()
            .iter()
            .next()
            .unwrap();
        assert_eq!(request["method"], "elicitation/create", "{mode}: {asked}");
        let mut retry = elicit.clone();
        retry["requestState"] = result["requestState"].clone();
        retry["inputResponses"] = json!({key: ada});
        let retry = with_token(3, retry, json!(8));
        let answered = front.exchange_modern(retry).await.pop().unwrap();
        assert_eq!(
            (&answered["id"], &answered["result"]["resultType"]),
            (&json!(3), &json!("complete")),
            "{mode}: {answered}"
        );
        let text = answered["result"]["content"].to_string();
        assert!(text.contains("- Name: Ada"), "{mode}: {answered}");
    }
}

/// A server of the handshake era asks its client something of its own accord (its roots, on
/// the session's own stream, tied to no request) while a 2026-07-28 client's read waits: the
/// read is answered with its contents, not with that question. Through `serve --upstream`
/// and `ValidateLayer`, in front of the Python SDK 1.x.
#[tokio::test]
async fn a_question_tied_to_no_request_does_not_answer_a_waiting_read() {
    let server = common::peers::python_1_http("py_server_1.py").await;
    for mode in [Mode::ServeUpstream, Mode::Layer] {
        let front = Front::start(mode, &server.url, &[]).await;
        let read = capable(1, "resources/read", json!({"uri": "slow://contents"}));
        let got = post_modern(&url_of(&front), "resources/read", read)
            .await
            .answer();
        let contents =
            json!([{"uri": "slow://contents", "mimeType": "text/plain", "text": "slow contents"}]);
        assert_eq!(
            got,
            json!({"jsonrpc": "2.0", "id": 1, "result": {"contents": contents,
                "resultType": "complete", "ttlMs": 0, "cacheScope": "private"}}),
            "{mode}"
        );
    }
}

/// The handshake toolgate opens for a 2026-07-28 client carries what the client says of
/// itself: its capabilities (those a server may ask within a request) and its name.
#[tokio::test]
async fn the_bridged_handshake_carries_the_client() {
    let (url, tap) = Scripted::new(vec![open_tool("add")])
        .handshake_only()
        .spawn()
        .await;
    let tg = Toolgate::serve(&url, None).await;
    let call = capable(1, "tools/call", json!({"name": "add", "arguments": {}}));
    let a = post_modern(&tg.url(), "tools/call", call).await.answer();
    assert_eq!(a["result"]["resultType"], "complete", "{a}");
    let seen = tap.seen.lock().unwrap();
    let init = seen
        .iter()
        .find(|m| m["method"] == "initialize")
        .expect("a handshake");
    assert_eq!(
        init["params"]["capabilities"],
        json!({"elicitation": {}, "sampling": {}, "roots": {}}),
        "{init}"
    );
    assert_eq!(
        init["params"]["clientInfo"],
        json!({"name": "capable-client", "version": "7"}),
        "{init}"
    );
}

/// The Python SDK client (2026-07-28, and `auto`), with its own callbacks, answers
/// server-everything's elicitation, sampling and roots through toolgate (the server speaks only the
/// handshake) as it would answer a server of its own era: the results are the server's.
/// In all four modes (server-everything over HTTP and over stdio) and through `ValidateLayer`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_answers_a_handshake_servers_questions_through_the_bridge() {
    let server = server_everything_http().await;
    let p = tokio::task::spawn_blocking(peers).await.unwrap();
    let command = vec![p.server_everything.display().to_string(), "stdio".into()];
    let calls = [
        ("trigger-elicitation-request", json!({})),
        ("trigger-sampling-request", json!({"prompt": "Say hi"})),
        ("get-roots-list", json!({})),
    ];
    for front in Mode::EVERY_FRONT {
        let running = match front {
            Mode::StdioUpstream | Mode::StdioCommand => None,
            _ => Some(Front::start(front, &server.url, &command).await),
        };
        let front_url = match &running {
            Some(running) => url_of(running),
            None => over_stdio(front, &server.url, &command),
        };
        // `auto` chooses the 2026-07-28 era, since toolgate answers `server/discover`: it
        // keeps its server's questions all the same.
        for mode in ["2026-07-28", "auto"] {
            let out = python_client_answering(&front_url, mode, &calls).await;
            assert_eq!(out["protocol"], "2026-07-28", "{front} {mode}: {out}");
            let said = out["calls"].to_string();
            assert!(said.contains("- Name: Ada"), "{front} {mode}: {out}");
            assert!(said.contains("hi from the model"), "{front} {mode}: {out}");
            assert!(
                said.contains("URI: file:///work/ada"),
                "{front} {mode}: {out}"
            );
        }
    }
}

/// How an SDK client launches `toolgate stdio` in `mode` in front of the HTTP server at `url`
/// or the stdio server `command` (`stdio:` and the command as a JSON array).
fn over_stdio(mode: Mode, url: &str, command: &[String]) -> String {
    let mut args = vec![env!("CARGO_BIN_EXE_toolgate").to_string(), "stdio".into()];
    match mode {
        Mode::StdioUpstream => args.extend(["--upstream".to_string(), url.to_string()]),
        _ => args.extend(std::iter::once("--".to_string()).chain(command.iter().cloned())),
    }
    format!("stdio:{}", json!(args))
}

/// A server that speaks only 2026-07-28 (the Python SDK 2.3 fixture, refusing `initialize`
/// as such a server does) over HTTP, and the same server over stdio.
async fn modern_only_python() -> (common::peers::HttpPeer, String, Vec<String>) {
    let p = tokio::task::spawn_blocking(peers).await.unwrap();
    let http = python_http("conformance_server.py", &["modern-http"]).await;
    let url = http.url.clone();
    let python = p.python.display().to_string();
    let fixture = p.fixtures.join("conformance_server.py");
    let modern_only = p.fixtures.join("modern_only.py").display().to_string();
    let stdio = vec![
        python.clone(),
        modern_only,
        python,
        fixture.display().to_string(),
        "stdio".into(),
    ];
    (http, url, stdio)
}

/// The other way: what a server of 2026-07-28 only announces (the Python SDK's `MCPServer`,
/// `py_server.py announcing-modern` over HTTP, `announcing-stdio` behind
/// `fixtures/modern_only.py`) reaches the TypeScript SDK's handshake-era client as its own
/// server's notifications: offered list changes and subscriptions, it subscribes to two
/// resources, and once a tool makes the server announce, the change of tools and each update
/// come, without the stream's id, in all four modes and `ValidateLayer` (toolgate follows the
/// server with a `subscriptions/listen` stream of its own).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2026_servers_announcements_reach_a_handshake_client() {
    let p = tokio::task::spawn_blocking(peers).await.unwrap();
    let http = python_http("py_server.py", &["announcing-modern"]).await;
    let python = p.python.display().to_string();
    let command = [
        python.clone(),
        p.fixtures.join("modern_only.py").display().to_string(),
        python,
        p.fixtures.join("py_server.py").display().to_string(),
        "announcing-stdio".into(),
    ];
    let uris = common::peers::ANNOUNCED;
    let reached = common::modes::Reached::start(&http.url, &command).await;
    let runs = (reached.fronts.iter())
        .map(|(_, front)| common::peers::typescript_subscriber(front, "announce", &uris));
    let outs = futures_util::future::join_all(runs).await;
    let offered = json!({"tools": {"listChanged": true},
        "resources": {"subscribe": true, "listChanged": true}});
    let announced = [
        json!(["notifications/tools/list_changed", null]),
        json!(["notifications/resources/updated", uris[0]]),
        json!(["notifications/resources/updated", uris[1]]),
    ];
    for ((mode, _), out) in reached.fronts.iter().zip(outs) {
        assert_eq!(out["tools"], offered["tools"], "{mode}");
        assert_eq!(out["resources"], offered["resources"], "{mode}");
        // The server announces to every stream it serves: the clients of the other fronts,
        // listening at the same time, may hear one another's.
        let events = out["events"].as_array().unwrap();
        assert!(
            announced.iter().all(|a| events.contains(a)),
            "{mode}: {events:?}"
        );
        assert!(
            events.iter().all(|e| announced.contains(e)),
            "{mode}: {events:?}"
        );
    }
}

/// The other way: a server that speaks only 2026-07-28 asks for input before it answers a
/// call (an elicitation and a sampling request, in one `InputRequiredResult`). The official
/// Python SDK client of the handshake era, with its own callbacks, is asked each as the
/// server request it stands for, and the server's result, once it has the answers, answers
/// its call: as it would be served by a server of its own era. In all four modes and through
/// `ValidateLayer`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2026_servers_questions_reach_a_handshake_client_as_its_own_requests() {
    let (_server, url, command) = modern_only_python().await;
    let calls = [("ask_first", json!({}))];
    for mode in Mode::EVERY_FRONT {
        let running = match mode {
            Mode::StdioUpstream | Mode::StdioCommand => None,
            _ => Some(Front::start(mode, &url, &command).await),
        };
        let front_url = match &running {
            Some(running) => url_of(running),
            None => over_stdio(mode, &url, &command),
        };
        let out = python_client_answering(&front_url, "legacy", &calls).await;
        assert_eq!(out["protocol"], "2025-11-25", "{mode}: {out}");
        assert!(
            out["tools"]
                .as_array()
                .unwrap()
                .contains(&json!("ask_first")),
            "{mode}: {out}"
        );
        let call = &out["calls"][0];
        assert_eq!(call["isError"], false, "{mode}: {out}");
        assert_eq!(
            call["content"],
            json!([{"type": "text", "text": "Ada heard: hi from the model"}]),
            "{mode}: {out}"
        );
    }
}

/// The same on the wire, over `stdio -- CMD` and `stdio --upstream`: the questions come with
/// toolgate's own ids, in the order of their keys, as the server wrote them; a question the
/// client refuses answers the call with why, as the tool's error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_question_answers_the_call_with_why() {
    let (_server, url, command) = modern_only_python().await;
    for tail in [
        std::iter::once("--".to_string())
            .chain(command)
            .collect::<Vec<_>>(),
        vec!["--upstream".into(), url],
    ] {
        let mut g = StdioGate::start_args([vec!["stdio".to_string()], tail].concat());
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}, "sampling": {}},
            "clientInfo": {"name": "t", "version": "1"}}});
        assert_eq!(g.ask(init).await["result"]["protocolVersion"], "2025-11-25");
        g.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .await;
        g.send(r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"ask_first","arguments":{}}}"#)
            .await;
        let sampling = g.recv().await;
        assert_eq!(
            sampling,
            json!({"jsonrpc": "2.0", "id": "toolgate-ask-0", "method": "sampling/createMessage",
                "params": {"maxTokens": 16, "messages": [{"role": "user", "content": {"type": "text", "text": "Say hi"}}]}})
        );
        let elicitation = g.recv().await;
        assert_eq!(elicitation["id"], "toolgate-ask-1", "{elicitation}");
        assert_eq!(elicitation["method"], "elicitation/create", "{elicitation}");
        assert_eq!(elicitation["params"]["message"], "Who is asking?");
        let answer = json!({"jsonrpc": "2.0", "id": "toolgate-ask-0", "result": {
            "role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"}});
        g.send(&answer.to_string()).await;
        let refusal = json!({"jsonrpc": "2.0", "id": "toolgate-ask-1",
            "error": {"code": -1, "message": "User rejected the request"}});
        g.send(&refusal.to_string()).await;
        // A call's failure is the tool's error, which the model reads (docs/contract.md §3).
        let why =
            "Input required: the client refused the server's question: User rejected the request";
        assert_eq!(
            g.recv().await,
            json!({"jsonrpc": "2.0", "id": 5, "result": {"isError": true,
                "content": [{"type": "text", "text": why}],
                "_meta": {"toolgate/upstream_error": {"code": -32603, "message": why}}}})
        );
    }
}

/// A handshake-era server that asks question after question on a bridged session's own stream
/// while two calls wait (so neither can be asked) and takes none of its refusals cannot make
/// toolgate queue them: its stream is read no further while 16 wait, and the server is held
/// back by its connection. Each of 1,000 questions carries 64 KiB, so what the connections
/// hold is a few hundred at most.
#[tokio::test]
async fn refusals_waiting_for_a_server_hold_back_its_questions() {
    let count = 1000;
    let question = json!({"jsonrpc": "2.0", "id": "q", "method": "roots/list",
        "params": {"_meta": {"pad": "x".repeat(64 << 10)}}});
    let (url, up) = Scripted::new(vec![open_tool("wait")])
        .handshake_only()
        .script("wait", common::scripted::Script::Hang)
        .script("$response", common::scripted::Script::Hang)
        .own_stream(question, count)
        .spawn()
        .await;
    let tg = Toolgate::serve(&url, None).await;
    let calls: Vec<_> = (1..=2)
        .map(|id| {
            let (url, call) = (tg.url(), capable(id, "tools/call", json!({"name": "wait"})));
            tokio::spawn(async move { post_modern(&url, "tools/call", call).await })
        })
        .collect();
    let taken = || {
        up.own_stream_taken
            .load(std::sync::atomic::Ordering::Relaxed)
    };
    let mut last = usize::MAX;
    while taken() != last {
        last = taken();
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
    assert!(
        taken() < count / 2,
        "{} of {count} questions taken",
        taken()
    );
    let why = "the client cannot be asked: several of its calls are waiting and nothing says which one this question is for";
    let refusal = json!({"jsonrpc": "2.0", "id": "q", "error": {"code": -32603, "message": why}});
    let first = up
        .seen
        .lock()
        .unwrap()
        .iter()
        .find(|m| m["id"] == "q")
        .cloned();
    assert_eq!(first, Some(refusal), "the first question was refused");
    calls.iter().for_each(tokio::task::JoinHandle::abort);
}

/// A 2026-07-28 client whose capabilities hold a number no `f64` holds (`1e400` in its
/// `experimental`) is bridged with them as written: the server of the handshake era is told
/// the client can answer an elicitation, and lists the tool that asks one. In all four modes
/// and the layer, before server-everything.
#[tokio::test]
async fn capabilities_holding_a_number_past_f64_are_bridged_in_every_mode() {
    let p = tokio::task::spawn_blocking(peers).await.unwrap();
    let http = server_everything_http().await;
    let command = [p.server_everything.display().to_string(), "stdio".into()];
    let mut list = modern(1, "tools/list", json!({}));
    list["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] =
        json!({"elicitation": {}, "experimental": {"x": {"n": "PAST_F64"}}});
    let line = list.to_string().replace(r#""PAST_F64""#, "1e400");
    for mode in Mode::EVERY_FRONT {
        let mut front = Front::start(mode, &http.url, &command).await;
        let got = front.exchange_modern_written(&list, line.clone()).await;
        let listed = got.last().expect("an answer");
        let names: Vec<&str> = (listed["result"]["tools"].as_array())
            .unwrap_or_else(|| panic!("{mode}: {listed}"))
            .iter()
            .filter_map(|t| t["name"].as_str())
            .collect();
        assert!(
            names.contains(&"trigger-elicitation-request"),
            "{mode}: {names:?}"
        );
    }
}
