//! The 2026-07-28 stateless era: header rules, modern answer shapes, `ttlMs` and
//! `cacheScope`, a legacy and a modern upstream behind one toolgate, the Python SDK client in
//! modern mode, and a server's own `subscriptions/listen` streams.

use crate::common;
use common::peers::{peers, python_client};
use common::scripted::{Script, Scripted};
use common::*;
use http::Method;
use serde_json::{Value, json};
use std::time::Duration;

const V: &str = "2026-07-28";

fn add_tool() -> Value {
    json!({"name": "add", "inputSchema": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}})
}

fn modern_call(id: i64, tool: &str, args: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": args,
        "_meta": {"io.modelcontextprotocol/protocolVersion": V, "io.modelcontextprotocol/clientCapabilities": {}}}})
    .to_string()
}

async fn modern_post(url: &str, body: String, name: &str, extra: &[(&str, &str)]) -> Reply {
    let mut headers = vec![
        ("content-type", "application/json"),
        ("accept", ACCEPT),
        ("mcp-protocol-version", V),
        ("mcp-method", "tools/call"),
        ("mcp-name", name),
    ];
    headers.extend_from_slice(extra);
    request(Method::POST, url, &headers, body).await
}

#[tokio::test]
async fn headers_must_match_the_body() {
    let (url, state) = Scripted::new(vec![add_tool()])
        .script(
            "add",
            Script::Result(json!({"content": [], "resultType": "complete"})),
        )
        .spawn()
        .await;
    let tg = Toolgate::serve(&url, None).await;
    let r = modern_post(
        &tg.url(),
        modern_call(1, "add", json!({"a": 1, "b": 2})),
        "sub",
        &[],
    )
    .await;
    assert_eq!(r.status, 400);
    assert_eq!(
        r.json(),
        json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32020, "message": "Header mismatch: Mcp-Name header \"sub\" does not match \"add\""}})
    );
    let r = request(
        Method::POST,
        &tg.url(),
        &[
            ("content-type", "application/json"),
            ("accept", ACCEPT),
            ("mcp-protocol-version", V),
            ("mcp-name", "add"),
        ],
        modern_call(2, "add", json!({"a": 1, "b": 2})),
    )
    .await;
    assert_eq!(r.status, 400);
    assert_eq!(
        r.json()["error"]["message"],
        "Header mismatch: the Mcp-Method header is missing"
    );
    // The name checked is the one every hop reads: one value, not the first of two.
    let r = modern_post(
        &tg.url(),
        modern_call(3, "add", json!({"a": 1, "b": 2})),
        "add",
        &[("mcp-name", "sub")],
    )
    .await;
    assert_eq!(
        (r.status, r.json()),
        (
            400,
            json!({"jsonrpc": "2.0", "id": 3, "error": {"code": -32020, "message": "Header mismatch: the Mcp-Name header appears more than once"}})
        )
    );
    assert_eq!(
        state.seen.lock().unwrap().len(),
        0,
        "nothing reached the server"
    );
    // Matching headers pass, and unknown Mcp-Param-* headers are forwarded untouched.
    let r = modern_post(
        &tg.url(),
        modern_call(3, "add", json!({"a": 1, "b": 2})),
        "add",
        &[("mcp-param-region", "eu-west")],
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let headers = state.seen_headers.lock().unwrap();
    assert_eq!(headers.last().unwrap()["mcp-param-region"], "eu-west");
}

/// A server's SSE answer whose data comes in several `data:` lines, completed for a
/// 2026-07-28 client (`resultType`): the event toolgate writes in its place is one the client
/// reads, its data on one line.
#[tokio::test]
async fn an_answer_completed_in_an_event_of_several_data_lines_reads_whole() {
    let body = "data: {\"jsonrpc\": \"2.0\", \"id\": 1,\ndata:  \"result\": {\"content\": []}}\n\n";
    let (url, _) = Scripted::new(vec![add_tool()])
        .script(
            "add",
            Script::Raw {
                status: 200,
                content_type: "text/event-stream",
                body: body.as_bytes(),
            },
        )
        .spawn()
        .await;
    let tg = Toolgate::serve(&url, None).await;
    let call = modern_call(1, "add", json!({"a": 1, "b": 2}));
    let r = modern_post(&tg.url(), call, "add", &[]).await;
    assert_eq!(
        r.messages(),
        [json!({"jsonrpc": "2.0", "id": 1, "result": {"resultType": "complete", "content": []}})],
        "{}",
        r.text()
    );
}

#[tokio::test]
async fn toolgate_answers_in_the_modern_shapes() {
    let (url, _) = Scripted::new(vec![add_tool()]).spawn().await;
    let tg = Toolgate::serve(&url, None).await;
    let r = modern_post(
        &tg.url(),
        modern_call(1, "add", json!({"a": "x", "b": 2})),
        "add",
        &[],
    )
    .await;
    assert_eq!(r.status, 200);
    let a = r.json();
    assert_eq!(a["result"]["resultType"], "complete");
    assert_eq!(a["result"]["isError"], true);
    let r = modern_post(&tg.url(), modern_call(2, "nope", json!({})), "nope", &[]).await;
    assert_eq!(r.status, 400, "the modern era maps -32602 to HTTP 400");
    assert_eq!(r.json()["error"]["code"], -32602);
}

#[tokio::test]
async fn listings_expire_after_ttl() {
    let (url, state) = Scripted::new(vec![add_tool()])
        .list_extra(json!({"ttlMs": 1000, "cacheScope": "private"}))
        .spawn()
        .await;
    let tg = Toolgate::serve(&url, None).await;
    let auth = [("authorization", "Bearer a")];
    for id in 1..=2 {
        let a = modern_post(
            &tg.url(),
            modern_call(id, "add", json!({"a": "x", "b": 1})),
            "add",
            &auth,
        )
        .await
        .json();
        assert_eq!(a["result"]["isError"], true);
    }
    assert_eq!(state.listings(), 1, "one listing while it is fresh");
    tokio::time::sleep(Duration::from_millis(1300)).await;
    modern_post(
        &tg.url(),
        modern_call(3, "add", json!({"a": "x", "b": 1})),
        "add",
        &auth,
    )
    .await;
    assert_eq!(state.listings(), 2, "listed again after ttlMs");
    // toolgate's own listing carries the client's _meta and credentials, and a modern method
    // header.
    let seen = state
        .seen
        .lock()
        .unwrap()
        .iter()
        .filter(|m| m["method"] == "tools/list")
        .cloned()
        .collect::<Vec<_>>();
    assert_eq!(
        seen[0]["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
        V
    );
    let headers = state.seen_headers.lock().unwrap();
    let listing = headers
        .iter()
        .find(|h| h.get("mcp-method").is_some_and(|m| m == "tools/list"))
        .expect("a modern listing");
    assert_eq!(listing["authorization"], "Bearer a");
}

#[tokio::test]
async fn private_listings_are_not_shared_across_credentials_but_public_ones_are() {
    for (scope, expected) in [("private", 2), ("public", 1)] {
        let (url, state) = Scripted::new(vec![add_tool()])
            .list_extra(json!({"ttlMs": 60000, "cacheScope": scope}))
            .spawn()
            .await;
        let tg = Toolgate::serve(&url, None).await;
        for (id, who) in [(1, "Bearer alice"), (2, "Bearer bob")] {
            let a = modern_post(
                &tg.url(),
                modern_call(id, "add", json!({"a": "x", "b": 1})),
                "add",
                &[("authorization", who)],
            )
            .await
            .json();
            assert_eq!(a["result"]["isError"], true);
        }
        assert_eq!(state.listings(), expected, "cacheScope {scope}");
    }
}

#[tokio::test]
async fn a_legacy_and_a_modern_upstream_behind_one_toolgate() {
    let (legacy_addr, legacy) =
        toolgate::demo::spawn(([127, 0, 0, 1], 0).into(), Default::default())
            .await
            .unwrap();
    let (modern_url, modern) = Scripted::new(vec![add_tool()])
        .list_extra(json!({"ttlMs": 60000, "cacheScope": "public"}))
        .spawn()
        .await;
    let cfg = format!(
        "[[upstreams]]\nname = \"legacy\"\nurl = \"http://{legacy_addr}/mcp\"\n\n[[upstreams]]\nname = \"modern\"\nurl = \"{modern_url}\"\n"
    );
    let tg = Toolgate::start(&mut vec!["serve".to_string()], Some(&cfg)).await;
    let base = format!("http://{}", tg.addr);
    let (l, m) = (format!("{base}/legacy/mcp"), format!("{base}/modern/mcp"));
    let s = open_session(&l).await;
    let (a, b) = tokio::join!(
        post(&l, Some(&s), call(1, "add", json!({"a": "x", "b": 2}))),
        modern_post(
            &m,
            modern_call(1, "add", json!({"a": "y", "b": 2})),
            "add",
            &[]
        )
    );
    assert_eq!(
        a.json()["result"]["_meta"]["toolgate/validation"]["parameter_errors"],
        json!({"/a": "expected an integer, got string \"x\""})
    );
    assert!(
        a.json()["result"].get("resultType").is_none(),
        "legacy results carry no resultType"
    );
    assert_eq!(b.json()["result"]["resultType"], "complete");
    assert!(
        legacy.calls().is_empty()
            && modern
                .seen
                .lock()
                .unwrap()
                .iter()
                .all(|x| x["method"] != "tools/call")
    );
    let r = tg.admin_get("/readyz").await.json();
    assert_eq!(
        r,
        json!({"ready": true, "upstreams": {"legacy": {"ready": true}, "modern": {"ready": true}}})
    );
}

#[tokio::test]
async fn python_sdk_client_in_modern_mode() {
    let p = tokio::task::spawn_blocking(peers).await.unwrap();
    let mut server = tokio::process::Command::new(&p.python)
        .arg(p.fixtures.join("py_server.py"))
        .arg("mcpserver")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    use tokio::io::AsyncBufReadExt;
    let port = tokio::io::BufReader::new(server.stdout.take().unwrap())
        .lines()
        .next_line()
        .await
        .unwrap()
        .unwrap();
    let tg = Toolgate::serve(&format!("http://127.0.0.1:{}/mcp", port.trim()), None).await;
    let r = python_client(
        &tg.url(),
        V,
        &[
            ("add", json!({"a": 1, "b": 2})),
            ("book", json!({"date": "tomorrow"})),
        ],
    )
    .await;
    assert_eq!(
        r["calls"][0]["content"],
        json!([{"type": "text", "text": "3"}])
    );
    assert_eq!(r["calls"][0]["resultType"], "complete");
    assert_eq!(r["calls"][1]["isError"], true);
    assert_eq!(
        r["calls"][1]["resultType"], "complete",
        "toolgate's own answer in the modern shape"
    );
    assert_eq!(
        r["calls"][1]["_meta"]["toolgate/validation"]["parameter_errors"],
        json!({"/date": "must match the pattern ^\\d{4}-\\d{2}-\\d{2}$, got \"tomorrow\""})
    );
}

/// A 2026-07-28 server's own `subscriptions/listen` streams pass through every mode and the
/// layer as they came, to the Python SDK's client: acknowledged by the server, then what its
/// tool announces. (The Python SDK's `MCPServer`, `fixtures/py_server.py announcing`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2026_servers_own_listen_streams_pass_through_every_mode() {
    let p = tokio::task::spawn_blocking(peers).await.unwrap();
    let http = common::peers::python_http("py_server.py", &["announcing"]).await;
    let command = [
        p.python.display().to_string(),
        p.fixtures.join("py_server.py").display().to_string(),
        "announcing-stdio".into(),
    ];
    let uris = common::peers::ANNOUNCED;
    let reached = common::modes::Reached::start(&http.url, &command).await;
    // One front at a time: three of them reach the same server, whose announcements go to
    // every stream, and another client's update could end a stream's wait before its own
    // announcement came.
    let mut outs = Vec::new();
    for (_, front) in &reached.fronts {
        outs.push(common::peers::python_listener(front, "2026-07-28", "announce", &uris).await);
    }
    let expected = json!({
        "protocol": "2026-07-28",
        "honored": {"toolsListChanged": true, "promptsListChanged": true,
                    "resourcesListChanged": true, "resourceSubscriptions": uris},
        "events": ["ToolsListChanged", format!("ResourceUpdated{}", uris[0]),
                   format!("ResourceUpdated{}", uris[1])],
    });
    for ((mode, _), out) in reached.fronts.iter().zip(outs) {
        assert_eq!(out, expected, "{mode}");
    }
}
